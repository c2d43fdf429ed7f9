#include "probe/doctor.h"

void gdu_doctor_diagnose(const gdu_system *sys, const char *path, gdu_report *r)
{
    gdu_gpu_view gpus[GDU_MAX_GPUS];
    size_t n = gdu_system_gpus(sys, gpus, GDU_MAX_GPUS);
    gdu_report_init(r);
    r->driver_present = sys->driver.loaded;
    gdu_doctor_rules_driver(sys, gpus, n, r);
    gdu_doctor_rules_gds(sys, gpus, n, path, r);
    gdu_doctor_rules_p2p(sys, gpus, n, r);
}
