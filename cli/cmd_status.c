/* altar status: where a job stands — shards by state from the ledger and its
 * group events from the ready and dead topics. */
#include "altar/attempts.h"
#include "altar/codec.h"
#include "altar/forward_origin.h"
#include "altar/ledger.h"
#include "altar/reconcile.h"
#include "cli.h"
#include "dashboard_cli.h"
#include "failed_shards.h"
#include "fleet_common.h"
#include "follow.h"
#include "stages.h"
#include "altar/pools.h"
#include "producer/job_queue.h"
#include "reconciler/attempts_json.h"
#include "dashboard/shard_why.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit code of `altar status` for a job id nothing knows. */
#define STATUS_EXIT_NOT_FOUND 4

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar status [--config FILE] [options] JOB_ID [--json] [--outputs]\n\n"
          "Shows a job's shards by state (read from the ledger, read-only) and its\n"
          "group events so far (read from the ready and dead topics), and each failed\n"
          "shard with its reason and the first line of its detail, and each shard that\n"
          "ran more than once with every attempt in order (\"retried\" in --json: state,\n"
          "reason, detail, worker, times of each run), and why each shard that is not\n"
          "running waits (\"why\" in --json: one reason of no_worker, behind,\n"
          "no_free_slot, queued, forwarded, backoff, starting, lease, group_held,\n"
          "cancelled, with its details; README \"Why a shard waits\"). --outputs lists\n"
          "each fired group's output URIs instead.\n"
          "Exit status: 0 shown, 1 a topic or the ledger could not be read, 2 bad usage,\n"
          "4 no trace of the job (not on the jobs topic, in the ledger or in a group event).\n\noptions:\n%s",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_LEDGER));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

typedef struct tally {
  const char *job;
  const char *jobs_topic;
  uint64_t by_state[4];
  uint64_t consumed, total;
  uint64_t replaced;  /* runs settled as superseded or released: not shards */
  uint64_t cancelled; /* shards failed by `altar cancel` */
  expect_t *x;        /* the job's shards, for the late and waiting ones */
  altar_ledger_t *l;
  char **ran_again; /* task keys with filed attempts (altar_attempts_keys) */
  size_t n_ran_again;
  json_t *retried; /* [{task_key, labels, attempts, attempts_dropped}] of shards that ran more than once */
  failed_shards_t failed;
  int oom;
} tally_t;

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  tally_t *t = ctx;
  const char *jid = altar_strmap_get(&e->rec.handle.labels, ALTAR_JOB_ID_LABEL);
  if (!jid || strcmp(jid, t->job)) return 0;
  const altar_failure_t *f = e->rec.failure;
  if (e->rec.consumed && e->rec.state == ALTAR_STATE_FAILED && f && f->reason &&
      (!strcmp(f->reason, ALTAR_REASON_SUPERSEDED) || !strcmp(f->reason, ALTAR_REASON_RELEASED))) {
    t->replaced++; /* another record of the same task is the shard's */
    return 0;
  }
  t->total++;
  altar_cli_failed_add(&t->failed, e);
  if (t->retried && altar_attempts_keys_has(t->ran_again, t->n_ran_again, e->task_key)) {
    altar_attempts_t at;
    altar_error_t ae = {0};
    if (!altar_attempts_of(t->l, e, &at, &ae) && (at.n > 1 || at.dropped)) {
      json_t *labels = json_object();
      for (size_t i = 0; labels && i < e->rec.handle.labels.n; i++)
        json_object_set_new(labels, e->rec.handle.labels.keys[i], json_string(e->rec.handle.labels.vals[i]));
      json_t *o = json_pack("{s:s, s:o, s:o, s:I}", "task_key", e->task_key, "labels", labels ? labels : json_object(),
                            "attempts", altar__attempts_json(&at), "attempts_dropped", (json_int_t)at.dropped);
      if (!o || json_array_append_new(t->retried, o)) t->oom = 1;
    }
    altar_attempts_clear(&at);
  }
  if (e->rec.consumed) t->consumed++;
  if ((unsigned)e->rec.state < 4) t->by_state[e->rec.state]++;
  if (e->rec.state == ALTAR_STATE_FAILED && f && f->reason && !strcmp(f->reason, ALTAR_REASON_CANCELLED))
    t->cancelled++;
  if (e->task_key && e->rec.kind) {
    const char *pool = e->rec.spec && e->rec.spec->resources.gpu ? e->rec.spec->resources.gpu : ALTAR_POOL_CPU;
    char topic[512];
    if (altar_pool_topic(t->jobs_topic, pool, topic, sizeof topic, NULL))
      snprintf(topic, sizeof topic, "%s", t->jobs_topic);
    if (altar_cli_expect_add_shard(t->x, e->task_key, e->rec.kind, e->group_key, topic, pool)) t->oom = 1;
  }
  return 0;
}

/* The job's held groups (the reconciler's ALTAR_HELD_PREFIX side keys whose
 * group one of the job's shards is in): "kind:group_key" → the rule's error. */
typedef struct held_scan {
  const expect_t *x;
  json_t *list; /* [{group, reason}] */
  int oom;
} held_scan_t;

static int visit_held(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  held_scan_t *h = ctx;
  size_t pl = strlen(ALTAR_HELD_PREFIX);
  const char *k = (const char *)key + pl, *nul = memchr(k, 0, klen - pl);
  if (!nul) return 0;
  size_t kind_len = (size_t)(nul - k), gk_len = klen - pl - kind_len - 1;
  bool ours = false;
  for (size_t i = 0; i < h->x->n_shards && !ours; i++) {
    const char *g = h->x->shards[i].group; /* "kind\x1fgroup_key" */
    ours = g && strlen(g) == kind_len + 1 + gk_len && !memcmp(g, k, kind_len) && g[kind_len] == '\x1f' &&
           !memcmp(g + kind_len + 1, nul + 1, gk_len);
  }
  if (!ours) return 0;
  const char *why = memchr(val, '\n', vlen);
  size_t why_len = why ? vlen - (size_t)(why + 1 - (const char *)val) : 0;
  char *name = malloc(klen - pl + 1);
  if (!name) return h->oom = 1;
  memcpy(name, k, klen - pl);
  name[kind_len] = ':';
  name[klen - pl] = 0;
  json_t *o = json_pack("{s:s, s:s%}", "group", name, "reason", why ? why + 1 : "", why_len);
  free(name);
  if (!o || json_array_append_new(h->list, o)) return h->oom = 1;
  return 0;
}

/* A pool topic's backlog of this job: job messages above the workers'
 * committed offset whose task has no record yet. */
typedef struct waiting {
  char *topic, *pool;
  uint64_t shards;
  uint64_t forwarded;       /* of them, copies a busy worker forwarded */
  char forwarded_from[256]; /* the first such worker */
  size_t members;
  bool members_known;
} waiting_t;

static bool known_task(const expect_t *x, const char *tk) { return altar_cli_expect_find(x, tk) != NULL; }

static int scan_waiting(altar_config_t *cfg, const char *job, const expect_t *x, waiting_t **pw, size_t *pn) {
  *pw = NULL;
  *pn = 0;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  altar_topic_list_t *tl = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, NULL, 10000, &tl, &err);
  waiting_t *w = rc ? NULL : calloc(tl->n_topics ? tl->n_topics : 1, sizeof *w);
  for (size_t i = 0; w && i < tl->n_topics; i++) {
    const char *pool;
    const altar_topic_info_t *ti = &tl->topics[i];
    if (!altar_pool_of_topic(cfg->topics.jobs, ti->name, &pool)) continue;
    waiting_t *wt = &w[*pn];
    altar_transport_t *r = altar_cli_open_transport(cfg, NULL);
    altar_tp_t *tps = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *tps);
    int64_t *ends = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *ends);
    size_t ntp = 0;
    for (size_t p = 0; r && tps && ends && p < ti->n_partitions; p++) {
      int64_t off = ALTAR_OFFSET_INVALID;
      char *md = NULL;
      altar_transport_committed(t, ALTAR_WORKER_GROUP, ti->name, ti->partitions[p].partition, 5000, &off, &md, &err);
      free(md);
      int64_t from = off >= 0 ? off : ti->partitions[p].beginning;
      if (from >= ti->partitions[p].end) continue;
      ends[ntp] = ti->partitions[p].end;
      tps[ntp++] = (altar_tp_t){ti->name, ti->partitions[p].partition, from};
    }
    size_t left = ntp;
    if (left && altar_transport_assign(r, tps, ntp, &err)) left = 0;
    while (left) {
      altar_msg_t *m = NULL;
      if (altar_transport_consume(r, 1000, &m, &err) || !m) continue;
      altar_job_msg_t jm = {0};
      altar_error_t de = {0};
      char tk[ALTAR_TASK_KEY_LEN + 1];
      if (m->value && altar_decode_job(m->value, m->value_len, &jm, &de) == ALTAR_OK) {
        const char *jid = altar_strmap_get(&jm.spec.labels, ALTAR_JOB_ID_LABEL);
        if (jid && !strcmp(jid, job) && altar_spec_identity(&jm.spec, tk, &de) == ALTAR_OK && !known_task(x, tk)) {
          wt->shards++;
          char by[sizeof wt->forwarded_from];
          if (altar_forward_origin(m, by, sizeof by) && !wt->forwarded++) memcpy(wt->forwarded_from, by, sizeof by);
        }
      }
      altar_job_msg_clear(&jm);
      for (size_t k = 0; k < ntp; k++)
        if (tps[k].partition == m->partition && m->offset + 1 >= ends[k]) left--;
      altar_msg_free(m);
    }
    free(tps);
    free(ends);
    altar_transport_close(r);
    if (!wt->shards) continue;
    wt->topic = strdup(ti->name);
    wt->pool = strdup(pool ? pool : ALTAR_POOL_CPU);
    wt->members_known =
        altar_transport_topic_members(t, ALTAR_WORKER_GROUP, ti->name, 5000, &wt->members, &err) == ALTAR_OK;
    (*pn)++;
  }
  altar_topic_list_free(tl);
  altar_transport_close(t);
  *pw = w;
  return rc ? -1 : 0;
}

/* The job's group events on topic: *pgroups and *pshards count them, except
 * those of `altar cancel` (on the dead topic), which *pcancelled and
 * *pcancelled_shards count when given. */
#define STATUS_MAX_STAGES 16

/* Counts the job's group events on topic; per stage too when stages is set
 * (by_stage[stage], STATUS_MAX_STAGES of them). */
static int count_groups(altar_config_t *cfg, const char *topic, const char *job, uint64_t *pgroups, uint64_t *pshards,
                        uint64_t *pcancelled, uint64_t *pcancelled_shards, const altar_group_specs_t *stages,
                        uint64_t *by_stage) {
  *pgroups = *pshards = 0;
  if (pcancelled) *pcancelled = *pcancelled_shards = 0;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  altar_topic_list_t *tl = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, topic, 10000, &tl, &err);
  if (rc == ALTAR_ENOTFOUND) {
    altar_transport_close(t);
    return 0;
  }
  size_t np = rc ? 0 : tl->topics[0].n_partitions;
  altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
  int64_t *ends = calloc(np ? np : 1, sizeof *ends);
  size_t left = 0;
  for (size_t i = 0; tps && ends && i < np; i++) {
    tps[i] = (altar_tp_t){topic, tl->topics[0].partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    ends[i] = tl->topics[0].partitions[i].end;
    left += ends[i] > tl->topics[0].partitions[i].beginning;
  }
  if (left && altar_transport_assign(t, tps, np, &err)) left = 0, rc = -1;
  while (left) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 1000, &m, &err) || !m) continue;
    altar_group_event_t g = {0};
    altar_error_t de = {0};
    if (m->value && !altar_decode_group(m->value, m->value_len, &g, &de) && g.n_shards) {
      const char *jid = altar_strmap_get(&g.shards[0].labels, ALTAR_JOB_ID_LABEL);
      if (jid && !strcmp(jid, job) && pcancelled && g.event == ALTAR_GROUP_CANCELLED) {
        (*pcancelled)++;
        *pcancelled_shards += ALTAR_GROUP_MEMBERS(&g);
      } else if (jid && !strcmp(jid, job)) {
        (*pgroups)++;
        *pshards += ALTAR_GROUP_MEMBERS(&g); /* a wide group's head lists the first of them */
        int st = stages ? altar_cli_stage_of(stages, g.kind) : 0;
        if (by_stage && st > 0 && st < STATUS_MAX_STAGES) by_stage[st]++;
      }
    }
    altar_group_event_clear(&g);
    for (size_t i = 0; i < np; i++)
      if (tps[i].partition == m->partition && m->offset + 1 >= ends[i]) left--;
    altar_msg_free(m);
  }
  free(tps);
  free(ends);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc ? -1 : 0;
}

/* "  retried: KEY (labels): attempt 1 failed timeout (worker w1): ERROR: ...;
 * attempt 2 succeeded (worker w2)", one line per shard that ran more than once. */
static void print_retried(json_t *retried, size_t max) {
  size_t n = json_array_size(retried);
  for (size_t i = 0; i < n && i < max; i++) {
    json_t *r = json_array_get(retried, i), *labels = json_object_get(r, "labels"),
           *at = json_object_get(r, "attempts");
    printf("  retried: %.12s (", json_string_value(json_object_get(r, "task_key")));
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(labels, k, v) {
      if (!strcmp(k, ALTAR_JOB_ID_LABEL)) continue;
      printf("%s%s=%s", first ? "" : " ", k, json_string_value(v));
      first = false;
    }
    printf(")");
    json_int_t dropped = json_integer_value(json_object_get(r, "attempts_dropped"));
    if (dropped) printf(" %lld older attempt%s dropped;", (long long)dropped, dropped == 1 ? "" : "s");
    for (size_t a = 0; a < json_array_size(at); a++) {
      json_t *x = json_array_get(at, a);
      const char *reason = json_string_value(json_object_get(x, "reason"));
      const char *worker = json_string_value(json_object_get(x, "worker"));
      const char *detail = json_string_value(json_object_get(x, "detail"));
      printf("%s attempt %lld %s%s%s (worker %s)", a ? ";" : ":",
             (long long)json_integer_value(json_object_get(x, "attempt")),
             json_string_value(json_object_get(x, "state")), reason ? " " : "", reason ? reason : "",
             worker ? worker : "unknown");
      if (detail) {
        char why[256];
        altar_cli_failure_summary(detail, why, sizeof why);
        printf(": %s", why);
      }
    }
    printf("\n");
  }
  if (n > max)
    printf("  retried: ... and %zu more shard%s that ran more than once\n", n - max, n - max == 1 ? "" : "s");
}

/* "  why: 2 shards not running: 1 backoff, 1 no_free_slot", then one line
 * per shard (at most max): "  why: 1a2b3c4d5e6f (waiting) behind: ...". */
static void print_why(json_t *why, size_t max) {
  const char *err = json_string_value(json_object_get(why, "error"));
  if (err) {
    printf("  why: not known (%s)\n", err);
    return;
  }
  json_int_t total = json_integer_value(json_object_get(why, "total"));
  if (!total) return;
  printf("  why: %lld shard%s not running%s:", (long long)total, ALTAR_CLI_PLURAL(total),
         json_is_true(json_object_get(why, "partial")) ? " (so far: the log was not read to its end in time)" : "");
  const char *k;
  json_t *n;
  bool first = true;
  json_object_foreach(json_object_get(why, "counts"), k, n) {
    printf("%s %lld %s", first ? "" : ",", (long long)json_integer_value(n), k);
    first = false;
  }
  printf("\n");
  json_t *shards = json_object_get(why, "shards");
  for (size_t i = 0; i < json_array_size(shards) && i < max; i++) {
    json_t *sh = json_array_get(shards, i);
    char line[512];
    altar__why_text(json_object_get(sh, "why"), line, sizeof line);
    printf("  why: %.12s (%s) %s\n", json_string_value(json_object_get(sh, "task_key")),
           json_string_value(json_object_get(sh, "state")), line);
  }
  if ((size_t)total > max && json_array_size(shards) > max)
    printf("  why: ... and %lld more (--json lists up to %d)\n", (long long)total - (long long)max,
           ALTAR_FLEET_VIEW_LIMIT_MAX);
}

int altar_cmd_status(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  altar_config_t cfg;
  argc = altar_cli_fleet_config(argc, argv, &cfg);
  const char *job;
  bool json, outputs;
  int arc = altar_cli_id_and_view_flags(argc, argv, "status", usage, &cfg, &job, &json, &outputs);
  if (arc) return arc;
  if (outputs) {
    altar_group_specs_t og = {0};
    bool have = !altar_cli_load_groups(&cfg, &og);
    uint64_t nf = 0, nfs = 0;
    if (count_groups(&cfg, cfg.topics.ready, job, &nf, &nfs, NULL, NULL, NULL, NULL)) nf = 0;
    int orc = altar_cli_print_outputs(&cfg, have ? &og : NULL, job, (size_t)nf, json);
    altar_group_specs_clear(&og);
    altar_config_clear(&cfg);
    return orc;
  }
  expect_t x = {0};
  tally_t t = {.job = job, .jobs_topic = cfg.topics.jobs, .x = &x};
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_ledger_t *l = altar_ledger_rocksdb_open(cfg.ledger_path, &ro, &err);
  t.l = l;
  t.retried = json_array();
  bool have_ledger = l && altar_attempts_keys(l, &t.ran_again, &t.n_ran_again, &err) == ALTAR_OK &&
                     altar_ledger_foreach(l, visit, &t, &err) == ALTAR_OK;
  altar_attempts_keys_free(t.ran_again, t.n_ran_again);
  held_scan_t held = {.x = &x, .list = json_array()};
  if (have_ledger && !t.oom && held.list) {
    altar_error_t he = {0};
    altar_ledger_aux_scan(l, ALTAR_HELD_PREFIX, strlen(ALTAR_HELD_PREFIX), visit_held, &held, &he);
  }
  altar_ledger_close(l);
  waiting_t *wv = NULL;
  size_t nw = 0;
  int xrc = t.oom || altar_cli_expect_seal(&x) || altar_cli_job_snapshot(&cfg, job, &x) ||
            scan_waiting(&cfg, job, &x, &wv, &nw);
  size_t late = 0;
  for (size_t i = 0; i < x.n_shards; i++) late += x.shards[i].late;
  uint64_t fired = 0, fired_shards = 0, dead = 0, dead_shards = 0, cancelled = 0, cancelled_shards = 0;
  /* A pipeline's groups per stage (then/then_dead in the config). */
  altar_group_specs_t groups = {0};
  bool staged = false;
  if (!altar_cli_load_groups(&cfg, &groups))
    for (size_t i = 0; i < groups.n && !staged; i++) staged = groups.v[i].then || groups.v[i].then_dead;
  uint64_t fired_by[STATUS_MAX_STAGES] = {0}, dead_by[STATUS_MAX_STAGES] = {0};
  int rc =
      count_groups(&cfg, cfg.topics.ready, job, &fired, &fired_shards, NULL, NULL, staged ? &groups : NULL, fired_by) |
      count_groups(&cfg, cfg.topics.dead, job, &dead, &dead_shards, &cancelled, &cancelled_shards,
                   staged ? &groups : NULL, dead_by);
  /* A job id nothing knows (a typo, another fleet's log) is an error, not a
   * row of zeros. */
  if (!rc && !xrc && !t.total && !x.n_shards && !fired && !dead && !cancelled && !nw) {
    fprintf(stderr, "altar status: job %s not found: no shard of it on %s, in the ledger %s or in a group event\n", job,
            cfg.topics.jobs, cfg.ledger_path);
    free(wv); /* nw is 0: no entry to free */
    altar_cli_failed_clear(&t.failed);
    json_decref(held.list);
    json_decref(t.retried);
    altar_cli_expect_clear(&x);
    altar_group_specs_clear(&groups);
    altar_config_clear(&cfg);
    return STATUS_EXIT_NOT_FOUND;
  }
  /* Why each shard that is not running waits, as the dashboard says it. */
  json_t *why = NULL;
  altar_error_t why_err = {0};
  /* A job whose every shard finished and was consumed, none cancelled, none
   * waiting and no group held has nothing to explain: the fleet view (a
   * read of the topics) is not needed. */
  bool settled = have_ledger && !t.by_state[ALTAR_STATE_PENDING] && !t.by_state[ALTAR_STATE_RUNNING] &&
                 t.consumed == t.total && !t.cancelled && !nw && !json_array_size(held.list);
  if (settled)
    why = json_pack("{s:s, s:I, s:I, s:I, s:{}, s:[], s:b}", "job_id", job, "total", (json_int_t)0, "offset",
                    (json_int_t)0, "limit", (json_int_t)ALTAR_FLEET_VIEW_LIMIT_MAX, "counts", "shards", "partial", 0);
  else if (altar_cli_job_why(&cfg, job, &why, &why_err))
    why = json_pack("{s:s, s:{}, s:I, s:[]}", "error", why_err.msg, "counts", "total", (json_int_t)0, "shards");
  if (json) {
    json_t *o = json_pack("{s:s, s:b, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I}}", "job_id", job,
                          "ledger", have_ledger, "shards", "total", (json_int_t)t.total, "replaced_runs",
                          (json_int_t)t.replaced, "pending", (json_int_t)t.by_state[0], "running",
                          (json_int_t)t.by_state[1], "succeeded", (json_int_t)t.by_state[2], "failed",
                          (json_int_t)t.by_state[3], "consumed", (json_int_t)t.consumed, "groups", "fired",
                          (json_int_t)fired, "dead_lettered", (json_int_t)dead, "cancelled", (json_int_t)cancelled);
    json_t *wj = json_array(), *lj = json_array();
    for (size_t i = 0; i < nw; i++)
      json_array_append_new(wj, json_pack("{s:s, s:s, s:I, s:o, s:I, s:o}", "pool", wv[i].pool, "topic", wv[i].topic,
                                          "shards", (json_int_t)wv[i].shards, "workers",
                                          wv[i].members_known ? json_integer((json_int_t)wv[i].members) : json_null(),
                                          "forwarded", (json_int_t)wv[i].forwarded, "forwarded_from",
                                          wv[i].forwarded ? json_string(wv[i].forwarded_from) : json_null()));
    for (size_t i = 0; i < x.n_shards; i++) {
      const follow_shard_t *sh = &x.shards[i];
      if (!sh->late) continue;
      json_array_append_new(lj, json_pack("{s:s, s:s, s:o}", "task_key", sh->task_key, "state",
                                          sh->state == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed", "reason",
                                          sh->reason ? json_string(sh->reason) : json_null()));
    }
    if (o) {
      json_object_set_new(o, "failed", altar_cli_failed_json(&t.failed));
      json_object_set_new(o, "waiting", wj);
      json_object_set_new(o, "late", lj);
      json_object_set(o, "held", held.list ? held.list : json_array());
      json_object_set(o, "retried", t.retried ? t.retried : json_array());
      json_object_set(o, "why", why ? why : json_object());
    }
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
  } else {
    printf("job %s\n", job);
    if (have_ledger)
      printf("  shards: %llu recorded; %llu pending, %llu running, %llu succeeded, %llu failed; %llu consumed"
             "; %llu earlier run%s kept as attempts\n",
             (unsigned long long)t.total, (unsigned long long)t.by_state[0], (unsigned long long)t.by_state[1],
             (unsigned long long)t.by_state[2], (unsigned long long)t.by_state[3], (unsigned long long)t.consumed,
             (unsigned long long)t.replaced, ALTAR_CLI_PLURAL(t.replaced));
    else printf("  shards: ledger %s not readable here (%s)\n", cfg.ledger_path, err.msg);
    printf("  groups: %llu fired (%llu shard%s), %llu dead-lettered (%llu shard%s)", (unsigned long long)fired,
           (unsigned long long)fired_shards, ALTAR_CLI_PLURAL(fired_shards), (unsigned long long)dead,
           (unsigned long long)dead_shards, ALTAR_CLI_PLURAL(dead_shards));
    if (cancelled)
      printf(", %llu cancelled (%llu shard%s)", (unsigned long long)cancelled, (unsigned long long)cancelled_shards,
             ALTAR_CLI_PLURAL(cancelled_shards));
    printf("\n");
    for (int st = 1; staged && st < STATUS_MAX_STAGES; st++) {
      if (!fired_by[st] && !dead_by[st]) continue;
      printf("  stage %d:", st);
      for (size_t i = 0; i < groups.n; i++)
        if (altar_cli_stage_of(&groups, groups.v[i].kind) == st) printf(" %s", groups.v[i].kind);
      printf(": %llu fired, %llu dead-lettered\n", (unsigned long long)fired_by[st], (unsigned long long)dead_by[st]);
    }
    altar_cli_failed_print(&t.failed, 20);
    print_retried(t.retried, 20);
    for (size_t i = 0; held.list && i < json_array_size(held.list); i++) {
      json_t *h = json_array_get(held.list, i);
      printf("  held: group %s neither fired nor consumed: %s (fix the kind's group config and restart the "
             "reconciler)\n",
             json_string_value(json_object_get(h, "group")), json_string_value(json_object_get(h, "reason")));
    }
    for (size_t i = 0; i < nw; i++) {
      const char *s = wv[i].shards == 1 ? "" : "s";
      if (wv[i].members_known && !wv[i].members)
        printf("  waiting: %llu shard%s waiting for pool %s; no worker serves it\n", (unsigned long long)wv[i].shards,
               s, wv[i].pool);
      else if (wv[i].forwarded)
        printf("  waiting: %llu shard%s queued for pool %s; %llu forwarded by %s (no free slot there) to a worker "
               "with one\n",
               (unsigned long long)wv[i].shards, s, wv[i].pool, (unsigned long long)wv[i].forwarded,
               wv[i].forwarded_from);
      else printf("  waiting: %llu shard%s queued for pool %s\n", (unsigned long long)wv[i].shards, s, wv[i].pool);
    }
    print_why(why, 20);
    if (late) {
      printf("  late: %zu late shard%s after group settled:", late, late == 1 ? "" : "s");
      for (size_t i = 0; i < x.n_shards; i++) {
        const follow_shard_t *sh = &x.shards[i];
        if (sh->late)
          printf(" %.12s %s%s%s;", sh->task_key, sh->state == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed",
                 sh->reason ? " " : "", sh->reason ? sh->reason : "");
      }
      printf("\n");
    }
  }
  for (size_t i = 0; i < nw; i++) {
    free(wv[i].topic);
    free(wv[i].pool);
  }
  free(wv);
  json_decref(why);
  altar_cli_failed_clear(&t.failed);
  json_decref(held.list);
  json_decref(t.retried);
  altar_cli_expect_clear(&x);
  altar_group_specs_clear(&groups);
  altar_config_clear(&cfg);
  return rc || xrc ? 1 : 0;
}
