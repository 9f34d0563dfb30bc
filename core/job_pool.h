/* altar — running n independent jobs on the machine's cores: the caller's
 * thread and up to 7 more, each taking the next job until none is left.
 * Internal to the parts that do bulk work at once (the ledger's partition
 * import, the checkpoint restore's digest checks). */
#ifndef ALTAR_CORE_JOB_POOL_H
#define ALTAR_CORE_JOB_POOL_H

#include <stddef.h>

/* Calls run(ctx, i) once for every i in [0, n), on as many threads as there
 * are cores (at most 8, at most n; the calling thread is one of them) and
 * returns when all have returned. Threads that cannot be started leave
 * their share to the others, so every job runs even when none can be. */
void altar__run_jobs(size_t n, void (*run)(void *ctx, size_t i), void *ctx);

#endif
