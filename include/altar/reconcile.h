/* altar — reconciliation: one tick (reconcile_once), the reference loop
 * (run_reconcile_loop), and applying status events from the log. */
#ifndef ALTAR_RECONCILE_H
#define ALTAR_RECONCILE_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/arena.h"
#include "altar/codec.h"
#include "altar/groups.h"
#include "altar/ledger.h"

/* A growable list of strings ("kind:group_key"). */
typedef struct altar_strlist {
  char **v;
  size_t n, cap;
} altar_strlist_t;
int altar_strlist_push(altar_strlist_t *l, const char *s);
void altar_strlist_clear(altar_strlist_t *l);

/* All reconcile_once needs from an execution backend: probe handles without
 * blocking. The poll function fills *pout with a malloc'd array of *pn
 * statuses (caller frees with altar_statuses_free). The lead adapts the
 * ExecutionBackend vtable to this. */
typedef struct altar_poller {
  int (*poll)(void *ctx, const altar_handle_t *hs, size_t n, altar_status_t **pout, size_t *pn, altar_error_t *err);
  void *ctx;
} altar_poller_t;

/* Summary of one tick. */
typedef struct altar_reconcile_result {
  size_t polled;    /* open handles probed */
  size_t succeeded; /* of those, observed succeeded */
  size_t failed;    /* of those, observed failed */
  altar_strlist_t fired_groups;
  altar_strlist_t dead_lettered_groups;
  altar_strlist_t deferred_groups;
  altar_strlist_t stalled_groups;
} altar_reconcile_result_t;
void altar_reconcile_result_clear(altar_reconcile_result_t *r);

typedef struct altar_reconcile_opts {
  size_t max_concurrent_callbacks; /* 0 or 1: sequential; else threads, at most this many */
} altar_reconcile_opts_t;

/* One non-blocking tick, in this order: poll every open handle in one call;
 * write each observed state back; bucket succeeded-unconsumed records by
 * kind and group_by; evaluate every predicate (an error here returns before
 * anything fires or is consumed, after the states are written); call
 * on_ready for each ready group and consume its shards (the failed ones of
 * that group too); then for each group blocked by a failed shard call
 * on_failed (dead-lettered → consumed; deferred → untouched) or, without a
 * handler, report it stalled. Records of kinds without a spec are ignored.
 * *pres must be zeroed; the caller clears it. Keeps no state across calls. */
int altar_reconcile_once(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                         const altar_reconcile_opts_t *opts, altar_reconcile_result_t *pres, altar_error_t *err);

typedef struct altar_reconcile_loop_opts {
  double interval_s;   /* sleep between ticks */
  uint64_t max_ticks;  /* 0 = unbounded */
  bool stop_when_idle; /* stop after a tick with no open handle and no fired group */
  size_t max_concurrent_callbacks;
} altar_reconcile_loop_opts_t;
/* interval 5 s, unbounded, stop_when_idle. */
altar_reconcile_loop_opts_t altar_reconcile_loop_defaults(void);

/* Calls reconcile_once until idle or max_ticks. *presults (malloc'd, *pn of
 * them; free with altar_reconcile_results_free) holds every tick's result,
 * also on error. ALTAR_ESTALLED (ReconcileStalled) when a tick reports
 * stalled groups; they are copied into *pstalled when it is not NULL (caller
 * clears) and named in err. Predicate errors propagate. */
int altar_run_reconcile_loop(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                             const altar_reconcile_loop_opts_t *opts, altar_reconcile_result_t **presults, size_t *pn,
                             altar_strlist_t *pstalled, altar_error_t *err);
void altar_reconcile_results_free(altar_reconcile_result_t *rs, size_t n);

/* ---- applying status events (the reconciler daemon's core) ---- */

/* A failed shard the fleet should run again (on_failed: retry). The record
 * is already back to PENDING with restart_count raised. */
typedef struct altar_retry_request {
  char *kind;
  char *task_key; /* NULL if the record had none */
  altar_handle_t handle;
  altar_spec_t *spec; /* NULL if none stored */
  int64_t restart_count;
  double failed_ts;  /* ts of the status event that asked for the retry */
  double due_ts;     /* not to be republished before: failed_ts + the kind's backoff */
  int32_t partition; /* the ledger's scope when it was asked: the status partition */
} altar_retry_request_t;

/* The members one group decision consumed (altar_apply_result_t.settled). */
typedef struct altar_settled_members {
  altar_handle_t *shards;
  char **task_keys;
  size_t n;
} altar_settled_members_t;

typedef struct altar_apply_result {
  /* Fired / dead_lettered, in decision order. Their strings and shards lie
   * in `mem`: read them, never clear them; they last until the result is
   * reset or cleared. */
  altar_group_event_t *events;
  size_t n_events, cap_events;
  /* Per event, every member its decision consumed: the listed shards
   * first, then those settled with them but not listed (a fired group's
   * failed shards, a dead-lettered group's succeeded ones), each with its
   * task key (NULL where a record has none). What settled a task, without a
   * ledger read. In `mem` too. */
  altar_settled_members_t *settled;
  /* Per event, the ledger's scope when it was decided (altar_ledger_scope):
   * the status partition of the event that made it due, where what it
   * stages goes. */
  int32_t *event_part;
  altar_retry_request_t *retries;
  size_t n_retries, cap_retries;
  altar_strlist_t deferred_groups; /* "kind:group_key", once per decision */
  altar_strlist_t stalled_groups;
  size_t applied; /* events applied (events of kinds without a GroupSpec are
                     recorded too, never grouped) */
  size_t ignored; /* of those, duplicates that changed nothing */
  /* Late shards: terminal after their group settled (the reconciler's
   * settled set knows the group). Recorded and consumed, never a second
   * group event: "kind:group_key task_key state[ reason]" each. */
  altar_strlist_t late_shards;
  /* Groups whose readiness rule failed (a misconfigured kind): held, not
   * fired, consumed nor dead-lettered, with the rule's error beside each
   * ("kind:group_key" in held_groups, the text at the same index in
   * held_reasons). The ledger notes them (ALTAR_HELD_PREFIX) until they
   * settle or a re-check finds the rule working (altar__apply_recheck_held). */
  altar_strlist_t held_groups, held_reasons;
  /* Set by the caller when the ledger may note a held group (the daemon:
   * its held count is not known to be zero; a replay: once it held one).
   * Unset, a decision skips the side-key look-ups that could only find its
   * group not held, except for groups this result held itself, so the
   * ledger written never depends on how events were batched. Kept by reset. */
  bool ledger_may_hold;
  altar_arena_t mem; /* the events' memory: one reset per batch, not a free per string */
} altar_apply_result_t;
void altar_apply_result_clear(altar_apply_result_t *r);
/* Applies one terminal state event of a late shard: sets the state of its
 * open record and consumes it, evaluating no group, and notes it in
 * pres->late_shards. Internal to the reconciler (reconciler/settled.c). */
int altar__apply_late(altar_ledger_t *ledger, const altar_status_event_t *ev, const char *group_name,
                      altar_apply_result_t *pres, altar_error_t *err);
/* Settles group (gs->kind, gk) as cancelled: members not yet terminal are
 * marked failed "cancelled", every open member is consumed, and a
 * "cancelled" group event listing them is appended with ts. A group with no
 * open member makes none. Internal to the reconciler (reconciler/cancel.c). */
int altar__apply_cancel_group(altar_ledger_t *ledger, const altar_group_spec_t *gs, const char *gk, double ts,
                              altar_apply_result_t *pres, altar_error_t *err);
/* Side keys of held groups: prefix, kind, a NUL, the group key; the value is
 * "<ts>\n<reason>" with the ts of the event that last touched the group. */
#define ALTAR_HELD_PREFIX "held/"
/* Evaluates every held group again with specs, in key order: one whose rule
 * now works fires (with the ts stored when it was held), is dead-lettered
 * or, not ready yet, is no longer held; one whose rule still fails stays
 * held (noted in pres again); one whose kind has no GroupSpec stays held.
 * Call inside an open ledger batch. Internal to the reconciler (daemon start). */
int altar__apply_recheck_held(altar_ledger_t *ledger, const altar_group_specs_t *specs, altar_apply_result_t *pres,
                              altar_error_t *err);
/* Counts the held groups the ledger notes (0 for a ledger without side keys). */
int altar__held_count(altar_ledger_t *ledger, size_t *pn, altar_error_t *err);
/* Empties r for reuse, keeping its arrays' capacity. */
void altar_apply_result_reset(altar_apply_result_t *r);

/* Applies events in order, as if each were applied alone: submitted →
 * record (group key from the kind's group_by; supersedes an older open
 * record with the same task key); state → set_state (+failure); released →
 * consume without firing. After each event only the group it touched is
 * evaluated, so batch size never changes which shards a group fires with.
 * Due group events are appended to *pres with their deterministic event_id
 * (over the members' task keys, or "backend:external_id" when a member has
 * none) and `ts` = now_ts, or, when now_ts < 0, the ts of the event that
 * made the group due (so a replay yields identical bytes). Does not begin or commit: call it between
 * altar_ledger_begin and altar_ledger_commit to make the batch one atomic
 * write (and to add your own keys to the same write). A predicate error
 * returns ALTAR_EPREDICATE naming the event index; abort the batch then.
 * *pres must be zeroed; the caller clears it. */
int altar_apply_events(altar_ledger_t *ledger, const altar_group_specs_t *specs, const altar_status_event_t *events,
                       size_t n, double now_ts, altar_apply_result_t *pres, altar_error_t *err);

/* begin + altar_apply_events + commit (abort on error). */
int altar_apply_events_atomic(altar_ledger_t *ledger, const altar_group_specs_t *specs,
                              const altar_status_event_t *events, size_t n, double now_ts, altar_apply_result_t *pres,
                              altar_error_t *err);

ALTAR_API_END

#endif
