/* The gs:// adapter against fake-gcs-server (scripts/services/fake-gcs.sh;
 * address in STORAGE_EMULATOR_HOST, default http://127.0.0.1:17310): the
 * Storage contract, resumable uploads, both checksums, listing pages, and
 * the emulator variable. What fake-gcs-server will not do on demand (drop a
 * connection, lie about a checksum, fail a chunk, hand out a session URL on
 * another host) comes from the scripted server in tests/common/mockhttp.c.
 * An unreachable emulator fails every test: it is never a skip. */
#include "altar/storage.h"
#include "storage_contract.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char emulator[256];
static altar_storage_t *gs, *faulty;
static altar_test_mock_t *mock;
static altar_storage_fixture_t fx;

/* The scripted server: a resumable session that fails its first chunk, an
 * upload answered with the wrong checksum, and the fault handler for the rest. */
static void gcs_mock(int fd, const altar_test_req_t *rq, void *ud) {
  (void)ud;
  char hdr[512];
  if (!strcmp(rq->method, "POST") && strstr(rq->target, "uploadType=resumable")) {
    const char *host = strstr(rq->target, "offsite") ? "http://elsewhere.invalid" : NULL;
    char here[64];
    snprintf(here, sizeof here, "http://127.0.0.1:%d", altar_test_mock_port(mock));
    snprintf(hdr, sizeof hdr, "Location: %s/upload/session/s1\r\n", host ? host : here);
    altar_test_mock_respond(fd, 200, hdr, "", 0);
    return;
  }
  if (!strcmp(rq->method, "PUT") && strstr(rq->target, "/upload/session/")) {
    altar_test_mock_respond(fd, 503, NULL, "busy", 4);
    return;
  }
  if (!strcmp(rq->method, "DELETE") && strstr(rq->target, "/upload/session/")) {
    altar_test_mock_respond(fd, 499, NULL, "", 0);
    return;
  }
  if (!strcmp(rq->method, "POST") && strstr(rq->target, "uploadType=media") && strstr(rq->target, "badcrc")) {
    char body[256];
    int n = snprintf(body, sizeof body, "{\"name\":\"x\",\"size\":\"%zu\",\"crc32c\":\"AAAAAA==\"}", rq->body_len);
    altar_test_mock_respond(fd, 200, "Content-Type: application/json\r\n", body, (size_t)n);
    return;
  }
  if (!strcmp(rq->method, "DELETE")) {
    altar_test_mock_respond(fd, 204, NULL, "", 0);
    return;
  }
  altar_storage_fault_handler(fd, rq, NULL);
}

static int setup(void) {
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  const char *e = getenv("STORAGE_EMULATOR_HOST");
  snprintf(emulator, sizeof emulator, "%s", e && *e ? e : "http://127.0.0.1:17310");
  /* The process backend opens adapters without options: it finds the emulator here. */
  setenv("STORAGE_EMULATOR_HOST", emulator, 1);
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  if (altar_storage_register_builtin()) return -1;
  altar_error_t err = {0};
  altar_strmap_t o = {0};
  /* Small thresholds so a few MiB exercise resumable chunks and listing pages. */
  altar_strmap_set(&o, "resumable_threshold", "1048576");
  altar_strmap_set(&o, "chunk_size", "524288");
  altar_strmap_set(&o, "checksum", "both");
  altar_strmap_set(&o, "page_size", "2");
  int rc = altar_storage_open("gs", &o, &gs, &err);
  altar_strmap_clear(&o);
  if (rc) {
    fprintf(stderr, "opening gs: %s\n", err.msg);
    return -1;
  }
  mock = altar_test_mock_start(gcs_mock, NULL);
  if (!mock) return -1;
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", altar_test_mock_port(mock));
  altar_strmap_set(&o, "endpoint", url);
  altar_strmap_set(&o, "auth", "none");
  altar_strmap_set(&o, "resumable_threshold", "1048576");
  rc = altar_storage_open("gs", &o, &faulty, &err);
  altar_strmap_clear(&o);
  if (rc) return -1;
  altar_storage_fixture_object_store(&fx, "gs", "s3", gs, faulty, "fake-gcs-server", emulator, "STORAGE_EMULATOR_HOST",
                                     "scripts/services/fake-gcs.sh");
  fx.big_size = 5 * 1024 * 1024 + 123; /* 11 chunks of 512 KiB, the last one short */
  return 0;
}

static int teardown(void) {
  altar_storage_close(gs);
  altar_storage_close(faulty);
  altar_test_mock_stop(mock);
  return 0;
}

/* Bucket and key rules beyond the contract's. */
static void test_bad_names(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  altar_error_t err = {0};
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(gs, "gs://Bad_Bucket/x", &b, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(gs, "gs://altar-test/", &b, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(gs, "gs://altar-test/a//b", &b, &err), ALTAR_EPATH);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(gs, "gs://altar-test/a\nb", &b, &err), ALTAR_EPATH);
}
/* Default options: an 8 MiB threshold (one media upload) and crc32c only;
 * then md5 only. Names that need escaping survive the round trip. */
static void test_defaults_and_names(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  altar_error_t err = {0};
  static const char *const modes[] = {NULL, "md5"};
  for (int m = 0; m < 2; m++) {
    altar_strmap_t o = {0};
    if (modes[m]) altar_strmap_set(&o, "checksum", modes[m]);
    altar_storage_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(altar_storage_open("gs", &o, &s, &err), 0);
    altar_strmap_clear(&o);
    char u[700];
    snprintf(u, sizeof u, "%sodd name+%d/ü?#&=%%.txt", fx.root, m);
    size_t n = 2 * 1024 * 1024 + 1;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (char)(i % 253);
    CU_ASSERT_EQUAL(altar_storage_write_bytes(s, u, data, n, &err), 0);
    altar_buf_t b = {0};
    CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), 0);
    CU_ASSERT(b.len == n && !memcmp(b.data, data, n));
    altar_buf_free(&b);
    bool ex = false;
    CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
    CU_ASSERT_TRUE(ex);
    free(data);
    altar_storage_close(s);
  }
}

/* STORAGE_EMULATOR_HOST as Google's clients take it: host:port without a scheme too. */
static void test_emulator_variable(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  altar_error_t err = {0};
  const char *hp = strstr(emulator, "://") ? strstr(emulator, "://") + 3 : emulator;
  setenv("STORAGE_EMULATOR_HOST", hp, 1);
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("gs", NULL, &s, &err), 0);
  char u[700];
  snprintf(u, sizeof u, "%semulator.txt", fx.root);
  CU_ASSERT_EQUAL(altar_storage_write_text(s, u, "via the variable", &err), 0);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(gs, u, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  altar_storage_close(s);
  /* Unset, the adapter would go to Google: an explicit endpoint must then be given to reach the emulator. */
  unsetenv("STORAGE_EMULATOR_HOST");
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "endpoint", emulator);
  altar_strmap_set(&o, "auth", "none");
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("gs", &o, &s, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  altar_storage_close(s);
  altar_strmap_clear(&o);
  setenv("STORAGE_EMULATOR_HOST", emulator, 1);
}

/* max_bytes bounds what read_bytes holds in memory. */
static void test_bounds_and_options(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  altar_error_t err = {0};
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "max_bytes", "100");
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("gs", &o, &s, &err), 0);
  char u[700];
  snprintf(u, sizeof u, "%sbound.bin", fx.root);
  char data[1000] = {0};
  CU_ASSERT_EQUAL(altar_storage_write_bytes(s, u, data, sizeof data, &err), 0);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ETOOBIG);
  CU_ASSERT_EQUAL(b.len, 0);
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL(altar_storage_as_local_file(s, u, &lf, &err), 0); /* a file is not held in memory */
  altar_local_file_release(&lf);
  altar_storage_close(s);
  altar_strmap_clear(&o);

  static const char *const bad[][2] = {{"colour", "blue"},    {"chunk_size", "300000"},     {"checksum", "sha1"},
                                       {"auth", "magic"},     {"endpoint", "ftp://x"},      {"page_size", "0"},
                                       {"timeout_s", "soon"}, {"bearer_token", "has space"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_strmap_set(&o, bad[i][0], bad[i][1]);
    if (!strcmp(bad[i][0], "bearer_token")) altar_strmap_set(&o, "auth", "bearer");
    /* an unknown key is a config error (the shared key check), a bad value invalid */
    int want = !strcmp(bad[i][0], "colour") ? ALTAR_ECONFIG : ALTAR_EINVAL;
    CU_ASSERT_EQUAL(altar_storage_open("gs", &o, &s, &err), want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i][0]));
    CU_ASSERT_PTR_NULL(s);
    altar_strmap_clear(&o);
  }
}

/* A chunk that fails cancels its session; a session URL on another host is
 * refused before any byte goes there; an upload the server stored with
 * another checksum is an integrity error and is deleted. */
static void test_upload_failures(void) {
  altar_error_t err = {0};
  char *dir = altar_test_tmpdir("gcs-up");
  char path[4200];
  snprintf(path, sizeof path, "%s/two-mib.bin", dir);
  char *data = calloc(1, 2 << 20);
  altar_test_write_file(path, data, 2 << 20);
  free(data);
  CU_ASSERT_EQUAL(altar_storage_upload(faulty, path, "gs://altar-test/chunk-fails", &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "503"));
  CU_ASSERT_TRUE(err.retriable);
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "PUT /upload/session/s1"), 1);
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "DELETE /upload/session/s1"), 1); /* cancelled */

  CU_ASSERT_EQUAL(altar_storage_upload(faulty, path, "gs://altar-test/offsite", &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not on"));
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "PUT /upload/session/s1"), 1); /* nothing sent anywhere */

  CU_ASSERT_EQUAL(altar_storage_write_bytes(faulty, "gs://altar-test/badcrc", "abc", 3, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "crc32c"));
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "DELETE /storage/v1/b/altar-test/o/badcrc"), 1);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  ALTAR_SUITE("storage_gcs", setup, teardown);
  altar_storage_contract_add(suite__, &fx);
  ALTAR_TEST(test_bad_names);
  ALTAR_TEST(test_defaults_and_names);
  ALTAR_TEST(test_emulator_variable);
  ALTAR_TEST(test_bounds_and_options);
  ALTAR_TEST(test_upload_failures);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
