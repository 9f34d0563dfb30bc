/* The reconciler's Prometheus metrics: registered once per run, refreshed
 * from altar_reconciler_stats_t on the daemon's thread (deltas, so a
 * registry shared by several runs keeps counting up). */
#ifndef ALTAR_RECONCILER_DAEMON_METRICS_H
#define ALTAR_RECONCILER_DAEMON_METRICS_H

#include "altar/metrics.h"
#include "reconciler/daemon.h"

typedef struct altar__reconciler_metrics {
  altar_metric_t *events, *batches, *fired, *dead_lettered, *retried, *poison, *published, *held;
  altar_metric_t *checkpoints, *checkpoint_failures, *checkpoint_last_ok, *history_gaps, *consumed_pruned;
  altar_metric_t *partitions_imported;
  altar_metric_t *settled_cached, *settled_ledger_reads, *consumed_prune_next, *storage_retries;
  altar_metric_t *ledger_memtables, *ledger_block_cache, *ledger_block_cache_pinned, *ledger_table_readers;
  altar_metric_t *checkpoint_gc_files, *checkpoint_gc_bytes, *checkpoint_gc_failures, *checkpoint_stored_bytes,
      *checkpoints_stored;
  altar_reconciler_stats_t last; /* what the counters already hold */
} altar__reconciler_metrics_t;

/* Registers the reconciler's metrics in reg (NULL: every update is a no-op).
 * On error the metrics stay off and err says why; the daemon runs anyway. */
int altar__reconciler_metrics_init(altar__reconciler_metrics_t *rm, altar_metrics_t *reg, altar_error_t *err);
/* Brings the counters up to date with st. */
void altar__reconciler_metrics_update(altar__reconciler_metrics_t *rm, const altar_reconciler_stats_t *st);

#endif
