/* Task keys of settled groups: a run of a task whose group already fired
 * or was dead-lettered is not applied again. A worker killed after its
 * terminal event was acknowledged but before its offset commit makes the
 * next owner run that job again, under the same task key and a new handle;
 * applied, that run would open a record no group ever consumes again (an
 * orphan), or fire the group a second time with the same event_id and
 * other shards. The daemon and the rebuild both apply through here, so a
 * replay makes the same decisions. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_SETTLED_H
#define ALTAR_RECONCILER_SETTLED_H

#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/reconcile.h"
#include "core/hmap.h"
#include "reconciler/settled_cache.h"

/* A settlement stops counting for events more than this many seconds (of
 * event time) after it: reruns come within minutes of the first run, and
 * the set must not grow forever. Entries are dropped from the ledger at
 * twice this age. */
#define ALTAR_SETTLED_HORIZON_S (7.0 * 24 * 3600)

typedef struct altar__settled {
  /* The entries last used, bounded (ledger.settled_cache_entries); a miss
   * reads the ledger's index, so what it holds never changes a decision. */
  altar__settled_cache_t cache;
  /* key → altar__settled_entry_t noted in the open batch (owned): moved
   * into the cache on commit, freed on abort */
  altar__hmap_t pend;
  /* The ledger held settled entries before this load: a key the cache does
   * not hold is read from the ledger. Without them, only keys the cache
   * evicted are (its bloom filter tells). */
  bool pre_existing;
  /* No aux storage: nothing is stored, so the cache is never bounded. */
  bool no_store;
  /* A replay into a ledger without settled entries (altar__settled_replay):
   * members noted are not kept in memory, only in the cache's filter, and
   * a look-up the filter cannot rule out reads the ledger. */
  bool replay;
  uint64_t next_seq;     /* of the next record */
  double horizon_s;      /* ALTAR_SETTLED_HORIZON_S, or the process's setting (altar__settled_set_horizon_s) */
  double max_ts;         /* newest event time seen */
  double next_prune;     /* event time of the next pruning pass */
  uint64_t pruned;       /* entries dropped so far */
  uint64_t damaged;      /* records (or index values) found unreadable */
  altar_error_t damage;  /* what they were, when damaged > 0 at load */
  uint64_t ledger_reads; /* look-ups the cache could not answer */
  altar_buf_t kb, vb;    /* scratch for keys and values */
  /* Job ids some cancel fact names (reconciler/cancel.h): only their events
   * are looked up against the facts. May hold extra ids after an aborted
   * batch, which only costs a look-up. */
  altar_strlist_t cancelled_jobs;
} altar__settled_t;

/* Opens the settled set of a ledger without reading its entries: they are
 * read one by one when an event asks (a ledger without aux storage starts
 * empty and keeps everything in memory). cache_entries bounds the memory
 * (0: ALTAR_DEFAULT_SETTLED_CACHE_ENTRIES). A ledger written before the
 * index existed is indexed once, here: keys of the older per-member layout
 * carried into records, damaged records deleted, in one write; a damaged
 * record does not fail the load: it counts in damaged, described in damage.
 * Free with altar__settled_free. */
int altar__settled_load(altar__settled_t *s, altar_ledger_t *l, size_t cache_entries, altar_error_t *err);
/* The horizon the sets loaded after it use, for the whole process (the
 * daemon and --rebuild alike, so both decide the same): seconds > 0, or 0
 * for ALTAR_SETTLED_HORIZON_S. ledger.settled_horizon_s sets it, for tests
 * and soaks that must see settled entries go within minutes. */
void altar__settled_set_horizon_s(double seconds);
void altar__settled_free(altar__settled_t *s);
/* For a replay (reconciler/rebuild.c), right after load: the members it
 * notes are remembered by the cache's filter alone, not copied into the
 * cache one by one; what a look-up the filter passes reads from the ledger
 * (its open batch included) answers as the entry would have. Decisions and
 * stored bytes are the same; a replay then costs no allocation per member.
 * Nothing changes for a ledger that held settled entries, or none at all
 * (no aux storage). */
void altar__settled_replay(altar__settled_t *s);
/* 1 when task_key was settled (by any run, expired or not), 0 when not,
 * or a negative code (a failed ledger read) with err set. */
int altar__settled_has_task(altar__settled_t *s, altar_ledger_t *l, const char *task_key, altar_error_t *err);

/* Applies events one at a time inside the caller's open batch, as
 * altar_apply_events does, skipping an event whose task key was settled by
 * another run (*pskipped counts them; may be NULL) and noting the members
 * of every group it settles (stored with the batch). Errors as
 * altar_apply_events; the caller then aborts the batch and calls
 * altar__settled_abort, else commits it and calls altar__settled_commit. */
int altar__settled_apply(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                         const altar_status_event_t *events, size_t n, altar_apply_result_t *pres, size_t *pskipped,
                         altar_error_t *err);
/* Evaluates the ledger's held groups again (altar__apply_recheck_held)
 * inside the caller's open batch, noting the members of every group that
 * now settles; commit or abort as after altar__settled_apply. */
int altar__settled_recheck_held(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                                altar_apply_result_t *pres, altar_error_t *err);
void altar__settled_commit(altar__settled_t *s);
void altar__settled_abort(altar__settled_t *s);

#endif
