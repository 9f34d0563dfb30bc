/* The daemon's checkpoints: taken on its thread every interval while the
 * ledger changes, shipped on a thread of their own so applying never waits
 * for storage. A failed upload changes nothing the daemon relies on (its
 * input offsets live in the ledger, not in the checkpoint): it is logged,
 * counted, and the next interval tries again. */
#ifndef ALTAR_RECONCILER_CHECKPOINT_RUNNER_H
#define ALTAR_RECONCILER_CHECKPOINT_RUNNER_H

#include "reconciler/checkpoint.h"
#include "reconciler/checkpoint_gc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct altar__cp_runner {
  const char *uri; /* borrowed; NULL = off */
  double interval_s;
  double next_due;           /* unix seconds */
  uint64_t taken_at_batches; /* the daemon's batch count at the last take (none yet: 0) */
  /* The upload in flight. */
  pthread_t thread;
  bool running;
  atomic_bool done;
  altar_checkpoint_t cp;
  int rc;
  altar_error_t err;
  altar_cp_shipped_t *shipped;
  /* Results, read by the daemon. */
  uint64_t ok, failed;
  double last_ok_at; /* taken_at of the newest shipped checkpoint */
  /* Garbage collection after each shipped checkpoint, on the same thread
   * (checkpoint_gc.h): keep 0 = off (set by the daemon after init). Its
   * outcome is read with the upload's: gc_ran, gc_rc, gc_res, gc_err. */
  size_t keep;
  altar_cp_gc_t *gc;
  bool gc_ran;
  int gc_rc;
  altar_cp_gc_result_t gc_res;
  altar_error_t gc_err;
  /* Set by the daemon before a tick that may take one (owned by the
   * runner, moved into the checkpoint taken): the publish topics' ends. */
  altar_cp_pub_end_t *pub;
  size_t n_pub;
} altar__cp_runner_t;

/* Whether a tick at now would take a checkpoint (the daemon first waits for
 * its outbox's acknowledgements and reads the publish topics' ends). */
bool altar__cp_runner_due(const altar__cp_runner_t *r, uint64_t batches, double now);

void altar__cp_runner_init(altar__cp_runner_t *r, const char *uri, double interval_s, double now);

/* One turn of the daemon: collects a finished upload (its outcome in *pdone:
 * 1 shipped, -1 failed with *perr, 0 nothing finished) and starts the next
 * when due and the ledger changed (batches: a count of the daemon's writes,
 * batches and acknowledged outbox entries). A
 * failure to take is returned in *perr as a failed one. */
void altar__cp_runner_tick(altar__cp_runner_t *r, altar_ledger_t *l, const char *topic, uint64_t batches, double now,
                           int *pdone, altar_error_t *perr);

/* Waits for an upload in flight (at shutdown); its outcome as tick's. */
void altar__cp_runner_finish(altar__cp_runner_t *r, int *pdone, altar_error_t *perr);
/* Frees what the runner keeps (after finish). */
void altar__cp_runner_free(altar__cp_runner_t *r);

#endif
