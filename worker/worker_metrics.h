/* The worker's Prometheus metrics: registered once per run, refreshed from
 * altar_worker_stats_t on the worker's thread (deltas, so a registry shared
 * by several runs keeps counting up). */
#ifndef ALTAR_WORKER_METRICS_H
#define ALTAR_WORKER_METRICS_H

#include "altar/metrics.h"
#include "worker/worker.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct altar__worker_metrics {
  altar_metric_t *consumed, *submitted, *succeeded, *failed, *released, *skipped, *dead_lettered, *status_events;
  altar_metric_t *forwarded, *forwarded_in;
  altar_metric_t *in_flight, *slots, *paused;
  altar_worker_stats_t last; /* what the counters already hold */
} altar__worker_metrics_t;

/* Registers the worker's metrics in reg (NULL: every update is a no-op).
 * On error the metrics stay off and err says why; the worker runs anyway. */
int altar__worker_metrics_init(altar__worker_metrics_t *wm, altar_metrics_t *reg, int64_t slots, altar_error_t *err);
/* Brings the metrics up to date with st and the current gauges. */
void altar__worker_metrics_update(altar__worker_metrics_t *wm, const altar_worker_stats_t *st, size_t in_flight,
                                  bool paused);

#endif
