/* The lifetime of consumed records in the RocksDB ledger
 * (ledger/ledger_prune.c, consumed_prune.c): pruned oldest first past
 * their age, bounded per turn, open records never touched, the ledger
 * consistent afterwards; ledger.consumed_keep_days validated. Ages are set
 * by the test: a prune is asked for "as of" a later time, nothing waits. */
#include "altar/config.h"
#include "altar/ledger.h"
#include "reconciler/consumed_prune.h"
#include "ledger/ledger_prune.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define HOUR_MS (3600 * 1000LL)

/* Records eid, succeeded, and (when consume) consumed. */
static void settle(altar_ledger_t *l, const char *eid, bool consume) {
  altar_handle_t h;
  altar_handle_init(&h, "process", eid);
  altar_error_t err = {0};
  altar_record_meta_t meta = {.task_key = eid, .group_key = "g"};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", NULL, &meta, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
  if (consume) CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  altar_handle_clear(&h);
}

static bool present(altar_ledger_t *l, const char *eid) {
  altar_ledger_entry_t e;
  altar_error_t err = {0};
  int rc = altar_ledger_get(l, "process", eid, &e, &err);
  if (!rc) altar_ledger_entry_clear(&e);
  return rc == 0;
}

static void check_consistent(altar_ledger_t *l) {
  altar_error_t err = {0};
  int rc = altar__ledger_rocksdb_check(l, NULL, &err);
  if (rc) fprintf(stderr, "check: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

/* Past their age consumed records go, oldest first and at most max per
 * prune; open records stay whatever their age. */
static void test_prune_by_age(void) {
  char *dir = altar_test_tmpdir("ledger-prune");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  char eid[32];
  for (int i = 0; i < 6; i++) {
    snprintf(eid, sizeof eid, "c%d", i);
    settle(l, eid, true);
  }
  settle(l, "open", false);
  size_t n = 99;
  /* Consumed just now: nothing is an hour old. */
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, wall_ms() - HOUR_MS, 100, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT(present(l, "c0"));
  /* Two hours on, with a one-hour lifetime: all six are past it; two per prune. */
  int64_t later = wall_ms() + 2 * HOUR_MS - HOUR_MS;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 2, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_FALSE(present(l, "c0"));
  CU_ASSERT_FALSE(present(l, "c1"));
  CU_ASSERT(present(l, "c2"));
  check_consistent(l);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 100, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 4);
  for (int i = 0; i < 6; i++) {
    snprintf(eid, sizeof eid, "c%d", i);
    CU_ASSERT_FALSE(present(l, eid));
  }
  CU_ASSERT(present(l, "open"));
  CU_ASSERT(altar_ledger_peek_open(l, "process", "open") != NULL);
  altar_ledger_stats_t st;
  CU_ASSERT_EQUAL(altar_ledger_stats(l, &st, &err), 0);
  CU_ASSERT_EQUAL(st.consumed, 0);
  CU_ASSERT_EQUAL(st.records, 1);
  check_consistent(l);
  /* Nothing left to prune; and a reopened ledger agrees. */
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 100, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_ledger_close(l);
  l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_FALSE(present(l, "c3"));
  CU_ASSERT(present(l, "open"));
  check_consistent(l);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* One consume of a whole group is one index entry: its records go
 * together, even past the prune's bound. */
static void test_group_goes_together(void) {
  char *dir = altar_test_tmpdir("ledger-prune-group");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_handle_t hs[5];
  char eid[32];
  for (int i = 0; i < 5; i++) {
    snprintf(eid, sizeof eid, "g%d", i);
    settle(l, eid, false);
    altar_handle_init(&hs[i], "process", eid);
  }
  settle(l, "alone", true); /* consumed before the group */
  CU_ASSERT_EQUAL(altar_ledger_consume(l, hs, 5, &err), 0);
  for (int i = 0; i < 5; i++) altar_handle_clear(&hs[i]);
  size_t n = 0;
  int64_t later = wall_ms() + HOUR_MS;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 1, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1); /* the older entry: "alone" */
  CU_ASSERT_FALSE(present(l, "alone"));
  CU_ASSERT(present(l, "g0"));
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 1, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 5);
  for (int i = 0; i < 5; i++) {
    snprintf(eid, sizeof eid, "g%d", i);
    CU_ASSERT_FALSE(present(l, eid));
  }
  check_consistent(l);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* A consumed record opened again (a rerun under the same handle) stays
 * open when its old consumption is pruned. */
static void test_reopened_record_stays(void) {
  char *dir = altar_test_tmpdir("ledger-prune-reopen");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  settle(l, "again", true);
  altar_handle_t h;
  altar_handle_init(&h, "process", "again");
  altar_record_meta_t meta = {.task_key = "again", .group_key = "g"};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", NULL, &meta, &err), 0);
  altar_handle_clear(&h);
  size_t n = 0;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, wall_ms() + HOUR_MS, 100, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  const altar_ledger_entry_t *e = altar_ledger_peek_open(l, "process", "again");
  CU_ASSERT(e != NULL && e->rec.state == ALTAR_STATE_PENDING);
  check_consistent(l);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* The daemon's turn: off at keep 0, once per interval, and on a ledger
 * that cannot prune it says so once and stays quiet. */
static void test_daemon_turns(void) {
  char *dir = altar_test_tmpdir("ledger-prune-turns");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  settle(l, "t0", true);
  double now = (double)wall_ms() / 1000.0;
  size_t n = 9;
  altar__consumed_pruner_t off = {.keep_s = 0};
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&off, l, now + 86400, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT(present(l, "t0"));
  altar__consumed_pruner_t p = {.keep_s = 3600};
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now, &n, &err), 0); /* not an hour old yet */
  CU_ASSERT_EQUAL(n, 0);
  settle(l, "t1", true);
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 7200, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 2);
  settle(l, "t2", true);
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 7201, &n, &err), 0); /* within the interval */
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT(present(l, "t2"));
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 7200 + ALTAR_CONSUMED_PRUNE_INTERVAL_S, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  altar_ledger_close(l);
  altar_ledger_t *m = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(m != NULL);
  altar__consumed_pruner_t pm = {.keep_s = 3600};
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&pm, m, now, &n, &err), ALTAR_ENOTSUP);
  CU_ASSERT(pm.off);
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&pm, m, now + 7200, &n, &err), 0);
  altar_ledger_close(m);
  altar_test_rmtree(dir);
  free(dir);
}

/* What the next prune frees is counted as the prune would take it: whole
 * index entries, up to the bound, only those past the age; the daemon's
 * turn keeps the figure for the next turn. */
static void test_next_prune_counted(void) {
  char *dir = altar_test_tmpdir("ledger-prune-due");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_handle_t hs[3];
  char eid[32];
  for (int i = 0; i < 3; i++) {
    snprintf(eid, sizeof eid, "w%d", i);
    settle(l, eid, false);
    altar_handle_init(&hs[i], "process", eid);
  }
  settle(l, "a", true);
  CU_ASSERT_EQUAL(altar_ledger_consume(l, hs, 3, &err), 0); /* one entry of three */
  for (int i = 0; i < 3; i++) altar_handle_clear(&hs[i]);
  settle(l, "open", false);
  size_t due = 99, n = 0;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, wall_ms() - HOUR_MS, 100, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 0);
  int64_t later = wall_ms() + HOUR_MS;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, later, 100, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 4);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, later, 2, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 4); /* the group's entry goes whole, as in the prune */
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, later, 1, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 1);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later, 1, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1); /* what was counted */
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, later, 100, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 3);
  /* The daemon's turn: nothing due an hour before the age, then the figure
   * for the turn after, taken with that turn's cut. */
  double now = (double)wall_ms() / 1000.0;
  altar__consumed_pruner_t p = {.keep_s = 3600};
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT_EQUAL(p.next_frees, 0);
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 3600 - ALTAR_CONSUMED_PRUNE_INTERVAL_S + 5, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT_EQUAL(p.next_frees, 3); /* the next turn comes after the age */
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, p.next_due, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT_EQUAL(p.next_frees, 0);
  CU_ASSERT(present(l, "open"));
  altar_ledger_close(l);
  altar_ledger_t *m = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(m, later, 100, &due, &err), ALTAR_ENOTSUP);
  altar_ledger_close(m);
  altar_test_rmtree(dir);
  free(dir);
}

/* ledger.consumed_keep_days: a whole number of days in [0, 36500], named
 * when it is not. */
static void test_config_key(void) {
  altar_config_t cfg;
  altar_error_t err = {0};
  char *dir = altar_test_tmpdir("ledger-prune-cfg");
  char path[4200];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("ledger: {path: ./l}\n", f);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_consumed_keep_days, ALTAR_DEFAULT_CONSUMED_KEEP_DAYS);
  CU_ASSERT_EQUAL(altar_config_set(&cfg, "ledger.consumed_keep_days", "0", &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_consumed_keep_days, 0);
  static const char *const bad[] = {"-1", "36501", "7d", "", "1.5", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_NOT_EQUAL(altar_config_set(&cfg, "ledger.consumed_keep_days", bad[i], &err), 0);
    CU_ASSERT(strstr(err.msg, "ledger.consumed_keep_days") != NULL);
  }
  altar_config_clear(&cfg);
  f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("ledger: {path: ./l, consumed_keep_days: 30}\n", f);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_consumed_keep_days, 30);
  CU_ASSERT_EQUAL(altar_config_consumed_keep_s(&cfg), 30 * 86400.0);
  altar_config_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

/* ledger.consumed_keep_s: the age in seconds (tests, soaks), over
 * consumed_keep_days when set; a record goes once older than it, by the
 * daemon's turn, with the ages set by the test. */
static void test_config_key_seconds(void) {
  altar_config_t cfg;
  altar_error_t err = {0};
  char *dir = altar_test_tmpdir("ledger-prune-cfg-s");
  char path[4200];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("ledger: {path: ./l, consumed_keep_days: 30, consumed_keep_s: 120}\n", f);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  CU_ASSERT_EQUAL(cfg.ledger_consumed_keep_s, 120);
  CU_ASSERT_EQUAL(altar_config_consumed_keep_s(&cfg), 120.0);
  static const char *const bad[] = {"-1", "2m", "", "1.5", "3153600001", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_NOT_EQUAL(altar_config_set(&cfg, "ledger.consumed_keep_s", bad[i], &err), 0);
    CU_ASSERT(strstr(err.msg, "ledger.consumed_keep_s") != NULL);
  }
  CU_ASSERT_EQUAL(cfg.ledger_consumed_keep_s, 120); /* a refused value changes nothing */
  CU_ASSERT_EQUAL(altar_config_set(&cfg, "ledger.consumed_keep_s", "0", &err), 0);
  CU_ASSERT_EQUAL(altar_config_consumed_keep_s(&cfg), 0); /* 0: forever, days notwithstanding */
  CU_ASSERT_EQUAL(altar_config_set(&cfg, "ledger.consumed_keep_s", "120", &err), 0);

  char ldir[4200];
  snprintf(ldir, sizeof ldir, "%s/ledger", dir);
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  settle(l, "t0", true);
  double now = (double)wall_ms() / 1000.0;
  size_t n = 9;
  altar__consumed_pruner_t p = {.keep_s = altar_config_consumed_keep_s(&cfg)};
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 60, &n, &err), 0); /* a minute old: kept */
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT(present(l, "t0"));
  CU_ASSERT_EQUAL(altar__consumed_prune_tick(&p, l, now + 60 + ALTAR_CONSUMED_PRUNE_INTERVAL_S + 121, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_FALSE(present(l, "t0"));
  altar_ledger_close(l);
  altar_config_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  ALTAR_SUITE("ledger: consumed records' lifetime", NULL, NULL);
  ALTAR_TEST(test_prune_by_age);
  ALTAR_TEST(test_group_goes_together);
  ALTAR_TEST(test_reopened_record_stays);
  ALTAR_TEST(test_daemon_turns);
  ALTAR_TEST(test_next_prune_counted);
  ALTAR_TEST(test_config_key);
  ALTAR_TEST(test_config_key_seconds);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
