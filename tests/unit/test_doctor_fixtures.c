/* doctor's verdicts, reasons and fixes on the fixture sysroots of
 * tests/fixtures/doctor (built by make-fixtures.py to the real formats). */
#include "doctor/doctor.h"
#include "doctor/doctor_pcie.h"
#include "doctor/topo_matrix.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define FIXTURES GDUNLOCK_FIXTURES "/doctor/"

typedef struct {
    gdu_sysroot sr;
    gdu_snapshot sys;
    gdu_report r;
} run_t;

static run_t *run(const char *root, const char *path)
{
    run_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(gdu_sysroot_init(&t->sr, root), 0);
    gdu_snapshot_take(&t->sr, NULL, 0, &t->sys);
    gdu_doctor_diagnose(&t->sys, path, &t->r);
    return t;
}

static run_t *fixture(const char *name, const char *path)
{
    char root[512];
    snprintf(root, sizeof root, FIXTURES "%s", name);
    assert_int_equal(access(root, R_OK), 0);
    return run(root, path);
}

static void done(run_t *t)
{
    gdu_report_free(&t->r);
    gdu_snapshot_free(&t->sys);
    gdu_sysroot_free(&t->sr);
    free(t);
}

static bool has_reason(const gdu_report *r, const char *text)
{
    for (size_t i = 0; i < r->n_reasons; i++)
        if (strstr(r->reasons[i].text, text))
            return true;
    return false;
}

static bool has_evidence(const gdu_finding *f, const char *text)
{
    for (size_t i = 0; i < f->n_evidence; i++)
        if (strstr(f->evidence[i], text))
            return true;
    return false;
}

static const gdu_finding *finding(const gdu_report *r, const char *id, gdu_status status)
{
    const gdu_finding *f = gdu_report_find(r, id);
    if (f == NULL)
        fail_msg("no finding %s", id);
    if (f->status != status)
        fail_msg("finding %s: status %s, expected %s (%s)", id, gdu_status_id(f->status),
                 gdu_status_id(status), f->title);
    return f;
}

#define NVME_PIX "pcie.gpu0-0000:04:00.0"

static void rtx3060_direct_with_gdunlock(void **state)
{
    run_t *t = fixture("rtx3060-nvfs-rebar", "/data/model.safetensors");
    assert_true(t->r.driver_present);
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_string_equal(t->r.gds_target, "/data/model.safetensors");
    assert_true(has_reason(&t->r, "GeForce GPU"));
    assert_true(has_reason(&t->r, "gdunlock shim"));
    assert_true(has_evidence(finding(&t->r, "driver.flavour", GDU_ST_OK), "taint: OE (no P"));
    assert_non_null(strstr(finding(&t->r, "gpu0.bar1", GDU_ST_OK)->title, "covers all 12.00 GiB"));
    assert_true(has_evidence(finding(&t->r, "gpu0.bar1", GDU_ST_OK), "BAR1 up to 16.00 GiB"));
    assert_non_null(
        strstr(finding(&t->r, "gpu0.link", GDU_ST_OK)->title, "Gen1 x16 (max Gen4 x16)"));
    assert_true(has_evidence(finding(&t->r, "nvidia_fs.loaded", GDU_ST_OK), "reads 1024 ok 1024"));
    assert_non_null(
        strstr(finding(&t->r, "storage.block", GDU_ST_OK)->title, "nvme0n1p1 -> nvme0n1"));
    finding(&t->r, "storage.udev", GDU_ST_OK);
    finding(&t->r, "storage.o_direct", GDU_ST_OK);
    const gdu_finding *pcie = finding(&t->r, NVME_PIX, GDU_ST_OK);
    assert_non_null(strstr(pcie->title, "PIX through 3 bridge(s)"));
    assert_true(has_evidence(pcie, "bridge 0000:02:08.0 ACS control: SrcValid"));
    assert_int_equal(t->r.n_pairs, 0);

    /* the PCI layer read the binary config space */
    const gdu_pci_dev *gpu = gdu_pci_find(&t->sys.pci, "0000:03:00.0");
    assert_non_null(gpu);
    assert_true(gdu_pci_is_nvidia_gpu(gpu));
    assert_int_equal(gpu->bar_size[1], 16ull << 30);
    assert_int_equal(gpu->rebar, GDU_CFG_PRESENT);
    assert_int_equal(gpu->rebar_max[1], 16ull << 30);
    int index;
    assert_int_equal(gdu_pci_bar1(gpu->bar_size, &index), 16ull << 30);
    assert_int_equal(index, 1);
    assert_string_equal(gpu->driver, "nvidia");
    assert_non_null(strstr(gpu->path, "/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"));
    done(t);

    t = fixture("rtx3060-nvfs-rebar", NULL);
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_string_equal(t->r.gds_target, "any NVMe drive");
    assert_true(
        has_evidence(finding(&t->r, "storage.nvme", GDU_ST_OK), "nvme0 Samsung SSD 990 PRO"));
    done(t);
}

static void without_nvidia_fs_compat_only(void **state)
{
    run_t *t = fixture("rtx3060-no-nvfs", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "nvidia-fs is not loaded"));
    assert_non_null(
        strstr(finding(&t->r, "nvidia_fs.loaded", GDU_ST_FAIL)->fix, "modprobe nvidia-fs"));
    done(t);
}

static void small_bar1_is_a_caveat(void **state)
{
    run_t *t = fixture("rtx3060-no-rebar", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_true(has_reason(&t->r, "BAR1 is a 256.00 MiB window on 12.00 GiB"));
    const gdu_finding *f = finding(&t->r, "gpu0.bar1", GDU_ST_WARN);
    assert_non_null(strstr(f->fix, "Resizable BAR"));
    assert_non_null(strstr(f->fix, "NVreg_EnableResizableBar=1"));
    /* RM's own count, shared by every process (the capture recorded it). */
    assert_true(has_evidence(f, "RM counts BAR1 256.00 MiB, 200.00 MiB of it unused now"));
    assert_true(has_reason(&t->r, "RM counts 200.00 MiB of it unused now, for every process"));
    assert_int_equal(t->r.gpus[0].rm_bar1_bytes, 256u << 20);
    assert_int_equal(t->r.gpus[0].rm_bar1_available, 200u << 20);
    done(t);
}

static void acs_redirect_forces_compat(void **state)
{
    run_t *t = fixture("rtx3060-acs-redirect", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "ACS on a bridge between GPU0 and NVMe 0000:04:00.0"));
    const gdu_finding *f = finding(&t->r, NVME_PIX, GDU_ST_FAIL);
    assert_true(has_evidence(f, "0000:02:08.0 ACS control: SrcValid ReqRedir CmpltRedir"));
    assert_non_null(
        strstr(f->fix, "setpci -s 0000:02:08.0 ECAP_ACS+0x6.w=0000; setpci -s 0000:02:10.0"));
    /* callers that want only the answer pass no buffer */
    gdu_pcie_path path;
    gdu_pci_path(&t->sys.pci, "0000:03:00.0", "0000:04:00.0", &path);
    assert_int_equal(gdu_pci_path_acs_redirect(&t->sys.pci, &path, NULL, 0), GDU_TRI_YES);
    char one[16];
    assert_int_equal(gdu_pci_path_acs_redirect(&t->sys.pci, &path, one, sizeof one), GDU_TRI_YES);
    assert_string_equal(one, "0000:02:08.0");
    done(t);
}

static void iommu_dma_forces_compat(void **state)
{
    run_t *t = fixture("rtx3060-iommu-dma", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "IOMMU translates device DMA"));
    const gdu_finding *f = finding(&t->r, "iommu.mode", GDU_ST_FAIL);
    assert_true(has_evidence(f, "6 IOMMU group(s): 0 identity, 6 DMA/DMA-FQ"));
    assert_true(has_evidence(f, "intel_iommu=on"));
    assert_non_null(strstr(f->fix, "iommu=pt"));
    done(t);
}

static void nvme_on_other_socket(void **state)
{
    run_t *t = fixture("rtx3060-nvme-remote", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_true(has_reason(&t->r, "other CPU socket"));
    const gdu_finding *f = finding(&t->r, "pcie.gpu0-0000:81:00.0", GDU_ST_WARN);
    assert_non_null(strstr(f->title, "SYS"));
    assert_non_null(strstr(f->fix, "same CPU socket"));
    done(t);
}

static void tmpfs_and_nfs_compat_only(void **state)
{
    run_t *t = fixture("rtx3060-tmpfs-nfs", "/scratch/model.bin");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "tmpfs has no GDS direct path"));
    assert_non_null(strstr(finding(&t->r, "storage.filesystem", GDU_ST_FAIL)->fix, "ext4"));
    assert_null(gdu_report_find(&t->r, "storage.block")); /* no block device under tmpfs */
    done(t);
    t = fixture("rtx3060-tmpfs-nfs", "/mnt/nfs/model.bin");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "NFS over TCP"));
    done(t);
    /* not probed on the captured machine, but another path of its filesystem was */
    t = fixture("rtx3060-tmpfs-nfs", "/data/sub/dir");
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_true(has_evidence(finding(&t->r, "storage.o_direct", GDU_ST_OK),
                             "tried on /data/model.safetensors, on the same filesystem"));
    done(t);
}

static const gdu_reason *unknown_reason(const gdu_report *r, const char *text)
{
    for (size_t i = 0; i < r->n_reasons; i++)
        if (strstr(r->reasons[i].text, text)) {
            if (r->reasons[i].note || r->reasons[i].level != GDU_GDS_UNKNOWN)
                fail_msg("reason '%s' does not make the verdict unknown", r->reasons[i].text);
            return &r->reasons[i];
        }
    fail_msg("no reason '%s'", text);
    return NULL;
}

/* The fixtures of make-fixtures.py's missing_evidence(): one per verdict,
 * with evidence that verdict rests on removed. Each says "unknown" and what
 * to capture, never the complete capture's verdict. */
static void missing_evidence_is_unknown(void **state)
{
    /* direct (l40s-nvfs) without the block device under /data */
    run_t *t = fixture("l40s-nvfs-missing-block", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_UNKNOWN);
    const gdu_reason *why =
        unknown_reason(&t->r, "block device 259:1 under /data/model.safetensors");
    assert_int_equal(why->could_be, GDU_GDS_COMPAT);
    assert_non_null(strstr(why->text, "gdunlock doctor --capture DIR"));
    finding(&t->r, "storage.block", GDU_ST_UNKNOWN);
    finding(&t->r, "storage.udev", GDU_ST_OK); /* what is there is still read */
    done(t);

    /* direct with gdunlock (rtx3060-nvfs-rebar) without usable live answers */
    static const char *const no_live[] = {"rtx3060-missing-live", "rtx3060-live-garbage",
                                          "rtx3060-live-wrong-types"};
    static const gdu_status capture_status[] = {GDU_ST_UNKNOWN, GDU_ST_FAIL, GDU_ST_FAIL};
    static const char *const capture_why[] = {"come only from the live machine",
                                              "gdunlock-live.json: line 1",
                                              "cufile.found is a string, expected a boolean"};
    for (size_t i = 0; i < 3; i++) {
        t = fixture(no_live[i], "/data/model.safetensors");
        if (t->r.gds != GDU_GDS_UNKNOWN)
            fail_msg("%s: verdict %s", no_live[i], gdu_gds_verdict_id(t->r.gds));
        assert_int_equal(unknown_reason(&t->r, "whether libcufile is installed")->could_be,
                         GDU_GDS_IMPOSSIBLE);
        unknown_reason(&t->r, "takes O_DIRECT");
        const gdu_finding *f = finding(&t->r, "capture.live", capture_status[i]);
        if (!has_evidence(f, capture_why[i]))
            fail_msg("%s: capture.live lacks '%s'", no_live[i], capture_why[i]);
        finding(&t->r, "cufile.library", GDU_ST_UNKNOWN);
        done(t);
    }

    /* compat only (rtx3060-no-nvfs) with a cufile.json that does not parse:
     * its allow_compat_mode may be false, which makes it impossible */
    t = fixture("rtx3060-no-nvfs-bad-cufile-json", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_UNKNOWN);
    assert_true(has_reason(&t->r, "nvidia-fs is not loaded"));
    assert_int_equal(unknown_reason(&t->r, "/etc/cufile.json cannot be used")->could_be,
                     GDU_GDS_IMPOSSIBLE);
    assert_true(has_evidence(finding(&t->r, "cufile.config", GDU_ST_FAIL), "not valid JSON"));
    done(t);

    /* impossible (h200x2-vm-virtio /root) without mountinfo: the filesystem,
     * its disk and udev's data for it are all unknown */
    t = fixture("h200x2-vm-missing-mountinfo", "/root");
    assert_int_equal(t->r.gds, GDU_GDS_UNKNOWN);
    unknown_reason(&t->r, "the filesystem under /root is unknown");
    assert_true(has_evidence(finding(&t->r, "storage.filesystem", GDU_ST_UNKNOWN),
                             "mountinfo is missing or empty"));
    done(t);

    /* evidence missing that could not make things worse: a note, the verdict stays */
    t = fixture("rtx3060-no-nvfs", "/data/sub/dir");
    t->sys.live.n_paths = 0;
    gdu_report_free(&t->r);
    gdu_doctor_diagnose(&t->sys, "/data/sub/dir", &t->r);
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    for (size_t i = 0; i < t->r.n_reasons; i++)
        if (strstr(t->r.reasons[i].text, "takes O_DIRECT"))
            assert_true(t->r.reasons[i].note);
    finding(&t->r, "storage.o_direct", GDU_ST_UNKNOWN);
    json_t *j = gdu_report_to_json(&t->r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "gds"), "verdict")),
                        "compat_only");
    json_decref(j);
    done(t);
    t = fixture("l40s-nvfs-missing-block", "/data/model.safetensors");
    j = gdu_report_to_json(&t->r);
    json_t *gds = json_object_get(j, "gds");
    assert_string_equal(json_string_value(json_object_get(gds, "verdict")), "unknown");
    json_t *reason = json_array_get(json_object_get(gds, "reasons"), 0);
    assert_string_equal(json_string_value(json_object_get(reason, "level")), "unknown");
    assert_string_equal(json_string_value(json_object_get(reason, "could_be")), "compat_only");
    json_decref(j);
    done(t);
}

static void proprietary_old_driver(void **state)
{
    run_t *t = fixture("proprietary-535", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "driver 535.129.03 is older than 555"));
    assert_non_null(strstr(finding(&t->r, "driver.version", GDU_ST_FAIL)->fix, "555 or newer"));
    assert_non_null(
        strstr(finding(&t->r, "driver.flavour", GDU_ST_WARN)->fix, "open kernel module"));
    assert_true(
        has_evidence(finding(&t->r, "driver.flavour", GDU_ST_WARN), "taint: POE (P: proprietary"));
    assert_true(has_evidence(finding(&t->r, "driver.gsp", GDU_ST_OK), "GPU Firmware: N/A"));
    /* captured without root: 64 bytes of config space, so ACS and ReBAR are unknown, not guessed */
    assert_true(has_evidence(finding(&t->r, "gpu0.bar1", GDU_ST_OK),
                             "unknown (extended config space needs root"));
    const gdu_finding *pcie = finding(&t->r, NVME_PIX, GDU_ST_UNKNOWN);
    assert_true(has_evidence(pcie, "ACS: unknown"));
    assert_non_null(strstr(pcie->fix, "run doctor as root"));
    assert_true(
        has_reason(&t->r, "ACS on the bridges between GPU0 and NVMe 0000:04:00.0 is unknown"));
    done(t);
}

static void datacenter_gpu_goes_direct(void **state)
{
    run_t *t = fixture("l40s-nvfs", "/data/model.safetensors");
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT);
    assert_int_equal(t->r.n_reasons, 0);
    done(t);
}

static void lvm_over_md_over_nvme(void **state)
{
    run_t *t = fixture("l40s-lvm-raid0", "/data/x");
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT);
    const gdu_finding *f = finding(&t->r, "storage.block", GDU_ST_OK);
    assert_non_null(strstr(f->title, "dm-0 -> md0 -> nvme0n1p1 + nvme1n1"));
    assert_true(has_evidence(f, "disk nvme0n1 at PCI 0000:04:00.0 (NVMe)"));
    assert_true(has_evidence(f, "disk nvme1n1 at PCI 0000:06:00.0 (NVMe)"));
    assert_non_null(strstr(finding(&t->r, "pcie.gpu0-0000:06:00.0", GDU_ST_OK)->title, "PHB"));
    finding(&t->r, "storage.udev", GDU_ST_OK);

    gdu_topo *topo = malloc(sizeof *topo);
    assert_non_null(topo);
    gdu_topo_build(&t->sys, topo);
    assert_string_equal(topo->cols[2].name, "nvme1");
    assert_int_equal(topo->cols[2].n_mounts, 1);
    assert_string_equal(topo->cols[2].mounts[0], "/data (xfs)");
    free(topo);
    done(t);
}

static void rtx4090_stock_sku_lock(void **state)
{
    run_t *t = fixture("rtx4090x2-stock", NULL);
    assert_int_equal(t->r.n_pairs, 1);
    const gdu_p2p_pair *p = &t->r.pairs[0];
    assert_int_equal(p->path.kind, GDU_PATH_PIX);
    assert_int_equal(p->verdict.link, GDU_P2P_LINK_NONE);
    assert_int_equal(p->verdict.cause, GDU_P2P_CAUSE_SKU_LOCK);
    assert_string_equal(gdu_p2p_verdict_class(&p->verdict), "staged only");
    /* The fix is the unlock's plan for this machine, with the commands. */
    assert_non_null(strstr(p->verdict.fix, "plan 'patched module': driver 580.95.05 has no BAR1 "
                                           "P2P for Ada GPUs"));
    assert_non_null(strstr(p->verdict.fix, "run 'gdunlock p2p unlock --build --out DIR'"));
    const gdu_finding *f = finding(&t->r, "p2p.gpu0-gpu1", GDU_ST_FAIL);
    assert_true(has_evidence(f, "unlock plan: patched module ('gdunlock p2p unlock --check')"));
    assert_true(has_evidence(f, "lock: SKU lock"));
    assert_true(has_evidence(f, "read=gpu_not_supported"));
    assert_true(has_evidence(f, "cuDeviceCanAccessPeer: 0"));
    assert_true(has_evidence(f, "compute 8.x: the stock driver has no BAR1 P2P"));
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT); /* no nvidia-fs on this box */
    done(t);
}

static void rtx4090_patched_bar1(void **state)
{
    run_t *t = fixture("rtx4090x2-patched", NULL);
    assert_int_equal(t->r.n_pairs, 1);
    const gdu_p2p_pair *p = &t->r.pairs[0];
    assert_int_equal(p->verdict.link, GDU_P2P_LINK_PCIE_BAR1);
    assert_int_equal(p->verdict.cause, GDU_P2P_CAUSE_NONE);
    assert_string_equal(gdu_p2p_verdict_class(&p->verdict), "BAR1");
    const gdu_finding *f = finding(&t->r, "p2p.gpu0-gpu1", GDU_ST_OK);
    assert_true(has_evidence(f, "pci_bar1=ok"));
    assert_true(has_evidence(f, "RMPcieP2PType=0x1"));
    done(t);
}

/* The IOMMU translates (DMA-FQ) but the GPUs' own groups are identity: the
 * pair's peer DMA is not translated, so no IOMMU warning (the system-wide
 * mode said "translated"). */
static void rtx4090_gpus_identity_no_iommu_warning(void **state)
{
    run_t *t = fixture("rtx4090x2-patched-gpus-identity", NULL);
    assert_int_equal(t->sys.iommu.mode, GDU_IOMMU_TRANSLATED);
    assert_int_equal(t->r.n_pairs, 1);
    assert_int_equal(t->r.pairs[0].verdict.link, GDU_P2P_LINK_PCIE_BAR1);
    assert_string_equal(t->r.pairs[0].verdict.warning, "");
    finding(&t->r, "p2p.gpu0-gpu1", GDU_ST_OK);
    done(t);
}

/* GPUDirect RDMA (docs/rdma-model.md): one fixture per verdict. */
static const char *rdma_verdict(const char *name, gdu_status status)
{
    run_t *t = fixture(name, NULL);
    static char title[192];
    snprintf(title, sizeof title, "%s", finding(&t->r, "rdma.verdict", status)->title);
    done(t);
    return title;
}

static void rdma_verdicts(void **state)
{
    /* NCCL's order: the DMA-BUF route (the shim's export) where the kernel
     * and the open module give it, whether or not nvidia-peermem is loaded */
    assert_non_null(strstr(rdma_verdict("rtx3060-rdma-peermem", GDU_ST_INFO),
                           "with 'gdunlock run --rdma' through the DMA-BUF route (the shim's "
                           "export); not yet shown"));
    assert_non_null(
        strstr(rdma_verdict("rtx3060-rdma-no-peermem", GDU_ST_INFO), "through the DMA-BUF route"));
    assert_non_null(strstr(rdma_verdict("rtx3060-rdma-no-route", GDU_ST_FAIL), "no route"));
    assert_non_null(strstr(rdma_verdict("rtx3060-rdma-phb", GDU_ST_WARN), "distance rule"));
    assert_non_null(strstr(rdma_verdict("rtx3060-rdma-blocked", GDU_ST_FAIL), "blocked"));
    assert_non_null(strstr(rdma_verdict("rtx3060-rdma-small-bar1", GDU_ST_INFO), "--rdma"));
    assert_non_null(strstr(rdma_verdict("l40s-rdma-native", GDU_ST_OK), "native (nvidia-peermem)"));
}

static void rdma_findings(void **state)
{
    run_t *t = fixture("rtx3060-rdma-peermem", NULL);
    const gdu_finding *f = finding(&t->r, "rdma.devices", GDU_ST_OK);
    assert_true(has_evidence(f, "mlx5_0 at 0000:05:00.0: port 1 4: ACTIVE, InfiniBand"));
    f = finding(&t->r, "rdma.peer_memory", GDU_ST_OK);
    assert_true(has_evidence(f, "/sys/module/nvidia_peermem/version: 580.95.05"));
    assert_true(
        has_evidence(finding(&t->r, "rdma.dmabuf", GDU_ST_OK), "CONFIG_DMA_SHARED_BUFFER=y"));
    assert_non_null(strstr(finding(&t->r, "rdma.gpu0.distance", GDU_ST_OK)->title, "PIX"));
    finding(&t->r, "pcie.gpu0-mlx5_0", GDU_ST_OK);
    finding(&t->r, "rdma.iommu", GDU_ST_OK);
    done(t);
    t = fixture("rtx3060-rdma-no-peermem", NULL);
    f = finding(&t->r, "rdma.peer_memory", GDU_ST_WARN);
    assert_non_null(strstr(f->fix, "MLNX_OFED"));
    assert_true(has_evidence(finding(&t->r, "rdma.dmabuf", GDU_ST_OK), "the shim answers"));
    done(t);
    t = fixture("rtx3060-rdma-no-route", NULL);
    assert_true(has_evidence(finding(&t->r, "rdma.dmabuf", GDU_ST_WARN), "before 5.12"));
    f = finding(&t->r, "rdma.verdict", GDU_ST_FAIL);
    assert_non_null(strstr(f->title, "no DMA-BUF route for the shim"));
    assert_non_null(strstr(f->fix, "Linux 5.12 or later"));
    assert_non_null(strstr(f->fix, "nvidia-peermem"));
    done(t);
    t = fixture("rtx3060-rdma-phb", NULL);
    f = finding(&t->r, "rdma.gpu0.distance", GDU_ST_WARN);
    assert_non_null(strstr(f->fix, "NCCL_NET_GDR_LEVEL=PHB"));
    done(t);
    t = fixture("rtx3060-rdma-blocked", NULL);
    assert_non_null(strstr(finding(&t->r, "pcie.gpu0-mlx5_0", GDU_ST_FAIL)->fix, "setpci"));
    assert_non_null(strstr(finding(&t->r, "rdma.iommu", GDU_ST_FAIL)->fix, "iommu=pt"));
    done(t);
    t = fixture("rtx3060-rdma-small-bar1", NULL);
    f = finding(&t->r, "rdma.gpu0.bar1", GDU_ST_WARN);
    assert_true(has_evidence(f, "shares 220 MiB"));
    assert_true(has_evidence(f, "55 such buffers fit"));
    assert_non_null(strstr(f->fix, "Resizable BAR"));
    done(t);
    /* No adapter: one INFO finding, no verdict. */
    t = fixture("rtx3060-nvfs-rebar", NULL);
    finding(&t->r, "rdma.devices", GDU_ST_INFO);
    assert_null(gdu_report_find(&t->r, "rdma.verdict"));
    done(t);
}

static void h200_vm_cufile_5027(void **state)
{
    run_t *t = fixture("h200x2-vm-virtio", "/root");
    assert_int_equal(t->r.gds, GDU_GDS_IMPOSSIBLE);
    assert_true(has_reason(&t->r, "error 5027"));
    assert_true(has_reason(&t->r, "not on NVMe (vda)"));
    assert_true(has_reason(&t->r, "udev has no ID_FS_USAGE for vda (254:0)"));
    const gdu_finding *f = finding(&t->r, "storage.udev", GDU_ST_FAIL);
    assert_true(has_evidence(f, "CU_FILE_HANDLE_NOT_REGISTERED (5027)"));
    assert_non_null(strstr(f->fix, "udevadm trigger"));
    assert_true(has_evidence(finding(&t->r, "storage.block", GDU_ST_FAIL),
                             "disk vda at PCI 0000:00:01.0 (not NVMe)"));
    /* 64-bit BAR0: BAR1 is region 2, as on the real H200 */
    assert_true(
        has_evidence(finding(&t->r, "gpu0.bar1", GDU_ST_OK), "resource region 2: 256.00 GiB"));
    assert_non_null(strstr(finding(&t->r, "gpu1.link", GDU_ST_OK)->title, "Gen5 x16"));
    assert_int_equal(t->r.n_pairs, 1);
    assert_string_equal(gdu_p2p_verdict_class(&t->r.pairs[0].verdict), "NVLink");
    done(t);
    t = fixture("h200x2-vm-virtio", NULL);
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    assert_true(has_reason(&t->r, "no NVMe drive"));
    /* without the RM's caps, CUDA's native peer atomics still say NVLink */
    for (size_t i = 0; i < t->sys.live.n_pairs; i++)
        t->sys.live.pairs[i].rm_known = false;
    gdu_report_free(&t->r);
    gdu_doctor_diagnose(&t->sys, NULL, &t->r);
    assert_int_equal(t->r.pairs[0].verdict.link, GDU_P2P_LINK_NVLINK);
    assert_non_null(strstr(t->r.pairs[0].verdict.reason, "inferred"));
    assert_true(
        has_evidence(finding(&t->r, "p2p.gpu0-gpu1", GDU_ST_OK), "RM P2P caps: not available"));
    for (size_t i = 0; i < t->sys.live.n_pairs; i++)
        t->sys.live.pairs[i].native_atomics = 0;
    gdu_report_free(&t->r);
    gdu_doctor_diagnose(&t->sys, NULL, &t->r);
    assert_string_equal(gdu_p2p_verdict_class(&t->r.pairs[0].verdict), "PCIe");
    /* nothing live at all: no verdict, and doctor says why */
    t->sys.live.origin = GDU_LIVE_ABSENT;
    t->sys.live.n_pairs = 0;
    gdu_report_free(&t->r);
    gdu_doctor_diagnose(&t->sys, NULL, &t->r);
    assert_true(t->r.pairs[0].verdict.undetermined);
    assert_string_equal(gdu_p2p_verdict_class(&t->r.pairs[0].verdict), "unknown");
    const gdu_finding *pair = finding(&t->r, "p2p.gpu0-gpu1", GDU_ST_UNKNOWN);
    assert_true(has_evidence(pair, "neither CUDA nor the RM answered"));
    assert_true(has_evidence(pair, "not asked: the capture has no live answers"));
    done(t);
}

/* The accelerator machine as `doctor --capture DIR /root` recorded it (the
 * capture of 2026-11-30, batch 4, on nvidia-h200-x2); skipped where absent. */
static void h200_capture_replays(void **state)
{
    if (access(FIXTURES "h200-vm/" GDU_LIVE_FILE, R_OK) != 0)
        skip();
    run_t *t = fixture("h200-vm", "/root");
    assert_true(t->r.driver_present);
    assert_true(has_evidence(finding(&t->r, "capture.live", GDU_ST_OK), "captured as user 0"));
    assert_string_equal(t->r.driver_version, "580.159.04");
    assert_int_equal(t->r.open_module, 1);
    assert_int_equal(t->r.n_gpus, 2);
    for (size_t i = 0; i < t->r.n_gpus; i++) {
        assert_string_equal(t->r.gpus[i].name, "NVIDIA H200");
        assert_int_equal(t->r.gpus[i].geforce, 0);
        assert_int_equal(t->r.gpus[i].bar1_bytes, 256ull << 30);
        /* cuDeviceTotalMem on the H200: 143155 MiB (nvidia-smi says 143771). */
        assert_int_equal(t->r.gpus[i].memory_bytes, 150109880320ull);
    }
    assert_int_equal(t->r.gds, GDU_GDS_IMPOSSIBLE);
    assert_true(has_reason(&t->r, "error 5027"));
    finding(&t->r, "storage.udev", GDU_ST_FAIL);
    finding(&t->r, "storage.block", GDU_ST_FAIL);
    /* the capture's empty slaves/ folder holds git's .keep: not a disk */
    assert_true(has_reason(&t->r, "not on NVMe (vda)"));
    finding(&t->r, "nvidia_fs.loaded", GDU_ST_FAIL);
    /* /etc/cufile.json -> /etc/alternatives/cufile.json -> /usr/local/cuda-13.0/gds/cufile.json,
     * absolute links: read from the capture, not from this machine's /etc */
    const gdu_finding *config = finding(&t->r, "cufile.config", GDU_ST_OK);
    assert_true(has_evidence(config, "allow_compat_mode: true"));
    assert_int_equal(t->r.n_pairs, 1);
    assert_string_equal(gdu_p2p_verdict_class(&t->r.pairs[0].verdict), "NVLink");
    done(t);
}

static void no_driver_says_so(void **state)
{
    char dir[] = "/tmp/gdu-empty-XXXXXX";
    assert_non_null(mkdtemp(dir));
    run_t *t = run(dir, NULL);
    assert_false(t->r.driver_present);
    assert_int_equal(t->r.gds, GDU_GDS_IMPOSSIBLE);
    assert_true(has_reason(&t->r, "no NVIDIA driver"));
    const gdu_finding *f = finding(&t->r, "driver.loaded", GDU_ST_FAIL);
    assert_true(has_evidence(f, "GPUDirect Storage and P2P are impossible"));
    json_t *j = gdu_report_to_json(&t->r);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "gds"), "verdict")),
                        "impossible");
    json_decref(j);
    done(t);
    rmdir(dir);
}

static void topo_matrix_cells(void **state)
{
    gdu_topo *topo = malloc(sizeof *topo);
    assert_non_null(topo);
    run_t *t = fixture("rtx4090x2-stock", NULL);
    gdu_topo_build(&t->sys, topo);
    assert_int_equal(topo->n_gpus, 2);
    assert_int_equal(topo->n_cols, 4);
    assert_string_equal(topo->cell[0][0], "X");
    assert_string_equal(topo->cell[0][1], "PIX");
    assert_string_equal(topo->cell[1][2], "PHB");
    assert_string_equal(topo->cols[2].name, "nvme0");
    assert_string_equal(topo->cols[3].name, "NIC0");
    assert_string_equal(topo->cols[3].detail, "enp6s0f0np0");
    done(t);
    t = fixture("rtx3060-nvfs-rebar", NULL);
    gdu_topo_build(&t->sys, topo);
    assert_int_equal(topo->cols[1].n_mounts, 1);
    assert_string_equal(topo->cols[1].mounts[0], "/data (ext4)");
    done(t);
    t = fixture("h200x2-vm-virtio", NULL);
    gdu_topo_build(&t->sys, topo);
    assert_string_equal(topo->cell[0][1], "NV");
    assert_string_equal(topo->cols[2].name, "NIC0");
    assert_string_equal(topo->cols[2].detail, "eth0"); /* virtio-net: virtio2/net/eth0 */
    assert_string_equal(topo->cell[0][2], "PHB");
    json_t *j = gdu_topo_to_json(topo);
    assert_non_null(j);
    json_decref(j);
    done(t);
    free(topo);
}

/* cuFile's PCI P2PDMA route: every precondition met, no nvidia-fs, direct. */
static void p2pdma_route_taken(void **state)
{
    run_t *t = fixture("l40s-p2pdma", "/data/model.safetensors");
    assert_int_equal(t->r.direct_path, GDU_PATH_P2PDMA);
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT);
    assert_true(has_reason(&t->r, "the kernel's PCI P2PDMA"));
    finding(&t->r, "nvidia_fs.loaded", GDU_ST_OK);
    assert_true(has_evidence(finding(&t->r, "p2pdma.kernel_config", GDU_ST_OK),
                             "/boot/config-6.8.0-49-generic: CONFIG_PCI_P2PDMA=y"));
    assert_true(has_evidence(finding(&t->r, "p2pdma.kernel_config", GDU_ST_OK),
                             "/proc/kallsyms has p2pdma_pgmap_ops"));
    finding(&t->r, "p2pdma.kernel_version", GDU_ST_OK);
    finding(&t->r, "p2pdma.nvme_multipath", GDU_ST_OK);
    finding(&t->r, "p2pdma.driver", GDU_ST_OK);
    finding(&t->r, "p2pdma.gpu0.kind", GDU_ST_OK);
    assert_true(has_evidence(finding(&t->r, "p2pdma.gpu0.static_bar1", GDU_ST_OK),
                             "RM: static BAR1 on, 48.00 GiB mapped"));
    finding(&t->r, "p2pdma.gpu0.write_combining", GDU_ST_OK);
    finding(&t->r, "p2pdma.cufile_json", GDU_ST_OK);
    done(t);
}

/* Every precondition unmet, each with its fix: neither path, compat only. */
static void p2pdma_route_unmet(void **state)
{
    run_t *t = fixture("l40s-p2pdma-unmet", "/data/model.safetensors");
    assert_int_equal(t->r.direct_path, GDU_PATH_NONE);
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    const gdu_finding *f = finding(&t->r, "p2pdma.kernel_config", GDU_ST_FAIL);
    assert_true(has_evidence(f, "# CONFIG_PCI_P2PDMA is not set"));
    assert_true(has_evidence(f, "NV_ERR_NOT_SUPPORTED"));
    assert_non_null(strstr(f->fix, "CONFIG_PCI_P2PDMA=y"));
    assert_non_null(strstr(finding(&t->r, "p2pdma.kernel_version", GDU_ST_FAIL)->fix, "6.2"));
    assert_non_null(
        strstr(finding(&t->r, "p2pdma.nvme_multipath", GDU_ST_FAIL)->fix, "multipath=N"));
    assert_non_null(
        strstr(finding(&t->r, "p2pdma.gpu0.static_bar1", GDU_ST_FAIL)->fix, "RMForceStaticBar1=1"));
    assert_non_null(strstr(finding(&t->r, "p2pdma.gpu0.write_combining", GDU_ST_FAIL)->fix,
                           "RmForceDisableIomapWC=1"));
    const gdu_finding *path = finding(&t->r, "cufile.direct_path", GDU_ST_FAIL);
    assert_non_null(strstr(path->title, "neither"));
    assert_true(has_evidence(path, "unmet: the kernel has PCI P2PDMA"));
    done(t);
}

/* A capture without the kernel's configuration and RM's static BAR1 answer:
 * the path is not decided, and the verdict stays compat (no better). */
static void p2pdma_route_unconfirmed(void **state)
{
    run_t *t = fixture("l40s-p2pdma-unconfirmed", "/data/model.safetensors");
    assert_int_equal(t->r.direct_path, GDU_PATH_UNDECIDED);
    assert_int_equal(t->r.gds, GDU_GDS_COMPAT);
    finding(&t->r, "p2pdma.kernel_config", GDU_ST_UNKNOWN);
    finding(&t->r, "p2pdma.gpu0.static_bar1", GDU_ST_UNKNOWN);
    finding(&t->r, "cufile.direct_path", GDU_ST_UNKNOWN);
    done(t);
    /* nvidia-fs loaded, P2PDMA not asked for: nvidia-fs; a GeForce never gets
     * P2PDMA. The route not taken is information, not a failure (nor
     * unknown) under a good verdict; the fix stays in the JSON. */
    t = fixture("l40s-nvfs", "/data/model.safetensors");
    assert_int_equal(t->r.direct_path, GDU_PATH_NVIDIA_FS);
    finding(&t->r, "p2pdma.cufile_json", GDU_ST_INFO);
    done(t);
    t = fixture("rtx3060-nvfs-rebar", "/data/model.safetensors");
    assert_int_equal(t->r.direct_path, GDU_PATH_NVIDIA_FS);
    assert_int_equal(t->r.gds, GDU_GDS_DIRECT_GDUNLOCK);
    assert_non_null(strstr(finding(&t->r, "p2pdma.gpu0.kind", GDU_ST_INFO)->fix, "nvidia-fs"));
    finding(&t->r, "p2pdma.kernel_config", GDU_ST_INFO);
    finding(&t->r, "p2pdma.driver", GDU_ST_OK);
    for (size_t i = 0; i < t->r.n_findings; i++)
        if (strcmp(t->r.findings[i].area, "p2pdma") == 0)
            assert_true(t->r.findings[i].status == GDU_ST_OK ||
                        t->r.findings[i].status == GDU_ST_INFO);
    done(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(p2pdma_route_taken),
        cmocka_unit_test(p2pdma_route_unmet),
        cmocka_unit_test(p2pdma_route_unconfirmed),
        cmocka_unit_test(rtx3060_direct_with_gdunlock),
        cmocka_unit_test(without_nvidia_fs_compat_only),
        cmocka_unit_test(small_bar1_is_a_caveat),
        cmocka_unit_test(acs_redirect_forces_compat),
        cmocka_unit_test(iommu_dma_forces_compat),
        cmocka_unit_test(nvme_on_other_socket),
        cmocka_unit_test(tmpfs_and_nfs_compat_only),
        cmocka_unit_test(missing_evidence_is_unknown),
        cmocka_unit_test(proprietary_old_driver),
        cmocka_unit_test(datacenter_gpu_goes_direct),
        cmocka_unit_test(lvm_over_md_over_nvme),
        cmocka_unit_test(rtx4090_stock_sku_lock),
        cmocka_unit_test(rtx4090_patched_bar1),
        cmocka_unit_test(rtx4090_gpus_identity_no_iommu_warning),
        cmocka_unit_test(h200_vm_cufile_5027),
        cmocka_unit_test(h200_capture_replays),
        cmocka_unit_test(no_driver_says_so),
        cmocka_unit_test(topo_matrix_cells),
        cmocka_unit_test(rdma_verdicts),
        cmocka_unit_test(rdma_findings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
