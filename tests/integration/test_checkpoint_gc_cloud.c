/* Garbage collection of checkpoint storage on the real object stores:
 * MinIO for s3:// (scripts/services/minio.sh; ALTAR_MINIO_ENDPOINT, default
 * http://127.0.0.1:17320) and fake-gcs-server for gs://
 * (scripts/services/fake-gcs.sh; STORAGE_EMULATOR_HOST, default
 * http://127.0.0.1:17310). Five RocksDB checkpoints with a compaction
 * between are shipped; a collection keeping two deletes the older three's
 * manifests and files and every table file only they listed (DeleteObject
 * signed with SigV4; the JSON API's objects.delete), leaves exactly the
 * kept ones' table files, and the newest still restores to the ledger's
 * checksum. An unreachable server fails the test. */
#include "testutil.h"

#include "altar/ledger.h"
#include "altar/storage.h"
#include "reconciler/checkpoint.h"
#include "reconciler/checkpoint_gc.h"
#include "reconciler/input_offsets.h"
#include "ledger/ledger_rocksdb.h"

#include <CUnit/CUnit.h>
#include <jansson.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOPIC "st"

static char *root;

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

static int setup(void) {
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  setenv("AWS_ENDPOINT_URL", env_or("ALTAR_MINIO_ENDPOINT", "http://127.0.0.1:17320"), 1);
  setenv("AWS_ACCESS_KEY_ID", env_or("ALTAR_MINIO_ACCESS_KEY", "altar-test-key"), 1);
  setenv("AWS_SECRET_ACCESS_KEY", env_or("ALTAR_MINIO_SECRET_KEY", "altar-test-secret-0123456789"), 1);
  setenv("AWS_REGION", "us-east-1", 1);
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("AWS_PROFILE");
  unsetenv("AWS_ENDPOINT_URL_S3");
  setenv("STORAGE_EMULATOR_HOST", env_or("STORAGE_EMULATOR_HOST", "http://127.0.0.1:17310"), 1);
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  if (altar_storage_register_builtin()) return 1;
  root = altar_test_tmpdir("checkpoint-gc-cloud");
  return root ? 0 : 1;
}

static int teardown(void) {
  altar_test_rmtree(root);
  free(root);
  return 0;
}

static void add_records(altar_ledger_t *l, int from, int to, int64_t next) {
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
  size_t kl = altar__reconciler_offset_key(TOPIC, 0, k, sizeof k);
  int vl = snprintf(v, sizeof v, "%lld", (long long)next);
  CU_ASSERT_EQUAL(altar_ledger_aux_put(l, k, kl, v, (size_t)vl, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_ledger_commit(l, &err), 0);
}

/* What a listing of the checkpoint URI holds. */
typedef struct seen {
  const char *uri;
  json_t *manifests; /* "cp/<id>.json" -> true */
  json_t *tables;    /* hex -> true */
  json_t *cp_files;  /* other files under cp/ -> true */
} seen_t;

static int on_entry(const altar_storage_entry_t *e, void *ud) {
  seen_t *s = ud;
  const char *rest = e->path + strlen(s->uri) + 1;
  size_t n = strlen(rest);
  if (!strncmp(rest, "sst/", 4)) json_object_set_new(s->tables, rest + 4, json_true());
  else if (!strncmp(rest, "cp/", 3) && n > 5 && !strcmp(rest + n - 5, ".json") && !strchr(rest + 3, '/'))
    json_object_set_new(s->manifests, rest, json_true());
  else if (!strncmp(rest, "cp/", 3)) json_object_set_new(s->cp_files, rest, json_true());
  return 0;
}

static void list_all(altar_storage_t *st, const char *uri, seen_t *s) {
  altar_error_t err = {0};
  s->uri = uri;
  s->manifests = json_object();
  s->tables = json_object();
  s->cp_files = json_object();
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/", uri);
  int rc = altar_storage_list(st, prefix, on_entry, s, &err);
  if (rc) fprintf(stderr, "listing %s: %s\n", prefix, err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void seen_clear(seen_t *s) {
  json_decref(s->manifests);
  json_decref(s->tables);
  json_decref(s->cp_files);
}

/* Adds the table digests manifest uri/rest lists to tables. */
static void tables_of(altar_storage_t *st, const char *uri, const char *rest, json_t *tables) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", uri, rest);
  altar_error_t err = {0};
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL_FATAL(altar_storage_read_bytes(st, p, &b, &err), 0);
  json_t *m = json_loadb((const char *)b.data, b.len, 0, NULL);
  altar_buf_free(&b);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(m, "files"), i, f) {
    const char *sst = json_string_value(json_object_get(f, "sst"));
    if (sst) json_object_set_new(tables, sst, json_true());
  }
  json_decref(m);
}

static void run_on(const char *scheme) {
  char uri[256], ldir[4096], rdir[4096];
  snprintf(uri, sizeof uri, "%s://altar-test/cpgc-%ld-%ld", scheme, (long)getpid(), (long)time(NULL));
  snprintf(ldir, sizeof ldir, "%s/%s-ledger", root, scheme);
  snprintf(rdir, sizeof rdir, "%s/%s-restored", root, scheme);
  altar_error_t err = {0};
  altar_storage_t *st = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open_for_uri(uri, NULL, &st, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_caps(st) & ALTAR_STORAGE_CAP_DELETE, ALTAR_STORAGE_CAP_DELETE);
  altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  altar_cp_shipped_t *shipped = altar__cp_shipped_new();
  char ids[5][64];
  for (int i = 0; i < 5; i++) {
    add_records(l, i * 50, i * 50 + 50, i + 1);
    if (i == 3) rocksdb_compact_range(altar__ledger_rocksdb_db(l), NULL, 0, NULL, 0);
    altar_checkpoint_t cp = {0};
    int rc = altar__checkpoint_take(l, TOPIC, &cp, &err);
    if (!rc) rc = altar__checkpoint_ship(&cp, uri, shipped, &err);
    if (rc)
      fprintf(stderr, "[%s] checkpoint: %s (is %s running?)\n", scheme, err.msg,
              !strcmp(scheme, "s3") ? "scripts/services/minio.sh" : "scripts/services/fake-gcs.sh");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    snprintf(ids[i], sizeof ids[i], "%s", cp.id);
    altar__checkpoint_clear(&cp);
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
  }
  seen_t before;
  list_all(st, uri, &before);
  CU_ASSERT_EQUAL(json_object_size(before.manifests), 5);

  altar_cp_gc_t *g = altar__cp_gc_new();
  altar_cp_gc_result_t res;
  int rc = altar__checkpoint_gc(uri, 2, 0, (double)time(NULL), g, &res, &err);
  if (rc) fprintf(stderr, "[%s] gc: %s\n", scheme, err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(res.checkpoints_kept, 2);
  CU_ASSERT_EQUAL(res.checkpoints_dropped, 3);
  CU_ASSERT_EQUAL(res.delete_failures, 0);
  CU_ASSERT(res.bytes_deleted > 0);

  seen_t after;
  list_all(st, uri, &after);
  CU_ASSERT_EQUAL(json_object_size(after.manifests), 2);
  json_t *want = json_object();
  for (int i = 0; i < 5; i++) {
    char m[128];
    snprintf(m, sizeof m, "cp/%s.json", ids[i]);
    CU_ASSERT_EQUAL(json_object_get(after.manifests, m) != NULL, i >= 3);
    if (i >= 3) tables_of(st, uri, m, want);
    /* a dropped checkpoint's own files are gone with it */
    const char *k;
    json_t *v;
    char dir[128];
    snprintf(dir, sizeof dir, "cp/%s/", ids[i]);
    size_t own = 0;
    json_object_foreach(after.cp_files, k, v) own += !strncmp(k, dir, strlen(dir));
    if (i < 3) CU_ASSERT_EQUAL(own, 0);
    if (i >= 3) CU_ASSERT(own > 0);
  }
  /* Exactly the kept checkpoints' table files are left, and fewer than before. */
  CU_ASSERT_EQUAL(json_object_size(after.tables), json_object_size(want));
  CU_ASSERT(json_object_size(after.tables) < json_object_size(before.tables));
  const char *k;
  json_t *v;
  json_object_foreach(want, k, v) CU_ASSERT_PTR_NOT_NULL(json_object_get(after.tables, k));
  fprintf(stderr, "[%s] %zu table files before, %zu after; %zu files, %llu bytes deleted\n", scheme,
          json_object_size(before.tables), json_object_size(after.tables), res.files_deleted,
          (unsigned long long)res.bytes_deleted);

  /* The newest restores to the ledger's state. */
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1], rsum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum, &err), 0);
  altar_ledger_close(l);
  altar_checkpoint_t cp = {0};
  rc = altar__checkpoint_restore(uri, rdir, &cp, &err);
  if (rc) fprintf(stderr, "[%s] restore: %s\n", scheme, err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(cp.id, ids[4]);
  altar__checkpoint_clear(&cp);
  altar_ledger_t *r = altar_ledger_rocksdb_open(rdir, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(altar_ledger_checksum(r, rsum, &err), 0);
  CU_ASSERT_STRING_EQUAL(rsum, sum);
  altar_ledger_close(r);

  json_decref(want);
  seen_clear(&before);
  seen_clear(&after);
  altar__cp_gc_free(g);
  altar__cp_shipped_free(shipped);
  altar_storage_close(st);
}

static void test_s3_minio(void) { run_on("s3"); }
static void test_gs_fake_gcs(void) { run_on("gs"); }

static void add(void) {
  CU_pSuite s = CU_add_suite("checkpoint_gc_cloud", setup, teardown);
  CU_add_test(s, "test_s3_minio", test_s3_minio);
  CU_add_test(s, "test_gs_fake_gcs", test_gs_fake_gcs);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
