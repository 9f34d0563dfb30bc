/* The CLI side of metrics: registry + server from the metrics.addr setting. */
#include "metrics_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int altar_cli_metrics_start(const char *who, const char *addr, bool quiet, altar_metrics_t **preg,
                            altar_metrics_server_t **psrv) {
  return altar_cli_metrics_start_with(who, addr, quiet, NULL, NULL, preg, psrv);
}

int altar_cli_metrics_start_with(const char *who, const char *addr, bool quiet, altar_http_handler_fn handler,
                                 void *ctx, altar_metrics_t **preg, altar_metrics_server_t **psrv) {
  *preg = NULL;
  *psrv = NULL;
  if (!addr) return 0;
  altar_error_t err = {0};
  altar_metrics_t *reg = altar_metrics_new();
  if (!reg) {
    fprintf(stderr, "%s: metrics: out of memory\n", who);
    return -1;
  }
  altar_metrics_server_t *srv = altar_metrics_serve_with(reg, addr, handler, ctx, &err);
  if (!srv) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    altar_metrics_free(reg);
    return -1;
  }
  if (!quiet) {
    /* With port 0 the kernel picked one: show the real one. */
    const char *colon = strrchr(addr, ':');
    int hostlen = colon ? (int)(colon - addr) : (int)strlen(addr);
    fprintf(stderr, "%s: serving metrics on http://%.*s:%d/metrics\n", who, hostlen, addr,
            altar_metrics_server_port(srv));
    if (handler)
      fprintf(stderr, "%s: serving the dashboard on http://%.*s:%d/\n", who, hostlen, addr,
              altar_metrics_server_port(srv));
  }
  *preg = reg;
  *psrv = srv;
  return 0;
}

void altar_cli_metrics_stop(altar_metrics_t *reg, altar_metrics_server_t *srv) {
  altar_metrics_stop(srv);
  altar_metrics_free(reg);
}
