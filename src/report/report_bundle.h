/* gdunlock report: the evidence of one machine in one file a user can
 * attach to an issue (a tar of a folder gdunlock-report/):
 *   capture/                 doctor's capture: replays with doctor --sysroot
 *   doctor.json              doctor's report on the snapshot
 *   verify.json              gdunlock verify --json on the target (the shim's
 *                            report inside), live only
 *   cufile.log               libcufile's log of that verify run
 *   nvidia-fs-stats-before.txt  as the snapshot read them (verify.json
 *                            holds verify's own, before and after its run)
 *   kernel-log.txt           the kernel's lines about the driver, nvidia-fs,
 *                            NVMe, P2PDMA and the IOMMU (root, or
 *                            kernel.dmesg_restrict=0)
 *   driver-params.txt        /proc/driver/nvidia/params
 *   README.txt               what it is and how to replay it
 * with host names, user names and paths, UUIDs and serial numbers scrubbed
 * (report/report_scrub.h). */
#ifndef GDUNLOCK_REPORT_REPORT_BUNDLE_H
#define GDUNLOCK_REPORT_REPORT_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gdu_bundle_request {
    const char *sysroot;    /* NULL: this machine; a capture: its snapshot only, no verify */
    const char *target;     /* the file verify writes and removes; NULL: no verify run */
    const char *exe;        /* the gdunlock binary that runs verify */
    const char *out;        /* the tar to write: made anew, never through a link */
    const char *nvfs_stats; /* live: nvidia-fs's stats read here instead (NULL: the driver's) */
    bool force;             /* replace a file (or link) already at out */
} gdu_bundle_request;

typedef struct gdu_bundle_result {
    int verify_exit;     /* verify's exit status; -1 not run */
    long files_scrubbed; /* files something was taken out of */
    size_t replaced;     /* replacements made */
    char notes[512];     /* what could not be gathered, "; "-separated */
} gdu_bundle_result;

/* Gathers, scrubs and packs. The examined machine is read once, into a
 * snapshot (facts/snapshot.h: through a sysroot, where a capture's links
 * resolve inside it, regular files only, bounded), which everything above
 * but verify's run and the kernel log is written from; the tar is written
 * beside out and then takes its name. Returns 0, or -errno with why: -EEXIST when something is
 * at out and not force; otherwise the bundle could not be written (what
 * could not be gathered is a note, not an error). */
int gdu_bundle_make(const gdu_bundle_request *req, gdu_bundle_result *res, char *why,
                    size_t why_len);

#endif
