/* The worker's metrics, kept apart from the loop so it only calls update. */
#include "worker/worker_metrics.h"

#include <string.h>

int altar__worker_metrics_init(altar__worker_metrics_t *wm, altar_metrics_t *reg, int64_t slots, altar_error_t *err) {
  memset(wm, 0, sizeof *wm);
  if (!reg) return ALTAR_OK;
  static const altar_metric_def_t defs[] = {
#define C(f, n, h) {offsetof(altar__worker_metrics_t, f), ALTAR_METRIC_COUNTER, n, h}
#define G(f, n, h) {offsetof(altar__worker_metrics_t, f), ALTAR_METRIC_GAUGE, n, h}
      C(consumed, "altar_worker_jobs_consumed_total", "Job messages read from the jobs topic."),
      C(submitted, "altar_worker_tasks_submitted_total", "Tasks started on the execution backend."),
      C(succeeded, "altar_worker_tasks_succeeded_total", "Tasks that ended in the succeeded state."),
      C(failed, "altar_worker_tasks_failed_total", "Tasks that failed, including those that could not start."),
      C(released, "altar_worker_tasks_released_total", "Tasks cancelled and handed back on revocation or stop."),
      C(skipped, "altar_worker_jobs_skipped_total", "Jobs skipped because an earlier life already finished them."),
      C(dead_lettered, "altar_worker_dead_lettered_total", "Poison job messages copied to the dead-letter topic."),
      C(status_events, "altar_worker_status_events_total", "Status events acknowledged by the log."),
      C(forwarded, "altar_worker_jobs_forwarded_total", "Jobs that waited for a slot here, forwarded to a peer with a free one."),
      C(forwarded_in, "altar_worker_jobs_forwarded_in_total", "Jobs started here that a peer had forwarded."),
      G(in_flight, "altar_worker_in_flight", "Tasks running whose terminal status is not yet sent."),
      G(slots, "altar_worker_slots", "Tasks this worker runs at most at once."),
      G(paused, "altar_worker_paused", "1 while every slot is busy (no new job is started), else 0."),
#undef C
#undef G
  };
  int rc = altar_metrics_register_table(reg, defs, sizeof defs / sizeof defs[0], wm, err);
  if (rc) return rc;
  altar_metric_set(wm->slots, (double)slots);
  return ALTAR_OK;
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
