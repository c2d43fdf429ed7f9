/* A GPU's video memory mapped for the CPU through its BAR1, with our own RM
 * client, as libcuda maps video memory for the CPU: NV01_DEVICE_0 and
 * NV20_SUBDEVICE_0 of the GPU, an NV01_MEMORY_LOCAL_USER allocation
 * (physically contiguous), NV_ESC_RM_MAP_MEMORY with a /dev/nvidiaN file,
 * then mmap() of that file. And RM's own answer to registering such a
 * mapping as I/O memory, which is what cuMemHostRegister(IOMEMORY) asks it.
 * Used by the BAR1 window feasibility study (tests/gpu/p2p_window.c); only
 * memory allocated here is touched. Errors come back as -errno with why,
 * and RM's status where RM answered. */
#ifndef GDUNLOCK_TESTS_GPU_RM_BAR1_H
#define GDUNLOCK_TESTS_GPU_RM_BAR1_H

#include "rm/rm_device.h"

#include <stddef.h>
#include <stdint.h>

/* A GPU as the driver's device files know it (NV_ESC_CARD_INFO). */
typedef struct gdu_rm_card {
    uint32_t gpu_id;
    uint32_t domain;
    uint8_t bus, slot;
    uint32_t minor; /* /dev/nvidia<minor> */
    uint64_t bar0_addr, bar0_size;
    uint64_t bar1_addr, bar1_size;
} gdu_rm_card;

/* Every GPU of the driver into out[0..cap) (cap >= 32 to be sure of room);
 * *count how many. Returns 0 or -errno with why. */
int gdu_rm_cards(gdu_rm_client *c, gdu_rm_card *out, size_t cap, size_t *count, char *why,
                 size_t why_len);

/* The card at a PCI address, or NULL. */
const gdu_rm_card *gdu_rm_card_find(const gdu_rm_card *cards, size_t count, uint32_t domain,
                                    uint32_t bus, uint32_t slot);

/* Video memory of our own and its CPU mapping through BAR1. */
typedef struct gdu_rm_vidmem {
    uint32_t hmemory;
    uint64_t size;
    uint64_t fb_offset; /* where RM placed it in video memory */
    int map_fd;         /* the /dev/nvidiaN file it is mmap()ed from; -1 when unmapped */
    void *cpu;          /* the CPU mapping; NULL when unmapped */
    uint64_t bus_addr;  /* the mapping's bus address (RM_MAP_MEMORY's pLinearAddress) */
} gdu_rm_vidmem;

/* size bytes (a multiple of 64 KiB) of physically contiguous video memory. */
int gdu_rm_vidmem_alloc(gdu_rm_client *c, const gdu_rm_device *d, uint64_t size, gdu_rm_vidmem *m,
                        uint32_t *status, char *why, size_t why_len);

/* Maps m for the CPU: RM_MAP_MEMORY on a fresh open of dev_path (the GPU's
 * /dev/nvidiaN), then mmap() of it (read/write, shared). */
int gdu_rm_vidmem_map(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m,
                      const char *dev_path, uint32_t *status, char *why, size_t why_len);

/* Undoes gdu_rm_vidmem_map (munmap, RM_UNMAP_MEMORY, close); safe when unmapped. */
void gdu_rm_vidmem_unmap(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m);

/* Unmaps and frees m. */
void gdu_rm_vidmem_free(gdu_rm_client *c, const gdu_rm_device *d, gdu_rm_vidmem *m);

/* Asks RM to describe [ptr, ptr+size) as I/O memory of device d: an
 * NV01_MEMORY_SYSTEM_OS_DESCRIPTOR allocation (uncached, contiguous, PCI)
 * through NV_ESC_RM_ALLOC_MEMORY on a fresh open of dev_path registered to
 * the client's control file, freed again at once when RM accepts. Returns 0
 * when RM accepted, -EIO with *status when it refused, -errno otherwise. */
int gdu_rm_probe_io_memory(gdu_rm_client *c, const gdu_rm_device *d, const char *dev_path,
                           void *ptr, uint64_t size, uint32_t *status, char *why, size_t why_len);

/* The VmFlags line ("rd wr sh mr mw me ms io pf dc de dd sd") of the mapping
 * that contains addr, from /proc/self/smaps text, into flags. Returns 0, or
 * -1 when no mapping of the text holds addr or it has no VmFlags line. */
int gdu_smaps_vmflags(const char *smaps, uint64_t addr, char *flags, size_t len);

/* True when the VmFlags text has the two-letter flag ("io", "pf"). */
int gdu_vmflags_has(const char *flags, const char *flag);

#endif
