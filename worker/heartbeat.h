/* Worker heartbeats: every few seconds a worker tells the fleet topic who it
 * is and what it runs (id, host, backend, pools, slots, running task keys,
 * version, start time), and says goodbye when it stops, so `altar workers`
 * and the dashboard can list live workers and spot one that went silent.
 *
 * A heartbeat is fire-and-forget: produced with no opaque (the worker's
 * delivery callback ignores it), never retried, never a reason to stop.
 * Single-threaded: called from the worker's loop only. */
#ifndef ALTAR_WORKER_HEARTBEAT_H
#define ALTAR_WORKER_HEARTBEAT_H

#include "worker.h"

#include <stddef.h>
#include <stdint.h>

/* Seconds between two heartbeats (readers treat a worker as gone after
 * ALTAR_HEARTBEAT_STALE_S without one). */
#define ALTAR_HEARTBEAT_INTERVAL_S 3
#define ALTAR_HEARTBEAT_STALE_S 10

typedef struct altar__heartbeat altar__heartbeat_t;

/* The running task keys, read at each beat: key i of n. */
typedef const char *(*altar__heartbeat_key_fn)(void *ctx, size_t i);

/* Starts heartbeats for worker_id (copied); sends the first one at once.
 * NULL when the fleet topic is off (o->topics->fleet NULL or empty) or out
 * of memory: every other call then does nothing. */
altar__heartbeat_t *altar__heartbeat_start(const altar_worker_opts_t *o, const char *worker_id);
/* Sends a heartbeat when one is due, listing n running task keys. */
void altar__heartbeat_tick(altar__heartbeat_t *hb, size_t n, altar__heartbeat_key_fn key, void *ctx);
/* Sends the goodbye and frees hb (NULL is fine). The caller flushes. */
void altar__heartbeat_stop(altar__heartbeat_t *hb);

#endif
