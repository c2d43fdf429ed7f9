/* A model of what the kernel does when nvidia-fs pins a GPU buffer for cuFile:
 * nvidia-fs rounds the buffer to 64 KiB GPU pages and calls
 * nvidia_p2p_get_pages_persistent(), which asks RM to find the ThirdPartyP2P
 * (NV503C) registration that holds the range and to map it through BAR1.
 *
 * Written from reading the sources (cited file:line at each rule in
 * pin_model.c): NVIDIA/gds-nvidia-fs 2.28 src/nvfs-core.c and
 * NVIDIA/open-gpu-kernel-modules 580.142 kernel-open/nvidia/nv-p2p.c,
 * src/nvidia/src/kernel/gpu/bus/p2p.c and third_party_p2p.c.
 *
 * The model answers, for the ThirdPartyP2P state of one process and a buffer
 * (address, length): pages found, or the errno nvidia-fs would get and why.
 * It is pure: no I/O, no allocation; the caller describes the state. */
#ifndef GDUNLOCK_PINMODEL_PIN_MODEL_H
#define GDUNLOCK_PINMODEL_PIN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* nvidia-fs's GPU page (GPU_PAGE_SIZE, nvfs-core.h:242) and RM's
 * NVRM_P2P_PAGESIZE_BIG_64K. */
#define GDU_PIN_PAGE ((uint64_t)64 * 1024)
/* BAR1 RM keeps free of P2P mappings (CLI_THIRD_PARTY_P2P_BAR1_RESERVE,
 * generated g_third_party_p2p_nvoc.h:89, used at p2p.c:1030). */
#define GDU_PIN_BAR1_RESERVE ((uint64_t)36 << 20)

/* Bytes of BAR1 still pinnable on a GPU whose BAR1 is bar1_bytes with
 * mapped_bytes already mapped for P2P (0 when nothing fits). */
uint64_t gdu_pin_bar1_budget(uint64_t bar1_bytes, uint64_t mapped_bytes);

#endif
