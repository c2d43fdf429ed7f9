/* NV_STATUS: the status codes RM and UVM return, and their names. */
#ifndef GDUNLOCK_DRIVERABI_NV_STATUS_H
#define GDUNLOCK_DRIVERABI_NV_STATUS_H

#include <stdint.h>

typedef uint32_t gdu_nv_status;

/* The codes gdunlock acts on by value. */
enum {
    GDU_NV_OK = 0x00,
    GDU_NV_ERR_IN_USE = 0x17,
    GDU_NV_ERR_INSERT_DUPLICATE_NAME = 0x19,
    GDU_NV_ERR_INSUFFICIENT_RESOURCES = 0x1a,
    GDU_NV_ERR_INSUFFICIENT_PERMISSIONS = 0x1b,
    GDU_NV_ERR_INVALID_ADDRESS = 0x1e,
    GDU_NV_ERR_INVALID_ARGUMENT = 0x1f,
    GDU_NV_ERR_INVALID_CLASS = 0x22,
    GDU_NV_ERR_INVALID_CLIENT = 0x23,
    GDU_NV_ERR_INVALID_FLAGS = 0x29,
    GDU_NV_ERR_INVALID_OBJECT = 0x31,
    GDU_NV_ERR_INVALID_OBJECT_PARENT = 0x36,
    GDU_NV_ERR_NO_MEMORY = 0x51,
    GDU_NV_ERR_NOT_SUPPORTED = 0x56,
    GDU_NV_ERR_OBJECT_NOT_FOUND = 0x57,
    GDU_NV_ERR_OBJECT_TYPE_MISMATCH = 0x58,
    GDU_NV_ERR_OPERATING_SYSTEM = 0x59,
    GDU_NV_ERR_STATE_IN_USE = 0x63,
    GDU_NV_ERR_RESOURCE_LOST = 0x6e,
    GDU_NV_ERR_GENERIC = 0xffff,
};

/* The bare name ("NV_ERR_STATE_IN_USE"), or NULL for a code not in the table. */
const char *gdu_nv_status_symbol(gdu_nv_status status);

/* "NV_ERR_STATE_IN_USE (0x63)", or "unknown NV_STATUS (0x1234)". Thread-safe:
 * the text lives in a thread-local buffer valid until the thread's next call. */
const char *gdu_nv_status_name(gdu_nv_status status);

/* Number of codes in the table (every code of nvstatuscodes.h, branch 580). */
unsigned gdu_nv_status_count(void);

#endif
