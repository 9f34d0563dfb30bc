/* The reconciler's lag as Prometheus gauges: per status partition, the log's
 * end offset minus the offset the ledger stands at (the events not applied
 * yet), and their sum:
 *   altar_reconciler_lag_events{partition="N"}
 *   altar_reconciler_lag_events_all_partitions
 * The daemon sets them from its own positions; `altar dashboard` from the
 * positions stored in the ledger (what `altar log offsets` prints). Either
 * polls the end offsets at most every ALTAR_RECONCILER_LAG_INTERVAL_MS,
 * never while applying. One thread updates a gauge set; scrapes read it
 * concurrently (altar/metrics.h). */
#ifndef ALTAR_RECONCILER_LAG_GAUGE_H
#define ALTAR_RECONCILER_LAG_GAUGE_H

#include "altar/metrics.h"

#include <stddef.h>
#include <stdint.h>

#define ALTAR_RECONCILER_LAG_INTERVAL_MS 2000
/* Partitions with a series of their own; beyond them only the sum counts
 * them (bounded cardinality). */
#define ALTAR_RECONCILER_LAG_SERIES_MAX 1024

typedef struct altar__lag_series {
  int32_t partition;
  altar_metric_t *m;
} altar__lag_series_t;

typedef struct altar__lag_gauge {
  altar_metrics_t *reg; /* borrowed; NULL = every call is a no-op */
  altar_metric_t *all;
  altar__lag_series_t *series;
  size_t n, cap;
  int64_t next_due_ms; /* altar_mono_ms() of the next poll */
  int64_t last_all;    /* the sum last set; -1 = never set */
} altar__lag_gauge_t;

/* Registers the sum's series in reg (NULL: gauges off). 0 or an error (the
 * gauges stay off). */
int altar__lag_gauge_init(altar__lag_gauge_t *lg, altar_metrics_t *reg, altar_error_t *err);
/* True when a poll is due at now_ms (and then schedules the next one). */
bool altar__lag_gauge_due(altar__lag_gauge_t *lg, int64_t now_ms);
/* Sets the gauges: partition parts[i] lags lags[i] events (< 0 is taken as
 * 0); partitions set before but missing now (moved to another reconciler)
 * go to 0. Returns the sum. */
int64_t altar__lag_gauge_set(altar__lag_gauge_t *lg, const int32_t *parts, const int64_t *lags, size_t n);
void altar__lag_gauge_free(altar__lag_gauge_t *lg);

#endif
