/* The CLI side of metrics: registry + server from the metrics.addr setting. */
#include "metrics_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_METRICS_RANGE_MAX 1000 /* ports a range may span */

int altar_cli_metrics_start(const char *who, const char *addr, bool quiet, altar_metrics_t **preg,
                            altar_metrics_server_t **psrv) {
  return altar_cli_metrics_start_as(who, "metrics.addr", addr, quiet, preg, psrv);
}

/* "host:LOW-HIGH" into its host part and the range; false for anything else. */
static bool port_range(const char *addr, size_t *phostlen, long *plow, long *phigh) {
  const char *colon = strrchr(addr, ':');
  if (!colon || !strchr(colon, '-')) return false;
  char *end;
  long lo = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '-') return false;
  const char *h = end + 1;
  long hi = strtol(h, &end, 10);
  if (end == h || *end) return false;
  *phostlen = (size_t)(colon - addr);
  *plow = lo;
  *phigh = hi;
  return true;
}

static void print_error(const char *who, const char *key, const char *msg) {
  /* The server names metrics.addr; say the setting that was really read. */
  if (strcmp(key, "metrics.addr") && !strncmp(msg, "metrics.addr", 12))
    fprintf(stderr, "%s: %s%s\n", who, key, msg + 12);
  else fprintf(stderr, "%s: %s\n", who, msg);
}

int altar_cli_metrics_start_as(const char *who, const char *key, const char *addr, bool quiet, altar_metrics_t **preg,
                               altar_metrics_server_t **psrv) {
  *preg = NULL;
  *psrv = NULL;
  if (!addr) return 0;
  size_t hostlen;
  long lo, hi;
  if (!port_range(addr, &hostlen, &lo, &hi))
    return altar_cli_metrics_start_with_key(who, key, addr, quiet, NULL, NULL, preg, psrv);
  if (lo < 1 || hi > 65535 || lo > hi || hi - lo >= CLI_METRICS_RANGE_MAX) {
    fprintf(stderr, "%s: %s '%s': a port range is LOW-HIGH within [1, 65535], at most %d ports\n", who, key, addr,
            CLI_METRICS_RANGE_MAX);
    return -1;
  }
  /* Several processes from one file: each takes the first free port. */
  altar_metrics_t *reg = altar_metrics_new();
  if (!reg) {
    fprintf(stderr, "%s: metrics: out of memory\n", who);
    return -1;
  }
  altar_error_t err = {0};
  for (long port = lo; port <= hi; port++) {
    char one[320];
    snprintf(one, sizeof one, "%.*s:%ld", (int)hostlen, addr, port);
    altar_error_t e = {0};
    altar_metrics_server_t *srv = altar_metrics_serve_with(reg, one, NULL, NULL, &e);
    if (srv) {
      if (!quiet) fprintf(stderr, "%s: serving metrics on http://%s/metrics\n", who, one);
      *preg = reg;
      *psrv = srv;
      return 0;
    }
    err = e;
    if (e.code != ALTAR_EIO) break; /* malformed: every port would fail alike */
  }
  if (err.code == ALTAR_EIO)
    fprintf(stderr, "%s: %s '%s': no port of the range is free (the last: %s)\n", who, key, addr, err.msg);
  else print_error(who, key, err.msg);
  altar_metrics_free(reg);
  return -1;
}

int altar_cli_metrics_start_with(const char *who, const char *addr, bool quiet, altar_http_handler_fn handler,
                                 void *ctx, altar_metrics_t **preg, altar_metrics_server_t **psrv) {
  return altar_cli_metrics_start_with_key(who, "metrics.addr", addr, quiet, handler, ctx, preg, psrv);
}

int altar_cli_metrics_start_with_key(const char *who, const char *key, const char *addr, bool quiet,
                                     altar_http_handler_fn handler, void *ctx, altar_metrics_t **preg,
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
  altar_metrics_server_t *srv = altar_metrics_serve_with(reg, addr, handler, ctx, &err);
  if (!srv) {
    print_error(who, key, err.msg);
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
