/* Starting the web dashboard (dashboard/dashboard_http.h) on a metrics
 * server: `altar dashboard` and the reconciler's metrics address share it. */
#ifndef ALTAR_CLI_DASHBOARD_CLI_H
#define ALTAR_CLI_DASHBOARD_CLI_H

#include "altar/config.h"
#include "altar/groups.h"
#include "altar/metrics.h"
#include "dashboard/dashboard_http.h"

#include <stdbool.h>

typedef struct altar_cli_dashboard {
  altar_fleet_view_t *view;
  altar_dashboard_t dash;
  char *token;
  altar_metrics_t *metrics; /* the server's registry: register metrics here */
  altar_metrics_server_t *server;
  struct altar_history *history; /* the charts' hour: whoever runs here records into it */
} altar_cli_dashboard_t;

/* Serves /metrics and the dashboard on addr. The token comes from
 * token_file (its first line) or else ALTAR_DASHBOARD_TOKEN; without one a
 * non-loopback addr is refused. history_from_ledger: no reconciler runs in
 * this process, so the charts' counts come from the reconciler's ledger
 * (reconciler/history_store.h). 0, or -1 after printing the error (who
 * first). Stop with altar_cli_dashboard_stop. */
int altar_cli_dashboard_start(const char *who, const altar_config_t *cfg, const char *addr, const char *token_file,
                              bool quiet, bool history_from_ledger, altar_cli_dashboard_t *d);
void altar_cli_dashboard_stop(altar_cli_dashboard_t *d);

/* `altar status JOB --outputs`: each fired group's output URIs. */
int altar_cli_print_outputs(const altar_config_t *cfg, const altar_group_specs_t *groups, const char *job,
                            size_t min_fired, bool json);

/* `altar status JOB`: the fleet view's "why" page of job (each shard not
 * running, with its reason), read once the view has caught up with the
 * log. 0 with *pout set (caller json_decref's), or -1 with err set. */
int altar_cli_job_why(const altar_config_t *cfg, const char *job, json_t **pout, altar_error_t *err);

#endif
