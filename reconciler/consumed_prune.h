/* altar — the daemon's turn at pruning consumed records: at most once per
 * ALTAR_CONSUMED_PRUNE_INTERVAL_S, at most ALTAR_CONSUMED_PRUNE_MAX records
 * per turn, between batches, on the applying thread. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_CONSUMED_PRUNE_H
#define ALTAR_RECONCILER_CONSUMED_PRUNE_H

#include "altar/ledger.h"

#include <stdint.h>

typedef struct altar__consumed_pruner {
  double keep_s;   /* consumed records older go; 0: never pruned */
  double next_due; /* wall seconds of the next turn; 0: at the first tick */
  bool off;        /* the ledger cannot prune (not RocksDB): said once, then quiet */
  /* What the next turn will remove, as the ledger stood at the last turn
   * (counted up to a turn's bound): what an operator sees coming. */
  size_t next_frees;
} altar__consumed_pruner_t;

/* One turn when due at wall time now: *ppruned gets the records removed
 * (0 when not due), then next_frees what the next turn will. An error
 * leaves the ledger as it was; the next turn tries again. */
int altar__consumed_prune_tick(altar__consumed_pruner_t *p, altar_ledger_t *l, double now, size_t *ppruned,
                               altar_error_t *err);

#endif
