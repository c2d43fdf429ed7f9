/* For the fake libcudas' cuInit: FAKE_CUDA_FIFO_AT=PATH puts a FIFO in place
 * of PATH when CUDA starts, as another program could between a command's
 * checks of a file it was given and its opening it (tests/cli/fifo_swap.sh). */
#ifndef GDUNLOCK_TESTS_FAKE_FIFO_SWAP_H
#define GDUNLOCK_TESTS_FAKE_FIFO_SWAP_H

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void fake_fifo_swap(void)
{
    const char *path = getenv("FAKE_CUDA_FIFO_AT");
    if (path != NULL && *path) {
        unlink(path);
        mkfifo(path, 0600);
    }
}

#endif
