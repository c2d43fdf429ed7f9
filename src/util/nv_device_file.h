/* A GPU's device file, /dev/nvidiaN, found by its PCI address: N is the
 * "Device Minor:" line of /proc/driver/nvidia/gpus/<addr>/information,
 * which the driver writes for every GPU it attached. The shim opens it for
 * the escapes the kernel takes only on a GPU's own file (NV_ACTUAL_DEVICE_ONLY,
 * kernel-open/nvidia/nv.c:2311-2318, 580.142), such as the dma-buf export. */
#ifndef GDUNLOCK_UTIL_NV_DEVICE_FILE_H
#define GDUNLOCK_UTIL_NV_DEVICE_FILE_H

/* N from the text of an information file; -1 when no "Device Minor:" line
 * holds a number from 0 to 254 (255 is nvidiactl's). */
int gdu_nv_device_minor_parse(const char *text);

/* Opens the device file of the GPU at addr ("0000:41:00.0") read-write and
 * close-on-exec under root ("" or NULL: /). Returns the fd, or -errno:
 * -ENOENT when the driver lists no such GPU, -EINVAL when its information
 * names no minor, else open's. */
int gdu_nv_device_file_open(const char *root, const char *addr);

#endif
