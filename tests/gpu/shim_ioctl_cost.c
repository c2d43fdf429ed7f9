/* shim_ioctl_cost [N]: the time of N ioctls the shim does not watch (FIONREAD
 * on a pipe), for tests/gpu/shim.sh to compare with and without the shim.
 * Prints "NS_PER_IOCTL <ns>". Needs no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int p[2];
    if (n <= 0 || pipe(p) != 0)
        return 1;
    int avail = 0;
    for (int i = 0; i < 1000; i++)
        ioctl(p[0], FIONREAD, &avail); /* warm up: the shim sets itself up */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        if (ioctl(p[0], FIONREAD, &avail) != 0)
            return 1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("NS_PER_IOCTL %.2f\n", ns);
    return 0;
}
