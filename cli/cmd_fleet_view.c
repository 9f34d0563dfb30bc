/* altar jobs, altar workers, altar dashboard: the fleet view (dashboard/
 * fleet_view.h) printed once, or served as the web dashboard. The same JSON
 * the dashboard's /api/ pages answer is what --json prints. */
#include "cli.h"
#include "dashboard_cli.h"
#include "stages.h"

/* How long status --outputs waits for the view to catch up with the topics. */
#define OUTPUTS_WAIT_S 10
#include "fleet_common.h"
#include "metrics_cli.h"

#include "altar/clock.h"
#include "reconciler/history.h"
#include "reconciler/lag_gauge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DASHBOARD_DEFAULT_ADDR "127.0.0.1:9465"

static void usage_jobs(FILE *out) {
  fprintf(out,
          "usage: altar jobs [--config FILE] [options] [--json] [--offset N] [--limit N]\n\n"
          "Lists every job, newest first: submit time, shards by state (from the\n"
          "ledger, read-only), groups fired / dead-lettered / open, and the outputs of\n"
          "its fired groups. --json prints the dashboard's /api/jobs.\n\noptions:\n%s",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_LEDGER));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static void usage_workers(FILE *out) {
  fprintf(out,
          "usage: altar workers [--config FILE] [options] [--json] [--all]\n\n"
          "Lists workers from their heartbeats on the fleet topic: host, backend,\n"
          "pools, slots, what each runs and for how long. A worker whose heartbeat\n"
          "stopped is marked silent; one that said goodbye is gone (shown with --all).\n"
          "--json prints the dashboard's /api/workers.\n\noptions:\n%s",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_LEDGER));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static void usage_dashboard(FILE *out) {
  fprintf(out,
          "usage: altar dashboard [--config FILE] [options] [--addr HOST:PORT] [--token-file FILE]\n\n"
          "Serves the read-only web dashboard (and its JSON under /api/) beside a\n"
          "running fleet; the reconciler serves the same on its metrics address.\n"
          "--addr defaults to " DASHBOARD_DEFAULT_ADDR ". Any address that is not loopback\n"
          "needs a token (--token-file or ALTAR_DASHBOARD_TOKEN): /api/ then asks for\n"
          "'Authorization: Bearer TOKEN'; open the page as http://HOST:PORT/#token=TOKEN.\n\noptions:\n%s",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_LEDGER));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

/* Parses --json, --offset, --limit, --all (and, for the dashboard, --addr
 * and --token-file) after the common flags. -1 after printing the error. */
typedef struct args {
  bool json, all;
  altar_fleet_query_t q;
  const char *addr, *token_file;
} args_t;

static int parse_args(const char *who, int argc, char **argv, bool serve, args_t *a) {
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    bool has = i + 1 < argc;
    if (!serve && !strcmp(s, "--json")) a->json = true;
    else if (!serve && !strcmp(s, "--all")) a->all = true;
    else if (!serve && (!strcmp(s, "--offset") || !strcmp(s, "--limit")) && has) {
      char *end;
      long long v = strtoll(argv[++i], &end, 10);
      if (!*argv[i] || *end || v < 0 || v > ALTAR_FLEET_VIEW_LIMIT_MAX * 1000000LL) {
        fprintf(stderr, "altar %s: %s: expected a non-negative integer\n", who, s);
        return -1;
      }
      if (!strcmp(s, "--offset")) a->q.offset = v;
      else a->q.limit = v;
    } else if (serve && !strcmp(s, "--addr") && has) a->addr = argv[++i];
    else if (serve && !strcmp(s, "--token-file") && has) a->token_file = argv[++i];
    else {
      fprintf(stderr, "altar %s: unexpected argument '%s'\n", who, s);
      return -1;
    }
  }
  return 0;
}

static void print_json(json_t *o) {
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  if (text) printf("%s\n", text);
  free(text);
}

static void fmt_time(double ts, char *out, size_t n) {
  time_t t = (time_t)ts;
  struct tm tm;
  if (ts <= 0 || !gmtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%d %H:%M:%SZ", &tm)) snprintf(out, n, "-");
}

static json_int_t geti(const json_t *o, const char *a, const char *b) {
  const json_t *x = json_object_get(o, a);
  return json_integer_value(b ? json_object_get(x, b) : x);
}

static const char *str_field(const json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "-";
}

/* Renders page once into *pout; 1 after printing the error. */
static int render_once(const char *who, const altar_config_t *cfg, const char *page, const altar_fleet_query_t *q,
                       json_t **pout) {
  altar_error_t err = {0};
  altar_fleet_view_t *v = altar__fleet_view_new(cfg, &err);
  int rc = v ? altar__fleet_view_render(v, page, q, pout, &err) : err.code;
  altar__fleet_view_free(v);
  if (rc) fprintf(stderr, "altar %s: %s\n", who, err.msg);
  return rc ? 1 : 0;
}

int altar_cmd_jobs(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin(argc, argv, usage_jobs, &cfg, &code);
  if (argc < 0) return code;
  if ((code = altar_cli_require_existing_log(&cfg, "jobs"))) {
    altar_config_clear(&cfg);
    return code;
  }
  args_t a = {0};
  json_t *o = NULL;
  int rc = parse_args("jobs", argc, argv, false, &a) ? 2 : render_once("jobs", &cfg, "jobs", &a.q, &o);
  if (!rc && a.json) {
    print_json(o);
  } else if (!rc) {
    printf("%-24s %-20s %7s %7s %7s %7s %7s %7s %6s %6s %9s %6s  %s\n", "JOB", "SUBMITTED", "SHARDS", "WAITING",
           "PENDING", "RUNNING", "DONE", "FAILED", "FIRED", "DEAD", "CANCELLED", "OPEN", "OUTPUTS");
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(o, "jobs"), i, j) {
      char when[32];
      fmt_time(json_number_value(json_object_get(j, "submitted_at")), when, sizeof when);
      json_t *outs = json_object_get(j, "outputs");
      printf("%-24s %-20s %7lld %7lld %7lld %7lld %7lld %7lld %6lld %6lld %9lld %6lld  %s%s\n", str_field(j, "job_id"),
             when, (long long)geti(j, "shards", "total"), (long long)geti(j, "waiting", NULL),
             (long long)geti(j, "shards", "pending"), (long long)geti(j, "shards", "running"),
             (long long)geti(j, "shards", "succeeded"), (long long)geti(j, "shards", "failed"),
             (long long)geti(j, "groups", "fired"), (long long)geti(j, "groups", "dead_lettered"),
             (long long)geti(j, "groups", "cancelled"), (long long)geti(j, "groups", "open"),
             json_array_size(outs) ? json_string_value(json_array_get(outs, 0)) : "-",
             geti(j, "outputs_total", NULL) > 1 ? " (+more)" : "");
    }
    long long total = (long long)geti(o, "total", NULL);
    printf("%lld job%s\n", total, ALTAR_CLI_PLURAL(total));
  }
  json_decref(o);
  altar_config_clear(&cfg);
  return rc;
}

int altar_cmd_workers(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin(argc, argv, usage_workers, &cfg, &code);
  if (argc < 0) return code;
  if ((code = altar_cli_require_existing_log(&cfg, "workers"))) {
    altar_config_clear(&cfg);
    return code;
  }
  args_t a = {0};
  json_t *o = NULL;
  int rc = parse_args("workers", argc, argv, false, &a) ? 2 : render_once("workers", &cfg, "workers", &a.q, &o);
  if (!rc && a.json) {
    print_json(o);
  } else if (!rc) {
    printf("%-28s %-7s %-16s %-10s %5s %7s %9s %12s  %s\n", "WORKER", "STATE", "HOST", "BACKEND", "SLOTS", "RUNNING",
           "UP", "LAST SEEN", "TASKS");
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(o, "workers"), i, w) {
      if (!a.all && !strcmp(str_field(w, "state"), "gone")) continue;
      json_t *running = json_object_get(w, "running");
      printf("%-28s %-7s %-16s %-10s %5lld %7lld %8.0fs %10.0fs ago  ", str_field(w, "worker"), str_field(w, "state"),
             str_field(w, "host"), str_field(w, "backend"), (long long)geti(w, "slots", NULL),
             (long long)geti(w, "running_total", NULL), json_number_value(json_object_get(w, "up_s")),
             json_number_value(json_object_get(w, "age_s")));
      size_t k;
      json_t *key;
      json_array_foreach(running, k, key) {
        if (k == 3) {
          printf(" …");
          break;
        }
        printf("%s%.16s", k ? " " : "", json_string_value(key));
      }
      printf("%s\n", json_array_size(running) ? "" : "-");
    }
    printf("%lld live of %lld known\n", (long long)geti(o, "live", NULL), (long long)geti(o, "total", NULL));
  }
  json_decref(o);
  altar_config_clear(&cfg);
  return rc;
}

/* Fired groups of the view's job. */
static size_t fired_in(json_t *o) {
  size_t n = 0, i;
  json_t *g;
  json_array_foreach(json_object_get(o, "group_list"), i, g) n += !strcmp(str_field(g, "state"), "fired");
  return n;
}

/* How long status waits for a fresh view to read the topics. */
#define WHY_SYNC_MS 10000

int altar_cli_job_why(const altar_config_t *cfg, const char *job, json_t **pout, altar_error_t *err) {
  *pout = NULL;
  altar_fleet_query_t q = {.job = job, .limit = ALTAR_FLEET_VIEW_LIMIT_MAX};
  altar_fleet_view_t *v = altar__fleet_view_new(cfg, err);
  int rc = v ? 0 : -1;
  /* Not read to the end in time (a slow broker): what was read is still
   * said, marked partial. */
  bool partial = v && altar__fleet_view_sync(v, WHY_SYNC_MS, err) != ALTAR_OK;
  if (!rc) rc = altar__fleet_view_render(v, "why", &q, pout, err);
  if (!rc) json_object_set_new(*pout, "partial", json_boolean(partial));
  altar__fleet_view_free(v);
  return rc ? -1 : 0;
}

int altar_cli_print_outputs(const altar_config_t *cfg, const altar_group_specs_t *stages, const char *job,
                            size_t min_fired, bool json) {
  altar_fleet_query_t q = {.job = job, .limit = ALTAR_FLEET_VIEW_LIMIT_MAX};
  json_t *o = NULL;
  altar_error_t err = {0};
  altar_fleet_view_t *v = altar__fleet_view_new(cfg, &err);
  int rc = v ? altar__fleet_view_render(v, "job", &q, &o, &err) : err.code;
  /* The view reads the log a slice per render; a fresh one may not have
   * reached the events the topics hold (a Kafka fetch takes a while): render
   * again until it has the fired groups counted on the topics. */
  time_t until = time(NULL) + OUTPUTS_WAIT_S;
  while (!rc && fired_in(o) < min_fired && time(NULL) < until) {
    json_decref(o);
    o = NULL;
    usleep(100 * 1000);
    rc = altar__fleet_view_render(v, "job", &q, &o, &err);
  }
  altar__fleet_view_free(v);
  if (rc) {
    fprintf(stderr, "altar status: %s\n", err.msg);
    return 1;
  }
  json_t *groups = json_array();
  size_t i;
  json_t *g;
  json_array_foreach(json_object_get(o, "group_list"), i, g) {
    if (strcmp(str_field(g, "state"), "fired")) continue;
    json_t *uris = json_array();
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(g, "members"), k, m) json_array_extend(uris, json_object_get(m, "outputs"));
    int stage = altar_cli_stage_of(stages, str_field(g, "kind"));
    json_array_append_new(groups, json_pack("{s:O, s:O, s:O, s:i, s:o}", "kind", json_object_get(g, "kind"),
                                            "group_key", json_object_get(g, "group_key"), "ts",
                                            json_object_get(g, "ts"), "stage", stage, "outputs", uris));
  }
  if (json) {
    json_t *out = json_pack("{s:s, s:o}", "job_id", job, "fired_groups", groups);
    print_json(out);
    json_decref(out);
  } else {
    /* Stage by stage, each stage's groups in the order they fired. */
    json_int_t last = 0;
    for (json_int_t st = 1; st <= last + 1 && st < 64; st++) json_array_foreach(groups, i, g) {
        json_int_t gs = json_integer_value(json_object_get(g, "stage"));
        if (gs > last) last = gs;
        if (gs != st) continue;
        printf("stage %d group %s %s\n", (int)st, str_field(g, "kind"), str_field(g, "group_key"));
        size_t k;
        json_t *u;
        json_array_foreach(json_object_get(g, "outputs"), k, u) printf("  %s\n", json_string_value(u));
      }
    if (!json_array_size(groups)) printf("no fired group yet\n");
    json_decref(groups);
  }
  json_decref(o);
  return 0;
}

/* The reconciler's lag gauges as the ledger's stored offsets give them: a
 * reconciler that is stopped or stuck shows here what it has not applied. */
static void dashboard_lag(altar_cli_dashboard_t *d, altar__lag_gauge_t *lag) {
  altar_lag_list_t *ll = NULL;
  altar_error_t e = {0};
  if (altar_fleet_view_reconciler_lag(d->view, &ll, &e)) return; /* the overview page says why */
  int32_t *parts = calloc(ll->n ? ll->n : 1, sizeof *parts);
  int64_t *lags = calloc(ll->n ? ll->n : 1, sizeof *lags);
  for (size_t i = 0; parts && lags && i < ll->n; i++) {
    parts[i] = ll->entries[i].partition;
    lags[i] = ll->entries[i].lag;
  }
  if (parts && lags) altar_history_lag(d->history, altar_wall_s(), altar__lag_gauge_set(lag, parts, lags, ll->n));
  free(parts);
  free(lags);
  altar_lag_list_free(ll);
}

int altar_cmd_dashboard(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin_on_log(argc, argv, usage_dashboard, &cfg, &code);
  if (argc < 0) return code;
  args_t a = {0};
  int rc = 2;
  altar_cli_dashboard_t d = {0};
  if (!parse_args("dashboard", argc, argv, true, &a) &&
      !altar_cli_dashboard_start("altar dashboard", &cfg, a.addr ? a.addr : DASHBOARD_DEFAULT_ADDR, a.token_file, false,
                                 true, &d)) {
    static volatile sig_atomic_t stop;
    altar_cli_install_stop_signals(&stop);
    altar__lag_gauge_t lag;
    altar_error_t le = {0};
    if (altar__lag_gauge_init(&lag, d.metrics, &le)) fprintf(stderr, "altar dashboard: lag gauges off: %s\n", le.msg);
    while (!stop) {
      if (altar__lag_gauge_due(&lag, altar_mono_ms())) dashboard_lag(&d, &lag);
      struct timespec nap = {0, 200 * 1000 * 1000}; /* a signal ends it early */
      nanosleep(&nap, NULL);
    }
    altar_cli_dashboard_stop(&d);
    altar__lag_gauge_free(&lag);
    rc = 0;
  }
  altar_config_clear(&cfg);
  return rc;
}
