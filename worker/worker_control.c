/* Handover between workers: control messages (done, lease, release,
 * cancel) written to a job's own partition and obeyed when read, the jobs
 * another worker holds waited for until their holder lets go or its lease
 * runs out, and the leases this worker renews on what it holds. */
#include "worker/worker_int.h"

#include "altar/clock.h"
#include "altar/codec.h"
#include "core/unconst.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes a control message about offsets of topic/partition to that very
 * partition, so whoever owns it reads it in order behind the jobs. */
int altar__worker_send_control(worker_t *w, const char *topic, int32_t partition, altar_control_event_t ev,
                               const int64_t *offs, size_t n) {
  for (size_t at = 0; at < n || (at == 0 && n == 0); at += ALTAR_CONTROL_MAX_OFFSETS) {
    size_t k = n - at < ALTAR_CONTROL_MAX_OFFSETS ? n - at : ALTAR_CONTROL_MAX_OFFSETS;
    altar_control_msg_t c = {
        .v = ALTAR_SCHEMA_VERSION,
        .event = ev,
        .partition = partition,
        .offsets = ALTAR__UNCONST(offs + at),
        .n_offsets = k,
        .lease_s = ev == ALTAR_CTL_LEASE ? w->lease_interval_ms / 1000.0 : 0,
        .worker = w->worker_id,
        .ts = altar_wall_s(),
    };
    pending_t *p = altar__worker_pending_new(w, topic, NULL);
    if (!p) {
      altar__worker_set_fatal(w, ALTAR_ENOMEM, "writing a control message", NULL);
      return ALTAR_ENOMEM;
    }
    p->partition = partition;
    altar_error_t e = {0};
    int rc = altar_encode_control(&c, &p->value, &e);
    if (!rc) rc = altar__worker_pending_send(w, p);
    if (rc) {
      altar__worker_pending_free(p);
      altar__worker_set_fatal(w, rc, "writing a control message", &e);
      return rc;
    }
    if (n == 0) break;
  }
  return ALTAR_OK;
}

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
void altar__worker_waits_drop(worker_t *w, const char *topic, int32_t partition) {
  for (size_t i = 0; i < w->n_waits;) {
    const altar_msg_t *m = w->waits[i].msg;
    if (m->partition == partition && !strcmp(m->topic, topic)) altar_msg_free(wait_take(w, &w->waits[i]));
    else i++;
  }
}

int64_t altar__worker_lease_deadline(const worker_t *w, double lease_s) {
  int64_t ms = w->lease_timeout_ms;
  /* A holder that renews more slowly than we expect gets three of its own intervals. */
  if (lease_s > 0 && lease_s < 3600 && (int64_t)(3000 * lease_s) > ms) ms = (int64_t)(3000 * lease_s);
  return altar_mono_ms() + ms;
}

/* What a control message asks. Safe to do twice: a done or released job
 * is no longer waited for, a lease only moves a deadline, a cancel is
 * noted once. */
void altar__worker_obey_control(worker_t *w, const altar_msg_t *m, const altar_control_msg_t *c) {
  if (c->event == ALTAR_CTL_CANCEL) altar__worker_apply_cancel(w, c);
  /* Offsets are of the partition the message lies in; one copied elsewhere says nothing. */
  for (size_t i = 0; c->partition == m->partition && i < c->n_offsets; i++) {
    waiting_t *x = wait_find(w, m->topic, m->partition, c->offsets[i]);
    if (!x) continue; /* not waited for (ours, finished, or below the commit point) */
    switch (c->event) {
    case ALTAR_CTL_DONE:
      altar__offset_tracker_finished(w->tracker, m->topic, m->partition, c->offsets[i]);
      altar_msg_free(wait_take(w, x));
      w->stats.handed_done++;
      break;
    case ALTAR_CTL_LEASE:
      if (x->deadline_ms) x->deadline_ms = altar__worker_lease_deadline(w, c->lease_s);
      break;
    case ALTAR_CTL_RELEASE: x->deadline_ms = 0; break;
    case ALTAR_CTL_UNKNOWN:
    case ALTAR_CTL_CANCEL: break;
    }
  }
}

void altar__worker_handle_control(worker_t *w, const altar_msg_t *m) {
  altar_control_msg_t c;
  altar_error_t e = {0};
  if (altar_decode_control(m->value, m->value_len, &c, &e) != ALTAR_OK) {
    char reason[ALTAR_ERRMSG_MAX + 64];
    snprintf(reason, sizeof reason, "undecodable control message: %s", e.msg);
    altar_control_msg_clear(&c);
    altar__worker_dead_letter(w, m, reason, true);
    return;
  }
  w->stats.controls++;
  altar__offset_tracker_finished(w->tracker, m->topic, m->partition, m->offset); /* its own offset: done at once */
  altar__worker_obey_control(w, m, &c);
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

void altar__worker_waits_expire(worker_t *w) {
  int64_t now = altar_mono_ms();
  for (size_t i = 0; i < w->n_waits;) {
    waiting_t *x = &w->waits[i];
    if (x->deadline_ms && x->deadline_ms < now + w->lease_timeout_ms && topic_paused(w, x->msg->topic)) {
      x->deadline_ms = now + w->lease_timeout_ms;
    }
    if (x->deadline_ms > now || altar__worker_in_flight(w) >= (size_t)w->o->slots) {
      i++;
      continue;
    }
    bool released = x->deadline_ms == 0;
    altar_msg_t *m = wait_take(w, x);
    altar__worker_log(w, "%s/%" PRId32 "/%" PRId64 ": %s: starting it here", m->topic, m->partition, m->offset,
                      released ? "released by its holder" : "its holder sent no lease in time");
    w->stats.taken_over++;
    altar__worker_start_job(w, m);
    altar_msg_free(m);
  }
}

/* Keeps m in the waits until deadline_ms (0: start it when a slot frees).
 * false when out of memory (m stays the caller's). */
bool altar__worker_wait_add(worker_t *w, altar_msg_t *m, int64_t deadline_ms) {
  if (w->n_waits == w->cap_waits) {
    size_t cap = w->cap_waits ? w->cap_waits * 2 : 16;
    waiting_t *nw = realloc(w->waits, cap * sizeof *nw);
    if (!nw) {
      altar__worker_set_fatal(w, ALTAR_ENOMEM, "waiting for a held job", NULL);
      return false;
    }
    w->waits = nw;
    w->cap_waits = cap;
  }
  w->waits[w->n_waits++] = (waiting_t){m, deadline_ms};
  return true;
}

/* Renews the lease on every held task, one control message per partition. */
static void send_leases(worker_t *w) {
  int64_t *offs = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *offs);
  bool *sent = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *sent);
  if (!offs || !sent) {
    free(offs);
    free(sent);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "renewing leases", NULL);
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
    altar__worker_send_control(w, t->topic, t->partition, ALTAR_CTL_LEASE, offs, n);
  }
  free(offs);
  free(sent);
}

void altar__worker_leases_if_due(worker_t *w) {
  if (altar_mono_ms() < w->next_lease) return;
  send_leases(w);
  w->next_lease = altar_mono_ms() + w->lease_interval_ms;
}
