/* What the worker says: its log lines, records produced with retries until
 * the log acknowledges them (on_delivery finishes offsets and marks tasks
 * acked), and status events. */
#include "worker/worker_int.h"

#include "altar/clock.h"
#include "altar/pools.h"
#include "core/unconst.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <unistd.h>

void altar__worker_log(worker_t *w, const char *fmt, ...) {
  if (w->o->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "altar worker %s: ", w->worker_id);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* "started"/"succeeded"/"failed" lines for a person watching a terminal. */
void altar__worker_task_line(worker_t *w, const wtask_t *t, const char *what, const altar_failure_t *f) {
  if (!w->o->task_lines) return;
  const char *job = altar_strmap_get(&t->spec->labels, ALTAR_JOB_ID_LABEL);
  const char *detail = f && f->detail ? f->detail : "";
  int dl = (int)strcspn(detail, "\n");
  altar__worker_log(w, "%s %s task %.12s%s%s%s%s%s%.*s", what, t->spec->kind, t->task_key, job ? " of job " : "",
                    job ? job : "", f ? ": " : "", f && f->reason ? f->reason : "", dl ? " — " : "",
                    dl > 200 ? 200 : dl, detail);
}

void altar__worker_set_fatal(worker_t *w, int code, const char *what, const altar_error_t *e) {
  if (w->fatal) return;
  w->fatal = code;
  altar_error_set(&w->fatal_err, code, "%s: %s", what, e ? e->msg : altar_strerror(code));
}

void altar__worker_pending_free(pending_t *p) {
  if (!p) return;
  free(p->topic);
  free(p->key);
  altar_buf_free(&p->value);
  for (size_t i = 0; i < p->n_headers; i++) free(p->hbuf[i]);
  free(p->src_topic);
  free(p);
}

int altar__worker_pending_send(worker_t *w, pending_t *p) {
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

pending_t *altar__worker_pending_new(worker_t *w, const char *topic, const char *key) {
  pending_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->w = w;
  p->partition = ALTAR_PARTITION_ANY;
  p->topic = strdup(topic);
  p->key = key ? strdup(key) : NULL;
  if (!p->topic || (key && !p->key)) {
    altar__worker_pending_free(p);
    return NULL;
  }
  return p;
}

int altar__worker_pending_add_header(pending_t *p, const char *name, const char *value) {
  if (p->n_headers >= 3) return ALTAR_EINVAL;
  char *v = strdup(value);
  if (!v) return ALTAR_ENOMEM;
  p->hbuf[p->n_headers] = v;
  p->headers[p->n_headers] = (altar_header_t){name, v, strlen(v)};
  p->n_headers++;
  return ALTAR_OK;
}

void altar__worker_on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)ctx;
  pending_t *p = dr->opaque;
  if (!p) return;
  worker_t *w = p->w;
  w->outstanding--;
  if (dr->err) {
    /* Nothing is acknowledged yet: send it again, a bounded number of times. */
    if (++p->attempts < 10 && altar__worker_pending_send(w, p) == ALTAR_OK) {
      altar__worker_log(w, "retrying a record to %s: %s", p->topic, dr->errstr ? dr->errstr : "delivery failed");
      return;
    }
    altar_error_t e = {0};
    altar_error_set(&e, dr->err, "%s", dr->errstr ? dr->errstr : "delivery failed");
    altar__worker_set_fatal(w, ALTAR_ETRANSPORT, "producing to the log failed for good", &e);
    altar__worker_pending_free(p);
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
    if (altar__offset_tracker_finished(w->tracker, p->src_topic, p->src_partition, p->src_offset) != ALTAR_OK)
      altar__worker_send_control(w, p->src_topic, p->src_partition, ALTAR_CTL_DONE, &p->src_offset, 1);
    if (!p->forward) w->finished_jobs++;
  }
  altar__worker_pending_free(p);
}

int altar__worker_emit_status(worker_t *w, wtask_t *task, altar_status_event_kind_t kind, altar_state_t state,
                              const altar_failure_t *failure, bool with_spec, bool terminal) {
  altar_status_event_t ev = {
      .v = ALTAR_SCHEMA_VERSION,
      .event = kind,
      .task_key = task->task_key,
      .kind = task->spec->kind,
      .handle = task->handle,
      .state = state,
      .failure = ALTAR__UNCONST(failure),
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
  pending_t *p = altar__worker_pending_new(w, w->o->topics->status, task->status_key);
  if (!p) return ALTAR_ENOMEM;
  altar_error_t e = {0};
  bool reduced = false;
  int rc = altar__intake_encode_status(w->o->groups, &ev, &p->value, &reduced, &e);
  if (!rc && reduced) {
    w->stats.reduced_events++;
    altar__worker_log(w, "status event of %s sent without its spec and most labels: in full it exceeds %u bytes",
                      task->task_key, ALTAR_MAX_MESSAGE);
  }
  if (rc) {
    /* Not the message's fault (out of memory): the worker cannot go on. */
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, rc, "encoding a status event", &e);
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
      altar__worker_pending_free(p);
      return ALTAR_ENOMEM;
    }
  }
  rc = altar__worker_pending_send(w, p);
  if (rc) {
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, rc, "producing a status event", NULL);
  } else if (terminal) {
    double run_s = task->started_ms ? (double)(altar_mono_ms() - task->started_ms) / 1000.0 : -1;
    altar__worker_metrics_task_ended(&w->metrics, task->spec->kind, state == ALTAR_STATE_FAILED ? ev.failure : NULL,
                                     run_s);
  }
  return rc;
}
