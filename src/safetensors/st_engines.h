/* The loader's I/O engines, kept for the whole process: one per GPU and one
 * for host memory, created on first use (with the GDUNLOCK_IO_* settings of
 * that moment), so that a process loading several checkpoints sets up worker
 * threads, pinned staging and the cuFile probe once. */
#ifndef GDUNLOCK_ST_ENGINES_H
#define GDUNLOCK_ST_ENGINES_H

#include "gdunlock/io.h"
#include "gdunlock/safetensors.h"

/* Leases the engine for host memory (host != 0) or for GPU device, creating
 * it on first use. Thread-safe. Give it back with gdu_st_engine_return. */
gdu_st_status st_engine_get(int host, int device, gdu_io_engine **out, gdu_st_error *err);

#endif
