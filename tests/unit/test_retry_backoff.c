/* Retry backoff: the delay of each attempt, deterministic jitter, the
 * settings' validation, the due facts the applier records (the same after
 * a replay in other batch sizes), and retries held back until due. */
#include "altar/codec.h"
#include "altar/plugin/transport.h"
#include "altar/reconcile.h"
#include "reconciler/retry_backoff.h"
#include "ledger_suite.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_delay_grows_and_caps(void) {
  altar_retry_backoff_t b = {.initial_s = 2, .factor = 3, .max_s = 10, .jitter = 0};
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, "k", 1), 2.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, "k", 2), 6.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, "k", 3), 10.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, "k", 40), 10.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, "k", 0), 0.0, 1e-9);
  altar_retry_backoff_t none = {0};
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&none, "k", 1), 0.0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(NULL, "k", 1), 0.0, 1e-9);
}

static void test_jitter_is_deterministic_and_bounded(void) {
  altar_retry_backoff_t b = {.initial_s = 8, .factor = 1, .max_s = 8, .jitter = 0.5};
  size_t distinct = 0;
  double prev = -1;
  for (int i = 0; i < 50; i++) {
    char key[32];
    snprintf(key, sizeof key, "task-%d", i);
    double d = altar__retry_backoff_delay(&b, key, 1);
    CU_ASSERT(d >= 4.0 && d <= 8.0);
    CU_ASSERT_DOUBLE_EQUAL(altar__retry_backoff_delay(&b, key, 1), d, 0); /* same key, same attempt: same delay */
    distinct += d != prev;
    prev = d;
  }
  CU_ASSERT(distinct > 40); /* the jitter spreads tasks apart */
  /* Another attempt of one task gets its own fraction. */
  CU_ASSERT(altar__retry_backoff_delay(&b, "task-1", 1) != altar__retry_backoff_delay(&b, "task-1", 2));
}

static void expect_config_error(const char *yaml, const char *needle) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  int rc = altar_group_specs_load_string(yaml, strlen(yaml), "altar.yaml", &s, &err);
  CU_ASSERT_EQUAL(rc, ALTAR_ECONFIG);
  if (!strstr(err.msg, needle)) fprintf(stderr, "expected '%s' in: %s\n", needle, err.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
  altar_group_specs_clear(&s);
}

#define KIND "k:\n  group_by: [job_id]\n  ready_when: single\n  on_failed: retry\n  max_restarts: 2\n"

static void test_settings_are_validated(void) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  const char *ok = KIND "  retry_backoff: {initial: 1.5, factor: 2, max: 30, jitter: 0.25}\n";
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(ok, strlen(ok), "altar.yaml", &s, &err), 0);
  const altar_retry_backoff_t *b = &altar_group_specs_find(&s, "k")->retry_backoff;
  CU_ASSERT_DOUBLE_EQUAL(b->initial_s, 1.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b->factor, 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b->max_s, 30, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b->jitter, 0.25, 1e-12);
  altar_group_specs_clear(&s);
  /* Defaults: factor 2, no jitter, max at least an hour. */
  const char *dflt = KIND "  retry_backoff: {initial: 5}\n";
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(dflt, strlen(dflt), "altar.yaml", &s, &err), 0);
  b = &altar_group_specs_find(&s, "k")->retry_backoff;
  CU_ASSERT_DOUBLE_EQUAL(b->factor, 2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b->jitter, 0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b->max_s, 3600, 1e-12);
  altar_group_specs_clear(&s);

  expect_config_error(KIND "  retry_backoff: {initial: 1, factor: 0.5}\n",
                      "altar.yaml:6: k.retry_backoff.factor: must be in 1..100, got 0.5");
  expect_config_error(KIND "  retry_backoff: {initial: 1, jitter: 1.5}\n", "k.retry_backoff.jitter: must be in 0..1");
  expect_config_error(KIND "  retry_backoff: {initial: 10, max: 5}\n", "k.retry_backoff.max: must be >= initial (10)");
  expect_config_error(KIND "  retry_backoff: {initial: 0}\n", "k.retry_backoff.initial: must be > 0");
  expect_config_error(KIND "  retry_backoff: {initial: soon}\n",
                      "k.retry_backoff.initial: expected a number, got 'soon'");
  expect_config_error(KIND "  retry_backoff: {intial: 1}\n", "k.retry_backoff: unknown key 'intial'");
  expect_config_error(KIND "  retry_backoff: {factor: 2}\n", "k.retry_backoff.initial: missing");
  expect_config_error(KIND "  retry_backoff: 5\n", "k.retry_backoff: expected a mapping");
  expect_config_error("k:\n  group_by: [job_id]\n  ready_when: single\n  on_failed: dead_letter\n"
                      "  retry_backoff: {initial: 1}\n",
                      "k.retry_backoff: only applies with on_failed: retry");
}

/* ---- the applier records due times; a replay records the same ---------- */

#define MAXEV 16
static altar_status_event_t evs[MAXEV];
static size_t nev;

static altar_status_event_t *ev(altar_status_event_kind_t k, const char *eid, const char *tk, double ts) {
  CU_ASSERT_FATAL(nev < MAXEV);
  altar_status_event_t *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->v = 1;
  e->event = k;
  e->kind = strdup("k");
  e->task_key = strdup(tk);
  altar_handle_init(&e->handle, "process", eid);
  altar_strmap_set(&e->handle.labels, "job_id", "j1");
  e->ts = ts;
  if (k == ALTAR_EV_SUBMITTED) {
    e->spec = altar_spec_new("k", "img:1");
    altar_spec_add_arg(e->spec, "run");
    altar_spec_set_label(e->spec, "job_id", "j1");
  }
  return e;
}

static void timeout_at(const char *eid, const char *tk, double ts) {
  altar_status_event_t *e = ev(ALTAR_EV_STATE, eid, tk, ts);
  e->state = ALTAR_STATE_FAILED;
  e->failure = altar_failure_new("timeout", "ran past timeout_s", false);
}

/* Three runs of one task: each times out, two are retried. */
static void three_runs(void) {
  for (size_t i = 0; i < nev; i++) altar_status_event_clear(&evs[i]);
  nev = 0;
  ev(ALTAR_EV_SUBMITTED, "run0", "taskA", 1000.0);
  timeout_at("run0", "taskA", 1001.0);
  ev(ALTAR_EV_SUBMITTED, "run1", "taskA", 1004.0);
  timeout_at("run1", "taskA", 1005.5);
  ev(ALTAR_EV_SUBMITTED, "run2", "taskA", 1020.0);
  timeout_at("run2", "taskA", 1021.0);
}

static void apply_in(altar_ledger_t *l, const altar_group_specs_t *s, size_t step, size_t *pretries) {
  for (size_t i = 0; i < nev; i += step) {
    altar_apply_result_t r = {0};
    altar_error_t err = {0};
    int rc = altar_apply_events_atomic(l, s, evs + i, i + step < nev ? step : nev - i, -1, &r, &err);
    if (rc) fprintf(stderr, "apply: %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    for (size_t q = 0; q < r.n_retries; q++) {
      /* The request carries the due time: the failure's ts plus the delay. */
      double want = r.retries[q].failed_ts + altar__retry_backoff_delay(&altar_group_specs_find(s, "k")->retry_backoff,
                                                                        "taskA", r.retries[q].restart_count);
      CU_ASSERT_DOUBLE_EQUAL(r.retries[q].due_ts, want, 1e-9);
    }
    *pretries += r.n_retries;
    altar_apply_result_clear(&r);
  }
}

static char *dues_text(altar_ledger_t *l) {
  altar_retry_due_t *v;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__retry_dues_list(l, &v, &n, &err), 0);
  char *out = calloc(1, 4096);
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(out + at, 4096 - at, "%s#%lld due %.6f after %.6f (%.6f)\n", v[i].task_key,
                           (long long)v[i].attempt, v[i].due_ts, v[i].failed_ts, v[i].delay_s);
  altar__retry_dues_free(v, n);
  return out;
}

static void test_due_times_recorded_and_replayed(void) {
  const char *yaml = KIND "  retry_backoff: {initial: 2, factor: 3, max: 60, jitter: 0.5}\n";
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(yaml, strlen(yaml), "t", &s, &err), 0);
  const altar_retry_backoff_t *b = &altar_group_specs_find(&s, "k")->retry_backoff;
  three_runs();
  char *d1 = altar_test_tmpdir("backoff-live"), *d2 = altar_test_tmpdir("backoff-replay");
  altar_ledger_t *live = altar_test_ledger_open(d1), *replay = altar_test_ledger_open(d2);
  CU_ASSERT_FATAL(live && replay);
  size_t r1 = 0, r2 = 0;
  apply_in(live, &s, 1, &r1);
  apply_in(replay, &s, nev, &r2); /* one batch: the same facts */
  CU_ASSERT_EQUAL(r1, 2);
  CU_ASSERT_EQUAL(r2, 2);
  char *a = dues_text(live), *c = dues_text(replay);
  CU_ASSERT_STRING_EQUAL(a, c);
  /* Attempt 1 is due 2 s (less jitter) after the first timeout at 1001,
   * attempt 2 6 s (less jitter) after the second at 1005.5. */
  char want[512];
  double j1 = altar__retry_backoff_delay(b, "taskA", 1), j2 = altar__retry_backoff_delay(b, "taskA", 2);
  CU_ASSERT(j1 >= 1.0 && j1 <= 2.0);
  CU_ASSERT(j2 >= 3.0 && j2 <= 6.0);
  snprintf(want, sizeof want, "taskA#1 due %.6f after 1001.000000 (%.6f)\ntaskA#2 due %.6f after 1005.500000 (%.6f)\n",
           1001.0 + j1, j1, 1005.5 + j2, j2);
  CU_ASSERT_STRING_EQUAL(a, want);
  /* One attempt's due time read back by key (what a reason "backoff" shows);
   * an attempt never retried has none. */
  double due = -1;
  CU_ASSERT_EQUAL(altar__retry_due_get(live, "taskA", 2, &due, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(due, 1005.5 + j2, 1e-5);
  CU_ASSERT_EQUAL(altar__retry_due_get(live, "taskA", 3, &due, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(due, 0.0, 0);
  CU_ASSERT_EQUAL(altar__retry_due_get(live, "no-such-task", 1, &due, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(due, 0.0, 0);
  free(a);
  free(c);
  altar_test_ledger_close(live);
  altar_test_ledger_close(replay);
  altar_test_rmtree(d1);
  altar_test_rmtree(d2);
  free(d1);
  free(d2);
  altar_group_specs_clear(&s);
}

/* ---- waiting retries: held back until due, then moved to the outbox ---- */

static size_t count_prefix(altar_ledger_t *l, const char *prefix);
static int count_visit(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  (void)k, (void)kl, (void)v, (void)vl;
  (*(size_t *)ctx)++;
  return 0;
}
static size_t count_prefix(altar_ledger_t *l, const char *prefix) {
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, prefix, strlen(prefix), count_visit, &n, &err), 0);
  return n;
}

static void test_wait_releases_only_when_due(void) {
  char *dir = altar_test_tmpdir("backoff-wait"), *logdir = altar_test_tmpdir("backoff-log");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_test_ledger_open(dir);
  CU_ASSERT_FATAL(l != NULL);
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", logdir);
  altar_transport_t *t = altar_transport_open_ops(&altar_transport_local_ops, &props, NULL, &err);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, "jobs", 1, &err), 0);
  altar__outbox_t ob;
  CU_ASSERT_EQUAL_FATAL(altar__outbox_open(&ob, l, t, &err), 0);
  altar_transport_set_delivery(t, altar__outbox_on_delivery, NULL, NULL, NULL);
  altar__retry_wait_t w;
  CU_ASSERT_EQUAL_FATAL(altar__retry_wait_open(&w, l, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(w.next_due, 0, 0);
  CU_ASSERT_EQUAL(altar__retry_wait_stage(&w, 2000.5, "jobs", "taskB", "b", 1, &err), 0);
  CU_ASSERT_EQUAL(altar__retry_wait_stage(&w, 1500.25, "jobs", "taskA", "a", 1, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(w.next_due, 1500.25, 1e-9);
  /* A restarted daemon finds them in the ledger. */
  altar__retry_wait_t w2;
  CU_ASSERT_EQUAL(altar__retry_wait_open(&w2, l, &err), 0);
  CU_ASSERT_DOUBLE_EQUAL(w2.next_due, 1500.25, 1e-9);
  size_t n = 99;
  CU_ASSERT_EQUAL(altar__retry_wait_release(&w, &ob, 1500.0, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0); /* not yet due */
  CU_ASSERT_EQUAL(count_prefix(l, "w/"), 2);
  CU_ASSERT_EQUAL(altar__retry_wait_release(&w, &ob, 1600.0, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL(count_prefix(l, "w/"), 1);
  CU_ASSERT_DOUBLE_EQUAL(w.next_due, 2000.5, 1e-9);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 5000, &err), 0);
  CU_ASSERT_EQUAL(count_prefix(l, "o/"), 0); /* published and acknowledged */
  altar_topic_list_t *tl = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "jobs", 1000, &tl, &err), 0);
  CU_ASSERT_EQUAL(tl->topics[0].partitions[0].end, 1);
  altar_topic_list_free(tl);
  CU_ASSERT_EQUAL(altar__retry_wait_release(&w, &ob, 2000.6, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_DOUBLE_EQUAL(w.next_due, 0, 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 5000, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "jobs", 1000, &tl, &err), 0);
  CU_ASSERT_EQUAL(tl->topics[0].partitions[0].end, 2);
  altar_topic_list_free(tl);
  altar_transport_set_delivery(t, NULL, NULL, NULL, NULL);
  altar_transport_close(t);
  altar_strmap_clear(&props);
  altar_test_ledger_close(l);
  altar_test_rmtree(dir);
  altar_test_rmtree(logdir);
  free(dir);
  free(logdir);
  altar__outbox_close(&ob);
}

static int cleanup(void) {
  for (size_t i = 0; i < nev; i++) altar_status_event_clear(&evs[i]);
  nev = 0;
  return 0;
}

static int cleanup_rocksdb(void) { return cleanup() || altar_test_ledger_cleanup(); }
static int cleanup_memory(void) { return cleanup() || altar_test_ledger_cleanup(); }

/* The ledger-backed tests run on both ledgers. */
static void add(void) {
  {
    ALTAR_SUITE("retry_backoff", NULL, cleanup);
    ALTAR_TEST(test_delay_grows_and_caps);
    ALTAR_TEST(test_jitter_is_deterministic_and_bounded);
    ALTAR_TEST(test_settings_are_validated);
  }
  {
    ALTAR_SUITE("retry_backoff.rocksdb", altar_test_ledger_init_rocksdb, cleanup_rocksdb);
    ALTAR_TEST(test_due_times_recorded_and_replayed);
    ALTAR_TEST(test_wait_releases_only_when_due);
  }
  {
    ALTAR_SUITE("retry_backoff.memory", altar_test_ledger_init_memory, cleanup_memory);
    ALTAR_TEST(test_due_times_recorded_and_replayed);
    ALTAR_TEST(test_wait_releases_only_when_due);
  }
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
