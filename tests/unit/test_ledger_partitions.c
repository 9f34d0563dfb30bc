/* Status partitions in the RocksDB ledger's keys (layout 3,
 * ledger/ledger_part.c): what the scope writes lands in that partition's
 * key ranges only; readers with no scope see every partition merged in
 * today's order (the same checksum as the in-memory ledger's for the same
 * records, wherever they were written); an open record stays under the
 * partition it was created in; consumption and its pruning follow the
 * record's partition; a ledger of layout 2 is refused, naming it. */
#include "altar/ledger.h"
#include "ledger/ledger_prune.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Records eid (group g) under the ledger's scope, succeeded. */
static void put(altar_ledger_t *l, const char *eid) {
  altar_handle_t h;
  altar_handle_init(&h, "process", eid);
  altar_error_t err = {0};
  altar_record_meta_t meta = {.task_key = eid, .group_key = "g"};
  altar_spec_t *s = altar_spec_new("train", "img:1");
  altar_spec_add_arg(s, eid);
  CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s, &meta, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
  altar_spec_free(s);
  altar_handle_clear(&h);
}

static bool raw_has(altar_ledger_t *l, const char *key, size_t klen) {
  rocksdb_t *db = altar__ledger_rocksdb_db(l);
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  char *dberr = NULL;
  size_t vlen = 0;
  char *v = rocksdb_get(db, ro, key, klen, &vlen, &dberr);
  rocksdb_readoptions_destroy(ro);
  bool has = v != NULL;
  rocksdb_free(v);
  rocksdb_free(dberr);
  return has;
}

static void check_consistent(altar_ledger_t *l) {
  altar_error_t err = {0};
  int rc = altar__ledger_rocksdb_check(l, NULL, &err);
  if (rc) fprintf(stderr, "check: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

typedef struct seen {
  char keys[16][32];
  int32_t part[16];
  size_t n;
  altar_ledger_t *l;
} seen_t;

static int visit(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)val, (void)vlen;
  seen_t *s = ctx;
  if (s->n == 16 || klen >= 32) return 1;
  memcpy(s->keys[s->n], key, klen);
  s->keys[s->n][klen] = 0;
  s->part[s->n++] = altar_ledger_visit_partition(s->l);
  return 0;
}

/* The side keyspace: a key written under a scope is that partition's;
 * with no scope a scan merges every partition by key, each visit told
 * its partition, and a point read finds a key under any partition. */
static void test_side_keys(void) {
  char *dir = altar_test_tmpdir("ledger-parts-aux");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  CU_ASSERT(altar_ledger_caps(l) & ALTAR_LEDGER_CAP_PARTITIONS);
  CU_ASSERT_EQUAL(altar_ledger_scope_get(l), ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_scope(l, 3), ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k/b", 3, "3", 1, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_scope(l, 1), 3);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k/c", 3, "1", 1, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k/a", 3, "1", 1, &err), 0);
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, "k/d", 3, "-", 1, &err), 0);
  CU_ASSERT(raw_has(l, "x:0003k/b", 9));
  CU_ASSERT(raw_has(l, "x:0001k/a", 9));
  CU_ASSERT(raw_has(l, "x:ffffk/d", 9));
  /* Out of range: taken as none. */
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_MAX + 1);
  CU_ASSERT_EQUAL(altar_ledger_scope_get(l), ALTAR_LEDGER_SCOPE_NONE);
  seen_t s = {.l = l};
  CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, "k/", 2, visit, &s, &err), 0);
  CU_ASSERT_EQUAL_FATAL(s.n, 4);
  const char *want[] = {"k/a", "k/b", "k/c", "k/d"};
  int32_t wpart[] = {1, 3, 1, ALTAR_LEDGER_SCOPE_NONE};
  for (size_t i = 0; i < 4; i++) {
    CU_ASSERT_STRING_EQUAL(s.keys[i], want[i]);
    CU_ASSERT_EQUAL(s.part[i], wpart[i]);
  }
  /* A scope's scan sees its partition alone. */
  altar_ledger_scope(l, 1);
  s.n = 0;
  CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, "k/", 2, visit, &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 2);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k/b", 3, &b, &err), ALTAR_ENOTFOUND);
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_aux_get(l, "k/b", 3, &b, &err), 0);
  CU_ASSERT(b.len == 1 && b.data[0] == '3');
  altar_buf_free(&b);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* The same records written under different partitions (and batches) give
 * the in-memory ledger's checksum: foreach visits them in (backend,
 * external_id) order whatever their partitions. */
static void test_checksum_across_partitions(void) {
  char *dir = altar_test_tmpdir("ledger-parts-sum");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  altar_ledger_t *m = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(l != NULL && m != NULL);
  char eid[32];
  CU_ASSERT_EQUAL(altar_ledger_begin(l, &err), 0);
  for (int i = 0; i < 40; i++) {
    snprintf(eid, sizeof eid, "t%02d", i);
    altar_ledger_scope(l, (i * 7) % 5); /* interleaved: t00 in 0, t01 in 2, ... */
    put(l, eid);
    put(m, eid);
  }
  CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), 0);
  /* Some consumed (r:), under their own partitions, whatever the scope. */
  altar_ledger_scope(l, 4);
  for (int i = 0; i < 40; i += 3) {
    altar_handle_t h;
    snprintf(eid, sizeof eid, "t%02d", i);
    altar_handle_init(&h, "process", eid);
    CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
    CU_ASSERT_EQUAL(altar_ledger_consume(m, &h, 1, &err), 0);
    altar_handle_clear(&h);
  }
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT(raw_has(l, "o:0002process\0t01", 17));
  CU_ASSERT(raw_has(l, "r:0000process\0t00", 17));
  CU_ASSERT(raw_has(l, "r:0001process\0t03", 17));
  CU_ASSERT_FALSE(raw_has(l, "r:0004process\0t03", 17));
  char a[ALTAR_LEDGER_CHECKSUM_LEN + 1], b[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, a, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(m, b, &err), 0);
  CU_ASSERT_STRING_EQUAL(a, b);
  check_consistent(l);
  /* A consumed record is found with no scope, under its partition. */
  altar_ledger_entry_t e;
  CU_ASSERT_EQUAL(altar_ledger_get(l, "process", "t03", &e, &err), 0);
  CU_ASSERT(e.rec.consumed);
  altar_ledger_entry_clear(&e);
  /* The open records come back under their partitions after a restart. */
  altar_ledger_close(l);
  l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_handle_t h;
  altar_handle_init(&h, "process", "t01");
  altar_ledger_scope(l, 3); /* a change of an open record stays where it is */
  CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_FAILED, NULL, &err), 0);
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_set_state(m, &h, ALTAR_STATE_FAILED, NULL, &err), 0);
  altar_handle_clear(&h);
  CU_ASSERT_FALSE(raw_has(l, "o:0003process\0t01", 17));
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, a, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(m, b, &err), 0);
  CU_ASSERT_STRING_EQUAL(a, b);
  check_consistent(l);
  altar_ledger_close(l);
  altar_ledger_close(m);
  altar_test_rmtree(dir);
  free(dir);
}

/* One consume of records under two partitions indexes each under its own
 * partition; a prune removes each record's r: key there. */
static void test_consume_and_prune(void) {
  char *dir = altar_test_tmpdir("ledger-parts-prune");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  altar_ledger_scope(l, 5);
  put(l, "a");
  altar_ledger_scope(l, 9);
  put(l, "b");
  altar_handle_t hs[2];
  altar_handle_init(&hs[0], "process", "a");
  altar_handle_init(&hs[1], "process", "b");
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  CU_ASSERT_EQUAL(altar_ledger_consume(l, hs, 2, &err), 0);
  CU_ASSERT(raw_has(l, "r:0005process\0a", 15));
  CU_ASSERT(raw_has(l, "r:0009process\0b", 15));
  check_consistent(l);
  size_t due = 0, pruned = 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t later_ms = (int64_t)ts.tv_sec * 1000 + 3600 * 1000;
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_consumed_due(l, later_ms, 100, &due, &err), 0);
  CU_ASSERT_EQUAL(due, 2);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_prune_consumed(l, later_ms, 100, &pruned, &err), 0);
  CU_ASSERT_EQUAL(pruned, 2);
  CU_ASSERT_FALSE(raw_has(l, "r:0005process\0a", 15));
  CU_ASSERT_FALSE(raw_has(l, "r:0009process\0b", 15));
  check_consistent(l);
  altar_handle_clear(&hs[0]);
  altar_handle_clear(&hs[1]);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
}

/* A ledger written before keys carried partitions is refused, naming its
 * directory and the rebuild, never read. */
static void test_layout_2_refused(void) {
  char *dir = altar_test_tmpdir("ledger-parts-old");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_FATAL(l != NULL);
  rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
  char *dberr = NULL;
  rocksdb_put(altar__ledger_rocksdb_db(l), wo, "m:version", 9, "2", 1, &dberr);
  CU_ASSERT(dberr == NULL);
  rocksdb_writeoptions_destroy(wo);
  altar_ledger_close(l);
  CU_ASSERT(altar_ledger_rocksdb_open(dir, NULL, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, dir) != NULL);
  CU_ASSERT(strstr(err.msg, "layout 2") != NULL);
  CU_ASSERT(strstr(err.msg, "--rebuild") != NULL);
  altar_test_rmtree(dir);
  free(dir);
}

static void put_aux(altar_ledger_t *l, int32_t part, const char *k, const char *v) {
  altar_error_t err = {0};
  int32_t was = altar_ledger_scope(l, part);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, strlen(k), v, strlen(v), &err), 0);
  altar_ledger_scope(l, was);
}

static bool aux_is(altar_ledger_t *l, int32_t part, const char *k, const char *want) {
  altar_error_t err = {0};
  altar_buf_t b = {0};
  int32_t was = altar_ledger_scope(l, part);
  int rc = altar_ledger_aux_get(l, k, strlen(k), &b, &err);
  altar_ledger_scope(l, was);
  bool same = want ? rc == 0 && b.len == strlen(want) && !memcmp(b.data, want, b.len) : rc == ALTAR_ENOTFOUND;
  altar_buf_free(&b);
  return same;
}

/* Importing partition 2 from another ledger replaces exactly that
 * partition: its records (open and consumed, with their index) and side
 * keys; the others stay; the ledger-wide counters take the greater value;
 * the result equals a ledger built from the same pieces. */
/* Three RocksDB ledgers in fresh directories for an import test: a (the
 * importer), b (the source) and ref (what a should hold afterwards). */
typedef struct {
  char *da, *db, *dr;
  altar_ledger_t *a, *b, *ref;
} import_trio_t;

static void trio_open(import_trio_t *t, const char *name) {
  char n[128];
  snprintf(n, sizeof n, "%s-a", name);
  t->da = altar_test_tmpdir(n);
  snprintf(n, sizeof n, "%s-b", name);
  t->db = altar_test_tmpdir(n);
  snprintf(n, sizeof n, "%s-ref", name);
  t->dr = altar_test_tmpdir(n);
  altar_error_t err = {0};
  t->a = altar_ledger_rocksdb_open(t->da, NULL, &err);
  t->b = altar_ledger_rocksdb_open(t->db, NULL, &err);
  t->ref = altar_ledger_rocksdb_open(t->dr, NULL, &err);
  CU_ASSERT_FATAL(t->a && t->b && t->ref);
}

/* Closes the ledgers still open and removes all three directories. */
static void trio_close(import_trio_t *t) {
  altar_ledger_t *open[] = {t->a, t->b, t->ref};
  for (size_t i = 0; i < 3; i++)
    if (open[i]) altar_ledger_close(open[i]);
  char *dirs[] = {t->da, t->db, t->dr};
  for (size_t i = 0; i < 3; i++) {
    altar_test_rmtree(dirs[i]);
    free(dirs[i]);
  }
}

static void consume(altar_ledger_t *l, const char *eid) {
  altar_error_t err = {0};
  altar_handle_t h;
  altar_handle_init(&h, "process", eid);
  CU_ASSERT_EQUAL(altar_ledger_consume(l, &h, 1, &err), 0);
  altar_handle_clear(&h);
}

static void test_import_partition(void) {
  import_trio_t t = {0};
  trio_open(&t, "ledger-parts-imp");
  altar_ledger_t *a = t.a, *b = t.b, *ref = t.ref;
  const char *db = t.db;
  altar_error_t err = {0};
  /* a: partitions 1 and 2 (a stale view of 2); b: partitions 2 and 3. */
  altar_ledger_scope(a, 1);
  put(a, "a1");
  altar_ledger_scope(a, 2);
  put(a, "stale2");
  altar_ledger_scope(b, 2);
  put(b, "b2");
  put(b, "b2c");
  consume(b, "b2c");
  altar_ledger_scope(b, 3);
  put(b, "b3");
  put_aux(a, 1, "s/t/1", "10");
  put_aux(a, 2, "s/t/2", "4");
  put_aux(a, 2, "o/0000000000000003", "stale");
  put_aux(b, 2, "s/t/2", "40");
  put_aux(b, 2, "o/0000000000000009", "due");
  put_aux(b, 3, "s/t/3", "7");
  put_aux(a, ALTAR_LEDGER_SCOPE_NONE, "q", "0000000000000005");
  put_aux(b, ALTAR_LEDGER_SCOPE_NONE, "q", "000000000000000a");
  put_aux(a, ALTAR_LEDGER_SCOPE_NONE, "gn", "00000009");
  put_aux(b, ALTAR_LEDGER_SCOPE_NONE, "gn", "00000002");
  /* The reference: what a holds after taking b's partition 2. */
  altar_ledger_scope(ref, 1);
  put(ref, "a1");
  altar_ledger_scope(ref, 2);
  put(ref, "b2");
  put(ref, "b2c");
  consume(ref, "b2c");
  altar_ledger_close(b);
  t.b = NULL;
  const char *counters[] = {"q", "gn"};
  size_t n = 0;
  CU_ASSERT_EQUAL_FATAL(altar__ledger_rocksdb_import_partition(a, db, 2, counters, 2, NULL, NULL, 0, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 5); /* an open and a consumed record, its index entry, two side keys */
  CU_ASSERT(aux_is(a, 1, "s/t/1", "10"));
  CU_ASSERT(aux_is(a, 2, "s/t/2", "40"));
  CU_ASSERT(aux_is(a, 2, "o/0000000000000003", NULL));
  CU_ASSERT(aux_is(a, 2, "o/0000000000000009", "due"));
  CU_ASSERT(aux_is(a, 3, "s/t/3", NULL));
  CU_ASSERT(aux_is(a, ALTAR_LEDGER_SCOPE_NONE, "q", "000000000000000a"));
  CU_ASSERT(aux_is(a, ALTAR_LEDGER_SCOPE_NONE, "gn", "00000009"));
  CU_ASSERT(altar_ledger_peek_open(a, "process", "b2") != NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "stale2") == NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "b3") == NULL);
  char x[ALTAR_LEDGER_CHECKSUM_LEN + 1], y[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, x, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(ref, y, &err), 0);
  CU_ASSERT_STRING_EQUAL(x, y);
  check_consistent(a);
  /* The imported partition goes on as its own: consumed and pruned there. */
  consume(a, "b2");
  CU_ASSERT(raw_has(a, "r:0002process\0b2", 16));
  check_consistent(a);
  /* Never from a ledger that is not there, nor into a batch. */
  char missing[512];
  snprintf(missing, sizeof missing, "%s/none", db);
  CU_ASSERT_NOT_EQUAL(altar__ledger_rocksdb_import_partition(a, missing, 2, NULL, 0, NULL, NULL, 0, NULL, &err), 0);
  CU_ASSERT(strstr(err.msg, "partition 2") != NULL);
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_import_partition(a, db, -1, NULL, 0, NULL, NULL, 0, NULL, &err), ALTAR_EINVAL);
  trio_close(&t);
}

static void crash_before_ingest(void) { _exit(9); }

/* How many of a's import files (<dir>.import-*) are beside it. */
static size_t import_files(const char *dir) {
  size_t n = 0;
  for (int p = 0; p < 4; p++)
    for (int f = 0; f < 4; f++) {
      char path[4096];
      snprintf(path, sizeof path, "%s.import-%d-%d.sst", dir, p, f);
      n += access(path, F_OK) == 0;
    }
  return n;
}

/* Partitions 2 and 3 imported together, each with its own side key: both
 * replaced exactly, partition 1 untouched, the checksum of a ledger built
 * from the same pieces. A kill -9 once the files are written and before
 * they are ingested (in a child that opens the ledger itself: RocksDB's
 * threads do not survive a fork) leaves neither partition changed; the
 * next import removes the files it left and completes. */
static void test_import_partitions_together(void) {
  import_trio_t t = {0};
  trio_open(&t, "ledger-parts-many");
  altar_ledger_t *a = t.a, *b = t.b, *ref = t.ref;
  const char *da = t.da, *db = t.db;
  altar_error_t err = {0};
  /* a: partition 1 and stale views of 2 and 3; b: 2 and 3. */
  altar_ledger_scope(a, 1);
  put(a, "a1");
  altar_ledger_scope(a, 2);
  put(a, "stale2");
  altar_ledger_scope(a, 3);
  put(a, "stale3");
  put_aux(a, 3, "s/t/3", "1");
  altar_ledger_scope(b, 2);
  put(b, "b2");
  altar_ledger_scope(b, 3);
  put(b, "b3");
  put(b, "b3c");
  consume(b, "b3c");
  put_aux(b, 2, "s/t/2", "20");
  put_aux(b, 3, "s/t/3", "30");
  put_aux(b, 3, "zz", "b's own");
  altar_ledger_scope(ref, 1);
  put(ref, "a1");
  altar_ledger_scope(ref, 2);
  put(ref, "b2");
  altar_ledger_scope(ref, 3);
  put(ref, "b3");
  put(ref, "b3c");
  consume(ref, "b3c");
  altar_ledger_close(b);
  t.b = NULL;
  char before[ALTAR_LEDGER_CHECKSUM_LEN + 1], x[ALTAR_LEDGER_CHECKSUM_LEN + 1], y[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, before, &err), 0);
  altar_ledger_close(a);
  altar_ledger_import_part_t parts[2] = {{.part = 2, .put_key = "mk", .put_val = "m2", .put_vlen = 2},
                                         {.part = 3, .put_key = "zz", .put_val = "m3", .put_vlen = 2}};
  /* killed -9 between writing the files and ingesting them */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    altar_error_t e2 = {0};
    altar_ledger_t *cl = altar_ledger_rocksdb_open(da, NULL, &e2);
    altar__ledger_import_before_ingest = crash_before_ingest;
    if (!cl || altar__ledger_rocksdb_import_partitions(cl, db, parts, 2, NULL, 0, &e2)) _exit(3);
    _exit(0); /* ingested: the hook never ran */
  }
  int ws = 0;
  CU_ASSERT_EQUAL_FATAL(waitpid(pid, &ws, 0), pid);
  CU_ASSERT_FATAL(WIFEXITED(ws) && WEXITSTATUS(ws) == 9);
  CU_ASSERT_EQUAL(import_files(da), 8); /* every file written, none ingested */
  a = altar_ledger_rocksdb_open(da, NULL, &err);
  CU_ASSERT_FATAL(a != NULL);
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, x, &err), 0);
  CU_ASSERT_STRING_EQUAL(x, before);
  CU_ASSERT(aux_is(a, 3, "s/t/3", "1"));
  CU_ASSERT(aux_is(a, 2, "mk", NULL));
  CU_ASSERT(altar_ledger_peek_open(a, "process", "stale2") != NULL);
  /* Again, to the end. */
  CU_ASSERT_EQUAL_FATAL(altar__ledger_rocksdb_import_partitions(a, db, parts, 2, NULL, 0, &err), 0);
  CU_ASSERT_EQUAL(import_files(da), 0);
  CU_ASSERT_EQUAL(parts[0].keys, 2); /* the source's keys: a record and a side key */
  CU_ASSERT_EQUAL(parts[1].keys, 5); /* two records, a consumption's index, two side keys */
  CU_ASSERT(aux_is(a, 2, "s/t/2", "20"));
  CU_ASSERT(aux_is(a, 2, "mk", "m2"));
  CU_ASSERT(aux_is(a, 3, "s/t/3", "30"));
  CU_ASSERT(aux_is(a, 3, "zz", "m3")); /* the caller's key in place of the source's */
  CU_ASSERT(aux_is(a, 1, "s/t/3", NULL));
  CU_ASSERT(altar_ledger_peek_open(a, "process", "a1") != NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "b2") != NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "b3") != NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "stale2") == NULL);
  CU_ASSERT(altar_ledger_peek_open(a, "process", "stale3") == NULL);
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, x, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(ref, y, &err), 0);
  CU_ASSERT_STRING_EQUAL(x, y);
  check_consistent(a);
  /* A partition given twice is refused, nothing written. */
  altar_ledger_import_part_t twice[2] = {{.part = 2}, {.part = 2}};
  CU_ASSERT_EQUAL(altar__ledger_rocksdb_import_partitions(a, db, twice, 2, NULL, 0, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "partition 2") != NULL);
  t.a = a; /* reopened above */
  trio_close(&t);
}

/* The in-memory ledger has no partitions: the scope stays none. */
static void test_memory_ledger_has_none(void) {
  altar_error_t err = {0};
  altar_ledger_t *m = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_FALSE(altar_ledger_caps(m) & ALTAR_LEDGER_CAP_PARTITIONS);
  altar_ledger_scope(m, 4);
  CU_ASSERT_EQUAL(altar_ledger_scope_get(m), ALTAR_LEDGER_SCOPE_NONE);
  altar_ledger_close(m);
}

static void add(void) {
  ALTAR_SUITE("ledger: status partitions in keys", NULL, NULL);
  ALTAR_TEST(test_side_keys);
  ALTAR_TEST(test_checksum_across_partitions);
  ALTAR_TEST(test_consume_and_prune);
  ALTAR_TEST(test_layout_2_refused);
  ALTAR_TEST(test_import_partition);
  ALTAR_TEST(test_import_partitions_together);
  ALTAR_TEST(test_memory_ledger_has_none);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
