/* `gdunlock p2p --json`: the report as one JSON document (jansson). Matrices
 * are arrays of rows (source GPU) of columns (destination GPU), null where
 * nothing was measured. */
#include "p2p/p2p_report.h"
#include "p2p/p2p_verdict_json.h"
#include "probe/driver_probe.h"
#include "util/json_text.h"

#include <jansson.h>

static json_t *stat_matrix(const gdu_p2p_matrix *m, int which)
{
    json_t *rows = json_array();
    for (int i = 0; i < m->n; i++) {
        json_t *row = json_array();
        for (int j = 0; j < m->n; j++) {
            const gdu_p2p_stat *s = &m->cell[i][j];
            double v = which == 0 ? s->median : which == 1 ? s->min : s->max;
            json_array_append_new(row, s->valid ? json_real(v) : json_null());
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

static json_t *matrix(const gdu_p2p_matrix *m)
{
    return json_pack("{s:o, s:o, s:o}", "median", stat_matrix(m, 0), "min", stat_matrix(m, 1),
                     "max", stat_matrix(m, 2));
}

static json_t *by_mode(const gdu_p2p_matrix m[GDU_P2P_MODES])
{
    return json_pack("{s:o, s:o}", "p2p_disabled", matrix(&m[GDU_P2P_MODE_DISABLED]), "p2p_enabled",
                     matrix(&m[GDU_P2P_MODE_ENABLED]));
}

static json_t *int_matrix(const int m[GDU_P2P_MAX_GPUS][GDU_P2P_MAX_GPUS], int n)
{
    json_t *rows = json_array();
    for (int i = 0; i < n; i++) {
        json_t *row = json_array();
        for (int j = 0; j < n; j++)
            json_array_append_new(row, json_boolean(m[i][j]));
        json_array_append_new(rows, row);
    }
    return rows;
}

static json_t *gpus(const gdu_p2p_report *r)
{
    json_t *a = json_array();
    for (int i = 0; i < r->n; i++) {
        const gdu_p2p_gpu *g = &r->gpu[i];
        /* The driver's bytes, made UTF-8 (a fake or damaged name must not
         * void the document). */
        json_t *o = json_pack("{s:i, s:o, s:o, s:I, s:o, s:b}", "ordinal", g->ordinal, "name",
                              gdu_json_text(g->name), "pci_bus_id", gdu_json_text(g->pci_bus_id),
                              "memory_bytes", (json_int_t)g->memory_bytes, "compute_capability",
                              json_sprintf("%d.%d", g->cc_major, g->cc_minor), "geforce",
                              gdu_gpu_name_geforce(g->name) == GDU_TRI_YES);
        json_object_set_new(o, "bar1_bytes",
                            r->bar1_bytes[i] ? json_integer((json_int_t)r->bar1_bytes[i])
                                             : json_null());
        json_object_set_new(o, "rm_gpu_id",
                            r->rm_known[i] ? json_integer(r->rm_gpu_id[i]) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *rm_caps(const gdu_p2p_rm_caps *c)
{
    const char *names[32];
    size_t n = gdu_p2p_caps_bit_names(c->caps, names, 32);
    json_t *bits = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(bits, json_string(names[k]));
    json_t *status = json_object();
    for (unsigned k = 0; k < GDU_P2P_CAPS_INDEX_COUNT; k++)
        json_object_set_new(status, gdu_p2p_caps_index_name(k),
                            json_string(gdu_p2p_caps_status_id(c->status[k])));
    return json_pack(
        "{s:s, s:I, s:o, s:o, s:I, s:I}", "link", gdu_p2p_link_id(gdu_p2p_caps_link(c->caps)),
        "caps_raw", (json_int_t)c->caps, "caps", bits, "status", status, "optimal_read_ces",
        (json_int_t)c->optimal_read_ces, "optimal_write_ces", (json_int_t)c->optimal_write_ces);
}

/* One of CUDA's answers: null where it did not answer (-1). */
static json_t *answer(int v, bool boolean)
{
    return v < 0 ? json_null() : boolean ? json_boolean(v) : json_integer(v);
}

static json_t *pairs(const gdu_p2p_report *r)
{
    json_t *a = json_array();
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            if (i == j)
                continue;
            const gdu_p2p_pair_report *p = &r->pair[i][j];
            const gdu_p2p_verdict *v = &p->verdict;
            json_t *cuda = json_pack("{s:o, s:o, s:o, s:o, s:o}", "can_access_peer",
                                     answer(p->cuda.can_access, true), "performance_rank",
                                     answer(p->cuda.performance_rank, false), "access_supported",
                                     answer(p->cuda.access_supported, true), "native_atomics",
                                     answer(p->cuda.native_atomics, true), "cuda_array_access",
                                     answer(p->cuda.cuda_array_access, true));
            json_t *o = json_pack(
                "{s:i, s:i, s:o, s:o, s:o, s:s}", "src", r->gpu[i].ordinal, "dst",
                r->gpu[j].ordinal, "cuda", cuda, "rm", p->rm_known ? rm_caps(&p->rm) : json_null(),
                "verdict", gdu_p2p_verdict_json(v), "topology", gdu_p2p_topo_name(p->facts.topo));
            json_array_append_new(a, o);
        }
    return a;
}

static json_t *route_json(const gdu_p2p_report *r, int k, int i, int j)
{
    const gdu_p2p_results *res = &r->results;
    const gdu_p2p_verdict *v = &r->pair[i][j].route[k];
    gdu_p2p_route_state st = res->route[k][i][j];
    json_t *o = json_pack("{s:s, s:s}", "state", gdu_p2p_route_state_id(st), "detail",
                          res->route_detail[k][i][j]);
    if (st != GDU_P2P_ROUTE_NOT_RUN) {
        json_object_set_new(o, "cause", json_string(gdu_p2p_cause_id(v->cause)));
        json_object_set_new(o, "reason", json_string(v->reason));
        json_object_set_new(o, "fix", json_string(v->fix));
    }
    return o;
}

/* Every ordered pair, the diagonal included: each route's check and reason. */
static json_t *routes(const gdu_p2p_report *r)
{
    const gdu_p2p_results *res = &r->results;
    json_t *a = json_array();
    for (int i = 0; i < res->n; i++)
        for (int j = 0; j < res->n; j++) {
            json_t *o = json_pack("{s:i, s:i}", "src", res->ordinals[i], "dst", res->ordinals[j]);
            for (int k = 0; k < GDU_P2P_ROUTES; k++)
                json_object_set_new(o, gdu_p2p_route_id((gdu_p2p_route)k), route_json(r, k, i, j));
            json_array_append_new(a, o);
        }
    return a;
}

static json_t *sm(const gdu_p2p_results *res)
{
    if (!res->sm_run)
        return json_null();
    return json_pack("{s:s?, s:I, s:I, s:I, s:{s:o, s:o}, s:{s:o}}", "error",
                     res->sm_error[0] ? res->sm_error : NULL, "check_bytes",
                     (json_int_t)res->sm_check_bytes, "chase_nodes", (json_int_t)res->chase_nodes,
                     "chase_hops", (json_int_t)res->chase_hops, "bandwidth_gbps", "write",
                     matrix(&res->sm_write_gbps), "read", matrix(&res->sm_read_gbps), "latency_us",
                     "chase", matrix(&res->sm_latency_us));
}

/* An error message (it may quote a GPU's name): null when empty. */
static json_t *optional_text(const char *s) { return s[0] ? gdu_json_text(s) : json_null(); }

static json_t *measurements(const gdu_p2p_report *r)
{
    const gdu_p2p_results *res = &r->results;
    return json_pack(
        "{s:{s:o, s:o}, s:{s:o, s:o}, s:{s:o, s:o, s:o}, s:{s:I, s:I, s:b}, s:o, s:o}",
        "bandwidth_gbps", "unidirectional", by_mode(res->uni_gbps), "bidirectional",
        by_mode(res->bidi_gbps), "latency_us", "gpu_timed", by_mode(res->lat_gpu_us), "cpu_timed",
        by_mode(res->lat_cpu_us), "peer_access", "can_access", int_matrix(res->can_access, res->n),
        "enabled", int_matrix(res->peer_enabled, res->n), "enable_error",
        optional_text(res->enable_error), "verification", "buffers_checked",
        (json_int_t)res->buffers_checked, "buffers_corrupt", (json_int_t)res->buffers_corrupt, "ok",
        res->buffers_corrupt == 0, "sm", sm(res), "routes", routes(r));
}

json_t *gdu_p2p_report_json(const gdu_p2p_report *r)
{
    json_t *doc = json_pack(
        "{s:s, s:o, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:o}", "command", "p2p",
        "command_line", gdu_json_text(r->command_line), "version", GDUNLOCK_VERSION, "date",
        r->date, "size_bytes", (json_int_t)r->bench.bytes, "iters", (int)r->bench.iters, "reps",
        (int)r->bench.reps, "latency_reps", (int)r->bench.latency_reps, "latency_bytes", 4, "gpus",
        gpus(r), "pairs", pairs(r), "rm_caps_error", optional_text(r->rm_error), "bench_error",
        optional_text(r->bench_error));
    if (doc == NULL)
        return NULL;
    json_object_set_new(doc, "measured", r->measured ? measurements(r) : json_null());
    return doc;
}
