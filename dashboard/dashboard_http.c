/* Routes of the dashboard: embedded assets and the /api/ JSON pages. */
#include "dashboard/dashboard_http.h"

#include "altar/clock.h"
#include "reconciler/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char json_ctype[] = "application/json";

static void reply_text(altar_http_reply_t *out, unsigned status, const char *msg) {
  out->status = status;
  out->content_type = "text/plain; charset=utf-8";
  altar_buf_append_str(&out->body, msg);
  altar_buf_append_str(&out->body, "\n");
}

static void reply_error(altar_http_reply_t *out, unsigned status, const char *msg) {
  out->status = status;
  out->content_type = json_ctype;
  json_t *o = json_pack("{s:s}", "error", msg);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  altar_buf_append_str(&out->body, text ? text : "{\"error\":\"out of memory\"}");
  free(text);
  json_decref(o);
}

/* Compares without stopping at the first difference. */
static bool same_secret(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  unsigned char d = la != lb;
  for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
  return d == 0;
}

/* A non-negative integer argument; false (and an error reply) when malformed. */
static bool int_arg(const altar_http_request_t *rq, const char *name, int64_t *pv, altar_http_reply_t *out) {
  const char *s = altar_http_request_get(rq, false, name);
  *pv = 0;
  if (!s) return true;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1000000000) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s: expected an integer in [0, 1000000000]", name);
    reply_error(out, 400, msg);
    return false;
  }
  *pv = v;
  return true;
}

void altar__dashboard_handle(void *ctx, const char *path, const altar_http_request_t *rq, altar_http_reply_t *out) {
  altar_dashboard_t *d = ctx;
  if (strncmp(path, "/api/", 5) != 0) {
    const altar_dashboard_asset_t *a = altar__dashboard_asset(!strcmp(path, "/") ? "/index.html" : path);
    if (!a) return reply_text(out, 404, "not found; try / or /metrics");
    out->content_type = a->content_type;
    altar_buf_append(&out->body, a->data, a->len);
    return;
  }
  if (d->token && *d->token) {
    const char *auth = altar_http_request_get(rq, true, "Authorization");
    if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !same_secret(auth + 7, d->token)) {
      reply_error(out, 401, "a bearer token is required (Authorization: Bearer TOKEN)");
      return;
    }
  }
  altar_fleet_query_t q = {.job = altar_http_request_get(rq, false, "id"),
                           .key = altar_http_request_get(rq, false, "key"),
                           .state = altar_http_request_get(rq, false, "state"),
                           .kind = altar_http_request_get(rq, false, "kind"),
                           .label = altar_http_request_get(rq, false, "label"),
                           .worker = altar_http_request_get(rq, false, "worker")};
  if (!int_arg(rq, "offset", &q.offset, out) || !int_arg(rq, "limit", &q.limit, out)) return;
  json_t *o = NULL;
  altar_error_t err = {0};
  int rc = ALTAR_OK;
  if (!strcmp(path, "/api/history")) { /* memory of its own, fed from the ledger when no reconciler is here */
    if (d->history && d->history_from_ledger) altar__fleet_view_history_into(d->view, d->history);
    o = d->history ? altar_history_json(d->history, altar_wall_s()) : NULL;
  } else rc = altar__fleet_view_render(d->view, path + 5, &q, &o, &err);
  if (!rc && !o) rc = altar_error_set(&err, d->history ? ALTAR_ENOMEM : ALTAR_ENOTFOUND, "no history kept here");
  if (rc) {
    reply_error(out, rc == ALTAR_ENOTFOUND ? 404 : rc == ALTAR_EINVAL ? 400 : 500, err.msg);
    return;
  }
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!text) {
    reply_error(out, 500, "out of memory");
    return;
  }
  out->content_type = json_ctype;
  altar_buf_append_str(&out->body, text);
  free(text);
}

int altar__dashboard_check_bind(const char *addr, const char *token, altar_error_t *err) {
  if (token && *token) return ALTAR_OK;
  static const char *const loopback[] = {"127.", "[::1]:", "localhost:"};
  for (size_t i = 0; addr && i < sizeof loopback / sizeof loopback[0]; i++)
    if (!strncmp(addr, loopback[i], strlen(loopback[i]))) return ALTAR_OK;
  return altar_error_set(err, ALTAR_ECONFIG,
                         "dashboard on '%s': not a loopback address, so a token is required (--token-file FILE "
                         "or ALTAR_DASHBOARD_TOKEN)",
                         addr ? addr : "");
}
