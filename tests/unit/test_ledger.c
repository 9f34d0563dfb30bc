/* The shared TaskLedger suite against the in-memory reference and the
 * RocksDB ledger, plus what only the durable ledger can show. */
#include "altar/plugin/ledger.h"
#include "ledger_suite.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* ---- factories ---- */

static altar_ledger_t *mem_open(void) {
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  CU_ASSERT_FATAL(l != NULL);
  return l;
}
static altar_ledger_t *mem_reopen(altar_ledger_t *l) { return l; }
static void mem_destroy(altar_ledger_t *l) { altar_ledger_close(l); }

/* Each RocksDB ledger lives in its own temp dir, remembered by ledger. */
#define MAX_OPEN 8
static struct {
  altar_ledger_t *l;
  char *dir;
} dirs[MAX_OPEN];

/* Set while the shared suite runs on write-behind ledgers. */
static bool behind;

static altar_ledger_t *rdb_open_dir(char *dir) {
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t o = {.write_behind = behind, .no_wal = behind}; /* write-behind needs no WAL */
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, &o, &err);
  if (!l) fprintf(stderr, "open %s: %s\n", dir, err.msg);
  CU_ASSERT_FATAL(l != NULL);
  for (size_t i = 0; i < MAX_OPEN; i++)
    if (!dirs[i].l) {
      dirs[i].l = l;
      dirs[i].dir = dir;
      return l;
    }
  CU_FAIL_FATAL("too many open ledgers");
  return NULL;
}

static char *forget(altar_ledger_t *l) {
  for (size_t i = 0; i < MAX_OPEN; i++)
    if (dirs[i].l == l) {
      dirs[i].l = NULL;
      return dirs[i].dir;
    }
  return NULL;
}

static void check(altar_ledger_t *l) {
  altar_error_t err = {0};
  int rc = altar__ledger_rocksdb_check(l, NULL, &err);
  if (rc) fprintf(stderr, "check: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

static altar_ledger_t *rdb_open(void) { return rdb_open_dir(altar_test_tmpdir("ledger")); }
static altar_ledger_t *rdb_reopen(altar_ledger_t *l) {
  check(l);
  char *dir = forget(l);
  altar_ledger_close(l);
  return rdb_open_dir(dir);
}
static void rdb_destroy(altar_ledger_t *l) {
  check(l);
  char *dir = forget(l);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

static const altar_ledger_factory_t mem_factory = {
    .name = "memory", .open = mem_open, .reopen = mem_reopen, .destroy = mem_destroy};
static const altar_ledger_factory_t rdb_factory = {
    .name = "rocksdb", .open = rdb_open, .reopen = rdb_reopen, .destroy = rdb_destroy};

static altar_ledger_t *behind_open(void) {
  behind = true;
  return rdb_open();
}
static altar_ledger_t *behind_reopen(altar_ledger_t *l) {
  behind = true;
  return rdb_reopen(l);
}
static void behind_destroy(altar_ledger_t *l) {
  rdb_destroy(l);
  behind = false;
}
static const altar_ledger_factory_t behind_factory = {
    .name = "rocksdb, written behind", .open = behind_open, .reopen = behind_reopen, .destroy = behind_destroy};

/* ---- RocksDB only ---- */

static void put_rec(altar_ledger_t *l, const char *eid, const char *gk) {
  altar_handle_t h;
  altar_handle_init(&h, "process", eid);
  altar_strmap_set(&h.labels, "fold", "0");
  altar_spec_t *s = altar_spec_new("train", "img");
  altar_spec_add_arg(s, "true");
  altar_record_meta_t meta = {.task_key = eid, .group_key = gk};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s, &meta, &err), 0);
  altar_spec_free(s);
  altar_handle_clear(&h);
}

/* altar_ledger_open: a table without side keys gets the ENOTSUP ones, a
 * table missing a required operation is refused (and its open not called),
 * and configuration keys an implementation does not take are refused by
 * name. */
static int opened;
static int counting_open(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err) {
  opened++;
  return altar_ledger_memory_ops.open(l, cfg, err);
}

static void test_open_defaults_and_checks(void) {
  altar_error_t err = {0};
  altar_ledger_ops_t ops = altar_ledger_memory_ops;
  ops.name = "bare";
  ops.open = counting_open;
  ops.aux_put = NULL;
  ops.aux_del = NULL;
  ops.aux_get = NULL;
  ops.aux_scan = NULL;
  ops.caps &= ~ALTAR_LEDGER_CAP_SIDE_KEYS;
  opened = 0;
  altar_ledger_t *l = altar_ledger_open(&ops, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_EQUAL(opened, 1);
  CU_ASSERT(l->table == &ops);
  CU_ASSERT(l->ops.aux_put && l->ops.aux_del && l->ops.aux_get && l->ops.aux_scan);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k", 1, "v", 1, &err), ALTAR_ENOTSUP);
  CU_ASSERT(strstr(err.msg, "no side keys") != NULL);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k", 1, &b, &err), ALTAR_ENOTSUP);
  put_rec(l, "a", "g"); /* the records still work */
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  altar_ledger_close(l);
  /* A missing required operation, or half a side keyspace. */
  for (int i = 0; i < 2; i++) {
    ops = altar_ledger_memory_ops;
    ops.name = "broken";
    ops.open = counting_open;
    if (i == 0) ops.consume = NULL;
    else ops.aux_scan = NULL;
    opened = 0;
    CU_ASSERT(altar_ledger_open(&ops, NULL, &err) == NULL);
    CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
    CU_ASSERT(strstr(err.msg, i == 0 ? "consume" : "aux_scan") != NULL);
    CU_ASSERT_EQUAL(opened, 0);
  }
  CU_ASSERT(altar_ledger_open(NULL, NULL, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  /* The memory ledger takes no keys; the RocksDB one takes dir and its options. */
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "dir", "/nonexistent");
  CU_ASSERT(altar_ledger_open(&altar_ledger_memory_ops, &cfg, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "ledger.dir: unknown key for the memory ledger (it takes none)");
  altar_strmap_clear(&cfg);
  char *dir = altar_test_tmpdir("ledger-cfg");
  altar_strmap_set(&cfg, "dir", dir);
  altar_strmap_set(&cfg, "sync", "true");
  altar_strmap_set(&cfg, "write_buffer_mb", "8");
  altar_strmap_set(&cfg, "colour", "blue");
  CU_ASSERT(altar_ledger_open(&altar_ledger_rocksdb_ops, &cfg, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "ledger.colour: unknown key for the rocksdb ledger") != NULL);
  altar_strmap_remove(&cfg, "colour");
  altar_strmap_set(&cfg, "no_wal", "maybe");
  CU_ASSERT(altar_ledger_open(&altar_ledger_rocksdb_ops, &cfg, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "no_wal") != NULL);
  altar_strmap_set(&cfg, "no_wal", "false");
  l = altar_ledger_open(&altar_ledger_rocksdb_ops, &cfg, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT(altar__ledger_is_rocksdb(l));
  put_rec(l, "a", "g");
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  altar_ledger_close(l);
  altar_strmap_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_check_finds_damage(void) {
  altar_ledger_t *l = rdb_open();
  altar_error_t err = {0};
  put_rec(l, "a", "g");
  check(l);
  rocksdb_t *db = altar__ledger_rocksdb_db(l);
  CU_ASSERT_FATAL(db != NULL);
  rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
  char *dberr = NULL;
  /* An index entry with no record behind it is a half-applied change. */
  rocksdb_put(db, wo, "u:process\0ghost", 15, "", 0, &dberr);
  CU_ASSERT(dberr == NULL);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "ghost") != NULL);
  rocksdb_delete(db, wo, "u:process\0ghost", 15, &dberr);
  check(l);
  /* A record whose bytes do not decode. */
  rocksdb_put(db, wo, "r:ffffprocess\0bad", 17, "\xa1\x00junk", 6, &dberr);
  CU_ASSERT_NOT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), 0);
  rocksdb_delete(db, wo, "r:ffffprocess\0bad", 17, &dberr);
  /* A missing open record (the cache still has it). */
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  size_t vlen = 0;
  char *val = rocksdb_get(db, ro, "o:ffffprocess\0a", 15, &vlen, &dberr);
  CU_ASSERT_FATAL(val != NULL);
  rocksdb_delete(db, wo, "o:ffffprocess\0a", 15, &dberr);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, NULL, &err), ALTAR_ELEDGER);
  rocksdb_put(db, wo, "o:ffffprocess\0a", 15, val, vlen, &dberr);
  rocksdb_free(val);
  rocksdb_readoptions_destroy(ro);
  check(l);
  rocksdb_writeoptions_destroy(wo);
  rdb_destroy(l);
}

static void test_read_only_and_errors(void) {
  altar_error_t err = {0};
  char *dir = altar_test_tmpdir("ledger-ro");
  altar_ledger_rocksdb_opts_t o = {.no_create = true};
  char missing[512];
  snprintf(missing, sizeof missing, "%s/none", dir);
  CU_ASSERT(altar_ledger_rocksdb_open(missing, &o, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "none") != NULL);
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  put_rec(l, "a", "g");
  altar_ledger_close(l);
  o = (altar_ledger_rocksdb_opts_t){.read_only = true};
  l = altar_ledger_rocksdb_open(dir, &o, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  altar_handle_t h;
  altar_handle_init(&h, "process", "a");
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_RUNNING, NULL, &err), ALTAR_ENOTSUP);
  altar_handle_clear(&h);
  altar_ledger_close(l);
  CU_ASSERT(altar_ledger_rocksdb_open("", NULL, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_failed_write_rolls_back(void) {
  altar_ledger_t *l = rdb_open();
  altar_error_t err = {0};
  put_rec(l, "a", "g");
  /* A single operation whose write fails leaves nothing behind. */
  altar__ledger_rocksdb_fail_writes(l, 1);
  altar_handle_t h;
  altar_handle_init(&h, "process", "a");
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), ALTAR_ELEDGER);
  CU_ASSERT(err.retriable);
  CU_ASSERT(strstr(err.msg, "injected") != NULL);
  const altar_ledger_entry_t *e = altar_ledger_peek_open(l, "process", "a");
  CU_ASSERT_FATAL(e != NULL);
  CU_ASSERT_EQUAL(e->rec.state, ALTAR_STATE_PENDING); /* the cache was rolled back too */
  check(l);
  /* A batch whose commit fails: none of it, in memory or on disk. */
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  put_rec(l, "b", "g");
  CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k", 1, "v", 1, &err), 0);
  altar__ledger_rocksdb_fail_writes(l, 1);
  CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), ALTAR_ELEDGER);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "b") == NULL);
  CU_ASSERT(altar_ledger_peek_open(l, "process", "a") != NULL);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k", 1, &b, &err), ALTAR_ENOTFOUND);
  altar_buf_free(&b);
  check(l);
  /* And the ledger keeps working afterwards. */
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
  l = rdb_reopen(l);
  altar_ledger_entry_t got;
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "a", &got, &err), 0);
  CU_ASSERT_EQUAL(got.rec.state, ALTAR_STATE_SUCCEEDED);
  altar_ledger_entry_clear(&got);
  altar_handle_clear(&h);
  rdb_destroy(l);
}

/* A re-opened consumed record leaves its r: copy behind; the open o: record
 * wins everywhere (get, foreach, checksum, check) until it is consumed again. */
static int count_visit(void *ctx, const altar_ledger_entry_t *e) {
  (void)e;
  (*(int *)ctx)++;
  return 0;
}

static void shadow_history(altar_ledger_t *l, const altar_spec_t *s1, const altar_spec_t *s2) {
  altar_handle_t h;
  altar_handle_init(&h, "process", "a");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_record(l, &h, "train", s1, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_FAILED, NULL, &err), 0); /* late, on the consumed copy */
  CU_ASSERT_EQUAL(altar_ledger_record(l, &h, "train", s2, &err), 0);                 /* re-opened */
  altar_handle_clear(&h);
}

static void test_reopened_record_shadows_consumed_copy(void) {
  altar_spec_t *s1 = altar_spec_new("train", "img:1"), *s2 = altar_spec_new("train", "img:2");
  altar_ledger_t *l = rdb_open(), *m = altar_ledger_memory_open(NULL);
  shadow_history(l, s1, s2);
  shadow_history(m, s1, s2);
  l = rdb_reopen(l);
  altar_error_t err = {0};
  uint64_t records = 0;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, &records, &err), 0);
  CU_ASSERT_EQUAL(records, 1);
  int n = 0;
  CU_ASSERT_EQUAL(altar_ledger_foreach(l, count_visit, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 1);
  altar_ledger_entry_t got;
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "a", &got, &err), 0);
  CU_ASSERT(!got.rec.consumed && got.rec.state == ALTAR_STATE_PENDING);
  CU_ASSERT(got.rec.spec && !strcmp(got.rec.spec->image, "img:2"));
  altar_ledger_entry_clear(&got);
  char a[ALTAR_LEDGER_CHECKSUM_LEN + 1], b[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, a, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(m, b, &err), 0);
  CU_ASSERT_STRING_EQUAL(a, b);
  /* Consumed again: the r: copy is the new one. */
  altar_handle_t h;
  altar_handle_init(&h, "process", "a");
  CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  altar_handle_clear(&h);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l, "process", "a", &got, &err), 0);
  CU_ASSERT(got.rec.consumed && got.rec.spec && !strcmp(got.rec.spec->image, "img:2"));
  altar_ledger_entry_clear(&got);
  altar_ledger_close(m);
  altar_spec_free(s1);
  altar_spec_free(s2);
  rdb_destroy(l);
}

/* Written behind, a failed write is reported by the next commit and by
 * persist, and every write and read after it fails too: the ledger is not
 * used on. */
static void test_write_behind_failure_sticks(void) {
  char *dir = altar_test_tmpdir("ledger");
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t o = {.write_behind = true, .no_wal = true};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, &o, &err);
  CU_ASSERT_FATAL(l != NULL);
  put_rec(l, "a", "g");
  altar__ledger_rocksdb_fail_writes(l, 1);
  put_rec(l, "b", "g"); /* handed over; its write fails behind */
  altar_handle_t h;
  altar_handle_init(&h, "process", "a");
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "injected") != NULL);
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_RUNNING, NULL, &err), ALTAR_ELEDGER);
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_persist(l, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "injected") != NULL);
  /* Reads fail too: the disk lacks a batch the caller was told had been
   * committed, so neither a record nor a checksum can be trusted. */
  altar_ledger_entry_t got;
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "a", &got, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "earlier write failed") != NULL);
  altar_ledger_entry_clear(&got);
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum, &err), ALTAR_ELEDGER);
  /* It cannot be opened written behind with a write-ahead log. */
  altar_ledger_rocksdb_opts_t wal = {.write_behind = true};
  char *dir2 = altar_test_tmpdir("ledger");
  CU_ASSERT_PTR_NULL(altar_ledger_rocksdb_open(dir2, &wal, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  altar_test_rmtree(dir2);
  free(dir2);
  altar_handle_clear(&h);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* Written behind, a read right after a commit sees that commit, whether
 * the batch is still being written (its changes answer, or a key it does
 * not touch is read from the disk without waiting) or is written already:
 * puts, overwrites and deletes, batch after batch. */
static void test_write_behind_reads_batch_in_flight(void) {
  char *dir = altar_test_tmpdir("ledger");
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t o = {.write_behind = true, .no_wal = true};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, &o, &err);
  CU_ASSERT_FATAL(l != NULL);
  enum { ROUNDS = 200 };
  for (int i = 0; i < ROUNDS; i++) {
    char k[32], v[32], prev[32];
    snprintf(k, sizeof k, "k%d", i);
    snprintf(v, sizeof v, "v%d", i);
    snprintf(prev, sizeof prev, "k%d", i - 1);
    CU_ASSERT_EQUAL_FATAL(altar_ledger_begin(l, &err), 0);
    CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, strlen(k), v, strlen(v), &err), 0);
    CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "same", 4, v, strlen(v), &err), 0);
    if (i) CU_ASSERT_EQUAL(altar_ledger_aux_del(l, prev, strlen(prev), &err), 0);
    CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
    altar_buf_t b = {0};
    CU_ASSERT_EQUAL(altar_ledger_aux_get(l, k, strlen(k), &b, &err), 0);
    CU_ASSERT(b.len == strlen(v) && !memcmp(b.data, v, b.len));
    altar_buf_reset(&b);
    CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "same", 4, &b, &err), 0);
    CU_ASSERT(b.len == strlen(v) && !memcmp(b.data, v, b.len));
    altar_buf_reset(&b);
    if (i) CU_ASSERT_EQUAL(altar_ledger_aux_get(l, prev, strlen(prev), &b, &err), ALTAR_ENOTFOUND);
    CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "never", 5, &b, &err), ALTAR_ENOTFOUND);
    altar_buf_free(&b);
  }
  /* And the disk holds what the reads said. */
  altar_ledger_close(l);
  l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k199", 4, &b, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k198", 4, &b, &err), ALTAR_ENOTFOUND);
  altar_buf_free(&b);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

static int level0_files(altar_ledger_t *l) {
  char *v = rocksdb_property_value(altar__ledger_rocksdb_db(l), "rocksdb.num-files-at-level0");
  int n = v ? atoi(v) : -1;
  rocksdb_free(v);
  return n;
}

/* Records tasks t0..t<n-1> of kind train, each running arg. */
static void record_n(altar_ledger_t *l, int n, const char *arg) {
  altar_error_t err = {0};
  for (int i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "t%d", i);
    altar_handle_t h;
    altar_handle_init(&h, "process", id);
    altar_spec_t *s = altar_spec_new("train", "img");
    altar_spec_add_arg(s, arg);
    altar_record_meta_t meta = {.task_key = id, .group_key = "g"};
    CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s, &meta, &err), 0);
    altar_spec_free(s);
    altar_handle_clear(&h);
  }
}

/* Writes the memtables to table files and waits. */
static void flush_memtables(altar_ledger_t *l) {
  rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
  rocksdb_flushoptions_set_wait(fo, 1);
  char *dberr = NULL;
  rocksdb_flush(altar__ledger_rocksdb_db(l), fo, &dberr);
  rocksdb_flushoptions_destroy(fo);
  CU_ASSERT_PTR_NULL(dberr);
  free(dberr);
}

/* A ledger built in one go does not compact while it is built; persisting
 * it leaves few enough level-0 files that the daemon opening it is not
 * slowed, and keeps every record. */
static void test_persist_compacts_a_crowded_level0(void) {
  char *dir = altar_test_tmpdir("ledger");
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t o = {.no_wal = true, .write_behind = true, .write_buffer_mb = 1};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, &o, &err);
  CU_ASSERT_FATAL(l != NULL);
  char *big = malloc(64 << 10);
  memset(big, 'x', (64 << 10) - 1);
  big[(64 << 10) - 1] = 0;
  enum { N = 400 }; /* 25 MiB of specs in 1 MiB memtables */
  record_n(l, N, big);
  free(big);
  /* Waited for (the check settles the writer) and flushed by hand: the
   * build left level 0 crowded, which persist must mend. */
  uint64_t records = 0;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, &records, &err), 0);
  flush_memtables(l);
  CU_ASSERT(level0_files(l) >= 16);
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_persist(l, &err), 0);
  CU_ASSERT(level0_files(l) < 16);
  altar_ledger_close(l);
  /* Reopened as the daemon would: every record is there. */
  l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_check(l, &records, &err), 0);
  CU_ASSERT_EQUAL(records, N);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* Its memory by RocksDB's accounting: the memtables hold what was written
 * (and empty again once flushed), reads fill the block cache, every figure
 * stays under its bound; a ledger of another kind says it has none. */
static void test_memory_by_part(void) {
  char *dir = altar_test_tmpdir("ledger");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_ledger_memory_t m0, m1, m2;
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_memory(l, &m0, &err), 0);
  enum { N = 2000 };
  record_n(l, N, "/bin/true");
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_memory(l, &m1, &err), 0);
  CU_ASSERT(m1.memtables > m0.memtables);
  CU_ASSERT(m1.memtables < 2 * (64u << 20));
  flush_memtables(l);
  for (int i = 0; i < N; i += 7) { /* reads from the table file */
    char id[16];
    snprintf(id, sizeof id, "t%d", i);
    altar_ledger_entry_t e = {0};
    CU_ASSERT_EQUAL(altar_ledger_get(l, "process", id, &e, &err), 0);
    altar_ledger_entry_clear(&e);
  }
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_memory(l, &m2, &err), 0);
  CU_ASSERT(m2.memtables < m1.memtables);
  CU_ASSERT(m2.block_cache > 0 && m2.block_cache <= (64u << 20) + m2.block_cache_pinned);
  CU_ASSERT(m2.block_cache_pinned <= m2.block_cache);
  altar_ledger_close(l);
  altar_ledger_t *mem = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(mem != NULL);
  CU_ASSERT_EQUAL(altar_ledger_rocksdb_memory(mem, &m0, &err), ALTAR_ENOTSUP);
  CU_ASSERT_EQUAL(m0.memtables + m0.block_cache + m0.table_readers, 0);
  altar_ledger_close(mem);
  altar_test_rmtree(dir);
  free(dir);
}

static void add_suites(void) {
  altar_ledger_suite_register(&mem_factory);
  altar_ledger_suite_register(&rdb_factory);
  altar_ledger_suite_register(&behind_factory);
  ALTAR_SUITE("ledger.rocksdb_only", NULL, NULL);
  ALTAR_TEST(test_open_defaults_and_checks);
  ALTAR_TEST(test_check_finds_damage);
  ALTAR_TEST(test_read_only_and_errors);
  ALTAR_TEST(test_failed_write_rolls_back);
  ALTAR_TEST(test_write_behind_failure_sticks);
  ALTAR_TEST(test_write_behind_reads_batch_in_flight);
  ALTAR_TEST(test_persist_compacts_a_crowded_level0);
  ALTAR_TEST(test_memory_by_part);
  ALTAR_TEST(test_reopened_record_shadows_consumed_copy);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
