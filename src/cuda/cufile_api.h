/* The subset of NVIDIA's cuFile (GPUDirect Storage) API that gdunlock uses,
 * declared here (cufile.h is not needed to build) and loaded at run time with
 * dlopen. Layouts and values follow cufile.h of GDS 1.x / CUDA 12-13;
 * tests/gpu/cufile_abi_check.sh compares them with the real header where one
 * is installed. */
#ifndef GDUNLOCK_CUFILE_API_H
#define GDUNLOCK_CUFILE_API_H

#include "cuda/cuda_api.h"

#include <stddef.h>
#include <sys/types.h>

/* CUfileOpError. Failures are 5000 + n; values in between that cufile.h
 * leaves unused (5021, 5032) are absent here too. */
enum {
    GDU_CU_FILE_SUCCESS = 0,
    GDU_CU_FILE_BASE_ERR = 5000,
    GDU_CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
    GDU_CU_FILE_DRIVER_INVALID_PROPS = 5002,
    GDU_CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
    GDU_CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
    GDU_CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
    GDU_CU_FILE_DRIVER_CLOSING = 5006,
    GDU_CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
    GDU_CU_FILE_IO_NOT_SUPPORTED = 5008,
    GDU_CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
    GDU_CU_FILE_NVFS_DRIVER_ERROR = 5010,
    GDU_CU_FILE_CUDA_DRIVER_ERROR = 5011,
    GDU_CU_FILE_CUDA_POINTER_INVALID = 5012,
    GDU_CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
    GDU_CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
    GDU_CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
    GDU_CU_FILE_INVALID_MAPPING_SIZE = 5016,
    GDU_CU_FILE_INVALID_MAPPING_RANGE = 5017,
    GDU_CU_FILE_INVALID_FILE_TYPE = 5018,
    GDU_CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
    GDU_CU_FILE_DIO_NOT_SET = 5020,
    GDU_CU_FILE_INVALID_VALUE = 5022,
    GDU_CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
    GDU_CU_FILE_MEMORY_NOT_REGISTERED = 5024,
    GDU_CU_FILE_PERMISSION_DENIED = 5025,
    GDU_CU_FILE_DRIVER_ALREADY_OPEN = 5026,
    /* What cuFileHandleRegister returns on the accelerator machine for a file
     * whose volume it cannot identify (see driver-findings.md). */
    GDU_CU_FILE_HANDLE_NOT_REGISTERED = 5027,
    GDU_CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
    GDU_CU_FILE_DEVICE_NOT_FOUND = 5029,
    GDU_CU_FILE_INTERNAL_ERROR = 5030,
    GDU_CU_FILE_GETNEWFD_FAILED = 5031,
    GDU_CU_FILE_NVFS_SETUP_ERROR = 5033,
    GDU_CU_FILE_IO_DISABLED = 5034,
    GDU_CU_FILE_BATCH_SUBMIT_FAILED = 5035,
    GDU_CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
    GDU_CU_FILE_BATCH_FULL = 5037,
    GDU_CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
};

/* CUfileFileHandleType */
enum {
    GDU_CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,
    GDU_CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
    GDU_CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3,
};

/* Bit numbers in CUfileDrvProps_t.nvfs.dstatusflags (CUfileDriverStatusFlags_t). */
enum {
    GDU_CU_FILE_LUSTRE_SUPPORTED = 0,
    GDU_CU_FILE_WEKAFS_SUPPORTED = 1,
    GDU_CU_FILE_NFS_SUPPORTED = 2,
    GDU_CU_FILE_GPFS_SUPPORTED = 3,
    GDU_CU_FILE_NVME_SUPPORTED = 4,
    GDU_CU_FILE_NVMEOF_SUPPORTED = 5,
    GDU_CU_FILE_SCSI_SUPPORTED = 6,
};

/* Bit numbers in CUfileDrvProps_t.nvfs.dcontrolflags (CUfileDriverControlFlags_t). */
enum {
    GDU_CU_FILE_USE_POLL_MODE = 0,
    GDU_CU_FILE_ALLOW_COMPAT_MODE = 1,
};

/* CUfileError_t: a cuFile status and, for CU_FILE_CUDA_DRIVER_ERROR, the CUresult. */
typedef struct {
    int err;
    gdu_CUresult cu_err;
} gdu_CUfileError;

typedef void *gdu_CUfileHandle;

/* CUfileDescr_t. fs_ops points to user-space file system callbacks; NULL for
 * an ordinary file descriptor, so its type stays opaque here. */
typedef struct {
    int type;
    union {
        int fd;
        void *handle;
    } handle;
    const void *fs_ops;
} gdu_CUfileDescr;

/* CUfileDrvProps_t */
typedef struct {
    struct {
        unsigned int major_version;
        unsigned int minor_version;
        size_t poll_thresh_size;
        size_t max_direct_io_size;
        unsigned int dstatusflags;
        unsigned int dcontrolflags;
    } nvfs;
    unsigned int fflags;
    unsigned int max_device_cache_size;
    unsigned int per_buffer_cache_size;
    unsigned int max_device_pinned_mem_size;
    unsigned int max_batch_io_size;
    unsigned int max_batch_io_timeout_msecs;
} gdu_CUfileDrvProps;

_Static_assert(sizeof(gdu_CUfileError) == 8, "CUfileError_t size");
_Static_assert(offsetof(gdu_CUfileError, cu_err) == 4, "CUfileError_t layout");
_Static_assert(sizeof(gdu_CUfileDescr) == 24, "CUfileDescr_t size");
_Static_assert(offsetof(gdu_CUfileDescr, handle) == 8, "CUfileDescr_t layout");
_Static_assert(offsetof(gdu_CUfileDescr, fs_ops) == 16, "CUfileDescr_t layout");
_Static_assert(sizeof(gdu_CUfileDrvProps) == 56, "CUfileDrvProps_t size");
_Static_assert(offsetof(gdu_CUfileDrvProps, nvfs.poll_thresh_size) == 8, "CUfileDrvProps_t layout");
_Static_assert(offsetof(gdu_CUfileDrvProps, nvfs.max_direct_io_size) == 16,
               "CUfileDrvProps_t layout");
_Static_assert(offsetof(gdu_CUfileDrvProps, nvfs.dstatusflags) == 24, "CUfileDrvProps_t layout");
_Static_assert(offsetof(gdu_CUfileDrvProps, nvfs.dcontrolflags) == 28, "CUfileDrvProps_t layout");
_Static_assert(offsetof(gdu_CUfileDrvProps, fflags) == 32, "CUfileDrvProps_t layout");
_Static_assert(offsetof(gdu_CUfileDrvProps, max_batch_io_timeout_msecs) == 52,
               "CUfileDrvProps_t layout");

/* Functions every supported libcufile exports.
 * X(member, exported-symbol, return type, parameter list).
 * cufile.h maps cuFileDriverClose to cuFileDriverClose_v2 by a macro (the
 * reference-counted close); the loader prefers that name and falls back to
 * the old one. cuFileRead/cuFileWrite return bytes moved, or -1 with errno
 * set, or minus a CUfileOpError. */
#define GDU_CUFILE_FUNCTIONS(X)                                                                    \
    X(cuFileDriverOpen, "cuFileDriverOpen", gdu_CUfileError, (void))                               \
    X(cuFileDriverGetProperties, "cuFileDriverGetProperties", gdu_CUfileError,                     \
      (gdu_CUfileDrvProps * props))                                                                \
    X(cuFileHandleRegister, "cuFileHandleRegister", gdu_CUfileError,                               \
      (gdu_CUfileHandle * fh, gdu_CUfileDescr * descr))                                            \
    X(cuFileHandleDeregister, "cuFileHandleDeregister", void, (gdu_CUfileHandle fh))               \
    X(cuFileBufRegister, "cuFileBufRegister", gdu_CUfileError,                                     \
      (const void *base, size_t length, int flags))                                                \
    X(cuFileBufDeregister, "cuFileBufDeregister", gdu_CUfileError, (const void *base))             \
    X(cuFileRead, "cuFileRead", ssize_t,                                                           \
      (gdu_CUfileHandle fh, void *base, size_t size, off_t file_offset, off_t base_offset))        \
    X(cuFileWrite, "cuFileWrite", ssize_t,                                                         \
      (gdu_CUfileHandle fh, const void *base, size_t size, off_t file_offset, off_t base_offset))

#define GDU_CUFILE_DECLARE_FN(name, sym, ret, params) ret(*name) params;
typedef struct gdu_cufile {
    void *handle;
    char path[256]; /* the library actually loaded (dlinfo), for reports */
    GDU_CUFILE_FUNCTIONS(GDU_CUFILE_DECLARE_FN)
    /* cuFileDriverClose_v2, else cuFileDriverClose. */
    gdu_CUfileError (*cuFileDriverClose)(void);
    /* Optional (NULL when the library predates it): packed library version,
     * e.g. 1150 for 1.15.0. */
    gdu_CUfileError (*cuFileGetVersion)(int *version);
} gdu_cufile;
#undef GDU_CUFILE_DECLARE_FN

/* Loads libcufile once per process (thread-safe): $GDUNLOCK_LIBCUFILE if set,
 * else libcufile.so.0, libcufile.so, /usr/local/cuda/lib64/libcufile.so.0.
 * Does not open the driver. Returns the table, or NULL with the reason (every
 * name tried, or the missing symbol) copied into why. */
const gdu_cufile *gdu_cufile_load(char *why, size_t why_len);

/* "CU_FILE_HANDLE_NOT_REGISTERED (5027)" for a CUfileOpError value; also
 * accepts the negated value cuFileRead/cuFileWrite return. Never NULL;
 * returns a static or thread-local string. */
const char *gdu_cufile_error_name(int err);

/* Formats a CUfileError_t (adds the CUDA result for CU_FILE_CUDA_DRIVER_ERROR)
 * into buf and returns buf. */
const char *gdu_cufile_status_text(gdu_CUfileError e, char *buf, size_t len);

#endif
