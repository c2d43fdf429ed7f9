/* The input cursor of the p2p fuzz harnesses: each answer the harness gives
 * takes the next bytes of the fuzzer's input. */
#ifndef GDUNLOCK_FUZZ_P2P_INPUT_H
#define GDUNLOCK_FUZZ_P2P_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const uint8_t *in;
static size_t in_len, in_pos;

static void input_start(const uint8_t *data, size_t size)
{
    in = data;
    in_len = size;
    in_pos = 0;
}

/* Bytes of input not taken yet. */
static size_t input_left(void) { return in_pos < in_len ? in_len - in_pos : 0; }

/* The next n input bytes (zeros once the input runs out). */
static void take(void *out, size_t n)
{
    size_t k = input_left();
    if (k > n)
        k = n;
    memcpy(out, in + in_pos, k);
    memset((uint8_t *)out + k, 0, n - k);
    in_pos += k;
}

#endif
