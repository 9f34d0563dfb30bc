/* The CLI side of the dashboard: view, token and server from the config. */
#include "dashboard_cli.h"

#include "altar/file_read.h"
#include "metrics_cli.h"
#include "reconciler/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 4096

static char *read_token(const char *who, const char *path) {
  if (!path) {
    const char *env = getenv("ALTAR_DASHBOARD_TOKEN");
    return strdup(env ? env : "");
  }
  char what[64 + 4096];
  snprintf(what, sizeof what, "--token-file %s", path);
  altar_error_t err = {0};
  char *buf = altar_file_read(path, what, TOKEN_MAX, NULL, &err);
  if (!buf) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    return NULL;
  }
  buf[strcspn(buf, "\r\n")] = 0;
  if (!*buf) {
    fprintf(stderr, "%s: --token-file %s: empty\n", who, path);
    free(buf);
    return NULL;
  }
  return buf;
}

int altar_cli_dashboard_start(const char *who, const altar_config_t *cfg, const char *addr, const char *token_file,
                              bool quiet, bool history_from_ledger, altar_cli_dashboard_t *d) {
  memset(d, 0, sizeof *d);
  altar_error_t err = {0};
  d->token = read_token(who, token_file);
  if (!d->token) return -1;
  if (altar__dashboard_check_bind(addr, d->token, &err)) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    altar_cli_dashboard_stop(d);
    return -1;
  }
  d->view = altar__fleet_view_new(cfg, &err);
  if (!d->view) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    altar_cli_dashboard_stop(d);
    return -1;
  }
  /* A server's pages never wait for a read of the ledger (10^5 shards take
   * most of a second): a thread of the view's keeps its snapshot fresh. */
  if (altar__fleet_view_start_reader(d->view, &err)) {
    fprintf(stderr, "%s: %s\n", who, err.msg);
    altar_cli_dashboard_stop(d);
    return -1;
  }
  d->history = altar_history_new();
  if (!d->history) {
    fprintf(stderr, "%s: out of memory\n", who);
    altar_cli_dashboard_stop(d);
    return -1;
  }
  d->dash = (altar_dashboard_t){
      .view = d->view, .token = d->token, .history = d->history, .history_from_ledger = history_from_ledger};
  if (altar_cli_metrics_start_with(who, addr, quiet, altar__dashboard_handle, &d->dash, &d->metrics, &d->server)) {
    altar_cli_dashboard_stop(d);
    return -1;
  }
  return 0;
}

void altar_cli_dashboard_stop(altar_cli_dashboard_t *d) {
  altar_cli_metrics_stop(d->metrics, d->server); /* the server first: it calls into the view */
  altar__fleet_view_free(d->view);
  altar_history_free(d->history);
  free(d->token);
  memset(d, 0, sizeof *d);
}
