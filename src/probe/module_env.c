#include "probe/module_env.h"

#include "probe/topo_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The folders a root shell's PATH holds on Debian, Ubuntu and Fedora; fixed
 * so that a capture and its replay look in the same places. */
static const char *const bin_dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                       "/usr/bin",        "/sbin",          "/bin"};

/* The first of names found in bin_dirs, into out ("" none). */
static void find_program(gdu_sysroot *sr, const char *const *names, size_t n, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < sizeof bin_dirs / sizeof bin_dirs[0]; d++) {
            char path[64];
            snprintf(path, sizeof path, "%s/%s", bin_dirs[d], names[i]);
            if (gdu_sysroot_present(sr, path)) {
                snprintf(out, len, "%s", path);
                return;
            }
        }
}

/* The efivar holds 4 bytes of attributes, then the value: 1 enabled. */
static void probe_secure_boot(gdu_sysroot *sr, gdu_module_env *out)
{
    out->efi = gdu_sysroot_exists(sr, "/sys/firmware/efi") ? GDU_TRI_YES : GDU_TRI_NO;
    out->secure_boot = out->efi == GDU_TRI_NO ? GDU_TRI_NO : GDU_TRI_UNKNOWN;
    char *data;
    long n = gdu_sysroot_read(sr, GDU_SECURE_BOOT_EFIVAR, &data);
    if (n >= 5)
        out->secure_boot = data[4] == 1 ? GDU_TRI_YES : GDU_TRI_NO;
    else if (n == -ENOENT && out->efi == GDU_TRI_YES &&
             gdu_sysroot_exists(sr, "/sys/firmware/efi/efivars"))
        out->secure_boot = GDU_TRI_NO; /* UEFI without the variable: no Secure Boot */
    free(data);
    /* Presence only: the private key's content is never read, nor captured. */
    out->signing_key =
        gdu_sysroot_present(sr, GDU_DKMS_MOK_KEY) && gdu_sysroot_present(sr, GDU_DKMS_MOK_CERT)
            ? GDU_TRI_YES
            : GDU_TRI_NO;
}

/* Each connected connector ("card0-DP-1/status" is "connected") and the
 * PCI function its card's device link leads to. */
static void probe_displays(gdu_sysroot *sr, gdu_module_env *out)
{
    char **names;
    long n = gdu_sysroot_list(sr, "/sys/class/drm", &names);
    out->drm_known = n >= 0 ? GDU_TRI_YES : GDU_TRI_UNKNOWN;
    for (long i = 0; i < n && out->n_displays < GDU_MODULE_ENV_MAX_DISPLAYS; i++) {
        const char *dash = strchr(names[i], '-');
        if (strncmp(names[i], "card", 4) != 0 || dash == NULL)
            continue;
        char path[256], status[32], device[512];
        snprintf(path, sizeof path, "/sys/class/drm/%.64s/status", names[i]);
        if (gdu_sysroot_read_line(sr, path, status, sizeof status) != 0 ||
            strcmp(status, "connected") != 0)
            continue;
        snprintf(path, sizeof path, "/sys/class/drm/%.*s/device", (int)(dash - names[i]), names[i]);
        gdu_display *d = &out->displays[out->n_displays];
        if (gdu_sysroot_realpath(sr, path, device, sizeof device) != 0 ||
            gdu_sysfs_path_last_bdf(device, d->bdf, sizeof d->bdf) != 0)
            continue;
        snprintf(d->connector, sizeof d->connector, "%s", names[i]);
        out->n_displays++;
    }
    if (n > 0)
        gdu_sysroot_free_names(names, n);
}

void gdu_module_env_probe(gdu_sysroot *sr, const char *release, gdu_module_env *out)
{
    static const char *const dkms[] = {"dkms"}, *const cc[] = {"cc", "gcc"},
                             *const make[] = {"make"};
    memset(out, 0, sizeof *out);
    probe_secure_boot(sr, out);
    out->has_headers = GDU_TRI_UNKNOWN;
    if (release != NULL && release[0] != '\0' && strchr(release, '/') == NULL) {
        char build[128];
        snprintf(build, sizeof build, "/lib/modules/%.64s/build", release);
        bool found = gdu_sysroot_realpath(sr, build, out->headers, sizeof out->headers) == 0;
        if (!found)
            out->headers[0] = '\0';
        out->has_headers = found ? GDU_TRI_YES : GDU_TRI_NO;
    }
    find_program(sr, dkms, 1, out->dkms, sizeof out->dkms);
    find_program(sr, cc, 2, out->cc, sizeof out->cc);
    find_program(sr, make, 1, out->make, sizeof out->make);
    probe_displays(sr, out);
}

const gdu_display *gdu_module_env_display(const gdu_module_env *env, const char *bdf)
{
    for (size_t i = 0; i < env->n_displays; i++)
        if (strcasecmp(env->displays[i].bdf, bdf) == 0)
            return &env->displays[i];
    return NULL;
}
