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
#include <stdbool.h>
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

/* One bucket as the ledger keeps it (reconciler/history_store.h): what a
 * dashboard in another process reads to chart the reconciler's hour. */
typedef struct altar_history_bucket {
  int64_t index; /* floor(unix time / ALTAR_HISTORY_BUCKET_S) */
  uint32_t finished, fired, dead;
  int64_t lag; /* -1 = not seen in this bucket */
  size_t n_failures;
  struct {
    char reason[ALTAR_HISTORY_REASON_LEN];
    uint32_t n;
  } failures[ALTAR_HISTORY_REASONS_MAX + 1];
} altar_history_bucket_t;

/* Counts every change recorded: a saver writes again only after one. */
uint64_t altar__history_version(altar_history_t *h);
/* The bucket of index into *out; false when h holds none for it (never
 * written, or reused for a later span). */
bool altar__history_bucket_get(altar_history_t *h, int64_t index, altar_history_bucket_t *out);
/* Puts b in place of what h holds for its span, as of now (a bucket older
 * than the hour, or older than what its slot holds, is ignored). The lag
 * h saw itself stays when b has none. */
void altar__history_bucket_put(altar_history_t *h, const altar_history_bucket_t *b, double now);

#endif
