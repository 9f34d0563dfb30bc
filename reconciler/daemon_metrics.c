/* The reconciler's metrics, kept apart from the loop so it only calls update. */
#include "reconciler/daemon_metrics.h"

#include <stddef.h>
#include <string.h>

int altar__reconciler_metrics_init(altar__reconciler_metrics_t *rm, altar_metrics_t *reg, altar_error_t *err) {
  memset(rm, 0, sizeof *rm);
  if (!reg) return ALTAR_OK;
  static const altar_metric_def_t defs[] = {
#define C(f, n, h) {offsetof(altar__reconciler_metrics_t, f), ALTAR_METRIC_COUNTER, n, h}
      C(events, "altar_reconciler_events_applied_total", "Status events applied to the ledger."),
      C(batches, "altar_reconciler_batches_total", "Atomic ledger writes (batches of status events)."),
      C(fired, "altar_reconciler_groups_fired_total", "Group events fired (groups that became ready)."),
      C(dead_lettered, "altar_reconciler_groups_dead_lettered_total", "Groups dead-lettered."),
      C(retried, "altar_reconciler_jobs_retried_total", "Jobs republished for another attempt."),
      C(poison, "altar_reconciler_poison_total", "Undecodable or unappliable status events sent to the DLQ."),
      C(published, "altar_reconciler_outbox_published_total", "Outbox entries acknowledged by the log."),
      C(checkpoints, "altar_reconciler_checkpoints_total", "Ledger checkpoints shipped to the fleet's storage."),
      C(checkpoint_failures, "altar_reconciler_checkpoint_failures_total",
        "Ledger checkpoints that could not be taken or shipped (the daemon keeps applying)."),
      C(checkpoint_gc_files, "altar_reconciler_checkpoint_gc_deleted_files_total",
        "Files deleted from checkpoint storage: checkpoints past ledger.checkpoints_keep and table files no kept "
        "checkpoint lists."),
      C(checkpoint_gc_bytes, "altar_reconciler_checkpoint_gc_deleted_bytes_total",
        "Bytes of the files deleted from checkpoint storage."),
      C(checkpoint_gc_failures, "altar_reconciler_checkpoint_gc_failures_total",
        "Deletes from checkpoint storage that failed, and collections that stopped early (tried again after the "
        "next checkpoint)."),
      C(consumed_pruned, "altar_reconciler_consumed_pruned_total",
        "Consumed ledger records removed past their age (ledger.consumed_keep_days)."),
      C(history_gaps, "altar_reconciler_history_gaps_total",
        "Status partitions found to continue beyond the ledger's offset: events deleted by retention were never "
        "applied."),
      C(partitions_imported, "altar_reconciler_partitions_imported_total",
        "Status partitions gained beyond the ledger's offset and taken over from the checkpoint covering them "
        "furthest (their state imported into this ledger)."),
      C(settled_ledger_reads, "altar_reconciler_settled_ledger_reads_total",
        "Look-ups of settled groups' entries that memory could not answer, read from the ledger."),
      C(storage_retries, "altar_reconciler_storage_retries_total",
        "Batches applied again because the fleet's storage failed a write they need (a follow-up's inputs "
        "manifest); nothing was committed or skipped."),
#undef C
      {offsetof(altar__reconciler_metrics_t, checkpoint_last_ok), ALTAR_METRIC_GAUGE,
       "altar_reconciler_checkpoint_last_success_timestamp_seconds",
       "When the newest shipped checkpoint was taken (unix seconds; 0 = none yet)."},
      {offsetof(altar__reconciler_metrics_t, checkpoint_stored_bytes), ALTAR_METRIC_GAUGE,
       "altar_reconciler_checkpoint_storage_bytes",
       "Bytes in checkpoint storage after the last collection (table files, manifests, checkpoints' own files)."},
      {offsetof(altar__reconciler_metrics_t, checkpoints_stored), ALTAR_METRIC_GAUGE,
       "altar_reconciler_checkpoints_stored",
       "Checkpoints in storage after the last collection (ledger.checkpoints_keep per set of partitions)."},
      {offsetof(altar__reconciler_metrics_t, held), ALTAR_METRIC_GAUGE, "altar_reconciler_groups_held",
       "Groups held: their readiness rule failed (a misconfigured kind); none fired, consumed or dead-lettered."},
      {offsetof(altar__reconciler_metrics_t, settled_cached), ALTAR_METRIC_GAUGE,
       "altar_reconciler_settled_cached_entries",
       "Settled entries (shards and groups of settled groups) held in memory; bounded by "
       "ledger.settled_cache_entries."},
      {offsetof(altar__reconciler_metrics_t, consumed_prune_next), ALTAR_METRIC_GAUGE,
       "altar_reconciler_consumed_prune_next_records",
       "Consumed ledger records the next pruning turn will remove (ledger.consumed_keep_days; as of the last turn, "
       "at most a turn's 10000)."},
#define G(f, n, h) {offsetof(altar__reconciler_metrics_t, f), ALTAR_METRIC_GAUGE, n, h}
      G(ledger_memtables, "altar_reconciler_ledger_memtable_bytes",
        "The RocksDB ledger's memtables (bounded by ledger.write_buffer_mb, twice while one is flushed)."),
      G(ledger_block_cache, "altar_reconciler_ledger_block_cache_bytes",
        "The RocksDB ledger's block cache in use (64 MiB at most, beyond it only what is pinned)."),
      G(ledger_block_cache_pinned, "altar_reconciler_ledger_block_cache_pinned_bytes",
        "Of the block cache, what readers hold or is pinned (level 0's and the top level's index and filters)."),
      G(ledger_table_readers, "altar_reconciler_ledger_table_readers_bytes",
        "The RocksDB ledger's table readers beside the cache (grows with its open table files, at most 512)."),
#undef G
  };
  int rc = altar_metrics_register_table(reg, defs, sizeof defs / sizeof defs[0], rm, err);
  return rc ? rc : altar_metrics_build_info(reg, "reconciler", err);
}

void altar__reconciler_metrics_update(altar__reconciler_metrics_t *rm, const altar_reconciler_stats_t *st) {
  if (!rm->events) return;
  altar_metric_add_since(rm->events, st->events, &rm->last.events);
  altar_metric_add_since(rm->batches, st->batches, &rm->last.batches);
  altar_metric_add_since(rm->fired, st->fired, &rm->last.fired);
  altar_metric_add_since(rm->dead_lettered, st->dead_lettered, &rm->last.dead_lettered);
  altar_metric_add_since(rm->retried, st->retried, &rm->last.retried);
  altar_metric_add_since(rm->poison, st->poison, &rm->last.poison);
  altar_metric_add_since(rm->published, st->published, &rm->last.published);
  altar_metric_set(rm->held, (double)st->held);
  altar_metric_add_since(rm->checkpoints, st->checkpoints, &rm->last.checkpoints);
  altar_metric_add_since(rm->checkpoint_failures, st->checkpoint_failures, &rm->last.checkpoint_failures);
  altar_metric_add_since(rm->history_gaps, st->history_gaps, &rm->last.history_gaps);
  altar_metric_add_since(rm->partitions_imported, st->partitions_imported, &rm->last.partitions_imported);
  altar_metric_add_since(rm->consumed_pruned, st->consumed_pruned, &rm->last.consumed_pruned);
  altar_metric_set(rm->checkpoint_last_ok, st->checkpoint_last_ok);
  altar_metric_add_since(rm->checkpoint_gc_files, st->checkpoint_gc_files, &rm->last.checkpoint_gc_files);
  altar_metric_add_since(rm->checkpoint_gc_bytes, st->checkpoint_gc_bytes, &rm->last.checkpoint_gc_bytes);
  altar_metric_add_since(rm->checkpoint_gc_failures, st->checkpoint_gc_failures, &rm->last.checkpoint_gc_failures);
  altar_metric_set(rm->checkpoint_stored_bytes, (double)st->checkpoint_stored_bytes);
  altar_metric_set(rm->checkpoints_stored, (double)st->checkpoints_stored);
  altar_metric_set(rm->settled_cached, (double)st->settled_cached);
  altar_metric_set(rm->consumed_prune_next, (double)st->consumed_prune_next);
  altar_metric_add_since(rm->settled_ledger_reads, st->settled_ledger_reads, &rm->last.settled_ledger_reads);
  altar_metric_add_since(rm->storage_retries, st->storage_retries, &rm->last.storage_retries);
  altar_metric_set(rm->ledger_memtables, (double)st->ledger_memory.memtables);
  altar_metric_set(rm->ledger_block_cache, (double)st->ledger_memory.block_cache);
  altar_metric_set(rm->ledger_block_cache_pinned, (double)st->ledger_memory.block_cache_pinned);
  altar_metric_set(rm->ledger_table_readers, (double)st->ledger_memory.table_readers);
}
