/* The worker's internals, shared by its files (worker.c: the loop and its
 * phases; worker_<concern>.c: one concern each). Not part of any API: only
 * the worker part includes it. Single-threaded like the worker itself. */
#ifndef ALTAR_WORKER_INT_H
#define ALTAR_WORKER_INT_H

#include "worker/worker.h"

#include "altar/codec.h"
#include "worker/cancel_set.h"
#include "worker/intake.h"
#include "worker/lookahead.h"
#include "worker/offset_tracker.h"
#include "worker/peers.h"
#include "worker/worker_metrics.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A running (or finishing) task. */
typedef struct wtask {
  altar_handle_t handle;
  altar_spec_t *spec;
  char task_key[ALTAR_TASK_KEY_LEN + 1];
  char *status_key;
  char *topic;
  int32_t partition;
  int64_t offset;
  altar_state_t state;
  bool terminal_sent; /* terminal event produced, waiting for its ack */
  bool acked;         /* terminal event acknowledged: the job is done */
  bool released;      /* handed back at a stop's deadline (already cancelled) */
  bool held;          /* its partition was revoked: runs on here for handover */
  int64_t started_ms; /* altar_mono_ms() when the backend took it; 0: it never ran here */
} wtask_t;

/* A job another worker holds (the partition's metadata says so): kept,
 * not started, until its holder says it is done or released, or is taken
 * for dead at deadline_ms. */
typedef struct waiting {
  altar_msg_t *msg;
  int64_t deadline_ms; /* 0: released, start as soon as a slot is free */
} waiting_t;

/* One produced record waiting for its delivery report. */
typedef struct pending {
  struct worker *w;
  char *topic;
  int32_t partition; /* ALTAR_PARTITION_ANY, or explicit (control messages) */
  char *key;
  altar_buf_t value;
  altar_header_t headers[3];
  char *hbuf[3];
  size_t n_headers;
  int attempts;
  /* On acknowledgement: mark this source offset finished (terminal events
   * and DLQ copies) and/or this task acked. */
  bool finishes;
  char *src_topic;
  int32_t src_partition;
  int64_t src_offset;
  wtask_t *task;
  bool is_status;
  bool forward; /* a forwarded copy: its ack hands the job to a peer */
} pending_t;

typedef struct assigned {
  char *topic;
  int32_t partition;
} assigned_t;

/* A pool this worker's backend serves, and the jobs topic it reads for it. */
typedef struct wpool {
  char *name; /* capacity key: ALTAR_POOL_CPU or a GPU pool */
  char *topic;
  bool full;            /* no free slot for it */
  bool paused;          /* full and the look-ahead too: its partitions are not read */
  int32_t n_partitions; /* of its topic, 0 when unknown (no forwarding to it) */
} wpool_t;

typedef struct worker {
  const altar_worker_opts_t *o;
  char worker_id[256];
  const char *group;
  altar__offset_tracker_t *tracker;
  wtask_t **tasks;
  size_t n_tasks, cap_tasks;
  assigned_t *parts;
  size_t n_parts, cap_parts;
  waiting_t *waits;
  size_t n_waits, cap_waits;
  int lease_interval_ms, lease_timeout_ms;
  int64_t next_lease;
  bool paused; /* no pool has a free slot */
  wpool_t *pools;
  size_t n_pools;
  altar_capacity_t cap; /* the backend's last report, less what started since */
  altar__intake_ctx_t intake;
  size_t outstanding; /* produced, not yet reported */
  uint64_t finished_jobs;
  altar_worker_stats_t stats;
  altar__worker_metrics_t metrics;
  altar__cancel_set_t cancels; /* jobs (or groups) `altar cancel` stopped */
  altar__lookahead_t ahead;    /* read, not yet taken in (lookahead.h) */
  /* Forwarding (docs/forwarding.md): peers from the fleet topic, the load
   * the heartbeats announce, and a commit owed after a forward. */
  altar__peers_t *peers;
  bool fleet_assigned;
  int64_t fleet_next_ms;
  int forward_after_ms;
  const char **load_pools; /* w->pools[i].name */
  int64_t *load_free;
  bool parts_changed, commit_soon;
  /* Fault injection for tests (ALTAR_TEST_CRASH_AFTER_FORWARD set): die at
   * the first forward's acknowledgement, before its commit — the crash
   * window docs/forwarding.md describes. */
  bool crash_after_forward;
  int fatal;
  altar_error_t fatal_err;
  /* The last consume error logged, when, and how often it came since: a
   * failing log (its directory gone, a broker away) repeats the same error
   * every turn of the loop, and one line per 10 s says as much. */
  char consume_err[sizeof(((altar_error_t *)0)->msg)];
  int64_t consume_err_ms;
  long consume_err_repeats;
} worker_t;

/* The most pools a backend may declare (a pool is a topic subscribed). */
#define WORKER_POOLS_MAX 64

/* ---- log lines, producing with retries, status events (worker_emit.c) ---- */

void altar__worker_log(worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void altar__worker_task_line(worker_t *w, const wtask_t *t, const char *what, const altar_failure_t *f);
void altar__worker_set_fatal(worker_t *w, int code, const char *what, const altar_error_t *e);
void altar__worker_pending_free(pending_t *p);
int altar__worker_pending_send(worker_t *w, pending_t *p);
pending_t *altar__worker_pending_new(worker_t *w, const char *topic, const char *key);
int altar__worker_pending_add_header(pending_t *p, const char *name, const char *value);
void altar__worker_on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx);
int altar__worker_emit_status(worker_t *w, wtask_t *task, altar_status_event_kind_t kind, altar_state_t state,
                              const altar_failure_t *failure, bool with_spec, bool terminal);

/* ---- the dead-letter queue (worker_dlq.c) ---- */

void altar__worker_dead_letter(worker_t *w, const altar_msg_t *m, const char *reason, bool finishes);

/* ---- control messages, waits for held jobs, leases (worker_control.c) ---- */

int altar__worker_send_control(worker_t *w, const char *topic, int32_t partition, altar_control_event_t ev,
                               const int64_t *offs, size_t n);
void altar__worker_waits_drop(worker_t *w, const char *topic, int32_t partition);
int64_t altar__worker_lease_deadline(const worker_t *w, double lease_s);
void altar__worker_obey_control(worker_t *w, const altar_msg_t *m, const altar_control_msg_t *c);
void altar__worker_handle_control(worker_t *w, const altar_msg_t *m);
void altar__worker_waits_expire(worker_t *w);
bool altar__worker_wait_add(worker_t *w, altar_msg_t *m, int64_t deadline_ms);
void altar__worker_leases_if_due(worker_t *w);

/* ---- tasks (worker_tasks.c) ---- */

void altar__worker_task_free(wtask_t *t);
size_t altar__worker_in_flight(const worker_t *w);
void altar__worker_reap_acked(worker_t *w);
char *altar__worker_status_key_for(worker_t *w, const altar_spec_t *spec, const altar_handle_t *h,
                                   const char *task_key);
void altar__worker_fail_before_run(worker_t *w, wtask_t *t, const char *reason, const char *detail, bool deterministic);
void altar__worker_start_job(worker_t *w, const altar_msg_t *m);
wtask_t *altar__worker_task_find(worker_t *w, const char *topic, int32_t partition, int64_t offset);
void altar__worker_poll_tasks(worker_t *w, int partition_filter, const char *topic_filter);

/* ---- pools, slot gating, the look-ahead, one record taken in (worker_intake.c) ---- */

int64_t altar__worker_pool_free(const worker_t *w, const char *pool);
void altar__worker_update_gates(worker_t *w);
void altar__worker_gate_assigned(worker_t *w, const altar_tp_t *parts, size_t n);
void altar__worker_refresh_capacity(worker_t *w);
void altar__worker_capacity_took(worker_t *w, const altar_resources_t *r);
void altar__worker_pools_free(worker_t *w);
int altar__worker_pools_setup(worker_t *w, altar_error_t *err);
bool altar__worker_takes_slot(const worker_t *w, const altar_msg_t *m);
bool altar__worker_slot_free(const worker_t *w, const char *topic);
void altar__worker_take_record(worker_t *w, altar_msg_t *m);
void altar__worker_lookahead_feed(worker_t *w);

/* ---- forwarding to peers (worker_forward.c) ---- */

void altar__worker_fleet_read(worker_t *w, int64_t now);
void altar__worker_forward_waiting(worker_t *w, int64_t now);
bool altar__worker_load_update(worker_t *w);
void altar__worker_load_part(void *ctx, size_t i, const char **ptopic, int32_t *ppartition);

/* ---- cancels (worker_cancel.c) ---- */

void altar__worker_apply_cancel(worker_t *w, const altar_control_msg_t *c);
bool altar__worker_refuse_cancelled(worker_t *w, wtask_t *t);
void altar__worker_restore_cancels(worker_t *w, const char *topic, int32_t partition, const char *list);

/* ---- partitions and commits (worker_commit.c) ---- */

size_t altar__worker_commit_all(worker_t *w);
/* One step of a commit round: commits owned partitions from index *pat on
 * until max_written of them were written (or failed; unchanged ones cost
 * nothing and do not count), advancing *pat. True once the round is over. */
bool altar__worker_commit_some(worker_t *w, size_t *pat, size_t max_written);
void altar__worker_on_rebalance(altar_transport_t *tr, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                void *ctx);
void altar__worker_warn_no_partition(worker_t *w);

#endif
