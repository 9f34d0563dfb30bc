/* Garbage collection of checkpoint storage (reconciler/checkpoint.h's
 * layout): checkpoints past the newest `keep` go, and with them the table
 * files (sst/<sha256>) no kept checkpoint lists. Without it every table
 * file RocksDB ever wrote would stay in storage for ever.
 *
 * What stays, whoever shares the URI (reconcilers of other partitions or
 * topics, a standby, an older version):
 *   - a checkpoint stays until `keep` newer checkpoints of the same status
 *     topic each cover every partition it covers: one reconciler's history
 *     never pushes out another's;
 *   - the one latest.json names stays;
 *   - a table file stays while any kept checkpoint lists it, and after that
 *     until `grace_s` has passed since a run of this collector first saw it
 *     unlisted: a checkpoint being shipped right now uploads its table files
 *     before its manifest names them, and must find them there when it
 *     does. The same wait applies to a checkpoint's other files (cp/<id>/)
 *     without a manifest, dated by the time in the id;
 *   - when any manifest cannot be read, no table file goes in that run (its
 *     list is unknown); the run reports it.
 * A file that could not be deleted is counted and tried again next run;
 * an already-deleted one (another collector got there first) is success.
 *
 * The order within a run keeps every visible checkpoint whole: a dropped
 * checkpoint's manifest goes before its files, and table files are judged
 * against manifests listed before the table files were, and listed again
 * just before the first table file goes and then whenever
 * ALTAR_CP_GC_RELIST_S has passed since: a table a checkpoint shipped
 * since names is spared (a ship reuses a table it finds stored; see
 * checkpoint.h for its own re-check). */
#ifndef ALTAR_RECONCILER_CHECKPOINT_GC_H
#define ALTAR_RECONCILER_CHECKPOINT_GC_H

#include "altar/error.h"

#include <stddef.h>
#include <stdint.h>

/* The wait before an unlisted file goes, for a daemon checkpointing every
 * interval_s: far longer than shipping one checkpoint takes. */
double altar__cp_gc_grace_s(double interval_s);
/* A run issues a table file's delete only within ALTAR_CP_GC_LISTING_MAX_S
 * of the start of its last listing of the manifests (monotonic clock): it
 * lists again once ALTAR_CP_GC_RELIST_S has passed, and stops deleting
 * table files for the run when a listing alone takes longer than the
 * bound (they wait for the next run: tables_deferred). A ship waits
 * longer than that bound after its manifest before its re-check
 * (checkpoint.h), so a collection that listed before the manifest has
 * issued its deletes by then. */
#define ALTAR_CP_GC_RELIST_S 0.5
#define ALTAR_CP_GC_LISTING_MAX_S 1.0
/* Test hook: called by a run after its listings, before it looks at the
 * manifests again and deletes table files (a test ships a checkpoint
 * there). NULL in production. */
extern void (*altar__cp_gc_before_table_deletes)(void);

/* What the collector remembers between runs: when it first saw each table
 * file unlisted. Bounded by the unlisted files in storage at the last run. */
typedef struct altar_cp_gc altar_cp_gc_t;
altar_cp_gc_t *altar__cp_gc_new(void);
void altar__cp_gc_free(altar_cp_gc_t *g);

typedef struct altar_cp_gc_result {
  size_t checkpoints_kept;    /* manifests left under cp/ */
  size_t checkpoints_dropped; /* manifests deleted this run */
  size_t files_deleted;       /* objects deleted: manifests, their files, table files */
  uint64_t bytes_deleted;     /* their sizes as listed */
  size_t delete_failures;     /* deletes that failed (tried again next run) */
  size_t tables_waiting;      /* unlisted table files inside their grace */
  size_t tables_spared;       /* past their grace, but listed by a manifest written since the first listing */
  size_t tables_deferred;     /* past their grace, left for the next run: a listing took too long */
  uint64_t bytes_stored;      /* what the listings found, less what was deleted */
} altar_cp_gc_result_t;

/* One run over the checkpoints at uri, at time now (unix seconds; a test
 * sets it). keep >= 1. Returns ALTAR_OK when the run completed, even with
 * delete failures (counted in *res, the first one's message in *err); an
 * error when the storage could not be listed or a manifest not read (*res
 * then holds what was done before). ALTAR_ENOTSUP when the storage cannot
 * list or delete. */
int altar__checkpoint_gc(const char *uri, size_t keep, double grace_s, double now, altar_cp_gc_t *g,
                         altar_cp_gc_result_t *res, altar_error_t *err);

#endif
