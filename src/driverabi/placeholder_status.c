/* Placeholder so the library target exists before the ABI lands; removed by it. */
int gdu_driverabi_placeholder;
