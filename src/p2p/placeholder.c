/* Placeholder so the library target exists; removed when the layer lands. */
int gdu_p2p_placeholder;
