/* What building, signing and loading a kernel module needs on the examined
 * machine, for `gdunlock p2p unlock`: UEFI Secure Boot and the key DKMS signs
 * with, the running kernel's headers, DKMS, a compiler and make, and which
 * GPUs drive a display (a connected DRM connector). Read through the sysroot,
 * so a capture holds these files and replays to the same answer. */
#ifndef GDUNLOCK_PROBE_MODULE_ENV_H
#define GDUNLOCK_PROBE_MODULE_ENV_H

#include "probe/sysroot.h"
#include "util/tri.h"

#include <stddef.h>

enum { GDU_MODULE_ENV_MAX_DISPLAYS = 16 };

/* The EFI variable that holds Secure Boot's state (UEFI spec, global variable GUID). */
#define GDU_SECURE_BOOT_EFIVAR                                                                     \
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
/* Where DKMS keeps the key it signs modules with (dkms(8), mok_signing_key). */
#define GDU_DKMS_MOK_KEY "/var/lib/dkms/mok.key"
#define GDU_DKMS_MOK_CERT "/var/lib/dkms/mok.pub"

/* A GPU's connected display connector: "card0-DP-1" of 0000:01:00.0. */
typedef struct gdu_display {
    char bdf[16];
    char connector[64];
} gdu_display;

typedef struct gdu_module_env {
    gdu_tri efi;         /* booted through UEFI (/sys/firmware/efi) */
    gdu_tri secure_boot; /* NO without UEFI; UNKNOWN when efivars cannot be read */
    gdu_tri signing_key; /* DKMS's key and certificate are both there */
    char headers[256];   /* /lib/modules/<release>/build resolved, "" when absent */
    gdu_tri has_headers; /* UNKNOWN without the kernel release */
    char dkms[64];       /* the dkms program found, "" none */
    char cc[64];         /* cc or gcc found, "" none */
    char make[64];       /* make found, "" none */
    gdu_display displays[GDU_MODULE_ENV_MAX_DISPLAYS];
    size_t n_displays;
    gdu_tri drm_known; /* /sys/class/drm could be listed */
} gdu_module_env;

/* release: the running kernel's ("" unknown). */
void gdu_module_env_probe(gdu_sysroot *sr, const char *release, gdu_module_env *out);

/* The connected connector of the GPU at bdf, or NULL. */
const gdu_display *gdu_module_env_display(const gdu_module_env *env, const char *bdf);

#endif
