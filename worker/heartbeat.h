/* Worker heartbeats: every few seconds a worker tells the fleet topic who it
 * is and what it runs (id, host, backend, pools, slots, running task keys,
 * version, start time, and its load: free slots per pool and the jobs
 * partitions it owns), and says goodbye when it stops, so `altar workers`
 * and the dashboard can list live workers and spot one that went silent,
 * and peers can forward waiting jobs to free slots (peers.h).
 *
 * A heartbeat is fire-and-forget: produced with no opaque (the worker's
 * delivery callback ignores it), never retried, never a reason to stop.
 * Single-threaded: called from the worker's loop only. */
#ifndef ALTAR_WORKER_HEARTBEAT_H
#define ALTAR_WORKER_HEARTBEAT_H

#include "worker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds between two heartbeats (readers treat a worker as gone after
 * ALTAR_HEARTBEAT_STALE_S without one). */
#define ALTAR_HEARTBEAT_INTERVAL_S 3
#define ALTAR_HEARTBEAT_STALE_S 10
/* A change of free slots or owned partitions is announced at once, but
 * never sooner than this after the previous beat (a busy worker's slots
 * change many times a second). */
#define ALTAR_HEARTBEAT_MIN_GAP_MS 200
/* At most this many owned partitions go into one heartbeat. */
#define ALTAR_HEARTBEAT_PARTS_MAX 1024

/* What a beat says about the worker's load: per pool it serves, the free
 * slots it has now ("free": {pool: n}), and the jobs partitions it owns
 * ("owns": {topic: [partition, ...]}), read through part(ctx, i, ...) for
 * i < n_parts. Peers forward waiting jobs by it (peers.h). */
typedef struct altar__heartbeat_load {
  size_t n_pools;
  const char *const *pools;
  const int64_t *free;
  size_t n_parts;
  void (*part)(void *ctx, size_t i, const char **ptopic, int32_t *ppartition);
  void *ctx;
} altar__heartbeat_load_t;

typedef struct altar__heartbeat altar__heartbeat_t;

/* The running task keys, read at each beat: key i of n. */
typedef const char *(*altar__heartbeat_key_fn)(void *ctx, size_t i);

/* Starts heartbeats for worker_id (copied); sends the first one at once.
 * NULL when the fleet topic is off (o->topics->fleet NULL or empty) or out
 * of memory: every other call then does nothing. */
altar__heartbeat_t *altar__heartbeat_start(const altar_worker_opts_t *o, const char *worker_id);
/* Sends a heartbeat when one is due, or when changed says the load
 * differs from the last one sent (at most one per
 * ALTAR_HEARTBEAT_MIN_GAP_MS), listing n running task keys and load (NULL:
 * none). now_ms is the caller's monotonic clock. */
void altar__heartbeat_tick(altar__heartbeat_t *hb, int64_t now_ms, size_t n, altar__heartbeat_key_fn key, void *ctx,
                           const altar__heartbeat_load_t *load, bool changed);
/* Sends the goodbye and frees hb (NULL is fine). The caller flushes. */
void altar__heartbeat_stop(altar__heartbeat_t *hb);

#endif
