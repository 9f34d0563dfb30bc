/* The daemon's turn at pruning consumed records (consumed_prune.h). */
#include "reconciler/consumed_prune.h"

#include "ledger/ledger_prune.h"

int altar__consumed_prune_tick(altar__consumed_pruner_t *p, altar_ledger_t *l, double now, size_t *ppruned,
                               altar_error_t *err) {
  *ppruned = 0;
  if (p->keep_s <= 0 || p->off || now < p->next_due) return ALTAR_OK;
  p->next_due = now + ALTAR_CONSUMED_PRUNE_INTERVAL_S;
  int64_t before_ms = (int64_t)((now - p->keep_s) * 1000.0);
  int rc = altar__ledger_rocksdb_prune_consumed(l, before_ms, ALTAR_CONSUMED_PRUNE_MAX, ppruned, err);
  if (rc == ALTAR_ENOTSUP) p->off = true;
  /* A full turn means more is due: the next one comes at the next tick. */
  if (!rc && *ppruned >= ALTAR_CONSUMED_PRUNE_MAX) p->next_due = now;
  if (!rc) {
    size_t due = 0;
    int64_t next_ms = (int64_t)((p->next_due - p->keep_s) * 1000.0);
    altar_error_t ignored = {0}; /* only a figure: a failed count leaves the last one */
    if (!altar__ledger_rocksdb_consumed_due(l, next_ms, ALTAR_CONSUMED_PRUNE_MAX, &due, &ignored)) p->next_frees = due;
  }
  return rc;
}
