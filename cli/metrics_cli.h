/* Starting the Prometheus endpoint for a long-running subcommand. */
#ifndef ALTAR_CLI_METRICS_CLI_H
#define ALTAR_CLI_METRICS_CLI_H

#include "altar/metrics.h"

#include <stdbool.h>

/* When addr is non-NULL: a new registry and a server on addr answering
 * GET /metrics; a line on stderr says where unless quiet. With addr NULL
 * both outputs are NULL and nothing starts. Returns 0, or -1 after printing
 * the error (prefixed with who). Free with altar_cli_metrics_stop. */
int altar_cli_metrics_start(const char *who, const char *addr, bool quiet, altar_metrics_t **preg,
                            altar_metrics_server_t **psrv);
/* As altar_cli_metrics_start, with handler answering every path but
 * /metrics (the dashboard); addr is required. */
int altar_cli_metrics_start_with(const char *who, const char *addr, bool quiet, altar_http_handler_fn handler,
                                 void *ctx, altar_metrics_t **preg, altar_metrics_server_t **psrv);
/* As altar_cli_metrics_start, with key the setting addr came from (named in
 * errors), and addr either HOST:PORT or HOST:LOW-HIGH: then the first free
 * port of the range, so several processes started from one file (workers on
 * one host) each get their own. */
int altar_cli_metrics_start_as(const char *who, const char *key, const char *addr, bool quiet, altar_metrics_t **preg,
                               altar_metrics_server_t **psrv);
/* As altar_cli_metrics_start_with, naming key in errors. */
int altar_cli_metrics_start_with_key(const char *who, const char *key, const char *addr, bool quiet,
                                     altar_http_handler_fn handler, void *ctx, altar_metrics_t **preg,
                                     altar_metrics_server_t **psrv);
/* Stops the server, then frees the registry. NULLs are fine. */
void altar_cli_metrics_stop(altar_metrics_t *reg, altar_metrics_server_t *srv);

#endif
