/* Settled groups as stored: one record per settled group and an index key
 * per member, read back lazily through a bounded cache to the same set
 * (and so the same decisions), pruned by record, ledgers of the older
 * layouts carried over, and damaged records skipped and reported. Drives altar__settled_* one batch at a
 * time as the daemon does, over a RocksDB ledger in a temporary directory
 * and over the in-memory ledger. */
#include "altar/config.h"
#include "altar/ledger.h"
#include "reconciler/settled.h"
#include "reconciler/settled_record.h"
#include "ledger_suite.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double H = ALTAR_SETTLED_HORIZON_S;

static const char *specs_yaml = "pair:\n  group_by: [job_id]\n  ready_when: {count_at_least: 2}\n"
                                "wide:\n  group_by: [job_id]\n  ready_when: {count_at_least: 40}\n"
                                "dead:\n  group_by: [job_id]\n  ready_when: {count_at_least: 2}\n"
                                "  on_failed: dead_letter\n"
                                "one:\n  group_by: [job_id]\n  ready_when: {count_at_least: 1}\n";

typedef struct fixture {
  char *root;
  altar_ledger_t *l;
  altar_group_specs_t groups;
  altar__settled_t s;
  size_t cache; /* entries the set keeps in memory; 0: the default */
} fixture_t;

static altar_ledger_t *open_ledger(const char *root) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/ledger", root);
  return altar_test_ledger_open(dir); /* the suite's ledger, RocksDB or in-memory */
}

/* Loads the settled set of f's ledger into f->s. */
static void load(fixture_t *f) {
  altar_error_t err = {0};
  int rc = altar__settled_load(&f->s, f->l, f->cache, &err);
  if (rc) fprintf(stderr, "load: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
}

static void fx_open(fixture_t *f, const char *tag) {
  memset(f, 0, sizeof *f);
  f->root = altar_test_tmpdir(tag);
  f->l = open_ledger(f->root);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &f->groups, &err) == 0);
  load(f);
}

/* A daemon restart: the set is loaded anew from the reopened ledger. */
static void fx_restart(fixture_t *f) {
  altar__settled_free(&f->s);
  altar_test_ledger_close(f->l);
  f->l = open_ledger(f->root);
  load(f);
}

static void fx_close(fixture_t *f) {
  altar__settled_free(&f->s);
  altar_test_ledger_close(f->l);
  altar_group_specs_clear(&f->groups);
  altar_test_rmtree(f->root);
  free(f->root);
}

/* A status event of fold `fold` of job, run `run`: task key "tk-<job>-<fold>",
 * handle process/"<job>-<fold>-<run>"; a submission or a success. */
static void ev_fill(altar_status_event_t *e, const char *kind, bool submitted, const char *job, int fold,
                    const char *run, double ts) {
  memset(e, 0, sizeof *e);
  e->v = ALTAR_SCHEMA_VERSION;
  e->event = submitted ? ALTAR_EV_SUBMITTED : ALTAR_EV_STATE;
  e->state = submitted ? ALTAR_STATE_PENDING : ALTAR_STATE_SUCCEEDED;
  e->ts = ts;
  char eid[64], tk[64], fs[8];
  snprintf(eid, sizeof eid, "%s-%d-%s", job, fold, run);
  snprintf(tk, sizeof tk, "tk-%s-%d", job, fold);
  snprintf(fs, sizeof fs, "%d", fold);
  e->task_key = strdup(tk);
  e->kind = strdup(kind);
  altar_handle_init(&e->handle, "process", eid);
  altar_strmap_set(&e->handle.labels, "job_id", job);
  altar_strmap_set(&e->handle.labels, "fold", fs);
  if (submitted) {
    e->spec = altar_spec_new(kind, "img:1");
    altar_spec_add_arg(e->spec, "run");
    altar_spec_set_label(e->spec, "job_id", job);
  }
}

/* Applies n events in one batch as the daemon does, committed (or aborted
 * when abort is set); returns the events set aside, *pfired the groups. */
static size_t batch(fixture_t *f, altar_status_event_t *evs, size_t n, bool abort, size_t *pfired) {
  altar_error_t err = {0};
  altar_apply_result_t res = {0};
  size_t skipped = 0;
  CU_ASSERT_FATAL(altar_ledger_begin(f->l, &err) == 0);
  int rc = altar__settled_apply(&f->s, f->l, &f->groups, evs, n, &res, &skipped, &err);
  if (rc) fprintf(stderr, "apply: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  if (abort) {
    CU_ASSERT_FATAL(altar_ledger_abort(f->l, &err) == 0);
    altar__settled_abort(&f->s);
  } else {
    CU_ASSERT_FATAL(altar_ledger_commit(f->l, &err) == 0);
    altar__settled_commit(&f->s);
  }
  if (pfired) *pfired = res.n_events;
  altar_apply_result_clear(&res);
  for (size_t i = 0; i < n; i++) altar_status_event_clear(&evs[i]);
  return skipped;
}

/* Runs every fold of job (run `run`, all at ts) to success in one batch;
 * returns the groups that settled. */
static size_t settle(fixture_t *f, const char *kind, const char *job, int folds, const char *run, double ts,
                     bool abort) {
  altar_status_event_t *evs = calloc(2 * (size_t)folds, sizeof *evs);
  CU_ASSERT_FATAL(evs != NULL);
  for (int i = 0; i < folds; i++) {
    ev_fill(&evs[i], kind, true, job, i, run, ts);
    ev_fill(&evs[folds + i], kind, false, job, i, run, ts);
  }
  size_t fired = 0;
  batch(f, evs, 2 * (size_t)folds, abort, &fired);
  free(evs);
  return fired;
}

/* True when a submission of fold `fold` of job by run `run` at ts is
 * applied (false: set aside as a rerun of a settled task). */
static bool applies(fixture_t *f, const char *job, int fold, const char *run, double ts) {
  altar_status_event_t e;
  ev_fill(&e, "pair", true, job, fold, run, ts);
  return batch(f, &e, 1, false, NULL) == 0;
}

static int count_aux(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  (void)k, (void)kl, (void)v, (void)vl;
  (*(size_t *)ctx)++;
  return 0;
}

static size_t keys_under(altar_ledger_t *l, const char *prefix) {
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT(altar_ledger_aux_scan(l, prefix, strlen(prefix), count_aux, &n, &err) == 0);
  return n;
}

/* The settled set as sorted "task key=run@ts" lines. */
typedef struct dump {
  char *v[512];
  size_t n;
} dump_t;

static int cmp_line(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int dump_visit(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  dump_t *d = ctx;
  uint64_t seq;
  double ts;
  const char *run;
  size_t rl;
  CU_ASSERT_FATAL(altar__settled_index_parse(v, vl, &seq, &ts, &run, &rl));
  CU_ASSERT_FATAL(d->n < 512);
  char line[512];
  snprintf(line, sizeof line, "%.*s=%.*s@%.17g", (int)(kl - ALTAR__SETTLED_INDEX_PREFIX_LEN),
           (const char *)k + ALTAR__SETTLED_INDEX_PREFIX_LEN, (int)rl, run, ts);
  d->v[d->n++] = strdup(line);
  return 0;
}

/* The settled set as the ledger's index holds it. */
static void dump(altar_ledger_t *l, dump_t *d) {
  d->n = 0;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(
      altar_ledger_aux_scan(l, ALTAR__SETTLED_INDEX_PREFIX, ALTAR__SETTLED_INDEX_PREFIX_LEN, dump_visit, d, &err) == 0);
  qsort(d->v, d->n, sizeof *d->v, cmp_line);
}

/* Entries in the index. */
static size_t entries(altar_ledger_t *l) { return keys_under(l, ALTAR__SETTLED_INDEX_PREFIX); }

/* A ledger written before the index existed: it has no next-seq key. */
static void drop_index_mark(altar_ledger_t *l) {
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_aux_del(l, ALTAR__SETTLED_NEXT_KEY, strlen(ALTAR__SETTLED_NEXT_KEY), &err) == 0);
}

static void dump_free(dump_t *d) {
  for (size_t i = 0; i < d->n; i++) free(d->v[i]);
  d->n = 0;
}

static bool dump_has(const dump_t *d, const char *line) {
  for (size_t i = 0; i < d->n; i++)
    if (!strcmp(d->v[i], line)) return true;
  return false;
}

static void assert_same(const dump_t *a, const dump_t *b) {
  CU_ASSERT_EQUAL_FATAL(a->n, b->n);
  for (size_t i = 0; i < a->n; i++) {
    if (strcmp(a->v[i], b->v[i])) fprintf(stderr, "settled set differs: %s / %s\n", a->v[i], b->v[i]);
    CU_ASSERT_STRING_EQUAL(a->v[i], b->v[i]);
  }
}

/* A settled group of 40 shards is one record holding its 40 members, and
 * the group's own entry ("#kind\x1fgroup_key", which tells late shards),
 * and one index key per entry. */
static void test_group_writes_one_key(void) {
  fixture_t f;
  fx_open(&f, "settled-one-key");
  CU_ASSERT_EQUAL(settle(&f, "wide", "w1", 40, "r1", 10.0, false), 1);
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 1);
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_OLD_PREFIX), 0);
  CU_ASSERT_EQUAL(entries(f.l), 41);
  fx_restart(&f);
  CU_ASSERT_EQUAL(entries(f.l), 41);
  CU_ASSERT_FALSE(applies(&f, "w1", 39, "r2", 11.0)); /* a rerun of the last member is set aside */
  fx_close(&f);
}

/* After several groups, one batch aborted, and a task settled twice (the
 * second time after the first expired) in two records, a reload gives the
 * same set, so the same decisions: the later record wins. */
static void test_reload_keeps_write_order(void) {
  fixture_t f;
  fx_open(&f, "settled-reload");
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r1", 10.0, false), 1);
  CU_ASSERT_EQUAL(settle(&f, "pair", "j2", 2, "r1", 20.0, false), 1);
  CU_ASSERT_EQUAL(settle(&f, "pair", "j3", 2, "r1", 25.0, true), 1); /* aborted: never settled */
  CU_ASSERT_FALSE(applies(&f, "j1", 0, "r2", 10.0 + H - 1));         /* within the horizon */
  /* Past it, j1 runs again, and settles again, in a newer record. */
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r3", 10.0 + H + 5, false), 1);
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 3);
  dump_t before, after;
  dump(f.l, &before);
  CU_ASSERT(dump_has(&before, "tk-j1-0=process\x1fj1-0-r3@604815"));
  CU_ASSERT(!dump_has(&before, "tk-j3-0=process\x1fj3-0-r1@25"));

  fx_restart(&f);
  dump(f.l, &after);
  assert_same(&before, &after);
  /* The run that settled last stands; the first run of j1 is now a rerun. */
  CU_ASSERT_FALSE(applies(&f, "j1", 0, "r1", 10.0 + H + 6));
  CU_ASSERT_TRUE(applies(&f, "j3", 0, "r2", 26.0));
  /* Records written after the reload follow the loaded ones. */
  CU_ASSERT_EQUAL(settle(&f, "pair", "j2", 2, "r4", 20.0 + H + 7, false), 1);
  dump_free(&before);
  dump(f.l, &before);
  fx_restart(&f);
  dump_free(&after);
  dump(f.l, &after);
  assert_same(&before, &after);
  CU_ASSERT(dump_has(&after, "tk-j2-1=process\x1fj2-1-r4@604827"));
  dump_free(&before);
  dump_free(&after);
  fx_close(&f);
}

static bool has_key(altar_ledger_t *l, uint64_t seq) {
  char k[ALTAR__SETTLED_KEY_LEN + 1];
  altar__settled_key(seq, k);
  altar_buf_t b = {0};
  altar_error_t err = {0};
  int rc = altar_ledger_aux_get(l, k, ALTAR__SETTLED_KEY_LEN, &b, &err);
  altar_buf_free(&b);
  return rc == ALTAR_OK;
}

/* Pruning deletes whole records by their ts, also one whose every member a
 * newer record took over, and drops only the entries a record still holds. */
static void test_prune_deletes_records(void) {
  fixture_t f;
  fx_open(&f, "settled-prune");
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r1", 10.0, false), 1);          /* record 0 */
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r2", 10.0 + H + 5, false), 1);  /* record 1: j1 again */
  CU_ASSERT_EQUAL(settle(&f, "pair", "j2", 2, "r1", 10.0 + H + 10, false), 1); /* record 2 */
  CU_ASSERT(has_key(f.l, 0) && has_key(f.l, 1) && has_key(f.l, 2));
  /* The pass due a horizon after the last one: twice the horizon after
   * record 0, and record 1 still counts. */
  CU_ASSERT_TRUE(applies(&f, "j9", 0, "r1", 10.0 + 2 * H + 5));
  CU_ASSERT(!has_key(f.l, 0) && has_key(f.l, 1) && has_key(f.l, 2));
  CU_ASSERT_EQUAL(f.s.pruned, 0);   /* record 0 held no entry any more (its group's either) */
  CU_ASSERT_EQUAL(entries(f.l), 6); /* two members and the group, of records 1 and 2 */
  CU_ASSERT_FALSE(applies(&f, "j1", 0, "r1", 10.0 + 2 * H + 5)); /* r2 still settles it */
  fx_restart(&f);
  CU_ASSERT_EQUAL(entries(f.l), 6);
  /* A horizon later the pass comes again, twice the horizon after 1 and 2. */
  CU_ASSERT_TRUE(applies(&f, "j9", 1, "r1", 10.0 + 3 * H + 200));
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 0);
  CU_ASSERT_EQUAL(entries(f.l), 0);
  CU_ASSERT_EQUAL(f.s.pruned, 6);
  fx_restart(&f);
  CU_ASSERT_EQUAL(entries(f.l), 0);
  fx_close(&f);
}

/* ledger.settled_horizon_s (tests, soaks): a set loaded after the setting
 * recognises reruns for that many seconds of event time and drops its
 * records at twice that, event times set by the test; the key is checked. */
static void test_horizon_setting(void) {
  const double h = 60;
  altar__settled_set_horizon_s(h);
  fixture_t f;
  fx_open(&f, "settled-horizon");
  CU_ASSERT_EQUAL(f.s.horizon_s, h);
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r1", 10.0, false), 1);
  CU_ASSERT_FALSE(applies(&f, "j1", 0, "r2", 10.0 + h - 1)); /* within the horizon: set aside */
  CU_ASSERT_EQUAL(settle(&f, "pair", "j2", 2, "r1", 10.0 + h + 5, false), 1);
  CU_ASSERT(has_key(f.l, 0) && has_key(f.l, 1));
  CU_ASSERT_TRUE(applies(&f, "j9", 0, "r1", 10.0 + 2 * h + 5)); /* the pass: record 0 is twice h old */
  CU_ASSERT(!has_key(f.l, 0) && has_key(f.l, 1));
  CU_ASSERT_TRUE(applies(&f, "j9", 1, "r1", 10.0 + 3 * h + 200));
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 0);
  fx_close(&f);
  altar__settled_set_horizon_s(0);
  fx_open(&f, "settled-horizon-default");
  CU_ASSERT_EQUAL(f.s.horizon_s, H);
  fx_close(&f);

  altar_config_t cfg;
  altar_error_t err = {0};
  char *dir = altar_test_tmpdir("settled-horizon-cfg");
  char path[4200];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  altar_test_write_file(path, "ledger: {path: ./l}\n", 20);
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_settled_horizon_s, 0); /* unset: the 7 days */
  altar_config_clear(&cfg);
  static const char yaml[] = "ledger: {path: ./l, settled_horizon_s: 120}\n";
  altar_test_write_file(path, yaml, sizeof yaml - 1);
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_settled_horizon_s, 120);
  static const char *const bad[] = {"0", "-1", "2m", "", "1.5", "3153600001"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_NOT_EQUAL(altar_config_set(&cfg, "ledger.settled_horizon_s", bad[i], &err), 0);
    CU_ASSERT(strstr(err.msg, "ledger.settled_horizon_s") != NULL);
  }
  CU_ASSERT_EQUAL(cfg.ledger_settled_horizon_s, 120);
  altar_config_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

/* An aborted batch drops the deletes of the records it pruned; the next
 * batch that commits deletes them. */
static void test_prune_survives_an_aborted_batch(void) {
  fixture_t f;
  fx_open(&f, "settled-prune-abort");
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r1", 10.0, false), 1);
  altar_status_event_t e;
  ev_fill(&e, "pair", true, "j9", 0, "r1", 10.0 + 2 * H + 100);
  batch(&f, &e, 1, true, NULL); /* prunes record 0, then aborts */
  CU_ASSERT_EQUAL(entries(f.l), 3);
  CU_ASSERT_TRUE(has_key(f.l, 0));
  CU_ASSERT_TRUE(applies(&f, "j9", 1, "r1", 10.0 + 2 * H + 101));
  CU_ASSERT_FALSE(has_key(f.l, 0));
  fx_close(&f);
}

static void put_raw(altar_ledger_t *l, const char *key, const void *val, size_t vlen) {
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_aux_put(l, key, strlen(key), val, vlen, &err) == 0);
}

/* A string literal's bytes, without the terminating NUL the compiler adds. */
#define PUT_LIT(l, key, lit) put_raw(l, key, lit, sizeof lit - 1)

/* A ledger of the older layout ("t/<task key>" per member, written raw
 * here): loaded as the older code loaded it, carried into records in one
 * write, then pruned as records; a record already there wins over an old
 * key of the same task. */
static void test_old_layout_is_carried_over(void) {
  fixture_t f;
  fx_open(&f, "settled-old");
  CU_ASSERT_EQUAL(settle(&f, "pair", "jb", 2, "r2", 50.0, false), 1); /* tk-jb-0, tk-jb-1 */
  altar__settled_free(&f.s);
  drop_index_mark(f.l); /* as a ledger written before the index */
  PUT_LIT(f.l, "t/tk-ja-0",
          "process\x1fja-0-r1\0"
          "100");
  PUT_LIT(f.l, "t/tk-ja-1",
          "process\x1fja-1-r1\0"
          "100");
  PUT_LIT(f.l, "t/tk-jb-0",
          "process\x1fjb-0-r1\0"
          "40");                                   /* older than the record */
  PUT_LIT(f.l, "t/tk-jc-0", "process\x1fjc-0-r1"); /* no ts: never expires */
  PUT_LIT(f.l, "t/tk-jd-0",
          "process\x1fjd-0-r1\0"
          "5000");
  PUT_LIT(f.l, "t/",
          "process\x1fx\0"
          "1"); /* no task key: ignored, as before */
  load(&f);
  dump_t d, again;
  dump(f.l, &d);
  CU_ASSERT_EQUAL(d.n, 7); /* and jb's group entry */
  CU_ASSERT(dump_has(&d, "tk-ja-0=process\x1fja-0-r1@100"));
  CU_ASSERT(dump_has(&d, "tk-ja-1=process\x1fja-1-r1@100"));
  CU_ASSERT(dump_has(&d, "tk-jb-0=process\x1fjb-0-r2@50"));
  CU_ASSERT(dump_has(&d, "tk-jc-0=process\x1fjc-0-r1@-inf"));
  CU_ASSERT(dump_has(&d, "tk-jd-0=process\x1fjd-0-r1@5000"));
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_OLD_PREFIX), 0);
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 4); /* jb's, and one per ts: -inf, 100, 5000 */
  fx_restart(&f);
  dump(f.l, &again);
  assert_same(&d, &again);
  dump_free(&again);
  CU_ASSERT_FALSE(applies(&f, "ja", 0, "r2", 150.0));
  /* Twice the horizon after ts 100: ja's record and jb's (50) go, jd's
   * (5000) and jc's (no ts) stay. */
  CU_ASSERT_TRUE(applies(&f, "j9", 0, "r1", 100.0 + 2 * H + 10));
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 2);
  dump(f.l, &again);
  CU_ASSERT_EQUAL(again.n, 2);
  CU_ASSERT(dump_has(&again, "tk-jc-0=process\x1fjc-0-r1@-inf"));
  CU_ASSERT(dump_has(&again, "tk-jd-0=process\x1fjd-0-r1@5000"));
  dump_free(&again);
  dump_free(&d);
  fx_close(&f);
}

/* Damaged record values (and a key of no record) are skipped, counted,
 * described and deleted; the intact records load. */
static void test_damaged_records_are_skipped(void) {
  fixture_t f;
  fx_open(&f, "settled-damaged");
  CU_ASSERT_EQUAL(settle(&f, "pair", "j1", 2, "r1", 10.0, false), 1); /* record 0 */
  const char ts[8] = {0x40, 0x24, 0, 0, 0, 0, 0, 0};                  /* 10.0 */
  static const char member[] = "tk-x\0process\x1fx-1";                /* and its NUL */
  char v[64];
  const size_t whole = 8 + sizeof member;
  memcpy(v, ts, 8);
  memcpy(v + 8, member, sizeof member);
  memcpy(v + whole, "tail", 4);
  put_raw(f.l, "g/00000000000000f0", ts, 5);        /* truncated inside the ts */
  put_raw(f.l, "g/00000000000000f1", v, whole - 1); /* truncated: the last NUL lost */
  put_raw(f.l, "g/00000000000000f2", v, 8 + 4);     /* a task key without its NUL */
  put_raw(f.l, "g/00000000000000f3", v, whole + 4); /* overlong: bytes after the last member */
  put_raw(f.l, "g/00000000000000fZ", v, whole);     /* not a record key */
  put_raw(f.l, "g/ffffffffffffffff", v, whole);     /* no sequence number after it */
  put_raw(f.l, "g/00000000000000f4", v, whole);     /* intact */
  drop_index_mark(f.l);                             /* the whole check runs when a ledger is indexed */
  fx_restart(&f);
  CU_ASSERT_EQUAL(f.s.damaged, 6);
  CU_ASSERT_EQUAL(f.s.damage.code, ALTAR_ELEDGER);
  CU_ASSERT_PTR_NOT_NULL(strstr(f.s.damage.msg, "6 damaged record(s)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(f.s.damage.msg, "g/00000000000000f0: too short"));
  CU_ASSERT_EQUAL(entries(f.l), 4); /* tk-j1-0, tk-j1-1, j1's group, tk-x */
  CU_ASSERT_EQUAL(f.s.next_seq, 0xf5);
  CU_ASSERT_EQUAL(keys_under(f.l, ALTAR__SETTLED_PREFIX), 2);
  CU_ASSERT_FALSE(applies(&f, "j1", 0, "r2", 11.0));
  fx_restart(&f);
  CU_ASSERT_EQUAL(f.s.damaged, 0);
  CU_ASSERT_EQUAL(entries(f.l), 4);
  fx_close(&f);
}

/* The member reader stays inside the value whatever its bytes. */
static int count_record(void *ctx, const altar_ledger_entry_t *e) {
  (void)e;
  (*(size_t *)ctx)++;
  return 0;
}

/* Every member a group's decision consumed is settled, listed in its event
 * or not: a dead-lettered group's succeeded shard run again later (its
 * first worker was killed) is set aside, not a second outcome of the task. */
static void test_unlisted_members_are_settled(void) {
  fixture_t f;
  fx_open(&f, "settled-unlisted");
  altar_status_event_t evs[4];
  ev_fill(&evs[0], "dead", true, "d1", 0, "r1", 10.0);
  ev_fill(&evs[1], "dead", false, "d1", 0, "r1", 10.0);
  ev_fill(&evs[2], "dead", true, "d1", 1, "r1", 10.0);
  ev_fill(&evs[3], "dead", false, "d1", 1, "r1", 10.0);
  evs[3].state = ALTAR_STATE_FAILED;
  evs[3].failure = altar_failure_new("exit_3", "command exited with code 3", true);
  size_t groups = 0;
  CU_ASSERT_EQUAL(batch(&f, evs, 4, false, &groups), 0);
  CU_ASSERT_EQUAL(groups, 1); /* dead-lettered, listing only fold 1 */
  for (int restart = 0; restart < 2; restart++) {
    ev_fill(&evs[0], "dead", true, "d1", 0, "r2", 12.0);
    ev_fill(&evs[1], "dead", false, "d1", 0, "r2", 12.0);
    CU_ASSERT_EQUAL(batch(&f, evs, 2, false, &groups), 2);
    CU_ASSERT_EQUAL(groups, 0);
    fx_restart(&f); /* and the same after a reload */
  }
  size_t records = 0;
  altar_error_t err = {0};
  CU_ASSERT(altar_ledger_foreach(f.l, count_record, &records, &err) == 0);
  CU_ASSERT_EQUAL(records, 2);
  fx_close(&f);
}

/* A late shard (terminal after its group settled) is recorded once; a
 * later run of the same task is set aside, not a second outcome. */
static void test_late_shard_rerun_is_set_aside(void) {
  fixture_t f;
  fx_open(&f, "settled-late-rerun");
  altar_status_event_t evs[3];
  ev_fill(&evs[0], "dead", true, "d2", 0, "r1", 10.0); /* still running when its group dies */
  ev_fill(&evs[1], "dead", true, "d2", 1, "r1", 10.0);
  ev_fill(&evs[2], "dead", false, "d2", 1, "r1", 10.0);
  evs[2].state = ALTAR_STATE_FAILED;
  evs[2].failure = altar_failure_new("exit_3", "command exited with code 3", true);
  size_t groups = 0;
  CU_ASSERT_EQUAL(batch(&f, evs, 3, false, &groups), 0);
  CU_ASSERT_EQUAL(groups, 1);
  ev_fill(&evs[0], "dead", false, "d2", 0, "r1", 11.0); /* late: recorded */
  CU_ASSERT_EQUAL(batch(&f, evs, 1, false, &groups), 0);
  CU_ASSERT_EQUAL(groups, 0);
  fx_restart(&f);
  ev_fill(&evs[0], "dead", true, "d2", 0, "r2", 12.0); /* a rerun after a kill */
  ev_fill(&evs[1], "dead", false, "d2", 0, "r2", 12.0);
  CU_ASSERT_EQUAL(batch(&f, evs, 2, false, &groups), 2);
  size_t records = 0;
  altar_error_t err = {0};
  CU_ASSERT(altar_ledger_foreach(f.l, count_record, &records, &err) == 0);
  CU_ASSERT_EQUAL(records, 2);
  fx_close(&f);
}

/* A run a newer run superseded stays marked so when its own end arrives
 * later: the shard's outcome is the newer run's. */
static void test_superseded_run_stays_superseded(void) {
  fixture_t f;
  fx_open(&f, "settled-superseded-end");
  altar_status_event_t evs[3];
  ev_fill(&evs[0], "pair", true, "p1", 0, "r1", 10.0);
  ev_fill(&evs[1], "pair", true, "p1", 0, "r2", 11.0);  /* supersedes r1 */
  ev_fill(&evs[2], "pair", false, "p1", 0, "r1", 12.0); /* r1 ends after all */
  CU_ASSERT_EQUAL(batch(&f, evs, 3, false, NULL), 0);
  altar_ledger_entry_t e = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_get(f.l, "process", "p1-0-r1", &e, &err) == 0);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED);
  CU_ASSERT(e.rec.failure && !strcmp(e.rec.failure->reason, ALTAR_REASON_SUPERSEDED));
  altar_ledger_entry_clear(&e);
  fx_close(&f);
}

/* One run of events through f: reruns in the same batch as their group's
 * decision and in later ones, an aborted batch, a late shard and its
 * rerun. What each batch set aside and fired goes into out (10 figures);
 * in memory after the first group: *pcached entries. */
static void replay_scenario(fixture_t *f, size_t out[10], size_t *pcached) {
  altar_status_event_t evs[5];
  size_t k = 0;
  ev_fill(&evs[0], "pair", true, "j1", 0, "r1", 10.0);
  ev_fill(&evs[1], "pair", true, "j1", 1, "r1", 10.0);
  ev_fill(&evs[2], "pair", false, "j1", 0, "r1", 10.0);
  ev_fill(&evs[3], "pair", false, "j1", 1, "r1", 10.0);
  ev_fill(&evs[4], "pair", true, "j1", 0, "r2", 10.5); /* a rerun the same batch settled */
  out[0] = batch(f, evs, 5, false, &out[1]);
  k = 2;
  *pcached = altar__settled_cache_size(&f->s.cache);
  out[k++] = applies(f, "j1", 1, "r3", 11.0);              /* a later rerun */
  out[k++] = settle(f, "pair", "j2", 2, "r1", 12.0, true); /* aborted: nothing settled */
  out[k++] = applies(f, "j2", 0, "r2", 13.0);
  ev_fill(&evs[0], "dead", true, "d2", 0, "r1", 14.0); /* still running when its group dies */
  ev_fill(&evs[1], "dead", true, "d2", 1, "r1", 14.0);
  ev_fill(&evs[2], "dead", false, "d2", 1, "r1", 14.0);
  evs[2].state = ALTAR_STATE_FAILED;
  evs[2].failure = altar_failure_new("exit_3", "command exited with code 3", true);
  out[k++] = batch(f, evs, 3, false, NULL);
  ev_fill(&evs[0], "dead", false, "d2", 0, "r1", 15.0); /* late: recorded */
  out[k++] = batch(f, evs, 1, false, NULL);
  ev_fill(&evs[0], "dead", true, "d2", 0, "r2", 16.0); /* its rerun */
  ev_fill(&evs[1], "dead", false, "d2", 0, "r2", 16.0);
  out[7] = batch(f, evs, 2, false, &out[8]);
  k += 2;
  out[9] = altar__settled_cache_size(&f->s.cache) > 0; /* entries read back since */
  CU_ASSERT_EQUAL(k, 9);
}

/* A replay keeps the members it notes in the cache's filter only, and
 * decides as the daemon does: the same events set aside, the same groups
 * fired, the same settled set and ledger checksum. */
static void test_replay_decides_as_the_daemon(void) {
  fixture_t a, b;
  fx_open(&a, "settled-daemon");
  fx_open(&b, "settled-replay");
  altar__settled_replay(&b.s);
  size_t da[10] = {0}, db[10] = {0}, cached_a = 0, cached_b = 0;
  replay_scenario(&a, da, &cached_a);
  replay_scenario(&b, db, &cached_b);
  for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(da[i], db[i]);
  CU_ASSERT_EQUAL(da[0], 1);    /* the rerun in the deciding batch */
  CU_ASSERT_EQUAL(da[1], 1);    /* fired */
  CU_ASSERT_EQUAL(da[2], 0);    /* the later rerun does not apply */
  CU_ASSERT_EQUAL(da[4], 1);    /* after the abort it does */
  CU_ASSERT_EQUAL(da[7], 2);    /* the late shard's rerun is set aside */
  CU_ASSERT_EQUAL(cached_a, 3); /* two members and the group */
  CU_ASSERT_EQUAL(cached_b, 1); /* only the member the rerun looked up, read back */
  dump_t xa, xb;
  dump(a.l, &xa);
  dump(b.l, &xb);
  assert_same(&xa, &xb);
  dump_free(&xa);
  dump_free(&xb);
  char sa[ALTAR_LEDGER_CHECKSUM_LEN + 1], sb[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_checksum(a.l, sa, &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_checksum(b.l, sb, &err) == 0);
  CU_ASSERT_STRING_EQUAL(sa, sb);
  fx_close(&a);
  fx_close(&b);
}

static void test_member_reader_bounds(void) {
  const char v[] = "\x40\x24\0\0\0\0\0\0"
                   "a\0b\x1f"
                   "c\0"
                   "d";
  altar__settled_member_t m;
  size_t pos = 0;
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 7, &pos, &m), -1);
  pos = 0;
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 8, &pos, &m), 0);
  pos = 0;
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 14, &pos, &m), 1);
  CU_ASSERT(m.klen == 1 && m.rlen == 3 &&
            !strcmp(m.run, "b\x1f"
                           "c"));
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 14, &pos, &m), 0);
  pos = 0;
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 10, &pos, &m), -1); /* the run's NUL is out of bounds */
  pos = 0;
  CU_ASSERT_EQUAL(altar__settled_member_next(v, 1, &pos, &m), -1);
  uint64_t seq;
  CU_ASSERT_TRUE(altar__settled_key_seq("g/00000000000000ab", 18, &seq) && seq == 0xab);
  CU_ASSERT_FALSE(altar__settled_key_seq("g/00000000000000AB", 18, &seq));
  CU_ASSERT_FALSE(altar__settled_key_seq("g/0000000000000ab", 17, &seq));
}

/* Runs fold `fold` of a "one" group (ready with one success) to its end. */
static size_t one_ends(fixture_t *f, const char *job, int fold, double ts) {
  altar_status_event_t e;
  ev_fill(&e, "one", false, job, fold, "r1", ts);
  size_t fired = 0;
  batch(f, &e, 1, false, &fired);
  return fired;
}

/* Submits folds 0 and 1 of a "one" group and ends fold 0: the group fires
 * with it while fold 1 still runs. */
static void one_fires(fixture_t *f, const char *job, double ts) {
  altar_status_event_t evs[2];
  ev_fill(&evs[0], "one", true, job, 0, "r1", ts);
  ev_fill(&evs[1], "one", true, job, 1, "r1", ts);
  batch(f, evs, 2, false, NULL);
  CU_ASSERT_EQUAL(one_ends(f, job, 0, ts), 1);
}

/* The cache holds at most its capacity; what it evicted is answered from
 * the ledger: a rerun of an evicted member is set aside, the fresh set's
 * bloom filter of evicted keys sending the look-up there. */
static void test_cache_evicts_and_misses_read_the_ledger(void) {
  fixture_t g;
  fx_open(&g, "settled-cache-evicts");
  g.cache = 2;
  altar__settled_free(&g.s);
  load(&g);
  for (int i = 0; i < 6; i++) {
    char job[16];
    snprintf(job, sizeof job, "c%d", i);
    CU_ASSERT_EQUAL(settle(&g, "pair", job, 2, "r1", 10.0 + i, false), 1);
    CU_ASSERT(altar__settled_cache_size(&g.s.cache) <= 2);
  }
  CU_ASSERT(g.s.cache.evicted >= 16); /* 18 entries through a cache of 2 */
  CU_ASSERT_EQUAL(entries(g.l), 18);
  CU_ASSERT_FALSE(g.s.pre_existing);
  uint64_t reads = g.s.ledger_reads;
  CU_ASSERT_FALSE(applies(&g, "c0", 0, "r2", 20.0)); /* evicted long ago: read from the ledger */
  CU_ASSERT(g.s.ledger_reads > reads);
  CU_ASSERT_TRUE(applies(&g, "n0", 0, "r1", 20.0)); /* never settled */
  CU_ASSERT(altar__settled_cache_size(&g.s.cache) <= 2);
  fx_close(&g);
}

/* Starting reads no settled entry: the cache is empty after a load however
 * many groups settled, and fills only as events ask. */
static void test_start_reads_no_entry(void) {
  fixture_t f;
  fx_open(&f, "settled-lazy-start");
  for (int i = 0; i < 20; i++) {
    char job[16];
    snprintf(job, sizeof job, "s%d", i);
    CU_ASSERT_EQUAL(settle(&f, "pair", job, 2, "r1", 10.0 + i, false), 1);
  }
  fx_restart(&f);
  CU_ASSERT_EQUAL(altar__settled_cache_size(&f.s.cache), 0);
  CU_ASSERT_EQUAL(f.s.ledger_reads, 0);
  CU_ASSERT_TRUE(f.s.pre_existing);
  CU_ASSERT_EQUAL(f.s.next_seq, 20);
  CU_ASSERT_FALSE(applies(&f, "s7", 1, "r2", 40.0));
  CU_ASSERT_EQUAL(altar__settled_cache_size(&f.s.cache), 1);
  /* a record written now follows the stored ones */
  CU_ASSERT_EQUAL(settle(&f, "pair", "s20", 2, "r1", 41.0, false), 1);
  CU_ASSERT_TRUE(has_key(f.l, 20));
  fx_close(&f);
}

/* A late event for a group that fired and whose entry the cache no longer
 * holds does not fire it again: fold 1 of a group ready with one success
 * ends after fold 0 fired it, once with the group's entry evicted from a
 * fresh set and once after a restart (the entry only in the ledger). */
static void test_late_event_of_evicted_group_does_not_fire(void) {
  fixture_t f;
  memset(&f, 0, sizeof f);
  f.root = altar_test_tmpdir("settled-late-evicted");
  f.l = open_ledger(f.root);
  f.cache = 2;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &f.groups, &err) == 0);
  load(&f);
  one_fires(&f, "o1", 10.0);
  one_fires(&f, "o2", 10.0);
  for (int i = 0; i < 4; i++) { /* push o1's and o2's entries out */
    char job[16];
    snprintf(job, sizeof job, "x%d", i);
    CU_ASSERT_EQUAL(settle(&f, "pair", job, 2, "r1", 11.0, false), 1);
  }
  CU_ASSERT(f.s.cache.evicted > 0);
  uint64_t reads = f.s.ledger_reads;
  CU_ASSERT_EQUAL(one_ends(&f, "o1", 1, 12.0), 0); /* late: recorded, no second event */
  CU_ASSERT(f.s.ledger_reads > reads);
  fx_restart(&f);
  CU_ASSERT_EQUAL(one_ends(&f, "o2", 1, 12.0), 0);
  /* the late shards are recorded and consumed, nothing of them open */
  altar_ledger_entry_t e = {0};
  CU_ASSERT_FATAL(altar_ledger_get(f.l, "process", "o1-1-r1", &e, &err) == 0);
  CU_ASSERT_TRUE(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  CU_ASSERT_FATAL(altar_ledger_get(f.l, "process", "o2-1-r1", &e, &err) == 0);
  CU_ASSERT_TRUE(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  fx_close(&f);
}

/* The cache itself: least recently used entries go first, a put replaces
 * the entry of its key, pruning drops an entry only for its own record. */
static void test_cache_order(void) {
  altar__settled_cache_t c = {.cap = 2, .track_evicted = true};
  altar__settled_cache_put(&c, altar__settled_entry_new("a", 1, "r", 1, 1, 1.0));
  altar__settled_cache_put(&c, altar__settled_entry_new("b", 1, "r", 1, 2, 1.0));
  CU_ASSERT_PTR_NOT_NULL(altar__settled_cache_get(&c, "a", 1, altar__hash("a", 1))); /* a is now newest */
  altar__settled_cache_put(&c, altar__settled_entry_new("c", 1, "r", 1, 3, 1.0));    /* evicts b */
  CU_ASSERT_PTR_NULL(altar__settled_cache_get(&c, "b", 1, altar__hash("b", 1)));
  CU_ASSERT_TRUE(altar__settled_cache_maybe_evicted(&c, altar__hash("b", 1)));
  CU_ASSERT_FALSE(altar__settled_cache_maybe_evicted(&c, altar__hash("a", 1)));
  altar__settled_cache_put(&c, altar__settled_entry_new("a", 1, "r2", 2, 4, 2.0)); /* replaces */
  const altar__settled_entry_t *e = altar__settled_cache_get(&c, "a", 1, altar__hash("a", 1));
  CU_ASSERT_FATAL(e != NULL);
  CU_ASSERT_EQUAL(e->seq, 4);
  CU_ASSERT_STRING_EQUAL(altar__settled_entry_run(e), "r2");
  CU_ASSERT_EQUAL(altar__settled_cache_size(&c), 2);
  altar__settled_cache_drop(&c, "a", 1, altar__hash("a", 1), 1); /* not its record any more */
  CU_ASSERT_EQUAL(altar__settled_cache_size(&c), 2);
  altar__settled_cache_drop(&c, "a", 1, altar__hash("a", 1), 4);
  CU_ASSERT_EQUAL(altar__settled_cache_size(&c), 1);
  CU_ASSERT_EQUAL(c.evicted, 1);
  altar__settled_cache_free(&c);
}

static void add_tests(CU_pSuite suite__, bool memory) {
  (void)memory;
  ALTAR_TEST(test_group_writes_one_key);
  ALTAR_TEST(test_reload_keeps_write_order);
  ALTAR_TEST(test_prune_deletes_records);
  ALTAR_TEST(test_horizon_setting);
  ALTAR_TEST(test_prune_survives_an_aborted_batch);
  ALTAR_TEST(test_old_layout_is_carried_over);
  ALTAR_TEST(test_damaged_records_are_skipped);
  ALTAR_TEST(test_unlisted_members_are_settled);
  ALTAR_TEST(test_late_shard_rerun_is_set_aside);
  ALTAR_TEST(test_superseded_run_stays_superseded);
  ALTAR_TEST(test_replay_decides_as_the_daemon);
  ALTAR_TEST(test_member_reader_bounds);
  ALTAR_TEST(test_cache_evicts_and_misses_read_the_ledger);
  ALTAR_TEST(test_start_reads_no_entry);
  ALTAR_TEST(test_late_event_of_evicted_group_does_not_fire);
  ALTAR_TEST(test_cache_order);
}

/* Every test on both ledgers. */
static void add(void) {
  CU_pSuite rocksdb = CU_add_suite("settled.rocksdb", altar_test_ledger_init_rocksdb, altar_test_ledger_cleanup);
  CU_pSuite memory = CU_add_suite("settled.memory", altar_test_ledger_init_memory, altar_test_ledger_cleanup);
  if (!rocksdb || !memory) return;
  add_tests(rocksdb, false);
  add_tests(memory, true);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
