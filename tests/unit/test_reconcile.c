/* reconcile_once and run_reconcile_loop over a scripted fake backend. */
#include "altar/reconcile.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a scripted backend: each task walks through its states, one per poll ---- */

typedef struct script {
  const char *eid;
  const char *states; /* e.g. "rs" = running then succeeded; p r s f */
  size_t at;
} script_t;

typedef struct fake {
  script_t s[16];
  size_t n;
  int polls;
  size_t last_batch;
} fake_t;

static altar_state_t st_of(char c) {
  return c == 'r'   ? ALTAR_STATE_RUNNING
         : c == 's' ? ALTAR_STATE_SUCCEEDED
         : c == 'f' ? ALTAR_STATE_FAILED
                    : ALTAR_STATE_PENDING;
}

static int fake_poll(void *ctx, const altar_handle_t *hs, size_t n, altar_status_t **pout, size_t *pn,
                     altar_error_t *err) {
  (void)err;
  fake_t *f = ctx;
  f->polls++;
  f->last_batch = n;
  altar_status_t *out = calloc(n, sizeof *out);
  for (size_t i = 0; i < n; i++) {
    altar_state_t st = ALTAR_STATE_PENDING;
    for (size_t j = 0; j < f->n; j++) {
      script_t *s = &f->s[j];
      if (strcmp(s->eid, hs[i].external_id)) continue;
      size_t len = strlen(s->states);
      st = st_of(s->states[s->at < len ? s->at : len - 1]);
      if (s->at < len) s->at++;
    }
    altar_status_init(&out[i], &hs[i], st, st == ALTAR_STATE_FAILED ? altar_failure_exit(1, "died", false) : NULL);
  }
  *pout = out;
  *pn = n;
  return 0;
}

static fake_t fk;
static altar_poller_t poller = {fake_poll, &fk};

static void script(const char *eid, const char *states) { fk.s[fk.n++] = (script_t){eid, states, 0}; }

static void submit(altar_ledger_t *l, const char *kind, const char *eid, const char *labels) {
  altar_handle_t h;
  altar_handle_init(&h, "fake", eid);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", labels);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    *eq = '\0';
    altar_strmap_set(&h.labels, kv, eq + 1);
  }
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_record(l, &h, kind, NULL, &err), 0);
  altar_handle_clear(&h);
}

/* ---- callbacks that record what they saw ---- */

typedef struct calls {
  pthread_mutex_t mu;
  int ready, failed;
  char seen[32][64];
  size_t n_shards[32];
  int fail_ready; /* on_ready returns an error */
  bool dead;      /* on_failed answer */
  int active, max_active;
} calls_t;

static calls_t cs;

static int on_ready(void *ctx, const char *kind, const char *gk, const altar_handle_t *sh, size_t n,
                    altar_error_t *err) {
  calls_t *c = ctx;
  pthread_mutex_lock(&c->mu);
  if (c->fail_ready) {
    pthread_mutex_unlock(&c->mu);
    return altar_error_set(err, ALTAR_EIO, "downstream unavailable");
  }
  c->active++;
  if (c->active > c->max_active) c->max_active = c->active;
  int i = c->ready++;
  if (i < 32) {
    snprintf(c->seen[i], 64, "%s:%s", kind, gk);
    c->n_shards[i] = n;
  }
  for (size_t j = 0; j < n; j++) CU_ASSERT_STRING_EQUAL(sh[j].backend, "fake");
  pthread_mutex_unlock(&c->mu);
  usleep(2000); /* let concurrent callbacks overlap; the bound is checked, not the time */
  pthread_mutex_lock(&c->mu);
  c->active--;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static int on_failed(void *ctx, const char *kind, const char *gk, const altar_handle_t *fh, size_t n, bool *pdead,
                     altar_error_t *err) {
  (void)kind;
  (void)gk;
  (void)fh;
  (void)err;
  calls_t *c = ctx;
  c->failed++;
  CU_ASSERT(n >= 1);
  *pdead = c->dead;
  return 0;
}

static void spec_add(altar_group_specs_t *s, const char *kind, altar_predicate_t *p, bool with_failed) {
  altar_group_spec_t g = {0};
  g.kind = strdup(kind);
  const char *gb[] = {"job"};
  altar_group_by_init(&g.group_by, gb, 1);
  g.ready_when = *p;
  g.on_ready = on_ready;
  g.on_ready_ctx = &cs;
  if (with_failed) {
    g.on_failed = on_failed;
    g.on_failed_ctx = &cs;
  }
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_group_specs_add(s, &g, &err), 0);
}

static int reset(void) {
  memset(&fk, 0, sizeof fk);
  pthread_mutex_destroy(&cs.mu);
  memset(&cs, 0, sizeof cs);
  pthread_mutex_init(&cs.mu, NULL);
  return 0;
}

static size_t count_state(altar_ledger_t *l, bool succeeded) {
  altar_record_t *r;
  size_t n;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(
      (succeeded ? altar_ledger_active_succeeded(l, &r, &n, &err) : altar_ledger_active_failed(l, &r, &n, &err)) == 0);
  altar_records_free(r, n);
  return n;
}

/* ---- tests ---- */

static void test_fires_once_and_consumes(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_all_folds(&p, 3, &err);
  spec_add(&specs, "train", &p, true);
  submit(l, "train", "a", "job=j1,fold=0");
  submit(l, "train", "b", "job=j1,fold=1");
  submit(l, "train", "c", "job=j1,fold=2");
  script("a", "s");
  script("b", "rrrs"); /* finishes three ticks after a */
  script("c", "rs");
  altar_reconcile_result_t r = {0};
  for (int tick = 0; tick < 3; tick++) {
    CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
    CU_ASSERT_EQUAL(r.fired_groups.n, 0);
    altar_reconcile_result_clear(&r);
  }
  CU_ASSERT_EQUAL(fk.polls, 3);
  CU_ASSERT_EQUAL(fk.last_batch, 1); /* only b is still open: a and c were written back */
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.polled, 1);
  CU_ASSERT_EQUAL(r.succeeded, 1);
  CU_ASSERT_EQUAL_FATAL(r.fired_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.fired_groups.v[0], "train:j1");
  CU_ASSERT_EQUAL(cs.ready, 1);
  CU_ASSERT_EQUAL(cs.n_shards[0], 3); /* a finished three ticks ago and still counts */
  altar_reconcile_result_clear(&r);
  CU_ASSERT_EQUAL(count_state(l, true), 0); /* consumed */
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 0); /* never twice */
  CU_ASSERT_EQUAL(r.polled, 0);
  CU_ASSERT_EQUAL(cs.ready, 1);
  altar_reconcile_result_clear(&r);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_predicate_error_fires_nothing(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  spec_add(&specs, "score", &p, true);
  altar_predicate_all_expected_folds(&p, "fold", "num_folds", NULL, &err);
  spec_add(&specs, "train", &p, true);
  submit(l, "score", "s1", "job=j1");
  submit(l, "train", "t1", "job=j1,fold=0"); /* no num_folds and no default */
  script("s1", "s");
  script("t1", "s");
  altar_reconcile_result_t r = {0};
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), ALTAR_EPREDICATE);
  CU_ASSERT(strstr(err.msg, "train:j1") != NULL);
  CU_ASSERT(strstr(err.msg, "num_folds") != NULL);
  CU_ASSERT_EQUAL(cs.ready, 0);             /* the ready score group did not fire */
  CU_ASSERT_EQUAL(count_state(l, true), 2); /* states were written, nothing consumed */
  altar_reconcile_result_clear(&r);
  /* Fixed configuration: the retried tick fires both. */
  altar_group_spec_t *g = altar_group_specs_find_mut(&specs, "train");
  altar_predicate_clear(&g->ready_when);
  int64_t def = 1;
  altar_predicate_all_expected_folds(&g->ready_when, "fold", "num_folds", &def, &err);
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 2);
  CU_ASSERT_STRING_EQUAL(r.fired_groups.v[0], "score:j1"); /* kind, then key order */
  altar_reconcile_result_clear(&r);
  /* The loop propagates a predicate error too. */
  altar_predicate_clear(&g->ready_when);
  altar_predicate_all_expected_folds(&g->ready_when, "fold", "num_folds", NULL, &err);
  submit(l, "train", "t2", "job=j2,fold=0");
  script("t2", "s");
  altar_reconcile_loop_opts_t o = {.interval_s = 0, .max_ticks = 3, .stop_when_idle = true};
  altar_reconcile_result_t *rs;
  size_t n;
  CU_ASSERT_EQUAL(altar_run_reconcile_loop(&poller, l, &specs, &o, &rs, &n, NULL, &err), ALTAR_EPREDICATE);
  altar_reconcile_results_free(rs, n);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_blocked_groups(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_all_folds(&p, 2, &err);
  spec_add(&specs, "train", &p, true);
  altar_predicate_all_folds(&p, 2, &err);
  spec_add(&specs, "bare", &p, false); /* no on_failed */
  submit(l, "train", "a", "job=j1,fold=0");
  submit(l, "train", "b", "job=j1,fold=1");
  submit(l, "bare", "c", "job=j2,fold=0");
  submit(l, "bare", "d", "job=j2,fold=1");
  script("a", "s");
  script("b", "f");
  script("c", "s");
  script("d", "f");
  altar_reconcile_result_t r = {0};
  /* Deferred: left untouched for a later tick. */
  cs.dead = false;
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.failed, 2);
  CU_ASSERT_EQUAL_FATAL(r.deferred_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.deferred_groups.v[0], "train:j1");
  CU_ASSERT_EQUAL_FATAL(r.stalled_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.stalled_groups.v[0], "bare:j2");
  CU_ASSERT_EQUAL(r.dead_lettered_groups.n, 0);
  CU_ASSERT_EQUAL(count_state(l, true), 2);
  CU_ASSERT_EQUAL(count_state(l, false), 2);
  altar_reconcile_result_clear(&r);
  /* Dead-lettered: consumed, succeeded sibling included. */
  cs.dead = true;
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL_FATAL(r.dead_lettered_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.dead_lettered_groups.v[0], "train:j1");
  CU_ASSERT_EQUAL(r.stalled_groups.n, 1);
  CU_ASSERT_EQUAL(cs.failed, 2);
  altar_reconcile_result_clear(&r);
  CU_ASSERT_EQUAL(count_state(l, true), 1); /* only bare's c remains */
  CU_ASSERT_EQUAL(count_state(l, false), 1);
  /* The loop escalates the stall. */
  altar_reconcile_loop_opts_t o = {.interval_s = 0, .max_ticks = 10, .stop_when_idle = true};
  altar_reconcile_result_t *rs;
  size_t n;
  altar_strlist_t stalled = {0};
  CU_ASSERT_EQUAL(altar_run_reconcile_loop(&poller, l, &specs, &o, &rs, &n, &stalled, &err), ALTAR_ESTALLED);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL_FATAL(stalled.n, 1);
  CU_ASSERT_STRING_EQUAL(stalled.v[0], "bare:j2");
  CU_ASSERT(strstr(err.msg, "bare:j2") != NULL);
  altar_strlist_clear(&stalled);
  altar_reconcile_results_free(rs, n);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_ready_beats_failed_sibling(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_count_at_least(&p, 2, &err);
  spec_add(&specs, "k", &p, true);
  submit(l, "k", "a", "job=j");
  submit(l, "k", "b", "job=j");
  submit(l, "k", "c", "job=j");
  script("a", "s");
  script("b", "s");
  script("c", "f");
  altar_reconcile_result_t r = {0};
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 1);
  CU_ASSERT_EQUAL(r.dead_lettered_groups.n + r.deferred_groups.n + r.stalled_groups.n, 0);
  CU_ASSERT_EQUAL(cs.failed, 0);
  CU_ASSERT_EQUAL(count_state(l, false), 0); /* settled with its group */
  altar_reconcile_result_clear(&r);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_on_ready_error_keeps_group(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  spec_add(&specs, "k", &p, true);
  submit(l, "k", "a", "job=j");
  script("a", "s");
  cs.fail_ready = 1;
  altar_reconcile_result_t r = {0};
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), ALTAR_EIO);
  CU_ASSERT(strstr(err.msg, "downstream unavailable") != NULL);
  CU_ASSERT_EQUAL(count_state(l, true), 1);
  altar_reconcile_result_clear(&r);
  cs.fail_ready = 0;
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 1);
  altar_reconcile_result_clear(&r);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_bounded_concurrency(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  spec_add(&specs, "k", &p, true);
  for (int i = 0; i < 8; i++) {
    char eid[8], labels[16];
    snprintf(eid, sizeof eid, "t%d", i);
    snprintf(labels, sizeof labels, "job=j%d", i);
    submit(l, "k", eid, labels);
  }
  for (int i = 0; i < 8; i++) script((const char *[]){"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}[i], "s");
  altar_reconcile_opts_t o = {.max_concurrent_callbacks = 3};
  altar_reconcile_result_t r = {0};
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, &o, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 8);
  CU_ASSERT_EQUAL(cs.ready, 8);
  CU_ASSERT(cs.max_active <= 3);
  CU_ASSERT(cs.max_active >= 1);
  CU_ASSERT_EQUAL(count_state(l, true), 0);
  altar_reconcile_result_clear(&r);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

static void test_loop_idle_and_max_ticks(void) {
  reset();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  spec_add(&specs, "k", &p, true);
  submit(l, "k", "a", "job=j1");
  submit(l, "other", "x", "job=j1"); /* a kind without a spec: polled, never grouped */
  script("a", "rrs");
  script("x", "s");
  altar_reconcile_loop_opts_t o = {.interval_s = 0.001, .max_ticks = 0, .stop_when_idle = true};
  altar_reconcile_result_t *rs;
  size_t n;
  CU_ASSERT_EQUAL(altar_run_reconcile_loop(&poller, l, &specs, &o, &rs, &n, NULL, &err), 0);
  /* ticks: a running, a running, a succeeded + fired, idle. */
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_EQUAL(rs[2].fired_groups.n, 1);
  CU_ASSERT_EQUAL(rs[3].polled, 0);
  altar_reconcile_results_free(rs, n);
  /* max_ticks bounds a loop that never drains. */
  submit(l, "k", "forever", "job=j9");
  script("forever", "r");
  o.max_ticks = 5;
  CU_ASSERT_EQUAL(altar_run_reconcile_loop(&poller, l, &specs, &o, &rs, &n, NULL, &err), 0);
  CU_ASSERT_EQUAL(n, 5);
  altar_reconcile_results_free(rs, n);
  /* Without stop_when_idle an idle ledger still stops at max_ticks. */
  altar_reconcile_loop_opts_t d = altar_reconcile_loop_defaults();
  CU_ASSERT(d.stop_when_idle && d.interval_s == 5.0 && d.max_ticks == 0);
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
}

/* ---- a ledger of the contract's six operations (what the Python package
 * builds over a TaskLedger subclass), here delegating to the memory ledger ---- */

static int d_record(void *c, const altar_handle_t *h, const char *kind, const altar_spec_t *spec, altar_error_t *err) {
  return altar_ledger_record(c, h, kind, spec, err);
}
static int d_open_handles(void *c, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  return altar_ledger_open_handles(c, phs, pn, err);
}
static int d_set_state(void *c, const altar_handle_t *h, altar_state_t st, const altar_failure_t *f,
                       altar_error_t *err) {
  return altar_ledger_set_state(c, h, st, f, err);
}
static int d_succeeded(void *c, altar_record_t **p, size_t *pn, altar_error_t *err) {
  return altar_ledger_active_succeeded(c, p, pn, err);
}
static int d_failed(void *c, altar_record_t **p, size_t *pn, altar_error_t *err) {
  return altar_ledger_active_failed(c, p, pn, err);
}
static int d_consume(void *c, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  return altar_ledger_consume(c, hs, n, err);
}

static void test_contract_ledger(void) {
  reset();
  altar_ledger_t *mem = altar_ledger_memory_open(NULL);
  altar_contract_ledger_t c = {mem, d_record, d_open_handles, d_set_state, d_succeeded, d_failed, d_consume};
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_contract_open(&c, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  altar_group_specs_t specs = {0};
  altar_predicate_t p;
  altar_predicate_all_folds(&p, 2, &err);
  spec_add(&specs, "train", &p, true);
  submit(l, "train", "a", "job=j1,fold=0");
  submit(l, "train", "b", "job=j1,fold=1");
  script("a", "s");
  script("b", "rs");
  altar_reconcile_result_t r = {0};
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL(r.fired_groups.n, 0);
  altar_reconcile_result_clear(&r);
  CU_ASSERT_EQUAL(altar_reconcile_once(&poller, l, &specs, NULL, &r, &err), 0);
  CU_ASSERT_EQUAL_FATAL(r.fired_groups.n, 1);
  CU_ASSERT_STRING_EQUAL(r.fired_groups.v[0], "train:j1");
  altar_reconcile_result_clear(&r);
  CU_ASSERT_EQUAL(count_state(mem, true), 0); /* consumed, in the ledger behind it */
  /* The fleet's extras are refused by name, not answered wrongly. */
  altar_ledger_entry_t e;
  CU_ASSERT_EQUAL(altar_ledger_get(l, "fake", "a", &e, &err), ALTAR_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "get"));
  altar_group_specs_clear(&specs);
  altar_ledger_close(l);
  altar_ledger_close(mem);
  /* Every one of the six is required. */
  c.consume = NULL;
  CU_ASSERT_PTR_NULL(altar_ledger_contract_open(&c, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "consume"));
}

static void add(void) {
  ALTAR_SUITE("reconcile", NULL, NULL);
  ALTAR_TEST(test_contract_ledger);
  ALTAR_TEST(test_fires_once_and_consumes);
  ALTAR_TEST(test_predicate_error_fires_nothing);
  ALTAR_TEST(test_blocked_groups);
  ALTAR_TEST(test_ready_beats_failed_sibling);
  ALTAR_TEST(test_on_ready_error_keeps_group);
  ALTAR_TEST(test_bounded_concurrency);
  ALTAR_TEST(test_loop_idle_and_max_ticks);
}

int main(int argc, char **argv) {
  pthread_mutex_init(&cs.mu, NULL);
  return altar_test_main(argc, argv, add);
}
