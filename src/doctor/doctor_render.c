/* doctor's report, both ways: the text for people and the JSON document. */
#include "doctor/doctor_render.h"

#include "util/json_text.h"
#include "util/text.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RED "\033[31m"
#define GREEN "\033[32m"
#define YELLOW "\033[33m"
#define CYAN "\033[36m"
#define BOLD "\033[1m"
#define RESET "\033[0m"

bool gdu_doctor_want_color(FILE *out)
{
    const char *no_color = getenv("NO_COLOR");
    return isatty(fileno(out)) && (no_color == NULL || no_color[0] == '\0');
}

static const char *paint(bool color, const char *code) { return color ? code : ""; }

/* lead, then text escaped, then a newline: every text that reaches the
 * report from outside (paths, a captured machine's files, driver strings)
 * goes through here. */
static void line(FILE *out, const char *lead, const char *text)
{
    fputs(lead, out);
    gdu_text_put(out, text);
    fputc('\n', out);
}

static const char *status_color(gdu_status s)
{
    static const char *const colors[] = {GREEN, YELLOW, RED, CYAN, CYAN};
    return (unsigned)s < 5 ? colors[s] : CYAN;
}

static const char *status_tag(gdu_status s)
{
    static const char *const tags[] = {" ok ", "warn", "FAIL", " ?? ", "info"};
    return (unsigned)s < 5 ? tags[s] : " ?? ";
}

static const char *verdict_color(gdu_gds_verdict v)
{
    static const char *const colors[] = {GREEN, GREEN, YELLOW, RED, CYAN};
    return (unsigned)v < 5 ? colors[v] : CYAN;
}

static void print_verdicts(FILE *out, const gdu_report *r, bool color)
{
    fprintf(out, "%sVERDICTS%s\n", paint(color, BOLD), paint(color, RESET));
    if (!r->driver_present) {
        fprintf(out,
                "  %sNo NVIDIA driver is present.%s This machine has no usable NVIDIA GPU, "
                "so GPUDirect Storage\n  and GPU P2P are impossible here. On a machine with "
                "an NVIDIA GPU, install and load\n  the NVIDIA driver (open kernel module "
                "555 or newer) and run doctor again.\n\n",
                paint(color, RED), paint(color, RESET));
    }
    static const char *const meaning[] = {
        "cuFile reads go from NVMe to GPU memory by DMA",
        "direct once the program runs under the shim: gdunlock run -- CMD",
        "cuFile works, but every read bounces through host memory",
        "cuFile cannot read this data; use plain reads and a copy to the GPU",
        "doctor cannot tell: evidence it needs is missing; the reasons say what to capture or run",
    };
    fputs("  GPUDirect Storage (", out);
    gdu_text_put(out, r->gds_target[0] ? r->gds_target : "-");
    fprintf(out, "): %s%s%s (%s)\n", paint(color, verdict_color(r->gds)),
            gdu_gds_verdict_text(r->gds), paint(color, RESET),
            meaning[r->gds <= GDU_GDS_UNKNOWN ? r->gds : GDU_GDS_UNKNOWN]);
    for (size_t i = 0; i < r->n_reasons; i++)
        line(out,
             r->reasons[i].note                       ? "    - note: "
             : r->reasons[i].level == GDU_GDS_UNKNOWN ? "    - unknown: "
                                                      : "    - ",
             r->reasons[i].text);
    if (r->n_reasons == 0)
        fprintf(out, "    - nothing stands in the way\n");
    for (size_t i = 0; i < r->n_pairs; i++) {
        const gdu_p2p_pair *p = &r->pairs[i];
        bool staged = p->verdict.link == GDU_P2P_LINK_NONE;
        fprintf(out, "  P2P GPU%d<->GPU%d: %s%s%s\n", p->a, p->b,
                paint(color, staged ? RED : GREEN), gdu_p2p_verdict_class(&p->verdict),
                paint(color, RESET));
        line(out, "    - ", p->verdict.reason);
        if (p->verdict.warning[0])
            line(out, "    - ", p->verdict.warning);
        if (p->verdict.fix[0])
            line(out, "    fix: ", p->verdict.fix);
    }
    fputc('\n', out);
}

void gdu_doctor_print_human(FILE *out, const gdu_report *r, const char *source, bool color)
{
    static const char *const areas[] = {"driver", "gpu",     "nvidia-fs", "cufile", "p2pdma",
                                        "iommu",  "storage", "pcie",      "p2p",    "rdma"};
    fprintf(out, "%sgdunlock doctor%s: ", paint(color, BOLD), paint(color, RESET));
    line(out, "", source);
    fputc('\n', out);
    print_verdicts(out, r, color);
    for (size_t a = 0; a < sizeof areas / sizeof areas[0]; a++) {
        bool header = false;
        for (size_t i = 0; i < r->n_findings; i++) {
            const gdu_finding *f = &r->findings[i];
            if (strcmp(f->area, areas[a]) != 0)
                continue;
            if (!header) {
                char upper[16];
                size_t k = 0;
                for (; areas[a][k] && k + 1 < sizeof upper; k++)
                    upper[k] = (char)(areas[a][k] >= 'a' && areas[a][k] <= 'z' ? areas[a][k] - 32
                                                                               : areas[a][k]);
                upper[k] = '\0';
                fprintf(out, "%s%s%s\n", paint(color, BOLD), upper, paint(color, RESET));
                header = true;
            }
            fprintf(out, "  [%s%s%s] ", paint(color, status_color(f->status)),
                    status_tag(f->status), paint(color, RESET));
            line(out, "", f->title);
            for (size_t e = 0; e < f->n_evidence; e++)
                line(out, "         ", f->evidence[e]);
            if (f->fix[0] && f->status != GDU_ST_OK && f->status != GDU_ST_INFO) {
                fprintf(out, "         %sfix:%s ", paint(color, BOLD), paint(color, RESET));
                line(out, "", f->fix);
            }
        }
        if (header)
            fputc('\n', out);
    }
}

json_t *gdu_doctor_to_json(const gdu_report *r, const char *source)
{
    json_t *j = gdu_report_to_json(r);
    if (j != NULL && gdu_json_set_text(j, "source", source) != 0)
        j = (json_decref(j), NULL);
    return j;
}
