/* Placeholder so the library target exists; removed when the layer lands. */
int gdu_safetensors_placeholder;
