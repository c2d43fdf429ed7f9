#include "fake_rm_trace.h"

#include "driverabi/nv_classes.h"
#include "driverabi/nv_escape.h"
#include "driverabi/nvos.h"
#include "driverabi/uvm_abi.h"
#include "shim/shim_decode.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned nibble(char c)
{
    return c >= '0' && c <= '9'   ? (unsigned)(c - '0')
           : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
           : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                  : 0;
}

/* By hand rather than sscanf: the traces hold millions of bytes, and under
 * valgrind a sscanf per byte made this test take six minutes. */
static unsigned char *hex_bytes(const char *hex, size_t *n)
{
    size_t len = hex != NULL ? strlen(hex) / 2 : 0;
    /* 8-aligned, at least one struct's worth, so blocks can be used in place. */
    unsigned char *b = aligned_alloc(8, (len + 64 + 7) / 8 * 8);
    memset(b, 0, (len + 64 + 7) / 8 * 8);
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    *n = len;
    return b;
}

int trace_load(const char *path, trace *t)
{
    char full[1024];
    snprintf(full, sizeof full, "%s%s%s", path[0] == '/' ? "" : GDUNLOCK_FIXTURES,
             path[0] == '/' ? "" : "/", path);
    FILE *fp = fopen(full, "r");
    if (fp == NULL)
        return -1;
    memset(t, 0, sizeof *t);
    size_t cap = 0, linecap = 0;
    char *line = NULL;
    while (getline(&line, &linecap, fp) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        if (j == NULL)
            continue;
        const char *kind = json_string_value(json_object_get(j, "kind"));
        if (kind == NULL || strcmp(kind, "other") == 0) {
            json_decref(j);
            continue;
        }
        if (t->n == cap) {
            cap = cap ? cap * 2 : 1024;
            t->calls = realloc(t->calls, cap * sizeof *t->calls);
        }
        trace_call *c = &t->calls[t->n++];
        memset(c, 0, sizeof *c);
        c->seq = (long)json_integer_value(json_object_get(j, "seq"));
        c->fd = (int)json_integer_value(json_object_get(j, "fd"));
        c->uvm = strcmp(kind, "uvm") == 0;
        c->request = strtoul(json_string_value(json_object_get(j, "req")), NULL, 0);
        c->args_in = hex_bytes(json_string_value(json_object_get(j, "args_in")), &c->n_in);
        c->args_out = hex_bytes(json_string_value(json_object_get(j, "args_out")), &c->n_out);
        c->params_in = hex_bytes(json_string_value(json_object_get(j, "params_in")), &c->n_params);
        c->params_out =
            hex_bytes(json_string_value(json_object_get(j, "params_out")), &c->n_params_out);
        json_decref(j);
    }
    free(line);
    fclose(fp);
    return t->n > 0 ? 0 : -1;
}

void trace_free(trace *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->calls[i].args_in);
        free(t->calls[i].args_out);
        free(t->calls[i].params_in);
        free(t->calls[i].params_out);
    }
    free(t->calls);
    memset(t, 0, sizeof *t);
}

size_t trace_index_of(const trace *t, long seq)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->calls[i].seq >= seq)
            return i;
    return t->n;
}

static void mismatch(replay_result *r, const trace_call *c, const char *what, unsigned got,
                     unsigned want)
{
    if (r->mismatches++ == 0)
        snprintf(r->first_mismatch, sizeof r->first_mismatch, "seq %ld: %s 0x%x, recorded 0x%x",
                 c->seq, what, got, want);
}

void trace_replay(const trace *t, size_t from, size_t to, gdu_shim *s, fake_rm *f,
                  const replay_opts *o, replay_result *r)
{
    if (to > t->n)
        to = t->n;
    for (size_t i = from; i < to; i++) {
        const trace_call *c = &t->calls[i];
        unsigned nr = 0;
        size_t size = 0;
        gdu_rm_call in = {0}, want = {0}, got;
        bool rm = !c->uvm && gdu_nv_ioctl_decode(c->request, &nr, &size) &&
                  gdu_rm_call_decode(nr, c->args_in, c->n_in, &in) &&
                  gdu_rm_call_decode(nr, c->args_out, c->n_out, &want);
        if (o->geforce && rm &&
            ((in.op == GDU_RM_OP_ALLOC && in.cls == GDU_NV50_THIRD_PARTY_P2P) ||
             (in.op == GDU_RM_OP_CONTROL && (in.cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P)))
            continue;
        fake_rm_set_fd(f, c->fd, c->uvm ? GDU_FD_UVM : GDU_FD_RM);
        unsigned char *block = aligned_alloc(8, (c->n_in + 64 + 7) / 8 * 8);
        memset(block, 0, (c->n_in + 64 + 7) / 8 * 8);
        memcpy(block, c->args_in, c->n_in);
        unsigned char *params = NULL;
        if (rm && (in.op == GDU_RM_OP_ALLOC || in.op == GDU_RM_OP_CONTROL) && in.params != 0) {
            /* Point the block at a copy of the recorded parameters. */
            size_t psize = c->n_params > in.params_size ? c->n_params : in.params_size;
            params = calloc(1, psize + 64);
            memcpy(params, c->params_in, c->n_params);
            uint64_t p = (uint64_t)(uintptr_t)params;
            memcpy(block + 16, &p, sizeof p); /* pAllocParms (NVOS21/64) and params (NVOS54) */
        }
        if (rm && in.op == GDU_RM_OP_ALLOC && gdu_nv_class_is_client(in.cls))
            fake_rm_next_client(f, want.handle);
        gdu_shim_ioctl(s, c->fd, c->request, block);
        r->calls++;
        if (rm && (in.op != GDU_RM_OP_CONTROL || (in.cmd >> 16) == GDU_NV50_THIRD_PARTY_P2P)) {
            gdu_rm_call_decode(nr, block, c->n_in, &got);
            r->compared++;
            if (got.status != want.status)
                mismatch(r, c, "status", got.status, want.status);
            else if (in.op == GDU_RM_OP_CONTROL && params != NULL &&
                     c->n_params_out >= c->n_params &&
                     memcmp(params, c->params_out, c->n_params) != 0)
                mismatch(r, c, "parameters written back for control", in.cmd, in.cmd);
            else if (in.op != GDU_RM_OP_CONTROL && in.op != GDU_RM_OP_FREE &&
                     got.handle != want.handle)
                mismatch(r, c, "handle", got.handle, want.handle);
        } else if (c->uvm && c->request == GDU_UVM_MAP_EXTERNAL_ALLOCATION &&
                   c->n_in == sizeof(gdu_uvm_map_external_params_256)) {
            uint32_t a, b;
            memcpy(&a, block + offsetof(gdu_uvm_map_external_params_256, rmStatus), 4);
            memcpy(&b, c->args_out + offsetof(gdu_uvm_map_external_params_256, rmStatus), 4);
            r->compared++;
            if (a != b)
                mismatch(r, c, "UVM map rmStatus", a, b);
        }
        free(params);
        free(block);
    }
}
