/* Python storage adapters (backends/python_storage.c) against real adapters
 * installed by pip into the test environment (scripts/python-env.sh): the
 * Storage contract suite on the example adapter (examples/python_storage,
 * "dirstore") through the bridge, staging and collection through the
 * process backend included; the boundary held against an adapter that
 * raises, hangs, blocks, writes garbage on the protocol, returns the wrong
 * type or dies, each contained with a clear reason while the good scheme in
 * the same bridge goes on working; and configurations that cannot start.
 * Needs ALTAR_TEST_PYTHON (with-venv.sh) and ALTAR_LIBRARY (ctest). */
#include "backends/python_int.h"
#include "altar/plugin/storage.h"
#include "altar/registry.h"
#include "storage_contract.h"
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET_VALUE "s3cr3t-storage-key-value"

static char *dir; /* the store's root */
static char config[8192];

static const char *python(void) {
  const char *p = getenv("ALTAR_TEST_PYTHON");
  return p && *p ? p : "python3";
}

/* The configuration altar.yaml's storage.python section becomes: the good
 * scheme, one faulty scheme per misbehaviour, short deadlines, and a
 * restart without backoff so one fault never shows in the next check. */
static void configure_all(void) {
  snprintf(
      config, sizeof config,
      "{\"python\": \"%s\", \"reply_timeout_ms\": 1500, \"cancel_grace_ms\": 500, \"restart_backoff_ms\": 1,"
      " \"restart_backoff_max_ms\": 1, \"line\": 3, \"schemes\": ["
      "{\"scheme\": \"vault\", \"adapter\": \"dirstore\", \"options\": {\"root\": \"%s\"}, \"line\": 7},"
      "{\"scheme\": \"boom\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"raise\"}, \"line\": 8},"
      "{\"scheme\": \"stuck\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"hang\"}, \"line\": 9},"
      "{\"scheme\": \"frozen\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"block\"}, \"line\": 10},"
      "{\"scheme\": \"junk\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"garbage\"}, \"line\": 11},"
      "{\"scheme\": \"liar\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"wrongtype\"}, \"line\": 12},"
      "{\"scheme\": \"gone\", \"adapter\": \"faulty-storage\", \"options\": {\"mode\": \"exit\"}, \"line\": 13}]}",
      python(), dir);
  altar_error_t err = {0};
  int rc = altar_storage_python_configure(config, "altar.yaml", &err);
  if (rc) fprintf(stderr, "configure: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  rc = altar_storage_python_start(&err);
  if (rc) fprintf(stderr, "start: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static int setup(void) {
  setenv("ALTAR_TEST_API_KEY", SECRET_VALUE, 1);
  altar_storage_register_builtin();
  dir = altar_test_tmpdir("pystore");
  return 0;
}

static int teardown(void) {
  altar_error_t err = {0};
  altar_storage_python_configure(NULL, NULL, &err);
  free(dir);
  return 0;
}

/* ---- the contract on the example adapter ---- */

static void test_contract_on_dirstore(void) {
  configure_all();
  altar_storage_fixture_t fx = {0};
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open_for_uri("vault://bucket/x", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "vault");
  fx.label = "python dirstore";
  fx.s = s;
  snprintf(fx.root, sizeof fx.root, "vault://bucket/run/");
  fx.big_size = 3u << 20;
  fx.wrong_scheme_uri = "gs://bucket/x";
  fx.escaping_uri = "vault://bucket/../../../../etc/passwd";
  altar_storage_contract_roundtrip(&fx);
  altar_storage_contract_bad_input(&fx);
  altar_storage_contract_staging(&fx);
  /* The objects are the adapter's files: what the contract wrote is there. */
  char p[4200];
  snprintf(p, sizeof p, "%s/bucket/run/c/hello.txt", dir);
  size_t len = 0;
  char *text = altar_test_read_file(p, &len);
  CU_ASSERT(text && !strcmp(text, "hello\nstorage\n"));
  free(text);
  altar_storage_close(s);
}

/* ---- the boundary ---- */

typedef struct outcome {
  int rc;
  char msg[ALTAR_ERRMSG_MAX];
  bool retriable;
} outcome_t;

/* Reads uri with read_bytes (as_local_file when local), which every faulty
 * mode misbehaves in. */
static outcome_t read_one(const char *uri, bool local) {
  outcome_t o = {0};
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  o.rc = altar_storage_open_for_uri(uri, NULL, &s, &err);
  if (!o.rc) {
    altar_buf_t b = {0};
    altar_local_file_t lf = {0};
    o.rc = local ? altar_storage_as_local_file(s, uri, &lf, &err) : altar_storage_read_bytes(s, uri, &b, &err);
    CU_ASSERT_PTR_NULL(lf.path);
    CU_ASSERT_EQUAL(b.len, 0);
    altar_local_file_release(&lf);
    altar_buf_free(&b);
    altar_storage_close(s);
  }
  snprintf(o.msg, sizeof o.msg, "%s", err.msg);
  o.retriable = err.retriable;
  return o;
}

/* The good scheme in the same bridge still answers. */
static void vault_works(void) {
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("vault", NULL, &s, &err), 0);
  int rc = altar_storage_write_text(s, "vault://b/after.txt", "still here", &err);
  if (rc) fprintf(stderr, "vault after a fault: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  char *text = NULL;
  CU_ASSERT_EQUAL(altar_storage_read_text(s, "vault://b/after.txt", &text, NULL, &err), 0);
  CU_ASSERT(text && !strcmp(text, "still here"));
  free(text);
  altar_storage_close(s);
}

static bool has(const outcome_t *o, const char *needle) {
  bool yes = strstr(o->msg, needle) != NULL;
  if (!yes) fprintf(stderr, "\n  wanted \"%s\" in: %s\n", needle, o->msg);
  return yes;
}

static void test_raise_is_a_storage_error_with_its_trace(void) {
  configure_all();
  long long starts = altar__storage_python_starts();
  for (int local = 0; local < 2; local++) {
    outcome_t o = read_one("boom://b/k", local);
    CU_ASSERT_EQUAL(o.rc, ALTAR_ESTORAGE);
    CU_ASSERT_TRUE(o.retriable);
    CU_ASSERT(has(&o, local ? "python storage as_local_file (boom: adapter faulty-storage): RuntimeError: the object "
                              "store refused boom://b/k"
                            : "python storage read_bytes (boom: adapter faulty-storage): RuntimeError:"));
    CU_ASSERT(has(&o, "in _misbehave")); /* the traceback's last frame */
    CU_ASSERT(has(&o, "[redacted]"));
    CU_ASSERT_PTR_NULL(strstr(o.msg, SECRET_VALUE));
  }
  CU_ASSERT_EQUAL(altar__storage_python_starts(), starts); /* the same bridge serves on */
  vault_works();
}

static void test_async_hang_is_cancelled(void) {
  configure_all();
  long long starts = altar__storage_python_starts();
  outcome_t o = read_one("stuck://b/k", false);
  CU_ASSERT_EQUAL(o.rc, ALTAR_ETIMEOUT);
  CU_ASSERT_TRUE(o.retriable);
  CU_ASSERT(has(&o, "python storage read_bytes (stuck: adapter faulty-storage): no reply within 1500 ms; cancelled"));
  CU_ASSERT_EQUAL(altar__storage_python_starts(), starts);
  vault_works();
}

static void test_blocking_hang_is_killed(void) {
  configure_all();
  long long starts = altar__storage_python_starts();
  outcome_t o = read_one("frozen://b/k", true);
  CU_ASSERT_EQUAL(o.rc, ALTAR_ETIMEOUT);
  CU_ASSERT(has(&o, "no reply within 1500 ms; bridge killed"));
  vault_works(); /* a new bridge, every adapter opened again */
  CU_ASSERT_EQUAL(altar__storage_python_starts(), starts + 1);
}

static void test_garbage_on_the_protocol(void) {
  configure_all();
  long long starts = altar__storage_python_starts();
  outcome_t o = read_one("junk://b/k", false);
  CU_ASSERT_EQUAL(o.rc, ALTAR_EDECODE);
  CU_ASSERT_TRUE(o.retriable);
  CU_ASSERT(has(&o, "(junk: adapter faulty-storage): the bridge wrote a line that is not a reply"));
  vault_works();
  CU_ASSERT_EQUAL(altar__storage_python_starts(), starts + 1);
}

static void test_wrong_types_are_refused(void) {
  configure_all();
  outcome_t o = read_one("liar://b/k", false);
  CU_ASSERT_EQUAL(o.rc, ALTAR_ESTORAGE);
  CU_ASSERT(has(&o, "read_bytes() returned int, not bytes"));
  o = read_one("liar://b/k", true);
  CU_ASSERT(has(&o, "as_local_file() yielded int, not a path"));
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("liar", NULL, &s, &err), 0);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, "liar://b/k", &ex, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exists() returned int, not a bool"));
  altar_storage_close(s);
  vault_works();
}

static void test_dying_bridge_is_restarted(void) {
  configure_all();
  long long starts = altar__storage_python_starts();
  for (int i = 0; i < 3; i++) {
    outcome_t o = read_one("gone://b/k", false);
    CU_ASSERT_EQUAL(o.rc, ALTAR_ESTORAGE);
    CU_ASSERT_TRUE(o.retriable);
    CU_ASSERT(has(&o, "(gone: adapter faulty-storage): python bridge: exited"));
  }
  /* The call that starts the new bridge names its own scheme, not the last one opened. */
  outcome_t o = read_one("vault://b/absent.txt", false);
  CU_ASSERT_EQUAL(o.rc, ALTAR_ENOTFOUND);
  CU_ASSERT(has(&o, "python storage read_bytes (vault: adapter dirstore): NotFound"));
  CU_ASSERT(has(&o, "absent.txt"));
  vault_works();
  CU_ASSERT(altar__storage_python_starts() >= starts + 3);
}

/* Writes from two threads at once: calls are serialised, none is lost. */
static void *writer(void *arg) {
  const char *tag = arg;
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  long bad = 0;
  if (altar_storage_open("vault", NULL, &s, &err)) return (void *)1;
  for (int i = 0; i < 20; i++) {
    char u[128], text[64];
    snprintf(u, sizeof u, "vault://threads/%s-%d", tag, i);
    snprintf(text, sizeof text, "%s %d", tag, i);
    char *back = NULL;
    if (altar_storage_write_text(s, u, text, &err) || altar_storage_read_text(s, u, &back, NULL, &err) ||
        strcmp(back, text))
      bad++;
    free(back);
  }
  altar_storage_close(s);
  return (void *)bad;
}

static void test_threads_share_the_bridge(void) {
  configure_all();
  pthread_t a, b;
  pthread_create(&a, NULL, writer, "a");
  pthread_create(&b, NULL, writer, "b");
  void *ra, *rb;
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  CU_ASSERT_PTR_NULL(ra);
  CU_ASSERT_PTR_NULL(rb);
}

/* ---- configurations that cannot start ---- */

static void start_refused(const char *python_path, const char *scheme_json, int want, const char *needle) {
  char cfg[2048];
  snprintf(cfg, sizeof cfg, "{\"python\": \"%s\", \"python_line\": 4, \"line\": 3, \"schemes\": [%s]}",
           python_path ? python_path : python(), scheme_json);
  altar_error_t err = {0};
  int rc = altar_storage_python_configure(cfg, "altar.yaml", &err);
  if (!rc) rc = altar_storage_python_start(&err);
  CU_ASSERT_EQUAL(rc, want);
  if (!strstr(err.msg, needle)) fprintf(stderr, "\n  wanted \"%s\" in: %s\n", needle, err.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
  altar_storage_python_configure(NULL, NULL, &err);
}

static void test_refused_configurations(void) {
  start_refused(NULL, "{\"scheme\": \"vault\", \"adapter\": \"no-such-store\", \"line\": 6}", ALTAR_ECONFIG,
                "altar.yaml:6: storage.python.schemes.vault: ");
  start_refused(NULL, "{\"scheme\": \"vault\", \"adapter\": \"no-such-store\", \"line\": 6}", ALTAR_ECONFIG,
                "'no-such-store' is not registered (known: ");
  start_refused(NULL,
                "{\"scheme\": \"vault\", \"adapter\": \"broken-storage\", \"options\": {\"zone\": 1}, \"line\": 6}",
                ALTAR_ECONFIG, "ValueError: cannot reach the object store with ['zone']");
  start_refused(NULL, "{\"scheme\": \"vault\", \"adapter\": \"not-a-storage\", \"line\": 6}", ALTAR_ECONFIG,
                "not a Storage subclass");
  start_refused(NULL, "{\"scheme\": \"s3\", \"adapter\": \"dirstore\", \"line\": 6}", ALTAR_ECONFIG,
                "altar.yaml:6: storage.python.schemes.s3: s3:// is served by the 's3' adapter already");
  start_refused("/no/such/python3", "{\"scheme\": \"vault\", \"adapter\": \"dirstore\", \"line\": 6}", ALTAR_ECONFIG,
                "altar.yaml:4: storage.python.python: python bridge: cannot run /no/such/python3");
  /* Removed again: the scheme is unknown once more. */
  altar_storage_t *s = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_storage_open("vault", NULL, &s, &err), ALTAR_ENOTFOUND);
}

static void test_no_change_under_an_open_handle(void) {
  configure_all();
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("vault", NULL, &s, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_python_configure(config, "altar.yaml", &err), 0); /* the same: a no-op */
  CU_ASSERT_EQUAL(altar_storage_python_configure(NULL, NULL, &err), ALTAR_ESTATE);
  altar_strmap_t opts = {0};
  altar_strmap_set(&opts, "root", "/tmp");
  altar_storage_t *s2 = NULL;
  CU_ASSERT_EQUAL(altar_storage_open("vault", &opts, &s2, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "storage.python.schemes"));
  altar_strmap_clear(&opts);
  altar_storage_close(s);
  CU_ASSERT_EQUAL(altar_storage_python_configure(NULL, NULL, &err), 0);
}

static void add(void) {
  ALTAR_SUITE("python storage", setup, teardown);
  ALTAR_TEST(test_contract_on_dirstore);
  ALTAR_TEST(test_raise_is_a_storage_error_with_its_trace);
  ALTAR_TEST(test_async_hang_is_cancelled);
  ALTAR_TEST(test_blocking_hang_is_killed);
  ALTAR_TEST(test_garbage_on_the_protocol);
  ALTAR_TEST(test_wrong_types_are_refused);
  ALTAR_TEST(test_dying_bridge_is_restarted);
  ALTAR_TEST(test_threads_share_the_bridge);
  ALTAR_TEST(test_no_change_under_an_open_handle);
  ALTAR_TEST(test_refused_configurations);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return altar_test_main(argc, argv, add);
}
