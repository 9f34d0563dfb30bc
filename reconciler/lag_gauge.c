/* The reconciler's lag gauges (reconciler/lag_gauge.h). */
#include "reconciler/lag_gauge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAG_NAME "altar_reconciler_lag_events"
#define LAG_HELP                                                                                                       \
  "Status events on the log the reconciler has not applied yet: the partition's end offset minus the "                 \
  "ledger's input offset."

int altar__lag_gauge_init(altar__lag_gauge_t *lg, altar_metrics_t *reg, altar_error_t *err) {
  memset(lg, 0, sizeof *lg);
  lg->last_all = -1;
  if (!reg) return ALTAR_OK;
  lg->all = altar_metrics_gauge(reg, LAG_NAME "_all_partitions",
                                "Status events the reconciler has not applied yet, over every status partition it "
                                "reads.",
                                err);
  if (!lg->all) return err && err->code ? err->code : ALTAR_ENOMEM;
  lg->reg = reg;
  return ALTAR_OK;
}

bool altar__lag_gauge_due(altar__lag_gauge_t *lg, int64_t now_ms) {
  if (!lg->reg || now_ms < lg->next_due_ms) return false;
  lg->next_due_ms = now_ms + ALTAR_RECONCILER_LAG_INTERVAL_MS;
  return true;
}

static altar_metric_t *series_for(altar__lag_gauge_t *lg, int32_t partition) {
  for (size_t i = 0; i < lg->n; i++)
    if (lg->series[i].partition == partition) return lg->series[i].m;
  if (lg->n >= ALTAR_RECONCILER_LAG_SERIES_MAX) return NULL;
  if (lg->n == lg->cap) {
    size_t cap = lg->cap ? lg->cap * 2 : 32;
    altar__lag_series_t *ns = realloc(lg->series, cap * sizeof *ns);
    if (!ns) return NULL;
    lg->series = ns;
    lg->cap = cap;
  }
  char pv[16];
  snprintf(pv, sizeof pv, "%d", (int)partition);
  altar_metric_label_t label = {"partition", pv};
  altar_error_t e = {0};
  altar_metric_t *m = altar_metrics_register(lg->reg, ALTAR_METRIC_GAUGE, LAG_NAME, LAG_HELP, &label, 1, &e);
  if (!m) return NULL;
  lg->series[lg->n++] = (altar__lag_series_t){partition, m};
  return m;
}

int64_t altar__lag_gauge_set(altar__lag_gauge_t *lg, const int32_t *parts, const int64_t *lags, size_t n) {
  int64_t all = 0;
  for (size_t i = 0; i < n; i++) all += lags[i] > 0 ? lags[i] : 0;
  if (!lg->reg) return all;
  /* A partition no longer read here says 0, not its last value. */
  for (size_t i = 0; i < lg->n; i++) {
    bool present = false;
    for (size_t j = 0; j < n && !present; j++) present = parts[j] == lg->series[i].partition;
    if (!present) altar_metric_set(lg->series[i].m, 0);
  }
  for (size_t i = 0; i < n; i++) altar_metric_set(series_for(lg, parts[i]), (double)(lags[i] > 0 ? lags[i] : 0));
  altar_metric_set(lg->all, (double)all);
  lg->last_all = all;
  return all;
}

void altar__lag_gauge_free(altar__lag_gauge_t *lg) {
  free(lg->series);
  memset(lg, 0, sizeof *lg);
  lg->last_all = -1;
}
