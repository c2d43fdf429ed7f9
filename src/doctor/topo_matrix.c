#include "doctor/topo_matrix.h"
#include "util/json_text.h"
#include "util/text.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static gdu_topo_col *add_col(gdu_topo *t, gdu_topo_kind kind, const gdu_pci_dev *d)
{
    if (t->n_cols >= GDU_TOPO_MAX_COLS)
        return NULL;
    gdu_topo_col *c = &t->cols[t->n_cols++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    snprintf(c->bdf, sizeof c->bdf, "%s", d ? d->bdf : "");
    c->numa_node = d ? d->numa_node : -1;
    return c;
}

/* The controller ("nvme0") whose namespaces include disk ("nvme0n1"). */
static gdu_topo_col *nvme_col_of_disk(gdu_topo *t, const gdu_nvme_list *nvme, const char *disk)
{
    for (size_t i = 0; i < nvme->n; i++)
        for (size_t k = 0; k < nvme->ctrl[i].n_ns; k++)
            if (strcmp(nvme->ctrl[i].namespaces[k], disk) == 0)
                for (size_t c = 0; c < t->n_cols; c++)
                    if (t->cols[c].kind == GDU_TOPO_NVME &&
                        strcmp(t->cols[c].name, nvme->ctrl[i].name) == 0)
                        return &t->cols[c];
    return NULL;
}

static void add_mounts(const gdu_snapshot *sys, gdu_topo *t)
{
    for (size_t i = 0; i < sys->mounts.n; i++) {
        const gdu_mount *m = &sys->mounts.m[i];
        const gdu_block *b = gdu_snapshot_block(sys, m->major, m->minor);
        if (b == NULL || !b->found)
            continue;
        for (size_t d = 0; d < b->chain.n_disks; d++) {
            gdu_topo_col *c = nvme_col_of_disk(t, &sys->nvme, b->chain.disks[d]);
            if (c != NULL && c->n_mounts < GDU_TOPO_MAX_MOUNTS)
                snprintf(c->mounts[c->n_mounts++], sizeof c->mounts[0], "%.100s (%.20s)",
                         m->mount_point, m->fstype);
        }
    }
}

void gdu_topo_build(const gdu_snapshot *sys, gdu_topo *t)
{
    gdu_gpu_view gpus[GDU_MAX_GPUS];
    size_t n = gdu_snapshot_gpus(sys, gpus, GDU_MAX_GPUS);
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        gdu_topo_col *c = add_col(t, GDU_TOPO_GPU, gpus[i].pci);
        if (c == NULL)
            break;
        snprintf(c->name, sizeof c->name, "GPU%d", gpus[i].index);
        snprintf(c->bdf, sizeof c->bdf, "%s", gpus[i].bdf);
        snprintf(c->detail, sizeof c->detail, "%s", gpus[i].name);
    }
    t->n_gpus = t->n_cols;
    for (size_t i = 0; i < sys->nvme.n; i++) {
        const gdu_nvme *nv = &sys->nvme.ctrl[i];
        gdu_topo_col *c = add_col(t, GDU_TOPO_NVME, gdu_pci_find(&sys->pci, nv->bdf));
        if (c == NULL)
            break;
        snprintf(c->name, sizeof c->name, "%s", nv->name);
        snprintf(c->bdf, sizeof c->bdf, "%s", nv->bdf);
        snprintf(c->detail, sizeof c->detail, "%s", nv->model);
    }
    for (size_t i = 0; i < sys->n_nics; i++) {
        const gdu_nic *nic = &sys->nics[i];
        gdu_topo_col *c = add_col(t, GDU_TOPO_NIC, gdu_pci_find(&sys->pci, nic->bdf));
        if (c == NULL)
            break;
        snprintf(c->detail, sizeof c->detail, "%s", nic->names);
        snprintf(c->name, sizeof c->name, "NIC%zu", i);
    }
    add_mounts(sys, t);
    for (size_t r = 0; r < t->n_gpus; r++)
        for (size_t c = 0; c < t->n_cols; c++) {
            gdu_pcie_path path;
            gdu_nvlink_answer nv = c < t->n_gpus && c != r
                                       ? gdu_snapshot_nvlink(sys, &gpus[r], &gpus[c])
                                       : GDU_NVLINK_UNKNOWN;
            if (nv == GDU_NVLINK_YES || nv == GDU_NVLINK_INFERRED) {
                snprintf(t->cell[r][c], sizeof t->cell[r][c], "NV");
                continue;
            }
            gdu_pci_path(&sys->pci, t->cols[r].bdf, t->cols[c].bdf, &path);
            snprintf(t->cell[r][c], sizeof t->cell[r][c], "%s", gdu_path_kind_name(path.kind));
        }
}

json_t *gdu_topo_to_json(const gdu_topo *t)
{
    static const char *const kinds[] = {"gpu", "nvme", "nic"};
    json_t *cols = json_array(), *rows = json_array();
    for (size_t c = 0; c < t->n_cols; c++) {
        const gdu_topo_col *col = &t->cols[c];
        json_t *mounts = json_array();
        for (size_t m = 0; m < col->n_mounts; m++)
            json_array_append_new(mounts, gdu_json_text(col->mounts[m]));
        json_array_append_new(cols,
                              json_pack("{s:o, s:s, s:o, s:i, s:o, s:o}", "name",
                                        gdu_json_text(col->name), "kind", kinds[col->kind], "pci",
                                        gdu_json_text(col->bdf), "numa_node", col->numa_node,
                                        "detail", gdu_json_text(col->detail), "mounts", mounts));
    }
    for (size_t r = 0; r < t->n_gpus; r++) {
        json_t *cells = json_object();
        for (size_t c = 0; c < t->n_cols; c++) {
            json_t *name = gdu_json_text(t->cols[c].name); /* a key must be UTF-8 too */
            if (name != NULL)
                json_object_set_new(cells, json_string_value(name), json_string(t->cell[r][c]));
            json_decref(name);
        }
        json_array_append_new(
            rows, json_pack("{s:o, s:o}", "gpu", gdu_json_text(t->cols[r].name), "paths", cells));
    }
    return json_pack("{s:s, s:o, s:o}", "schema", "gdunlock-topo/1", "devices", cols, "matrix",
                     rows);
}

/* A cell of width columns, escaped: names, models and mount points come
 * from the (possibly captured) machine's files. */
static void cell(FILE *out, const char *s, size_t width) { gdu_text_pad(out, s, strlen(s), width); }

void gdu_topo_print(FILE *out, const gdu_topo *t)
{
    fprintf(out, "%-8s", "");
    for (size_t c = 0; c < t->n_cols; c++) {
        fputc(' ', out);
        cell(out, t->cols[c].name, 6);
    }
    fprintf(out, " %-5s\n", "NUMA");
    for (size_t r = 0; r < t->n_gpus; r++) {
        cell(out, t->cols[r].name, 8);
        for (size_t c = 0; c < t->n_cols; c++)
            fprintf(out, " %-6s", t->cell[r][c]);
        if (t->cols[r].numa_node >= 0)
            fprintf(out, " %d\n", t->cols[r].numa_node);
        else
            fprintf(out, " N/A\n");
    }
    fprintf(out, "\n");
    for (size_t c = 0; c < t->n_cols; c++) {
        const gdu_topo_col *col = &t->cols[c];
        cell(out, col->name, 8);
        fputc(' ', out);
        cell(out, col->bdf[0] ? col->bdf : "(no PCI address)", 0);
        fputs("  ", out);
        gdu_text_put(out, col->detail);
        fputc('\n', out);
        for (size_t m = 0; m < col->n_mounts; m++) {
            fprintf(out, "%-8s   mounted: ", "");
            gdu_text_put(out, col->mounts[m]);
            fputc('\n', out);
        }
        if (col->kind == GDU_TOPO_NVME && col->n_mounts == 0)
            fprintf(out, "%-8s   mounted: nothing\n", "");
    }
}
