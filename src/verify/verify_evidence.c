/* Recording evidence: the empty record for a run and one call's outcome. */
#include "verify/verify_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gdu_verify_call_set(gdu_verify_call *c, bool ok, int code, const char *fmt, ...)
{
    c->ran = true;
    c->ok = ok;
    c->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
}

void gdu_verify_evidence_init(gdu_verify_evidence *ev, const gdu_verify_options *opts)
{
    memset(ev, 0, sizeof *ev);
    snprintf(ev->path, sizeof ev->path, "%s", opts->path ? opts->path : "");
    uint64_t size = opts->size ? opts->size : GDU_VERIFY_DEFAULT_SIZE;
    /* Round up to the alignment; leave an oversize value as it is for gdu_verify_run to refuse. */
    ev->size = size > GDU_VERIFY_MAX_SIZE
                   ? size
                   : (size + GDU_VERIFY_ALIGN - 1) / GDU_VERIFY_ALIGN * GDU_VERIFY_ALIGN;
    ev->gpu = opts->gpu;
    ev->shim.registered = ev->shim.unregistered = -1;
    ev->shim.cufile_registered = ev->shim.cufile_found = -1;
}
