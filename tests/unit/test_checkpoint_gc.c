/* Garbage collection of checkpoint storage (reconciler/checkpoint_gc.h), on
 * the file store with real RocksDB checkpoints: the newest `keep` stay and
 * restore; table files only dropped checkpoints listed go, the kept ones'
 * stay; another reconciler's checkpoints sharing the URI are not pushed out
 * by this one's; files a checkpoint being shipped may need wait out their
 * grace (times set by the test); an unreadable manifest stops table
 * deletion; a failed delete is counted and done on the next run; a
 * collector run between a ship's look at a stored table and its manifest
 * (forced by hooks) leaves the newest checkpoint whole, whichever side
 * comes second. */
#include "testutil.h"

#include "altar/ledger.h"
#include "altar/plugin/storage.h"
#include "altar/registry.h"
#include "altar/storage.h"
#include "reconciler/checkpoint.h"
#include "reconciler/checkpoint_gc.h"
#include "reconciler/input_offsets.h"
#include "ledger/ledger_rocksdb.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <jansson.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TOPIC "st"

static char *root;

static int setup(void) {
  altar_storage_register_builtin();
  /* The wait is for collections in other processes; here hooks force the order. */
  altar__checkpoint_recheck_wait_s = 0;
  root = altar_test_tmpdir("checkpoint-gc");
  return root ? 0 : 1;
}

static int teardown(void) {
  altar_test_rmtree(root);
  free(root);
  return 0;
}

/* Adds records t<from>..t<to-1> and sets partition p's offset to next. */
static void add_records(altar_ledger_t *l, int from, int to, int32_t p, int64_t next) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_ledger_begin(l, &err), 0);
  for (int i = from; i < to; i++) {
    char eid[32], gk[32];
    snprintf(eid, sizeof eid, "t%d", i);
    snprintf(gk, sizeof gk, "g%d", i % 7);
    altar_handle_t h = {0};
    h.backend = strdup("process");
    h.external_id = strdup(eid);
    altar_spec_t *s = altar_spec_new("train", "img:1");
    altar_spec_add_arg(s, eid);
    altar_record_meta_t meta = {.task_key = eid, .group_key = gk};
    CU_ASSERT_EQUAL(altar_ledger_record_meta(l, &h, "train", s, &meta, &err), 0);
    altar_spec_free(s);
    altar_handle_clear(&h);
  }
  char k[64], v[32];
  size_t kl = altar__reconciler_offset_key(TOPIC, p, k, sizeof k);
  int vl = snprintf(v, sizeof v, "%lld", (long long)next);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, kl, v, (size_t)vl, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
}

static void ship(altar_ledger_t *l, const char *uri, altar_cp_shipped_t *shipped, char *id_out) {
  altar_error_t err = {0};
  altar_checkpoint_t cp = {0};
  int rc = altar__checkpoint_take(l, TOPIC, &cp, &err);
  if (!rc) rc = altar__checkpoint_ship(&cp, uri, shipped, &err);
  if (rc) fprintf(stderr, "checkpoint: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  if (id_out) snprintf(id_out, 64, "%s", cp.id);
  altar__checkpoint_clear(&cp);
  struct timespec ms = {0, 2000000}; /* ids are made of milliseconds: keep them apart */
  nanosleep(&ms, NULL);
}

static void compact(altar_ledger_t *l) { rocksdb_compact_range(altar__ledger_rocksdb_db(l), NULL, 0, NULL, 0); }

static size_t files_in(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

static bool exists(const char *dir, const char *rest) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, rest);
  struct stat st;
  return stat(p, &st) == 0;
}

/* Adds the table digests manifest cdir/rest lists to *tables (a JSON object used as a set). */
static void tables_of(const char *cdir, const char *rest, json_t *tables) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", cdir, rest);
  json_t *m = json_load_file(p, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(m, "files"), i, f) {
    const char *sst = json_string_value(json_object_get(f, "sst"));
    if (sst) json_object_set_new(tables, sst, json_true());
  }
  json_decref(m);
}

/* Every stored table file is listed by one of the manifests named, and
 * every one they list is stored. */
static void check_tables_exactly(const char *cdir, const char *const *manifests, size_t n) {
  json_t *want = json_object();
  for (size_t i = 0; i < n; i++) tables_of(cdir, manifests[i], want);
  char sdir[4096];
  snprintf(sdir, sizeof sdir, "%s/sst", cdir);
  CU_ASSERT_EQUAL(files_in(sdir), json_object_size(want));
  const char *k;
  json_t *v;
  json_object_foreach(want, k, v) {
    char rest[128];
    snprintf(rest, sizeof rest, "sst/%s", k);
    CU_ASSERT(exists(cdir, rest));
  }
  json_decref(want);
}

static void checksum_of(altar_ledger_t *l, char out[ALTAR_LEDGER_CHECKSUM_LEN + 1]) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, out, &err), 0);
}

/* Five checkpoints with a compaction between: keep 2 leaves the newest two,
 * their table files and nothing else, and the newest restores. */
static void test_keeps_newest(void) {
  char ldir[4096], cdir[4096], uri[4200], rdir[4096];
  snprintf(ldir, sizeof ldir, "%s/k-ledger", root);
  snprintf(cdir, sizeof cdir, "%s/k-cp", root);
  snprintf(rdir, sizeof rdir, "%s/k-restored", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  altar_cp_shipped_t *shipped = altar__cp_shipped_new();
  char ids[5][64];
  for (int i = 0; i < 5; i++) {
    add_records(l, i * 50, i * 50 + 50, 0, i + 1);
    if (i == 3) compact(l); /* the first checkpoints' tables leave the database */
    ship(l, uri, shipped, ids[i]);
  }
  char sdir[4096];
  snprintf(sdir, sizeof sdir, "%s/sst", cdir);
  size_t tables_before = files_in(sdir);
  altar_cp_gc_t *g = altar__cp_gc_new();
  altar_cp_gc_result_t res;
  double now = (double)time(NULL);
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 2, 0, now, g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.checkpoints_kept, 2);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 3);
  CU_ASSERT_EQUAL(res.delete_failures, 0);
  CU_ASSERT(res.files_deleted > 3);
  CU_ASSERT(res.bytes_deleted > 0);
  CU_ASSERT(files_in(sdir) < tables_before);
  for (int i = 0; i < 5; i++) {
    char m[128], d[128];
    snprintf(m, sizeof m, "cp/%s.json", ids[i]);
    snprintf(d, sizeof d, "cp/%s", ids[i]);
    CU_ASSERT_EQUAL(exists(cdir, m), i >= 3);
    CU_ASSERT_EQUAL(exists(cdir, d), i >= 3); /* its own files and directory go with it */
  }
  char m3[128], m4[128];
  snprintf(m3, sizeof m3, "cp/%s.json", ids[3]);
  snprintf(m4, sizeof m4, "cp/%s.json", ids[4]);
  const char *kept[] = {m3, m4};
  check_tables_exactly(cdir, kept, 2);
  /* A second run finds nothing more to do. */
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 2, 0, now, g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.files_deleted, 0);
  CU_ASSERT_EQUAL(res.checkpoints_kept, 2);
  CU_ASSERT(res.bytes_stored > 0);
  /* The newest restores to the ledger's state. */
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1], rsum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  checksum_of(l, sum);
  altar_ledger_close(l);
  altar__cp_shipped_free(shipped);
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore(uri, rdir, &cp, &err), 0);
  CU_ASSERT_STRING_EQUAL(cp.id, ids[4]);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 0), 5);
  altar__checkpoint_clear(&cp);
  altar_ledger_t *r = altar_ledger_rocksdb_open(rdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  checksum_of(r, rsum);
  CU_ASSERT_STRING_EQUAL(rsum, sum);
  altar_ledger_close(r);
  altar__cp_gc_free(g);
}

/* Two reconcilers of different partitions share the URI: the one
 * checkpointing often never pushes out the other's; a checkpoint whose
 * partitions newer ones cover (the set grew) does go. */
static void test_shared_by_partitions(void) {
  char adir[4096], bdir[4096], cdir[4096], uri[4200];
  snprintf(adir, sizeof adir, "%s/s-a", root);
  snprintf(bdir, sizeof bdir, "%s/s-b", root);
  snprintf(cdir, sizeof cdir, "%s/s-cp", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_ledger_t *a = altar_ledger_rocksdb_open(adir, NULL, &err), *b = altar_ledger_rocksdb_open(bdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  altar_cp_shipped_t *sa = altar__cp_shipped_new(), *sb = altar__cp_shipped_new();
  char bid[64], aid[5][64];
  add_records(b, 1000, 1050, 2, 7);
  add_records(b, 1050, 1060, 3, 2);
  ship(b, uri, sb, bid); /* B: partitions 2 and 3, once */
  add_records(a, 0, 40, 0, 1);
  ship(a, uri, sa, aid[0]); /* A: partition 0 ... */
  for (int i = 1; i < 5; i++) {
    add_records(a, i * 40, i * 40 + 40, 1, i); /* ... then 0 and 1 */
    if (i == 2) compact(a);
    ship(a, uri, sa, aid[i]);
  }
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 2, 0, (double)time(NULL), NULL, &res, &err), 0);
  CU_ASSERT_EQUAL(res.checkpoints_kept, 3);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 3);
  char mb[128], ma3[128], ma4[128], ma0[128];
  snprintf(mb, sizeof mb, "cp/%s.json", bid);
  snprintf(ma0, sizeof ma0, "cp/%s.json", aid[0]);
  snprintf(ma3, sizeof ma3, "cp/%s.json", aid[3]);
  snprintf(ma4, sizeof ma4, "cp/%s.json", aid[4]);
  CU_ASSERT(exists(cdir, mb));   /* older than all of A's, but none of them covers 2 and 3 */
  CU_ASSERT(!exists(cdir, ma0)); /* partition 0 only: covered by A's newer ones */
  const char *kept[] = {mb, ma3, ma4};
  check_tables_exactly(cdir, kept, 3);
  altar_ledger_close(a);
  altar_ledger_close(b);
  altar__cp_shipped_free(sa);
  altar__cp_shipped_free(sb);
}

/* Files a checkpoint being shipped may need (a table file no manifest lists
 * yet, a checkpoint directory without its manifest) wait out the grace;
 * a checkpoint directory a crash left long ago goes at once. */
static void test_grace(void) {
  char ldir[4096], cdir[4096], uri[4200], p[4400];
  snprintf(ldir, sizeof ldir, "%s/g-ledger", root);
  snprintf(cdir, sizeof cdir, "%s/g-cp", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 30, 0, 1);
  ship(l, uri, NULL, NULL);
  double t = (double)time(NULL);
  const char *fresh = "sst/00000000000000000000000000000000000000000000000000000000000000aa";
  snprintf(p, sizeof p, "%s/%s", cdir, fresh);
  altar_test_write_file(p, "uploading", 9);
  char young[64], old[64];
  snprintf(young, sizeof young, "%013lld-00000000000000aa", (long long)(t * 1000));
  snprintf(old, sizeof old, "%013lld-00000000000000bb", (long long)((t - 3600) * 1000));
  snprintf(p, sizeof p, "%s/cp/%s", cdir, young);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/cp/%s/OPTIONS-000007", cdir, young);
  altar_test_write_file(p, "x", 1);
  snprintf(p, sizeof p, "%s/cp/%s", cdir, old);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/cp/%s/CURRENT", cdir, old);
  altar_test_write_file(p, "y", 1);
  altar_cp_gc_t *g = altar__cp_gc_new();
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 3, 600, t, g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.tables_waiting, 1);
  CU_ASSERT(exists(cdir, fresh));
  snprintf(p, sizeof p, "cp/%s/OPTIONS-000007", young);
  CU_ASSERT(exists(cdir, p));
  snprintf(p, sizeof p, "cp/%s", old);
  CU_ASSERT(!exists(cdir, p)); /* an hour old, no manifest: a crash's leftover */
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 3, 600, t + 599, g, &res, &err), 0);
  CU_ASSERT(exists(cdir, fresh));
  snprintf(p, sizeof p, "cp/%s", young);
  CU_ASSERT(exists(cdir, p));
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 3, 600, t + 600, g, &res, &err), 0);
  CU_ASSERT(!exists(cdir, fresh));
  CU_ASSERT(!exists(cdir, p));
  CU_ASSERT_EQUAL(res.checkpoints_kept, 1);
  /* A collector with no memory (a restarted daemon) waits the whole grace again. */
  snprintf(p, sizeof p, "%s/%s", cdir, fresh);
  altar_test_write_file(p, "uploading", 9);
  altar__cp_gc_free(g);
  g = altar__cp_gc_new();
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 3, 600, t + 10000, g, &res, &err), 0);
  CU_ASSERT(exists(cdir, fresh));
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 3, 600, t + 10600, g, &res, &err), 0);
  CU_ASSERT(!exists(cdir, fresh));
  altar__cp_gc_free(g);
  altar_ledger_close(l);
}

/* A manifest that cannot be read: no table file goes (what it lists is
 * unknown), the error names it; once it is fixed, the next run collects. */
static void test_unreadable_manifest(void) {
  char ldir[4096], cdir[4096], uri[4200], p[4400];
  snprintf(ldir, sizeof ldir, "%s/u-ledger", root);
  snprintf(cdir, sizeof cdir, "%s/u-cp", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 30, 0, 1);
  ship(l, uri, NULL, NULL);
  const char *orphan = "sst/00000000000000000000000000000000000000000000000000000000000000cc";
  snprintf(p, sizeof p, "%s/%s", cdir, orphan);
  altar_test_write_file(p, "left", 4);
  snprintf(p, sizeof p, "%s/cp/0000000000001-00000000000000dd.json", cdir);
  altar_test_write_file(p, "{not json", 9);
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 1, 0, (double)time(NULL), NULL, &res, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "0000000000001-00000000000000dd.json"));
  CU_ASSERT(exists(cdir, orphan));
  unlink(p);
  CU_ASSERT_EQUAL(altar__checkpoint_gc(uri, 1, 0, (double)time(NULL), NULL, &res, &err), 0);
  CU_ASSERT(!exists(cdir, orphan));
  altar_ledger_close(l);
}

/* ---- a store whose deletes fail: flaky:///p is file:///p with deletes refused while told ---- */

static bool deletes_fail;
static bool lists_slow; /* listings of cp/ take longer than ALTAR_CP_GC_LISTING_MAX_S */

static void to_file(const char *uri, char *out, size_t cap) {
  snprintf(out, cap, "file://%s", uri + strlen("flaky://"));
}

static int flaky_read(altar_storage_t *s, const char *uri, altar_buf_t *out, altar_error_t *err) {
  (void)s;
  char p[4200];
  to_file(uri, p, sizeof p);
  altar_storage_t *f = NULL;
  int rc = altar_storage_open("file", NULL, &f, err);
  if (!rc) rc = altar_storage_read_bytes(f, p, out, err);
  altar_storage_close(f);
  return rc;
}

static int flaky_exists(altar_storage_t *s, const char *uri, bool *pe, altar_error_t *err) {
  (void)s;
  char p[4200];
  to_file(uri, p, sizeof p);
  altar_storage_t *f = NULL;
  int rc = altar_storage_open("file", NULL, &f, err);
  if (!rc) rc = altar_storage_exists(f, p, pe, err);
  altar_storage_close(f);
  return rc;
}

typedef struct relay {
  altar_storage_list_fn fn;
  void *ud;
} relay_t;

static int relay_entry(const altar_storage_entry_t *e, void *ud) {
  relay_t *r = ud;
  char p[4200];
  snprintf(p, sizeof p, "flaky://%s", e->path + strlen("file://"));
  altar_storage_entry_t x = {.path = p, .size = e->size};
  return r->fn(&x, r->ud);
}

static int flaky_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  (void)s;
  char p[4200];
  to_file(prefix, p, sizeof p);
  altar_storage_t *f = NULL;
  relay_t r = {fn, ud};
  size_t pl = strlen(p);
  if (lists_slow && pl >= 4 && !strcmp(p + pl - 4, "/cp/")) {
    double d = ALTAR_CP_GC_LISTING_MAX_S + 0.1; /* what is simulated is a slow store */
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
  }
  int rc = altar_storage_open("file", NULL, &f, err);
  if (!rc) rc = altar_storage_list(f, p, relay_entry, &r, err);
  altar_storage_close(f);
  return rc;
}

static int flaky_delete(altar_storage_t *s, const char *uri, altar_error_t *err) {
  (void)s;
  if (deletes_fail) return altar_error_set(err, ALTAR_ESTORAGE, "flaky: %s: refused", uri);
  char p[4200];
  to_file(uri, p, sizeof p);
  altar_storage_t *f = NULL;
  int rc = altar_storage_open("file", NULL, &f, err);
  if (!rc) rc = altar_storage_delete(f, p, err);
  altar_storage_close(f);
  return rc;
}

static const altar_storage_ops_t flaky_ops = {
    .name = "flaky",
    .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_LIST | ALTAR_STORAGE_CAP_DELETE,
    .read_bytes = flaky_read,
    .exists = flaky_exists,
    .list = flaky_list,
    .delete_file = flaky_delete,
};

static void test_delete_failure_retried(void) {
  char ldir[4096], cdir[4096], uri[4200], furi[4200];
  snprintf(ldir, sizeof ldir, "%s/f-ledger", root);
  snprintf(cdir, sizeof cdir, "%s/f-cp", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  snprintf(furi, sizeof furi, "flaky://%s", cdir);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "flaky", &flaky_ops, &err), 0);
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  for (int i = 0; i < 4; i++) {
    add_records(l, i * 30, i * 30 + 30, 0, i + 1);
    if (i == 2) compact(l);
    ship(l, uri, NULL, NULL);
  }
  altar_cp_gc_t *g = altar__cp_gc_new();
  altar_cp_gc_result_t res;
  deletes_fail = true;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(furi, 1, 0, (double)time(NULL), g, &res, &err), 0);
  CU_ASSERT(res.delete_failures >= 3);
  CU_ASSERT_EQUAL(res.files_deleted, 0);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 0);
  CU_ASSERT_EQUAL(res.checkpoints_kept, 4); /* a manifest that stays keeps its files */
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "refused"));
  char cpd[4200];
  snprintf(cpd, sizeof cpd, "%s/cp", cdir);
  CU_ASSERT_EQUAL(files_in(cpd), 8);
  deletes_fail = false;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(furi, 1, 0, (double)time(NULL), g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.delete_failures, 0);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 3);
  CU_ASSERT(res.files_deleted > 3);
  CU_ASSERT_EQUAL(files_in(cpd), 5); /* one manifest, and flaky:// has no directories to remove */
  altar__cp_gc_free(g);
  altar_ledger_close(l);
}

/* ---- a ship and another reconciler's collector, interleaved ------------------------------------ */

/* A standby S restored from checkpoint C1 of L; L then compacts and ships
 * C2 and C3, and a collector (keep 1) drops C1 and C2: C1's table files
 * are stored, listed by no manifest, and in S's ledger. A run of that
 * collector at t + grace may delete them while S ships a checkpoint that
 * finds them stored (the window docs/state.md describes). */
typedef struct race {
  char cdir[4096], uri[4200];
  altar_ledger_t *l, *s;
  altar_cp_gc_t *g;
  double t;          /* when the collector first saw C1's tables unlisted */
  json_t *c1_tables; /* their digests */
  /* what the hooks did */
  size_t gc_deleted, c1_gone_in_hook, reuploaded;
  bool hook_ran;
} race_t;

static race_t race;

static void race_setup(const char *name) {
  memset(&race, 0, sizeof race);
  char ldir[4096], sdir[4096];
  snprintf(ldir, sizeof ldir, "%s/%s-ledger", root, name);
  snprintf(sdir, sizeof sdir, "%s/%s-standby", root, name);
  snprintf(race.cdir, sizeof race.cdir, "%s/%s-cp", root, name);
  snprintf(race.uri, sizeof race.uri, "file://%s", race.cdir);
  altar_error_t err = {0};
  race.l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(race.l);
  char id1[64], m1[128];
  add_records(race.l, 0, 50, 0, 1);
  ship(race.l, race.uri, NULL, id1);
  snprintf(m1, sizeof m1, "cp/%s.json", id1);
  race.c1_tables = json_object();
  tables_of(race.cdir, m1, race.c1_tables);
  CU_ASSERT_FATAL(json_object_size(race.c1_tables) > 0);
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore(race.uri, sdir, &cp, &err), 0);
  altar__checkpoint_clear(&cp);
  race.s = altar_ledger_rocksdb_open(sdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(race.s);
  add_records(race.l, 50, 100, 0, 2);
  compact(race.l); /* C1's tables leave L */
  ship(race.l, race.uri, NULL, NULL);
  add_records(race.l, 100, 150, 0, 3);
  ship(race.l, race.uri, NULL, NULL);
  race.g = altar__cp_gc_new();
  race.t = (double)time(NULL);
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_gc(race.uri, 1, 600, race.t, race.g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 2);
  CU_ASSERT(res.tables_waiting >= json_object_size(race.c1_tables));
  const char *k;
  json_t *v;
  json_object_foreach(race.c1_tables, k, v) {
    char rest[128];
    snprintf(rest, sizeof rest, "sst/%s", k);
    CU_ASSERT(exists(race.cdir, rest)); /* unlisted, inside the grace */
  }
  add_records(race.s, 150, 160, 0, 4); /* S goes on from C1 */
}

static size_t c1_tables_stored(void) {
  size_t n = 0;
  const char *k;
  json_t *v;
  json_object_foreach(race.c1_tables, k, v) {
    char rest[128];
    snprintf(rest, sizeof rest, "sst/%s", k);
    n += exists(race.cdir, rest);
  }
  return n;
}

/* The newest checkpoint is S's, every table file it lists is stored, and it
 * restores to S's checksum. */
static void race_check_newest(const char *name, const char *s_id) {
  altar_error_t err = {0};
  char rdir[4096], sum[ALTAR_LEDGER_CHECKSUM_LEN + 1], rsum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  snprintf(rdir, sizeof rdir, "%s/%s-restored", root, name);
  json_t *listed = json_object();
  tables_of(race.cdir, "latest.json", listed);
  const char *k;
  json_t *v;
  size_t missing = 0;
  json_object_foreach(listed, k, v) {
    char rest[128];
    snprintf(rest, sizeof rest, "sst/%s", k);
    missing += !exists(race.cdir, rest);
  }
  CU_ASSERT_EQUAL(missing, 0);
  json_decref(listed);
  checksum_of(race.s, sum);
  altar_checkpoint_t cp = {0};
  int rc = altar__checkpoint_restore(race.uri, rdir, &cp, &err);
  if (rc) fprintf(stderr, "restore: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(cp.id, s_id);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 0), 4);
  altar__checkpoint_clear(&cp);
  altar_ledger_t *r = altar_ledger_rocksdb_open(rdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  checksum_of(r, rsum);
  CU_ASSERT_STRING_EQUAL(rsum, sum);
  altar_ledger_close(r);
}

static void race_teardown(void) {
  altar_ledger_close(race.l);
  altar_ledger_close(race.s);
  altar__cp_gc_free(race.g);
  json_decref(race.c1_tables);
}

/* The collector's run, at the end of the grace, between S's look at C1's
 * tables (found stored, not uploaded) and its manifest. */
static void collect_before_manifest(const altar_checkpoint_t *c) {
  (void)c;
  altar_error_t err = {0};
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(race.uri, 1, 600, race.t + 600, race.g, &res, &err), 0);
  race.gc_deleted = res.files_deleted;
  race.c1_gone_in_hook = json_object_size(race.c1_tables) - c1_tables_stored();
  race.hook_ran = true;
}

/* A collector deletes the table files a ship found stored before that
 * ship's manifest names them: the ship's re-check after its manifest finds
 * them gone and uploads them again before latest.json, so the newest
 * checkpoint lists no missing file and restores. */
static void test_collector_between_look_and_manifest(void) {
  race_setup("r1");
  altar_error_t err = {0};
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_take(race.s, TOPIC, &cp, &err), 0);
  altar__checkpoint_before_manifest = collect_before_manifest;
  int rc = altar__checkpoint_ship(&cp, race.uri, NULL, &err);
  altar__checkpoint_before_manifest = NULL;
  if (rc) fprintf(stderr, "ship: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT(race.hook_ran);
  /* The interleaving happened: every C1 table S reuses was deleted ... */
  CU_ASSERT_EQUAL(race.c1_gone_in_hook, json_object_size(race.c1_tables));
  CU_ASSERT(race.gc_deleted >= json_object_size(race.c1_tables));
  /* ... and uploaded again by the ship's re-check. */
  CU_ASSERT_EQUAL(cp.tables_reuploaded, json_object_size(race.c1_tables));
  CU_ASSERT_EQUAL(c1_tables_stored(), json_object_size(race.c1_tables));
  char id[64];
  snprintf(id, sizeof id, "%s", cp.id);
  altar__checkpoint_clear(&cp);
  race_check_newest("r1", id);
  race_teardown();
}

static char shipped_in_hook[64];

/* S ships a whole checkpoint after the collector's listings and before it
 * deletes table files. */
static void ship_before_table_deletes(void) {
  altar_error_t err = {0};
  altar_checkpoint_t cp = {0};
  int rc = altar__checkpoint_take(race.s, TOPIC, &cp, &err);
  if (!rc) rc = altar__checkpoint_ship(&cp, race.uri, NULL, &err);
  if (rc) fprintf(stderr, "ship: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  snprintf(shipped_in_hook, sizeof shipped_in_hook, "%s", cp.id);
  race.reuploaded = cp.tables_reuploaded;
  race.hook_ran = true;
  altar__checkpoint_clear(&cp);
}

/* A ship's manifest written after the collector listed the manifests, and
 * naming table files that listing found unlisted past their grace: the
 * collector lists the manifests again before deleting and spares them. */
static void test_ship_between_listing_and_delete(void) {
  race_setup("r2");
  altar_error_t err = {0};
  altar_cp_gc_result_t res;
  altar__cp_gc_before_table_deletes = ship_before_table_deletes;
  int rc = altar__checkpoint_gc(race.uri, 1, 600, race.t + 600, race.g, &res, &err);
  altar__cp_gc_before_table_deletes = NULL;
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT(race.hook_ran);
  CU_ASSERT_EQUAL(res.tables_spared, json_object_size(race.c1_tables));
  CU_ASSERT_EQUAL(race.reuploaded, 0); /* nothing was deleted under the ship */
  CU_ASSERT_EQUAL(c1_tables_stored(), json_object_size(race.c1_tables));
  race_check_newest("r2", shipped_in_hook);
  /* Once S's checkpoint is the one kept, its tables stay in later runs too. */
  CU_ASSERT_EQUAL(altar__checkpoint_gc(race.uri, 1, 600, race.t + 1200, race.g, &res, &err), 0);
  CU_ASSERT_EQUAL(c1_tables_stored(), json_object_size(race.c1_tables));
  race_teardown();
}

/* Listing the manifests takes longer than a collection may take from a
 * listing to a delete: the table files past their grace are left for the
 * next run (a ship's wait would not cover them), which deletes them. */
static void test_slow_listing_defers(void) {
  char ldir[4096], cdir[4096], uri[4200], furi[4200], p[4400];
  snprintf(ldir, sizeof ldir, "%s/sl-ledger", root);
  snprintf(cdir, sizeof cdir, "%s/sl-cp", root);
  snprintf(uri, sizeof uri, "file://%s", cdir);
  snprintf(furi, sizeof furi, "flaky://%s", cdir);
  altar_error_t err = {0};
  altar_registry_register(ALTAR_REGISTRY_STORAGE, "flaky", &flaky_ops, &err); /* once per process */
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 30, 0, 1);
  ship(l, uri, NULL, NULL);
  const char *left = "sst/00000000000000000000000000000000000000000000000000000000000000ee";
  snprintf(p, sizeof p, "%s/%s", cdir, left);
  altar_test_write_file(p, "left", 4);
  altar_cp_gc_t *g = altar__cp_gc_new();
  altar_cp_gc_result_t res;
  double t = (double)time(NULL);
  CU_ASSERT_EQUAL(altar__checkpoint_gc(furi, 3, 600, t, g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.tables_waiting, 1);
  lists_slow = true;
  CU_ASSERT_EQUAL(altar__checkpoint_gc(furi, 3, 600, t + 600, g, &res, &err), 0);
  lists_slow = false;
  CU_ASSERT_EQUAL(res.tables_deferred, 1);
  CU_ASSERT_EQUAL(res.files_deleted, 0);
  CU_ASSERT(exists(cdir, left));
  CU_ASSERT_EQUAL(altar__checkpoint_gc(furi, 3, 600, t + 601, g, &res, &err), 0);
  CU_ASSERT_EQUAL(res.tables_deferred, 0);
  CU_ASSERT_EQUAL(res.files_deleted, 1);
  CU_ASSERT(!exists(cdir, left));
  altar__cp_gc_free(g);
  altar_ledger_close(l);
}

/* Storage that cannot delete keeps everything and says so. */
static void test_storage_without_delete(void) {
  altar_error_t err = {0};
  altar_cp_gc_result_t res;
  CU_ASSERT_EQUAL(altar__checkpoint_gc("http://127.0.0.1:9/cp", 3, 0, 0, NULL, &res, &err), ALTAR_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "keeps every checkpoint"));
  CU_ASSERT(altar__cp_gc_grace_s(60) >= 600);
  CU_ASSERT(altar__cp_gc_grace_s(3600) >= 5 * 3600);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("checkpoint_gc", setup, teardown);
  CU_add_test(s, "test_keeps_newest", test_keeps_newest);
  CU_add_test(s, "test_shared_by_partitions", test_shared_by_partitions);
  CU_add_test(s, "test_grace", test_grace);
  CU_add_test(s, "test_unreadable_manifest", test_unreadable_manifest);
  CU_add_test(s, "test_delete_failure_retried", test_delete_failure_retried);
  CU_add_test(s, "test_storage_without_delete", test_storage_without_delete);
  CU_add_test(s, "test_slow_listing_defers", test_slow_listing_defers);
  CU_add_test(s, "test_collector_between_look_and_manifest", test_collector_between_look_and_manifest);
  CU_add_test(s, "test_ship_between_listing_and_delete", test_ship_between_listing_and_delete);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
