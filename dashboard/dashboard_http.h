/* The web dashboard: read-only pages and their JSON twins under /api/,
 * served beside /metrics by the metrics server (altar/metrics.h).
 *
 *   GET /                      the page (HTML, CSS and JS shipped in the binary)
 *   GET /api/overview          rates, counts, consumer lag
 *   GET /api/jobs?offset&limit every job, newest first (filters: state, kind,
 *                              label=KEY=VALUE, worker)
 *   GET /api/job?id=JOB        one job's groups and shards (the same filters
 *                              give one page of its matching shards)
 *   GET /api/why?id=JOB        its shards that are not running, and why
 *   GET /api/shard?key=KEY     one shard: labels, state, why, every attempt
 *   GET /api/workers           workers from their heartbeats
 *   GET /api/dead              DLQ records and dead-lettered groups
 *   GET /api/history           the last hour in 10 s buckets: shards finished,
 *                              groups fired and dead-lettered, failures by
 *                              reason, the reconciler's lag
 *
 * With a token, every /api/ request needs "Authorization: Bearer TOKEN"
 * (the page sends the one given after '#token=' in its address). */
#ifndef ALTAR_DASHBOARD_HTTP_H
#define ALTAR_DASHBOARD_HTTP_H

#include "altar/metrics.h"
#include "dashboard/fleet_view.h"

#include <stdbool.h>

typedef struct altar_dashboard {
  altar_fleet_view_t *view;      /* borrowed */
  const char *token;             /* borrowed; NULL or "" = none */
  struct altar_history *history; /* borrowed; the last hour (reconciler/history.h) */
  /* With no reconciler in this process: the hour's counts come from the
   * reconciler's ledger (the view's snapshot), the lag from this process. */
  bool history_from_ledger;
} altar_dashboard_t;

/* The handler to give altar_metrics_serve_with, with an altar_dashboard_t as ctx. */
void altar__dashboard_handle(void *ctx, const char *path, const altar_http_request_t *rq, altar_http_reply_t *reply);

/* ALTAR_ECONFIG unless addr's host is a loopback address or a token is set:
 * the dashboard shows specs and failure details, so anything reachable from
 * elsewhere needs a token. */
int altar__dashboard_check_bind(const char *addr, const char *token, altar_error_t *err);

/* An embedded file: NULL when there is none at path. */
typedef struct altar_dashboard_asset {
  const char *path, *content_type;
  const unsigned char *data;
  size_t len;
} altar_dashboard_asset_t;
const altar_dashboard_asset_t *altar__dashboard_asset(const char *path);

#endif
