/* gs:// authorisation against a local token server (fake-gcs-server checks
 * no auth, so this is where auth is proven): a service-account key whose
 * RS256 JWT the server verifies with the key's public half before it hands
 * out a token, the metadata server (Metadata-Flavor: Google), a fixed bearer
 * token, and the errors of each. The same server plays a bucket that
 * answers only requests carrying a token it issued. */
#include "altar/storage.h"
#include "mockhttp.h"
#include "testutil.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static altar_test_mock_t *srv;
static EVP_PKEY *key;
static char *dir;
static char keyfile[4200], endpoint[64], token_uri[128];
static char last_rejection[256];
static int expire_once = 1; /* the bucket refuses the first good token once, as if it had expired */

static const char EMAIL[] = "altar-test@example-project.iam.gserviceaccount.com";

/* base64url without padding → bytes; -1 on bad input. */
static int b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap) {
  char tmp[8192];
  if (n + 4 >= sizeof tmp) return -1;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) tmp[j++] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
  while (j % 4) tmp[j++] = '=';
  tmp[j] = '\0';
  if (cap < j / 4 * 3) return -1;
  int len = EVP_DecodeBlock(out, (unsigned char *)tmp, (int)j);
  if (len < 0) return -1;
  while (j && tmp[j - 1] == '=') len--, j--;
  return len;
}

/* Checks the JWT's signature and claims; returns NULL when it is good, else why not. */
static const char *check_jwt(const char *jwt) {
  const char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
  if (!d2) return "not three parts";
  unsigned char claims[4096], sig[1024];
  int cl = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), claims, sizeof claims - 1);
  int sl = b64url_decode(d2 + 1, strlen(d2 + 1), sig, sizeof sig);
  if (cl < 0 || sl < 0) return "bad base64url";
  claims[cl] = '\0';
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int ok = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
           EVP_DigestVerify(md, sig, (size_t)sl, (const unsigned char *)jwt, (size_t)(d2 - jwt)) == 1;
  EVP_MD_CTX_free(md);
  if (!ok) return "bad signature";
  json_t *c = json_loads((const char *)claims, 0, NULL);
  const char *why = NULL;
  const char *iss = json_string_value(json_object_get(c, "iss"));
  const char *aud = json_string_value(json_object_get(c, "aud"));
  const char *scope = json_string_value(json_object_get(c, "scope"));
  json_int_t iat = json_integer_value(json_object_get(c, "iat"));
  json_int_t exp = json_integer_value(json_object_get(c, "exp"));
  if (!iss || strcmp(iss, EMAIL)) why = "wrong iss";
  else if (!aud || strcmp(aud, token_uri)) why = "wrong aud";
  else if (!scope || !strstr(scope, "devstorage")) why = "wrong scope";
  else if (exp - iat != 3600 || iat <= 0) why = "wrong iat/exp";
  json_decref(c);
  return why;
}

static void handler(int fd, const altar_test_req_t *rq, void *ud) {
  (void)ud;
  char v[512];
  if (!strcmp(rq->method, "POST") && !strcmp(rq->target, "/token")) {
    static const char grant[] = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
    const char *why = strncmp((const char *)rq->body, grant, sizeof grant - 1)
                          ? "wrong grant_type"
                          : check_jwt((const char *)rq->body + sizeof grant - 1);
    if (why) {
      snprintf(last_rejection, sizeof last_rejection, "%s", why);
      char body[300];
      int n = snprintf(body, sizeof body, "{\"error\":\"invalid_grant\",\"error_description\":\"%s\"}", why);
      altar_test_mock_respond(fd, 400, "Content-Type: application/json\r\n", body, (size_t)n);
      return;
    }
    static const char ok[] = "{\"access_token\":\"sa-token-1\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
    altar_test_mock_respond(fd, 200, "Content-Type: application/json\r\n", ok, sizeof ok - 1);
    return;
  }
  if (!strcmp(rq->target, "/computeMetadata/v1/instance/service-accounts/default/token")) {
    if (!altar_test_mock_header(rq, "Metadata-Flavor", v, sizeof v) || strcmp(v, "Google")) {
      altar_test_mock_respond(fd, 403, NULL, "Missing Metadata-Flavor", 23);
      return;
    }
    static const char ok[] = "{\"access_token\":\"md-token-1\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
    altar_test_mock_respond(fd, 200, "Content-Type: application/json\r\n", ok, sizeof ok - 1);
    return;
  }
  if (!strncmp(rq->target, "/storage/v1/b/altar-test/o/", 27)) {
    const char *a = altar_test_mock_header(rq, "Authorization", v, sizeof v);
    bool expired = strstr(rq->target, "expire-once") && expire_once-- > 0;
    if (!a || expired ||
        (strcmp(a, "Bearer sa-token-1") && strcmp(a, "Bearer md-token-1") && strcmp(a, "Bearer fixed-token"))) {
      static const char deny[] = "{\"error\":{\"code\":401,\"message\":\"Invalid Credentials\"}}";
      altar_test_mock_respond(fd, 401, "Content-Type: application/json\r\n", deny, sizeof deny - 1);
      return;
    }
    static const char obj[] = "{\"name\":\"obj\",\"size\":\"3\"}";
    altar_test_mock_respond(fd, 200, "Content-Type: application/json\r\n", obj, sizeof obj - 1);
    return;
  }
  altar_test_mock_respond(fd, 404, NULL, "", 0);
}

static char *pem_of(EVP_PKEY *k) {
  BIO *b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
  char *p;
  long n = BIO_get_mem_data(b, &p);
  char *out = strndup(p, (size_t)n);
  BIO_free(b);
  return out;
}

static void write_key_file(const char *path, const char *type, const char *email, const char *pem) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "client_email", email, "private_key", pem,
                        "private_key_id", "kid-1", "token_uri", token_uri);
  json_dump_file(o, path, 0);
  json_decref(o);
}

static int setup(void) {
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  unsetenv("STORAGE_EMULATOR_HOST");
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  unsetenv("GCE_METADATA_HOST");
  if (altar_storage_register_builtin()) return -1;
  key = EVP_RSA_gen(2048);
  srv = altar_test_mock_start(handler, NULL);
  if (!key || !srv) return -1;
  dir = altar_test_tmpdir("gcs-auth");
  snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", altar_test_mock_port(srv));
  snprintf(token_uri, sizeof token_uri, "%s/token", endpoint);
  snprintf(keyfile, sizeof keyfile, "%s/key.json", dir);
  char *pem = pem_of(key);
  write_key_file(keyfile, "service_account", EMAIL, pem);
  free(pem);
  return 0;
}

static int teardown(void) {
  altar_test_mock_stop(srv);
  EVP_PKEY_free(key);
  altar_test_rmtree(dir);
  free(dir);
  return 0;
}

/* Opens gs on the server with the options given as pairs. */
static altar_storage_t *open_gs(const char *const *pairs, altar_error_t *err) {
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "endpoint", endpoint);
  for (size_t i = 0; pairs && pairs[i]; i += 2) altar_strmap_set(&o, pairs[i], pairs[i + 1]);
  altar_storage_t *s = NULL;
  if (altar_storage_open("gs", &o, &s, err)) s = NULL;
  altar_strmap_clear(&o);
  return s;
}

static void test_service_account(void) {
  altar_error_t err = {0};
  const char *const o[] = {"credentials_file", keyfile, NULL};
  altar_storage_t *s = open_gs(o, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  CU_ASSERT_EQUAL(altar_test_mock_count(srv, "POST /token"), 1); /* the token is reused */
  altar_storage_close(s);
  /* The same through GOOGLE_APPLICATION_CREDENTIALS. */
  setenv("GOOGLE_APPLICATION_CREDENTIALS", keyfile, 1);
  s = open_gs(NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT_EQUAL(altar_test_mock_count(srv, "POST /token"), 2);
  altar_storage_close(s);
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  /* A 401 with a cached token: a fresh token, one retry. */
  s = open_gs(o, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  unsigned tokens = altar_test_mock_count(srv, "POST /token");
  ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/expire-once", &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT_EQUAL(altar_test_mock_count(srv, "POST /token"), tokens + 1);
  CU_ASSERT_EQUAL(altar_test_mock_count(srv, "expire-once"), 2);
  altar_storage_close(s);
}

static void test_service_account_refused(void) {
  altar_error_t err = {0};
  /* A key the server does not know: its JWT's signature does not verify. */
  EVP_PKEY *other = EVP_RSA_gen(2048);
  char *pem = pem_of(other);
  char path[4300];
  snprintf(path, sizeof path, "%s/other.json", dir);
  write_key_file(path, "service_account", EMAIL, pem);
  free(pem);
  EVP_PKEY_free(other);
  const char *const o[] = {"credentials_file", path, NULL};
  altar_storage_t *s = open_gs(o, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  bool ex = true;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "invalid_grant"));
  CU_ASSERT_STRING_EQUAL(last_rejection, "bad signature");
  CU_ASSERT_FALSE(ex);
  altar_storage_close(s);

  /* Key files that are not service-account keys are refused when opened. */
  snprintf(path, sizeof path, "%s/user.json", dir);
  write_key_file(path, "authorized_user", EMAIL, "x");
  CU_ASSERT_PTR_NULL(open_gs(o, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "service_account"));
  snprintf(path, sizeof path, "%s/badpem.json", dir);
  write_key_file(path, "service_account", EMAIL, "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n");
  CU_ASSERT_PTR_NULL(open_gs(o, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "private_key"));
  snprintf(path, sizeof path, "%s/notjson.json", dir);
  altar_test_write_file(path, "{not json", 9);
  CU_ASSERT_PTR_NULL(open_gs(o, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EDECODE);
  snprintf(path, sizeof path, "%s/absent.json", dir);
  CU_ASSERT_PTR_NULL(open_gs(o, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "absent.json"));
  const char *const need[] = {"auth", "service_account", NULL};
  CU_ASSERT_PTR_NULL(open_gs(need, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "credentials_file"));
}

static void test_metadata_server(void) {
  altar_error_t err = {0};
  char host[64];
  snprintf(host, sizeof host, "127.0.0.1:%d", altar_test_mock_port(srv));
  setenv("GCE_METADATA_HOST", host, 1);
  /* No credentials and no emulator: auto means the metadata server. */
  altar_storage_t *s = open_gs(NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  bool ex = false;
  unsigned before = altar_test_mock_count(srv, "computeMetadata");
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT_EQUAL(altar_test_mock_count(srv, "computeMetadata"), before + 1);
  altar_storage_close(s);
  unsetenv("GCE_METADATA_HOST");
  /* metadata_host as an option; one that is not a host is refused. */
  const char *const o[] = {"auth", "metadata", "metadata_host", host, NULL};
  s = open_gs(o, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  altar_storage_close(s);
  const char *const bad[] = {"auth", "metadata", "metadata_host", "h/p?x", NULL};
  CU_ASSERT_PTR_NULL(open_gs(bad, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "metadata_host"));
}

static void test_bearer_and_none(void) {
  altar_error_t err = {0};
  const char *const good[] = {"bearer_token", "fixed-token", NULL};
  altar_storage_t *s = open_gs(good, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  altar_storage_close(s);
  setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "stale-token", 1);
  s = open_gs(NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "401"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Invalid Credentials"));
  altar_storage_close(s);
  unsetenv("GOOGLE_OAUTH_ACCESS_TOKEN");
  const char *const none[] = {"auth", "none", NULL};
  s = open_gs(none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(altar_storage_exists(s, "gs://altar-test/obj", &ex, &err), ALTAR_ESTORAGE);
  altar_storage_close(s);
  const char *const injected[] = {"bearer_token", "tok\r\nX-Evil: 1", NULL};
  CU_ASSERT_PTR_NULL(open_gs(injected, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bearer_token"));
}

static void add(void) {
  ALTAR_SUITE("storage_gcs_auth", setup, teardown);
  ALTAR_TEST(test_service_account);
  ALTAR_TEST(test_service_account_refused);
  ALTAR_TEST(test_metadata_server);
  ALTAR_TEST(test_bearer_and_none);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
