/* Every run of a shard kept as an attempt (altar/attempts.h), on the
 * in-memory and the RocksDB ledger alike: a shard that timed out and then
 * succeeded keeps both runs with their reasons, workers and times, the
 * same whatever the batch sizes, covered by the checksum, and bounded by
 * the kind's attempts_keep with the dropped ones counted. */
#include "altar/attempts.h"
#include "altar/codec.h"
#include "altar/reconcile.h"
#include "ledger/ledger_prune.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV 64
static altar_status_event_t evs[MAXEV];
static size_t nev;

static void ev_reset(void) {
  for (size_t i = 0; i < nev; i++) altar_status_event_clear(&evs[i]);
  nev = 0;
}

/* An event of shard `fold` of job j1 run as external id eid by worker w. */
static altar_status_event_t *ev(altar_status_event_kind_t k, const char *eid, int fold, const char *w) {
  CU_ASSERT_FATAL(nev < MAXEV);
  altar_status_event_t *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->v = 1;
  e->event = k;
  e->kind = strdup("train");
  char tk[32];
  snprintf(tk, sizeof tk, "feed%04d", fold); /* the same task key for every run of the fold */
  e->task_key = strdup(tk);
  altar_handle_init(&e->handle, "process", eid);
  altar_strmap_set(&e->handle.labels, "job_id", "j1");
  char b[16];
  snprintf(b, sizeof b, "%d", fold);
  altar_strmap_set(&e->handle.labels, "fold", b);
  e->worker = w ? strdup(w) : NULL;
  e->ts = 1000.0 + (double)nev;
  if (k == ALTAR_EV_SUBMITTED) {
    e->spec = altar_spec_new("train", "img:1");
    altar_spec_add_arg(e->spec, "run");
    altar_spec_set_label(e->spec, "job_id", "j1");
    altar_spec_set_label(e->spec, "fold", b);
  }
  return e;
}

static void state(const char *eid, int fold, const char *w, altar_state_t s) {
  ev(ALTAR_EV_STATE, eid, fold, w)->state = s;
}

static void timeout(const char *eid, int fold, const char *w) {
  altar_status_event_t *e = ev(ALTAR_EV_STATE, eid, fold, w);
  e->state = ALTAR_STATE_FAILED;
  e->failure =
      altar_failure_new("timeout", "ran past timeout_s (2 s)\n--- stderr ---\nERROR: GPU worker stalled\n", false);
}

static const char *specs_yaml = "train:\n  group_by: [job_id]\n  ready_when: {all_folds: 2}\n"
                                "  on_failed: retry\n  max_restarts: 6\n  attempts_keep: 3\n";

/* Fold 0 succeeds at once; fold 1 times out on worker w1, and its retry
 * (a new external id, as the process backend gives) succeeds on w2. */
static void retried_shard(void) {
  ev_reset();
  ev(ALTAR_EV_SUBMITTED, "a0", 0, "w1");
  ev(ALTAR_EV_SUBMITTED, "a1", 1, "w1");
  state("a0", 0, "w1", ALTAR_STATE_RUNNING);
  state("a1", 1, "w1", ALTAR_STATE_RUNNING);
  state("a0", 0, "w1", ALTAR_STATE_SUCCEEDED);
  timeout("a1", 1, "w1");
  ev(ALTAR_EV_SUBMITTED, "b1", 1, "w2");
  state("b1", 1, "w2", ALTAR_STATE_RUNNING);
  state("b1", 1, "w2", ALTAR_STATE_SUCCEEDED);
}

static altar_ledger_t *open_kind(int rocks, char **pdir) {
  altar_error_t err = {0};
  *pdir = NULL;
  if (!rocks) return altar_ledger_memory_open(&err);
  *pdir = altar_test_tmpdir("attempts");
  altar_ledger_t *l = altar_ledger_rocksdb_open(*pdir, NULL, &err);
  if (!l) fprintf(stderr, "%s\n", err.msg);
  return l;
}

static void close_kind(altar_ledger_t *l, char *dir) {
  altar_ledger_close(l);
  if (dir) altar_test_rmtree(dir);
  free(dir);
}

/* Applies evs[0..nev) in batches of `batch`; returns the fired events. */
static size_t apply_all(altar_ledger_t *l, const altar_group_specs_t *s, size_t batch) {
  size_t fired = 0;
  for (size_t i = 0; i < nev; i += batch) {
    altar_apply_result_t r = {0};
    altar_error_t err = {0};
    size_t to = i + batch < nev ? i + batch : nev;
    int rc = altar_apply_events_atomic(l, s, evs + i, to - i, -1, &r, &err);
    if (rc) fprintf(stderr, "apply: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    for (size_t k = 0; k < r.n_events; k++) fired += r.events[k].event == ALTAR_GROUP_FIRED;
    altar_apply_result_clear(&r);
  }
  return fired;
}

static void load(altar_ledger_t *l, const char *eid, altar_attempts_t *at) {
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", eid, &e, &err), 0);
  int rc = altar_attempts_of(l, &e, at, &err);
  if (rc) fprintf(stderr, "attempts: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  altar_ledger_entry_clear(&e);
}

static void check_retried(altar_ledger_t *l) {
  altar_attempts_t at;
  /* The shard's record (b1) and the replaced run's (a1) tell the same story. */
  const char *ids[] = {"b1", "a1"};
  for (int k = 0; k < 2; k++) {
    load(l, ids[k], &at);
    CU_ASSERT_EQUAL_FATAL(at.n, 2);
    CU_ASSERT_EQUAL(at.dropped, 0);
    const altar_attempt_t *a = &at.v[0], *b = &at.v[1];
    CU_ASSERT_EQUAL(a->n, 1);
    CU_ASSERT_STRING_EQUAL(a->external_id, "a1");
    CU_ASSERT_EQUAL(a->state, ALTAR_STATE_FAILED);
    CU_ASSERT_FATAL(a->failure != NULL);
    CU_ASSERT_STRING_EQUAL(a->failure->reason, "timeout");
    CU_ASSERT(strstr(a->failure->detail, "ERROR: GPU worker stalled") != NULL);
    CU_ASSERT(!a->failure->deterministic);
    CU_ASSERT(a->worker && !strcmp(a->worker, "w1"));
    CU_ASSERT_EQUAL(a->ended_at, 1006.0); /* the timeout's own event time */
    CU_ASSERT_EQUAL(b->n, 2);
    CU_ASSERT_STRING_EQUAL(b->external_id, "b1");
    CU_ASSERT_EQUAL(b->state, ALTAR_STATE_SUCCEEDED);
    CU_ASSERT(b->failure == NULL);
    CU_ASSERT(b->worker && !strcmp(b->worker, "w2"));
    CU_ASSERT_EQUAL(b->restart_count, 1);
    CU_ASSERT_EQUAL(b->started_at, 1008.0);
    CU_ASSERT_EQUAL(b->ended_at, 1009.0);
    altar_attempts_clear(&at);
  }
  /* A shard that succeeded at once has its record as its one attempt. */
  load(l, "a0", &at);
  CU_ASSERT_EQUAL_FATAL(at.n, 1);
  CU_ASSERT_EQUAL(at.v[0].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_STRING_EQUAL(at.v[0].external_id, "a0");
  altar_attempts_clear(&at);
}

static void test_retried_shard_keeps_both_runs(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  char sums[4][ALTAR_LEDGER_CHECKSUM_LEN + 1];
  int k = 0;
  for (int rocks = 0; rocks < 2; rocks++)
    for (size_t batch = 1; batch <= nev + 100; batch += 99) { /* one event a batch, then all in one */
      retried_shard();
      char *dir;
      altar_ledger_t *l = open_kind(rocks, &dir);
      CU_ASSERT_FATAL(l != NULL);
      CU_ASSERT_EQUAL(apply_all(l, &s, batch), 1);
      check_retried(l);
      CU_ASSERT_EQUAL(altar_ledger_checksum(l, sums[k], &err), 0);
      if (rocks) CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), 0);
      k++;
      close_kind(l, dir);
    }
  CU_ASSERT_EQUAL(k, 4);
  for (int i = 1; i < k; i++) CU_ASSERT_STRING_EQUAL(sums[i], sums[0]); /* both ledgers, any batching */
  altar_group_specs_clear(&s);
  ev_reset();
}

/* The checksum covers the attempts: the same records with another first
 * run's reason give another digest. */
static void test_checksum_covers_attempts(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  char a[ALTAR_LEDGER_CHECKSUM_LEN + 1], b[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  for (int v = 0; v < 2; v++) {
    retried_shard();
    if (v) {
      free(evs[5].failure->detail);
      evs[5].failure->detail = strdup("another stderr");
    }
    altar_ledger_t *l = altar_ledger_memory_open(&err);
    apply_all(l, &s, 100);
    CU_ASSERT_EQUAL(altar_ledger_checksum(l, v ? b : a, &err), 0);
    altar_ledger_close(l);
  }
  CU_ASSERT_STRING_NOT_EQUAL(a, b);
  altar_group_specs_clear(&s);
  ev_reset();
}

/* A shard that keeps failing under one handle (a backend whose external id
 * is the task's, like Kubernetes Job names): each run is its own attempt,
 * and only attempts_keep (3) of them are kept, the rest counted. */
static void test_attempts_bounded(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  for (int rocks = 0; rocks < 2; rocks++) {
    ev_reset();
    ev(ALTAR_EV_SUBMITTED, "k0", 0, "w1");
    for (int run = 0; run < 5; run++) {
      state("k0", 0, "w1", ALTAR_STATE_RUNNING);
      timeout("k0", 0, "w1");
    }
    char *dir;
    altar_ledger_t *l = open_kind(rocks, &dir);
    CU_ASSERT_FATAL(l != NULL);
    apply_all(l, &s, 3);
    altar_attempts_t at;
    load(l, "k0", &at);
    /* Three kept, two dropped, and the record put back for its next run
     * (pending) as the attempt to come. */
    CU_ASSERT_EQUAL(at.dropped, 2);
    CU_ASSERT_EQUAL_FATAL(at.n, 4);
    CU_ASSERT_EQUAL(at.v[3].n, 6);
    CU_ASSERT_EQUAL(at.v[3].state, ALTAR_STATE_PENDING);
    for (size_t i = 0; i < 3; i++) {
      CU_ASSERT_EQUAL(at.v[i].n, (int64_t)i + 3);
      CU_ASSERT_EQUAL(at.v[i].restart_count, (int64_t)i + 2);
      CU_ASSERT(at.v[i].failure && !strcmp(at.v[i].failure->reason, "timeout"));
    }
    /* A retried run's start is kept (from its running event). */
    CU_ASSERT(at.v[2].started_at > 0 && at.v[2].ended_at > at.v[2].started_at);
    altar_attempts_clear(&at);
    close_kind(l, dir);
  }
  altar_group_specs_clear(&s);
  ev_reset();
}

/* A run superseded while it ran (its worker died) is kept with that reason;
 * a shard that never failed files nothing beyond its record. */
static void test_superseded_running_run(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  ev_reset();
  ev(ALTAR_EV_SUBMITTED, "d1", 1, "w1");
  state("d1", 1, "w1", ALTAR_STATE_RUNNING);
  ev(ALTAR_EV_SUBMITTED, "e1", 1, "w2");
  state("e1", 1, "w2", ALTAR_STATE_SUCCEEDED);
  altar_ledger_t *l = altar_ledger_memory_open(&err);
  apply_all(l, &s, 100);
  altar_attempts_t at;
  load(l, "e1", &at);
  CU_ASSERT_EQUAL_FATAL(at.n, 2);
  CU_ASSERT_EQUAL(at.v[0].state, ALTAR_STATE_FAILED);
  CU_ASSERT(at.v[0].failure && !strcmp(at.v[0].failure->reason, ALTAR_REASON_SUPERSEDED));
  CU_ASSERT(strstr(at.v[0].failure->detail, "it was running") != NULL);
  CU_ASSERT_EQUAL(at.v[1].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_STRING_EQUAL(at.v[1].external_id, "e1");
  altar_attempts_clear(&at);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
  ev_reset();
}

/* Attempts go with their task's records when consumed records are pruned
 * (ledger.consumed_keep_days), so they never outlive them. */
static void test_pruned_with_records(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  retried_shard();
  char *dir;
  altar_ledger_t *l = open_kind(1, &dir);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_EQUAL(apply_all(l, &s, 4), 1);
  char **keys = NULL;
  size_t nk = 0;
  CU_ASSERT_EQUAL(altar_attempts_keys(l, &keys, &nk, &err), 0);
  CU_ASSERT_EQUAL(nk, 1);
  CU_ASSERT(altar_attempts_keys_has(keys, nk, "feed0001"));
  altar_attempts_keys_free(keys, nk);
  size_t pruned = 0;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, INT64_MAX / 2000, 100, &pruned, &err), 0);
  CU_ASSERT_EQUAL(pruned, 3);
  CU_ASSERT_EQUAL(altar_attempts_keys(l, &keys, &nk, &err), 0);
  CU_ASSERT_EQUAL(nk, 0);
  altar_attempts_keys_free(keys, nk);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), 0);
  close_kind(l, dir);
  altar_group_specs_clear(&s);
  ev_reset();
}

/* Bytes that are not UTF-8 (a caller of the C API; the codec refuses them)
 * never fail the event's write: that field of the attempt is null. */
static void test_bad_utf8_kept_as_null(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  ev_reset();
  ev(ALTAR_EV_SUBMITTED, "u1", 1, "w1");
  timeout("u1", 1, "w\xff\xfe");
  altar_ledger_t *l = altar_ledger_memory_open(&err);
  apply_all(l, &s, 100);
  altar_attempts_t at;
  load(l, "u1", &at);
  CU_ASSERT_EQUAL_FATAL(at.n, 2); /* the failed run, and its record put back for the retry */
  CU_ASSERT(at.v[0].worker == NULL);
  CU_ASSERT(at.v[0].failure && !strcmp(at.v[0].failure->reason, "timeout"));
  altar_attempts_clear(&at);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
  ev_reset();
}

/* attempts_keep is a bounded whole number, refused naming the field. */
static void test_attempts_keep_config(void) {
  const char *bad[] = {"0", "1001", "two", "-1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char y[256];
    snprintf(y, sizeof y, "train:\n  group_by: [job_id]\n  ready_when: single\n  attempts_keep: %s\n", bad[i]);
    altar_group_specs_t s = {0};
    altar_error_t err = {0};
    CU_ASSERT_NOT_EQUAL(altar_group_specs_load_string(y, strlen(y), "t.yaml", &s, &err), 0);
    CU_ASSERT(strstr(err.msg, "groups.train.attempts_keep") != NULL || strstr(err.msg, "train.attempts_keep") != NULL);
    altar_group_specs_clear(&s);
  }
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(specs_yaml, strlen(specs_yaml), "t", &s, &err), 0);
  CU_ASSERT_EQUAL(altar_group_specs_find(&s, "train")->attempts_keep, 3);
  altar_group_specs_clear(&s);
}

static int cleanup(void) {
  ev_reset();
  return 0;
}

static void add(void) {
  ALTAR_SUITE("attempts", NULL, cleanup);
  ALTAR_TEST(test_retried_shard_keeps_both_runs);
  ALTAR_TEST(test_checksum_covers_attempts);
  ALTAR_TEST(test_attempts_bounded);
  ALTAR_TEST(test_superseded_running_run);
  ALTAR_TEST(test_attempts_keep_config);
  ALTAR_TEST(test_pruned_with_records);
  ALTAR_TEST(test_bad_utf8_kept_as_null);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
