#include "safetensors/st_stages.h"
#include "cuda/cuda_api.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Seconds since this process started: /proc/uptime minus the start time in
 * /proc/self/stat (field 22, clock ticks since boot); -1 when unknown. */
static double process_age(void)
{
    double uptime = 0;
    FILE *f = fopen("/proc/uptime", "r");
    if (f == NULL)
        return -1;
    int ok = fscanf(f, "%lf", &uptime) == 1;
    fclose(f);
    char line[1024];
    f = fopen("/proc/self/stat", "r");
    if (!ok || f == NULL) {
        if (f != NULL)
            fclose(f);
        return -1;
    }
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* the command name may hold spaces */
    unsigned long long start = 0;
    /* After ") ": state is field 3; starttime is field 22, 19 fields later. */
    if (p == NULL || sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                            "%*d %*d %*d %*d %llu",
                            &start) != 1)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    double age = uptime - (double)start / (double)(hz > 0 ? hz : 100);
    return age < 0 ? 0 : age;
}

void st_stages_begin(st_stages *st, int gpu_target, const int *gpus, size_t gpu_count)
{
    memset(st, 0, sizeof *st);
    st->process_start_seconds = process_age();
    if (!gpu_target)
        return;
    double t = gdu_now_seconds();
    const gdu_cuda *cu = gdu_cuda_load(NULL, 0);
    st->cuda_init_seconds = gdu_now_seconds() - t;
    t = gdu_now_seconds();
    for (size_t i = 0; cu != NULL && i < gpu_count && st->contexts < 64; i++)
        if (gdu_cuda_ctx_retain(cu, gpus[i], &st->held[st->contexts], NULL, 0) == GDU_CUDA_SUCCESS)
            st->contexts++;
    st->context_seconds = gdu_now_seconds() - t;
}

void st_stages_end(st_stages *st)
{
    const gdu_cuda *cu = st->contexts > 0 ? gdu_cuda_load(NULL, 0) : NULL;
    for (int i = 0; cu != NULL && i < st->contexts; i++)
        gdu_cuda_ctx_release(cu, &st->held[i]);
    st->contexts = 0;
}
