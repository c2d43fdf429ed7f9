/* Human output of `gdunlock p2p`: GPU list, capability per ordered pair with
 * the reason and fix where P2P is missing, then the measured matrices in
 * p2pBandwidthLatencyTest's layout (rows = source "D\D", columns = destination).
 * Text from outside (GPU names and PCI ids, from the driver or a capture;
 * the command line; reasons and errors that quote them) goes through
 * util/text.h's escape. */
#include "p2p/p2p_report.h"

#include "util/text.h"
#include "util/units.h"

#include <stdio.h>
#include <string.h>

#define GREEN "\033[32m"
#define RED "\033[31m"
#define YELLOW "\033[33m"
#define RESET "\033[0m"

void gdu_p2p_print_matrix(FILE *out, const char *title, const gdu_p2p_matrix *m,
                          const int *ordinals, int decimals, int spread)
{
    fprintf(out, "%s\n%6s", title, "D\\D");
    for (int j = 0; j < m->n; j++)
        fprintf(out, "%10d", ordinals[j]);
    fputc('\n', out);
    for (int i = 0; i < m->n; i++) {
        fprintf(out, "%6d", ordinals[i]);
        for (int j = 0; j < m->n; j++) {
            const gdu_p2p_stat *s = &m->cell[i][j];
            if (s->valid)
                fprintf(out, "%10.*f", decimals, s->median);
            else
                fprintf(out, "%10s", "-");
        }
        fputc('\n', out);
    }
    if (!spread)
        return;
    fprintf(out, "%6s spread of the samples [min..max]\n", "");
    for (int i = 0; i < m->n; i++) {
        fprintf(out, "%6d", ordinals[i]);
        for (int j = 0; j < m->n; j++) {
            const gdu_p2p_stat *s = &m->cell[i][j];
            char cell[64] = "-";
            if (s->valid)
                snprintf(cell, sizeof cell, "[%.*f..%.*f]", decimals, s->min, decimals, s->max);
            fprintf(out, " %21s", cell);
        }
        fputc('\n', out);
    }
}

/* The bytes of s that fit max bytes without cutting a UTF-8 sequence. */
static size_t cut_utf8(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return n;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return max;
}

/* "text: <what>" with what escaped, then a newline. */
static void put_line(FILE *out, const char *text, const char *what)
{
    fputs(text, out);
    gdu_text_put(out, what);
    fputc('\n', out);
}

/* " <reason><detail>\n           fix: <fix>\n", outside text escaped. */
static void put_reason(FILE *out, const gdu_p2p_verdict *v, const char *detail)
{
    fputc(' ', out);
    gdu_text_put(out, v->reason);
    if (detail != NULL && detail[0]) {
        fputs(" (", out);
        gdu_text_put(out, detail);
        fputc(')', out);
    }
    put_line(out, "\n           fix: ", v->fix);
}

static void print_gpus(FILE *out, const gdu_p2p_report *r)
{
    fprintf(out, "%-4s %-28s %-14s %12s %12s %5s %10s\n", "GPU", "name", "PCI", "memory", "BAR1",
            "cc", "RM gpuId");
    for (int i = 0; i < r->n; i++) {
        const gdu_p2p_gpu *g = &r->gpu[i];
        char mem[32], bar1[32] = "?", id[16] = "?", cc[16];
        gdu_format_bytes(g->memory_bytes, mem, sizeof mem);
        if (r->bar1_bytes[i])
            gdu_format_bytes(r->bar1_bytes[i], bar1, sizeof bar1);
        if (r->rm_known[i])
            snprintf(id, sizeof id, "0x%x", r->rm_gpu_id[i]);
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        fprintf(out, "%-4d ", g->ordinal);
        gdu_text_pad(out, g->name, cut_utf8(g->name, 28), 28);
        fputc(' ', out);
        gdu_text_pad(out, g->pci_bus_id, strlen(g->pci_bus_id), 14);
        fprintf(out, " %12s %12s %5s %10s\n", mem, bar1, cc, id);
    }
}

static const char *yes_no(int v) { return v < 0 ? "?" : v ? "yes" : "no"; }

/* The row of ordered pair i -> j: CUDA's attributes, the RM's link and
 * read/write status, and the verdict. */
static void print_caps_row(FILE *out, const gdu_p2p_report *r, int i, int j, int colour)
{
    const gdu_p2p_pair_report *p = &r->pair[i][j];
    char pair[16];
    snprintf(pair, sizeof pair, "%d -> %d", r->gpu[i].ordinal, r->gpu[j].ordinal);
    const char *link = "?";
    char status[64] = "?";
    if (p->rm_known) {
        uint8_t rd = p->rm.status[GDU_P2P_CAPS_INDEX_READ];
        uint8_t wr = p->rm.status[GDU_P2P_CAPS_INDEX_WRITE];
        link = gdu_p2p_link_name(gdu_p2p_caps_link(p->rm.caps));
        if (rd == wr)
            snprintf(status, sizeof status, "%s", gdu_p2p_caps_status_id(rd));
        else
            snprintf(status, sizeof status, "r:%s w:%s", gdu_p2p_caps_status_id(rd),
                     gdu_p2p_caps_status_id(wr));
    }
    int ok = p->verdict.cause == GDU_P2P_CAUSE_NONE;
    char verdict[64];
    if (!ok)
        snprintf(verdict, sizeof verdict, "no (staged through host)");
    else if (p->verdict.link == GDU_P2P_LINK_UNKNOWN)
        snprintf(verdict, sizeof verdict, "yes (path unknown)");
    else
        snprintf(verdict, sizeof verdict, "%s", gdu_p2p_link_name(p->verdict.link));
    char rank[12] = "?";
    if (p->cuda.performance_rank >= 0)
        snprintf(rank, sizeof rank, "%d", p->cuda.performance_rank);
    fprintf(out, "%-8s %-9s %-5s %-8s %-20.20s %-28s %s%s%s\n", pair, yes_no(p->cuda.can_access),
            rank, yes_no(p->cuda.native_atomics), link, status, colour ? (ok ? GREEN : RED) : "",
            verdict, colour ? RESET : "");
}

/* Why each refused pair is refused, and each pair's warning. */
static void print_caps_reasons(FILE *out, const gdu_p2p_report *r, int colour)
{
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++) {
            const gdu_p2p_verdict *v = &r->pair[i][j].verdict;
            if (i == j || (v->cause == GDU_P2P_CAUSE_NONE && v->warning[0] == '\0'))
                continue;
            fprintf(out, "  %d -> %d ", r->gpu[i].ordinal, r->gpu[j].ordinal);
            if (v->cause != GDU_P2P_CAUSE_NONE) {
                fprintf(out, "%s[%s]%s", colour ? RED : "", gdu_p2p_cause_id(v->cause),
                        colour ? RESET : "");
                put_reason(out, v, NULL);
            } else {
                fprintf(out, "%swarning:%s ", colour ? YELLOW : "", colour ? RESET : "");
                put_line(out, "", v->warning);
            }
        }
}

static void print_caps(FILE *out, const gdu_p2p_report *r, int colour)
{
    fprintf(out, "\nP2P capability per ordered pair (CUDA attributes, the RM's caps, verdict)\n");
    fprintf(out, "%-8s %-9s %-5s %-8s %-20s %-28s %s\n", "pair", "CUDA peer", "rank", "atomics",
            "RM link", "RM read/write status", "P2P");
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->n; j++)
            if (i != j)
                print_caps_row(out, r, i, j, colour);
    print_caps_reasons(out, r, colour);
    if (r->rm_error[0])
        put_line(out, "  RM caps unavailable: ", r->rm_error);
    fprintf(out, "\nP2P Connectivity Matrix (CUDA can-access-peer)\n%6s", "D\\D");
    for (int j = 0; j < r->n; j++)
        fprintf(out, "%6d", r->gpu[j].ordinal);
    fputc('\n', out);
    for (int i = 0; i < r->n; i++) {
        fprintf(out, "%6d", r->gpu[i].ordinal);
        for (int j = 0; j < r->n; j++)
            fprintf(out, "%6d", i == j || r->pair[i][j].cuda.can_access);
        fputc('\n', out);
    }
}

static void print_measurements(FILE *out, const gdu_p2p_report *r)
{
    const gdu_p2p_results *res = &r->results;
    static const char *const mode_name[GDU_P2P_MODES] = {"Disabled", "Enabled"};
    char title[160];
    for (int m = 0; m < GDU_P2P_MODES; m++) {
        snprintf(title, sizeof title, "\nUnidirectional P2P=%s Bandwidth Matrix (GB/s, median)",
                 mode_name[m]);
        gdu_p2p_print_matrix(out, title, &res->uni_gbps[m], res->ordinals, 2, 1);
    }
    for (int m = 0; m < GDU_P2P_MODES; m++) {
        snprintf(title, sizeof title, "\nBidirectional P2P=%s Bandwidth Matrix (GB/s, median)",
                 mode_name[m]);
        gdu_p2p_print_matrix(out, title, &res->bidi_gbps[m], res->ordinals, 2, 1);
    }
    for (int m = 0; m < GDU_P2P_MODES; m++) {
        snprintf(title, sizeof title,
                 "\nP2P=%s Latency Matrix, GPU-timed (us per 4-byte copy, median)", mode_name[m]);
        gdu_p2p_print_matrix(out, title, &res->lat_gpu_us[m], res->ordinals, 2, 1);
    }
    for (int m = 0; m < GDU_P2P_MODES; m++) {
        snprintf(title, sizeof title,
                 "\nP2P=%s Latency Matrix, CPU-timed (us per 4-byte copy + synchronize, median)",
                 mode_name[m]);
        gdu_p2p_print_matrix(out, title, &res->lat_cpu_us[m], res->ordinals, 2, 1);
    }
    if (res->enable_error[0]) {
        fputs("\nEnabling peer access failed: ", out);
        gdu_text_put(out, res->enable_error);
        fputs(" (those cells stayed staged)\n", out);
    }
    fprintf(out,
            "\nData check: %u buffers compared with their source pattern: ", res->buffers_checked);
    if (res->buffers_corrupt == 0)
        fprintf(out, "all matched\n");
    else
        fprintf(out, "%u WRONG\n", res->buffers_corrupt);
}

static void print_sm_matrices(FILE *out, const gdu_p2p_results *res)
{
    char title[256];
    gdu_p2p_print_matrix(out,
                         "\nSM Write Bandwidth Matrix (GB/s, median; copy kernel on the source GPU "
                         "storing into the destination)",
                         &res->sm_write_gbps, res->ordinals, 2, 1);
    gdu_p2p_print_matrix(out,
                         "\nSM Read Bandwidth Matrix (GB/s, median; copy kernel on the destination "
                         "GPU loading from the source)",
                         &res->sm_read_gbps, res->ordinals, 2, 1);
    snprintf(title, sizeof title,
             "\nSM Pointer-Chase Latency Matrix (us per dependent 8-byte load, median; row = GPU "
             "loading, column = GPU holding the chain of %llu nodes; %llu loads per sample)",
             res->chase_nodes, res->chase_hops);
    gdu_p2p_print_matrix(out, title, &res->sm_latency_us, res->ordinals, 3, 1);
}

static void print_routes(FILE *out, const gdu_p2p_report *r, int colour)
{
    const gdu_p2p_results *res = &r->results;
    char size[32];
    gdu_format_bytes(res->sm_check_bytes, size, sizeof size);
    fprintf(out,
            "\nRoute checks (a known pattern through each route, read back through the "
            "memory's owner: SM routes %s each, copy engine = the P2P=Enabled copies)\n",
            size);
    fprintf(out, "%-8s", "pair");
    for (int k = 0; k < GDU_P2P_ROUTES; k++)
        fprintf(out, " %-*s", k + 1 < GDU_P2P_ROUTES ? 12 : 0,
                gdu_p2p_route_name((gdu_p2p_route)k));
    fputc('\n', out);
    for (int i = 0; i < res->n; i++)
        for (int j = 0; j < res->n; j++) {
            char pair[16];
            snprintf(pair, sizeof pair, "%d -> %d", res->ordinals[i], res->ordinals[j]);
            fprintf(out, "%-8s", pair);
            for (int k = 0; k < GDU_P2P_ROUTES; k++) {
                gdu_p2p_route_state st = res->route[k][i][j];
                int bad = st == GDU_P2P_ROUTE_FAULT || st == GDU_P2P_ROUTE_WRONG;
                const char *on = !colour ? "" : st == GDU_P2P_ROUTE_OK ? GREEN : bad ? RED : "";
                fprintf(out, " %s%-*s%s", on, k + 1 < GDU_P2P_ROUTES ? 12 : 0,
                        gdu_p2p_route_state_id(st), *on ? RESET : "");
            }
            fputc('\n', out);
        }
    /* Reasons: failed routes, and routes without peer access on a pair that has P2P
     * (otherwise the pair's own refusal above says it). */
    for (int i = 0; i < res->n; i++)
        for (int j = 0; j < res->n; j++)
            for (int k = 0; k < GDU_P2P_ROUTES; k++) {
                gdu_p2p_route_state st = res->route[k][i][j];
                const gdu_p2p_verdict *v = &r->pair[i][j].route[k];
                int pair_ok = i == j || r->pair[i][j].verdict.cause == GDU_P2P_CAUSE_NONE;
                if (!(st == GDU_P2P_ROUTE_FAULT || st == GDU_P2P_ROUTE_WRONG ||
                      (st == GDU_P2P_ROUTE_NO_PEER && pair_ok)))
                    continue;
                fprintf(out, "  %d -> %d %s: %s[%s]%s", res->ordinals[i], res->ordinals[j],
                        gdu_p2p_route_name((gdu_p2p_route)k), colour ? RED : "",
                        gdu_p2p_cause_id(v->cause), colour ? RESET : "");
                put_reason(out, v, res->route_detail[k][i][j]);
            }
    if (res->sm_error[0])
        put_line(out, "  SM part: ", res->sm_error);
}

static void print_sm(FILE *out, const gdu_p2p_report *r, int colour)
{
    if (!r->results.sm_run) {
        fprintf(out, "\nSM routes: not measured (--no-sm)\n");
        return;
    }
    print_sm_matrices(out, &r->results);
    print_routes(out, r, colour);
}

void gdu_p2p_print_report(FILE *out, const gdu_p2p_report *r, int colour)
{
    char size[32];
    gdu_format_bytes(r->bench.bytes, size, sizeof size);
    if (r->measured || r->bench_error[0])
        fprintf(out, "gdunlock p2p: %d GPU%s, %s copies, %u samples of %u copies per cell, %s\n\n",
                r->n, r->n == 1 ? "" : "s", size, r->bench.iters, r->bench.reps, r->date);
    else
        fprintf(out, "gdunlock p2p: %d GPU%s, capability only, %s\n\n", r->n, r->n == 1 ? "" : "s",
                r->date);
    if (r->command_line[0]) {
        put_line(out, "command: ", r->command_line);
        fputc('\n', out);
    }
    print_gpus(out, r);
    if (r->n == 1)
        fprintf(out,
                "\nOnly one GPU: there is no pair to test (the diagonal below is the copy "
                "within GPU %d).\n",
                r->gpu[0].ordinal);
    else
        print_caps(out, r, colour);
    if (r->measured) {
        print_measurements(out, r);
        print_sm(out, r, colour);
    }
    if (r->bench_error[0])
        put_line(out, "\nMeasurement stopped: ", r->bench_error);
}
