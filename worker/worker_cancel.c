/* Cancels (`altar cancel`): noted once, stopping what runs here, refusing
 * what has not started, and restored from a partition's committed metadata. */
#include "worker/worker_int.h"

#include "worker/backend_caps.h"
#include "worker/cancel_meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool task_cancelled(const worker_t *w, const wtask_t *t) {
  if (!w->cancels.n || !t->spec) return false;
  const char *job = altar_strmap_get(&t->spec->labels, "job_id");
  return altar__cancel_set_matches(&w->cancels, job, t->status_key);
}

/* Notes a cancel and stops every task of it that runs here: the backend
 * cancels it, and its terminal event (failed, "cancelled") finishes its
 * offset like any end. Held tasks too: their holder is the one running them. */
void altar__worker_apply_cancel(worker_t *w, const altar_control_msg_t *c) {
  bool added = false;
  if (!c->job_id || altar__cancel_set_add(&w->cancels, c->job_id, c->group_key, &added)) {
    if (c->job_id) altar__worker_set_fatal(w, ALTAR_ENOMEM, "noting a cancel", NULL);
    return;
  }
  if (!added) return; /* seen already (another partition's copy): idempotent */
  char lacks[400];
  if (!altar__worker_can_stop(w->o->backend, c->job_id, lacks, sizeof lacks)) altar__worker_log(w, "%s", lacks);
  size_t stopped = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->terminal_sent || !task_cancelled(w, t)) continue;
    altar_error_t e = {0};
    if (altar_backend_cancel(w->o->backend, &t->handle, &e) != ALTAR_OK)
      altar__worker_log(w, "cancelling %s: %s (reported cancelled anyway)", t->task_key, e.msg);
    altar_failure_t *f = altar_failure_new(ALTAR_REASON_CANCELLED, "cancelled by altar cancel", true);
    if (!f) {
      altar__worker_set_fatal(w, ALTAR_ENOMEM, "cancelling", NULL);
      return;
    }
    if (altar__worker_emit_status(w, t, ALTAR_EV_STATE, ALTAR_STATE_FAILED, f, false, true) == ALTAR_OK) {
      t->state = ALTAR_STATE_FAILED;
      t->terminal_sent = true;
      w->stats.failed++;
      stopped++;
    }
    altar_failure_free(f);
  }
  altar__worker_log(w, "cancel of job %s%s%s: %zu running task(s) stopped", c->job_id, c->group_key ? " group " : "",
                    c->group_key ? c->group_key : "", stopped);
}

/* A job of a cancelled job or group: never started, recorded as failed
 * "cancelled" under a handle of its own. false when it is not cancelled. */
bool altar__worker_refuse_cancelled(worker_t *w, wtask_t *t) {
  if (!w->cancels.n) return false;
  const char *job = altar_strmap_get(&t->spec->labels, "job_id");
  if (!job) return false;
  char ext[ALTAR_TASK_KEY_LEN + 16];
  snprintf(ext, sizeof ext, "cancelled-%s", t->task_key);
  if (altar_handle_init_for_spec(&t->handle, altar_backend_name(w->o->backend), ext, t->spec) ||
      !(t->status_key = altar__worker_status_key_for(w, t->spec, &t->handle, t->task_key))) {
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "refusing a cancelled job", NULL);
    return true;
  }
  if (!altar__cancel_set_matches(&w->cancels, job, t->status_key)) {
    altar_handle_clear(&t->handle);
    free(t->status_key);
    t->status_key = NULL;
    return false;
  }
  altar__worker_fail_before_run(w, t, ALTAR_REASON_CANCELLED, "its job was cancelled (altar cancel) before it started",
                                true);
  free(t->handle.external_id); /* never a backend task: nothing to reap */
  t->handle.external_id = strdup("");
  return true;
}

/* Cancels the partition's previous owner had obeyed (its commit carried
 * them): obeyed here too, as if read again. */
void altar__worker_restore_cancels(worker_t *w, const char *topic, int32_t partition, const char *list) {
  altar__cancel_set_t got = {0};
  size_t added = 0, bad = 0;
  if (altar__cancel_meta_parse(list, &got, &added, &bad) != ALTAR_OK) {
    altar__cancel_set_free(&got);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "restoring cancels", NULL);
    return;
  }
  if (bad)
    altar__worker_log(w, "%s/%" PRId32 ": %zu cancel(s) in the committed metadata do not decode; ignored", topic,
                      partition, bad);
  size_t before = w->cancels.n;
  for (size_t i = 0; i < got.n && !w->fatal; i++) {
    altar_control_msg_t c = {
        .event = ALTAR_CTL_CANCEL, .partition = partition, .job_id = got.job_ids[i], .group_key = got.group_keys[i]};
    altar__worker_apply_cancel(w, &c);
  }
  if (w->cancels.n > before)
    altar__worker_log(w, "%s/%" PRId32 ": %zu cancel(s) carried in its commit restored", topic, partition,
                      w->cancels.n - before);
  altar__cancel_set_free(&got);
}
