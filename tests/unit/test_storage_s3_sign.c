/* The s3:// adapter's pieces that need no server: SigV4 against the
 * example in AWS's S3 documentation, the shared credentials file and its
 * profiles, CRC-32C, and the URI and key rules. */
#include "storage/cloud_int.h"
#include "storage/s3_int.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "GET Object" from the SigV4 header-signing examples in the S3 API docs. */
static void test_sigv4_example(void) {
  altar_s3_header_t h[] = {{"host", "examplebucket.s3.amazonaws.com"},
                           {"range", "bytes=0-9"},
                           {"x-amz-content-sha256", ALTAR_S3_EMPTY_SHA256},
                           {"x-amz-date", "20130524T000000Z"}};
  altar_buf_t out = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__s3_sign("GET", "/test.txt", "", h, 4, ALTAR_S3_EMPTY_SHA256, "20130524T000000Z",
                                       "us-east-1", "s3", "AKIAIOSFODNN7EXAMPLE",
                                       "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", &out, &err),
                        0);
  CU_ASSERT_STRING_EQUAL((const char *)out.data,
                         "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                         "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                         "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  altar_buf_free(&out);
  /* Header order does not matter: they are sorted before signing. */
  altar_s3_header_t r[] = {h[3], h[1], h[0], h[2]};
  CU_ASSERT_EQUAL(altar__s3_sign("GET", "/test.txt", "", r, 4, ALTAR_S3_EMPTY_SHA256, "20130524T000000Z", "us-east-1",
                                 "s3", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", &out, &err),
                  0);
  CU_ASSERT_PTR_NOT_NULL(
      strstr((const char *)out.data, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));
  altar_buf_free(&out);
  char d[17];
  altar__s3_amz_date(1369353600, d);
  CU_ASSERT_STRING_EQUAL(d, "20130524T000000Z");
}

static void write_text(const char *path, const char *text) { altar_test_write_file(path, text, strlen(text)); }

static void test_credentials(void) {
  char *dir = altar_test_tmpdir("s3creds");
  char path[4200];
  snprintf(path, sizeof path, "%s/credentials", dir);
  write_text(path, "# comment\n[default]\naws_access_key_id = AKDEF\naws_secret_access_key=SKDEF\n\n"
                   "[profile work]\n aws_access_key_id=AKWORK \naws_secret_access_key = SKWORK\n"
                   "aws_session_token = TOKWORK\n[half]\naws_access_key_id=ONLY\n");
  unsetenv("AWS_PROFILE");
  unsetenv("AWS_SESSION_TOKEN");
  setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
  setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
  altar_s3_creds_t c;
  altar_error_t err = {0};
  /* The environment first... */
  CU_ASSERT_EQUAL_FATAL(altar__s3_creds_load(NULL, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.access_key, "AKENV");
  CU_ASSERT_PTR_NULL(c.session_token);
  altar__s3_creds_clear(&c);
  setenv("AWS_SESSION_TOKEN", "TOKENV", 1);
  CU_ASSERT_EQUAL_FATAL(altar__s3_creds_load(NULL, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.session_token, "TOKENV");
  altar__s3_creds_clear(&c);
  unsetenv("AWS_SESSION_TOKEN");
  /* ...unless a profile is named in the options. */
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "profile", "work");
  CU_ASSERT_EQUAL_FATAL(altar__s3_creds_load(&o, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.access_key, "AKWORK");
  CU_ASSERT_STRING_EQUAL(c.secret_key, "SKWORK");
  CU_ASSERT_STRING_EQUAL(c.session_token, "TOKWORK");
  CU_ASSERT_PTR_NOT_NULL(strstr(c.source, "work"));
  altar__s3_creds_clear(&c);
  /* Without the environment: AWS_PROFILE, else [default]. */
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  CU_ASSERT_EQUAL_FATAL(altar__s3_creds_load(NULL, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.access_key, "AKDEF");
  altar__s3_creds_clear(&c);
  setenv("AWS_PROFILE", "work", 1);
  CU_ASSERT_EQUAL_FATAL(altar__s3_creds_load(NULL, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.access_key, "AKWORK");
  altar__s3_creds_clear(&c);
  /* Bad cases name what is wrong. */
  setenv("AWS_PROFILE", "half", 1);
  CU_ASSERT_EQUAL(altar__s3_creds_load(NULL, &c, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "aws_secret_access_key"));
  setenv("AWS_PROFILE", "nobody", 1);
  CU_ASSERT_EQUAL(altar__s3_creds_load(NULL, &c, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "[nobody]"));
  unsetenv("AWS_PROFILE");
  snprintf(path, sizeof path, "%s/absent", dir);
  setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
  CU_ASSERT_EQUAL(altar__s3_creds_load(NULL, &c, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no credentials"));
  altar_strmap_clear(&o);
  altar_strmap_set(&o, "access_key_id", "AK");
  CU_ASSERT_EQUAL(altar__s3_creds_load(&o, &c, &err), ALTAR_EINVAL); /* the secret is missing */
  altar_strmap_set(&o, "secret_access_key", "with space");
  CU_ASSERT_EQUAL(altar__s3_creds_load(&o, &c, &err), ALTAR_EINVAL);
  altar_strmap_set(&o, "secret_access_key", "fine");
  CU_ASSERT_EQUAL(altar__s3_creds_load(&o, &c, &err), 0);
  altar__s3_creds_clear(&c);
  altar_strmap_clear(&o);
  snprintf(path, sizeof path, "%s/broken", dir);
  write_text(path, "[default\naws_access_key_id=x\n");
  setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
  CU_ASSERT_EQUAL(altar__s3_creds_load(NULL, &c, &err), ALTAR_EDECODE);
  unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  altar_test_rmtree(dir);
  free(dir);
}

static void test_crc32c(void) {
  /* The CRC-32C check value, and the same sum fed in odd pieces. */
  CU_ASSERT_EQUAL(altar__crc32c(0, "123456789", 9), 0xE3069283u);
  uint32_t c = altar__crc32c(0, "1234", 4);
  c = altar__crc32c(c, "56789", 5);
  CU_ASSERT_EQUAL(c, 0xE3069283u);
  CU_ASSERT_EQUAL(altar__crc32c(0, "", 0), 0u);
}

static void test_uris(void) {
  altar_cloud_uri_t u;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__cloud_uri_parse("s3://my-bucket.x/a/b c.txt", "s3", true, &u, &err), 0);
  CU_ASSERT_STRING_EQUAL(u.bucket, "my-bucket.x");
  CU_ASSERT_STRING_EQUAL(u.key, "a/b c.txt");
  altar__cloud_uri_clear(&u);
  CU_ASSERT_EQUAL(altar__cloud_uri_parse("S3://bkt/k", "s3", true, &u, &err), 0); /* schemes ignore case */
  altar__cloud_uri_clear(&u);
  CU_ASSERT_EQUAL(altar__cloud_uri_parse("s3://bkt", "s3", false, &u, &err), 0);
  CU_ASSERT_STRING_EQUAL(u.key, "");
  altar__cloud_uri_clear(&u);
  static const struct {
    const char *uri;
    int code;
  } bad[] = {{"s3://", ALTAR_EINVAL},         {"s3:///k", ALTAR_EINVAL},
             {"s3://bkt", ALTAR_EINVAL},      {"s3://ab/k", ALTAR_EINVAL},
             {"s3://-bkt/k", ALTAR_EINVAL},   {"s3://BKT/k", ALTAR_EINVAL},
             {"gs://bkt/k", ALTAR_EINVAL},    {"s3://bkt/../k", ALTAR_EPATH},
             {"s3://bkt/a/./k", ALTAR_EPATH}, {"s3://bkt/a//k", ALTAR_EPATH},
             {"s3://bkt/a/..", ALTAR_EPATH},  {"s3://bkt/a\tb", ALTAR_EPATH},
             {"s3://bkt/dir/", ALTAR_EINVAL}, {"", ALTAR_EINVAL}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = altar__cloud_uri_parse(bad[i].uri, "s3", true, &u, &err);
    if (rc != bad[i].code) fprintf(stderr, "'%s': %d, wanted %d\n", bad[i].uri, rc, bad[i].code);
    CU_ASSERT_EQUAL(rc, bad[i].code);
    CU_ASSERT_PTR_NULL(u.bucket);
  }
  char longkey[1100 + 16];
  snprintf(longkey, sizeof longkey, "s3://bkt/%01100d", 0);
  CU_ASSERT_EQUAL(altar__cloud_uri_parse(longkey, "s3", true, &u, &err), ALTAR_EPATH);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar__cloud_pct(&b, "a b/ü~", true), 0);
  altar_buf_append(&b, "", 1);
  CU_ASSERT_STRING_EQUAL((const char *)b.data, "a%20b/%C3%BC~");
  altar_buf_free(&b);
}

static void add(void) {
  ALTAR_SUITE("storage_s3_offline", NULL, NULL);
  ALTAR_TEST(test_sigv4_example);
  ALTAR_TEST(test_credentials);
  ALTAR_TEST(test_crc32c);
  ALTAR_TEST(test_uris);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
