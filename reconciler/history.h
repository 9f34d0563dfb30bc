/* The last hour of the fleet as the reconciler lived it, kept in memory for
 * the dashboard's charts (no other service): a ring of
 * ALTAR_HISTORY_BUCKETS buckets of ALTAR_HISTORY_BUCKET_S seconds each,
 * holding what was applied in that span (shards finished, groups fired and
 * dead-lettered, failures by reason) and the reconciler's lag last seen in
 * it. Memory is fixed at creation: failure reasons share a table of
 * ALTAR_HISTORY_REASONS_MAX names (a name no bucket of the hour counts is
 * reused; beyond that, "other").
 *
 * Thread safety: every call may come from any thread (one mutex); the
 * daemon records, the dashboard's server thread reads. */
#ifndef ALTAR_RECONCILER_HISTORY_H
#define ALTAR_RECONCILER_HISTORY_H

#include <jansson.h>
#include <stdint.h>

#define ALTAR_HISTORY_BUCKET_S 10
#define ALTAR_HISTORY_BUCKETS 360 /* one hour */
#define ALTAR_HISTORY_REASONS_MAX 16
#define ALTAR_HISTORY_REASON_LEN 48 /* bytes of a reason kept */

typedef struct altar_history altar_history_t;

/* A new empty history, or NULL when out of memory. Free with altar_history_free. */
altar_history_t *altar_history_new(void);
void altar_history_free(altar_history_t *h); /* NULL is fine */

/* What was applied at wall time now (unix seconds): shards that reached a
 * terminal state, groups fired and groups dead-lettered (or cancelled).
 * NULL h is a no-op, as for every recorder below. */
void altar_history_add(altar_history_t *h, double now, uint64_t finished, uint64_t fired, uint64_t dead);
/* One shard failed at now with reason (NULL or "" = "unknown"). */
void altar_history_failure(altar_history_t *h, double now, const char *reason);
/* The reconciler's lag (events not applied) as seen at now. */
void altar_history_lag(altar_history_t *h, double now, int64_t lag);

/* The hour up to now as JSON (caller json_decref's), oldest bucket first:
 *   {"bucket_s", "buckets", "start" (unix s of the first bucket),
 *    "finished": [n..], "fired": [n..], "dead_lettered": [n..],
 *    "lag": [n or null..], "failures": {reason: [n..]},
 *    "totals": {"finished", "fired", "dead_lettered", "failures": {reason: n}}}
 * NULL when out of memory. */
json_t *altar_history_json(altar_history_t *h, double now);

#endif
