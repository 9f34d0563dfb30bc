/* The worker's metrics, kept apart from the loop so it only calls update. */
#include "worker/worker_metrics.h"

#include "altar/fleet.h"

#include <stdio.h>
#include <string.h>

/* Bucket bounds of the task-duration histogram, in seconds: from a short
 * command to a day-long training run. */
static const double duration_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,    2.5,   5,
                                         10,   30,   60,  300,  900, 3600, 14400, 86400};

int altar__worker_metrics_init(altar__worker_metrics_t *wm, altar_metrics_t *reg, int64_t slots, bool kept_logs,
                               altar_error_t *err) {
  memset(wm, 0, sizeof *wm);
  if (!reg) return ALTAR_OK;
  wm->reg = reg;
  static const altar_metric_def_t defs[] = {
#define C(f, n, h) {offsetof(altar__worker_metrics_t, f), ALTAR_METRIC_COUNTER, n, h}
#define G(f, n, h)                                                                                                     \
  { offsetof(altar__worker_metrics_t, f), ALTAR_METRIC_GAUGE, n, h }
      C(consumed, "altar_worker_jobs_consumed_total", "Job messages read from the jobs topic."),
      C(submitted, "altar_worker_tasks_submitted_total", "Tasks started on the execution backend."),
      C(succeeded, "altar_worker_tasks_succeeded_total", "Tasks that ended in the succeeded state."),
      C(failed, "altar_worker_tasks_failed_total", "Tasks that failed, including those that could not start."),
      C(released, "altar_worker_tasks_released_total", "Tasks cancelled and handed back on revocation or stop."),
      C(skipped, "altar_worker_jobs_skipped_total", "Jobs skipped because an earlier life already finished them."),
      C(dead_lettered, "altar_worker_dead_lettered_total", "Poison job messages copied to the dead-letter topic."),
      C(status_events, "altar_worker_status_events_total", "Status events acknowledged by the log."),
      C(forwarded, "altar_worker_jobs_forwarded_total",
        "Jobs that waited for a slot here, forwarded to a peer with a free one."),
      C(forwarded_in, "altar_worker_jobs_forwarded_in_total", "Jobs started here that a peer had forwarded."),
      G(in_flight, "altar_worker_in_flight", "Tasks running whose terminal status is not yet sent."),
      G(slots, "altar_worker_slots", "Tasks this worker runs at most at once."),
      G(paused, "altar_worker_paused", "1 while every slot is busy (no new job is started), else 0."),
  };
  static const altar_metric_def_t kept_defs[] = {
      G(kept_dirs, "altar_worker_kept_logs_dirs", "Task output directories the backend keeps under its data root."),
      G(kept_bytes, "altar_worker_kept_logs_bytes",
        "Disk the kept task output takes: allocated blocks of its directories and files, bytes."),
      G(kept_next_dirs, "altar_worker_kept_logs_prune_next_dirs",
        "Kept task output directories the backend's next prune removes (past the age bound, or beyond a bound)."),
      G(kept_next_bytes, "altar_worker_kept_logs_prune_next_bytes",
        "Allocated bytes the backend's next prune of kept task output frees."),
      G(kept_dirs_max, "altar_worker_kept_logs_dirs_limit",
        "The bound on kept task output directories (logs_keep_count)."),
      G(kept_bytes_max, "altar_worker_kept_logs_bytes_limit",
        "The bound on kept task output, allocated bytes (logs_keep)."),
  };
#undef C
#undef G
  int rc = altar_metrics_register_table(reg, defs, sizeof defs / sizeof defs[0], wm, err);
  if (!rc && kept_logs)
    rc = altar_metrics_register_table(reg, kept_defs, sizeof kept_defs / sizeof kept_defs[0], wm, err);
  if (rc) return rc;
  altar_metric_set(wm->slots, (double)slots);
  return altar_metrics_build_info(reg, "worker", err);
}

static altar_metric_t *duration_of(altar__worker_metrics_t *wm, const char *kind) {
  if (!kind || strlen(kind) > ALTAR_METRIC_LABEL_VALUE_MAX) kind = "other";
  for (size_t i = 0; i < wm->n_kinds; i++)
    if (!strcmp(wm->kinds[i].kind, kind)) return wm->kinds[i].duration;
  if (wm->n_kinds >= ALTAR_WORKER_METRIC_KINDS_MAX && strcmp(kind, "other")) return duration_of(wm, "other");
  if (wm->n_kinds > ALTAR_WORKER_METRIC_KINDS_MAX) return NULL; /* not reached: "other" has the last place */
  altar_metric_label_t l = {"kind", kind};
  altar_error_t e = {0};
  altar_metric_t *m =
      altar_metrics_histogram(wm->reg, "altar_worker_task_duration_seconds",
                              "Run time of tasks that ended here, from submission to the backend to "
                              "their terminal state.",
                              &l, 1, duration_bounds, sizeof duration_bounds / sizeof duration_bounds[0], &e);
  snprintf(wm->kinds[wm->n_kinds].kind, sizeof wm->kinds[0].kind, "%s", kind);
  wm->kinds[wm->n_kinds++].duration = m;
  return m;
}

/* The failure reasons a metric label may carry: altar's own. */
static const char *reason_label(const char *reason) {
  static const char *const known[] = {
      ALTAR_REASON_TIMEOUT,           ALTAR_REASON_OOM_KILLED,   ALTAR_REASON_INPUT_DIGEST_MISMATCH,
      ALTAR_REASON_CONTAINER_MISSING, ALTAR_REASON_JOB_FAILED,   ALTAR_REASON_SUPERSEDED,
      ALTAR_REASON_RELEASED,          ALTAR_REASON_CANCELLED,    ALTAR_REASON_INVALID_SPEC,
      ALTAR_REASON_SUBMIT_FAILED,     "output_collection_failed"};
  if (!reason) return "other";
  if (!strncmp(reason, "exit_", 5)) return "exit_code";
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (!strcmp(reason, known[i])) return known[i];
  return "other";
}

void altar__worker_metrics_task_ended(altar__worker_metrics_t *wm, const char *kind, const altar_failure_t *failure,
                                      double run_s) {
  if (!wm->reg) return;
  if (run_s >= 0) altar_metric_observe(duration_of(wm, kind), run_s);
  if (!failure) return;
  altar_metric_label_t l = {"reason", reason_label(failure->reason)};
  altar_error_t e = {0};
  /* Registering an existing series finds it: a short lock, once per failure. */
  altar_metric_inc(altar_metrics_register(wm->reg, ALTAR_METRIC_COUNTER, "altar_worker_task_failures_total",
                                          "Tasks that failed here, by reason (exit codes as exit_code).", &l, 1, &e));
}

void altar__worker_metrics_update(altar__worker_metrics_t *wm, const altar_worker_stats_t *st, size_t in_flight,
                                  bool paused) {
  if (!wm->consumed) return;
  altar_metric_add_since(wm->consumed, st->consumed, &wm->last.consumed);
  altar_metric_add_since(wm->submitted, st->submitted, &wm->last.submitted);
  altar_metric_add_since(wm->succeeded, st->succeeded, &wm->last.succeeded);
  altar_metric_add_since(wm->failed, st->failed, &wm->last.failed);
  altar_metric_add_since(wm->released, st->released, &wm->last.released);
  altar_metric_add_since(wm->skipped, st->skipped, &wm->last.skipped);
  altar_metric_add_since(wm->dead_lettered, st->dead_lettered, &wm->last.dead_lettered);
  altar_metric_add_since(wm->status_events, st->status_events, &wm->last.status_events);
  altar_metric_add_since(wm->forwarded, st->forwarded, &wm->last.forwarded);
  altar_metric_add_since(wm->forwarded_in, st->forwarded_in, &wm->last.forwarded_in);
  altar_metric_set(wm->in_flight, (double)in_flight);
  altar_metric_set(wm->paused, paused ? 1 : 0);
}

void altar__worker_metrics_kept_logs(altar__worker_metrics_t *wm, const altar_kept_logs_t *k) {
  if (!wm->kept_dirs) return;
  altar_metric_set(wm->kept_dirs, (double)k->dirs);
  altar_metric_set(wm->kept_bytes, (double)k->bytes);
  altar_metric_set(wm->kept_next_dirs, (double)k->prune_next_dirs);
  altar_metric_set(wm->kept_next_bytes, (double)k->prune_next_bytes);
  altar_metric_set(wm->kept_dirs_max, (double)k->keep_dirs);
  altar_metric_set(wm->kept_bytes_max, (double)k->keep_bytes);
}
