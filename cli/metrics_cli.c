/* The CLI side of metrics: registry + server from the metrics.addr setting. */
#include "metrics_cli.h"

#include <stdbool.h>
#include <stdio.h>

int altar_cli_metrics_start(const char *who, const char *addr, bool quiet, altar_metrics_t **preg,
                            altar_metrics_server_t **psrv) {
  *preg = NULL;
  *psrv = NULL;
  if (!addr) return 0;
  altar_error_t err = {0};
  altar_metrics_t *reg = altar_metrics_new();
  if (!reg) {
    fprintf(stderr, "%s: metrics: out of memory\n", who);
    return -1;
  }
  altar_metrics_server_t *srv = altar_metrics_serve(reg, addr, &err);
  if (!srv) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    altar_metrics_free(reg);
    return -1;
  }
  if (!quiet) fprintf(stderr, "%s: serving metrics on http://%s/metrics\n", who, addr);
  *preg = reg;
  *psrv = srv;
  return 0;
}

void altar_cli_metrics_stop(altar_metrics_t *reg, altar_metrics_server_t *srv) {
  altar_metrics_stop(srv);
  altar_metrics_free(reg);
}
