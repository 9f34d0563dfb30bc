/* The shared TaskLedger suite body (see ledger_suite.h). */
#include "ledger_suite.h"

#include "altar/codec.h"
#include "altar/spec.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CUnit tests take no arguments: the suite's init picks the factory. */
#define MAX_FACTORIES 4
static const altar_ledger_factory_t *factories[MAX_FACTORIES];
static size_t n_factories;
static const altar_ledger_factory_t *cur;

static altar_spec_t *mkspec(const char *kind, const char *fold, const char *cmd) {
  altar_spec_t *s = altar_spec_new(kind, "img:1");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_add_arg(s, cmd);
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_set_label(s, "fold", fold);
  return s;
}

static void mkhandle(altar_handle_t *h, const char *eid, const char *fold) {
  CU_ASSERT_FATAL(altar_handle_init(h, "process", eid) == 0);
  altar_strmap_set(&h->labels, "job_id", "j1");
  altar_strmap_set(&h->labels, "fold", fold);
}

static void add(altar_ledger_t *l, const char *eid, const char *fold, const char *gk) {
  altar_handle_t h;
  mkhandle(&h, eid, fold);
  altar_spec_t *s = mkspec("train", fold, "run");
  altar_record_meta_t meta = {.task_key = eid, .group_key = gk};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s, &meta, &err), 0);
  altar_spec_free(s);
  altar_handle_clear(&h);
}

static void set(altar_ledger_t *l, const char *eid, altar_state_t st) {
  altar_handle_t h;
  CU_ASSERT_FATAL(altar_handle_init(&h, "process", eid) == 0);
  altar_failure_t *f = st == ALTAR_STATE_FAILED ? altar_failure_exit(3, "boom", true) : NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, st, f, &err), 0);
  altar_failure_free(f);
  altar_handle_clear(&h);
}

static void consume1(altar_ledger_t *l, const char *eid) {
  altar_handle_t h;
  CU_ASSERT_FATAL(altar_handle_init(&h, "process", eid) == 0);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  altar_handle_clear(&h);
}

static size_t n_open(altar_ledger_t *l) {
  altar_handle_t *hs;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_open_handles(l, &hs, &n, &err) == 0);
  altar_handles_free(hs, n);
  return n;
}

static void get(altar_ledger_t *l, const char *eid, altar_ledger_entry_t *e) {
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_get(l, "process", eid, e, &err) == 0);
}

static void test_record_and_open_handles(void) {
  altar_ledger_t *l = cur->open();
  add(l, "b", "1", "j1");
  add(l, "a", "0", "j1");
  altar_handle_t *hs;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_open_handles(l, &hs, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 2);
  CU_ASSERT_STRING_EQUAL(hs[0].external_id, "a"); /* sorted by key */
  CU_ASSERT_STRING_EQUAL(hs[1].external_id, "b");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&hs[0].labels, "fold"), "0"); /* labels persisted */
  altar_handles_free(hs, n);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_PENDING);
  CU_ASSERT_STRING_EQUAL(e.rec.kind, "train");
  CU_ASSERT_FATAL(e.rec.spec != NULL);
  CU_ASSERT_STRING_EQUAL(e.rec.spec->command[0], "run");
  CU_ASSERT_STRING_EQUAL(e.task_key, "a");
  CU_ASSERT_STRING_EQUAL(e.group_key, "j1");
  CU_ASSERT_FALSE(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "zzz", &e, &err), ALTAR_ENOTFOUND);
  cur->destroy(l);
}

static void test_record_idempotent_while_open(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "g");
  set(l, "a", ALTAR_STATE_RUNNING);
  altar_handle_t h;
  mkhandle(&h, "a", "0");
  altar_spec_t *other = mkspec("train", "0", "different");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_record(l, &h, "train", other, &err), 0);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_RUNNING); /* not reset */
  CU_ASSERT_STRING_EQUAL(e.rec.spec->command[0], "run");
  altar_ledger_entry_clear(&e);
  /* Succeeded but not consumed is still open: still a no-op. */
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(altar_ledger_record(l, &h, "train", other, &err), 0);
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_SUCCEEDED);
  altar_ledger_entry_clear(&e);
  altar_spec_free(other);
  altar_handle_clear(&h);
  cur->destroy(l);
}

static void test_set_state_failure(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "g");
  set(l, "a", ALTAR_STATE_FAILED);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_FAILED);
  CU_ASSERT_FATAL(e.rec.failure != NULL);
  CU_ASSERT_STRING_EQUAL(e.rec.failure->reason, "exit_3");
  CU_ASSERT_STRING_EQUAL(e.rec.failure->detail, "boom");
  CU_ASSERT(e.rec.failure->deterministic);
  CU_ASSERT(e.rec.failure->exit_code.set && e.rec.failure->exit_code.v == 3);
  altar_ledger_entry_clear(&e);
  set(l, "a", ALTAR_STATE_RUNNING); /* failure only travels with FAILED */
  get(l, "a", &e);
  CU_ASSERT(e.rec.failure == NULL);
  altar_ledger_entry_clear(&e);
  altar_handle_t h;
  altar_handle_init(&h, "process", "nope");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_RUNNING, NULL, &err), ALTAR_ENOTFOUND);
  CU_ASSERT(strstr(err.msg, "nope") != NULL);
  altar_handle_clear(&h);
  cur->destroy(l);
}

static void test_active_sets_and_consume(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "g");
  add(l, "b", "1", "g");
  add(l, "c", "2", "g");
  add(l, "d", "3", "g");
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  set(l, "b", ALTAR_STATE_FAILED);
  set(l, "c", ALTAR_STATE_RUNNING);
  altar_record_t *rs;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_active_succeeded(l, &rs, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  CU_ASSERT_STRING_EQUAL(rs[0].handle.external_id, "a");
  CU_ASSERT(rs[0].spec != NULL); /* candidates carry their spec */
  altar_records_free(rs, n);
  CU_ASSERT_EQUAL(altar_ledger_active_failed(l, &rs, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  CU_ASSERT_STRING_EQUAL(rs[0].handle.external_id, "b");
  CU_ASSERT_STRING_EQUAL(rs[0].failure->reason, "exit_3");
  altar_records_free(rs, n);
  CU_ASSERT_EQUAL(n_open(l), 2); /* c running, d pending */
  consume1(l, "a");
  consume1(l, "b");
  consume1(l, "a");    /* again: no-op */
  consume1(l, "nope"); /* unknown: skipped */
  CU_ASSERT_EQUAL(altar_ledger_active_succeeded(l, &rs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_records_free(rs, n);
  CU_ASSERT_EQUAL(altar_ledger_active_failed(l, &rs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_records_free(rs, n);
  /* A consumed pending record is not polled. */
  consume1(l, "d");
  CU_ASSERT_EQUAL(n_open(l), 1);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_SUCCEEDED);
  altar_ledger_entry_clear(&e);
  cur->destroy(l);
}

static void test_reopen_consumed_record(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "old-group");
  set(l, "a", ALTAR_STATE_FAILED);
  altar_handle_t h;
  mkhandle(&h, "a", "0");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &h, &err), 0);
  set(l, "a", ALTAR_STATE_FAILED);
  consume1(l, "a");
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.restart_count, 1);
  CU_ASSERT(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  /* Work re-submitted under the same external_id re-opens the record. */
  altar_spec_t *s2 = mkspec("train", "0", "second-run");
  altar_record_meta_t meta = {.task_key = "a2", .group_key = "new-group"};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s2, &meta, &err), 0);
  get(l, "a", &e);
  CU_ASSERT_FALSE(e.rec.consumed);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(e.rec.restart_count, 0);
  CU_ASSERT(e.rec.failure == NULL);
  CU_ASSERT_STRING_EQUAL(e.rec.spec->command[0], "second-run");
  CU_ASSERT_STRING_EQUAL(e.group_key, "new-group");
  CU_ASSERT_STRING_EQUAL(e.task_key, "a2");
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL(n_open(l), 1);
  const altar_ledger_entry_t *const *m;
  size_t n;
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "new-group", &m, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "old-group", &m, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_spec_free(s2);
  altar_handle_clear(&h);
  cur->destroy(l);
}

static void test_restart(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "g");
  altar_handle_t h;
  mkhandle(&h, "a", "0");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &h, &err), ALTAR_ESTATE); /* pending */
  set(l, "a", ALTAR_STATE_FAILED);
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &h, &err), 0);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(e.rec.restart_count, 1);
  CU_ASSERT(e.rec.failure == NULL);
  altar_ledger_entry_clear(&e);
  CU_ASSERT_EQUAL(n_open(l), 1);
  set(l, "a", ALTAR_STATE_FAILED);
  consume1(l, "a");
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &h, &err), ALTAR_ESTATE); /* consumed */
  altar_handle_t nope;
  altar_handle_init(&nope, "process", "nope");
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &nope, &err), ALTAR_ENOTFOUND);
  altar_handle_clear(&nope);
  altar_handle_clear(&h);
  cur->destroy(l);
}

static void test_group_index(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "j1");
  add(l, "c", "2", "j1");
  add(l, "b", "1", "j1");
  add(l, "x", "0", "j2");
  add(l, "y", "0", NULL); /* not grouped */
  const altar_ledger_entry_t *const *m;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "j1", &m, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 3);
  CU_ASSERT_STRING_EQUAL(m[0]->rec.handle.external_id, "a");
  CU_ASSERT_STRING_EQUAL(m[1]->rec.handle.external_id, "b");
  CU_ASSERT_STRING_EQUAL(m[2]->rec.handle.external_id, "c");
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "other", "j1", &m, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  set(l, "b", ALTAR_STATE_SUCCEEDED);
  consume1(l, "a");
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "j1", &m, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 2);
  CU_ASSERT_STRING_EQUAL(m[0]->rec.handle.external_id, "b");
  CU_ASSERT_EQUAL(m[0]->rec.state, ALTAR_STATE_SUCCEEDED);
  const altar_ledger_entry_t *p = altar_ledger_peek_task(l, "x");
  CU_ASSERT(p && !strcmp(p->rec.handle.external_id, "x"));
  CU_ASSERT(altar_ledger_peek_task(l, "a") == NULL); /* consumed: not open */
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") == NULL);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "c") != NULL);
  cur->destroy(l);
}

/* group_counts agrees with a walk of group_members after every change. */
static void counts_match(altar_ledger_t *l, const char *gk) {
  const altar_ledger_entry_t *const *m;
  size_t n, ws = 0, wf = 0, cs = 99, cf = 99;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_ledger_group_members(l, "train", gk, &m, &n, &err), 0);
  for (size_t i = 0; i < n; i++) {
    ws += m[i]->rec.state == ALTAR_STATE_SUCCEEDED;
    wf += m[i]->rec.state == ALTAR_STATE_FAILED;
  }
  CU_ASSERT_EQUAL(altar_ledger_group_counts(l, "train", gk, &cs, &cf, &err), 0);
  CU_ASSERT_EQUAL(cs, ws);
  CU_ASSERT_EQUAL(cf, wf);
}

static void test_group_counts(void) {
  altar_ledger_t *l = cur->open();
  altar_error_t err = {0};
  counts_match(l, "j1"); /* no such group */
  add(l, "a", "0", "j1");
  add(l, "b", "1", "j1");
  add(l, "c", "2", "j1");
  add(l, "x", "0", "j2");
  counts_match(l, "j1");
  set(l, "a", ALTAR_STATE_RUNNING);
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  set(l, "b", ALTAR_STATE_FAILED);
  set(l, "x", ALTAR_STATE_SUCCEEDED);
  counts_match(l, "j1");
  counts_match(l, "j2");
  set(l, "b", ALTAR_STATE_FAILED); /* the same state again */
  counts_match(l, "j1");
  altar_handle_t h;
  mkhandle(&h, "b", "1");
  CU_ASSERT_EQUAL(altar_ledger_restart(l, &h, &err), 0);
  altar_handle_clear(&h);
  counts_match(l, "j1");
  set(l, "c", ALTAR_STATE_SUCCEEDED);
  consume1(l, "a");
  counts_match(l, "j1");
  /* A batch that is given up leaves the counts as they were (the memory
   * ledger cannot give one up: its changes stay, counted). */
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  set(l, "b", ALTAR_STATE_SUCCEEDED);
  consume1(l, "c");
  counts_match(l, "j1");
  CU_ASSERT_EQUAL(altar_ledger_abort(l, &err), 0);
  counts_match(l, "j1");
  l = cur->reopen(l);
  counts_match(l, "j1");
  consume1(l, "b");
  consume1(l, "c");
  counts_match(l, "j1");
  cur->destroy(l);
}

typedef struct walk {
  char order[16][8];
  size_t n;
} walk_t;

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  walk_t *w = ctx;
  if (w->n < 16) snprintf(w->order[w->n++], 8, "%s", e->rec.handle.external_id);
  return 0;
}

static void test_foreach_and_stats(void) {
  altar_ledger_t *l = cur->open();
  add(l, "b", "1", "g");
  add(l, "a", "0", "g");
  add(l, "c", "2", "g");
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  consume1(l, "a");
  set(l, "b", ALTAR_STATE_FAILED);
  walk_t w = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_foreach(l, visit, &w, &err), 0);
  CU_ASSERT_EQUAL_FATAL(w.n, 3);
  CU_ASSERT_STRING_EQUAL(w.order[0], "a");
  CU_ASSERT_STRING_EQUAL(w.order[1], "b");
  CU_ASSERT_STRING_EQUAL(w.order[2], "c");
  altar_ledger_stats_t st;
  CU_ASSERT_EQUAL(altar_ledger_stats(l, &st, &err), 0);
  CU_ASSERT_EQUAL(st.records, 3);
  CU_ASSERT_EQUAL(st.consumed, 1);
  CU_ASSERT_EQUAL(st.open, 1);
  CU_ASSERT_EQUAL(st.by_state[ALTAR_STATE_FAILED], 1);
  CU_ASSERT_EQUAL(st.by_state[ALTAR_STATE_PENDING], 1);
  cur->destroy(l);
}

static void test_checksum_history_independent(void) {
  altar_ledger_t *a = cur->open(), *b = cur->open();
  char ca[ALTAR_LEDGER_CHECKSUM_LEN + 1], cb[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  altar_error_t err = {0};
  /* Same content through different histories. */
  add(a, "x", "0", "g");
  add(a, "y", "1", "g");
  set(a, "x", ALTAR_STATE_RUNNING);
  set(a, "x", ALTAR_STATE_SUCCEEDED);
  add(b, "y", "1", "g");
  add(b, "x", "0", "g");
  set(b, "x", ALTAR_STATE_FAILED);
  set(b, "x", ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, ca, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(b, cb, &err), 0);
  CU_ASSERT_STRING_EQUAL(ca, cb);
  CU_ASSERT(strncmp(ca, "sha256:", 7) == 0 && strlen(ca) == ALTAR_LEDGER_CHECKSUM_LEN);
  consume1(b, "x");
  CU_ASSERT_EQUAL(altar_ledger_checksum(b, cb, &err), 0);
  CU_ASSERT_STRING_NOT_EQUAL(ca, cb);
  /* Reopening (and, for RocksDB, whatever compaction did) keeps it. */
  a = cur->reopen(a);
  CU_ASSERT_FATAL(a != NULL);
  char ca2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, ca2, &err), 0);
  CU_ASSERT_STRING_EQUAL(ca, ca2);
  cur->destroy(a);
  cur->destroy(b);
}

static void test_batch_reads_own_writes(void) {
  altar_ledger_t *l = cur->open();
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  add(l, "a", "0", "g");
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  const altar_ledger_entry_t *const *m;
  size_t n;
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "g", &m, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), 0);
  l = cur->reopen(l);
  altar_ledger_entry_t e;
  get(l, "a", &e);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_SUCCEEDED);
  altar_ledger_entry_clear(&e);
  cur->destroy(l);
}

static void test_survives_reopen(void) {
  altar_ledger_t *l = cur->open();
  add(l, "a", "0", "g");
  add(l, "b", "1", "g");
  add(l, "c", "2", "g");
  set(l, "a", ALTAR_STATE_SUCCEEDED);
  set(l, "b", ALTAR_STATE_FAILED);
  consume1(l, "c");
  l = cur->reopen(l);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_EQUAL(n_open(l), 0);
  const altar_ledger_entry_t *const *m;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_group_members(l, "train", "g", &m, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT(altar_ledger_peek_task(l, "b") != NULL);
  altar_record_t *rs;
  CU_ASSERT_EQUAL(altar_ledger_active_failed(l, &rs, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  CU_ASSERT_STRING_EQUAL(rs[0].failure->detail, "boom");
  altar_records_free(rs, n);
  /* A consumed record is re-opened after a reopen too. */
  add(l, "c", "2", "g");
  CU_ASSERT_EQUAL(n_open(l), 1);
  cur->destroy(l);
}

/* A spec given as its bytes only (meta.spec_enc, spec NULL: a replay's
 * events carry it so) is the record's spec, as if given as the struct;
 * bytes with a struct are the struct's; no bytes and no struct, no spec. */
static void test_spec_as_bytes_only(void) {
  altar_ledger_t *a = cur->open(), *b = cur->open();
  altar_error_t err = {0};
  altar_spec_t *s = mkspec("train", "0", "run");
  altar_spec_enc_t enc = {0};
  CU_ASSERT_FATAL(altar_spec_enc_make(s, &enc, &err) == 0);
  altar_handle_t h, h2;
  mkhandle(&h, "x", "0");
  mkhandle(&h2, "bare", "1");
  altar_record_meta_t bytes = {.task_key = "x", .group_key = "g", .spec_enc = &enc};
  altar_record_meta_t plain = {.task_key = "x", .group_key = "g"};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(a, &h, "train", NULL, &bytes, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_record_meta(b, &h, "train", s, &plain, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_record_meta(a, &h2, "train", NULL, &plain, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_record_meta(b, &h2, "train", NULL, &plain, &err), 0);
  for (int round = 0; round < 2; round++) {
    altar_ledger_entry_t e;
    get(a, "x", &e);
    CU_ASSERT(e.rec.spec && altar_spec_equal(e.rec.spec, s));
    altar_ledger_entry_clear(&e);
    get(a, "bare", &e);
    CU_ASSERT(e.rec.spec == NULL);
    altar_ledger_entry_clear(&e);
    char ca[ALTAR_LEDGER_CHECKSUM_LEN + 1], cb[ALTAR_LEDGER_CHECKSUM_LEN + 1];
    CU_ASSERT_EQUAL(altar_ledger_checksum(a, ca, &err), 0);
    CU_ASSERT_EQUAL(altar_ledger_checksum(b, cb, &err), 0);
    CU_ASSERT_STRING_EQUAL(ca, cb);
    a = cur->reopen(a);
    CU_ASSERT_FATAL(a != NULL);
  }
  altar_handle_clear(&h);
  altar_handle_clear(&h2);
  altar_spec_enc_clear(&enc);
  altar_spec_free(s);
  cur->destroy(a);
  cur->destroy(b);
}

/* ---- the side keyspace ---- */

typedef struct aux_seen {
  char keys[8][16];
  char vals[8][16];
  size_t n;
} aux_seen_t;

static int aux_collect(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  aux_seen_t *a = ctx;
  CU_ASSERT_FATAL(a->n < 8 && kl < 16 && vl < 16);
  memcpy(a->keys[a->n], k, kl);
  a->keys[a->n][kl] = '\0';
  memcpy(a->vals[a->n], v, vl);
  a->vals[a->n][vl] = '\0';
  a->n++;
  return 0;
}

static aux_seen_t aux_all(altar_ledger_t *l, const char *prefix) {
  aux_seen_t a = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, prefix, strlen(prefix), aux_collect, &a, &err), 0);
  return a;
}

static void aux_put(altar_ledger_t *l, const char *k, const char *v) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, strlen(k), v, strlen(v), &err), 0);
}

/* Side keys come back in bytewise order under their prefix, survive a
 * reopen, and are no part of the ledger's content. */
static void test_aux_keys(void) {
  altar_ledger_t *l = cur->open();
  altar_error_t err = {0};
  add(l, "a", "0", "g");
  char before[ALTAR_LEDGER_CHECKSUM_LEN + 1], after[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, before, &err), 0);
  aux_put(l, "o/2", "two");
  aux_put(l, "o/1", "one");
  aux_put(l, "o/10", "ten");
  aux_put(l, "p/1", "other");
  aux_put(l, "o/1", "uno"); /* replaced */
  CU_ASSERT_EQUAL(altar_ledger_aux_del(l, "o/2", 3, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_aux_del(l, "o/none", 6, &err), 0); /* absent: nothing to do */
  l = cur->reopen(l);
  aux_seen_t a = aux_all(l, "o/");
  CU_ASSERT_EQUAL_FATAL(a.n, 2);
  CU_ASSERT_STRING_EQUAL(a.keys[0], "o/1");
  CU_ASSERT_STRING_EQUAL(a.vals[0], "uno");
  CU_ASSERT_STRING_EQUAL(a.keys[1], "o/10");
  CU_ASSERT_EQUAL(aux_all(l, "").n, 3);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "p/1", 3, &b, &err), 0);
  CU_ASSERT(b.len == 5 && !memcmp(b.data, "other", 5));
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "o/2", 3, &b, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, after, &err), 0);
  CU_ASSERT_STRING_EQUAL(before, after);
  altar_ledger_stats_t st;
  CU_ASSERT_EQUAL(altar_ledger_stats(l, &st, &err), 0);
  CU_ASSERT_EQUAL(st.records, 1);
  altar_buf_free(&b);
  cur->destroy(l);
}

/* Inside a batch a side key reads back at once, a scan sees only what is
 * committed, and commit makes records and keys visible together. */
static void test_aux_joins_the_batch(void) {
  altar_ledger_t *l = cur->open();
  altar_error_t err = {0};
  aux_put(l, "s/old", "x");
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  add(l, "a", "0", "g");
  aux_put(l, "s/new", "y");
  CU_ASSERT_EQUAL(altar_ledger_aux_del(l, "s/old", 5, &err), 0);
  aux_put(l, "s/new", "z"); /* the later write wins */
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "s/new", 5, &b, &err), 0);
  CU_ASSERT(b.len == 1 && b.data[0] == 'z');
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "s/old", 5, &b, &err), ALTAR_ENOTFOUND);
  aux_seen_t a = aux_all(l, "s/");
  CU_ASSERT_EQUAL_FATAL(a.n, 1);
  CU_ASSERT_STRING_EQUAL(a.keys[0], "s/old");
  CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), 0);
  l = cur->reopen(l);
  a = aux_all(l, "s/");
  CU_ASSERT_EQUAL_FATAL(a.n, 1);
  CU_ASSERT_STRING_EQUAL(a.keys[0], "s/new");
  CU_ASSERT_STRING_EQUAL(a.vals[0], "z");
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  altar_buf_free(&b);
  cur->destroy(l);
}

/* abort drops the whole batch: new, changed and consumed records go back
 * to what they were, and the batch's side keys are gone. */
static void test_abort_drops_records_and_aux(void) {
  altar_ledger_t *l = cur->open();
  altar_error_t err = {0};
  add(l, "kept", "0", "g");
  add(l, "done", "1", "g");
  set(l, "done", ALTAR_STATE_SUCCEEDED);
  aux_put(l, "k/1", "before");
  char before[ALTAR_LEDGER_CHECKSUM_LEN + 1], after[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, before, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  add(l, "dropped", "2", "g");
  set(l, "kept", ALTAR_STATE_FAILED);
  consume1(l, "done");
  aux_put(l, "k/1", "during");
  aux_put(l, "k/2", "during");
  CU_ASSERT(altar_ledger_peek_open(l, "process", "dropped") != NULL);
  CU_ASSERT_EQUAL(altar_ledger_abort(l, &err), 0);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "dropped") == NULL);
  const altar_ledger_entry_t *e = altar_ledger_peek_open(l, "process", "kept");
  CU_ASSERT_FATAL(e != NULL);
  CU_ASSERT_EQUAL(e->rec.state, ALTAR_STATE_PENDING);
  CU_ASSERT(e->rec.failure == NULL);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "done") != NULL);
  CU_ASSERT_EQUAL(n_open(l), 1); /* kept; done is open but succeeded */
  counts_match(l, "g");
  aux_seen_t a = aux_all(l, "k/");
  CU_ASSERT_EQUAL_FATAL(a.n, 1);
  CU_ASSERT_STRING_EQUAL(a.vals[0], "before");
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, after, &err), 0);
  CU_ASSERT_STRING_EQUAL(before, after);
  l = cur->reopen(l);
  altar_ledger_entry_t got;
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "dropped", &got, &err), ALTAR_ENOTFOUND);
  altar_ledger_entry_clear(&got);
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, after, &err), 0);
  CU_ASSERT_STRING_EQUAL(before, after);
  /* And the ledger goes on: the next batch commits. */
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  consume1(l, "done");
  aux_put(l, "k/2", "after");
  CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), 0);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "done") == NULL);
  CU_ASSERT_EQUAL(aux_all(l, "k/").n, 2);
  cur->destroy(l);
}

static int suite_init(size_t i) {
  cur = factories[i];
  return 0;
}
static int init0(void) { return suite_init(0); }
static int init1(void) { return suite_init(1); }
static int init2(void) { return suite_init(2); }
static int init3(void) { return suite_init(3); }
static CU_InitializeFunc inits[MAX_FACTORIES] = {init0, init1, init2, init3};

void altar_ledger_suite_register(const altar_ledger_factory_t *f) {
  if (n_factories == MAX_FACTORIES) return;
  factories[n_factories] = f;
  char name[64];
  snprintf(name, sizeof name, "ledger.%s", f->name);
  CU_pSuite suite__ = CU_add_suite(name, inits[n_factories], NULL);
  n_factories++;
  if (!suite__) return;
  ALTAR_TEST(test_record_and_open_handles);
  ALTAR_TEST(test_record_idempotent_while_open);
  ALTAR_TEST(test_set_state_failure);
  ALTAR_TEST(test_active_sets_and_consume);
  ALTAR_TEST(test_reopen_consumed_record);
  ALTAR_TEST(test_restart);
  ALTAR_TEST(test_group_index);
  ALTAR_TEST(test_group_counts);
  ALTAR_TEST(test_foreach_and_stats);
  ALTAR_TEST(test_checksum_history_independent);
  ALTAR_TEST(test_batch_reads_own_writes);
  ALTAR_TEST(test_survives_reopen);
  ALTAR_TEST(test_spec_as_bytes_only);
  ALTAR_TEST(test_aux_keys);
  ALTAR_TEST(test_aux_joins_the_batch);
  ALTAR_TEST(test_abort_drops_records_and_aux);
}

/* ---- ledgers by directory, for the reconciler's suites ---- */

#define MAX_KEPT 64
static bool by_dir_memory;
static struct {
  char *dir;
  altar_ledger_t *l;
  bool open;
} kept[MAX_KEPT];
static size_t n_kept;

int altar_test_ledger_init_memory(void) {
  by_dir_memory = true;
  return 0;
}
int altar_test_ledger_init_rocksdb(void) {
  by_dir_memory = false;
  return 0;
}
bool altar_test_ledger_is_memory(void) { return by_dir_memory; }

int altar_test_ledger_cleanup(void) {
  for (size_t i = 0; i < n_kept; i++) {
    altar_ledger_close(kept[i].l);
    free(kept[i].dir);
  }
  n_kept = 0;
  return 0;
}

altar_ledger_t *altar_test_ledger_open(const char *dir) {
  altar_error_t err = {0};
  if (!by_dir_memory) {
    altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
    if (!l) fprintf(stderr, "open ledger %s: %s\n", dir, err.msg);
    CU_ASSERT_FATAL(l != NULL);
    return l;
  }
  for (size_t i = 0; i < n_kept; i++)
    if (!strcmp(kept[i].dir, dir)) {
      CU_ASSERT_FATAL(!kept[i].open); /* one process holds a ledger at a time */
      kept[i].open = true;
      return kept[i].l;
    }
  CU_ASSERT_FATAL(n_kept < MAX_KEPT);
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  CU_ASSERT_FATAL(l != NULL);
  kept[n_kept].dir = strdup(dir);
  kept[n_kept].l = l;
  kept[n_kept].open = true;
  n_kept++;
  return l;
}

void altar_test_ledger_close(altar_ledger_t *l) {
  for (size_t i = 0; i < n_kept; i++)
    if (kept[i].l == l) {
      CU_ASSERT(kept[i].open);
      kept[i].open = false;
      return;
    }
  altar_ledger_close(l);
}
