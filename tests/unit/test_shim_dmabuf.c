/* The shim's own dma-buf export (shim_dmabuf.c, `gdunlock run --rdma`)
 * against the fake RM's model of the kernel's NV_ESC_EXPORT_TO_DMABUF_FD
 * (fake_rm.h cites nv.c, nv-dmabuf.c and osapi.c of 580.142): what the
 * kernel holds after the export (the memory handles, offsets and sizes the
 * dma-buf names) is the oracle, not the shim's answer. The GPU is a GeForce
 * as the fake RM plays it: libcuda makes no ThirdPartyP2P object, so the shim
 * unlocks it at the first mapping. */
#include "driverabi/nv503c.h"
#include "driverabi/nv_classes.h"
#include "driverabi/nv_status.h"
#include "fake_rm_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#define DRIVER "580.159.04\n"
#define MiB (1024ull * 1024)
#define VA(n) (0x7f0000000000ull + (uint64_t)(n)*256 * MiB)
#define MEM(n) (0x5c000a00u + (uint32_t)(n))

typedef struct {
    fake_rm *f;
    gdu_shim *s;
    lc_gpus g;
    char why[256];
} env;

static env *env_with(const char *driver, bool rdma, uint64_t fault_at, unsigned devices)
{
    env *e = calloc(1, sizeof *e);
    e->f = fake_rm_new();
    lc_setup(e->f);
    fake_rm_set_pci_bus(e->f, 0x41); /* the GPU's PCI address, as RM answers it */
    gdu_shim_config cfg = {.log_level = GDU_LOG_DEBUG,
                           .fault_at = fault_at,
                           .driver_version = driver,
                           .pid = FAKE_RM_PID,
                           .rdma_attr_answer = true,
                           .rdma_network = rdma};
    gdu_shim_ops ops = fake_rm_ops(e->f);
    e->s = gdu_shim_new(&cfg, &ops);
    lc_make_gpus(e->s, e->f, 0xc1d00001, devices, &e->g);
    return e;
}

static void env_free(env *e)
{
    gdu_shim_free(e->s);
    fake_rm_free(e->f);
    free(e);
}

static int export(env *e, uint64_t va, uint64_t size, unsigned long long flags)
{
    return gdu_shim_export_dmabuf(e->s, va, size, flags, e->why, sizeof e->why);
}

static json_t *gpu_dma_buf(env *e, json_t **report)
{
    *report = fake_rm_shim_report(e->s, false);
    return json_object_get(json_array_get(json_object_get(*report, "gpus"), 0), "dma_buf");
}

/* A cudaMalloc'd buffer inside one 64 MiB memory object: the dma-buf names
 * that object, at the buffer's offset in it. */
static void export_names_the_memory(void **state)
{
    env *e = env_with(DRIVER, true, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    int fd = export(e, VA(1) + 2 * MiB, 4 * MiB, 0);
    assert_true(fd >= 0);
    fake_dmabuf d;
    assert_true(fake_rm_dmabuf(e->f, fd, &d));
    assert_int_equal(d.client, e->g.client);
    assert_int_equal(d.instance, 0);
    assert_int_equal(d.total_objects, 1);
    assert_int_equal(d.attached, 1);
    assert_int_equal(d.total_size, 4 * MiB);
    assert_int_equal(d.memory[0], MEM(1));
    assert_int_equal(d.offset[0], 2 * MiB);
    assert_int_equal(d.size[0], 4 * MiB);
    json_t *r;
    json_t *db = gpu_dma_buf(e, &r);
    assert_int_equal(json_integer_value(json_object_get(db, "exports")), 1);
    assert_int_equal(json_integer_value(json_object_get(db, "failures")), 0);
    json_decref(r);
    close(fd);
    env_free(e);
}

/* A range over two memory objects mapped side by side (a VMM reservation
 * with two physical allocations): one handle each, with the mapping's own
 * offset into its object added. */
static void export_crosses_mappings(void **state)
{
    env *e = env_with(DRIVER, true, 0, 1);
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], MEM(1), GDU_NV01_MEMORY_LOCAL_USER, NULL),
        GDU_NV_OK);
    assert_int_equal(lc_map(e->s, e->g.client, MEM(1), VA(1), 64 * MiB, 0), GDU_NV_OK);
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.device[0], MEM(2), GDU_NV01_MEMORY_LOCAL_USER, NULL),
        GDU_NV_OK);
    /* the second half of MEM(2) mapped right after MEM(1) */
    assert_int_equal(lc_map(e->s, e->g.client, MEM(2), VA(1) + 64 * MiB, 32 * MiB, 32 * MiB),
                     GDU_NV_OK);
    int fd = export(e, VA(1) + 60 * MiB, 8 * MiB, 0);
    assert_true(fd >= 0);
    fake_dmabuf d;
    assert_true(fake_rm_dmabuf(e->f, fd, &d));
    assert_int_equal(d.attached, 2);
    assert_int_equal(d.memory[0], MEM(1));
    assert_int_equal(d.offset[0], 60 * MiB);
    assert_int_equal(d.size[0], 4 * MiB);
    assert_int_equal(d.memory[1], MEM(2));
    assert_int_equal(d.offset[1], 32 * MiB);
    assert_int_equal(d.size[1], 4 * MiB);
    close(fd);
    env_free(e);
}

/* More memory objects than one escape carries (128): the dma-buf is made by
 * the first call and completed by the next, each handle in its slot. */
static void export_many_objects(void **state)
{
    env *e = env_with(DRIVER, true, 0, 1);
    enum { N = 200 };
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(i + 1), VA(1) + i * 2 * MiB, 2 * MiB),
                         GDU_NV_OK);
    int fd = export(e, VA(1), N * 2 * MiB, 0);
    assert_true(fd >= 0);
    assert_int_equal(fake_rm_dmabuf_escapes(e->f), 2);
    fake_dmabuf d;
    assert_true(fake_rm_dmabuf(e->f, fd, &d));
    assert_int_equal(d.total_objects, N);
    assert_int_equal(d.attached, N);
    assert_int_equal(d.total_size, N * 2 * MiB);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(d.memory[i], MEM(i + 1));
        assert_int_equal(d.offset[i], 0);
        assert_int_equal(d.size[i], 2 * MiB);
    }
    close(fd);
    env_free(e);
}

/* What the shim refuses before any escape, each with its cause. */
static void export_refusals(void **state)
{
    env *e = env_with(DRIVER, false, 0, 2);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(export(e, VA(1), 4 * MiB, 0), -1); /* without --rdma: today's behaviour */
    assert_non_null(strstr(e->why, "--rdma"));
    env_free(e);

    e = env_with(DRIVER, true, 0, 2);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 1, MEM(2), VA(1) + 64 * MiB, 64 * MiB),
                     GDU_NV_OK);
    assert_int_equal(export(e, VA(1) + 100, 4 * MiB, 0), -1);
    assert_non_null(strstr(e->why, "whole pages"));
    assert_int_equal(export(e, VA(1), 0, 0), -1);
    assert_int_equal(export(e, VA(3), 4 * MiB, 0), -1); /* nothing mapped there */
    assert_non_null(strstr(e->why, "not GPU memory"));
    assert_int_equal(export(e, VA(1) + 62 * MiB, 4 * MiB, 0), -1); /* into the other GPU */
    assert_non_null(strstr(e->why, "another"));
    assert_int_equal(export(e, VA(1) + 124 * MiB, 8 * MiB, 0), -1); /* past the end */
    assert_int_equal(export(e, VA(1), 4 * MiB, 1), -1);             /* PCIe mapping flag */
    assert_non_null(strstr(e->why, "coherent"));
    assert_int_equal(fake_rm_dmabuf_escapes(e->f), 0);
    env_free(e);

    /* A GPU where libcuda made its own ThirdPartyP2P object (datacenter):
     * libcuda's dma-buf answer stands. */
    e = env_with(DRIVER, true, 0, 1);
    gdu_nv503c_alloc_params ap = {GDU_NV503C_ALLOC_FLAGS_TYPE_BAR1};
    assert_int_equal(
        lc_alloc(e->s, e->g.client, e->g.subdevice[0], 0x5c0000f0, GDU_NV50_THIRD_PARTY_P2P, &ap),
        GDU_NV_OK);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(export(e, VA(1), 4 * MiB, 0), -1);
    assert_non_null(strstr(e->why, "not one the shim unlocks"));
    assert_int_equal(fake_rm_dmabuf_escapes(e->f), 0);
    env_free(e);
}

/* The kernel's refusals reach the caller named; a kernel without dma-buf
 * support turns the DMA-BUF attribute back to libcuda's 0. */
static void export_kernel_refusals(void **state)
{
    env *e = env_with(DRIVER, true, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 0, "0000:41:00.0", "libnccl.so.2"), 1);
    fake_rm_set_dmabuf_supported(e->f, false);
    assert_int_equal(export(e, VA(1), 4 * MiB, 0), -1);
    assert_non_null(strstr(e->why, "NV_ERR_NOT_SUPPORTED"));
    json_t *r;
    json_t *db = gpu_dma_buf(e, &r);
    assert_int_equal(json_integer_value(json_object_get(db, "failures")), 1);
    assert_true(json_is_true(json_object_get(db, "unsupported")));
    assert_non_null(
        strstr(json_string_value(json_object_get(db, "last_refusal")), "NOT_SUPPORTED"));
    json_decref(r);
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 0, "0000:41:00.0", "libnccl.so.2"), 0);
    env_free(e);

    /* The file of another GPU: the memory is not that GPU's. */
    e = env_with(DRIVER, true, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    fake_rm_set_gpu_file_instance(e->f, 1);
    assert_int_equal(export(e, VA(1), 4 * MiB, 0), -1);
    assert_non_null(strstr(e->why, "NV_ERR_INVALID_OBJECT_PARENT"));
    assert_int_equal(fake_rm_dmabufs(e->f), 0);
    env_free(e);
}

/* 200 memory objects of 2 MiB side by side from VA(1). */
static void map_200(env *e)
{
    for (unsigned i = 0; i < 200; i++)
        assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(i + 1), VA(1) + i * 2 * MiB, 2 * MiB),
                         GDU_NV_OK);
}

/* A failure in either escape of a 200-object export (the first makes the
 * dma-buf, the second completes it) leaves no dma-buf behind: nothing
 * half-made is handed out. */
static void export_fault_leaves_nothing(void **state)
{
    env *e = env_with(DRIVER, true, 0, 1);
    map_200(e);
    gdu_shim_totals t;
    gdu_shim_get_totals(e->s, &t); /* the unlock's own RM calls so far */
    env_free(e);
    for (uint64_t escape = 1; escape <= 2; escape++) {
        e = env_with(DRIVER, true, t.rm_calls + escape, 1);
        map_200(e);
        assert_int_equal(export(e, VA(1), 400 * MiB, 0), -1);
        assert_non_null(strstr(e->why, "fault injected"));
        assert_int_equal(fake_rm_dmabuf_escapes(e->f), escape - 1);
        assert_int_equal(fake_rm_dmabufs(e->f), 0);
        env_free(e);
    }
}

/* Before 570.86.15 the block has no mappingType (2600 bytes): the shim
 * sends the layout of the driver it runs on, which the kernel takes only at
 * its exact size. */
static void export_layout_by_driver(void **state)
{
    env *e = env_with("560.35.03\n", true, 0, 1);
    fake_rm_set_dmabuf_layout_515(e->f, true);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    int fd = export(e, VA(1) + 8 * MiB, 16 * MiB, 0);
    assert_true(fd >= 0);
    fake_dmabuf d;
    assert_true(fake_rm_dmabuf(e->f, fd, &d));
    assert_int_equal(d.memory[0], MEM(1));
    assert_int_equal(d.offset[0], 8 * MiB);
    assert_int_equal(d.size[0], 16 * MiB);
    close(fd);
    env_free(e);

    /* The 580 block sent to that kernel fails as the kernel fails it. */
    e = env_with(DRIVER, true, 0, 1);
    fake_rm_set_dmabuf_layout_515(e->f, true);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(export(e, VA(1), 4 * MiB, 0), -1);
    assert_non_null(strstr(e->why, "Invalid argument"));
    env_free(e);
}

/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: libcuda's value unless --rdma, then
 * 1 on a GPU the shim unlocks; under the stand-in libcuda's 1 reads 0 first. */
static void dma_buf_attribute(void **state)
{
    env *e = env_with(DRIVER, false, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 0, "0000:41:00.0", "libnccl.so.2"), 0);
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 1, "0000:41:00.0", "libnccl.so.2"), 1);
    env_free(e);

    e = env_with(DRIVER, true, 0, 1);
    assert_int_equal(lc_alloc_mapped(e->s, &e->g, 0, MEM(1), VA(1), 64 * MiB), GDU_NV_OK);
    assert_int_equal(gdu_shim_dma_buf_attribute(e->s, 0, "0000:41:00.0", "libnccl.so.2"), 1);
    json_t *r = fake_rm_shim_report(e->s, false);
    json_t *a = json_object_get(r, "dma_buf_attribute");
    assert_int_equal(json_integer_value(json_object_get(a, "answered_1_for_network")), 1);
    json_decref(r);
    env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(export_names_the_memory), cmocka_unit_test(export_crosses_mappings),
        cmocka_unit_test(export_many_objects),     cmocka_unit_test(export_refusals),
        cmocka_unit_test(export_kernel_refusals),  cmocka_unit_test(export_fault_leaves_nothing),
        cmocka_unit_test(export_layout_by_driver), cmocka_unit_test(dma_buf_attribute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
