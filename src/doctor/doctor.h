/* gdunlock doctor's reasoning: from a probed system (live or replayed from a
 * capture) to findings and verdicts. */
#ifndef GDUNLOCK_DOCTOR_DOCTOR_H
#define GDUNLOCK_DOCTOR_DOCTOR_H

#include "doctor/doctor_report.h"
#include "facts/snapshot.h"
#include "util/exit_codes.h"

/* Doctor's exit statuses (see docs/commands/doctor.md). */
enum {
    GDU_DOCTOR_EXIT_DIRECT = 0,
    GDU_DOCTOR_EXIT_DIRECT_GDUNLOCK = 10,
    GDU_DOCTOR_EXIT_COMPAT = 11,
    GDU_DOCTOR_EXIT_IMPOSSIBLE = 12,
    GDU_DOCTOR_EXIT_UNKNOWN = 13,
    GDU_DOCTOR_EXIT_NO_DRIVER = GDU_EXIT_UNAVAILABLE, /* as every command's */
};

/* The exit status of a report: no NVIDIA driver, else its GDS verdict's. */
int gdu_doctor_exit_code(const gdu_report *r);

/* path: the file or directory the GDS verdict is about (as the examined
 * machine names it), or NULL for "any NVMe drive". Fills report. */
void gdu_doctor_diagnose(const gdu_snapshot *sys, const char *path, gdu_report *report);

/* The rule groups gdu_doctor_diagnose runs, in this order. */
void gdu_doctor_rules_driver(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                             gdu_report *report);
void gdu_doctor_rules_gds(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                          const char *path, gdu_report *report);
/* cuFile's P2PDMA route: each precondition a finding, then the direct path
 * cuFile would take (also in report->direct_path). Run before the GDS rules,
 * which read report->direct_path. */
gdu_direct_path gdu_doctor_rules_p2pdma(const gdu_snapshot *sys, const gdu_gpu_view *gpus,
                                        size_t n_gpus, gdu_report *report);
void gdu_doctor_rules_p2p(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                          gdu_report *report);
/* GPUDirect RDMA with an RDMA adapter (docs/rdma-model.md): its findings and
 * the verdict finding rdma.verdict; one INFO finding where there is no adapter. */
void gdu_doctor_rules_rdma(const gdu_snapshot *sys, const gdu_gpu_view *gpus, size_t n_gpus,
                           gdu_report *report);

/* The fixes several rules share. */
#define GDU_FIX_REBAR                                                                              \
    "enable Above 4G Decoding and Resizable BAR in the BIOS, and load nvidia with "                \
    "NVreg_EnableResizableBar=1 (options nvidia NVreg_EnableResizableBar=1 in /etc/modprobe.d)"
#define GDU_FIX_IOMMU                                                                              \
    "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=pt), or disable the IOMMU in "      \
    "the BIOS"
#endif
