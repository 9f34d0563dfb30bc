/* Ledger checkpoints (reconciler/checkpoint.h): a restored ledger has the
 * checksum and input offsets of the one checkpointed; table files are
 * uploaded once; a kill -9 at any point of an upload leaves the previous
 * checkpoint whole; a manifest or file damaged in storage is refused,
 * naming what is wrong. */
#include "testutil.h"

#include "altar/ledger.h"
#include "altar/storage.h"
#include "reconciler/checkpoint.h"
#include "reconciler/input_offsets.h"
#include "ledger/ledger_rocksdb.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOPIC "st"

static char *root;

static int setup(void) {
  altar_storage_register_builtin();
  altar__checkpoint_recheck_wait_s = 0; /* no collection runs beside these ships */
  root = altar_test_tmpdir("checkpoint");
  return root ? 0 : 1;
}

static int teardown(void) {
  altar_test_rmtree(root);
  free(root);
  return 0;
}

static void path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", root, name); }

/* Adds records t<from>..t<to-1> and sets partition p's offset to `next`. */
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
    if (i % 3 == 0) CU_ASSERT_EQUAL(altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err), 0);
    altar_spec_free(s);
    altar_handle_clear(&h);
  }
  char k[64], v[32];
  size_t kl = altar__reconciler_offset_key(TOPIC, p, k, sizeof k);
  int vl = snprintf(v, sizeof v, "%lld", (long long)next);
  int32_t was = altar_ledger_scope(l, p); /* as the daemon stores it: under its partition */
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, kl, v, (size_t)vl, &err), 0);
  altar_ledger_scope(l, was);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
}

static void checksum_of_dir(const char *dir, char out[ALTAR_LEDGER_CHECKSUM_LEN + 1]) {
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, out, &err), 0);
  altar_ledger_close(l);
}

static int take_and_ship(altar_ledger_t *l, const char *uri, altar_cp_shipped_t *shipped, altar_checkpoint_t *cp) {
  altar_error_t err = {0};
  int rc = altar__checkpoint_take(l, TOPIC, cp, &err);
  if (!rc) rc = altar__checkpoint_ship(cp, uri, shipped, &err);
  if (rc) fprintf(stderr, "checkpoint: %s\n", err.msg);
  return rc;
}

static size_t files_in(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

static void test_round_trip(void) {
  char ldir[4096], uri[4096], rdir[4096], sum[ALTAR_LEDGER_CHECKSUM_LEN + 1], rsum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  path(ldir, sizeof ldir, "rt-ledger");
  path(rdir, sizeof rdir, "rt-restored");
  char cdir[4096];
  path(cdir, sizeof cdir, "rt-cp");
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL(altar__checkpoint_latest(uri, &cp, &err), ALTAR_ENOTFOUND);
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 200, 0, 17);
  add_records(l, 200, 260, 3, 5);
  altar_cp_shipped_t *shipped = altar__cp_shipped_new();
  CU_ASSERT_EQUAL_FATAL(take_and_ship(l, uri, shipped, &cp), 0);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 0), 17);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 3), 5);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 1), -1);
  struct stat st;
  CU_ASSERT(stat(cp.local_dir, &st) != 0); /* the local copy is gone once shipped */
  char sst[4096];
  snprintf(sst, sizeof sst, "%s/sst", cdir);
  size_t first_tables = files_in(sst);
  CU_ASSERT(first_tables >= 1);
  altar__checkpoint_clear(&cp);
  /* Unchanged table files are not uploaded again. */
  add_records(l, 260, 270, 0, 18);
  CU_ASSERT_EQUAL(cp.n_published, 0);
  /* This one records the publish topics' ends (the daemon reads them
   * before taking it): they come back with the manifest. */
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_take(l, TOPIC, &cp, &err), 0);
  cp.published = calloc(2, sizeof *cp.published);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cp.published);
  cp.n_published = 2;
  cp.published[0] = (altar_cp_pub_end_t){"fleet.ready", 0, 41};
  cp.published[1] = (altar_cp_pub_end_t){"fleet.dead", 2, 7};
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_ship(&cp, uri, shipped, &err), 0);
  CU_ASSERT(cp.files_uploaded < cp.files);
  CU_ASSERT_EQUAL(files_in(sst), first_tables + 1);
  altar__checkpoint_clear(&cp);
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum, &err), 0);
  altar_ledger_close(l);
  altar__cp_shipped_free(shipped);
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore(uri, rdir, &cp, &err), 0);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&cp, 0), 18);
  CU_ASSERT_EQUAL_FATAL(cp.n_published, 2);
  CU_ASSERT_STRING_EQUAL(cp.published[0].topic, "fleet.ready");
  CU_ASSERT_EQUAL(cp.published[0].partition, 0);
  CU_ASSERT_EQUAL(cp.published[0].next, 41);
  CU_ASSERT_STRING_EQUAL(cp.published[1].topic, "fleet.dead");
  CU_ASSERT_EQUAL(cp.published[1].partition, 2);
  CU_ASSERT_EQUAL(cp.published[1].next, 7);
  altar__checkpoint_clear(&cp);
  checksum_of_dir(rdir, rsum);
  CU_ASSERT_STRING_EQUAL(rsum, sum);
  altar_ledger_t *r = altar_ledger_rocksdb_open(rdir, NULL, &err);
  int64_t next = 0;
  CU_ASSERT_EQUAL(altar__reconciler_input_offset(r, TOPIC, 3, &next, &err), 0);
  CU_ASSERT_EQUAL(next, 5);
  altar_ledger_close(r);
  /* Never over an existing directory. */
  CU_ASSERT_EQUAL(altar__checkpoint_restore(uri, rdir, &cp, &err), ALTAR_EEXIST);
}

/* add_records with the records too under partition p, as the daemon
 * writes them. */
static void add_part(altar_ledger_t *l, int from, int to, int32_t p, int64_t next) {
  int32_t was = altar_ledger_scope(l, p);
  add_records(l, from, to, p, next);
  altar_ledger_scope(l, was);
}

/* Two reconcilers share the storage, each shipping its own partitions:
 * the newest checkpoint covering a partition is found whoever shipped last,
 * and importing that partition from it into the other's ledger gives the
 * ledger of both partitions' records, with the partition's input offset.
 * Then b goes on with partition 0 and a, which lost it, ships its stale
 * state of it once more: the checkpoint covering 0 furthest (b's) is found,
 * not the newest. */
static void test_restore_covering(void) {
  char adir[4096], bdir[4096], refdir[4096], cdir[4096], uri[4096], r0[4096], r2[4096], r5[4096], r0b[4096];
  path(adir, sizeof adir, "cov-a");
  path(bdir, sizeof bdir, "cov-b");
  path(refdir, sizeof refdir, "cov-ref");
  path(cdir, sizeof cdir, "cov-cp");
  path(r0, sizeof r0, "cov-r0");
  path(r2, sizeof r2, "cov-r2");
  path(r5, sizeof r5, "cov-r5");
  path(r0b, sizeof r0b, "cov-r0b");
  snprintf(uri, sizeof uri, "file://%s", cdir);
  altar_error_t err = {0};
  altar_ledger_t *a = altar_ledger_rocksdb_open(adir, NULL, &err), *b = altar_ledger_rocksdb_open(bdir, NULL, &err);
  altar_ledger_t *ref = altar_ledger_rocksdb_open(refdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && ref ? a : NULL);
  add_part(a, 0, 30, 0, 30);
  add_part(a, 30, 50, 1, 20);
  add_part(b, 100, 140, 2, 40);
  add_part(ref, 0, 30, 0, 30);
  add_part(ref, 100, 140, 2, 40);
  altar_checkpoint_t ca = {0}, cb = {0}, got = {0};
  CU_ASSERT_EQUAL_FATAL(take_and_ship(a, uri, NULL, &ca), 0);
  CU_ASSERT_EQUAL_FATAL(take_and_ship(b, uri, NULL, &cb), 0); /* latest.json: b's */
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore_covering(uri, TOPIC, 0, -1, r0, &got, &err), 0);
  CU_ASSERT_STRING_EQUAL(got.id, ca.id);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&got, 0), 30);
  altar__checkpoint_clear(&got);
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore_covering(uri, TOPIC, 2, -1, r2, &got, &err), 0);
  CU_ASSERT_STRING_EQUAL(got.id, cb.id);
  altar__checkpoint_clear(&got);
  CU_ASSERT_EQUAL(altar__checkpoint_restore_covering(uri, TOPIC, 5, -1, r5, &got, &err), ALTAR_ENOTFOUND);
  CU_ASSERT(strstr(err.msg, "partition 5") != NULL);
  CU_ASSERT_EQUAL(altar__checkpoint_restore_covering(uri, "other.status", 0, -1, r5, &got, &err), ALTAR_ENOTFOUND);
  /* A ledger already at the covered offset: nothing is fetched. */
  CU_ASSERT_EQUAL(altar__checkpoint_restore_covering(uri, TOPIC, 0, 30, r5, &got, &err), ALTAR_ESTATE);
  CU_ASSERT(strstr(err.msg, "stops at offset 30") != NULL);
  struct stat st;
  CU_ASSERT(stat(r5, &st) != 0); /* nothing left behind */
  /* b takes partition 0 over from a's checkpoint. */
  CU_ASSERT_EQUAL_FATAL(altar__ledger_rocksdb_import_partition(b, r0, 0, NULL, 0, NULL, NULL, 0, NULL, &err), 0);
  char x[ALTAR_LEDGER_CHECKSUM_LEN + 1], y[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(b, x, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(ref, y, &err), 0);
  CU_ASSERT_STRING_EQUAL(x, y);
  int64_t next = 0;
  CU_ASSERT_EQUAL(altar__reconciler_input_offset(b, TOPIC, 0, &next, &err), 0);
  CU_ASSERT_EQUAL(next, 30);
  CU_ASSERT_EQUAL(altar__reconciler_input_offset(b, TOPIC, 1, &next, &err), 0);
  CU_ASSERT_EQUAL(next, -1); /* a's other partition stays a's */
  add_part(b, 30, 45, 0, 45);
  altar_checkpoint_t cb2 = {0}, ca2 = {0};
  CU_ASSERT_EQUAL_FATAL(take_and_ship(b, uri, NULL, &cb2), 0);
  add_part(a, 50, 55, 1, 25); /* a changed (its partition 1): it ships again */
  CU_ASSERT_EQUAL_FATAL(take_and_ship(a, uri, NULL, &ca2), 0);
  CU_ASSERT(strcmp(ca2.id, cb2.id) > 0);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&ca2, 0), 30);
  CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore_covering(uri, TOPIC, 0, -1, r0b, &got, &err), 0);
  CU_ASSERT_STRING_EQUAL(got.id, cb2.id);
  CU_ASSERT_EQUAL(altar__checkpoint_offset(&got, 0), 45);
  altar__checkpoint_clear(&got);
  altar__checkpoint_clear(&cb2);
  altar__checkpoint_clear(&ca2);
  altar__checkpoint_clear(&ca);
  altar__checkpoint_clear(&cb);
  altar_ledger_close(a);
  altar_ledger_close(b);
  altar_ledger_close(ref);
}

static size_t crash_at;
static void crash_hook(size_t uploaded) {
  if (uploaded >= crash_at) _exit(9);
}

/* kill -9 after each possible number of stored files: the newest complete
 * checkpoint restores, with its own checksum. The upload runs in a child
 * that opens the ledger itself (RocksDB's threads do not survive a fork). */
static void test_crash_mid_upload(void) {
  char ldir[4096], cdir[4096], uri[4096], sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  path(ldir, sizeof ldir, "crash-ledger");
  path(cdir, sizeof cdir, "crash-cp");
  snprintf(uri, sizeof uri, "%s", cdir); /* a plain path works too */
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 100, 1, 9);
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL_FATAL(take_and_ship(l, uri, NULL, &cp), 0);
  altar__checkpoint_clear(&cp);
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum1, &err), 0);
  altar_ledger_close(l);
  size_t crashes = 0;
  for (crash_at = 1; crash_at < 16; crash_at++) {
    l = altar_ledger_rocksdb_open(ldir, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    add_records(l, 100 + (int)crash_at * 10, 110 + (int)crash_at * 10, 1, 9 + (int64_t)crash_at);
    char now[ALTAR_LEDGER_CHECKSUM_LEN + 1];
    CU_ASSERT_EQUAL(altar_ledger_checksum(l, now, &err), 0);
    altar_ledger_close(l);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      altar_error_t e2 = {0};
      altar_ledger_t *cl = altar_ledger_rocksdb_open(ldir, NULL, &e2);
      altar__checkpoint_after_upload = crash_hook;
      altar_checkpoint_t c2 = {0};
      if (!cl || altar__checkpoint_take(cl, TOPIC, &c2, &e2) || altar__checkpoint_ship(&c2, uri, NULL, &e2)) _exit(3);
      _exit(0); /* finished before the crash point */
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CU_ASSERT_FATAL(WIFEXITED(ws) && (WEXITSTATUS(ws) == 9 || WEXITSTATUS(ws) == 0));
    char rdir[4096], rsum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
    snprintf(rdir, sizeof rdir, "%s/crash-restored-%zu", root, crash_at);
    altar_checkpoint_t got = {0};
    CU_ASSERT_EQUAL_FATAL(altar__checkpoint_restore(uri, rdir, &got, &err), 0);
    checksum_of_dir(rdir, rsum);
    if (WEXITSTATUS(ws) == 9) {
      crashes++;
      CU_ASSERT_STRING_EQUAL(rsum, sum1); /* the previous one, whole */
      CU_ASSERT_EQUAL(altar__checkpoint_offset(&got, 1), 9);
      altar__checkpoint_clear(&got);
      continue;
    }
    CU_ASSERT_STRING_EQUAL(rsum, now); /* the upload completed: the new one */
    CU_ASSERT_EQUAL(altar__checkpoint_offset(&got, 1), 9 + (int64_t)crash_at);
    altar__checkpoint_clear(&got);
    break;
  }
  CU_ASSERT(crashes >= 3); /* the crash points really fell inside uploads */
  /* The local copies the crashes left were removed by the next take. */
  DIR *d = opendir(root);
  struct dirent *e;
  size_t left = 0;
  while (d && (e = readdir(d))) left += !strncmp(e->d_name, "crash-ledger.cp-", 16);
  if (d) closedir(d);
  CU_ASSERT_EQUAL(left, 0);
}

static void write_file(const char *p, const char *text) {
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static void test_damaged_storage(void) {
  char ldir[4096], cdir[4096], rdir[4096], p[4200];
  path(ldir, sizeof ldir, "dmg-ledger");
  path(cdir, sizeof cdir, "dmg-cp");
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  add_records(l, 0, 50, 0, 3);
  altar_checkpoint_t cp = {0};
  CU_ASSERT_EQUAL_FATAL(take_and_ship(l, cdir, NULL, &cp), 0);
  altar__checkpoint_clear(&cp);
  altar_ledger_close(l);
  /* A table file whose bytes changed in storage. */
  char sst[4096];
  snprintf(sst, sizeof sst, "%s/sst", cdir);
  DIR *d = opendir(sst);
  struct dirent *e;
  char victim[4200] = "";
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') snprintf(victim, sizeof victim, "%s/%s", sst, e->d_name);
  if (d) closedir(d);
  CU_ASSERT_FATAL(victim[0] != 0);
  FILE *f = fopen(victim, "r+");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fseek(f, 10, SEEK_SET);
  fputc('!', f);
  fclose(f);
  path(rdir, sizeof rdir, "dmg-restored");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "does not match its digest") != NULL);
  struct stat st;
  CU_ASSERT(stat(rdir, &st) != 0); /* nothing half restored */
  /* A manifest naming a file outside its directory. */
  snprintf(p, sizeof p, "%s/latest.json", cdir);
  write_file(
      p, "{\"format\":1,\"id\":\"x\",\"topic\":\"st\",\"offsets\":[],\"files\":[{\"name\":\"../evil\",\"size\":1}]}");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "'files'") != NULL);
  write_file(p,
             "{\"format\":1,\"id\":\"x\",\"topic\":\"st\",\"offsets\":[{\"partition\":-1,\"next\":0}],\"files\":[]}");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "'offsets'") != NULL);
  /* Publish ends that are not plain (topic, partition, offset) triples. */
  write_file(p, "{\"format\":1,\"id\":\"x\",\"topic\":\"st\",\"offsets\":[],\"files\":[],"
                "\"published\":[{\"topic\":\"\",\"partition\":0,\"next\":1}]}");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "'published'") != NULL);
  write_file(p, "{\"format\":1,\"id\":\"x\",\"topic\":\"st\",\"offsets\":[],\"files\":[],"
                "\"published\":[{\"topic\":\"r\",\"partition\":0,\"next\":-5}]}");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "'published'") != NULL);
  write_file(p, "{not json");
  CU_ASSERT_EQUAL(altar__checkpoint_restore(cdir, rdir, &cp, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "latest.json:1") != NULL);
  CU_ASSERT(stat(rdir, &st) != 0);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("checkpoint", setup, teardown);
  CU_add_test(s, "test_round_trip", test_round_trip);
  CU_add_test(s, "test_restore_covering", test_restore_covering);
  CU_add_test(s, "test_crash_mid_upload", test_crash_mid_upload);
  CU_add_test(s, "test_damaged_storage", test_damaged_storage);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
