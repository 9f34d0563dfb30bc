/* Intake: the pools the backend serves and their jobs topics, slot gating
 * per pool (pausing a topic only once the look-ahead is full too), the
 * look-ahead's records taken in while they can start, and one consumed
 * record's way to a task, a wait or a skip. */
#include "worker/worker_int.h"

#include "altar/clock.h"
#include "altar/codec.h"
#include "altar/pools.h"
#include "core/unconst.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pauses or resumes the owned partitions of one topic. */
static bool set_topic_paused(worker_t *w, const char *topic, bool paused) {
  altar_tp_t *tps = calloc(w->n_parts ? w->n_parts : 1, sizeof *tps);
  if (!tps) return false;
  size_t n = 0;
  for (size_t i = 0; i < w->n_parts; i++)
    if (!strcmp(w->parts[i].topic, topic))
      tps[n++] = (altar_tp_t){w->parts[i].topic, w->parts[i].partition, ALTAR_OFFSET_INVALID};
  altar_error_t e = {0};
  int rc = !n       ? ALTAR_OK
           : paused ? altar_transport_pause(w->o->transport, tps, n, &e)
                    : altar_transport_resume(w->o->transport, tps, n, &e);
  free(tps);
  if (rc) altar__worker_log(w, "%s %s failed: %s", paused ? "pause" : "resume", topic, e.msg);
  return rc == ALTAR_OK;
}

/* Free slots of pool, or INT64_MAX when it is not rationed. Only a pool the
 * backend reports has fixed capacity; one it can serve but leaves out of the
 * report autoscales (an empty report: all of them), so the worker's own
 * slots alone bound it. */
int64_t altar__worker_pool_free(const worker_t *w, const char *pool) {
  bool fixed = false;
  for (size_t i = 0; i < w->cap.n && !fixed; i++) fixed = !strcmp(w->cap.pools[i], pool);
  if (!fixed) return INT64_MAX;
  altar_resources_t r = {.gpu = strcmp(pool, ALTAR_POOL_CPU) ? ALTAR__UNCONST(pool) : NULL, .count = 1};
  return altar_capacity_free_for(&w->cap, &r);
}

/* Slot gating per pool: a pool is full while every worker slot is busy or
 * its pool has no free slot (Capacity.free_for); its records then go to the
 * look-ahead, and only when that is full too is its topic paused. One full
 * pool never stops the others. */
void altar__worker_update_gates(worker_t *w) {
  bool all_busy = altar__worker_in_flight(w) >= (size_t)w->o->slots, all_full = true;
  bool ahead_full = altar__lookahead_full(&w->ahead);
  for (size_t i = 0; i < w->n_pools; i++) {
    wpool_t *p = &w->pools[i];
    p->full = all_busy || altar__worker_pool_free(w, p->name) <= 0;
    bool pause = p->full && ahead_full;
    if (pause != p->paused && set_topic_paused(w, p->topic, pause)) p->paused = pause;
    all_full &= p->full;
  }
  w->paused = all_full;
}

/* Newly assigned partitions of a paused pool start paused. */
void altar__worker_gate_assigned(worker_t *w, const altar_tp_t *parts, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < w->n_pools; k++)
      if (w->pools[k].paused && !strcmp(w->pools[k].topic, parts[i].topic)) {
        altar_error_t e = {0};
        altar_transport_pause(w->o->transport, &parts[i], 1, &e);
      }
}

void altar__worker_refresh_capacity(worker_t *w) {
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
void altar__worker_capacity_took(worker_t *w, const altar_resources_t *r) {
  const char *pool = r->gpu ? r->gpu : ALTAR_POOL_CPU;
  int64_t f = altar__worker_pool_free(w, pool);
  if (w->cap.n && f != INT64_MAX) altar_capacity_set(&w->cap, pool, f > 0 ? f - 1 : 0);
}

void altar__worker_pools_free(worker_t *w) {
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
    altar__worker_log(w, "the backend's pools: %s; serving what its capacity reports", altar_strerror(nd));
    nd = 0;
  } else if ((size_t)nd > WORKER_POOLS_MAX) {
    altar__worker_log(w, "the backend serves %d pools; reading the first %d", nd, WORKER_POOLS_MAX);
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
int altar__worker_pools_setup(worker_t *w, altar_error_t *err) {
  altar__worker_refresh_capacity(w);
  const char *names[2 * WORKER_POOLS_MAX];
  size_t n = servable_pools(w, names, sizeof names / sizeof names[0]);
  w->pools = calloc(n, sizeof *w->pools);
  if (!w->pools) return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  for (size_t i = 0; i < n; i++) {
    const char *name = names[i];
    char topic[512];
    altar_error_t e = {0};
    if (altar_pool_topic(w->o->topics->jobs, name, topic, sizeof topic, &e) != ALTAR_OK) {
      altar__worker_log(w, "not serving pool '%.64s': %s", name, e.msg);
      continue;
    }
    wpool_t *p = &w->pools[w->n_pools];
    if (!(p->name = strdup(name)) || !(p->topic = strdup(topic))) {
      free(p->name);
      return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
    }
    w->n_pools++;
    int rc = altar_transport_create_topic(
        w->o->transport, topic, w->o->topic_partitions > 0 ? w->o->topic_partitions : ALTAR_DEFAULT_TOPIC_PARTITIONS,
        &e);
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

/* One consumed record. Returns true when it keeps m (a waited job). */
static bool handle_job(worker_t *w, altar_msg_t *m) {
  w->stats.consumed++;
  int rc = altar__offset_tracker_seen(w->tracker, m->topic, m->partition, m->offset);
  if (rc) {
    altar__worker_log(w, "ignoring %s/%" PRId32 "/%" PRId64 ": %s", m->topic, m->partition, m->offset,
                      rc == ALTAR_ENOTFOUND ? "partition not assigned" : "offset out of order");
    return false;
  }
  if (altar__offset_tracker_already_done(w->tracker, m->topic, m->partition, m->offset)) {
    altar__offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset);
    w->stats.skipped++;
    return false;
  }
  if (altar__offset_tracker_held(w->tracker, m->topic, m->partition, m->offset)) {
    wtask_t *own = altar__worker_task_find(w, m->topic, m->partition, m->offset);
    if (own && own->held) {
      /* The partition came back: our own run goes on as if never handed over. */
      own->held = false;
      w->stats.reattached++;
      if (own->acked) altar__offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset);
      return false;
    }
    if (!altar__worker_wait_add(w, m, altar__worker_lease_deadline(w, 0))) return false;
    w->stats.waited++;
    return true;
  }
  altar__worker_start_job(w, m);
  return false;
}

static bool is_control(const altar_msg_t *m) {
  char type[16];
  return m->value && altar_peek_type(m->value, m->value_len, type, sizeof type) == ALTAR_OK && !strcmp(type, "control");
}

/* The rest of altar__worker_takes_slot, for a record known not to be a
 * control message. */
static bool takes_slot_unless_control(const worker_t *w, const altar_msg_t *m) {
  return !altar__offset_tracker_already_done(w->tracker, m->topic, m->partition, m->offset) &&
         !altar__offset_tracker_held(w->tracker, m->topic, m->partition, m->offset);
}

/* Whether m takes a slot when taken in: not a control message, not
 * finished already, not held by another worker. */
bool altar__worker_takes_slot(const worker_t *w, const altar_msg_t *m) {
  return !is_control(m) && takes_slot_unless_control(w, m);
}

bool altar__worker_slot_free(const worker_t *w, const char *topic) {
  if (altar__worker_in_flight(w) >= (size_t)w->o->slots) return false;
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return altar__worker_pool_free(w, w->pools[i].name) > 0;
  return true;
}

/* A control message read into the look-ahead is obeyed at once too (a
 * cancel must not wait for a slot), and again when taken in, in order:
 * obeying one twice changes nothing. */
static void obey_early(worker_t *w, const altar_msg_t *m) {
  altar_control_msg_t c;
  altar_error_t e = {0};
  if (altar_decode_control(m->value, m->value_len, &c, &e) == ALTAR_OK) altar__worker_obey_control(w, m, &c);
  altar_control_msg_clear(&c);
}

/* One record read from a jobs partition: taken in now when nothing of its
 * partition is queued ahead of it and it can start, else queued. */
void altar__worker_take_record(worker_t *w, altar_msg_t *m) {
  bool ours = altar__offset_tracker_assigned(w->tracker, m->topic, m->partition);
  /* A free slot first: then whether m would take one does not matter. */
  if (!ours || (!altar__lookahead_len(&w->ahead, m->topic, m->partition) &&
                (altar__worker_slot_free(w, m->topic) || !altar__worker_takes_slot(w, m)))) {
    if (!handle_job(w, m)) altar_msg_free(m);
    return;
  }
  bool control = is_control(m);
  if (control) obey_early(w, m);
  if (altar__lookahead_push(&w->ahead, m, altar_mono_ms(), control) != ALTAR_OK) {
    altar_msg_free(m);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "looking ahead", NULL);
  }
}

/* Takes queued records in, in log order per partition, while they can
 * start: one per partition per round, so none starves the others. No
 * pointer into the look-ahead is kept across handle_job (its produce may
 * serve a rebalance, which drops queues). */
void altar__worker_lookahead_feed(worker_t *w) {
  for (bool moved = w->ahead.records > 0; moved && !w->fatal;) {
    moved = false;
    for (size_t i = 0; i < w->ahead.n_queues && !w->fatal; i++) {
      const altar__lookahead_queue_t *q = &w->ahead.queues[i];
      if (q->head == q->n) continue;
      const altar_msg_t *h = q->msgs[q->head];
      if (!q->control[q->head] && !altar__worker_slot_free(w, h->topic) && takes_slot_unless_control(w, h)) continue;
      altar_msg_t *m = altar__lookahead_pop(&w->ahead, h->topic, h->partition);
      if (!handle_job(w, m)) altar_msg_free(m);
      moved = true;
    }
  }
}
