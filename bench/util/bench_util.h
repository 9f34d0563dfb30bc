/* What the benchmarks share: clocks, a fatal-error exit, and the status
 * events of succeeded shards written to a log as a fleet would write them. */
#ifndef ALTAR_BENCH_UTIL_H
#define ALTAR_BENCH_UTIL_H

#include "altar/codec.h"
#include "altar/error.h"
#include "altar/transport.h"

/* Monotonic wall time, in seconds. */
double bench_now_s(void);
/* CPU seconds of the whole process: steadier than wall time on a shared machine. */
double bench_cpu_s(void);
/* Prints "<prog>: <what>: <err>" and exits 1. */
void bench_die(const char *prog, const char *what, const altar_error_t *err) __attribute__((noreturn));

/* Removes path and everything below it (a benchmark's own scratch tree). */
void bench_rm_tree(const char *path);
/* The embedded log in dir (fsync never: the benchmarks measure altar, not
 * the disk), its properties left in *props for a later open, with topic
 * created with `partitions` partitions. Exits on an error. */
altar_transport_t *bench_open_local_log(const char *prog, const char *dir, altar_strmap_t *props, const char *topic,
                                        int partitions);

/* One shard of group `group` (fold `fold` of `width`, task key `task_key`,
 * labels job_id=bench, group, fold, num_folds), submitted then succeeded:
 * two status events produced to `topic`, keyed by the group. `spec` and
 * `buf` are the caller's, reused across calls. Exits on an encoding error. */
void bench_write_succeeded_shard(altar_transport_t *t, const char *topic, altar_spec_t *spec, altar_buf_t *buf,
                                 const char *group, long fold, long width, const char *task_key);

#endif
