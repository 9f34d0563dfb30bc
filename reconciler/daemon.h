/* The reconciler daemon: consumes the status topic, folds events into the
 * ledger in batches, and publishes group events through a durable outbox.
 *
 * One batch is one atomic ledger write holding the ledger changes, the
 * outbox entries the batch made due (group events, retried jobs, DLQ
 * copies of undecodable events) and the next input offset of every
 * partition it read. The daemon resumes from those stored offsets, not from
 * the log's committed ones, so a kill at any point neither loses nor
 * double-applies an event. Outbox entries are published with the idempotent
 * producer and deleted once acknowledged; on start whatever is left is
 * published again (at least once, always with the same bytes). */
#ifndef ALTAR_RECONCILER_DAEMON_H
#define ALTAR_RECONCILER_DAEMON_H

#include "altar/config.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/metrics.h"
#include "altar/transport.h"

#include <signal.h>
#include <stdint.h>

typedef struct altar_reconciler_opts {
  altar_transport_t *transport;      /* borrowed */
  altar_ledger_t *ledger;            /* borrowed; must be durable in production */
  const altar_group_specs_t *groups; /* borrowed */
  const altar_topics_t *topics;      /* borrowed */
  const char *group;                 /* NULL = ALTAR_RECONCILER_GROUP */
  size_t batch_max;                  /* events per atomic write; 0 = 1000 */
  volatile sig_atomic_t *stop;       /* non-zero: finish the batch and stop */
  bool exit_when_idle;               /* stop once caught up with an empty outbox */
  bool quiet;
  /* Called for each group event once it is acknowledged by the log (the
   * demo prints them). May be NULL. */
  void (*on_published)(void *ctx, const char *topic, const void *value, size_t len);
  void *on_published_ctx;
  /* Borrowed, may be NULL: the run registers the altar_reconciler_* metrics
   * here and keeps them current (docs/metrics.md). */
  altar_metrics_t *metrics;
  /* Checkpoints of the ledger in the fleet's storage (reconciler/checkpoint.h):
   * NULL = none. Taken every checkpoint_interval_s (0 = 60) while the ledger
   * changes, and once more at a clean stop. */
  const char *checkpoint_uri;
  double checkpoint_interval_s;
  /* Checkpoints kept in storage (ledger.checkpoints_keep); older ones and
   * the table files only they list are deleted after each new one
   * (reconciler/checkpoint_gc.h). 0 = the default. */
  size_t checkpoints_keep;
  /* Consumed records older than this go (ledger.consumed_keep_days); 0 =
   * kept forever. */
  double consumed_keep_s;
  /* Settled entries kept in memory (ledger.settled_cache_entries); 0 = the
   * default. The rest are read from the ledger when an event asks. */
  size_t settled_cache_entries;
  /* The transport's name and settings, for the reconciler's own readers
   * (at start, whether follow-ups left in the outbox are out already).
   * NULL: such follow-ups are published again. */
  const char *transport_name;
  const altar_strmap_t *transport_props;
  /* Borrowed, may be NULL: the last hour for the dashboard's charts
   * (reconciler/history.h), recorded as batches commit. */
  struct altar_history *history;
  /* Standing by (reconciler/standby.c): the status partitions are read by
   * assignment from the ledger's own offsets (no group joined, nothing
   * committed) and applied exactly as the owner applies them, but nothing
   * is published (outbox entries stay in the ledger, each handed to
   * published's hold) and nothing is checkpointed. follow_tick runs after
   * every turn with the ledger's next offsets and whether a partition's
   * records before them are gone (gap); the run ends when it returns
   * non-zero. */
  bool follow;
  int (*follow_tick)(void *ctx, const altar_tp_t *next, size_t n, bool gap);
  void *follow_ctx;
  /* May be NULL: group events known to be out already (read off the ready
   * and dead topics, reconciler/published_seen.h). Their outbox entries
   * are deleted instead of published; while following, held entries are
   * matched with it. */
  struct altar__published_seen *published;
} altar_reconciler_opts_t;

typedef struct altar_reconciler_stats {
  uint64_t events; /* status events applied */
  uint64_t batches;
  uint64_t fired;                   /* group events fired */
  uint64_t dead_lettered;           /* groups dead-lettered */
  uint64_t retried;                 /* jobs republished for another attempt */
  uint64_t poison;                  /* undecodable status events sent to the DLQ */
  uint64_t published;               /* outbox entries acknowledged */
  uint64_t late;                    /* shards terminal after their group settled (recorded, consumed, no event) */
  uint64_t held;                    /* groups held now: their readiness rule failed (a misconfigured kind) */
  uint64_t checkpoints;             /* checkpoints shipped */
  uint64_t checkpoint_failures;     /* checkpoints that could not be taken or shipped */
  double checkpoint_last_ok;        /* unix time the newest shipped checkpoint was taken; 0 = none */
  uint64_t checkpoint_gc_files;     /* files deleted from checkpoint storage (old checkpoints, unlisted tables) */
  uint64_t checkpoint_gc_bytes;     /* their bytes */
  uint64_t checkpoint_gc_failures;  /* deletes or collections that failed (tried again after the next checkpoint) */
  uint64_t checkpoint_stored_bytes; /* checkpoint storage's size after the last collection */
  uint64_t checkpoints_stored;      /* checkpoints in storage after the last collection */
  uint64_t consumed_pruned;         /* consumed records removed past ledger.consumed_keep_days */
  uint64_t history_gaps;            /* times a status partition's next event lay beyond the ledger's offset
                             (the events between were deleted by retention before being applied) */
  uint64_t partitions_imported;     /* status partitions taken over from a checkpoint into this ledger */
  /* A rebuild's CPU seconds on its reading (and decoding) thread and on its
   * applying thread: which of the two bounds a replay. */
  double read_cpu_s, apply_cpu_s;
  uint64_t followups;                  /* next-stage tasks submitted (then / then_dead) */
  uint64_t followups_failed;           /* of those, templates that could not be made: recorded as failed tasks */
  uint64_t followups_skipped;          /* left in the outbox, found on the jobs topic already: not sent again */
  uint64_t settled_cached;             /* settled entries held in memory now (ledger.settled_cache_entries) */
  uint64_t consumed_prune_next;        /* consumed records the next prune turn will remove (as of the last turn) */
  uint64_t settled_ledger_reads;       /* settled-entry look-ups the memory could not answer: read from the ledger */
  uint64_t storage_retries;            /* batches applied again because the fleet's storage failed a write they need */
  altar_ledger_memory_t ledger_memory; /* a RocksDB ledger's memory (zeros for another kind), every 10 s */
} altar_reconciler_stats_t;

struct altar_checkpoint;

int altar__reconciler_run(const altar_reconciler_opts_t *o, altar_reconciler_stats_t *pstats, altar_error_t *err);

/* Rebuilds a ledger from the beginning of the status topic into new_ledger
 * (fresh, durable) — or, with `from`, from the offsets that checkpoint covers
 * into new_ledger restored from it — and publishes the group events no kept
 * ledger owns: those made due by status events at or beyond the input
 * offsets of `replaced` (the ledger being replaced, read only; NULL: none,
 * so every group the replay decides is published), plus those `replaced`
 * holds undecided. The ready and dead topics are never read: what they
 * still hold depends on their retention. `replaced`'s outbox is the
 * caller's to carry over (altar__outbox_carry). Reads each partition up to
 * its end offset as of the start. Opens its own transport handles
 * (transport_name + props) for reading and publishing. */
int altar__reconciler_rebuild(const char *transport_name, const altar_strmap_t *transport_props,
                              altar_ledger_t *new_ledger, const altar_group_specs_t *groups,
                              const altar_topics_t *topics, const struct altar_checkpoint *from,
                              altar_ledger_t *replaced, bool quiet, altar_reconciler_stats_t *pstats,
                              uint64_t *ppublished_missing, altar_error_t *err);

#endif
