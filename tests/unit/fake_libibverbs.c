/* A stand-in for rdma-core's libibverbs.so.1 with the device-list calls
 * gdunlock verify --rdma makes: FAKE_IBV_DEVICES names the devices
 * (comma-separated; unset or empty: none, as on a machine without an RDMA
 * adapter, where the real list is empty too). */
#include <stdlib.h>
#include <string.h>

struct fake_device {
    char name[64];
};

void **ibv_get_device_list(int *num);
void ibv_free_device_list(void **list);
const char *ibv_get_device_name(void *device);

void **ibv_get_device_list(int *num)
{
    const char *names = getenv("FAKE_IBV_DEVICES");
    int n = 0;
    void **list = calloc(9, sizeof *list);
    if (list == NULL)
        return NULL;
    char copy[512];
    strncpy(copy, names != NULL ? names : "", sizeof copy - 1);
    copy[sizeof copy - 1] = '\0';
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && n < 8; t = strtok_r(NULL, ",", &save)) {
        struct fake_device *d = calloc(1, sizeof *d);
        if (d == NULL)
            break;
        strncpy(d->name, t, sizeof d->name - 1);
        list[n++] = d;
    }
    if (num != NULL)
        *num = n;
    return list;
}

void ibv_free_device_list(void **list)
{
    for (int i = 0; list != NULL && list[i] != NULL; i++)
        free(list[i]);
    free(list);
}

const char *ibv_get_device_name(void *device) { return ((struct fake_device *)device)->name; }
