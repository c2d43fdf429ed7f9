/* Outside input of the BAR1 window study: /proc/self/smaps and
 * /proc/self/status text, and the driver's NV_ESC_CARD_INFO answer, as
 * arbitrary bytes: the VmFlags lookup, the CapEff parser, the card list with
 * its BAR overlap test, and the refusal attribution over any status and
 * facts. Input: 8 bytes of address, a 2-byte length of the smaps text, the
 * text, then the rest feeds the card answer and the facts. */
#include "driverabi/nv_card_info.h"
#include "driverabi/nv_escape.h"
#include "fuzz_p2p_input.h"
#include "p2p_window_study.h"
#include "rm_bar1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_ioctl(int fd, unsigned long request, void *arg)
{
    unsigned nr = 0;
    size_t size = 0;
    gdu_nv_ioctl_decode(request, &nr, &size);
    if (nr == GDU_NV_ESC_CARD_INFO)
        take(arg, size);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_start(data, size);
    uint64_t addr;
    uint16_t text_len;
    take(&addr, sizeof addr);
    take(&text_len, sizeof text_len);
    size_t n = text_len < input_left() ? text_len : input_left();
    char *text = malloc(n + 1);
    if (text == NULL)
        return 0;
    take(text, n);
    text[n] = '\0';
    char flags[64];
    if (gdu_smaps_vmflags(text, addr, flags, sizeof flags) == 0) {
        gdu_vmflags_has(flags, "io");
        gdu_vmflags_has(flags, "pf");
    }
    gdu_proc_status_cap(text, 21);
    free(text);

    gdu_rm_client c = {.fd = -1, .hclient = 1, .calls = {fuzz_ioctl, NULL}};
    gdu_rm_card cards[GDU_NV_MAX_DEVICES];
    size_t count = 0;
    char why[128];
    if (gdu_rm_cards(&c, cards, GDU_NV_MAX_DEVICES, &count, why, sizeof why) == 0) {
        const gdu_rm_card *which;
        int bar;
        gdu_rm_cards_bar_of(cards, count, addr, addr >> 40, &which, &bar);
        gdu_rm_card_find(cards, count, 0, (uint32_t)addr & 0xff, 0);
    }
    gdu_p2p_window_facts f;
    take(&f, sizeof f);
    gdu_p2p_window_refusal r;
    gdu_p2p_window_refusal_of(&f, &r);
    return 0;
}
