/* The safetensors dtype names and their element widths in bits. */
#include "gdunlock/safetensors.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
} dtypes[GDU_ST_DTYPE_COUNT] = {
    [GDU_ST_BOOL] = {"BOOL", 8},
    [GDU_ST_F4] = {"F4", 4},
    [GDU_ST_F6_E2M3] = {"F6_E2M3", 6},
    [GDU_ST_F6_E3M2] = {"F6_E3M2", 6},
    [GDU_ST_U8] = {"U8", 8},
    [GDU_ST_I8] = {"I8", 8},
    [GDU_ST_F8_E5M2] = {"F8_E5M2", 8},
    [GDU_ST_F8_E4M3] = {"F8_E4M3", 8},
    [GDU_ST_F8_E8M0] = {"F8_E8M0", 8},
    [GDU_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [GDU_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [GDU_ST_I16] = {"I16", 16},
    [GDU_ST_U16] = {"U16", 16},
    [GDU_ST_F16] = {"F16", 16},
    [GDU_ST_BF16] = {"BF16", 16},
    [GDU_ST_I32] = {"I32", 32},
    [GDU_ST_U32] = {"U32", 32},
    [GDU_ST_F32] = {"F32", 32},
    [GDU_ST_C64] = {"C64", 64},
    [GDU_ST_F64] = {"F64", 64},
    [GDU_ST_I64] = {"I64", 64},
    [GDU_ST_U64] = {"U64", 64},
};

const char *gdu_st_dtype_name(gdu_st_dtype dtype)
{
    return (unsigned)dtype < GDU_ST_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

unsigned gdu_st_dtype_bits(gdu_st_dtype dtype)
{
    return (unsigned)dtype < GDU_ST_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

int gdu_st_dtype_from_name(const char *name, gdu_st_dtype *out)
{
    if (name == NULL || out == NULL)
        return -1;
    for (unsigned i = 0; i < GDU_ST_DTYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (gdu_st_dtype)i;
            return 0;
        }
    }
    return -1;
}
