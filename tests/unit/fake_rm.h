/* An in-process fake of the RM and UVM ioctls the shim uses, enforcing the
 * rules measured on the real driver (tests/fixtures/rm-traces,
 * shared/reference/driver-findings.md) and read in its source:
 *  - one NV503C per subdevice: a second -> NV_ERR_STATE_IN_USE (0x63);
 *  - REGISTER_VIDMEM of an hMemory already registered, or of a range that
 *    overlaps a registered one -> NV_ERR_INSERT_DUPLICATE_NAME (0x19);
 *  - unknown memory handle (or one of another device) -> NV_ERR_OBJECT_NOT_FOUND (0x57);
 *  - address, size or offset not 64 KiB aligned, or size 0 -> NV_ERR_INVALID_ARGUMENT (0x1f);
 *  - UNREGISTER_VIDMEM of what is not registered -> 0x57;
 *  - freeing an unknown handle answers NV_OK (libcuda does it);
 *  - freeing an object frees everything below it; freeing memory drops its
 *    registrations;
 *  - freeing a VA space invalidates the NV503C objects outside the freed
 *    subtree that it is or ever was registered with (UNREGISTER_VA_SPACE
 *    leaves RM's dependency in place: third_party_p2p.c:394 vs 403-421;
 *    dependants are queued by rs_server.c:974-982 and freed with
 *    bInvalidateOnly, 1336-1372, 580.142): RM destroys the object (its VA
 *    spaces and registrations go) but keeps its handle (rs_client.c:811-871),
 *    so a control on it answers NV_ERR_RESOURCE_LOST (0x6e,
 *    rs_server.c:1556-1560), a second NV503C under its subdevice 0x63 until
 *    the dead handle is freed, which answers NV_OK (measured on the H200:
 *    tests/fixtures/rm-lifetime-h200-2026-12-02.txt);
 *  - once the GPU's device file is named (fake_rm_set_gpu_file), NV01_DEVICE_0
 *    only for a process that holds that file open, else
 *    NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b; device.c:140-147);
 *  - NV_ESC_EXPORT_TO_DMABUF_FD as the kernel takes it (fake_rm_dmabuf).
 * Thread-safe. */
#ifndef GDUNLOCK_TESTS_FAKE_RM_H
#define GDUNLOCK_TESTS_FAKE_RM_H

#include "pinmodel/pin_model.h"
#include "shim/shim_core.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct fake_rm fake_rm;

fake_rm *fake_rm_new(void);
void fake_rm_free(fake_rm *f);

/* Declares what fd stands for (default: GDU_FD_OTHER). */
void fake_rm_set_fd(fake_rm *f, int fd, gdu_fd_kind kind);
/* The handle the next client allocation gets (then generated ones again). */
void fake_rm_next_client(fake_rm *f, uint32_t handle);
/* Names the GPU's device file (/dev/nvidiaN; NULL: no rule, the default). */
void fake_rm_set_gpu_file(fake_rm *f, const char *path);

/* A dma-buf the export escape made, as the kernel holds it
 * (nv_dma_buf_file_private_t): NV_ESC_EXPORT_TO_DMABUF_FD only on a GPU's
 * own file and at the block's exact size, else the ioctl fails with EINVAL
 * (nv.c:2744-2750, 580.142); the counts and mapping type checked
 * (nv-dmabuf.c:1737-1750); creation refused NV_ERR_NOT_SUPPORTED where the
 * kernel's dma-buf support is off (1483-1486) and for a forced PCIe mapping
 * off coherent systems (osapi.c:1379-1390); each handle a video memory
 * object of the client under the file's GPU, its offset and size whole 4 KiB
 * pages inside the object (osapi.c:1286-1360: NV_ERR_OBJECT_NOT_FOUND,
 * NV_ERR_INVALID_OBJECT, NV_ERR_INVALID_OBJECT_PARENT,
 * NV_ERR_INVALID_ARGUMENT); a slot filled twice NV_ERR_IN_USE, more bytes
 * than totalSize or a complete dma-buf of another total
 * NV_ERR_INVALID_ARGUMENT (nv-dmabuf.c:405-475); a later call adds to the
 * dma-buf named by its fd (1633-1680). A failed call leaves none of its
 * handles. */
#define FAKE_DMABUF_MAX_OBJECTS 512
typedef struct {
    bool used;
    int fd;
    uint32_t client, instance, total_objects, attached;
    uint64_t total_size, attached_size;
    uint32_t memory[FAKE_DMABUF_MAX_OBJECTS];
    uint64_t offset[FAKE_DMABUF_MAX_OBJECTS], size[FAKE_DMABUF_MAX_OBJECTS];
} fake_dmabuf;

/* The dma-buf behind fd (a copy); false when fd is none the fake made. */
bool fake_rm_dmabuf(fake_rm *f, int fd, fake_dmabuf *out);
/* Export escapes that reached the fake, and live dma-bufs. */
unsigned fake_rm_dmabuf_escapes(fake_rm *f);
unsigned fake_rm_dmabufs(fake_rm *f);
/* The device instance of the GPU whose file the shim's next open_gpu_file
 * opens (default 0). */
void fake_rm_set_gpu_file_instance(fake_rm *f, uint32_t instance);
/* The kernel's dma-buf support (default on; off: CONFIG_DMA_SHARED_BUFFER
 * missing or APM on). */
void fake_rm_set_dmabuf_supported(fake_rm *f, bool on);
/* The block layout the fake's kernel takes: before 570.86.15 (no mappingType). */
void fake_rm_set_dmabuf_layout_515(fake_rm *f, bool on);

/* gdu_shim_ops for a shim in front of this fake (ctx = the fake). */
gdu_shim_ops fake_rm_ops(fake_rm *f);

int fake_rm_ioctl(fake_rm *f, int fd, unsigned long request, void *arg);

/* Objects of class cls whose handle RM holds (any client; invalidated ones too). */
unsigned fake_rm_count_class(fake_rm *f, uint32_t cls);
/* Live vidmem registrations (all NV503C objects). */
unsigned fake_rm_registrations(fake_rm *f);
/* Whether hMemory of client is registered with some NV503C. */
bool fake_rm_is_registered(fake_rm *f, uint32_t client, uint32_t memory);
/* Whether VA space v of client is registered with the NV503C tpp. */
bool fake_rm_vaspace_registered(fake_rm *f, uint32_t client, uint32_t tpp, uint32_t vaspace);
/* RM_FREEs and NV503C controls addressed to handle of client that reached the fake. */
unsigned fake_rm_calls_on(fake_rm *f, uint32_t client, uint32_t handle);
/* The working NV503C under subdevice sub of client (0: none, or only an
 * invalidated one). */
uint32_t fake_rm_tpp_of(fake_rm *f, uint32_t client, uint32_t sub);
/* Whether handle of client is an invalidated object (its handle still held). */
bool fake_rm_invalidated(fake_rm *f, uint32_t client, uint32_t handle);

/* One live vidmem registration. */
typedef struct {
    uint32_t client, tpp, memory;
    uint64_t address, size, offset;
} fake_rm_reg;

/* Copies up to max live registrations into out; returns how many there are. */
size_t fake_rm_regs(fake_rm *f, fake_rm_reg *out, size_t max);
/* The VA spaces registered with the NV503C under subdevice sub of client
 * (up to max into out); returns their number (0 when it has no working NV503C). */
unsigned fake_rm_vaspaces_under(fake_rm *f, uint32_t client, uint32_t sub, uint32_t *out,
                                unsigned max);

/* The pid of the process whose RM this fake is (its clients' owner). */
#define FAKE_RM_PID 4242

/* What the kernel's lookup (src/pinmodel) finds for [va, va + size) in the
 * state this fake holds: the oracle of the shim's tests, independent of the
 * shim's own bookkeeping. Every NV503C counts as the process's; an
 * invalidated one is none. */
void fake_rm_pin_lookup(fake_rm *f, uint64_t va, uint64_t size, gdu_pin_verdict *v);

/* The BAR1 size fake_rm_ops reports for every GPU (default 0: unknown). */
void fake_rm_set_bar1(fake_rm *f, uint64_t bytes);
/* RM's BAR1 figures fake_rm_ops answers for every GPU (default: none,
 * answered with -ENODATA), and how often the shim asked. */
void fake_rm_set_rm_bar1(fake_rm *f, uint64_t total, uint64_t available);
/* The PCI bus NV0000_CTRL_CMD_GPU_GET_PCI_INFO answers for every GPU
 * (default 0: an all-zero address, which the shim takes as unknown and then
 * asks no BAR1 figures). */
void fake_rm_set_pci_bus(fake_rm *f, uint16_t bus);
unsigned fake_rm_rm_bar1_asked(fake_rm *f);

/* The shim's report, parsed (with every registration when with_registrations). */
json_t *fake_rm_shim_report(gdu_shim *s, bool with_registrations);

/* Log lines the shim wrote through fake_rm_ops (all levels), joined by '\n'. */
const char *fake_rm_log(fake_rm *f);
unsigned fake_rm_log_lines(fake_rm *f, int level);

#endif
