/* What the RM answers is input from outside: arbitrary bytes as the answers
 * to our RM client's controls (attached GPU ids, PCI info, P2P caps V2), then
 * as the facts of a GPU pair and the outcome of its measured routes (any
 * state value, any detail text), through the caps decoder, the reason logic
 * and both renderers of the p2p report. Nothing may crash or read out of
 * bounds. */
#include "p2p/p2p_report.h"
#include "fuzz_p2p_input.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"
#include "rm/rm_p2p_caps.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fuzz_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    gdu_nv_ioctl_decode(request, &nr, &size);
    uint8_t status_byte;
    take(&status_byte, 1);
    if (nr == GDU_NV_ESC_RM_ALLOC) {
        gdu_nvos21 *p = arg;
        p->hObjectNew = 0xc1d00001;
        p->status = status_byte & 1;
    } else if (nr == GDU_NV_ESC_RM_CONTROL) {
        gdu_nvos54 *p = arg;
        take((void *)(uintptr_t)p->params, p->paramsSize);
        p->status = (status_byte & 7) == 7 ? status_byte : 0;
    }
    return 0;
}

static const gdu_rm_calls fuzz_calls = {fuzz_ioctl, close};

static gdu_tri tri(void)
{
    uint8_t b;
    take(&b, 1);
    return (gdu_tri)(b % 3) - 1;
}

/* The measured part: SM matrices, route states (also out of range) and
 * details, the SM error, and each route's reason. */
static void measured_routes(gdu_p2p_report *r)
{
    uint8_t b;
    take(&b, 1);
    r->measured = b & 1;
    gdu_p2p_results *res = &r->results;
    res->n = 2;
    res->sm_run = (b >> 1) & 1;
    take(&res->chase_nodes, sizeof res->chase_nodes);
    take(&res->sm_check_bytes, sizeof res->sm_check_bytes);
    gdu_p2p_matrix *m[] = {&res->sm_write_gbps, &res->sm_read_gbps, &res->sm_latency_us};
    for (size_t k = 0; k < 3; k++) {
        m[k]->n = 2;
        take(m[k]->cell[0], 2 * sizeof m[k]->cell[0][0]);
    }
    take(res->sm_error, sizeof res->sm_error);
    res->sm_error[sizeof res->sm_error - 1] = '\0';
    for (int k = 0; k < GDU_P2P_ROUTES; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                uint8_t st;
                take(&st, 1);
                res->route[k][i][j] = (gdu_p2p_route_state)(st % 7);
                char *d = res->route_detail[k][i][j];
                take(d, 8);
                d[8] = '\0';
                if (i == j)
                    gdu_p2p_facts_init(&r->pair[i][j].facts);
                gdu_p2p_route_reason(&r->pair[i][j].facts, i == j, (gdu_p2p_route)k,
                                     res->route[k][i][j], &r->pair[i][j].route[k]);
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_start(data, size);
    gdu_p2p_report *r = calloc(1, sizeof *r);
    if (r == NULL)
        return 0;
    char why[256];
    gdu_rm_client c;
    if (gdu_rm_client_open(&c, "/dev/null", &fuzz_calls, why, sizeof why) == 0) {
        gdu_rm_gpu gpus[GDU_RM_MAX_GPUS];
        size_t n = 0;
        gdu_rm_attached_gpus(&c, gpus, GDU_RM_MAX_GPUS, &n, why, sizeof why);
        gdu_rm_p2p_caps(&c, 1, 2, &r->pair[0][1].rm, why, sizeof why);
        gdu_rm_client_close(&c);
    }
    r->n = 2;
    for (int i = 0; i < 2; i++) {
        take(&r->gpu[i], sizeof r->gpu[i]);
        r->gpu[i].name[sizeof r->gpu[i].name - 1] = '\0';
        r->gpu[i].pci_bus_id[sizeof r->gpu[i].pci_bus_id - 1] = '\0';
        take(&r->bar1_bytes[i], sizeof r->bar1_bytes[i]);
    }
    for (int i = 0; i < 2; i++) {
        gdu_p2p_pair_report *p = &r->pair[i][1 - i];
        gdu_p2p_facts *f = &p->facts;
        gdu_p2p_facts_init(f);
        take(&p->cuda, sizeof p->cuda);
        if (i == 1)
            take(&p->rm, sizeof p->rm);
        p->rm_known = tri() == GDU_TRI_YES;
        f->rm_caps_known = p->rm_known;
        f->rm = p->rm;
        f->cuda_can_access = tri();
        f->enable_failed = tri();
        f->data_corrupt = tri();
        f->acs_redirect = tri();
        f->geforce = tri();
        uint8_t b[2];
        take(b, 2);
        f->topo = (gdu_p2p_topo)(b[0] % 7);
        f->iommu = (gdu_p2p_iommu)(b[1] % 5);
        take(f->bar1_bytes, sizeof f->bar1_bytes);
        take(f->vram_bytes, sizeof f->vram_bytes);
        take(&f->cc_major, sizeof f->cc_major);
        gdu_p2p_reason(f, &p->verdict);
    }
    measured_routes(r);
    FILE *sink = fopen("/dev/null", "w");
    if (sink != NULL) {
        gdu_p2p_print_report(sink, r, 1);
        fclose(sink);
    }
    json_t *doc = gdu_p2p_report_json(r);
    char *text = doc ? json_dumps(doc, 0) : NULL;
    free(text);
    json_decref(doc);
    free(r);
    return 0;
}
