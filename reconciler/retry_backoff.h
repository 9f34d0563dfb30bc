/* Retry backoff: when a retried shard is due, the facts that record it in
 * the ledger, and the store of retries waiting for their due time.
 * Internal to reconciler/.
 *
 * Aux keys (same atomic write as the change that made them):
 *   "b/<task key>/<attempt, 6 digits>" → JSON {"attempt","delay_s","due","failed_at"}:
 *       the due time of each retry, written by the status-event applier, so a
 *       rebuild from the status topic writes the same facts;
 *   "w/<due ms, 16 hex>/<task key>" → topic NUL key NUL job bytes: a retry
 *       job waiting for its due time (the daemon's; carried over by --rebuild). */
#ifndef ALTAR_RECONCILER_RETRY_BACKOFF_H
#define ALTAR_RECONCILER_RETRY_BACKOFF_H

#include "altar/groups.h"
#include "altar/ledger.h"
#include "reconciler/outbox.h"

#include <stdint.h>

/* Seconds between the failure and attempt `attempt` (>= 1) of task_key:
 * min(max_s, initial_s * factor^(attempt-1)) less up to jitter of it, the
 * fraction taken from SHA-256 of task_key and attempt (deterministic).
 * 0 when b is NULL or has no initial delay. */
double altar__retry_backoff_delay(const altar_retry_backoff_t *b, const char *task_key, int64_t attempt);

/* Records the due fact of a retry (inside the caller's batch). A ledger
 * without aux storage records nothing (0). */
int altar__retry_due_record(altar_ledger_t *l, const char *task_key, int64_t attempt, double failed_ts, double delay_s,
                            altar_error_t *err);

/* The due time recorded for attempt `attempt` of task_key into *pdue; 0
 * when none is recorded (no backoff, or a ledger without aux storage). */
int altar__retry_due_get(altar_ledger_t *l, const char *task_key, int64_t attempt, double *pdue, altar_error_t *err);

/* One recorded due fact. */
typedef struct altar_retry_due {
  char *task_key;
  int64_t attempt;
  double failed_ts, delay_s, due_ts;
} altar_retry_due_t;
/* Every due fact, ordered by task key and attempt; *pv malloc'd (free with
 * altar__retry_dues_free). */
int altar__retry_dues_list(altar_ledger_t *l, altar_retry_due_t **pv, size_t *pn, altar_error_t *err);
void altar__retry_dues_free(altar_retry_due_t *v, size_t n);

/* The daemon's waiting retries. */
typedef struct altar__retry_wait {
  altar_ledger_t *ledger;
  double next_due; /* earliest stored due time; 0 = none stored */
} altar__retry_wait_t;

/* Loads the earliest due time from the ledger. */
int altar__retry_wait_open(altar__retry_wait_t *w, altar_ledger_t *l, altar_error_t *err);
/* Stores a job to produce to topic under key once due_ts has passed
 * (inside the caller's batch). */
int altar__retry_wait_stage(altar__retry_wait_t *w, double due_ts, const char *topic, const char *key,
                            const void *value, size_t vlen, altar_error_t *err);
/* Moves every waiting job due by now_ts into the outbox (one atomic write)
 * and publishes those; *pn (may be NULL) gets how many. */
int altar__retry_wait_release(altar__retry_wait_t *w, altar__outbox_t *ob, double now_ts, size_t *pn,
                              altar_error_t *err);
/* Copies waiting retries from one ledger to another (--rebuild). */
int altar__retry_wait_carry(altar_ledger_t *from, altar_ledger_t *to, size_t *pn, altar_error_t *err);

#endif
