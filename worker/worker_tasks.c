/* Tasks: starting a job on the backend (or refusing it with a recorded
 * failure), polling what runs in one bulk call, and dropping tasks whose
 * terminal event the log acknowledged. */
#include "worker/worker_int.h"

#include "altar/clock.h"
#include "altar/codec.h"
#include "altar/pools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void altar__worker_task_free(wtask_t *t) {
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

size_t altar__worker_in_flight(const worker_t *w) {
  size_t k = 0;
  for (size_t i = 0; i < w->n_tasks; i++) k += !w->tasks[i]->terminal_sent;
  return k;
}

/* Drops tasks whose terminal event is acknowledged, reaping their backend
 * resources (a finished container would otherwise linger). */
void altar__worker_reap_acked(worker_t *w) {
  size_t j = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->acked) {
      altar_error_t e = {0};
      if (t->handle.external_id && *t->handle.external_id) altar_backend_cancel(w->o->backend, &t->handle, &e);
      altar__worker_task_free(t);
    } else {
      w->tasks[j++] = t;
    }
  }
  w->n_tasks = j;
}

char *altar__worker_status_key_for(worker_t *w, const altar_spec_t *spec, const altar_handle_t *h,
                                   const char *task_key) {
  const altar_group_spec_t *g = w->o->groups ? altar_group_specs_find(w->o->groups, spec->kind) : NULL;
  if (!g) return strdup(task_key);
  return altar_group_by_key(&g->group_by, h);
}

/* A job that failed before it could run (staging, submit): record it as
 * submitted and failed under a handle of its own, so the ledger has a
 * terminal outcome for it. */
void altar__worker_fail_before_run(worker_t *w, wtask_t *t, const char *reason, const char *detail,
                                   bool deterministic) {
  altar_failure_t *f = altar_failure_new(reason, detail, deterministic);
  if (!f) {
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "recording a failure", NULL);
    return;
  }
  if (altar__worker_emit_status(w, t, ALTAR_EV_SUBMITTED, ALTAR_STATE_PENDING, NULL, true, false) == ALTAR_OK &&
      altar__worker_emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
    t->state = ALTAR_STATE_FAILED;
    t->terminal_sent = true;
    w->stats.failed++;
  }
  altar_failure_free(f);
}

/* A job whose identity we can read but will not run (intake.h): a DLQ copy
 * for operators, and a failed record under a handle of its own, so the
 * ledger has its outcome and its group settles by on_failed. Only the
 * failed event's ack finishes the offset. */
static void refuse_job(worker_t *w, wtask_t *t, const altar_msg_t *m, const altar__intake_t *in) {
  char reason[sizeof in->detail + 64];
  snprintf(reason, sizeof reason, "%s: %s", in->reason, in->detail);
  altar__worker_dead_letter(w, m, reason, false);
  t->partition = m->partition;
  t->offset = m->offset;
  t->state = ALTAR_STATE_PENDING;
  memcpy(t->task_key, in->task_key, sizeof t->task_key);
  char ext[ALTAR_TASK_KEY_LEN + 16];
  snprintf(ext, sizeof ext, "refused-%s", t->task_key);
  if (tasks_push(w, t) != ALTAR_OK) {
    altar__worker_task_free(t);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "refusing a job", NULL);
    return;
  }
  if (altar_handle_init_for_spec(&t->handle, altar_backend_name(w->o->backend), ext, t->spec) ||
      !(t->status_key = altar__worker_status_key_for(w, t->spec, &t->handle, t->task_key))) {
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "refusing a job", NULL);
    return;
  }
  w->stats.refused++;
  altar__worker_log(w, "refused %s/%" PRId32 "/%" PRId64 " (%s): %s", m->topic, m->partition, m->offset, in->reason,
                    in->detail);
  altar__worker_fail_before_run(w, t, in->reason, in->detail, true);
  /* Never a backend task: nothing to reap. */
  free(t->handle.external_id);
  t->handle.external_id = strdup("");
}

/* Runs one job message already seen by the tracker (a poison one goes to
 * the DLQ, a control message is obeyed). */
void altar__worker_start_job(worker_t *w, const altar_msg_t *m) {
  int rc;
  if (!m->value || m->value_len == 0) {
    altar__worker_dead_letter(w, m, "empty message", true);
    return;
  }
  if (m->value_len > ALTAR_MAX_MESSAGE) {
    char reason[128];
    snprintf(reason, sizeof reason, "message too large: %zu bytes (limit %u)", m->value_len, ALTAR_MAX_MESSAGE);
    altar__worker_dead_letter(w, m, reason, true);
    return;
  }
  altar__intake_t in;
  altar__intake_classify(&w->intake, m, &in);
  if (in.verdict == ALTAR__INTAKE_DLQ) {
    /* Only a message that is no job is looked at twice. */
    char type[16];
    if (altar_peek_type(m->value, m->value_len, type, sizeof type) == ALTAR_OK && !strcmp(type, "control")) {
      altar__intake_clear(&in);
      altar__worker_handle_control(w, m);
      return;
    }
    altar__worker_dead_letter(w, m, in.detail, true);
    altar__intake_clear(&in);
    return;
  }
  /* The decoded spec moves into the task (a copy was a malloc per string). */
  wtask_t *t = calloc(1, sizeof *t);
  if (t && (t->spec = malloc(sizeof *t->spec))) {
    *t->spec = in.job.spec;
    memset(&in.job.spec, 0, sizeof in.job.spec);
  }
  if (!t || !t->spec || !(t->topic = strdup(m->topic))) {
    altar__worker_task_free(t);
    altar__intake_clear(&in);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
    return;
  }
  if (in.verdict == ALTAR__INTAKE_REFUSE) {
    refuse_job(w, t, m, &in);
    altar__intake_clear(&in);
    return;
  }
  memcpy(t->task_key, in.task_key, sizeof t->task_key); /* the intake computed it */
  altar__intake_clear(&in);
  const void *from;
  size_t from_len;
  if (altar_msg_header(m, ALTAR_FORWARD_FROM_HEADER, &from, &from_len) == ALTAR_OK) {
    /* Anyone may set the header: logged only when it is short and printable. */
    bool printable = from_len <= 512;
    for (size_t i = 0; printable && i < from_len; i++)
      printable = ((const char *)from)[i] >= 0x20 && ((const char *)from)[i] < 0x7f;
    w->stats.forwarded_in++;
    altar__worker_log(w, "%s/%" PRId32 "/%" PRId64 ": forwarded here from %.*s", m->topic, m->partition, m->offset,
                      printable ? (int)from_len : 3, printable ? (const char *)from : "(?)");
  }
  altar_error_t e = {0};
  t->partition = m->partition;
  t->offset = m->offset;
  t->state = ALTAR_STATE_PENDING;
  if (tasks_push(w, t) != ALTAR_OK) {
    altar__worker_task_free(t);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "accepting a job", &e);
    return;
  }
  if (altar__worker_refuse_cancelled(w, t)) return;
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
        !(t->status_key = altar__worker_status_key_for(w, t->spec, &t->handle, t->task_key))) {
      altar__worker_set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
      return;
    }
    /* `deterministic` from the shared table, so a mismatch found here
     * reads the same as one the task finds. */
    const char *reason = altar_reason_for_start_error(rc);
    altar__worker_fail_before_run(w, t, reason, e.msg, altar_reason_deterministic(reason));
    /* The handle was never a backend task: nothing to reap. */
    free(t->handle.external_id);
    t->handle.external_id = strdup("");
    return;
  }
  if (!(t->status_key = altar__worker_status_key_for(w, t->spec, &t->handle, t->task_key))) {
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "accepting a job", NULL);
    return;
  }
  w->stats.submitted++;
  t->started_ms = altar_mono_ms();
  altar__worker_task_line(w, t, "started", NULL);
  altar__worker_capacity_took(w, &t->spec->resources);
  altar__worker_emit_status(w, t, ALTAR_EV_SUBMITTED, ALTAR_STATE_PENDING, NULL, true, false);
}

wtask_t *altar__worker_task_find(worker_t *w, const char *topic, int32_t partition, int64_t offset) {
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->offset == offset && t->partition == partition && !strcmp(t->topic, topic)) return t;
  }
  return NULL;
}

/* Probes every task still running, in one bulk call, and emits what changed. */
void altar__worker_poll_tasks(worker_t *w, int partition_filter, const char *topic_filter) {
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
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "polling", NULL);
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
        if (f && altar__worker_emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
          t->terminal_sent = true;
          w->stats.failed++;
          altar__worker_task_line(w, t, "failed", f);
        }
        altar_failure_free(f);
        continue;
      }
      bool terminal = altar_state_terminal(s);
      if (altar__worker_emit_status(w, t, ALTAR_EV_STATE, s, s == ALTAR_STATE_FAILED ? st[i].failure : NULL, false,
                                    terminal) == ALTAR_OK) {
        t->state = s;
        if (terminal) {
          t->terminal_sent = true;
          if (s == ALTAR_STATE_SUCCEEDED) w->stats.succeeded++;
          else w->stats.failed++;
          altar__worker_task_line(w, t, s == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed", st[i].failure);
        }
      }
    }
  } else if (k) {
    altar__worker_log(w, "poll failed (will retry): %s", e.msg);
  }
  for (size_t i = 0; i < k; i++) altar_status_clear(&st[i]);
  free(st);
  free(hs);
  free(ts);
}
