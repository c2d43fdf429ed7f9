/* Exit statuses shared by every command and by the layers that choose one
 * (unlock, doctor, verify): sysexits.h values for the generic ones, one home
 * so that a layer and the CLI cannot disagree. Command-specific verdict
 * codes (doctor, verify) are documented in docs/commands/ and stay below 64. */
#ifndef GDUNLOCK_UTIL_EXIT_CODES_H
#define GDUNLOCK_UTIL_EXIT_CODES_H

enum {
    GDU_EXIT_OK = 0,
    GDU_EXIT_FAILED = 1,       /* the command ran and its check or transfer failed */
    GDU_EXIT_USAGE = 64,       /* bad arguments */
    GDU_EXIT_DATAERR = 65,     /* input data in the wrong form */
    GDU_EXIT_NOINPUT = 66,     /* a named file is missing or unreadable */
    GDU_EXIT_UNAVAILABLE = 69, /* no NVIDIA driver / libcuda / GPU where one is needed */
    GDU_EXIT_SOFTWARE = 70,    /* internal error */
    GDU_EXIT_CANTCREAT = 73,   /* an output cannot be created */
    GDU_EXIT_IOERR = 74,       /* I/O error while reading or writing data */
    GDU_EXIT_NOPERM = 77,      /* needs root */
};

#endif
