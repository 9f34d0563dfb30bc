/* The worker's Prometheus metrics: registered once per run, refreshed from
 * altar_worker_stats_t on the worker's thread (deltas, so a registry shared
 * by several runs keeps counting up). */
#ifndef ALTAR_WORKER_METRICS_H
#define ALTAR_WORKER_METRICS_H

#include "altar/backend.h"
#include "altar/metrics.h"
#include "altar/task.h"
#include "worker/worker.h"

#include <stdbool.h>
#include <stddef.h>

/* Kinds come from the log: past this many distinct ones, "other". */
#define ALTAR_WORKER_METRIC_KINDS_MAX 32

typedef struct altar__worker_metrics {
  altar_metrics_t *reg;
  altar_metric_t *consumed, *submitted, *succeeded, *failed, *released, *skipped, *dead_lettered, *status_events;
  altar_metric_t *forwarded, *forwarded_in;
  altar_metric_t *in_flight, *slots, *paused;
  /* The backend's kept task output (registered when it keeps some: ALTAR_BACKEND_CAP_LOGS). */
  altar_metric_t *kept_dirs, *kept_bytes, *kept_next_dirs, *kept_next_bytes, *kept_dirs_max, *kept_bytes_max;
  altar_worker_stats_t last; /* what the counters already hold */
  /* Task durations per kind, and failures per reason (lazily registered). */
  struct {
    char kind[ALTAR_METRIC_LABEL_VALUE_MAX + 1];
    altar_metric_t *duration;
  } kinds[ALTAR_WORKER_METRIC_KINDS_MAX + 1]; /* + "other" */
  size_t n_kinds;
} altar__worker_metrics_t;

/* Registers the worker's metrics in reg (NULL: every update is a no-op),
 * with the kept-output gauges when kept_logs (its backend keeps task
 * output). On error the metrics stay off and err says why; the worker runs
 * anyway. */
int altar__worker_metrics_init(altar__worker_metrics_t *wm, altar_metrics_t *reg, int64_t slots, bool kept_logs,
                               altar_error_t *err);
/* A task's terminal outcome was sent: its run time (seconds since it was
 * submitted to the backend; negative: it never ran) under its kind, and a
 * failure under its reason, reduced to a bounded set (exit codes are
 * "exit_code", reasons altar does not know "other"). */
void altar__worker_metrics_task_ended(altar__worker_metrics_t *wm, const char *kind, const altar_failure_t *failure,
                                      double run_s);
/* Brings the metrics up to date with st and the current gauges. */
void altar__worker_metrics_update(altar__worker_metrics_t *wm, const altar_worker_stats_t *st, size_t in_flight,
                                  bool paused);

/* The kept-output gauges from what the backend answered (a no-op when
 * they were not registered). */
void altar__worker_metrics_kept_logs(altar__worker_metrics_t *wm, const altar_kept_logs_t *k);

#endif
