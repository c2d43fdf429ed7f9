/* Fuzzes verify's reader of the shim's report: arbitrary JSON (or not), with
 * the GPU to look for taken from the first input byte. */
#include "verify/verify.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const pcis[] = {"0000:41:00.0", "41:00.0", "", "00000000:C1:00.0"};
    int pick = size ? data[0] : 0;
    gdu_verify_shim shim;
    memset(&shim, 0, sizeof shim);
    gdu_verify_shim_parse_report((const char *)data, size, pcis[pick & 3], pick >> 2, &shim);
    if (strlen(shim.mode) >= sizeof shim.mode || strlen(shim.reason) >= sizeof shim.reason)
        abort();
    gdu_verify_result r;
    memset(&r, 0, sizeof r);
    r.verdict = GDU_VERIFY_COMPAT;
    shim.active = true;
    gdu_verify_shim_reasons(&shim, &r);
    if (r.n_reasons > GDU_VERIFY_MAX_REASONS)
        abort();
    return 0;
}
