/* altar — the attempts of a shard: every run of a task key kept as evidence
 * (state, reason, exit code, worker, times, the tail of its output), in the
 * order they ran, so a retried shard's first failure stays readable after
 * the retry succeeded.
 *
 * The status-event applier files them as ledger side keys beside the
 * records, in the same write as the change that ended the run:
 *   "ai/<task key>"               the index: {"first","last_run","next"}
 *   "a/<task key>/<n, 6 digits>"  attempt n (from 1) as compact JSON
 * (the indexes apart, so finding the shards that ran again reads no
 * attempt's detail).
 * A run is filed when it stops being the shard's outcome or says something
 * a later run would overwrite: when it fails, when a newer run supersedes
 * it, when its worker releases it, and every run of a retried shard
 * (restart count above 0) at its start and end. A shard that succeeded at
 * its first run writes nothing here: its record is its one attempt. At most
 * `attempts_keep` attempts (a kind's group setting) are kept per task key;
 * older ones are dropped and counted. The ledger checksum covers them.
 *
 * Thread safety: as the ledger's. */
#ifndef ALTAR_ATTEMPTS_H
#define ALTAR_ATTEMPTS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/ledger.h"
#include "altar/task.h"

#include <stdint.h>

#define ALTAR_ATTEMPTS_PREFIX "a/"
#define ALTAR_ATTEMPTS_INDEX_PREFIX "ai/"
/* Default and bounds of a kind's `attempts_keep`. */
#define ALTAR_ATTEMPTS_KEEP_DEFAULT 10
#define ALTAR_ATTEMPTS_KEEP_MAX 1000

/* One run of a shard. Times are Unix seconds, < 0 when not known (a first
 * run's start is not kept: that would cost a write per shard). */
typedef struct altar_attempt {
  int64_t n; /* 1 for the first run */
  char *backend, *external_id;
  char *worker; /* NULL when not known */
  int64_t restart_count;
  altar_state_t state;
  altar_failure_t *failure; /* NULL unless failed; detail cut to ALTAR_BOUND_DETAIL bytes */
  double started_at, ended_at;
} altar_attempt_t;

typedef struct altar_attempts {
  altar_attempt_t *v;
  size_t n;
  int64_t dropped; /* older attempts no longer kept (attempts_keep) */
} altar_attempts_t;

/* The attempts of the shard whose record is e (its task key's filed runs,
 * then e's own run when it is not filed yet; a filed run that is e's takes
 * e's present state and failure), into *out (caller clears). A record
 * without task key, or a ledger without side keys, gives e's run alone.
 * Reads what is committed. */
int altar_attempts_of(altar_ledger_t *l, const altar_ledger_entry_t *e, altar_attempts_t *out, altar_error_t *err);
void altar_attempts_clear(altar_attempts_t *a);

/* The task keys that have filed attempts, sorted bytewise, into a malloc'd
 * array of malloc'd strings (free with altar_attempts_keys_free): one scan
 * of the index keys, so a reader of many shards looks up only those that
 * ran more than once. None for a ledger without side keys. */
int altar_attempts_keys(altar_ledger_t *l, char ***pkeys, size_t *pn, altar_error_t *err);
/* Whether key is in keys[0..n) (as altar_attempts_keys gave them). */
bool altar_attempts_keys_has(char *const *keys, size_t n, const char *key);
void altar_attempts_keys_free(char **keys, size_t n);

ALTAR_API_END

#endif
