/* altar logs: a task's full output, kept by task key under the data root
 * (<data_root>/logs/<task key>/stdout, stderr: the process and docker
 * backends), or, where only the platform keeps it, the failure's detail from
 * the ledger. `altar logs JOB_ID --failed` does this for every failed shard. */
#include "altar/codec.h"
#include "altar/attempts.h"
#include "altar/backend.h"
#include "altar/ledger.h"
#include "altar/registry.h"
#include "altar/log_tail.h"
#include "cli.h"
#include "failed_shards.h"
#include "fleet_common.h"
#include "producer/job_queue.h"
#include "reconciler/attempts_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define LOGS_READ_MAX (64u << 20) /* bytes of one stream printed at most */
/* The common flags logs takes: it reads the ledger and the data root, no log. */
#define LOGS_FLAGS (ALTAR_CLI_FLAGS_NO_LOG | ALTAR_CLI_FLAGS_DATA_ROOT | ALTAR_CLI_FLAGS_LEDGER)

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar logs [--config FILE] [options] TASK_KEY [--stdout | --stderr]\n"
          "       altar logs [--config FILE] [options] JOB_ID --failed\n\n"
          "Prints a task's output as its worker kept it: <data_root>/logs/<task key>/\n"
          "(backend.data_root, or --data-root; the process and docker backends keep it\n"
          "there until a rerun of the same task replaces it). TASK_KEY may be a unique\n"
          "prefix of at least 8 characters. Where no output is kept here (kubernetes,\n"
          "modal: see the platform's own logs), the failure's detail from the ledger\n"
          "is printed instead. Values of secret-looking variables of this environment\n"
          "(names with TOKEN, SECRET, PASSWORD, _KEY, ...) are shown as [redacted].\n"
          "With --failed, does this for every failed shard of job JOB_ID.\n\n"
          "options:\n"
          "  --stdout, --stderr  only that stream, as written (no headers)\n"
          "  --failed            the argument is a job id: every failed shard of it\n%s",
          altar_cli_fleet_flags(LOGS_FLAGS));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

/* Reads a whole stream (bounded); NULL when absent. */
static char *read_stream(const char *dir, const char *name, size_t *plen) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t nc = cap ? cap * 2 : 65536;
      if (nc > LOGS_READ_MAX) nc = LOGS_READ_MAX;
      if (nc == cap) break;
      char *nb = realloc(buf, nc + 1);
      if (!nb) break;
      buf = nb;
      cap = nc;
    }
    size_t r = fread(buf + len, 1, cap - len, f);
    if (!r) break;
    len += r;
  }
  fclose(f);
  if (!buf) return NULL;
  buf[len] = '\0';
  *plen = len;
  return buf;
}

/* Prints data as written but for the secrets of this environment. */
static void print_redacted(const char *data, size_t len, bool end_line) {
  size_t n = len;
  char *t = altar_redact_env_n(data, &n, (const char *const *)environ);
  const char *p = t ? t : data;
  fwrite(p, 1, t ? n : len, stdout);
  if (end_line && (t ? n : len) && p[(t ? n : len) - 1] != '\n') fputc('\n', stdout);
  free(t);
}

typedef struct lookup {
  const char *prefix;
  const char *job; /* --failed */
  size_t matches;
  char *key, *reason, *detail;
  char *backend, *eid; /* the record that speaks for the task */
  int rank;            /* of that record: 0 a replaced run, 1 consumed, 2 open */
  failed_shards_t failed;
} lookup_t;

static bool run_replaced(const altar_record_t *rec) {
  const char *why = rec->state == ALTAR_STATE_FAILED && rec->failure ? rec->failure->reason : NULL;
  return why && (!strcmp(why, ALTAR_REASON_SUPERSEDED) || !strcmp(why, ALTAR_REASON_RELEASED));
}

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  lookup_t *lk = ctx;
  if (lk->job) {
    const char *jid = altar_strmap_get(&e->rec.handle.labels, ALTAR_JOB_ID_LABEL);
    if (jid && !strcmp(jid, lk->job)) altar_cli_failed_add(&lk->failed, e);
    return 0;
  }
  if (!e->task_key || strncmp(e->task_key, lk->prefix, strlen(lk->prefix))) return 0;
  /* Several records may share a key (reruns): the shard's own record (not
   * a replaced run) speaks for it, the open one first, else the last. */
  bool same = lk->key && !strcmp(lk->key, e->task_key);
  int rank = run_replaced(&e->rec) ? 0 : e->rec.consumed ? 1 : 2;
  if (!same) lk->matches++;
  if (same && rank < lk->rank) return 0;
  free(lk->key);
  free(lk->reason);
  free(lk->detail);
  free(lk->backend);
  free(lk->eid);
  lk->key = strdup(e->task_key);
  const altar_failure_t *f = e->rec.failure;
  lk->reason = f && f->reason ? strdup(f->reason) : NULL;
  lk->detail = f && f->detail ? strdup(f->detail) : NULL;
  lk->backend = strdup(e->rec.handle.backend);
  lk->eid = strdup(e->rec.handle.external_id);
  lk->rank = rank;
  return 0;
}

static bool key_like(const char *s) {
  size_t n = strlen(s);
  if (n < 8 || n > ALTAR_TASK_KEY_LEN) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

/* Prints every earlier attempt of a retried shard with what ended it (its
 * output's tail is in the failure's detail: a rerun replaced the streams
 * kept under the data root); then the header of the last one. */
static void print_attempts(const char *key, const altar_attempts_t *at) {
  printf("== task %s: %zu attempt%s ==\n", key, at->n, at->n == 1 ? "" : "s");
  if (at->dropped)
    printf("(%lld older attempt%s dropped: attempts_keep)\n", (long long)at->dropped, at->dropped == 1 ? "" : "s");
  for (size_t i = 0; i < at->n; i++) {
    char line[512];
    altar__attempt_summary(&at->v[i], line, sizeof line);
    printf("-- attempt %lld: %s --\n", (long long)at->v[i].n, line);
    const altar_failure_t *f = at->v[i].failure;
    if (i + 1 < at->n && f && f->detail) print_redacted(f->detail, strlen(f->detail), true);
  }
}

/* Prints one task's logs; 0 when something was printed. at (may be NULL):
 * its attempts, shown when there were several. */
static int print_task(const char *data_root, const char *key, const char *only, const char *reason, const char *detail,
                      bool have_record, const altar_attempts_t *at) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/logs/%s", data_root, key);
  size_t ol = 0, el = 0;
  char *out = read_stream(dir, "stdout", &ol), *err = read_stream(dir, "stderr", &el);
  bool several = at && (at->n > 1 || at->dropped);
  int rc = 0;
  if (only) {
    char *s = !strcmp(only, "stdout") ? out : err;
    if (s) print_redacted(s, !strcmp(only, "stdout") ? ol : el, false);
    else rc = 1;
  } else if (out || err) {
    if (several) {
      print_attempts(key, at);
      printf("-- output of attempt %lld (the last run; kept under %s) --\n", (long long)at->v[at->n - 1].n, dir);
    } else {
      printf("== task %s%s%s ==\n", key, reason ? " failed: " : "", reason ? reason : "");
    }
    if (out) {
      printf("-- stdout (%zu bytes) --\n", ol);
      print_redacted(out, ol, true);
    }
    if (err) {
      printf("-- stderr (%zu bytes) --\n", el);
      print_redacted(err, el, true);
    }
  } else if (have_record) {
    if (several) print_attempts(key, at);
    else printf("== task %s%s%s ==\n", key, reason ? " failed: " : "", reason ? reason : "");
    printf("(no output kept under %s; this is the failure's detail from the ledger)\n", dir);
    if (detail) print_redacted(detail, strlen(detail), true);
    else printf("(no detail recorded)\n");
  } else {
    rc = 1;
  }
  free(out);
  free(err);
  return rc;
}

int altar_cmd_logs(int argc, char **argv) {
  int exit_code = 0;
  altar_config_t cfg;
  altar_cli_fleet_only(LOGS_FLAGS);
  argc = altar_cli_fleet_begin(argc, argv, usage, &cfg, &exit_code);
  if (argc < 0) return exit_code;
  const char *arg = NULL, *only = NULL;
  bool failed = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--failed")) failed = true;
    else if (!strcmp(argv[i], "--stdout")) only = "stdout";
    else if (!strcmp(argv[i], "--stderr")) only = "stderr";
    else if (argv[i][0] != '-' && !arg) arg = argv[i];
    else {
      fprintf(stderr, "altar logs: unexpected argument '%s'\n", argv[i]);
      altar_config_clear(&cfg);
      return 2;
    }
  }
  if (!arg || (failed && only)) {
    if (failed && only) fprintf(stderr, "altar logs: --failed prints both streams; drop --%s\n", only);
    else usage(stderr);
    altar_config_clear(&cfg);
    return 2;
  }
  if (!failed && !key_like(arg)) {
    fprintf(stderr,
            "altar logs: '%s' is not a task key (8 to 64 lowercase hex digits); for a job's failed "
            "shards use: altar logs JOB_ID --failed\n",
            arg);
    altar_config_clear(&cfg);
    return 2;
  }
  const char *data_root = altar_strmap_get(&cfg.backend_props, "data_root");
  if (!data_root || !*data_root) data_root = "./var/data";
  lookup_t lk = {.prefix = arg, .job = failed ? arg : NULL};
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_ledger_t *l = altar_ledger_rocksdb_open(cfg.ledger_path, &ro, &err);
  bool have_ledger = l && altar_ledger_foreach(l, visit, &lk, &err) == ALTAR_OK;
  /* The shard's attempts, while the ledger is open. */
  altar_attempts_t at = {0};
  bool have_attempts = false;
  if (have_ledger && lk.backend && lk.eid && lk.matches == 1) {
    altar_ledger_entry_t e;
    altar_error_t e2 = {0};
    if (!altar_ledger_get(l, lk.backend, lk.eid, &e, &e2)) {
      have_attempts = !altar_attempts_of(l, &e, &at, &e2);
      /* The shard's outcome is its last attempt's, not a replaced run's. */
      if (have_attempts && at.n) {
        const altar_failure_t *f = at.v[at.n - 1].failure;
        free(lk.reason);
        free(lk.detail);
        lk.reason = f && f->reason ? strdup(f->reason) : NULL;
        lk.detail = f && f->detail ? strdup(f->detail) : NULL;
      }
      altar_ledger_entry_clear(&e);
    }
  }
  altar_ledger_close(l);
  int rc = 0;
  if (failed) {
    if (!have_ledger) {
      fprintf(stderr, "altar logs: ledger %s not readable here: %s\n", cfg.ledger_path, err.msg);
      rc = 1;
    } else if (!lk.failed.n) {
      fprintf(stderr, "altar logs: job %s has no failed shard in ledger %s\n", arg, cfg.ledger_path);
      rc = 1;
    }
    for (size_t i = 0; i < lk.failed.n; i++) {
      const failed_shard_t *s = &lk.failed.v[i];
      if (i) printf("\n");
      print_task(data_root, s->task_key, NULL, s->reason, s->detail, true, NULL);
    }
  } else if (lk.matches > 1) {
    fprintf(stderr, "altar logs: task key prefix '%s' matches %zu tasks; give more of it\n", arg, lk.matches);
    rc = 2;
  } else {
    const char *key = lk.key ? lk.key : arg;
    /* A backend that declares it keeps no output: no search of the data
     * root for what cannot be there, and no promise of a stream. */
    const altar_backend_ops_t *ran_on = lk.backend ? altar_registry_lookup(ALTAR_REGISTRY_BACKEND, lk.backend) : NULL;
    bool keeps_output = !ran_on || (altar_backend_ops_caps(ran_on) & ALTAR_BACKEND_CAP_LOGS);
    if (!keeps_output && only) {
      fprintf(stderr,
              "altar logs: task %s ran on the %s backend, which cannot %s: see the platform's own logs "
              "(without --%s this prints the failure's detail from the ledger)\n",
              key, lk.backend, altar_backend_cap_name(ALTAR_BACKEND_CAP_LOGS), only);
      rc = 1;
    } else if (!keeps_output) {
      printf("== task %s%s%s ==\n", key, lk.reason ? " failed: " : "", lk.reason ? lk.reason : "");
      printf("(the %s backend keeps no output here: see the platform's own logs; this is the failure's detail "
             "from the ledger)\n",
             lk.backend);
      if (lk.detail) print_redacted(lk.detail, strlen(lk.detail), true);
      else printf("(no detail recorded)\n");
    } else if (strlen(key) < ALTAR_TASK_KEY_LEN) {
      fprintf(stderr, "altar logs: no task with key prefix '%s' in ledger %s%s%s\n", arg, cfg.ledger_path,
              have_ledger ? "" : ": ", have_ledger ? "" : err.msg);
      rc = 1;
    } else if (print_task(data_root, key, only, lk.reason, lk.detail, lk.key != NULL, have_attempts ? &at : NULL)) {
      fprintf(stderr, "altar logs: no %s kept for task %s under %s/logs%s%s\n", only ? only : "output", key, data_root,
              lk.key ? "" : ", and no record of it in ledger ", lk.key ? "" : cfg.ledger_path);
      rc = 1;
    }
  }
  altar_attempts_clear(&at);
  free(lk.key);
  free(lk.reason);
  free(lk.detail);
  free(lk.backend);
  free(lk.eid);
  altar_cli_failed_clear(&lk.failed);
  altar_config_clear(&cfg);
  return rc;
}
