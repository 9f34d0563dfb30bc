/* The worker loop: intake gated by slots, bulk polling, status events,
 * commits up to the lowest unfinished job, handover of revoked partitions
 * (held tasks, control messages, waiting for a holder), drain and release
 * on stop. */
#include "worker.h"

#include "altar/clock.h"
#include "altar/codec.h"
#include "altar/pools.h"
#include "heartbeat.h"
#include "offset_tracker.h"
#include "worker/backend_caps.h"
#include "worker/cancel_meta.h"
#include "worker/cancel_set.h"
#include "worker/intake.h"
#include "worker/lookahead.h"
#include "worker/peers.h"
#include "worker_metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
  bool full;   /* no free slot for it */
  bool paused; /* full and the look-ahead too: its partitions are not read */
  int32_t n_partitions; /* of its topic, 0 when unknown (no forwarding to it) */
} wpool_t;

typedef struct worker {
  const altar_worker_opts_t *o;
  char worker_id[256];
  const char *group;
  altar_offset_tracker_t *tracker;
  wtask_t **tasks;
  size_t n_tasks, cap_tasks;
  assigned_t *parts;
  size_t n_parts, cap_parts;
  waiting_t *waits;
  size_t n_waits, cap_waits;
  int lease_interval_ms, lease_timeout_ms;
  int64_t next_lease;
  bool paused;        /* no pool has a free slot */
  wpool_t *pools;
  size_t n_pools;
  altar_capacity_t cap; /* the backend's last report, less what started since */
  altar__intake_ctx_t intake;
  size_t outstanding; /* produced, not yet reported */
  uint64_t finished_jobs;
  altar_worker_stats_t stats;
  altar__worker_metrics_t metrics;
  altar__cancel_set_t cancels; /* jobs (or groups) `altar cancel` stopped */
  altar__lookahead_t ahead; /* read, not yet taken in (lookahead.h) */
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

static void wlog(worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wlog(worker_t *w, const char *fmt, ...) {
  if (w->o->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "altar worker %s: ", w->worker_id);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void consume_failed(worker_t *w, const altar_error_t *e) {
  int64_t now = altar_mono_ms();
  if (!strcmp(e->msg, w->consume_err) && now - w->consume_err_ms < 10000) {
    w->consume_err_repeats++;
    return;
  }
  if (w->consume_err_repeats)
    wlog(w, "consume: %s (and %ld more times)", e->msg, w->consume_err_repeats);
  else
    wlog(w, "consume: %s", e->msg);
  snprintf(w->consume_err, sizeof w->consume_err, "%s", e->msg);
  w->consume_err_ms = now;
  w->consume_err_repeats = 0;
}

/* "started"/"succeeded"/"failed" lines for a person watching a terminal. */
static void task_line(worker_t *w, const wtask_t *t, const char *what, const altar_failure_t *f) {
  if (!w->o->task_lines) return;
  const char *job = altar_strmap_get(&t->spec->labels, ALTAR_JOB_ID_LABEL);
  const char *detail = f && f->detail ? f->detail : "";
  int dl = (int)strcspn(detail, "\n");
  wlog(w, "%s %s task %.12s%s%s%s%s%s%.*s", what, t->spec->kind, t->task_key, job ? " of job " : "", job ? job : "",
       f ? ": " : "", f && f->reason ? f->reason : "", dl ? " — " : "", dl > 200 ? 200 : dl, detail);
}

static void set_fatal(worker_t *w, int code, const char *what, const altar_error_t *e) {
  if (w->fatal) return;
  w->fatal = code;
  altar_error_set(&w->fatal_err, code, "%s: %s", what, e ? e->msg : altar_strerror(code));
}

/* ---- producing with retries ------------------------------------------- */

static void pending_free(pending_t *p) {
  if (!p) return;
  free(p->topic);
  free(p->key);
  altar_buf_free(&p->value);
  for (size_t i = 0; i < p->n_headers; i++) free(p->hbuf[i]);
  free(p->src_topic);
  free(p);
}

static int pending_send(worker_t *w, pending_t *p) {
  altar_produce_rec_t rec = {
      .topic = p->topic,
      .partition = p->partition,
      .key = p->key,
      .key_len = p->key ? strlen(p->key) : 0,
      .value = p->value.data,
      .value_len = p->value.len,
      .headers = p->headers,
      .n_headers = p->n_headers,
      .opaque = p,
  };
  altar_error_t e = {0};
  for (int tries = 0;; tries++) {
    int rc = altar_transport_produce(w->o->transport, &rec, &e);
    if (rc == ALTAR_EAGAIN && tries < 1000) {
      altar_transport_poll(w->o->transport, 10);
      continue;
    }
    if (rc) return rc;
    w->outstanding++;
    return ALTAR_OK;
  }
}

static pending_t *pending_new(worker_t *w, const char *topic, const char *key) {
  pending_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->w = w;
  p->partition = ALTAR_PARTITION_ANY;
  p->topic = strdup(topic);
  p->key = key ? strdup(key) : NULL;
  if (!p->topic || (key && !p->key)) {
    pending_free(p);
    return NULL;
  }
  return p;
}

static int pending_add_header(pending_t *p, const char *name, const char *value) {
  if (p->n_headers >= 3) return ALTAR_EINVAL;
  char *v = strdup(value);
  if (!v) return ALTAR_ENOMEM;
  p->hbuf[p->n_headers] = v;
  p->headers[p->n_headers] = (altar_header_t){name, v, strlen(v)};
  p->n_headers++;
  return ALTAR_OK;
}

/* ---- control messages (handover) ---------------------------------------- */

/* Writes a control message about offsets of topic/partition to that very
 * partition, so whoever owns it reads it in order behind the jobs. */
static int send_control(worker_t *w, const char *topic, int32_t partition, altar_control_event_t ev,
                        const int64_t *offs, size_t n) {
  for (size_t at = 0; at < n || (at == 0 && n == 0); at += ALTAR_CONTROL_MAX_OFFSETS) {
    size_t k = n - at < ALTAR_CONTROL_MAX_OFFSETS ? n - at : ALTAR_CONTROL_MAX_OFFSETS;
    altar_control_msg_t c = {
        .v = ALTAR_SCHEMA_VERSION,
        .event = ev,
        .partition = partition,
        .offsets = (int64_t *)(offs + at),
        .n_offsets = k,
        .lease_s = ev == ALTAR_CTL_LEASE ? w->lease_interval_ms / 1000.0 : 0,
        .worker = w->worker_id,
        .ts = altar_wall_s(),
    };
    pending_t *p = pending_new(w, topic, NULL);
    if (!p) {
      set_fatal(w, ALTAR_ENOMEM, "writing a control message", NULL);
      return ALTAR_ENOMEM;
    }
    p->partition = partition;
    altar_error_t e = {0};
    int rc = altar_encode_control(&c, &p->value, &e);
    if (!rc) rc = pending_send(w, p);
    if (rc) {
      pending_free(p);
      set_fatal(w, rc, "writing a control message", &e);
      return rc;
    }
    if (n == 0) break;
  }
  return ALTAR_OK;
}

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)ctx;
  pending_t *p = dr->opaque;
  if (!p) return;
  worker_t *w = p->w;
  w->outstanding--;
  if (dr->err) {
    /* Nothing is acknowledged yet: send it again, a bounded number of times. */
    if (++p->attempts < 10 && pending_send(w, p) == ALTAR_OK) {
      wlog(w, "retrying a record to %s: %s", p->topic, dr->errstr ? dr->errstr : "delivery failed");
      return;
    }
    altar_error_t e = {0};
    altar_error_set(&e, dr->err, "%s", dr->errstr ? dr->errstr : "delivery failed");
    set_fatal(w, ALTAR_ETRANSPORT, "producing to the log failed for good", &e);
    pending_free(p);
    return;
  }
  if (p->is_status) w->stats.status_events++;
  if (p->task) p->task->acked = true;
  if (p->forward) {
    if (w->crash_after_forward) {
      fprintf(stderr, "altar worker %s: ALTAR_TEST_CRASH_AFTER_FORWARD: dying after a forward, before its commit\n",
              w->worker_id);
      _exit(137);
    }
    w->stats.forwarded++;
    w->commit_soon = true; /* until the commit, a crash runs the original again too */
  }
  if (p->finishes) {
    /* Not ours to finish (the partition moved on): tell its owner, who
     * waits for this job instead of running it. */
    if (altar_offset_tracker_finished(w->tracker, p->src_topic, p->src_partition, p->src_offset) != ALTAR_OK)
      send_control(w, p->src_topic, p->src_partition, ALTAR_CTL_DONE, &p->src_offset, 1);
    if (!p->forward) w->finished_jobs++;
  }
  pending_free(p);
}

/* ---- status events ------------------------------------------------------ */

static int emit_status(worker_t *w, wtask_t *task, altar_status_event_kind_t kind, altar_state_t state,
                       const altar_failure_t *failure, bool with_spec, bool terminal) {
  altar_status_event_t ev = {
      .v = ALTAR_SCHEMA_VERSION,
      .event = kind,
      .task_key = task->task_key,
      .kind = task->spec->kind,
      .handle = task->handle,
      .state = state,
      .failure = (altar_failure_t *)failure,
      .spec = with_spec ? task->spec : NULL,
      .worker = w->worker_id,
      .source = {true, task->topic, task->partition, task->offset},
      .ts = altar_wall_s(),
  };
  /* A failure's detail is cut to its bound (pools.h), so the event fits
   * whenever its spec passed intake. */
  altar_failure_t cut;
  char detail[ALTAR_BOUND_DETAIL + 1];
  if (failure && failure->detail && strlen(failure->detail) > ALTAR_BOUND_DETAIL) {
    cut = *failure;
    snprintf(detail, sizeof detail, "%s", failure->detail);
    size_t n = ALTAR_BOUND_DETAIL;
    while (n && ((unsigned char)detail[n] & 0xC0) == 0x80) n--;
    detail[n] = 0;
    cut.detail = detail;
    ev.failure = &cut;
  }
  pending_t *p = pending_new(w, w->o->topics->status, task->status_key);
  if (!p) return ALTAR_ENOMEM;
  altar_error_t e = {0};
  bool reduced = false;
  int rc = altar__intake_encode_status(w->o->groups, &ev, &p->value, &reduced, &e);
  if (!rc && reduced) {
    w->stats.reduced_events++;
    wlog(w, "status event of %s sent without its spec and most labels: in full it exceeds %u bytes", task->task_key,
         ALTAR_MAX_MESSAGE);
  }
  if (rc) {
    /* Not the message's fault (out of memory): the worker cannot go on. */
    pending_free(p);
    set_fatal(w, rc, "encoding a status event", &e);
    return rc;
  }
  p->is_status = true;
  if (terminal) {
    p->task = task;
    p->finishes = true;
    p->src_topic = strdup(task->topic);
    p->src_partition = task->partition;
    p->src_offset = task->offset;
    if (!p->src_topic) {
      pending_free(p);
      return ALTAR_ENOMEM;
    }
  }
  rc = pending_send(w, p);
  if (rc) {
    pending_free(p);
    set_fatal(w, rc, "producing a status event", NULL);
  } else if (terminal) {
    double run_s = task->started_ms ? (double)(altar_mono_ms() - task->started_ms) / 1000.0 : -1;
    altar__worker_metrics_task_ended(&w->metrics, task->spec->kind, state == ALTAR_STATE_FAILED ? ev.failure : NULL,
                                     run_s);
  }
  return rc;
}

/* ---- the dead-letter queue --------------------------------------------- */

/* finishes: the copy's ack finishes the job's offset (the DLQ is its only
 * outcome); false when a failed status event is its outcome. */
static void dead_letter(worker_t *w, const altar_msg_t *m, const char *reason, bool finishes) {
  pending_t *p = pending_new(w, w->o->topics->dlq, NULL);
  if (!p) {
    set_fatal(w, ALTAR_ENOMEM, "dead-lettering", NULL);
    return;
  }
  if (m->key && m->key_len) {
    p->key = strndup(m->key, m->key_len < 1024 ? m->key_len : 1024);
  }
  size_t keep = m->value_len < ALTAR_DLQ_MAX_VALUE ? m->value_len : ALTAR_DLQ_MAX_VALUE;
  char src[512], size[32];
  snprintf(src, sizeof src, "%s/%" PRId32 "/%" PRId64, m->topic, m->partition, m->offset);
  snprintf(size, sizeof size, "%zu", m->value_len);
  if ((keep && altar_buf_append(&p->value, m->value, keep)) || pending_add_header(p, ALTAR_DLQ_REASON_HEADER, reason) ||
      pending_add_header(p, ALTAR_DLQ_SOURCE_HEADER, src) || pending_add_header(p, ALTAR_DLQ_SIZE_HEADER, size)) {
    pending_free(p);
    set_fatal(w, ALTAR_ENOMEM, "dead-lettering", NULL);
    return;
  }
  p->finishes = finishes;
  p->src_topic = strdup(m->topic);
  p->src_partition = m->partition;
  p->src_offset = m->offset;
  if (!p->src_topic || pending_send(w, p)) {
    pending_free(p);
    set_fatal(w, ALTAR_ETRANSPORT, "producing to the dead-letter topic", NULL);
    return;
  }
  w->stats.dead_lettered++;
  if (finishes) wlog(w, "dead-lettered %s: %s", src, reason);
}

/* ---- tasks ---------------------------------------------------------------- */

static void task_free(wtask_t *t) {
  if (!t) return;
  altar_handle_clear(&t->handle);
  altar_spec_free(t->spec);
  free(t->status_key);
  free(t->topic);
  free(t);
}

static int tasks_push(worker_t *w, wtask_t *t) {
  if (w->n_tasks == w->cap_tasks) {
    size_t cap = w->cap_tasks ? w->cap_tasks * 2 : 16;
    wtask_t **nt = realloc(w->tasks, cap * sizeof *nt);
    if (!nt) return ALTAR_ENOMEM;
    w->tasks = nt;
    w->cap_tasks = cap;
  }
  w->tasks[w->n_tasks++] = t;
  return ALTAR_OK;
}

static size_t in_flight(const worker_t *w) {
  size_t k = 0;
  for (size_t i = 0; i < w->n_tasks; i++) k += !w->tasks[i]->terminal_sent;
  return k;
}

/* Drops tasks whose terminal event is acknowledged, reaping their backend
 * resources (a finished container would otherwise linger). */
static void reap_acked(worker_t *w) {
  size_t j = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->acked) {
      altar_error_t e = {0};
      if (t->handle.external_id && *t->handle.external_id) altar_backend_cancel(w->o->backend, &t->handle, &e);
      task_free(t);
    } else {
      w->tasks[j++] = t;
    }
  }
  w->n_tasks = j;
}

static char *status_key_for(worker_t *w, const altar_spec_t *spec, const altar_handle_t *h, const char *task_key) {
  const altar_group_spec_t *g = w->o->groups ? altar_group_specs_find(w->o->groups, spec->kind) : NULL;
  if (!g) return strdup(task_key);
  return altar_group_by_key(&g->group_by, h);
}

/* A job that failed before it could run (staging, submit): record it as
 * submitted and failed under a handle of its own, so the ledger has a
 * terminal outcome for it. */
static void fail_before_run(worker_t *w, wtask_t *t, const char *reason, const char *detail, bool deterministic) {
  altar_failure_t *f = altar_failure_new(reason, detail, deterministic);
  if (!f) {
    set_fatal(w, ALTAR_ENOMEM, "recording a failure", NULL);
    return;
  }
  if (emit_status(w, t, ALTAR_EV_SUBMITTED, ALTAR_STATE_PENDING, NULL, true, false) == ALTAR_OK &&
      emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
    t->state = ALTAR_STATE_FAILED;
    t->terminal_sent = true;
    w->stats.failed++;
  }
  altar_failure_free(f);
}

/* ---- pools and slot gating --------------------------------------------- */

/* The most pools a backend may declare (a pool is a topic subscribed). */
#define WORKER_POOLS_MAX 64

/* Pauses or resumes the owned partitions of one topic. */
static bool set_topic_paused(worker_t *w, const char *topic, bool paused) {
  altar_tp_t *tps = calloc(w->n_parts ? w->n_parts : 1, sizeof *tps);
  if (!tps) return false;
  size_t n = 0;
  for (size_t i = 0; i < w->n_parts; i++)
    if (!strcmp(w->parts[i].topic, topic))
      tps[n++] = (altar_tp_t){w->parts[i].topic, w->parts[i].partition, ALTAR_OFFSET_INVALID};
  altar_error_t e = {0};
  int rc = !n ? ALTAR_OK
              : paused ? altar_transport_pause(w->o->transport, tps, n, &e)
                       : altar_transport_resume(w->o->transport, tps, n, &e);
  free(tps);
  if (rc) wlog(w, "%s %s failed: %s", paused ? "pause" : "resume", topic, e.msg);
  return rc == ALTAR_OK;
}

/* Free slots of pool, or INT64_MAX when it is not rationed. Only a pool the
 * backend reports has fixed capacity; one it can serve but leaves out of the
 * report autoscales (an empty report: all of them), so the worker's own
 * slots alone bound it. */
static int64_t pool_free(const worker_t *w, const char *pool) {
  bool fixed = false;
  for (size_t i = 0; i < w->cap.n && !fixed; i++) fixed = !strcmp(w->cap.pools[i], pool);
  if (!fixed) return INT64_MAX;
  altar_resources_t r = {.gpu = strcmp(pool, ALTAR_POOL_CPU) ? (char *)pool : NULL, .count = 1};
  return altar_capacity_free_for(&w->cap, &r);
}

/* Slot gating per pool: a pool is full while every worker slot is busy or
 * its pool has no free slot (Capacity.free_for); its records then go to the
 * look-ahead, and only when that is full too is its topic paused. One full
 * pool never stops the others. */
static void update_gates(worker_t *w) {
  bool all_busy = in_flight(w) >= (size_t)w->o->slots, all_full = true;
  bool ahead_full = altar__lookahead_full(&w->ahead);
  for (size_t i = 0; i < w->n_pools; i++) {
    wpool_t *p = &w->pools[i];
    p->full = all_busy || pool_free(w, p->name) <= 0;
    bool pause = p->full && ahead_full;
    if (pause != p->paused && set_topic_paused(w, p->topic, pause)) p->paused = pause;
    all_full &= p->full;
  }
  w->paused = all_full;
}

/* Newly assigned partitions of a paused pool start paused. */
static void gate_assigned(worker_t *w, const altar_tp_t *parts, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < w->n_pools; k++)
      if (w->pools[k].paused && !strcmp(w->pools[k].topic, parts[i].topic)) {
        altar_error_t e = {0};
        altar_transport_pause(w->o->transport, &parts[i], 1, &e);
      }
}

static void refresh_capacity(worker_t *w) {
  altar_capacity_t c;
  altar_error_t e = {0};
  if (altar_backend_capacity(w->o->backend, &c, &e) == ALTAR_OK) {
    altar_capacity_clear(&w->cap);
    w->cap = c;
  } else {
    altar_capacity_clear(&c);
  }
}

/* One slot of the started task's pool is taken until the next report. */
static void capacity_took(worker_t *w, const altar_resources_t *r) {
  const char *pool = r->gpu ? r->gpu : ALTAR_POOL_CPU;
  int64_t f = pool_free(w, pool);
  if (w->cap.n && f != INT64_MAX) altar_capacity_set(&w->cap, pool, f > 0 ? f - 1 : 0);
}

static void pools_free(worker_t *w) {
  for (size_t i = 0; i < w->n_pools; i++) {
    free(w->pools[i].name);
    free(w->pools[i].topic);
  }
  free(w->pools);
  w->pools = NULL;
  w->n_pools = 0;
  altar_capacity_clear(&w->cap);
}

/* The pools the backend can serve: those it declares (its pool mapping)
 * and those its capacity reports, or the CPU pool when there are neither.
 * Free slots never decide this, or a job for a pool at zero would never
 * reach the backend that scales it up. Names are borrowed into names. */
static size_t servable_pools(worker_t *w, const char **names, size_t max) {
  const char *declared[WORKER_POOLS_MAX];
  int nd = altar_backend_pools(w->o->backend, declared, WORKER_POOLS_MAX);
  if (nd < 0) {
    wlog(w, "the backend's pools: %s; serving what its capacity reports", altar_strerror(nd));
    nd = 0;
  } else if ((size_t)nd > WORKER_POOLS_MAX) {
    wlog(w, "the backend serves %d pools; reading the first %d", nd, WORKER_POOLS_MAX);
    nd = WORKER_POOLS_MAX;
  }
  size_t n = 0;
  for (size_t i = 0; i < (size_t)nd + w->cap.n; i++) {
    const char *name = i < (size_t)nd ? declared[i] : w->cap.pools[i - (size_t)nd];
    bool seen = !name;
    for (size_t j = 0; j < n && !seen; j++) seen = !strcmp(names[j], name);
    if (!seen && n < max) names[n++] = name;
  }
  if (!n) names[n++] = ALTAR_POOL_CPU;
  return n;
}

/* The pools the backend can serve and their jobs topics, created when
 * missing. */
static int pools_setup(worker_t *w, altar_error_t *err) {
  refresh_capacity(w);
  const char *names[2 * WORKER_POOLS_MAX];
  size_t n = servable_pools(w, names, sizeof names / sizeof names[0]);
  w->pools = calloc(n, sizeof *w->pools);
  if (!w->pools) return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  for (size_t i = 0; i < n; i++) {
    const char *name = names[i];
    char topic[512];
    altar_error_t e = {0};
    if (altar_pool_topic(w->o->topics->jobs, name, topic, sizeof topic, &e) != ALTAR_OK) {
      wlog(w, "not serving pool '%.64s': %s", name, e.msg);
      continue;
    }
    wpool_t *p = &w->pools[w->n_pools];
    if (!(p->name = strdup(name)) || !(p->topic = strdup(topic))) {
      free(p->name);
      return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
    }
    w->n_pools++;
    int rc = altar_transport_create_topic(w->o->transport, topic,
                                          w->o->topic_partitions > 0 ? w->o->topic_partitions : ALTAR_DEFAULT_TOPIC_PARTITIONS, &e);
    if (rc && rc != ALTAR_EEXIST) return altar_error_set(err, rc, "worker: creating %s: %s", topic, e.msg);
    /* Its partition count bounds where a forward may go (a peer's report is untrusted). */
    altar_topic_list_t *tl = NULL;
    if (altar_transport_list_topics(w->o->transport, topic, 5000, &tl, &e) == ALTAR_OK && tl->n_topics)
      p->n_partitions = (int32_t)tl->topics[0].n_partitions;
    altar_topic_list_free(tl);
  }
  if (!w->n_pools) return altar_error_set(err, ALTAR_EINVAL, "worker: the backend serves no pool with a valid name");
  return ALTAR_OK;
}

/* A job whose identity we can read but will not run (intake.h): a DLQ copy
 * for operators, and a failed record under a handle of its own, so the
 * ledger has its outcome and its group settles by on_failed. Only the
 * failed event's ack finishes the offset. */
static void refuse_job(worker_t *w, wtask_t *t, const altar_msg_t *m, const altar__intake_t *in) {
  char reason[sizeof in->detail + 64];
  snprintf(reason, sizeof reason, "%s: %s", in->reason, in->detail);
  dead_letter(w, m, reason, false);
  t->partition = m->partition;
  t->offset = m->offset;
  t->state = ALTAR_STATE_PENDING;
  memcpy(t->task_key, in->task_key, sizeof t->task_key);
  char ext[ALTAR_TASK_KEY_LEN + 16];
  snprintf(ext, sizeof ext, "refused-%s", t->task_key);
  if (tasks_push(w, t) != ALTAR_OK) {
    task_free(t);
    set_fatal(w, ALTAR_ENOMEM, "refusing a job", NULL);
    return;
  }
  if (altar_handle_init_for_spec(&t->handle, altar_backend_name(w->o->backend), ext, t->spec) ||
      !(t->status_key = status_key_for(w, t->spec, &t->handle, t->task_key))) {
    set_fatal(w, ALTAR_ENOMEM, "refusing a job", NULL);
    return;
  }
  w->stats.refused++;
  wlog(w, "refused %s/%" PRId32 "/%" PRId64 " (%s): %s", m->topic, m->partition, m->offset, in->reason, in->detail);
  fail_before_run(w, t, in->reason, in->detail, true);
  /* Never a backend task: nothing to reap. */
  free(t->handle.external_id);
  t->handle.external_id = strdup("");
}

/* ---- cancels (`altar cancel`) --------------------------------------------- */

static bool task_cancelled(const worker_t *w, const wtask_t *t) {
  if (!w->cancels.n || !t->spec) return false;
  const char *job = altar_strmap_get(&t->spec->labels, "job_id");
  return altar__cancel_set_matches(&w->cancels, job, t->status_key);
}

/* Notes a cancel and stops every task of it that runs here: the backend
 * cancels it, and its terminal event (failed, "cancelled") finishes its
 * offset like any end. Held tasks too: their holder is the one running them. */
static void apply_cancel(worker_t *w, const altar_control_msg_t *c) {
  bool added = false;
  if (!c->job_id || altar__cancel_set_add(&w->cancels, c->job_id, c->group_key, &added)) {
    if (c->job_id) set_fatal(w, ALTAR_ENOMEM, "noting a cancel", NULL);
    return;
  }
  if (!added) return; /* seen already (another partition's copy): idempotent */
  char lacks[400];
  if (!altar__worker_can_stop(w->o->backend, c->job_id, lacks, sizeof lacks)) wlog(w, "%s", lacks);
  size_t stopped = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->terminal_sent || !task_cancelled(w, t)) continue;
    altar_error_t e = {0};
    if (altar_backend_cancel(w->o->backend, &t->handle, &e) != ALTAR_OK)
      wlog(w, "cancelling %s: %s (reported cancelled anyway)", t->task_key, e.msg);
    altar_failure_t *f = altar_failure_new(ALTAR_REASON_CANCELLED, "cancelled by altar cancel", true);
    if (!f) {
      set_fatal(w, ALTAR_ENOMEM, "cancelling", NULL);
      return;
    }
    if (emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
      t->state = ALTAR_STATE_FAILED;
      t->terminal_sent = true;
      w->stats.failed++;
      stopped++;
    }
    altar_failure_free(f);
  }
  wlog(w, "cancel of job %s%s%s: %zu running task(s) stopped", c->job_id, c->group_key ? " group " : "",
       c->group_key ? c->group_key : "", stopped);
}

/* A job of a cancelled job or group: never started, recorded as failed
 * "cancelled" under a handle of its own. false when it is not cancelled. */
static bool refuse_cancelled(worker_t *w, wtask_t *t) {
  if (!w->cancels.n) return false;
  const char *job = altar_strmap_get(&t->spec->labels, "job_id");
  if (!job) return false;
  char ext[ALTAR_TASK_KEY_LEN + 16];
  snprintf(ext, sizeof ext, "cancelled-%s", t->task_key);
  if (altar_handle_init_for_spec(&t->handle, altar_backend_name(w->o->backend), ext, t->spec) ||
      !(t->status_key = status_key_for(w, t->spec, &t->handle, t->task_key))) {
    set_fatal(w, ALTAR_ENOMEM, "refusing a cancelled job", NULL);
    return true;
  }
  if (!altar__cancel_set_matches(&w->cancels, job, t->status_key)) {
    altar_handle_clear(&t->handle);
    free(t->status_key);
    t->status_key = NULL;
    return false;
  }
  fail_before_run(w, t, ALTAR_REASON_CANCELLED, "its job was cancelled (altar cancel) before it started", true);
  free(t->handle.external_id); /* never a backend task: nothing to reap */
  t->handle.external_id = strdup("");
  return true;
}

static void handle_control(worker_t *w, const altar_msg_t *m);

/* Runs one job message already seen by the tracker (a poison one goes to
 * the DLQ, a control message is obeyed). */
static void start_job(worker_t *w, const altar_msg_t *m) {
  int rc;
  if (!m->value || m->value_len == 0) {
    dead_letter(w, m, "empty message", true);
    return;
  }
  if (m->value_len > ALTAR_MAX_MESSAGE) {
    char reason[128];
    snprintf(reason, sizeof reason, "message too large: %zu bytes (limit %u)", m->value_len, ALTAR_MAX_MESSAGE);
    dead_letter(w, m, reason, true);
    return;
  }
  altar__intake_t in;
  altar__intake_classify(&w->intake, m, &in);
  if (in.verdict == ALTAR__INTAKE_DLQ) {
    /* Only a message that is no job is looked at twice. */
    char type[16];
    if (altar_peek_type(m->value, m->value_len, type, sizeof type) == ALTAR_OK && !strcmp(type, "control")) {
      altar__intake_clear(&in);
      handle_control(w, m);
      return;
    }
    dead_letter(w, m, in.detail, true);
    altar__intake_clear(&in);
    return;
  }
  wtask_t *t = calloc(1, sizeof *t);
  if (!t || !(t->spec = altar_spec_dup(&in.job.spec)) || !(t->topic = strdup(m->topic))) {
    task_free(t);
    altar__intake_clear(&in);
    set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
    return;
  }
  if (in.verdict == ALTAR__INTAKE_REFUSE) {
    refuse_job(w, t, m, &in);
    altar__intake_clear(&in);
    return;
  }
  altar__intake_clear(&in);
  const void *from;
  size_t from_len;
  if (altar_msg_header(m, ALTAR_FORWARD_FROM_HEADER, &from, &from_len) == ALTAR_OK) {
    /* Anyone may set the header: logged only when it is short and printable. */
    bool printable = from_len <= 512;
    for (size_t i = 0; printable && i < from_len; i++) printable = ((const char *)from)[i] >= 0x20 && ((const char *)from)[i] < 0x7f;
    w->stats.forwarded_in++;
    wlog(w, "%s/%" PRId32 "/%" PRId64 ": forwarded here from %.*s", m->topic, m->partition, m->offset,
         printable ? (int)from_len : 3, printable ? (const char *)from : "(?)");
  }
  altar_error_t e = {0};
  t->partition = m->partition;
  t->offset = m->offset;
  t->state = ALTAR_STATE_PENDING;
  if (altar_spec_identity(t->spec, t->task_key, &e) != ALTAR_OK || tasks_push(w, t) != ALTAR_OK) {
    task_free(t);
    set_fatal(w, ALTAR_ENOMEM, "accepting a job", &e);
    return;
  }
  if (refuse_cancelled(w, t)) return;
  altar_backend_t *be = w->o->backend;
  rc = altar_backend_stage_inputs(be, t->spec->inputs, t->spec->n_inputs, &e);
  /* Pipelined: a backend that can keeps several launches in flight and
   * reports a refused one through poll. */
  if (rc == ALTAR_OK) rc = altar_backend_submit_start(be, t->spec, &t->handle, &e);
  if (rc != ALTAR_OK) {
    /* A handle of our own, so the failure lands in the ledger like any other. */
    char ext[ALTAR_TASK_KEY_LEN + 16];
    snprintf(ext, sizeof ext, "unstarted-%s", t->task_key);
    altar_handle_clear(&t->handle);
    if (altar_handle_init_for_spec(&t->handle, altar_backend_name(be), ext, t->spec) ||
        !(t->status_key = status_key_for(w, t->spec, &t->handle, t->task_key))) {
      set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
      return;
    }
    /* `deterministic` from the shared table, so a mismatch found here
     * reads the same as one the task finds. */
    const char *reason = altar_reason_for_start_error(rc);
    fail_before_run(w, t, reason, e.msg, altar_reason_deterministic(reason));
    /* The handle was never a backend task: nothing to reap. */
    free(t->handle.external_id);
    t->handle.external_id = strdup("");
    return;
  }
  if (!(t->status_key = status_key_for(w, t->spec, &t->handle, t->task_key))) {
    set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
    return;
  }
  w->stats.submitted++;
  t->started_ms = altar_mono_ms();
  task_line(w, t, "started", NULL);
  capacity_took(w, &t->spec->resources);
  emit_status(w, t, ALTAR_EV_SUBMITTED, ALTAR_STATE_PENDING, NULL, true, false);
}

/* ---- waiting for another worker's held jobs ------------------------------ */

static waiting_t *wait_find(worker_t *w, const char *topic, int32_t partition, int64_t offset) {
  for (size_t i = 0; i < w->n_waits; i++) {
    const altar_msg_t *m = w->waits[i].msg;
    if (m->offset == offset && m->partition == partition && !strcmp(m->topic, topic)) return &w->waits[i];
  }
  return NULL;
}

/* Removes a wait; returns its message (the caller frees it). */
static altar_msg_t *wait_take(worker_t *w, waiting_t *x) {
  altar_msg_t *m = x->msg;
  *x = w->waits[--w->n_waits];
  return m;
}

/* Forgets the waits of a revoked partition (its next owner reads them from
 * the held bound this worker committed). */
static void waits_drop(worker_t *w, const char *topic, int32_t partition) {
  for (size_t i = 0; i < w->n_waits;) {
    const altar_msg_t *m = w->waits[i].msg;
    if (m->partition == partition && !strcmp(m->topic, topic)) altar_msg_free(wait_take(w, &w->waits[i]));
    else i++;
  }
}

static int64_t lease_deadline(const worker_t *w, double lease_s) {
  int64_t ms = w->lease_timeout_ms;
  /* A holder that renews more slowly than we expect gets three of its own intervals. */
  if (lease_s > 0 && lease_s < 3600 && (int64_t)(3000 * lease_s) > ms) ms = (int64_t)(3000 * lease_s);
  return altar_mono_ms() + ms;
}

/* What a control message asks. Safe to do twice: a done or released job
 * is no longer waited for, a lease only moves a deadline, a cancel is
 * noted once. */
static void obey_control(worker_t *w, const altar_msg_t *m, const altar_control_msg_t *c) {
  if (c->event == ALTAR_CTL_CANCEL) apply_cancel(w, c);
  /* Offsets are of the partition the message lies in; one copied elsewhere says nothing. */
  for (size_t i = 0; c->partition == m->partition && i < c->n_offsets; i++) {
    waiting_t *x = wait_find(w, m->topic, m->partition, c->offsets[i]);
    if (!x) continue; /* not waited for (ours, finished, or below the commit point) */
    switch (c->event) {
    case ALTAR_CTL_DONE:
      altar_offset_tracker_finished(w->tracker, m->topic, m->partition, c->offsets[i]);
      altar_msg_free(wait_take(w, x));
      w->stats.handed_done++;
      break;
    case ALTAR_CTL_LEASE:
      if (x->deadline_ms) x->deadline_ms = lease_deadline(w, c->lease_s);
      break;
    case ALTAR_CTL_RELEASE:
      x->deadline_ms = 0;
      break;
    case ALTAR_CTL_UNKNOWN:
    case ALTAR_CTL_CANCEL:
      break;
    }
  }
}

static void handle_control(worker_t *w, const altar_msg_t *m) {
  altar_control_msg_t c;
  altar_error_t e = {0};
  if (altar_decode_control(m->value, m->value_len, &c, &e) != ALTAR_OK) {
    char reason[ALTAR_ERRMSG_MAX + 64];
    snprintf(reason, sizeof reason, "undecodable control message: %s", e.msg);
    altar_control_msg_clear(&c);
    dead_letter(w, m, reason, true);
    return;
  }
  w->stats.controls++;
  altar_offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset); /* its own offset: done at once */
  obey_control(w, m, &c);
  altar_control_msg_clear(&c);
}

/* Starts waited jobs whose holder released them or went silent for a
 * lease timeout, while a slot is free. With every slot busy the worker
 * reads none of its partitions, so no news can arrive: the clocks stop. */
static bool topic_paused(const worker_t *w, const char *topic) {
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return w->pools[i].paused;
  return false;
}

static void waits_expire(worker_t *w) {
  int64_t now = altar_mono_ms();
  for (size_t i = 0; i < w->n_waits;) {
    waiting_t *x = &w->waits[i];
    if (x->deadline_ms && x->deadline_ms < now + w->lease_timeout_ms && topic_paused(w, x->msg->topic)) {
      x->deadline_ms = now + w->lease_timeout_ms;
    }
    if (x->deadline_ms > now || in_flight(w) >= (size_t)w->o->slots) {
      i++;
      continue;
    }
    bool released = x->deadline_ms == 0;
    altar_msg_t *m = wait_take(w, x);
    wlog(w, "%s/%" PRId32 "/%" PRId64 ": %s: starting it here", m->topic, m->partition, m->offset,
         released ? "released by its holder" : "its holder sent no lease in time");
    w->stats.taken_over++;
    start_job(w, m);
    altar_msg_free(m);
  }
}

static wtask_t *task_find(worker_t *w, const char *topic, int32_t partition, int64_t offset) {
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->offset == offset && t->partition == partition && !strcmp(t->topic, topic)) return t;
  }
  return NULL;
}

/* Keeps m in the waits until deadline_ms (0: start it when a slot frees).
 * false when out of memory (m stays the caller's). */
static bool wait_add(worker_t *w, altar_msg_t *m, int64_t deadline_ms) {
  if (w->n_waits == w->cap_waits) {
    size_t cap = w->cap_waits ? w->cap_waits * 2 : 16;
    waiting_t *nw = realloc(w->waits, cap * sizeof *nw);
    if (!nw) {
      set_fatal(w, ALTAR_ENOMEM, "waiting for a held job", NULL);
      return false;
    }
    w->waits = nw;
    w->cap_waits = cap;
  }
  w->waits[w->n_waits++] = (waiting_t){m, deadline_ms};
  return true;
}

/* One consumed record. Returns true when it keeps m (a waited job). */
static bool handle_job(worker_t *w, altar_msg_t *m) {
  w->stats.consumed++;
  int rc = altar_offset_tracker_seen(w->tracker, m->topic, m->partition, m->offset);
  if (rc) {
    wlog(w, "ignoring %s/%" PRId32 "/%" PRId64 ": %s", m->topic, m->partition, m->offset,
         rc == ALTAR_ENOTFOUND ? "partition not assigned" : "offset out of order");
    return false;
  }
  if (altar_offset_tracker_already_done(w->tracker, m->topic, m->partition, m->offset)) {
    altar_offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset);
    w->stats.skipped++;
    return false;
  }
  if (altar_offset_tracker_held(w->tracker, m->topic, m->partition, m->offset)) {
    wtask_t *own = task_find(w, m->topic, m->partition, m->offset);
    if (own && own->held) {
      /* The partition came back: our own run goes on as if never handed over. */
      own->held = false;
      w->stats.reattached++;
      if (own->acked) altar_offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset);
      return false;
    }
    if (!wait_add(w, m, lease_deadline(w, 0))) return false;
    w->stats.waited++;
    return true;
  }
  start_job(w, m);
  return false;
}

/* ---- the look-ahead (lookahead.h) ------------------------------------------ */

static bool is_control(const altar_msg_t *m) {
  char type[16];
  return m->value && altar_peek_type(m->value, m->value_len, type, sizeof type) == ALTAR_OK && !strcmp(type, "control");
}

/* Whether m takes a slot when taken in: not a control message, not
 * finished already, not held by another worker. */
static bool takes_slot(const worker_t *w, const altar_msg_t *m) {
  return !is_control(m) && !altar_offset_tracker_already_done(w->tracker, m->topic, m->partition, m->offset) &&
         !altar_offset_tracker_held(w->tracker, m->topic, m->partition, m->offset);
}

static bool slot_free(const worker_t *w, const char *topic) {
  if (in_flight(w) >= (size_t)w->o->slots) return false;
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return pool_free(w, w->pools[i].name) > 0;
  return true;
}

/* A control message read into the look-ahead is obeyed at once too (a
 * cancel must not wait for a slot), and again when taken in, in order:
 * obeying one twice changes nothing. */
static void obey_early(worker_t *w, const altar_msg_t *m) {
  if (!is_control(m)) return;
  altar_control_msg_t c;
  altar_error_t e = {0};
  if (altar_decode_control(m->value, m->value_len, &c, &e) == ALTAR_OK) obey_control(w, m, &c);
  altar_control_msg_clear(&c);
}

/* One record read from a jobs partition: taken in now when nothing of its
 * partition is queued ahead of it and it can start, else queued. */
static void take_record(worker_t *w, altar_msg_t *m) {
  bool ours = altar_offset_tracker_assigned(w->tracker, m->topic, m->partition);
  if (!ours || (!altar__lookahead_len(&w->ahead, m->topic, m->partition) && (!takes_slot(w, m) || slot_free(w, m->topic)))) {
    if (!handle_job(w, m)) altar_msg_free(m);
    return;
  }
  obey_early(w, m);
  if (altar__lookahead_push(&w->ahead, m, altar_mono_ms()) != ALTAR_OK) {
    altar_msg_free(m);
    set_fatal(w, ALTAR_ENOMEM, "looking ahead", NULL);
  }
}

/* Takes queued records in, in log order per partition, while they can
 * start: one per partition per round, so none starves the others. No
 * pointer into the look-ahead is kept across handle_job (its produce may
 * serve a rebalance, which drops queues). */
static void lookahead_feed(worker_t *w) {
  for (bool moved = w->ahead.records > 0; moved && !w->fatal;) {
    moved = false;
    for (size_t i = 0; i < w->ahead.n_queues && !w->fatal; i++) {
      const altar__lookahead_queue_t *q = &w->ahead.queues[i];
      if (q->head == q->n) continue;
      const altar_msg_t *h = q->msgs[q->head];
      if (takes_slot(w, h) && !slot_free(w, h->topic)) continue;
      altar_msg_t *m = altar__lookahead_pop(&w->ahead, h->topic, h->partition);
      if (!handle_job(w, m)) altar_msg_free(m);
      moved = true;
    }
  }
}

/* ---- forwarding to peers with free slots (docs/forwarding.md) ------------ */

/* Fleet-topic records read per turn at most, and how often it is read. */
#define FLEET_READ_MAX 256
#define FLEET_READ_INTERVAL_MS 20
/* A new worker starts reading the fleet topic this many records before
 * each partition's end, so it knows its live peers at once rather than
 * after their next beat. */
#define FLEET_BOOTSTRAP_RECORDS 16
/* Forwards started per turn at most. */
#define FORWARD_BATCH_MAX 64

static bool part_mine(void *ctx, const char *topic, int32_t partition) {
  const worker_t *w = ctx;
  for (size_t i = 0; i < w->n_parts; i++)
    if (w->parts[i].partition == partition && !strcmp(w->parts[i].topic, topic)) return true;
  /* A partition the topic does not have is no target either. */
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return partition >= w->pools[i].n_partitions;
  return true;
}

/* Assigns the fleet handle (once it can) and reads what peers announced. */
static void fleet_read(worker_t *w, int64_t now) {
  altar_transport_t *ft = w->o->fleet_transport;
  if (!ft || !w->peers || now < w->fleet_next_ms) return;
  w->fleet_next_ms = now + FLEET_READ_INTERVAL_MS;
  altar_error_t e = {0};
  if (!w->fleet_assigned) {
    w->fleet_next_ms = now + 1000; /* the topic may not exist yet: try again */
    altar_topic_list_t *tl = NULL;
    if (altar_transport_list_topics(ft, w->o->topics->fleet, 5000, &tl, &e) == ALTAR_OK && tl->n_topics) {
      const altar_topic_info_t *ti = &tl->topics[0];
      altar_tp_t *tps = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *tps);
      for (size_t i = 0; tps && i < ti->n_partitions; i++) {
        const altar_partition_info_t *pi = &ti->partitions[i];
        int64_t from = pi->end - FLEET_BOOTSTRAP_RECORDS;
        tps[i] = (altar_tp_t){ti->name, pi->partition, from > pi->beginning ? from : pi->beginning};
      }
      if (tps && altar_transport_assign(ft, tps, ti->n_partitions, &e) == ALTAR_OK) {
        w->fleet_assigned = true;
        w->fleet_next_ms = now;
      } else {
        wlog(w, "reading the fleet topic %s: %s (no forwarding until it works)", w->o->topics->fleet, e.msg);
      }
      free(tps);
    }
    altar_topic_list_free(tl);
    if (!w->fleet_assigned) return;
  }
  double wall = altar_wall_s();
  for (int i = 0; i < FLEET_READ_MAX; i++) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(ft, 0, &m, &e) != ALTAR_OK || !m) break;
    altar_error_t pe = {0};
    if (m->value && altar__peers_apply(w->peers, m->value, m->value_len, now, wall, &pe) == ALTAR_ENOMEM)
      set_fatal(w, ALTAR_ENOMEM, "reading peers", &pe);
    altar_msg_free(m);
  }
}

static int forward_hops(const altar_msg_t *m) {
  const void *v;
  size_t n;
  if (altar_msg_header(m, ALTAR_FORWARD_HOPS_HEADER, &v, &n) != ALTAR_OK) return 0;
  int hops = 0;
  for (size_t i = 0; i < n; i++) {
    char c = ((const char *)v)[i];
    if (c < '0' || c > '9' || i >= 3) return ALTAR_FORWARD_HOPS_MAX; /* not ours to trust: never again */
    hops = hops * 10 + (c - '0');
  }
  return hops;
}

static const char *pool_of_topic(const worker_t *w, const char *topic) {
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return w->pools[i].name;
  return NULL;
}

/* Whether the look-ahead head h may be forwarded: a job waiting for a slot
 * of its pool, with a key a copy can carry, forwarded fewer than
 * ALTAR_FORWARD_HOPS_MAX times. */
static bool forwardable(const worker_t *w, const altar_msg_t *h) {
  return h->value && h->value_len && h->value_len <= ALTAR_MAX_MESSAGE && takes_slot(w, h) &&
         !slot_free(w, h->topic) && (!h->key || (h->key_len && h->key_len < 1024 && !memchr(h->key, 0, h->key_len))) &&
         forward_hops(h) < ALTAR_FORWARD_HOPS_MAX;
}

/* Forwards the head of topic/partition's look-ahead queue to peer's
 * partition to_part: the same key and bytes, produced there; the
 * original's offset is finished when the copy is acknowledged. */
static void forward_one(worker_t *w, const char *topic, int32_t partition, const char *peer, int32_t to_part) {
  const altar_msg_t *h = altar__lookahead_head(&w->ahead, topic, partition);
  pending_t *p = pending_new(w, topic, NULL);
  char from[768], hops[16];
  if (!p || !h || (h->key && !(p->key = strndup(h->key, h->key_len))) ||
      altar_buf_append(&p->value, h->value, h->value_len)) {
    pending_free(p);
    set_fatal(w, ALTAR_ENOMEM, "forwarding a job", NULL);
    return;
  }
  snprintf(from, sizeof from, "%s/%s/%" PRId32 "/%" PRId64, w->worker_id, h->topic, h->partition, h->offset);
  snprintf(hops, sizeof hops, "%d", forward_hops(h) + 1);
  if (pending_add_header(p, ALTAR_FORWARD_FROM_HEADER, from) || pending_add_header(p, ALTAR_FORWARD_HOPS_HEADER, hops) ||
      !(p->src_topic = strdup(h->topic))) {
    pending_free(p);
    set_fatal(w, ALTAR_ENOMEM, "forwarding a job", NULL);
    return;
  }
  p->partition = to_part;
  p->forward = true;
  p->finishes = true;
  p->src_partition = h->partition;
  p->src_offset = h->offset;
  altar_msg_t *m = altar__lookahead_pop(&w->ahead, topic, partition);
  w->stats.consumed++;
  if (altar_offset_tracker_seen(w->tracker, m->topic, m->partition, m->offset) != ALTAR_OK) {
    pending_free(p);
    altar_msg_free(m);
    return;
  }
  if (pending_send(w, p) != ALTAR_OK) {
    /* Not forwarded after all: it starts here at the first free slot. */
    pending_free(p);
    wlog(w, "forwarding %s/%" PRId32 "/%" PRId64 " to %s failed; it runs here", m->topic, m->partition, m->offset, peer);
    if (!wait_add(w, m, 0)) altar_msg_free(m);
    return;
  }
  wlog(w, "%s/%" PRId32 "/%" PRId64 ": no free slot here; forwarded to %s (partition %" PRId32 ")", m->topic,
       m->partition, m->offset, peer, to_part);
  altar_msg_free(m);
}

/* Forwards jobs that waited in the look-ahead for forward_after_ms or
 * more, oldest first, while a live peer of their pool reports a free slot. */
static void forward_waiting(worker_t *w, int64_t now) {
  if (!w->peers || w->forward_after_ms < 0 || !w->ahead.records || !altar__peers_live(w->peers, now)) return;
  const char *no_peer[WORKER_POOLS_MAX];
  size_t n_no_peer = 0;
  for (int sent = 0; sent < FORWARD_BATCH_MAX && !w->fatal; sent++) {
    const altar_msg_t *best = NULL;
    int64_t best_since = 0;
    for (size_t i = 0; i < w->ahead.n_queues; i++) {
      const altar__lookahead_queue_t *q = &w->ahead.queues[i];
      if (q->head == q->n || now - q->since_ms[q->head] < w->forward_after_ms) continue;
      if (best && q->since_ms[q->head] >= best_since) continue;
      const altar_msg_t *h = q->msgs[q->head];
      bool skip = false;
      for (size_t k = 0; k < n_no_peer && !skip; k++) skip = !strcmp(no_peer[k], h->topic);
      if (skip || !forwardable(w, h)) continue;
      best = h;
      best_since = q->since_ms[q->head];
    }
    if (!best) return;
    const char *pool = pool_of_topic(w, best->topic);
    int32_t to = -1;
    const char *peer = pool ? altar__peers_pick(w->peers, pool, best->topic, now, part_mine, w, &to) : NULL;
    if (!peer) {
      if (n_no_peer < WORKER_POOLS_MAX) no_peer[n_no_peer++] = best->topic;
      else return;
      continue;
    }
    char topic[ALTAR_TOPIC_NAME_MAX + 1];
    snprintf(topic, sizeof topic, "%s", best->topic);
    forward_one(w, topic, best->partition, peer, to);
  }
}

/* The free slots of each pool that the heartbeats announce: the worker's
 * own free slots, bounded by the pool's, less what waits in the look-ahead
 * for it. true when they changed (or the partitions did) since the last
 * call. */
static bool load_update(worker_t *w) {
  bool changed = w->parts_changed;
  w->parts_changed = false;
  if (!w->load_free) return changed;
  int64_t busy = (int64_t)in_flight(w);
  for (size_t i = 0; i < w->n_pools; i++) {
    int64_t f = w->o->slots - busy, pf = pool_free(w, w->pools[i].name);
    if (pf < f) f = pf;
    for (size_t k = 0; k < w->ahead.n_queues && f > 0; k++)
      if (!strcmp(w->ahead.queues[k].topic, w->pools[i].topic))
        f -= (int64_t)(w->ahead.queues[k].n - w->ahead.queues[k].head);
    if (f < 0) f = 0;
    changed |= f != w->load_free[i];
    w->load_free[i] = f;
  }
  return changed;
}

static void load_part(void *ctx, size_t i, const char **ptopic, int32_t *ppartition) {
  const worker_t *w = ctx;
  *ptopic = w->parts[i].topic;
  *ppartition = w->parts[i].partition;
}

/* Probes every task still running, in one bulk call, and emits what changed. */
static void poll_tasks(worker_t *w, int partition_filter, const char *topic_filter) {
  size_t n = 0;
  for (size_t i = 0; i < w->n_tasks; i++) n += !w->tasks[i]->terminal_sent;
  if (!n) return;
  altar_handle_t *hs = calloc(n, sizeof *hs);
  wtask_t **ts = calloc(n, sizeof *ts);
  altar_status_t *st = calloc(n, sizeof *st);
  if (!hs || !ts || !st) {
    free(hs);
    free(ts);
    free(st);
    set_fatal(w, ALTAR_ENOMEM, "polling", NULL);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->terminal_sent) continue;
    if (topic_filter && (t->partition != partition_filter || strcmp(t->topic, topic_filter))) continue;
    hs[k] = t->handle; /* shallow: the backend only reads */
    ts[k++] = t;
  }
  altar_error_t e = {0};
  if (k && altar_backend_poll(w->o->backend, hs, k, st, &e) == ALTAR_OK) {
    for (size_t i = 0; i < k; i++) {
      wtask_t *t = ts[i];
      altar_state_t s = st[i].state;
      if (s == t->state && !altar_state_terminal(s)) continue;
      if (s == ALTAR_STATE_SUCCEEDED &&
          altar_backend_collect_outputs(w->o->backend, t->spec->outputs, t->spec->n_outputs, &e) != ALTAR_OK) {
        altar_failure_t *f = altar_failure_new("output_collection_failed", e.msg, false);
        if (f && emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
          t->terminal_sent = true;
          w->stats.failed++;
          task_line(w, t, "failed", f);
        }
        altar_failure_free(f);
        continue;
      }
      bool terminal = altar_state_terminal(s);
      if (emit_status(w, t, ALTAR_EV_STATE, s, s == ALTAR_STATE_FAILED ? st[i].failure : NULL, false, terminal) ==
          ALTAR_OK) {
        t->state = s;
        if (terminal) {
          t->terminal_sent = true;
          if (s == ALTAR_STATE_SUCCEEDED) w->stats.succeeded++;
          else w->stats.failed++;
          task_line(w, t, s == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed", st[i].failure);
        }
      }
    }
  } else if (k) {
    wlog(w, "poll failed (will retry): %s", e.msg);
  }
  for (size_t i = 0; i < k; i++) altar_status_clear(&st[i]);
  free(st);
  free(hs);
  free(ts);
}

/* ---- partitions and commits ----------------------------------------------- */

/* Commits the partition's commit point if it changed; false when that
 * commit failed (it is then tried again on the next call). */
static bool commit_partition(worker_t *w, const char *topic, int32_t partition) {
  int64_t off;
  char meta[ALTAR_OFFSET_META_MAX + ALTAR_CANCEL_META_MAX + 1];
  bool changed;
  if (altar_offset_tracker_commit_point(w->tracker, topic, partition, &off, meta, ALTAR_OFFSET_META_MAX + 1, &changed) ||
      !changed || off < 0)
    return true;
  /* A commit past a cancel carries it on (cancel_meta.h): the commit point
   * moves past a cancel only once it was obeyed, so the set holds it. */
  altar__cancel_meta_append(&w->cancels, meta, sizeof meta);
  altar_error_t e = {0};
  if (altar_transport_commit(w->o->transport, topic, partition, off, meta[0] ? meta : NULL, &e) != ALTAR_OK) {
    /* Else the tracker would report no change and the commit never be retried. */
    altar_offset_tracker_commit_failed(w->tracker, topic, partition);
    wlog(w, "commit %s/%" PRId32 " at %" PRId64 " failed (will retry): %s", topic, partition, off, e.msg);
    return false;
  }
  return true;
}

/* Number of partitions whose commit failed. */
static size_t commit_all(worker_t *w) {
  size_t failed = 0;
  for (size_t i = 0; i < w->n_parts; i++) failed += !commit_partition(w, w->parts[i].topic, w->parts[i].partition);
  return failed;
}

/* Renews the lease on every held task, one control message per partition. */
static void send_leases(worker_t *w) {
  int64_t *offs = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *offs);
  bool *sent = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *sent);
  if (!offs || !sent) {
    free(offs);
    free(sent);
    set_fatal(w, ALTAR_ENOMEM, "renewing leases", NULL);
    return;
  }
  for (size_t i = 0; i < w->n_tasks; i++) {
    const wtask_t *t = w->tasks[i];
    if (sent[i] || !t->held || t->acked) continue;
    size_t n = 0;
    for (size_t j = i; j < w->n_tasks; j++) {
      const wtask_t *u = w->tasks[j];
      if (!sent[j] && u->held && !u->acked && u->partition == t->partition && !strcmp(u->topic, t->topic)) {
        offs[n++] = u->offset;
        sent[j] = true;
      }
    }
    send_control(w, t->topic, t->partition, ALTAR_CTL_LEASE, offs, n);
  }
  free(offs);
  free(sent);
}

static void leases_if_due(worker_t *w) {
  if (altar_mono_ms() < w->next_lease) return;
  send_leases(w);
  w->next_lease = altar_mono_ms() + w->lease_interval_ms;
}

/* A stop: the partitions are gone already (left the group); held tasks get
 * until deadline_ms to finish, then are cancelled and released, each with
 * a status event and a "release" control message that lets the partition's
 * new owner start it at once. Waits for every record's acknowledgement. */
static void drain(worker_t *w, int64_t deadline_ms) {
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < w->n_tasks; i++) left += !w->tasks[i]->terminal_sent;
    if (!left || altar_mono_ms() >= deadline_ms || (w->o->stop && *w->o->stop >= 2) || w->fatal) break;
    poll_tasks(w, -1, NULL);
    int interval = w->o->poll_interval_ms > 0 && w->o->poll_interval_ms < 100 ? w->o->poll_interval_ms : 100;
    altar_transport_poll(w->o->transport, interval);
    leases_if_due(w);
    reap_acked(w);
  }
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->terminal_sent) continue;
    altar_error_t e = {0};
    altar_backend_cancel(w->o->backend, &t->handle, &e);
    /* Released, not finished: the job's offset stays unfinished so the
     * partition's owner runs it again. */
    if (emit_status(w, t, ALTAR_EV_RELEASED, t->state, NULL, false, false) == ALTAR_OK) {
      t->terminal_sent = true;
      t->released = true;
      w->stats.released++;
    }
  }
  int64_t *offs = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *offs);
  bool *sent = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *sent);
  for (size_t i = 0; offs && sent && i < w->n_tasks; i++) {
    const wtask_t *t = w->tasks[i];
    if (!t->released || sent[i]) continue;
    size_t n = 0;
    for (size_t j = i; j < w->n_tasks; j++) {
      const wtask_t *u = w->tasks[j];
      if (!sent[j] && u->released && u->partition == t->partition && !strcmp(u->topic, t->topic)) {
        offs[n++] = u->offset;
        sent[j] = true;
      }
    }
    send_control(w, t->topic, t->partition, ALTAR_CTL_RELEASE, offs, n);
  }
  free(offs);
  free(sent);
  altar_error_t e = {0};
  if (altar_transport_flush(w->o->transport, 30000, &e) != ALTAR_OK) wlog(w, "flush: %s", e.msg);
  /* Released tasks were cancelled already; drop them without a second cancel. */
  size_t j = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->released) {
      task_free(t);
    } else {
      w->tasks[j++] = t;
    }
  }
  w->n_tasks = j;
  reap_acked(w);
}

/* Cancels the partition's previous owner had obeyed (its commit carried
 * them): obeyed here too, as if read again. */
static void restore_cancels(worker_t *w, const char *topic, int32_t partition, const char *list) {
  altar__cancel_set_t got = {0};
  size_t added = 0, bad = 0;
  if (altar__cancel_meta_parse(list, &got, &added, &bad) != ALTAR_OK) {
    altar__cancel_set_free(&got);
    set_fatal(w, ALTAR_ENOMEM, "restoring cancels", NULL);
    return;
  }
  if (bad) wlog(w, "%s/%" PRId32 ": %zu cancel(s) in the committed metadata do not decode; ignored", topic, partition, bad);
  size_t before = w->cancels.n;
  for (size_t i = 0; i < got.n && !w->fatal; i++) {
    altar_control_msg_t c = {.event = ALTAR_CTL_CANCEL, .partition = partition, .job_id = got.job_ids[i],
                             .group_key = got.group_keys[i]};
    apply_cancel(w, &c);
  }
  if (w->cancels.n > before)
    wlog(w, "%s/%" PRId32 ": %zu cancel(s) carried in its commit restored", topic, partition, w->cancels.n - before);
  altar__cancel_set_free(&got);
}

/* "T:0,2,4 U:1" for a log line, cut (with "...") at its size. */
static const char *parts_text(const altar_tp_t *parts, size_t n, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && at < size; i++) {
    bool same = i && !strcmp(parts[i].topic, parts[i - 1].topic);
    int k = same ? snprintf(buf + at, size - at, ",%" PRId32, parts[i].partition)
                 : snprintf(buf + at, size - at, "%s%s:%" PRId32, i ? " " : "", parts[i].topic, parts[i].partition);
    if (k < 0 || (size_t)k >= size - at) {
      if (size >= 4) snprintf(buf + size - 4, 4, "...");
      break;
    }
    at += (size_t)k;
  }
  return buf;
}

static void on_rebalance(altar_transport_t *tr, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  worker_t *w = ctx; /* run detaches before its frame goes */
  if (kind == ALTAR_REBALANCE_ASSIGN) {
    for (size_t i = 0; i < n; i++) {
      int64_t off = ALTAR_OFFSET_INVALID;
      char *meta = NULL;
      altar_error_t e = {0};
      if (altar_transport_committed(tr, w->group, parts[i].topic, parts[i].partition, 10000, &off, &meta, &e))
        wlog(w, "reading the committed offset of %s/%" PRId32 " failed: %s", parts[i].topic, parts[i].partition,
             e.msg);
      altar_error_t me = {0};
      char *cancels = altar__cancel_meta_split(meta);
      altar_offset_tracker_assign(w->tracker, parts[i].topic, parts[i].partition, off >= 0 ? off : -1, meta, &me);
      if (me.msg[0]) wlog(w, "%s", me.msg);
      if (cancels) restore_cancels(w, parts[i].topic, parts[i].partition, cancels);
      free(meta);
      if (w->n_parts == w->cap_parts) {
        size_t cap = w->cap_parts ? w->cap_parts * 2 : 8;
        assigned_t *np = realloc(w->parts, cap * sizeof *np);
        if (!np) {
          set_fatal(w, ALTAR_ENOMEM, "rebalance", NULL);
          return;
        }
        w->parts = np;
        w->cap_parts = cap;
      }
      w->parts[w->n_parts].topic = strdup(parts[i].topic);
      w->parts[w->n_parts].partition = parts[i].partition;
      w->n_parts++;
    }
    gate_assigned(w, parts, n);
    w->parts_changed = true;
    char list[1024];
    wlog(w, "assigned %zu partition(s): %s", n, parts_text(parts, n, list, sizeof list));
    return;
  }
  /* Handover, not drain: nothing waits and nothing is cancelled. The
   * commit carries the held bound, so the next owner waits for what still
   * runs here; those tasks run on (held) and announce their end. */
  size_t held = 0;
  for (size_t i = 0; i < n; i++) {
    /* The last chance to commit it: a few quick tries (no later loop would retry). */
    for (int tries = 0; !commit_partition(w, parts[i].topic, parts[i].partition) && tries < 3; tries++)
      altar_transport_poll(tr, 50);
    for (size_t k = 0; k < w->n_tasks; k++) {
      wtask_t *t = w->tasks[k];
      if (t->acked || t->held || t->partition != parts[i].partition || strcmp(t->topic, parts[i].topic)) continue;
      t->held = true;
      held++;
    }
    waits_drop(w, parts[i].topic, parts[i].partition);
    altar__lookahead_drop(&w->ahead, parts[i].topic, parts[i].partition);
    altar_offset_tracker_revoke(w->tracker, parts[i].topic, parts[i].partition);

    for (size_t j = 0; j < w->n_parts; j++) {
      if (w->parts[j].partition == parts[i].partition && !strcmp(w->parts[j].topic, parts[i].topic)) {
        free(w->parts[j].topic);
        w->parts[j] = w->parts[--w->n_parts];
        break;
      }
    }
  }
  w->stats.held += held;
  w->parts_changed = true;
  if (held) w->next_lease = altar_mono_ms(); /* the first lease goes out now */
  char list[1024];
  wlog(w, "revoked %zu partition(s); %zu running task(s) handed over, still running here: %s", n, held,
       parts_text(parts, n, list, sizeof list));
}

/* A member with no partition runs nothing: say why, once per idle spell. */
static void warn_no_partition(worker_t *w) {
  for (size_t i = 0; i < w->n_pools; i++) {
    const char *topic = w->pools[i].topic;
    altar_topic_list_t *tl = NULL;
    altar_error_t e = {0};
    size_t parts = 0, members = 0;
    if (altar_transport_list_topics(w->o->transport, topic, 5000, &tl, &e) == ALTAR_OK && tl->n_topics)
      parts = tl->topics[0].n_partitions;
    altar_topic_list_free(tl);
    bool known = altar_transport_topic_members(w->o->transport, w->group, topic, 5000, &members, &e) == ALTAR_OK;
    if (known)
      wlog(w, "owns no partition of %s: it has %zu partition(s) and group %s has %zu member(s) on it, "
              "so there are more workers than partitions; this one stays idle until a partition frees up "
              "(more partitions: topics.partitions / --partitions when the topic is created)",
           topic, parts, w->group, members);
    else
      wlog(w, "owns no partition of %s (%zu partition(s)): more workers than partitions, or a rebalance in "
              "progress; it stays idle until a partition is assigned",
           topic, parts);
  }
}

/* ---- the loop --------------------------------------------------------------- */

static const char *running_key(void *ctx, size_t i) { return ((worker_t *)ctx)->tasks[i]->task_key; }

/* The loop's fixed cadences (the configurable ones are in worker.h). */
enum {
  CONSUME_WAIT_MAX_MS = 50,   /* longest a turn blocks on the log: leases, heartbeats and
                                 forwards are checked at least this often */
  METRICS_EVERY_MS = 100,     /* gauges refreshed */
  IDLE_WARN_AFTER_MS = 5000,  /* no partition this long: say why once */
  FINAL_COMMIT_TRIES = 5,     /* the last commit's retries at exit ... */
  FINAL_COMMIT_POLL_MS = 200, /* ... each after serving the log this long */
  EXIT_FLUSH_MS = 5000,       /* reports still owed at exit get this long */
};

/* The loop's clocks: when each periodic phase is next due. */
typedef struct loop_clock {
  int poll_every, commit_every;
  int64_t next_poll, next_commit, next_metrics, idle_since;
  bool warned_idle, got_job;
} loop_clock_t;

/* Sets up w from o (id, tracker, metrics, leases, pools, heartbeat load,
 * subscription); on failure everything taken is released. */
static int worker_open(worker_t *w, const altar_worker_opts_t *o, altar_error_t *err) {
  *w = (worker_t){.o = o, .group = o->group ? o->group : ALTAR_WORKER_GROUP};
  if (o->worker_id) {
    snprintf(w->worker_id, sizeof w->worker_id, "%s", o->worker_id);
  } else {
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(w->worker_id, sizeof w->worker_id, "%s:%ld", host, (long)getpid());
  }
  w->tracker = altar_offset_tracker_new();
  if (!w->tracker) return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  altar_error_t me = {0};
  if (altar__worker_metrics_init(&w->metrics, o->metrics, o->slots, &me)) wlog(w, "metrics off: %s", me.msg);
  w->lease_interval_ms = o->lease_interval_ms > 0 ? o->lease_interval_ms : ALTAR_WORKER_LEASE_INTERVAL_MS_DEFAULT;
  w->lease_timeout_ms = o->lease_timeout_ms > 0 ? o->lease_timeout_ms
                        : 3 * w->lease_interval_ms > ALTAR_WORKER_LEASE_TIMEOUT_MS_MIN ? 3 * w->lease_interval_ms
                                                                                       : ALTAR_WORKER_LEASE_TIMEOUT_MS_MIN;
  altar_transport_set_delivery(o->transport, on_delivery, w, NULL, NULL);
  w->intake = (altar__intake_ctx_t){.backend = o->backend, .groups = o->groups, .jobs_topic = o->topics->jobs};
  int rc = pools_setup(w, err);
  w->forward_after_ms = o->forward_after_ms ? o->forward_after_ms : ALTAR_FORWARD_AFTER_MS_DEFAULT;
  w->crash_after_forward = getenv("ALTAR_TEST_CRASH_AFTER_FORWARD") != NULL;
  /* Heartbeats announce the load whenever there is a fleet topic; peers
   * are read only with a handle to read them on. */
  if (!rc && o->topics->fleet && *o->topics->fleet) {
    w->peers = o->fleet_transport && w->forward_after_ms >= 0 ? altar__peers_new(w->worker_id) : NULL;
    w->load_pools = calloc(w->n_pools, sizeof *w->load_pools);
    w->load_free = calloc(w->n_pools, sizeof *w->load_free);
    if ((o->fleet_transport && w->forward_after_ms >= 0 && !w->peers) || !w->load_pools || !w->load_free)
      rc = altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
    for (size_t i = 0; !rc && i < w->n_pools; i++) w->load_pools[i] = w->pools[i].name;
  }
  const char **topics = rc ? NULL : calloc(w->n_pools, sizeof *topics);
  if (!rc && !topics) rc = altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  for (size_t i = 0; !rc && i < w->n_pools; i++) topics[i] = w->pools[i].topic;
  if (!rc) {
    rc = altar_transport_subscribe(o->transport, w->group, topics, w->n_pools, on_rebalance, w, err);
    if (!rc) {
      for (size_t i = 0; i < w->n_pools; i++) wlog(w, "serving pool %s from %s", w->pools[i].name, w->pools[i].topic);
      char note[600];
      altar__worker_caps_note(o->backend, note, sizeof note);
      if (note[0]) wlog(w, "%s", note);
    }
  }
  free(topics);
  if (rc) {
    altar__peers_free(w->peers);
    free(w->load_pools);
    free(w->load_free);
    pools_free(w);
    altar_transport_detach(o->transport);
    altar_offset_tracker_free(w->tracker);
  }
  return rc;
}

/* Phase: what peers announce, and this worker's own heartbeat. */
static void phase_fleet(worker_t *w, altar__heartbeat_t *hb, int64_t now) {
  fleet_read(w, now);
  altar__heartbeat_load_t load = {w->n_pools, w->load_pools, w->load_free, w->n_parts, load_part, w};
  bool load_changed = load_update(w);
  altar__heartbeat_tick(hb, now, w->n_tasks, running_key, w, w->load_free ? &load : NULL, load_changed);
}

/* Phase: 0 to go on, 1 to stop draining, 2 to stop at once. */
static int phase_stop_asked(const worker_t *w) {
  const altar_worker_opts_t *o = w->o;
  if (o->stop && *o->stop >= 2) return 2;
  if ((o->stop && *o->stop == 1) || (o->max_jobs > 0 && w->finished_jobs >= (uint64_t)o->max_jobs)) return 1;
  return 0;
}

/* Phase: take in from the log. Waits no longer than until the next backend
 * poll (and not at all right after a job: there may be more); with every
 * slot busy it waits on the backend instead, so a freed slot is seen at
 * once. The message read, if any, is returned for the idle-exit check. */
static altar_msg_t *phase_intake(worker_t *w, loop_clock_t *c, int64_t now) {
  const altar_worker_opts_t *o = w->o;
  update_gates(w);
  lookahead_feed(w);
  forward_waiting(w, now);
  /* Read again: taking records in may have started tasks (forks), and a
   * wait measured from the turn's start would overshoot the poll. */
  now = altar_mono_ms();
  int wait = c->got_job ? 0 : (int)(c->next_poll > now ? c->next_poll - now : 0);
  if (wait > CONSUME_WAIT_MAX_MS) wait = CONSUME_WAIT_MAX_MS;
  if (w->paused && wait > 0) {
    int wc = altar_backend_wait_change(o->backend, wait);
    if (wc == 1) c->next_poll = altar_mono_ms();
    if (wc >= 0) wait = 0;
  }
  altar_msg_t *m = NULL;
  altar_error_t e = {0};
  int rc = altar_transport_consume(o->transport, wait, &m, &e);
  c->got_job = rc == ALTAR_OK && m;
  if (c->got_job) {
    take_record(w, m);
  } else if (rc != ALTAR_OK) {
    consume_failed(w, &e);
  }
  return c->got_job ? m : NULL;
}

/* Phase: the backend's tasks. A quiet turn with tasks out asks (without
 * blocking) whether one changed, so a completion is polled within this turn
 * rather than at the next interval (a watch-fed backend knows at once). */
static void phase_poll_backend(worker_t *w, loop_clock_t *c, int64_t now) {
  if (!c->got_job && !w->paused && w->n_tasks && altar_backend_wait_change(w->o->backend, 0) == 1)
    c->next_poll = now;
  if (now >= c->next_poll) {
    poll_tasks(w, -1, NULL);
    refresh_capacity(w);
    c->next_poll = altar_mono_ms() + c->poll_every;
  }
}

/* Phase: the log's callbacks, expired waits, leases, the no-partition
 * warning, and acknowledged reports. */
static void phase_housekeeping(worker_t *w, loop_clock_t *c, int64_t now) {
  altar_transport_poll(w->o->transport, 0);
  if (w->n_waits) waits_expire(w);
  leases_if_due(w);
  if (w->n_parts) {
    c->idle_since = now;
    c->warned_idle = false;
  } else if (!c->warned_idle && now - c->idle_since > IDLE_WARN_AFTER_MS) {
    warn_no_partition(w);
    c->warned_idle = true;
  }
  reap_acked(w);
}

/* Phase: gauges, and commits. Commits are batched: a late commit only means
 * a rerun after a crash, and the finished offsets above it ride in the
 * metadata anyway. */
static void phase_metrics_and_commits(worker_t *w, loop_clock_t *c, int64_t now) {
  if (now >= c->next_metrics) {
    altar__worker_metrics_update(&w->metrics, &w->stats, in_flight(w), w->paused);
    c->next_metrics = now + METRICS_EVERY_MS;
  }
  if (now >= c->next_commit || w->commit_soon) {
    w->commit_soon = false;
    commit_all(w);
    c->next_commit = altar_mono_ms() + c->commit_every;
  }
}

/* Phase: with exit_when_idle, true once nothing is read, in flight or owed
 * and the log has no more for us. */
static bool phase_idle_done(worker_t *w, const altar_msg_t *m) {
  if (!w->o->exit_when_idle || m || w->n_tasks || w->n_waits || w->outstanding || !w->n_parts || w->ahead.records)
    return false;
  bool done = false;
  altar_error_t ce = {0};
  return altar_transport_caught_up(w->o->transport, &done, &ce) == ALTAR_OK && done;
}

/* Leaves the group first (the partitions move to the others now, their
 * commits carrying the held bound), then lets what runs here finish. */
static void worker_drain(worker_t *w) {
  int64_t deadline = altar_mono_ms() + (w->o->drain_ms < 0 ? ALTAR_WORKER_DRAIN_MS_DEFAULT : w->o->drain_ms);
  altar_error_t le = {0};
  int lrc = altar_transport_leave(w->o->transport, &le);
  if (lrc != ALTAR_OK && lrc != ALTAR_ENOTSUP) wlog(w, "leaving the group: %s", le.msg);
  drain(w, deadline);
}

/* The last commit (skipped on a second stop signal, even one that came
 * during the drain), the heartbeat's goodbye, owed reports, and everything
 * worker_open took. */
static int worker_close(worker_t *w, altar__heartbeat_t *hb, altar_worker_stats_t *pstats, altar_error_t *err) {
  const altar_worker_opts_t *o = w->o;
  /* The last commit gets a few tries: no later loop would retry it. */
  if (!w->fatal && !(o->stop && *o->stop >= 2))
    for (int tries = 0; commit_all(w) && tries < FINAL_COMMIT_TRIES; tries++)
      altar_transport_poll(o->transport, FINAL_COMMIT_POLL_MS);
  altar__heartbeat_stop(hb);
  /* Reports still owed (a hard stop, a fatal error) are served now, while
   * their records and tasks exist, not later inside the caller's close. */
  if (w->outstanding) {
    altar_error_t fe = {0};
    if (altar_transport_flush(o->transport, EXIT_FLUSH_MS, &fe) != ALTAR_OK) wlog(w, "flush: %s", fe.msg);
  }
  /* Unsubscribe by closing is the caller's job; detach our callbacks now
   * (its close revokes what is owned, and nothing here would hear it). */
  altar_transport_detach(o->transport);
  altar__worker_metrics_update(&w->metrics, &w->stats, in_flight(w), w->paused);
  if (pstats) *pstats = w->stats;
  for (size_t i = 0; i < w->n_tasks; i++) task_free(w->tasks[i]);
  free(w->tasks);
  for (size_t i = 0; i < w->n_parts; i++) free(w->parts[i].topic);
  free(w->parts);
  pools_free(w);
  for (size_t i = 0; i < w->n_waits; i++) altar_msg_free(w->waits[i].msg);
  free(w->waits);
  altar__lookahead_free(&w->ahead);
  altar__peers_free(w->peers);
  free(w->load_pools);
  free(w->load_free);
  altar__cancel_set_free(&w->cancels);
  altar_offset_tracker_free(w->tracker);
  if (w->fatal) {
    if (err) *err = w->fatal_err;
    return w->fatal;
  }
  return ALTAR_OK;
}

int altar_worker_run(const altar_worker_opts_t *o, altar_worker_stats_t *pstats, altar_error_t *err) {
  if (!o || !o->transport || !o->backend || !o->topics || o->slots < 1)
    return altar_error_set(err, ALTAR_EINVAL, "worker: transport, backend, topics and slots >= 1 are required");
  worker_t w;
  int rc = worker_open(&w, o, err);
  if (rc) return rc;
  int64_t start = altar_mono_ms();
  loop_clock_t c = {
      .poll_every = o->poll_interval_ms > 0 ? o->poll_interval_ms : ALTAR_WORKER_POLL_MS_DEFAULT,
      /* Each commit of the local log is two fsyncs, and one of Kafka's a
       * round trip, per partition: at 100 ms with 32 busy partitions they
       * cost more than the tasks. A later commit only means a rerun after a crash. */
      .commit_every = o->commit_interval_ms > 0 ? o->commit_interval_ms : ALTAR_WORKER_COMMIT_MS_DEFAULT,
      .next_poll = start, .next_commit = start, .next_metrics = start, .idle_since = start};
  altar__heartbeat_t *hb = altar__heartbeat_start(o, w.worker_id);
  int stop = 0;
  /* One turn: read the clock, then each phase in order; intake reads it
   * again before it waits, and the turn after it (it may block). */
  while (!w.fatal) {
    int64_t now = altar_mono_ms();
    phase_fleet(&w, hb, now);
    if ((stop = phase_stop_asked(&w))) break;
    altar_msg_t *m = phase_intake(&w, &c, now);
    now = altar_mono_ms();
    phase_poll_backend(&w, &c, now);
    phase_housekeeping(&w, &c, now);
    phase_metrics_and_commits(&w, &c, now);
    if (phase_idle_done(&w, m)) {
      stop = 1;
      break;
    }
  }
  if (stop == 1 && !w.fatal) worker_drain(&w);
  return worker_close(&w, hb, pstats, err);
}
