/* The s3:// adapter against MinIO (scripts/services/minio.sh; address in
 * ALTAR_MINIO_ENDPOINT, default http://127.0.0.1:17320), which checks SigV4
 * signatures, payload hashes, the region and the clock: the Storage
 * contract, multipart uploads, a wrong secret, a skewed clock, a wrong
 * region, virtual-host addressing, profiles of a shared credentials file and
 * a session token from MinIO's own STS. A multipart upload that fails half
 * way (which MinIO will not do on demand) runs against the scripted server
 * in tests/common/mockhttp.c. An unreachable MinIO fails every test. */
#include "altar/storage.h"
#include "storage/s3_int.h"
#include "storage_contract.h"
#include "testutil.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char endpoint[256], hostport[256], key[128], secret[128];
static altar_storage_t *s3, *faulty;
static altar_test_mock_t *mock;
static altar_storage_fixture_t fx;

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

/* The scripted server: a multipart upload whose second part fails (key
 * "mp-part-fails") or whose completion answers 200 with an <Error> (key
 * "mp-complete-fails"); the fault handler for the rest. */
static void s3_mock(int fd, const altar_test_req_t *rq, void *ud) {
  (void)ud;
  const char *t = rq->target;
  if (strstr(t, "/mp-")) {
    if (!strcmp(rq->method, "POST") && strstr(t, "?uploads=")) {
      static const char b[] =
          "<InitiateMultipartUploadResult><UploadId>up-1</UploadId></InitiateMultipartUploadResult>";
      altar_test_mock_respond(fd, 200, NULL, b, sizeof b - 1);
    } else if (!strcmp(rq->method, "PUT") && strstr(t, "partNumber=")) {
      bool fail = strstr(t, "mp-part-fails") && strstr(t, "partNumber=2&");
      altar_test_mock_respond(fd, fail ? 500 : 200, fail ? NULL : "ETag: \"etag-part\"\r\n", "", 0);
    } else if (!strcmp(rq->method, "POST") && strstr(t, "uploadId=up-1")) {
      static const char b[] = "<Error><Code>InternalError</Code><Message>We encountered an internal error."
                              "</Message></Error>";
      altar_test_mock_respond(fd, 200, NULL, b, sizeof b - 1);
    } else if (!strcmp(rq->method, "DELETE") && strstr(t, "uploadId=up-1")) {
      altar_test_mock_respond(fd, 204, NULL, "", 0);
    } else {
      altar_test_mock_respond(fd, 400, NULL, "", 0);
    }
    return;
  }
  altar_storage_fault_handler(fd, rq, NULL);
}

/* Opens s3 with the base options (MinIO, path style) plus extra pairs. */
static altar_storage_t *open_s3(const char *const *extra, altar_error_t *err) {
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "endpoint", endpoint);
  bool own_creds = false;
  for (size_t i = 0; extra && extra[i]; i += 2) {
    altar_strmap_set(&o, extra[i], extra[i + 1]);
    own_creds = own_creds || !strcmp(extra[i], "access_key_id") || !strcmp(extra[i], "profile");
  }
  if (!own_creds) {
    altar_strmap_set(&o, "access_key_id", key);
    altar_strmap_set(&o, "secret_access_key", secret);
  }
  altar_storage_t *s = NULL;
  if (altar_storage_open("s3", &o, &s, err)) s = NULL;
  altar_strmap_clear(&o);
  return s;
}

static int setup(void) {
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  snprintf(endpoint, sizeof endpoint, "%s", env_or("ALTAR_MINIO_ENDPOINT", "http://127.0.0.1:17320"));
  snprintf(hostport, sizeof hostport, "%s", strstr(endpoint, "://") + 3);
  snprintf(key, sizeof key, "%s", env_or("ALTAR_MINIO_ACCESS_KEY", "altar-test-key"));
  snprintf(secret, sizeof secret, "%s", env_or("ALTAR_MINIO_SECRET_KEY", "altar-test-secret-0123456789"));
  /* The process backend opens adapters without options: it finds MinIO here. */
  setenv("AWS_ENDPOINT_URL", endpoint, 1);
  setenv("AWS_ACCESS_KEY_ID", key, 1);
  setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
  setenv("AWS_REGION", "us-east-1", 1);
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("AWS_PROFILE");
  unsetenv("AWS_ENDPOINT_URL_S3");
  if (altar_storage_register_builtin()) return -1;
  altar_error_t err = {0};
  /* 5 MiB parts (the service's least) so 11 MiB is three parts. */
  static const char *const small[] = {"multipart_threshold", "5242880", "part_size", "5242880", "page_size", "2", NULL};
  s3 = open_s3(small, &err);
  if (!s3) {
    fprintf(stderr, "opening s3: %s\n", err.msg);
    return -1;
  }
  mock = altar_test_mock_start(s3_mock, NULL);
  if (!mock) return -1;
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", altar_test_mock_port(mock));
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "endpoint", url);
  altar_strmap_set(&o, "access_key_id", "AKIDMOCK");
  altar_strmap_set(&o, "secret_access_key", "mock-secret");
  altar_strmap_set(&o, "multipart_threshold", "5242880");
  altar_strmap_set(&o, "part_size", "5242880");
  int rc = altar_storage_open("s3", &o, &faulty, &err);
  altar_strmap_clear(&o);
  if (rc) return -1;
  altar_storage_fixture_object_store(&fx, "s3", "gs", s3, faulty, "MinIO", endpoint, "ALTAR_MINIO_ENDPOINT",
                                     "scripts/services/minio.sh");
  fx.big_size = 11 * 1024 * 1024 + 5;
  return 0;
}

static int teardown(void) {
  altar_storage_close(s3);
  altar_storage_close(faulty);
  altar_test_mock_stop(mock);
  return 0;
}

/* ---- requests signed by hand (MinIO's STS and ListMultipartUploads) ------------------------- */

static size_t collect(char *p, size_t size, size_t n, void *ud) {
  altar_buf_append(ud, p, size * n);
  return size * n;
}

/* One signed request to MinIO at path?query; the answer into out. */
static long raw_call(const char *method, const char *path, const char *query, const char *body, const char *service,
                     altar_buf_t *out) {
  char date[17], hash[65], url[1024];
  altar__s3_amz_date(time(NULL), date);
  altar__s3_sha256_hex(body ? body : "", body ? strlen(body) : 0, hash);
  altar_s3_header_t h[] = {{"host", hostport}, {"x-amz-content-sha256", hash}, {"x-amz-date", date}};
  altar_buf_t auth = {0};
  if (altar__s3_sign(method, path, query, h, 3, hash, date, "us-east-1", service, key, secret, &auth, NULL)) return -1;
  snprintf(url, sizeof url, "%s%s%s%s", endpoint, path, *query ? "?" : "", query);
  struct curl_slist *hl = NULL;
  char line[1200];
  for (int i = 0; i < 3; i++) {
    snprintf(line, sizeof line, "%s: %s", h[i].name, h[i].value);
    hl = curl_slist_append(hl, line);
  }
  snprintf(line, sizeof line, "Authorization: %s", (const char *)auth.data);
  hl = curl_slist_append(hl, line);
  hl = curl_slist_append(hl, "Content-Type: application/x-www-form-urlencoded");
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
  long status = -1;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(hl);
  altar_buf_free(&auth);
  altar_buf_append(out, "", 1);
  return status;
}

static bool xml_text(const char *xml, const char *tag, char *out, size_t cap) {
  char open[64], close[64];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *a = strstr(xml, open), *b = a ? strstr(a, close) : NULL;
  if (!b) return false;
  a += strlen(open);
  snprintf(out, cap, "%.*s", (int)(b - a), a);
  return true;
}

/* Uploads in progress for the run's object name, as MinIO lists them
 * (MinIO lists the uploads of one exact key). */
static int pending_uploads(const char *name) {
  altar_buf_t out = {0}, full = {0};
  char q[900];
  snprintf(q, sizeof q, "%s%s", strchr(fx.root + 5, '/') + 1, name);
  altar__cloud_pct(&full, q, false);
  altar_buf_append(&full, "", 1);
  snprintf(q, sizeof q, "prefix=%s&uploads=", (const char *)full.data);
  altar_buf_free(&full);
  long st = raw_call("GET", "/altar-test", q, NULL, "s3", &out);
  if (st != 200) fprintf(stderr, "ListMultipartUploads: HTTP %ld: %s\n", st, (const char *)out.data);
  int n = -1;
  if (st == 200) {
    n = 0;
    for (const char *p = (const char *)out.data; (p = strstr(p, "<Upload>")); p++) n++;
  }
  altar_buf_free(&out);
  return n;
}

/* ---- s3 specifics ------------------------------------------------------------------------------ */

static void put_probe(altar_storage_t *s, const char *name, const char *text) {
  char u[700];
  snprintf(u, sizeof u, "%s%s", fx.root, name);
  altar_error_t err = {0};
  int rc = altar_storage_write_text(s, u, text, &err);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc) fprintf(stderr, "write %s: %s\n", u, err.msg);
}

/* A multipart upload leaves nothing pending; its ETag is no MD5 and the
 * download still checks out. */
static void test_multipart_leaves_nothing(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  CU_ASSERT_EQUAL(pending_uploads("c/big.bin"), 0); /* the contract's 11 MiB upload finished */
  altar_error_t err = {0};
  char u[700];
  snprintf(u, sizeof u, "%smp-direct.bin", fx.root);
  size_t n = 6 * 1024 * 1024;
  char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (char)(i >> 9);
  CU_ASSERT_EQUAL(altar_storage_write_bytes(s3, u, data, n, &err), 0);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s3, u, &b, &err), 0);
  CU_ASSERT(b.len == n && !memcmp(b.data, data, n));
  altar_buf_free(&b);
  free(data);
  CU_ASSERT_EQUAL(pending_uploads("mp-direct.bin"), 0);
  /* The count sees an upload left open (so the zeros above mean something). */
  char path[700], id[512] = "", q[700];
  snprintf(path, sizeof path, "/altar-test/%sdangling", strchr(fx.root + 5, '/') + 1);
  CU_ASSERT_EQUAL(raw_call("POST", path, "uploads=", "", "s3", &b), 200);
  CU_ASSERT(xml_text((const char *)b.data, "UploadId", id, sizeof id));
  altar_buf_free(&b);
  CU_ASSERT_EQUAL(pending_uploads("dangling"), 1);
  snprintf(q, sizeof q, "uploadId=%s", id);
  CU_ASSERT_EQUAL(raw_call("DELETE", path, q, NULL, "s3", &b), 204);
  altar_buf_free(&b);
  CU_ASSERT_EQUAL(pending_uploads("dangling"), 0);
}

static void test_wrong_secret_region_clock(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  put_probe(s3, "auth.txt", "signed");
  char u[700];
  snprintf(u, sizeof u, "%sauth.txt", fx.root);
  altar_error_t err = {0};
  altar_buf_t b = {0};
  bool ex = true;
  static const char *const wrong[] = {"access_key_id", "altar-test-key", "secret_access_key", "not-the-secret", NULL};
  altar_storage_t *s = open_s3(wrong, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "SignatureDoesNotMatch"));
  CU_ASSERT_FALSE(err.retriable);
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), ALTAR_ESTORAGE); /* denied is not "missing" */
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "403"));
  CU_ASSERT_EQUAL(altar_storage_write_text(s, u, "overwritten?", &err), ALTAR_ESTORAGE);
  altar_storage_close(s);

  static const char *const skewed[] = {"time_offset_s", "-3600", NULL};
  s = open_s3(skewed, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "RequestTimeTooSkewed"));
  altar_storage_close(s);

  static const char *const region[] = {"region", "eu-west-3", NULL};
  s = open_s3(region, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "region"));
  altar_storage_close(s);

  /* The untouched object is still what was written. */
  char *text = NULL;
  CU_ASSERT_EQUAL(altar_storage_read_text(s3, u, &text, NULL, &err), 0);
  CU_ASSERT(text && !strcmp(text, "signed"));
  free(text);
  altar_buf_free(&b);
}

/* bucket.localhost: curl resolves *.localhost to the loopback address and
 * MinIO (MINIO_DOMAIN=localhost) reads the bucket from the host name. */
static void test_virtual_host(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  char ep[300];
  snprintf(ep, sizeof ep, "http://localhost:%s", strrchr(hostport, ':') + 1);
  const char *const vh[] = {"endpoint", ep, "addressing_style", "virtual", NULL};
  altar_error_t err = {0};
  altar_storage_t *s = open_s3(vh, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  put_probe(s, "vhost/one.txt", "virtual host");
  put_probe(s, "vhost/two.txt", "virtual host 2");
  char u[700];
  snprintf(u, sizeof u, "%svhost/one.txt", fx.root);
  char *text = NULL;
  CU_ASSERT_EQUAL(altar_storage_read_text(s3, u, &text, NULL, &err), 0); /* path style sees it too */
  CU_ASSERT(text && !strcmp(text, "virtual host"));
  free(text);
  altar_storage_close(s);
  static const char *const bad[] = {"addressing_style", "sideways", NULL};
  CU_ASSERT_PTR_NULL(open_s3(bad, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "addressing_style"));
}

/* Profiles of a shared credentials file, and a session token from MinIO's STS. */
static void test_profiles_and_session_token(void) {
  ALTAR_STORAGE_NEED_SERVER(&fx);
  altar_buf_t out = {0};
  long st = raw_call("POST", "/", "", "Action=AssumeRole&DurationSeconds=900&Version=2011-06-15", "sts", &out);
  CU_ASSERT_EQUAL_FATAL(st, 200);
  char ak[256], sk[256], tok[4096];
  CU_ASSERT_FATAL(xml_text((const char *)out.data, "AccessKeyId", ak, sizeof ak) &&
                  xml_text((const char *)out.data, "SecretAccessKey", sk, sizeof sk) &&
                  xml_text((const char *)out.data, "SessionToken", tok, sizeof tok));
  altar_buf_free(&out);

  char *dir = altar_test_tmpdir("s3-profiles");
  char path[4200];
  snprintf(path, sizeof path, "%s/credentials", dir);
  char file[6000];
  snprintf(file, sizeof file,
           "[default]\naws_access_key_id = %s\naws_secret_access_key = wrong-secret\n\n"
           "[temporary]\naws_access_key_id = %s\naws_secret_access_key = %s\naws_session_token = %s\n\n"
           "[untokened]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
           key, ak, sk, tok, ak, sk);
  altar_test_write_file(path, file, strlen(file));
  altar_error_t err = {0};
  const char *const temp[] = {"credentials_file", path, "profile", "temporary", NULL};
  altar_storage_t *s = open_s3(temp, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  put_probe(s, "sts.txt", "written with a session token");
  altar_storage_close(s);

  /* The same temporary key without its token, and the default profile's wrong secret, are refused. */
  char u[700];
  snprintf(u, sizeof u, "%ssts.txt", fx.root);
  altar_buf_t b = {0};
  const char *const untok[] = {"credentials_file", path, "profile", "untokened", NULL};
  s = open_s3(untok, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  altar_storage_close(s);
  const char *const dflt[] = {"credentials_file", path, "profile", "default", NULL};
  s = open_s3(dflt, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "SignatureDoesNotMatch"));
  altar_storage_close(s);
  /* A token that MinIO never issued. */
  const char *const forged[] = {"access_key_id", ak, "secret_access_key", sk, "session_token", "forged-token", NULL};
  s = open_s3(forged, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "403"));
  altar_storage_close(s);
  const char *const missing[] = {"credentials_file", path, "profile", "nobody", NULL};
  CU_ASSERT_PTR_NULL(open_s3(missing, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "[nobody]"));
  altar_buf_free(&b);
  altar_test_rmtree(dir);
  free(dir);
}

/* A part that fails, or a completion that fails inside a 200, aborts the
 * upload: the DELETE ?uploadId= reaches the server once. */
static void test_multipart_abort(void) {
  char *dir = altar_test_tmpdir("s3-mp");
  char path[4200];
  snprintf(path, sizeof path, "%s/eleven.bin", dir);
  char *data = calloc(1, 11 << 20);
  altar_test_write_file(path, data, 11 << 20);
  free(data);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_storage_upload(faulty, path, "s3://altar-test/mp-part-fails", &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "part 2 of 3"));
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "PUT /altar-test/mp-part-fails?partNumber=3"), 0);
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "DELETE /altar-test/mp-part-fails?uploadId=up-1"), 1);
  CU_ASSERT_EQUAL(altar_storage_upload(faulty, path, "s3://altar-test/mp-complete-fails", &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "InternalError"));
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "PUT /altar-test/mp-complete-fails?partNumber="), 3);
  CU_ASSERT_EQUAL(altar_test_mock_count(mock, "DELETE /altar-test/mp-complete-fails?uploadId=up-1"), 1);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_options(void) {
  altar_error_t err = {0};
  static const char *const bad[][2] = {{"colour", "blue"},         {"part_size", "1024"},
                                       {"region", "Mars Base"},    {"endpoint", "http://h/with/path"},
                                       {"time_offset_s", "later"}, {"checksum", "crc"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *const o[] = {bad[i][0], bad[i][1], NULL};
    CU_ASSERT_PTR_NULL(open_s3(o, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i][0]));
  }
}

static void add(void) {
  ALTAR_SUITE("storage_s3", setup, teardown);
  altar_storage_contract_add(suite__, &fx);
  ALTAR_TEST(test_multipart_leaves_nothing);
  ALTAR_TEST(test_wrong_secret_region_clock);
  ALTAR_TEST(test_virtual_host);
  ALTAR_TEST(test_profiles_and_session_token);
  ALTAR_TEST(test_multipart_abort);
  ALTAR_TEST(test_options);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
