#include "doctor/doctor.h"

#include <stdio.h>
#include <string.h>

/* The findings of the direct path cuFile does not take here are what the
 * verdict does not need: INFO, not FAIL (nor unknown), whichever the other
 * path's state. Under compat (neither path) both explain the verdict and
 * keep their status. */
static void set_aside_the_other_path(gdu_report *r)
{
    const char *other = r->direct_path == GDU_PATH_NVIDIA_FS ? "p2pdma"
                        : r->direct_path == GDU_PATH_P2PDMA  ? "nvidia-fs"
                                                             : NULL;
    for (size_t i = 0; other != NULL && i < r->n_findings; i++) {
        gdu_finding *f = &r->findings[i];
        if (strcmp(f->area, other) == 0 && f->status != GDU_ST_OK)
            f->status = GDU_ST_INFO;
    }
}

void gdu_doctor_diagnose(const gdu_snapshot *sys, const char *path, gdu_report *r)
{
    gdu_gpu_view gpus[GDU_MAX_GPUS];
    size_t n = gdu_snapshot_gpus(sys, gpus, GDU_MAX_GPUS);
    gdu_report_init(r);
    r->driver_present = sys->driver.loaded;
    const gdu_driver *d = &sys->driver;
    snprintf(r->driver_version, sizeof r->driver_version, "%s",
             d->version.version[0] ? d->version.version : d->module_version);
    r->open_module = d->version.version[0] ? d->version.open_module : -1;
    for (size_t i = 0; i < n && r->n_gpus < sizeof r->gpus / sizeof r->gpus[0]; i++) {
        gdu_report_gpu *g = &r->gpus[r->n_gpus++];
        g->index = gpus[i].index;
        snprintf(g->bdf, sizeof g->bdf, "%s", gpus[i].bdf);
        snprintf(g->name, sizeof g->name, "%s", gpus[i].name);
        g->geforce = gpus[i].geforce;
        g->cuda_ordinal = gpus[i].cuda ? gpus[i].cuda->ordinal : -1;
        g->bar1_bytes = gpus[i].bar1;
        g->memory_bytes = gpus[i].memory;
        if (gpus[i].cuda && gpus[i].cuda->rm_bar1_known) {
            g->rm_bar1_bytes = gpus[i].cuda->rm_bar1_total;
            g->rm_bar1_available = gpus[i].cuda->rm_bar1_available;
        }
        if (gpus[i].pci) {
            g->cur_gen = gpus[i].pci->cur_gen;
            g->cur_width = gpus[i].pci->cur_width;
            g->max_gen = gpus[i].pci->max_gen;
            g->max_width = gpus[i].pci->max_width;
        }
    }
    gdu_doctor_rules_driver(sys, gpus, n, r);
    if (sys->driver.loaded)
        gdu_doctor_rules_p2pdma(sys, gpus, n, r);
    gdu_doctor_rules_gds(sys, gpus, n, path, r);
    gdu_doctor_rules_p2p(sys, gpus, n, r);
    gdu_doctor_rules_rdma(sys, gpus, n, r);
    set_aside_the_other_path(r);
}

int gdu_doctor_exit_code(const gdu_report *r)
{
    if (!r->driver_present)
        return GDU_DOCTOR_EXIT_NO_DRIVER;
    switch (r->gds) {
    case GDU_GDS_DIRECT:
        return GDU_DOCTOR_EXIT_DIRECT;
    case GDU_GDS_DIRECT_GDUNLOCK:
        return GDU_DOCTOR_EXIT_DIRECT_GDUNLOCK;
    case GDU_GDS_COMPAT:
        return GDU_DOCTOR_EXIT_COMPAT;
    case GDU_GDS_UNKNOWN:
        return GDU_DOCTOR_EXIT_UNKNOWN;
    default:
        return GDU_DOCTOR_EXIT_IMPOSSIBLE;
    }
}
