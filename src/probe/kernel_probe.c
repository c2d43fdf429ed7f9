#include "probe/kernel_probe.h"

#include "probe/text_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gdu_kernel_probe(gdu_sysroot *sr, gdu_kernel *out)
{
    memset(out, 0, sizeof *out);
    out->p2pdma = out->nvme_multipath = out->dma_buf = GDU_TRI_UNKNOWN;
    if (gdu_sysroot_read_line(sr, "/proc/sys/kernel/osrelease", out->release,
                              sizeof out->release) == 0 &&
        gdu_parse_kernel_release(out->release, &out->major, &out->minor) != 0)
        out->major = out->minor = 0;
    char path[96], *text;
    if (out->release[0] && strchr(out->release, '/') == NULL) {
        snprintf(path, sizeof path, "/boot/config-%.60s", out->release);
        if (gdu_sysroot_read(sr, path, &text) >= 0) {
            snprintf(out->config, sizeof out->config, "%s", path);
            out->p2pdma = gdu_tri_of(gdu_kernel_config_option(text, "CONFIG_PCI_P2PDMA"));
            out->dma_buf = gdu_tri_of(gdu_kernel_config_option(text, "CONFIG_DMA_SHARED_BUFFER"));
            free(text);
        }
    }
    char value[16];
    if (gdu_sysroot_read_line(sr, "/sys/module/nvme_core/parameters/multipath", value,
                              sizeof value) == 0)
        out->nvme_multipath = value[0] == 'Y'   ? GDU_TRI_YES
                              : value[0] == 'N' ? GDU_TRI_NO
                                                : GDU_TRI_UNKNOWN;
}
