/* The import marker (reconciler/import_marker.h): what the import writes
 * reads back the same; a stored marker that is wrong or too big is refused
 * naming the field; it is written in the import's own write (the imported
 * partition's side key, replacing one a checkpoint carried), found by a
 * scan of every partition, left out of the checksum, and dropped. */
#include "altar/ledger.h"
#include "ledger/ledger_rocksdb.h"
#include "reconciler/import_marker.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static altar_cp_pub_end_t ends[2] = {{"t.ready", 0, 17}, {"t.dead", 3, 0}};

static void test_round_trip(void) {
  altar_checkpoint_t cp = {.id = "1796561281602-7dd4083643fb0750", .published = ends, .n_published = 2};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__import_marker_encode(&cp, 95, &b, &err), 0);
  altar__import_marker_t m;
  CU_ASSERT_EQUAL_FATAL(altar__import_marker_decode(b.data, b.len, 2, &m, &err), 0);
  CU_ASSERT_EQUAL(m.part, 2);
  CU_ASSERT_STRING_EQUAL(m.cp_id, cp.id);
  CU_ASSERT_EQUAL(m.until, 95);
  CU_ASSERT_EQUAL_FATAL(m.n_published, 2);
  CU_ASSERT_STRING_EQUAL(m.published[0].topic, "t.ready");
  CU_ASSERT_EQUAL(m.published[0].next, 17);
  CU_ASSERT_STRING_EQUAL(m.published[1].topic, "t.dead");
  CU_ASSERT_EQUAL(m.published[1].partition, 3);
  altar__import_marker_clear(&m);
  /* A checkpoint without recorded ends: a marker with none. */
  altar_checkpoint_t bare = {.id = "1-a"};
  altar_buf_reset(&b);
  CU_ASSERT_EQUAL(altar__import_marker_encode(&bare, INT64_MAX, &b, &err), 0);
  CU_ASSERT_EQUAL(altar__import_marker_decode(b.data, b.len, 0, &m, &err), 0);
  CU_ASSERT_EQUAL(m.n_published, 0);
  CU_ASSERT_EQUAL(m.until, INT64_MAX);
  altar__import_marker_clear(&m);
  altar_buf_free(&b);
}

/* Each malformed marker is refused, naming the field. */
static void test_refused(void) {
  static const struct {
    const char *v, *field;
  } bad[] = {
      {"", "version"},
      {"v2\ncp 1-a\nuntil 3\n", "version"},
      {"v1\ncp \nuntil 3\n", "field cp"},
      {"v1\ncp 1-a\n", "field until"},
      {"v1\ncp 1-a\nuntil -4\n", "field until"},
      {"v1\ncp 1-a\nuntil 3x\n", "field until"},
      {"v1\ncp 1-a\nuntil 3\nend 0 5\n", "field end"},
      {"v1\ncp 1-a\nuntil 3\nend -1 5 t\n", "field end"},
      {"v1\ncp 1-a\nuntil 3\nend 0 5 t", "field end"}, /* no newline: torn */
      {"v1\ncp 1-a\nuntil 3\nend 0 5 t\x01\n", "field end"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    altar__import_marker_t m;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__import_marker_decode(bad[i].v, strlen(bad[i].v), 1, &m, &err), ALTAR_ELEDGER);
    CU_ASSERT(strstr(err.msg, bad[i].field) != NULL);
    CU_ASSERT(strstr(err.msg, "partition 1") != NULL);
    CU_ASSERT_PTR_NULL(m.published);
  }
  /* A cp id or a topic too long for their fields. */
  char v[512];
  char id[80];
  memset(id, 'a', sizeof id - 1);
  id[sizeof id - 1] = 0;
  snprintf(v, sizeof v, "v1\ncp %s\nuntil 3\n", id);
  altar__import_marker_t m;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__import_marker_decode(v, strlen(v), 1, &m, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "field cp") != NULL);
  /* Bigger than the bound: refused before it is parsed. */
  CU_ASSERT_EQUAL(altar__import_marker_decode(v, ALTAR__IMPORT_MARKER_MAX_BYTES + 1, 1, &m, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "bytes") != NULL);
  /* More ends than the bound. */
  altar_buf_t b = {0};
  altar_buf_append_str(&b, "v1\ncp 1-a\nuntil 3\n");
  for (unsigned i = 0; i <= ALTAR__IMPORT_MARKER_MAX_ENDS; i++) altar_buf_append_str(&b, "end 0 1 t\n");
  CU_ASSERT_EQUAL(altar__import_marker_decode(b.data, b.len, 1, &m, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "ends") != NULL);
  altar_buf_free(&b);
}

static void put_aux(altar_ledger_t *l, int32_t part, const char *k, const char *v) {
  altar_error_t err = {0};
  altar_ledger_scope(l, part);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, strlen(k), v, strlen(v), &err), 0);
  altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
}

static void test_with_the_import(void) {
  char *da = altar_test_tmpdir("import-marker-a"), *db = altar_test_tmpdir("import-marker-b");
  altar_error_t err = {0};
  altar_ledger_t *a = altar_ledger_rocksdb_open(da, NULL, &err), *b = altar_ledger_rocksdb_open(db, NULL, &err);
  CU_ASSERT_FATAL(a && b);
  /* b (the checkpoint) carries a stale marker of its own import of 2. */
  put_aux(b, 2, "s/t/2", "40");
  put_aux(b, 2, ALTAR__IMPORT_MARKER_KEY, "v1\ncp 0-old\nuntil 5\n");
  put_aux(a, 1, "s/t/1", "10");
  put_aux(a, 1, ALTAR__IMPORT_MARKER_KEY, "v1\ncp 0-one\nuntil 12\n");
  altar_ledger_close(b);
  char before[ALTAR_LEDGER_CHECKSUM_LEN + 1], after[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, before, &err), 0);
  altar_checkpoint_t cp = {.id = "7-b", .published = ends, .n_published = 2};
  altar_buf_t mark = {0};
  CU_ASSERT_EQUAL_FATAL(altar__import_marker_encode(&cp, 44, &mark, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar__ledger_rocksdb_import_partition(a, db, 2, NULL, 0, ALTAR__IMPORT_MARKER_KEY, mark.data,
                                                               mark.len, NULL, &err),
                        0);
  altar_buf_free(&mark);
  /* The marker is no record: the checksum is the one before. */
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, after, &err), 0);
  CU_ASSERT_STRING_EQUAL(before, after);
  altar__import_marker_t *v = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL_FATAL(altar__import_markers_load(a, &v, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 2);
  for (size_t i = 0; i < n; i++) {
    if (v[i].part == 2) { /* the import's, not the one the checkpoint carried */
      CU_ASSERT_STRING_EQUAL(v[i].cp_id, "7-b");
      CU_ASSERT_EQUAL(v[i].until, 44);
      CU_ASSERT_EQUAL(v[i].n_published, 2);
    } else {
      CU_ASSERT_EQUAL(v[i].part, 1);
      CU_ASSERT_STRING_EQUAL(v[i].cp_id, "0-one");
    }
    altar__import_marker_clear(&v[i]);
  }
  free(v);
  /* Dropped: partition 2's goes, 1's stays. */
  CU_ASSERT_EQUAL(altar__import_marker_drop(a, 2, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar__import_markers_load(a, &v, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  CU_ASSERT_EQUAL(v[0].part, 1);
  altar__import_marker_clear(&v[0]);
  free(v);
  /* A damaged one fails the load, naming its partition. */
  put_aux(a, 3, ALTAR__IMPORT_MARKER_KEY, "v1\ncp x\n");
  CU_ASSERT_EQUAL(altar__import_markers_load(a, &v, &n, &err), ALTAR_ELEDGER);
  CU_ASSERT(strstr(err.msg, "partition 3") != NULL);
  CU_ASSERT_PTR_NULL(v);
  altar_ledger_close(a);
  /* A ledger without partitions holds none. */
  altar_ledger_t *m = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL(altar__import_markers_load(m, &v, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 0);
  altar_ledger_close(m);
  altar_test_rmtree(da);
  altar_test_rmtree(db);
  free(da);
  free(db);
}

static void add(void) {
  ALTAR_SUITE("reconciler: import markers", NULL, NULL);
  ALTAR_TEST(test_round_trip);
  ALTAR_TEST(test_refused);
  ALTAR_TEST(test_with_the_import);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
