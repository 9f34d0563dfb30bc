/* Applying status events: records, states, releases, and the group events
 * due after each event — the same whatever the batch sizes (invariant 3). */
#include "altar/codec.h"
#include "altar/reconcile.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXEV 128
static altar_status_event_t evs[MAXEV];
static size_t nev;

static void ev_reset(void) {
  for (size_t i = 0; i < nev; i++) altar_status_event_clear(&evs[i]);
  nev = 0;
}

/* kind, external id (also the task key), group job, fold, folds. */
static altar_status_event_t *ev_new(altar_status_event_kind_t k, const char *kind, const char *eid, const char *job,
                                    int fold, int nfolds) {
  CU_ASSERT_FATAL(nev < MAXEV);
  altar_status_event_t *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->v = 1;
  e->event = k;
  e->kind = strdup(kind);
  char tk[80];
  snprintf(tk, sizeof tk, "tk-%s", eid);
  e->task_key = strdup(tk);
  altar_handle_init(&e->handle, "process", eid);
  altar_strmap_set(&e->handle.labels, "job_id", job);
  char b[16];
  snprintf(b, sizeof b, "%d", fold);
  altar_strmap_set(&e->handle.labels, "fold", b);
  snprintf(b, sizeof b, "%d", nfolds);
  altar_strmap_set(&e->handle.labels, "num_folds", b);
  e->ts = 1000.0 + (double)nev;
  return e;
}

static void sub(const char *kind, const char *eid, const char *job, int fold, int nfolds) {
  altar_status_event_t *e = ev_new(ALTAR_EV_SUBMITTED, kind, eid, job, fold, nfolds);
  e->spec = altar_spec_new(kind, "img:1");
  altar_spec_add_arg(e->spec, "run");
  altar_spec_set_label(e->spec, "job_id", job);
}

static void st(const char *kind, const char *eid, const char *job, int fold, int nfolds, altar_state_t s) {
  altar_status_event_t *e = ev_new(ALTAR_EV_STATE, kind, eid, job, fold, nfolds);
  e->state = s;
  if (s == ALTAR_STATE_FAILED) e->failure = altar_failure_exit(2, "bad input", true);
}

/* A failure worth a retry (a timeout), unlike st()'s exit code. */
static void st_transient(const char *kind, const char *eid, const char *job, int fold, int nfolds) {
  altar_status_event_t *e = ev_new(ALTAR_EV_STATE, kind, eid, job, fold, nfolds);
  e->state = ALTAR_STATE_FAILED;
  e->failure = altar_failure_new("timeout", "ran past timeout_s", false);
}

static void rel(const char *kind, const char *eid, const char *job) { ev_new(ALTAR_EV_RELEASED, kind, eid, job, 0, 1); }

static void load_specs(altar_group_specs_t *s, const char *yaml) {
  altar_error_t err = {0};
  memset(s, 0, sizeof *s);
  int rc = altar_group_specs_load_string(yaml, strlen(yaml), "test", s, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
}

static const char *specs_yaml =
    "train:\n  group_by: [job_id]\n  ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n"
    "  on_failed: dead_letter\n"
    "pair:\n  group_by: [job_id]\n  ready_when: {count_at_least: 2}\n  on_failed: defer\n"
    "bare:\n  group_by: [job_id]\n  ready_when: single\n"
    "retry:\n  group_by: [job_id]\n  ready_when: {all_folds: 2}\n  on_failed: retry\n  max_restarts: 1\n";

static int apply(altar_ledger_t *l, const altar_group_specs_t *s, size_t from, size_t to, altar_apply_result_t *r) {
  altar_error_t err = {0};
  int rc = altar_apply_events_atomic(l, s, evs + from, to - from, 42.0, r, &err);
  if (rc) fprintf(stderr, "apply: %s\n", err.msg);
  return rc;
}

static void test_five_fold_fires_once_with_id(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  for (int f = 0; f < 5; f++) {
    char eid[8];
    snprintf(eid, sizeof eid, "f%d", f);
    sub("train", eid, "j1", f, 5);
  }
  for (int f = 4; f >= 0; f--) {
    char eid[8];
    snprintf(eid, sizeof eid, "f%d", f);
    st("train", eid, "j1", f, 5, ALTAR_STATE_RUNNING);
    st("train", eid, "j1", f, 5, ALTAR_STATE_SUCCEEDED);
  }
  st("train", "f0", "j1", 0, 5, ALTAR_STATE_SUCCEEDED); /* late duplicate */
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL_FATAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(r.applied, nev);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  altar_group_event_t *g = &r.events[0];
  CU_ASSERT_EQUAL(g->event, ALTAR_GROUP_FIRED);
  CU_ASSERT_STRING_EQUAL(g->kind, "train");
  CU_ASSERT_STRING_EQUAL(g->group_key, "j1");
  CU_ASSERT_EQUAL_FATAL(g->n_shards, 5);
  CU_ASSERT_STRING_EQUAL(g->shards[0].external_id, "f0");
  CU_ASSERT_STRING_EQUAL(g->shards[4].external_id, "f4");
  CU_ASSERT_EQUAL(g->ts, 42.0);
  const char *keys[] = {"tk-f3", "tk-f1", "tk-f0", "tk-f4", "tk-f2"};
  char want[ALTAR_TASK_KEY_LEN + 1];
  altar_group_event_id("train", "j1", keys, 5, want);
  CU_ASSERT_STRING_EQUAL(g->event_id, want);
  altar_apply_result_clear(&r);
  altar_handle_t *hs;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_open_handles(l, &hs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_handles_free(hs, n);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

/* The stream the batch-size tests replay. */
static void mixed_stream(void) {
  ev_reset();
  sub("pair", "p1", "jp", 0, 1);
  sub("pair", "p2", "jp", 1, 1);
  sub("pair", "p3", "jp", 2, 1);
  sub("train", "a0", "ja", 0, 2);
  sub("train", "a1", "ja", 1, 2);
  sub("train", "b0", "jb", 0, 1);
  st("pair", "p3", "jp", 2, 1, ALTAR_STATE_SUCCEEDED);
  st("pair", "p1", "jp", 0, 1, ALTAR_STATE_SUCCEEDED);
  st("train", "a0", "ja", 0, 2, ALTAR_STATE_SUCCEEDED);
  st("pair", "p2", "jp", 1, 1, ALTAR_STATE_SUCCEEDED);
  st("train", "b0", "jb", 0, 1, ALTAR_STATE_SUCCEEDED);
  st("train", "a1", "ja", 1, 2, ALTAR_STATE_FAILED);
}

static char *describe(const altar_apply_result_t *r) {
  static char out[2048];
  size_t off = 0;
  out[0] = '\0';
  for (size_t i = 0; i < r->n_events && off < sizeof out; i++) {
    const altar_group_event_t *g = &r->events[i];
    off += (size_t)snprintf(out + off, sizeof out - off, "%s %s:%s %.12s [", g->event ? "dead" : "fired", g->kind,
                            g->group_key, g->event_id);
    for (size_t j = 0; j < g->n_shards && off < sizeof out; j++)
      off += (size_t)snprintf(out + off, sizeof out - off, "%s ", g->shards[j].external_id);
    if (off < sizeof out) off += (size_t)snprintf(out + off, sizeof out - off, "] ");
  }
  return out;
}

/* A group key too long for apply's stack buffer, and a result reused
 * after a reset: the second event's strings live where the first's did. */
static void test_long_group_key_and_reset(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  char job[301];
  memset(job, 'j', 300);
  job[300] = '\0';
  sub("bare", "b1", job, 0, 1);
  st("bare", "b1", job, 0, 1, ALTAR_STATE_SUCCEEDED);
  sub("bare", "b2", "short", 0, 1);
  st("bare", "b2", "short", 0, 1, ALTAR_STATE_SUCCEEDED);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL_FATAL(apply(l, &s, 0, 2, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_STRING_EQUAL(r.events[0].group_key, job);
  CU_ASSERT_STRING_EQUAL(r.settled[0].task_keys[0], "tk-b1");
  altar_apply_result_reset(&r);
  CU_ASSERT_EQUAL_FATAL(apply(l, &s, 2, 4, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_STRING_EQUAL(r.events[0].group_key, "short");
  CU_ASSERT_STRING_EQUAL(r.events[0].shards[0].external_id, "b2");
  CU_ASSERT_STRING_EQUAL(r.settled[0].task_keys[0], "tk-b2");
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
  ev_reset();
}

static void test_batch_size_never_changes_groups(void) {
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  char first[2048] = "", sum0[ALTAR_LEDGER_CHECKSUM_LEN + 1] = "";
  size_t splits[][3] = {{100, 0, 0}, {1, 0, 0}, {2, 0, 0}, {5, 0, 0}, {7, 0, 0}};
  for (size_t t = 0; t < sizeof splits / sizeof splits[0]; t++) {
    mixed_stream();
    altar_ledger_t *l = altar_ledger_memory_open(NULL);
    altar_apply_result_t r = {0};
    size_t step = splits[t][0];
    for (size_t i = 0; i < nev; i += step) CU_ASSERT_EQUAL(apply(l, &s, i, i + step < nev ? i + step : nev, &r), 0);
    char *d = describe(&r);
    if (t == 0) {
      snprintf(first, sizeof first, "%s", d);
      /* count_at_least(2) fires with the first two successes (p3, p1), never
       * with three; a 1-fold group fires alone; the blocked one dead-letters. */
      CU_ASSERT_EQUAL_FATAL(r.n_events, 3);
      CU_ASSERT_EQUAL(r.events[0].n_shards, 2);
      CU_ASSERT_STRING_EQUAL(r.events[0].shards[0].external_id, "p1");
      CU_ASSERT_STRING_EQUAL(r.events[0].shards[1].external_id, "p3");
      CU_ASSERT_STRING_EQUAL(r.events[1].group_key, "jb");
      CU_ASSERT_EQUAL(r.events[2].event, ALTAR_GROUP_DEAD_LETTERED);
      CU_ASSERT_EQUAL(r.events[2].n_shards, 1);
      CU_ASSERT_STRING_EQUAL(r.events[2].shards[0].external_id, "a1");
    } else {
      CU_ASSERT_STRING_EQUAL(d, first);
    }
    char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum, &err), 0);
    if (t == 0) memcpy(sum0, sum, sizeof sum);
    else CU_ASSERT_STRING_EQUAL(sum, sum0);
    altar_apply_result_clear(&r);
    altar_ledger_close(l);
  }
  altar_group_specs_clear(&s);
}

static void test_same_on_rocksdb(void) {
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  mixed_stream();
  char *dir = altar_test_tmpdir("apply");
  altar_error_t err = {0};
  altar_ledger_t *m = altar_ledger_memory_open(NULL);
  altar_ledger_t *r = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(r != NULL);
  altar_apply_result_t rm = {0}, rr = {0};
  CU_ASSERT_EQUAL(apply(m, &s, 0, nev, &rm), 0);
  for (size_t i = 0; i < nev; i += 3) CU_ASSERT_EQUAL(apply(r, &s, i, i + 3 < nev ? i + 3 : nev, &rr), 0);
  char dm[2048];
  snprintf(dm, sizeof dm, "%s", describe(&rm));
  CU_ASSERT_STRING_EQUAL(describe(&rr), dm);
  char a[ALTAR_LEDGER_CHECKSUM_LEN + 1], b[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(m, a, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(r, b, &err), 0);
  CU_ASSERT_STRING_EQUAL(a, b);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(r, NULL, &err), 0);
  altar_apply_result_clear(&rm);
  altar_apply_result_clear(&rr);
  altar_ledger_close(m);
  altar_ledger_close(r);
  altar_test_rmtree(dir);
  free(dir);
  altar_group_specs_clear(&s);
}

static void test_defer_and_stall(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  sub("pair", "p1", "jp", 0, 1);
  sub("pair", "p2", "jp", 1, 1);
  st("pair", "p1", "jp", 0, 1, ALTAR_STATE_FAILED);
  sub("bare", "x", "jx", 0, 1);
  st("bare", "x", "jx", 0, 1, ALTAR_STATE_FAILED);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(r.n_events, 0);
  CU_ASSERT_EQUAL_FATAL(r.deferred_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.deferred_groups.v[0], "pair:jp");
  CU_ASSERT_EQUAL_FATAL(r.stalled_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.stalled_groups.v[0], "bare:jx");
  altar_record_t *recs;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_active_failed(l, &recs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 2); /* untouched */
  altar_records_free(recs, n);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

static void test_retry_then_dead_letter(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  sub("retry", "r0", "jr", 0, 2);
  sub("retry", "r1", "jr", 1, 2);
  st("retry", "r0", "jr", 0, 2, ALTAR_STATE_SUCCEEDED);
  st_transient("retry", "r1", "jr", 1, 2);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(r.n_events, 0);
  CU_ASSERT_EQUAL_FATAL(r.n_retries, 1);
  CU_ASSERT_STRING_EQUAL(r.retries[0].handle.external_id, "r1");
  CU_ASSERT_STRING_EQUAL(r.retries[0].task_key, "tk-r1");
  CU_ASSERT_EQUAL(r.retries[0].restart_count, 1);
  CU_ASSERT_FATAL(r.retries[0].spec != NULL);
  CU_ASSERT_STRING_EQUAL(r.retries[0].spec->command[0], "run");
  /* A decision that made no event (a retry) keeps nothing in the result's
   * memory: the request holds copies of its own. */
  altar_arena_mark_t left = altar_arena_mark(&r.mem);
  CU_ASSERT(left.head == NULL || left.used == 0);
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "r1", &e, &err), 0);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(e.rec.restart_count, 1);
  altar_ledger_entry_clear(&e);
  altar_apply_result_clear(&r);
  /* The rerun arrives under a new handle with the same task key: it
   * supersedes the old record and inherits its restart count. */
  size_t from = nev;
  altar_status_event_t *x = ev_new(ALTAR_EV_SUBMITTED, "retry", "r1b", "jr", 1, 2);
  free(x->task_key);
  x->task_key = strdup("tk-r1");
  x = ev_new(ALTAR_EV_STATE, "retry", "r1b", "jr", 1, 2);
  x->state = ALTAR_STATE_FAILED;
  x->failure = altar_failure_new("timeout", NULL, false);
  CU_ASSERT_EQUAL(apply(l, &s, from, nev, &r), 0);
  CU_ASSERT_EQUAL(r.n_retries, 0); /* out of restarts */
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].event, ALTAR_GROUP_DEAD_LETTERED);
  CU_ASSERT_STRING_EQUAL(r.events[0].shards[0].external_id, "r1b");
  /* The dead-lettered event says why its member failed. */
  CU_ASSERT_EQUAL_FATAL(r.events[0].n_failures, 1);
  CU_ASSERT_STRING_EQUAL(r.events[0].failures[0].external_id, "r1b");
  CU_ASSERT_STRING_EQUAL(r.events[0].failures[0].failure->reason, "timeout");
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "r1", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);                        /* superseded */
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED); /* it was pending: settled, not left open */
  CU_ASSERT(e.rec.failure && !strcmp(e.rec.failure->reason, ALTAR_REASON_SUPERSEDED));
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "r1b", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.restart_count, 1);
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "r0", &e, &err), 0);
  CU_ASSERT(e.rec.consumed); /* the succeeded sibling is settled with the group */
  altar_ledger_entry_clear(&e);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

static void test_retry_same_handle_then_fire(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  sub("retry", "r0", "jr", 0, 2);
  sub("retry", "r1", "jr", 1, 2);
  st_transient("retry", "r1", "jr", 1, 2);
  sub("retry", "r1", "jr", 1, 2); /* rerun under the same external id: a duplicate now */
  st("retry", "r1", "jr", 1, 2, ALTAR_STATE_SUCCEEDED);
  st("retry", "r0", "jr", 0, 2, ALTAR_STATE_SUCCEEDED);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(r.n_retries, 1);
  CU_ASSERT_EQUAL(r.ignored, 1);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].event, ALTAR_GROUP_FIRED);
  CU_ASSERT_EQUAL(r.events[0].n_shards, 2);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

/* Under on_failed: retry, a deterministic failure (the command's own exit
 * code) would only fail again, and a shard whose spec was never stored has
 * nothing to republish: both dead-letter the group at once, on both ledgers. */
static void retry_gives_up(altar_ledger_t *l) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  sub("retry", "d0", "jd", 0, 2);
  sub("retry", "d1", "jd", 1, 2);
  st("retry", "d1", "jd", 1, 2, ALTAR_STATE_FAILED); /* exit_2, deterministic */
  /* A group whose shard was recorded without a spec (a submitted event
   * from an old worker), then failed transiently. */
  altar_status_event_t *x = ev_new(ALTAR_EV_SUBMITTED, "retry", "n0", "jn", 0, 2);
  (void)x;
  st_transient("retry", "n0", "jn", 0, 2);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(r.n_retries, 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 2);
  CU_ASSERT_EQUAL(r.events[0].event, ALTAR_GROUP_DEAD_LETTERED);
  CU_ASSERT_STRING_EQUAL(r.events[0].group_key, "jd");
  CU_ASSERT_EQUAL(r.events[1].event, ALTAR_GROUP_DEAD_LETTERED);
  CU_ASSERT_STRING_EQUAL(r.events[1].group_key, "jn");
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "n0", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED); /* not restarted: nothing would run it */
  CU_ASSERT_EQUAL(e.rec.restart_count, 0);
  altar_ledger_entry_clear(&e);
  altar_apply_result_clear(&r);
  altar_group_specs_clear(&s);
  ev_reset();
}

static void test_retry_gives_up_when_hopeless(void) {
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  retry_gives_up(l);
  altar_ledger_close(l);
  char *dir = altar_test_tmpdir("apply-retry-hopeless");
  altar_error_t err = {0};
  l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  retry_gives_up(l);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* A dead-lettered event carries its failed member's reason and detail,
 * the detail cut to ALTAR_GROUP_FAILURE_DETAIL bytes on a character
 * boundary (an odd prefix puts byte 512 inside a two-byte "é"). */
static void test_dead_letter_carries_reasons(void) {
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  sub("train", "f0", "jf", 0, 2);
  sub("train", "f1", "jf", 1, 2);
  char detail[3100];
  size_t at = (size_t)snprintf(detail, sizeof detail, "x");
  while (at + 2 < sizeof detail) at += (size_t)snprintf(detail + at, sizeof detail - at, "\xc3\xa9");
  altar_status_event_t *x = ev_new(ALTAR_EV_STATE, "train", "f1", "jf", 1, 2);
  x->state = ALTAR_STATE_FAILED;
  x->failure = altar_failure_exit(3, detail, true);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].event, ALTAR_GROUP_DEAD_LETTERED);
  CU_ASSERT_EQUAL_FATAL(r.events[0].n_failures, 1);
  const altar_group_failure_t *g = &r.events[0].failures[0];
  CU_ASSERT_STRING_EQUAL(g->external_id, "f1");
  CU_ASSERT_STRING_EQUAL(g->failure->reason, "exit_3");
  CU_ASSERT(g->failure->exit_code.set && g->failure->exit_code.v == 3);
  size_t dl = strlen(g->failure->detail);
  CU_ASSERT(dl <= ALTAR_GROUP_FAILURE_DETAIL && dl >= ALTAR_GROUP_FAILURE_DETAIL - 1);
  CU_ASSERT_EQUAL((unsigned char)g->failure->detail[dl - 1], 0xa9); /* ends on a whole "é" */
  /* And it survives the wire. */
  altar_buf_t b = {0};
  altar_group_event_t back;
  CU_ASSERT_EQUAL(altar_encode_group(&r.events[0], &b, NULL), 0);
  CU_ASSERT_EQUAL(altar_decode_group(b.data, b.len, &back, NULL), 0);
  CU_ASSERT(altar_group_event_equal(&r.events[0], &back));
  altar_group_event_clear(&back);
  altar_buf_free(&b);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

/* A worker killed with its task running: the task runs again elsewhere
 * under a new handle and the same task key. The old record is settled as
 * failed "superseded" and consumed (no record stays running for ever), the
 * group fires with the new run only, and a released run ends failed
 * "released". */
static void test_dead_workers_run_is_settled(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  sub("bare", "k-old", "jk", 0, 1);
  st("bare", "k-old", "jk", 0, 1, ALTAR_STATE_RUNNING); /* then its worker dies */
  altar_status_event_t *x = ev_new(ALTAR_EV_SUBMITTED, "bare", "k-new", "jk", 0, 1);
  free(x->task_key);
  x->task_key = strdup("tk-k-old");
  st("bare", "k-new", "jk", 0, 1, ALTAR_STATE_SUCCEEDED);
  sub("bare", "r1", "jr", 0, 1);
  st("bare", "r1", "jr", 0, 1, ALTAR_STATE_RUNNING);
  rel("bare", "r1", "jr");
  /* A run that ended (its group still fanning in) and then ran again: the
   * newer run is the shard's record, the older one is marked superseded. */
  sub("train", "t-old", "jt", 0, 2);
  st("train", "t-old", "jt", 0, 2, ALTAR_STATE_SUCCEEDED);
  x = ev_new(ALTAR_EV_SUBMITTED, "train", "t-new", "jt", 0, 2);
  free(x->task_key);
  x->task_key = strdup("tk-t-old");
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL_FATAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].n_shards, 1);
  CU_ASSERT_STRING_EQUAL(r.events[0].shards[0].external_id, "k-new");
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "k-old", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED);
  CU_ASSERT(e.rec.failure && !strcmp(e.rec.failure->reason, ALTAR_REASON_SUPERSEDED));
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "r1", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED);
  CU_ASSERT(e.rec.failure && !strcmp(e.rec.failure->reason, ALTAR_REASON_RELEASED));
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "t-old", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED);
  CU_ASSERT(e.rec.failure && !strcmp(e.rec.failure->reason, ALTAR_REASON_SUPERSEDED));
  CU_ASSERT(e.rec.failure && e.rec.failure->detail && strstr(e.rec.failure->detail, "it was succeeded"));
  altar_ledger_entry_clear(&e);
  altar_handle_t *open = NULL;
  size_t n_open = 0;
  CU_ASSERT_EQUAL(altar_ledger_open_handles(l, &open, &n_open, &err), 0);
  CU_ASSERT_EQUAL(n_open, 1); /* only t-new, still pending */
  altar_handles_free(open, n_open);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

static void test_released_and_unknown(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  sub("pair", "p1", "jp", 0, 1);
  st("pair", "p1", "jp", 0, 1, ALTAR_STATE_SUCCEEDED);
  rel("pair", "p1", "jp"); /* released: settled without firing */
  sub("pair", "p2", "jp", 0, 1);
  st("pair", "p2", "jp", 0, 1, ALTAR_STATE_SUCCEEDED);
  st("pair", "p9", "jp", 0, 1, ALTAR_STATE_SUCCEEDED); /* its submitted never arrived */
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(l, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].n_shards, 2);
  CU_ASSERT_STRING_EQUAL(r.events[0].shards[0].external_id, "p2");
  CU_ASSERT_STRING_EQUAL(r.events[0].shards[1].external_id, "p9");
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "p1", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

/* Events whose spec comes as its bytes only (spec NULL, spec_enc set: how
 * a replay decodes them) make the same ledger as with the struct, on both
 * ledgers; a state event whose submitted never arrived records no spec,
 * whatever bytes it carries. */
static void test_spec_as_bytes_only(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, specs_yaml);
  altar_error_t err = {0};
  sub("pair", "p1", "jp", 0, 2);
  st("pair", "p1", "jp", 0, 2, ALTAR_STATE_RUNNING);
  st("pair", "p9", "jp", 1, 2, ALTAR_STATE_RUNNING); /* its submitted never arrived */
  altar_ledger_t *a = altar_ledger_memory_open(NULL), *b = altar_ledger_memory_open(NULL);
  char *dir = altar_test_tmpdir("apply-bytes");
  altar_ledger_t *c = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(a && b && c);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL(apply(a, &s, 0, nev, &r), 0);
  altar_spec_t *orig = evs[0].spec;
  evs[0].spec = NULL;
  CU_ASSERT_FATAL(altar_spec_enc_make(orig, &evs[0].spec_enc, &err) == 0);
  CU_ASSERT_FATAL(altar_spec_enc_make(orig, &evs[2].spec_enc, &err) == 0); /* stale bytes */
  CU_ASSERT_EQUAL(apply(b, &s, 0, nev, &r), 0);
  CU_ASSERT_EQUAL(apply(c, &s, 0, nev, &r), 0);
  char ca[ALTAR_LEDGER_CHECKSUM_LEN + 1], cb[ALTAR_LEDGER_CHECKSUM_LEN + 1], cc[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, ca, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(b, cb, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(c, cc, &err), 0);
  CU_ASSERT_STRING_EQUAL(ca, cb);
  CU_ASSERT_STRING_EQUAL(ca, cc);
  altar_ledger_t *ls[] = {b, c};
  for (size_t i = 0; i < 2; i++) {
    altar_ledger_entry_t e;
    CU_ASSERT_EQUAL_FATAL(altar_ledger_get(ls[i], "process", "p1", &e, &err), 0);
    CU_ASSERT(e.rec.spec && altar_spec_equal(e.rec.spec, orig));
    altar_ledger_entry_clear(&e);
    CU_ASSERT_EQUAL_FATAL(altar_ledger_get(ls[i], "process", "p9", &e, &err), 0);
    CU_ASSERT(e.rec.spec == NULL);
    altar_ledger_entry_clear(&e);
  }
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(c, NULL, &err), 0);
  altar_spec_free(orig);
  altar_apply_result_clear(&r);
  altar_ledger_close(a);
  altar_ledger_close(b);
  altar_ledger_close(c);
  altar_test_rmtree(dir);
  free(dir);
  altar_group_specs_clear(&s);
  ev_reset();
}

/* On both ledgers: the in-memory one gives a batch up as the durable one does. */
static altar_ledger_t *open_either(bool memory, const char *tag, char **pdir) {
  *pdir = NULL;
  if (memory) return altar_ledger_memory_open(NULL);
  *pdir = altar_test_tmpdir(tag);
  altar_error_t err = {0};
  return altar_ledger_rocksdb_open(*pdir, NULL, &err);
}

static void close_either(altar_ledger_t *l, char *dir) {
  altar_error_t err = {0};
  if (dir) CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), 0);
  altar_ledger_close(l);
  if (dir) altar_test_rmtree(dir);
  free(dir);
}

/* A held group whose rule decides again while the daemon runs (a shard
 * with the count label came) is held no more, though not ready yet. */
static void test_held_group_released_when_rule_decides(void) {
  for (int memory = 0; memory < 2; memory++) {
    ev_reset();
    altar_group_specs_t s;
    load_specs(&s, "t:\n  group_by: [job_id]\n  ready_when: {all_expected_folds: {count_label: missing}}\n");
    char *dir;
    altar_error_t err = {0};
    altar_ledger_t *l = open_either(memory, "apply-unhold", &dir);
    CU_ASSERT_FATAL(l != NULL);
    sub("t", "a", "j", 0, 1);
    st("t", "a", "j", 0, 1, ALTAR_STATE_SUCCEEDED);
    altar_apply_result_t r = {0};
    CU_ASSERT_EQUAL(altar_apply_events_atomic(l, &s, evs, nev, -1, &r, &err), ALTAR_OK);
    CU_ASSERT_EQUAL(r.held_groups.n, 1);
    size_t held = 0;
    CU_ASSERT(altar__held_count(l, &held, &err) == ALTAR_OK && held == 1);
    ev_reset();
    sub("t", "b", "j", 1, 1);
    st("t", "b", "j", 1, 1, ALTAR_STATE_SUCCEEDED);
    for (int k = 0; k < 2; k++) altar_strmap_set(&evs[k].handle.labels, "missing", "3"); /* folds 0..2: not ready */
    altar_apply_result_reset(&r);
    r.ledger_may_hold = true;
    CU_ASSERT_EQUAL(altar_apply_events_atomic(l, &s, evs, nev, -1, &r, &err), ALTAR_OK);
    CU_ASSERT_EQUAL(r.held_groups.n, 0);
    CU_ASSERT_EQUAL(r.n_events, 0);
    CU_ASSERT(altar__held_count(l, &held, &err) == ALTAR_OK && held == 0);
    altar_apply_result_clear(&r);
    close_either(l, dir);
    altar_group_specs_clear(&s);
  }
}

/* Held by one event and decided again by the next in the same batch, a
 * group is released just as when the two come in batches of their own
 * (test_held_group_released_when_rule_decides), though the caller did not
 * know of any held group (ledger_may_hold unset, as a replay starts): the
 * daemon and a rebuild batch events differently and must write the same
 * ledger. Whether the second event leaves the group fanning in or fires it. */
static void test_held_and_decided_in_one_batch(void) {
  static const struct {
    const char *missing; /* the count label of the second shard */
    size_t fired;
  } cases[] = {{"3", 0}, {"2", 1}}; /* folds 0..2: not ready; folds 0..1: ready */
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int memory = 0; memory < 2; memory++) {
      ev_reset();
      altar_group_specs_t s;
      load_specs(&s, "t:\n  group_by: [job_id]\n  ready_when: {all_expected_folds: {count_label: missing}}\n");
      char *dir;
      altar_error_t err = {0};
      altar_ledger_t *l = open_either(memory, "apply-hold-one-batch", &dir);
      CU_ASSERT_FATAL(l != NULL);
      sub("t", "a", "j", 0, 1);
      st("t", "a", "j", 0, 1, ALTAR_STATE_SUCCEEDED); /* no count label: the rule cannot decide */
      sub("t", "b", "j", 1, 1);
      st("t", "b", "j", 1, 1, ALTAR_STATE_SUCCEEDED);
      for (int k = 2; k < 4; k++) altar_strmap_set(&evs[k].handle.labels, "missing", cases[c].missing);
      altar_apply_result_t r = {0};
      CU_ASSERT_EQUAL(altar_apply_events_atomic(l, &s, evs, nev, -1, &r, &err), ALTAR_OK);
      CU_ASSERT_EQUAL(r.held_groups.n, 1); /* held by a */
      CU_ASSERT_EQUAL(r.n_events, cases[c].fired);
      size_t held = 9;
      CU_ASSERT(altar__held_count(l, &held, &err) == ALTAR_OK && held == 0);
      altar_apply_result_clear(&r);
      close_either(l, dir);
      altar_group_specs_clear(&s);
    }
}

/* A readiness rule that cannot decide holds its group: the events are
 * applied, nothing fires or is consumed, and the ledger notes the group
 * with the rule's error until it is decided again. */
static void test_predicate_error_holds_group(void) {
  for (int memory = 0; memory < 2; memory++) {
    ev_reset();
    altar_group_specs_t s, fixed;
    load_specs(&s, "t:\n  group_by: [job_id]\n  ready_when: {all_expected_folds: {count_label: missing}}\n");
    load_specs(&fixed, "t:\n  group_by: [job_id]\n  ready_when: single\n");
    char *dir;
    altar_error_t err = {0};
    altar_ledger_t *l = open_either(memory, "apply-err", &dir);
    CU_ASSERT_FATAL(l != NULL);
    sub("t", "a", "j", 0, 1);
    st("t", "a", "j", 0, 1, ALTAR_STATE_SUCCEEDED);
    evs[1].ts = 42.5;
    altar_apply_result_t r = {0};
    CU_ASSERT_EQUAL(altar_apply_events_atomic(l, &s, evs, nev, -1, &r, &err), ALTAR_OK);
    CU_ASSERT_EQUAL(r.n_events, 0);
    CU_ASSERT_FATAL(r.held_groups.n == 1 && r.held_reasons.n == 1);
    CU_ASSERT_STRING_EQUAL(r.held_groups.v[0], "t:j");
    CU_ASSERT(strstr(r.held_reasons.v[0], "missing") != NULL);
    altar_ledger_entry_t e;
    CU_ASSERT_FATAL(altar_ledger_get(l, "process", "a", &e, &err) == ALTAR_OK); /* applied */
    CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_SUCCEEDED);
    CU_ASSERT(!e.rec.consumed);
    altar_ledger_entry_clear(&e);
    size_t held = 0;
    CU_ASSERT(altar__held_count(l, &held, &err) == ALTAR_OK && held == 1);
    /* Checked again under the same rule: still held, nothing fires. */
    altar_apply_result_reset(&r);
    CU_ASSERT(altar_ledger_begin(l, &err) == ALTAR_OK);
    CU_ASSERT_EQUAL(altar__apply_recheck_held(l, &s, &r, &err), ALTAR_OK);
    CU_ASSERT(altar_ledger_commit(l, &err) == ALTAR_OK);
    CU_ASSERT(r.n_events == 0 && r.held_groups.n == 1);
    /* Under a working rule: fires once and is held no more. */
    altar_apply_result_reset(&r);
    CU_ASSERT(altar_ledger_begin(l, &err) == ALTAR_OK);
    CU_ASSERT_EQUAL(altar__apply_recheck_held(l, &fixed, &r, &err), ALTAR_OK);
    CU_ASSERT(altar_ledger_commit(l, &err) == ALTAR_OK);
    CU_ASSERT(r.n_events == 1 && r.held_groups.n == 0);
    if (r.n_events == 1) {
      CU_ASSERT_EQUAL(r.events[0].event, ALTAR_GROUP_FIRED);
      CU_ASSERT_EQUAL(r.events[0].ts, 42.5); /* the ts of the event that held it */
    }
    CU_ASSERT(altar__held_count(l, &held, &err) == ALTAR_OK && held == 0);
    altar_apply_result_reset(&r);
    CU_ASSERT(altar_ledger_begin(l, &err) == ALTAR_OK);
    CU_ASSERT_EQUAL(altar__apply_recheck_held(l, &fixed, &r, &err), ALTAR_OK);
    CU_ASSERT(altar_ledger_commit(l, &err) == ALTAR_OK);
    CU_ASSERT_EQUAL(r.n_events, 0);
    altar_apply_result_clear(&r);
    close_either(l, dir);
    altar_group_specs_clear(&s);
    altar_group_specs_clear(&fixed);
  }
}

/* Every message of e (altar_encode_group_messages) within the bounds, and
 * the head and pages read back into e's whole member and output lists. */
static void check_messages(const altar_group_event_t *e, size_t want_msgs) {
  altar_buf_t *msgs = NULL;
  size_t nm = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_messages(e, &msgs, &nm, &err), 0);
  CU_ASSERT_EQUAL(nm, want_msgs);
  altar_group_event_t head;
  CU_ASSERT_EQUAL_FATAL(altar_decode_group(msgs[0].data, msgs[0].len, &head, &err), 0);
  CU_ASSERT_EQUAL(head.pages, nm - 1);
  CU_ASSERT_EQUAL(head.members_total, e->n_shards);
  CU_ASSERT_STRING_EQUAL(head.event_id, e->event_id);
  for (size_t i = 0; i < nm; i++) {
    CU_ASSERT(msgs[i].len <= ALTAR_MAX_MESSAGE);
    if (!i) continue;
    altar_group_event_t p;
    CU_ASSERT_EQUAL_FATAL(altar_decode_group_page(msgs[i].data, msgs[i].len, &p, &err), 0);
    CU_ASSERT_EQUAL(p.page, i);
    CU_ASSERT_EQUAL(altar_group_event_take_page(&head, &p), 1);
    CU_ASSERT_EQUAL(altar_group_event_take_page(&head, &p), 0); /* a copy is not taken twice */
    altar_group_event_clear(&p);
  }
  CU_ASSERT_EQUAL(head.page, head.pages);
  CU_ASSERT_EQUAL_FATAL(head.n_shards, e->n_shards);
  for (size_t i = 0; i < e->n_shards; i++) CU_ASSERT(altar_handle_equal(&head.shards[i], &e->shards[i]));
  CU_ASSERT_EQUAL_FATAL(head.n_outputs, e->n_outputs);
  for (size_t i = 0; i < e->n_outputs; i++) CU_ASSERT(altar_transfer_equal(&head.outputs[i], &e->outputs[i]));
  altar_group_event_clear(&head);
  for (size_t i = 0; i < nm; i++) altar_buf_free(&msgs[i]);
  free(msgs);
}

/* A group of more shards than one message lists (ALTAR_MAX_ARRAY + 1)
 * fires with all of them, one event whose id covers every member; it goes
 * out as a head and a page. */
static void test_wide_group_fires_whole(void) {
  for (int memory = 0; memory < 2; memory++) {
    ev_reset();
    altar_group_specs_t s;
    load_specs(&s,
               "wide:\n  group_by: [job_id]\n  ready_when: {all_label_values: {label: fold, values: ['0', '1']}}\n");
    char *dir;
    altar_error_t err = {0};
    altar_ledger_t *l = open_either(memory, "apply-wide", &dir);
    CU_ASSERT_FATAL(l != NULL);
    /* ALTAR_MAX_ARRAY succeeded shards of fold 1, put straight into the ledger. */
    CU_ASSERT_EQUAL_FATAL(altar_ledger_begin(l, &err), 0);
    for (unsigned i = 0; i < ALTAR_MAX_ARRAY; i++) {
      char eid[32];
      snprintf(eid, sizeof eid, "w%u", i);
      altar_handle_t h;
      altar_handle_init(&h, "process", eid);
      altar_strmap_set(&h.labels, "job_id", "j");
      altar_strmap_set(&h.labels, "fold", "1");
      altar_record_meta_t meta = {.task_key = eid, .group_key = "j"};
      CU_ASSERT_EQUAL_FATAL(altar_ledger_record_meta(l, &h, "wide", NULL, &meta, &err), 0);
      CU_ASSERT_EQUAL_FATAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
      altar_handle_clear(&h);
    }
    CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
    /* Fold 0 makes the group ready with one shard more than a message lists. */
    sub("wide", "z", "j", 0, 1);
    st("wide", "z", "j", 0, 1, ALTAR_STATE_SUCCEEDED);
    altar_apply_result_t r = {0};
    CU_ASSERT_EQUAL_FATAL(altar_apply_events_atomic(l, &s, evs, nev, 0, &r, &err), 0);
    CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
    const altar_group_event_t *g = &r.events[0];
    CU_ASSERT_EQUAL(g->event, ALTAR_GROUP_FIRED);
    CU_ASSERT_EQUAL_FATAL(g->n_shards, ALTAR_MAX_ARRAY + 1);
    CU_ASSERT_FALSE(altar_group_event_fits(g));
    /* The id over every member's task key, as for a narrow group. */
    const char **keys = calloc(g->n_shards, sizeof *keys);
    for (size_t i = 0; i < g->n_shards; i++)
      keys[i] = strcmp(g->shards[i].external_id, "z") ? g->shards[i].external_id : evs[0].task_key;
    char id[ALTAR_TASK_KEY_LEN + 1];
    CU_ASSERT_EQUAL(altar_group_event_id("wide", "j", keys, g->n_shards, id), 0);
    CU_ASSERT_STRING_EQUAL(id, g->event_id);
    free(keys);
    check_messages(g, 2);
    altar_ledger_entry_t e;
    CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "w0", &e, &err), 0);
    CU_ASSERT(e.rec.consumed);
    altar_ledger_entry_clear(&e);
    altar_apply_result_clear(&r);
    close_either(l, dir);
    altar_group_specs_clear(&s);
  }
}

/* Outputs past what one message carries beside its shards (a shard with
 * 3.5 MB of labels, 3000 outputs of ~730 KB) no longer stop the group: it
 * fires, the head carries the shard and the outputs follow in pages. */
static void test_outputs_beyond_the_room_paged(void) {
  ev_reset();
  altar_group_specs_t s;
  load_specs(&s, "big:\n  group_by: [job_id]\n  ready_when: {all_label_values: {label: fold, values: ['0', '1']}}\n"
                 "  event_outputs: true\n");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  CU_ASSERT_FATAL(l != NULL);
  size_t big_len = 60000; /* 3.5 MB of labels on one shard: 58 of these */
  char *big = malloc(big_len + 1);
  CU_ASSERT_FATAL(big != NULL);
  memset(big, 'x', big_len);
  big[big_len] = 0;
  altar_spec_t *spec = altar_spec_new("big", "img:1");
  altar_spec_add_arg(spec, "run");
  for (int i = 0; i < 3000; i++) { /* about 730 KB of outputs: under a quarter of the bound, over what is left */
    char uri[256], path[32];
    snprintf(uri, sizeof uri, "file:///out/%04d/%0160d", i, 0);
    snprintf(path, sizeof path, "o/%d", i);
    CU_ASSERT_EQUAL_FATAL(altar_spec_add_output(spec, uri, path), 0);
  }
  CU_ASSERT_EQUAL_FATAL(altar_ledger_begin(l, &err), 0);
  altar_handle_t h;
  altar_handle_init(&h, "process", "w0");
  altar_strmap_set(&h.labels, "job_id", "j");
  altar_strmap_set(&h.labels, "fold", "1");
  for (int i = 0; i < 58; i++) {
    char k[16];
    snprintf(k, sizeof k, "blob%02d", i);
    altar_strmap_set(&h.labels, k, big);
  }
  altar_record_meta_t meta = {.task_key = "w0", .group_key = "j"};
  CU_ASSERT_EQUAL_FATAL(altar_ledger_record_meta(l, &h, "big", spec, &meta, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
  altar_handle_clear(&h);
  sub("big", "z", "j", 0, 1);
  st("big", "z", "j", 0, 1, ALTAR_STATE_SUCCEEDED);
  altar_apply_result_t r = {0};
  CU_ASSERT_EQUAL_FATAL(altar_apply_events_atomic(l, &s, evs, nev, 0, &r, &err), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_events, 1);
  CU_ASSERT_EQUAL(r.events[0].n_outputs, 3000);
  CU_ASSERT_FALSE(altar_group_event_fits(&r.events[0]));
  /* the head: the big shard, then the small one, then outputs in pages */
  altar_buf_t *msgs = NULL;
  size_t nm = 0;
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_messages(&r.events[0], &msgs, &nm, &err), 0);
  CU_ASSERT(nm >= 2);
  for (size_t i = 0; i < nm; i++) altar_buf_free(&msgs[i]);
  free(msgs);
  check_messages(&r.events[0], nm);
  altar_apply_result_clear(&r);
  altar_spec_free(spec);
  free(big);
  altar_ledger_close(l);
  altar_group_specs_clear(&s);
}

static void test_bad_events(void) {
  ev_reset();
  altar_group_specs_t s = {0};
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_status_event_t *e = ev_new(ALTAR_EV_STATE, "k", "a", "j", 0, 1);
  e->state = (altar_state_t)9;
  altar_apply_result_t r = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_apply_events(l, &s, evs, nev, 0, &r, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "event[0].state") != NULL);
  e->state = ALTAR_STATE_RUNNING;
  free(e->kind);
  e->kind = NULL;
  CU_ASSERT_EQUAL(altar_apply_events(l, &s, evs, nev, 0, &r, &err), ALTAR_EINVAL);
  altar_apply_result_clear(&r);
  altar_ledger_close(l);
  ev_reset();
}

static int cleanup(void) {
  ev_reset();
  return 0;
}

static void add(void) {
  ALTAR_SUITE("apply", NULL, cleanup);
  ALTAR_TEST(test_five_fold_fires_once_with_id);
  ALTAR_TEST(test_long_group_key_and_reset);
  ALTAR_TEST(test_batch_size_never_changes_groups);
  ALTAR_TEST(test_same_on_rocksdb);
  ALTAR_TEST(test_defer_and_stall);
  ALTAR_TEST(test_retry_then_dead_letter);
  ALTAR_TEST(test_retry_same_handle_then_fire);
  ALTAR_TEST(test_retry_gives_up_when_hopeless);
  ALTAR_TEST(test_dead_letter_carries_reasons);
  ALTAR_TEST(test_released_and_unknown);
  ALTAR_TEST(test_dead_workers_run_is_settled);
  ALTAR_TEST(test_spec_as_bytes_only);
  ALTAR_TEST(test_predicate_error_holds_group);
  ALTAR_TEST(test_held_group_released_when_rule_decides);
  ALTAR_TEST(test_held_and_decided_in_one_batch);
  ALTAR_TEST(test_wide_group_fires_whole);
  ALTAR_TEST(test_outputs_beyond_the_room_paged);
  ALTAR_TEST(test_bad_events);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
