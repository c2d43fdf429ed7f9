/* The kernel's persistent-pin lookup, as a model (see pin_model.h). */
#include "pinmodel/pin_model.h"

/* _isSpaceAvailableForBar1P2PMapping (p2p.c:987-1031): a new extent of
 * `length` is mapped only while bar1 - mapped >= 36 MiB + length. */
uint64_t gdu_pin_bar1_budget(uint64_t bar1_bytes, uint64_t mapped_bytes)
{
    if (bar1_bytes < mapped_bytes || bar1_bytes - mapped_bytes < GDU_PIN_BAR1_RESERVE)
        return 0;
    return bar1_bytes - mapped_bytes - GDU_PIN_BAR1_RESERVE;
}
