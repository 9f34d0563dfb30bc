/* altar ledger: apply status events to a RocksDB ledger and inspect it. */
#include "altar/codec.h"
#include "altar/config.h"
#include "altar/groups.h"
#include "altar/attempts.h"
#include "altar/ledger.h"
#include "reconciler/attempts_json.h"
#include "altar/reconcile.h"
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABEL_FILTERS 16
#define DEFAULT_BATCH 1000

static const char usage_text[] =
    "usage: altar ledger <command> [--ledger DIR | --config FILE] [options]\n\n"
    "commands:\n"
    "  apply [--groups FILE] [--batch N] [EVENTS.jsonl|-]\n"
    "            apply status events (JSON Lines) in order; print each group event\n"
    "            that becomes due as a JSON line\n"
    "  list [--state S] [--kind K] [--label K=V]... [--json]\n"
    "            records, optionally filtered (S: pending|running|succeeded|failed|consumed|open)\n"
    "  show BACKEND:EXTERNAL_ID   one record as JSON, with \"attempts\": every run of its\n"
    "                             shard in order (state, reason, detail, worker, times)\n"
    "  stats [--json]             counts by state\n"
    "  dump                       every record as a JSON line (with task_key, group_key)\n"
    "  checksum                   digest of the ledger's logical content\n"
    "  retries                    the due time of every retry (retry_backoff), a JSON line each\n\n"
    "common options:\n"
    "  --ledger DIR     the RocksDB ledger (default: ledger.path from the config)\n"
    "  --config FILE    fleet config (default ./altar.yaml when present); its\n"
    "                   groups: key is the default for --groups\n"
    "  -h, --help       this help\n"
    "\nexit status: 0 done; 1 the ledger could not be read or written, or has no such record;\n"
    "  2 bad input, wherever it comes from: usage, a flag, the config file, an event line\n"
    "  (the error names the field, and FILE:LINE when it comes from a file).\n";

typedef struct opts {
  const char *ledger, *config, *groups, *input, *state, *kind, *target;
  const char *labels[MAX_LABEL_FILTERS];
  size_t n_labels;
  size_t batch;
  bool json;
} opts_t;

static int usage_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_err(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "altar ledger %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nRun 'altar ledger --help' for usage.\n");
  return 2;
}

/* Parses flags after the command name. Returns 0, or the exit code. */
static int parse(const char *cmd, int argc, char **argv, opts_t *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return -1;
    }
    if (!strcmp(a, "--ledger")) dst = &o->ledger;
    else if (!strcmp(a, "--config")) dst = &o->config;
    else if (!strcmp(a, "--groups") && !strcmp(cmd, "apply")) dst = &o->groups;
    else if (!strcmp(a, "--state") && !strcmp(cmd, "list")) dst = &o->state;
    else if (!strcmp(a, "--kind") && !strcmp(cmd, "list")) dst = &o->kind;
    else if (!strcmp(a, "--json") && (!strcmp(cmd, "list") || !strcmp(cmd, "stats"))) {
      o->json = true;
      continue;
    } else if (!strcmp(a, "--label") && !strcmp(cmd, "list")) {
      if (i + 1 >= argc) return usage_err(cmd, "%s needs a value", a);
      if (o->n_labels == MAX_LABEL_FILTERS) return usage_err(cmd, "at most 16 %s filters", a);
      if (!strchr(argv[i + 1], '=')) return usage_err(cmd, "--label wants K=V, got '%s'", argv[i + 1]);
      o->labels[o->n_labels++] = argv[++i];
      continue;
    } else if (!strcmp(a, "--batch") && !strcmp(cmd, "apply")) {
      if (i + 1 >= argc) return usage_err(cmd, "%s needs a value", a);
      char *end;
      errno = 0;
      long long v = strtoll(argv[++i], &end, 10);
      if (errno || *end || v < 1 || v > 1000000) return usage_err(cmd, "--batch must be 1..1000000, got '%s'", argv[i]);
      o->batch = (size_t)v;
      continue;
    } else if (a[0] == '-' && a[1]) {
      return usage_err(cmd, "unknown option '%s'", a);
    } else {
      /* The one positional argument: input file (apply) or record (show). */
      const char **pos = !strcmp(cmd, "apply") ? &o->input : !strcmp(cmd, "show") ? &o->target : NULL;
      if (!pos) return usage_err(cmd, "unexpected argument '%s'", a);
      if (*pos) return usage_err(cmd, "more than one argument: '%s'", a);
      *pos = a;
      continue;
    }
    if (i + 1 >= argc) return usage_err(cmd, "%s needs a value", a);
    *dst = argv[++i];
  }
  return 0;
}

/* Resolves the ledger dir (flag, else config) into *pdir (malloc'd). */
static int resolve(const opts_t *o, altar_config_t *cfg, char **pdir) {
  altar_error_t err = {0};
  if (altar_cli_config_load(o->config, cfg, &err)) {
    fprintf(stderr, "altar ledger: %s\n", err.msg);
    return 2; /* the config file is bad input like a flag */
  }
  *pdir = strdup(o->ledger ? o->ledger : cfg->ledger_path);
  if (!*pdir) return 1;
  return 0;
}

static altar_ledger_t *open_ledger(const char *dir, bool write) {
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t lo = {.read_only = !write, .no_create = !write};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, &lo, &err);
  if (!l) fprintf(stderr, "altar ledger: %s\n", err.msg);
  return l;
}

/* ---- apply ---- */

static int print_events(const altar_apply_result_t *r, size_t from) {
  for (size_t i = from; i < r->n_events; i++) {
    altar_error_t err = {0};
    char *js = altar_group_to_json(&r->events[i], &err);
    if (!js) {
      fprintf(stderr, "altar ledger apply: %s\n", err.msg);
      return 1;
    }
    printf("%s\n", js);
    free(js);
  }
  fflush(stdout);
  return 0;
}

static void report(const altar_apply_result_t *r, size_t fd, size_t fs, size_t fr) {
  for (size_t i = fd; i < r->deferred_groups.n; i++)
    fprintf(stderr, "altar ledger apply: deferred %s (blocked by a failed shard)\n", r->deferred_groups.v[i]);
  for (size_t i = fs; i < r->stalled_groups.n; i++)
    fprintf(stderr, "altar ledger apply: stalled %s (blocked by a failed shard, no on_failed)\n",
            r->stalled_groups.v[i]);
  for (size_t i = fr; i < r->n_retries; i++)
    fprintf(stderr, "altar ledger apply: retry %s:%s (restart %lld)\n", r->retries[i].handle.backend,
            r->retries[i].handle.external_id, (long long)r->retries[i].restart_count);
}

static int flush_batch(altar_ledger_t *l, const altar_group_specs_t *g, altar_status_event_t *evs, size_t *pn,
                       altar_apply_result_t *res) {
  size_t e0 = res->n_events, d0 = res->deferred_groups.n, s0 = res->stalled_groups.n, r0 = res->n_retries;
  altar_error_t err = {0};
  int rc = altar_apply_events_atomic(l, g, evs, *pn, -1.0, res, &err);
  for (size_t i = 0; i < *pn; i++) altar_status_event_clear(&evs[i]);
  *pn = 0;
  if (rc) {
    fprintf(stderr, "altar ledger apply: %s (the batch was not applied)\n", err.msg);
    return 1;
  }
  report(res, d0, s0, r0);
  return print_events(res, e0);
}

static int cmd_apply(const opts_t *o, const char *dir, const altar_config_t *cfg) {
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  const char *gfile = o->groups ? o->groups : cfg->path;
  if (gfile && altar_group_specs_load_file(gfile, &groups, &err)) {
    fprintf(stderr, "altar ledger apply: %s\n", err.msg);
    altar_group_specs_clear(&groups);
    return 1;
  }
  if (!gfile) fprintf(stderr, "altar ledger apply: no --groups and no config: no kind groups\n");
  const char *name = o->input && strcmp(o->input, "-") ? o->input : "<stdin>";
  FILE *in = o->input && strcmp(o->input, "-") ? fopen(o->input, "r") : stdin;
  if (!in) {
    fprintf(stderr, "altar ledger apply: %s: %s\n", name, strerror(errno));
    altar_group_specs_clear(&groups);
    return 1;
  }
  altar_ledger_t *l = open_ledger(dir, true);
  if (!l) {
    if (in != stdin) fclose(in);
    altar_group_specs_clear(&groups);
    return 1;
  }
  size_t cap = o->batch ? o->batch : DEFAULT_BATCH, n = 0, lineno = 0, total = 0;
  altar_status_event_t *evs = calloc(cap, sizeof *evs);
  altar_apply_result_t res = {0};
  char *line = NULL;
  size_t lcap = 0;
  ssize_t len;
  int rc = evs ? 0 : 1;
  while (!rc && (len = getline(&line, &lcap, in)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    size_t sp = strspn(line, " \t");
    if ((size_t)len == sp) continue; /* blank */
    if ((size_t)len > ALTAR_MAX_MESSAGE) {
      fprintf(stderr, "altar ledger apply: %s:%zu: line longer than %u bytes\n", name, lineno, ALTAR_MAX_MESSAGE);
      rc = 1;
      break;
    }
    if (altar_status_from_json(line, (size_t)len, &evs[n], &err)) {
      fprintf(stderr, "altar ledger apply: %s:%zu: %s\n", name, lineno, err.msg);
      altar_status_event_clear(&evs[n]);
      rc = 1;
      break;
    }
    n++;
    total++;
    if (n == cap) rc = flush_batch(l, &groups, evs, &n, &res);
  }
  if (!rc && ferror(in)) {
    fprintf(stderr, "altar ledger apply: %s: read error\n", name);
    rc = 1;
  }
  if (!rc && n) rc = flush_batch(l, &groups, evs, &n, &res);
  for (size_t i = 0; i < n; i++) altar_status_event_clear(&evs[i]);
  if (!rc)
    fprintf(stderr, "altar ledger apply: %zu events applied (%zu unchanged), %zu group events\n", total, res.ignored,
            res.n_events);
  free(line);
  free(evs);
  altar_apply_result_clear(&res);
  if (in != stdin) fclose(in);
  altar_ledger_close(l);
  altar_group_specs_clear(&groups);
  return rc;
}

/* ---- inspection ---- */

/* Record JSON with the ledger's metadata merged in. Caller frees. */
static char *entry_json(const altar_ledger_entry_t *e, altar_error_t *err) {
  char *rj = altar_record_to_json(&e->rec, err);
  if (!rj) return NULL;
  json_error_t je;
  json_t *o = json_loads(rj, 0, &je);
  free(rj);
  if (!o) {
    altar_error_set(err, ALTAR_EDECODE, "record JSON: %s", je.text);
    return NULL;
  }
  json_object_set_new(o, "task_key", e->task_key ? json_string(e->task_key) : json_null());
  json_object_set_new(o, "group_key", e->group_key ? json_string(e->group_key) : json_null());
  char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!s) altar_error_set(err, ALTAR_ENOMEM, "record JSON: out of memory");
  return s;
}

typedef struct list_ctx {
  const opts_t *o;
  bool dump;
  size_t shown;
} list_ctx_t;

static bool matches(const opts_t *o, const altar_ledger_entry_t *e) {
  if (o->kind && strcmp(o->kind, e->rec.kind)) return false;
  if (o->state) {
    if (!strcmp(o->state, "consumed")) {
      if (!e->rec.consumed) return false;
    } else if (!strcmp(o->state, "open")) {
      if (e->rec.consumed || altar_state_terminal(e->rec.state)) return false;
    } else if (strcmp(o->state, altar_state_name(e->rec.state))) {
      return false;
    }
  }
  for (size_t i = 0; i < o->n_labels; i++) {
    const char *eq = strchr(o->labels[i], '=');
    size_t kl = (size_t)(eq - o->labels[i]);
    char key[256];
    if (kl >= sizeof key) return false;
    memcpy(key, o->labels[i], kl);
    key[kl] = '\0';
    const char *v = altar_strmap_get(&e->rec.handle.labels, key);
    if (!v || strcmp(v, eq + 1)) return false;
  }
  return true;
}

static int list_visit(void *vctx, const altar_ledger_entry_t *e) {
  list_ctx_t *c = vctx;
  if (!c->dump && !matches(c->o, e)) return 0;
  c->shown++;
  if (c->dump || c->o->json) {
    altar_error_t err = {0};
    char *js = entry_json(e, &err);
    if (!js) {
      fprintf(stderr, "altar ledger: %s\n", err.msg);
      return ALTAR_EIO;
    }
    printf("%s\n", js);
    free(js);
    return 0;
  }
  printf("%s:%s\t%s\t%s%s\trestarts=%lld\tgroup=%s", e->rec.handle.backend, e->rec.handle.external_id, e->rec.kind,
         altar_state_name(e->rec.state), e->rec.consumed ? ",consumed" : "", (long long)e->rec.restart_count,
         e->group_key ? e->group_key : "-");
  if (e->rec.failure) printf("\tfailure=%s", e->rec.failure->reason);
  printf("\n");
  return 0;
}

static int cmd_list(const opts_t *o, altar_ledger_t *l, bool dump) {
  if (o->state && strcmp(o->state, "consumed") && strcmp(o->state, "open")) {
    altar_state_t s;
    if (altar_state_parse(o->state, &s)) return usage_err("list", "unknown state '%s'", o->state);
  }
  list_ctx_t c = {o, dump, 0};
  altar_error_t err = {0};
  if (altar_ledger_foreach(l, list_visit, &c, &err)) {
    if (err.code) fprintf(stderr, "altar ledger: %s\n", err.msg);
    return 1;
  }
  return 0;
}

static int cmd_show(const opts_t *o, altar_ledger_t *l) {
  if (!o->target) return usage_err("show", "%s", "needs BACKEND:EXTERNAL_ID");
  const char *colon = strchr(o->target, ':');
  if (!colon || colon == o->target) return usage_err("show", "expected BACKEND:EXTERNAL_ID, got '%s'", o->target);
  char backend[256];
  size_t bl = (size_t)(colon - o->target);
  if (bl >= sizeof backend) return usage_err("show", "backend name too long in '%s'", o->target);
  memcpy(backend, o->target, bl);
  backend[bl] = '\0';
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  if (altar_ledger_get(l, backend, colon + 1, &e, &err)) {
    fprintf(stderr, "altar ledger show: %s\n", err.msg);
    return 1;
  }
  char *js = entry_json(&e, &err);
  /* Every run of its shard, in order, each with what ended it. */
  altar_attempts_t at = {0};
  int rc = js ? altar_attempts_of(l, &e, &at, &err) : ALTAR_EINVAL;
  altar_ledger_entry_clear(&e);
  json_t *obj = rc ? NULL : json_loads(js, 0, NULL), *arr = obj ? altar__attempts_json(&at) : NULL;
  free(js);
  js = NULL;
  if (arr) {
    json_object_set_new(obj, "attempts", arr);
    json_object_set_new(obj, "attempts_dropped", json_integer(at.dropped));
    js = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
  }
  json_decref(obj);
  altar_attempts_clear(&at);
  if (!js) {
    fprintf(stderr, "altar ledger show: %s\n", err.code ? err.msg : "out of memory");
    return 1;
  }
  printf("%s\n", js);
  free(js);
  return 0;
}

static int cmd_stats(const opts_t *o, altar_ledger_t *l) {
  altar_ledger_stats_t s;
  altar_error_t err = {0};
  if (altar_ledger_stats(l, &s, &err)) {
    fprintf(stderr, "altar ledger stats: %s\n", err.msg);
    return 1;
  }
  if (o->json) {
    printf("{\"records\":%llu,\"consumed\":%llu,\"open\":%llu,\"pending\":%llu,\"running\":%llu,"
           "\"succeeded\":%llu,\"failed\":%llu}\n",
           (unsigned long long)s.records, (unsigned long long)s.consumed, (unsigned long long)s.open,
           (unsigned long long)s.by_state[0], (unsigned long long)s.by_state[1], (unsigned long long)s.by_state[2],
           (unsigned long long)s.by_state[3]);
    return 0;
  }
  printf("records    %llu\nconsumed   %llu\nopen       %llu\n", (unsigned long long)s.records,
         (unsigned long long)s.consumed, (unsigned long long)s.open);
  printf("not consumed, by state:\n  pending    %llu\n  running    %llu\n  succeeded  %llu\n  failed     %llu\n",
         (unsigned long long)s.by_state[0], (unsigned long long)s.by_state[1], (unsigned long long)s.by_state[2],
         (unsigned long long)s.by_state[3]);
  return 0;
}

static int cmd_checksum(altar_ledger_t *l) {
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  altar_error_t err = {0};
  if (altar_ledger_checksum(l, sum, &err)) {
    fprintf(stderr, "altar ledger checksum: %s\n", err.msg);
    return 1;
  }
  printf("%s\n", sum);
  return 0;
}

int altar_cmd_ledger(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_text, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    fputs(usage_text, stdout);
    return 0;
  }
  static const char *const cmds[] = {"apply", "list", "show", "stats", "dump", "checksum", "retries"};
  bool known = false;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) known |= !strcmp(cmd, cmds[i]);
  if (!known) return usage_err(cmd, "%s", "unknown command");
  opts_t o = {0};
  int rc = parse(cmd, argc - 1, argv + 1, &o);
  if (rc) return rc < 0 ? 0 : rc;
  altar_config_t cfg;
  char *dir = NULL;
  if ((rc = resolve(&o, &cfg, &dir))) {
    altar_config_clear(&cfg);
    return rc;
  }
  if (!strcmp(cmd, "apply")) {
    rc = cmd_apply(&o, dir, &cfg);
  } else {
    altar_ledger_t *l = open_ledger(dir, false);
    if (!l) rc = 1;
    else if (!strcmp(cmd, "list")) rc = cmd_list(&o, l, false);
    else if (!strcmp(cmd, "dump")) rc = cmd_list(&o, l, true);
    else if (!strcmp(cmd, "show")) rc = cmd_show(&o, l);
    else if (!strcmp(cmd, "stats")) rc = cmd_stats(&o, l);
    else if (!strcmp(cmd, "retries")) rc = altar__cmd_ledger_retries(l);
    else rc = cmd_checksum(l);
    altar_ledger_close(l);
  }
  free(dir);
  altar_config_clear(&cfg);
  return rc;
}
