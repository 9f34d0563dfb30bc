/* The python backend: the ExecutionBackend contract suite on the example
 * adapter (examples/python_backend) through the bridge, and the boundary
 * held against adapters that raise, hang, block, write garbage on the
 * protocol, answer past the bound, return the wrong type, die, or chatter
 * on stdout; and adapters that cannot be opened. Needs ALTAR_TEST_PYTHON
 * (with-venv.sh) and ALTAR_LIBRARY (ctest). */
#include "altar/plugin/backend.h"
#include "backend_contract.h"
#include "contract_argv.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET_VALUE "s3cr3t-api-key-value"

static const char *python(void) {
  const char *p = getenv("ALTAR_TEST_PYTHON");
  return p && *p ? p : "python3";
}

/* Opens the python backend on adapter with options (a JSON object) and
 * extra key=value pairs (NULL-terminated). */
static altar_backend_t *open_py(const char *adapter, const char *options, const char *const *extra,
                                altar_error_t *err) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "adapter", adapter);
  altar_strmap_set(&cfg, "python", python());
  if (options) altar_strmap_set(&cfg, "options", options);
  for (size_t i = 0; extra && extra[i]; i += 2) altar_strmap_set(&cfg, extra[i], extra[i + 1]);
  altar_backend_t *be = altar_backend_open(&altar_backend_python_ops, &cfg, err);
  altar_strmap_clear(&cfg);
  return be;
}

/* ---- the contract fixture ------------------------------------------------ */

static altar_backend_t *make_example(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  char options[4200];
  snprintf(options, sizeof options, "{\"data_root\": \"%s\"}", data_root);
  return open_py("subprocess", options, NULL, err);
}

/* A pid the example's supervisor wrote into the task's directory; waits for
 * it (bounded, 60 s: a loaded machine may take a while to start the
 * supervisor's interpreter), since "child" is written once the command runs. */
static long task_pid(altar_backend_t *be, const char *id, const char *file) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tasks/%s/%s", altar_backend_mount_root(be), id, file);
  for (int i = 0; i < 6000; i++) {
    size_t len = 0;
    char *text = altar_test_read_file(path, &len);
    long v = text ? strtol(text, NULL, 10) : 0;
    free(text);
    if (v > 1) return v;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static int vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  /* Supervisor and command die without a word (kill -9 of both groups). */
  long child = task_pid(be, h->external_id, "child");
  long sup = task_pid(be, h->external_id, "pid");
  if (sup <= 1 || child <= 1) return -1;
  kill(-(pid_t)child, SIGKILL);
  return kill(-(pid_t)sup, SIGKILL);
}

static const altar_contract_fixture_t example_fixture = {
    .name = "python:subprocess",
    .image = "none (the example runs argv directly)",
    .wait_s = 60,
    .make_backend = make_example,
    .set_exit = altar_contract_argv_exit,
    .set_sleep = altar_contract_argv_sleep,
    .set_oom = altar_contract_argv_oom,
    .set_read_input = altar_contract_argv_read_input,
    .vanish = vanish,
};

/* ---- the boundary ------------------------------------------------------- */

static altar_spec_t *one_spec(void) {
  altar_spec_t *s = altar_spec_new("boundary", "none");
  altar_spec_add_arg(s, "true");
  altar_spec_set_label(s, "job_id", "j1");
  return s;
}

/* Opens the faulty adapter in mode with the given extra keys. */
static altar_backend_t *faulty(const char *mode, const char *const *extra) {
  char options[128];
  snprintf(options, sizeof options, "{\"mode\": \"%s\"}", mode);
  altar_error_t err = {0};
  altar_backend_t *be = open_py("faulty", options, extra, &err);
  if (!be) fprintf(stderr, "open faulty(%s): %s\n", mode, err.msg);
  return be;
}

/* The backend answers again: capacity succeeds within a bounded number of
 * tries (a restarted bridge waits out its backoff first). Returns the free
 * slots the adapter reports. */
static int64_t answers_again(altar_backend_t *be) {
  altar_error_t err = {0};
  for (int i = 0; i < 400; i++) {
    altar_capacity_t cap;
    int rc = altar_backend_capacity(be, &cap, &err);
    if (rc == 0) {
      altar_resources_t cpu = {.count = 1};
      int64_t n = altar_capacity_free_for(&cap, &cpu);
      altar_capacity_clear(&cap);
      return n;
    }
    altar_capacity_clear(&cap);
    CU_ASSERT_TRUE(err.retriable); /* a restarting bridge is a transient state */
    struct timespec ts = {0, 25 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "backend never answered again: %s\n", err.msg);
  return -1;
}

/* submit on be fails with code; err returned for more checks. */
static altar_error_t submit_fails(altar_backend_t *be, int code) {
  altar_spec_t *s = one_spec();
  altar_handle_t h;
  altar_error_t err = {0};
  int rc = altar_backend_submit(be, s, &h, &err);
  if (rc != code) fprintf(stderr, "submit: want %d, got %d: %s\n", code, rc, err.msg);
  CU_ASSERT_EQUAL(rc, code);
  CU_ASSERT_PTR_NULL(h.external_id); /* cleared on error */
  /* The worker records this as a failure worth a retry. */
  const char *reason = altar_reason_for_start_error(rc);
  CU_ASSERT_STRING_EQUAL(reason, "submit_failed");
  CU_ASSERT_FALSE(altar_reason_deterministic(reason));
  CU_ASSERT_TRUE(err.retriable);
  altar_spec_free(s);
  return err;
}

static void test_raise_is_a_failure_with_its_trace(void) {
  const char *short_waits[] = {"restart_backoff_ms", "10", NULL};
  altar_backend_t *be = faulty("raise", short_waits);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "python submit (adapter faulty): RuntimeError: the cluster refused us"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "in submit: raise RuntimeError")); /* the traceback's last line */
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "[redacted]"));
  CU_ASSERT_PTR_NULL(strstr(err.msg, SECRET_VALUE));
  CU_ASSERT_EQUAL(answers_again(be), 7); /* the same bridge goes on */
  altar_backend_close(be);
}

static void test_async_hang_is_cancelled(void) {
  const char *keys[] = {"reply_timeout_ms", "2000", NULL};
  altar_backend_t *be = faulty("hang", keys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  /* The bridge answers first, so the deadline below is spent in the hanging
   * call, not in a slow start of Python on a loaded machine. */
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_error_t err = submit_fails(be, ALTAR_ETIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no reply within 2000 ms; cancelled"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_blocking_hang_is_killed(void) {
  const char *keys[] = {"reply_timeout_ms", "1000", "cancel_grace_ms", "300", "restart_backoff_ms", "10", NULL};
  altar_backend_t *be = faulty("block", keys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_ETIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no reply within 1000 ms; bridge killed"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_garbage_on_the_protocol(void) {
  const char *keys[] = {"restart_backoff_ms", "10", NULL};
  altar_backend_t *be = faulty("garbage", keys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a reply"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_huge_reply_is_refused(void) {
  const char *keys[] = {"max_reply_bytes", "1048576", "restart_backoff_ms", "10", NULL};
  altar_backend_t *be = faulty("huge", keys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_ETOOBIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "reply longer than 1048576 bytes"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_wrong_type_is_refused(void) {
  altar_backend_t *be = faulty("wrongtype", NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "submit returned int, not a TaskHandle"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_dying_bridge_is_restarted(void) {
  const char *keys[] = {"restart_backoff_ms", "10", NULL};
  altar_backend_t *be = faulty("exit", keys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = submit_fails(be, ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exited"));
  CU_ASSERT_EQUAL(answers_again(be), 7);
  /* Dies again on the next submit, and is restarted again. */
  submit_fails(be, ALTAR_EBACKEND);
  CU_ASSERT_EQUAL(answers_again(be), 7);
  altar_backend_close(be);
}

static void test_stdout_chatter_is_harmless(void) {
  altar_backend_t *be = faulty("print", NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = one_spec();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), 0);
  if (h.external_id) CU_ASSERT_STRING_EQUAL(h.external_id, "noop-1"); /* not the forged reply */
  if (h.backend) CU_ASSERT_STRING_EQUAL(h.backend, "python");
  CU_ASSERT(altar_strmap_equal(&h.labels, &s->labels));
  altar_status_t st;
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT(altar_handle_equal(&st.handle, &h));
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
}

/* Opening fails with ALTAR_ECONFIG and a message holding want. */
static void open_refused(const char *adapter, const char *options, const char *const *extra, const char *want) {
  altar_error_t err = {0};
  altar_backend_t *be = open_py(adapter, options, extra, &err);
  CU_ASSERT_PTR_NULL(be);
  altar_backend_close(be);
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  if (!strstr(err.msg, want)) fprintf(stderr, "open %s: want \"%s\" in: %s\n", adapter, want, err.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
}

/* await_completion reaches an adapter that offers it; one that does not is
 * ENOTSUP without a round trip; a wait past await_timeout_ms is cancelled. */
static void test_await_completion_forwarded(void) {
  char *root = altar_test_tmpdir("pyawait");
  altar_backend_t *be = make_example(NULL, root, &(altar_error_t){0});
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = one_spec();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_status_t st;
  int rc = altar_backend_await_completion(be, &h, 1, &st, &err);
  if (rc) fprintf(stderr, "await: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  if (!rc) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    CU_ASSERT_STRING_EQUAL(st.handle.external_id, h.external_id);
    altar_status_clear(&st);
  }
  altar_handle_clear(&h);
  altar_backend_close(be);

  be = open_py("noop", NULL, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  /* An adapter without its own await: the handle says so before any call. */
  CU_ASSERT_FALSE(altar_backend_caps(be) & ALTAR_BACKEND_CAP_AWAIT);
  CU_ASSERT_EQUAL(altar_backend_await_completion(be, &h, 1, &st, &err), ALTAR_ENOTSUP);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend 'python' cannot await completion (await_completion); poll instead");
  altar_handle_clear(&h);
  altar_backend_close(be);

  const char *short_await[] = {"await_timeout_ms", "500", "cancel_grace_ms", "2000", NULL};
  be = open_py("await-hang", NULL, short_await, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  CU_ASSERT(altar_backend_caps(be) & ALTAR_BACKEND_CAP_AWAIT); /* this adapter overrides it */
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_await_completion(be, &h, 1, &st, &err), ALTAR_ETIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(err.msg, "python await_completion (adapter await-hang): no reply within 500 ms; cancelled"));
  CU_ASSERT_TRUE(err.retriable);
  /* poll keeps its own deadline and the same bridge. */
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_backend_close(be);
  altar_spec_free(s);
  free(root);
}

static void test_open_refusals(void) {
  open_refused("no-such-adapter", NULL, NULL, "'no-such-adapter' is not registered (known: ");
  open_refused("no-verification", NULL, NULL, "input_digest_verification is None");
  open_refused("broken-init", "{\"zone\": 1}", NULL, "ValueError: unexpected options ['zone']");
  open_refused("subprocess", "[1, 2]", NULL, "backend.options: want a mapping");
  const char *bad_python[] = {"python", "/no/such/python3", NULL};
  open_refused("subprocess", NULL, bad_python, "/no/such/python3");
  /* An interpreter without altar's package: python -m fails at import. */
  const char *plain[] = {"python", "/bin/false", NULL};
  open_refused("subprocess", NULL, plain, "exited before it was ready");
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "python", python());
  altar_error_t err = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_python_ops, &cfg, &err);
  CU_ASSERT_PTR_NULL(be);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend.adapter"));
  altar_strmap_clear(&cfg);
}

static void add(void) {
  setenv("ALTAR_TEST_API_KEY", SECRET_VALUE, 1);
  altar_contract_add_suite(&example_fixture);
  ALTAR_SUITE("python boundary", NULL, NULL);
  ALTAR_TEST(test_raise_is_a_failure_with_its_trace);
  ALTAR_TEST(test_async_hang_is_cancelled);
  ALTAR_TEST(test_blocking_hang_is_killed);
  ALTAR_TEST(test_garbage_on_the_protocol);
  ALTAR_TEST(test_huge_reply_is_refused);
  ALTAR_TEST(test_wrong_type_is_refused);
  ALTAR_TEST(test_dying_bridge_is_restarted);
  ALTAR_TEST(test_stdout_chatter_is_harmless);
  ALTAR_TEST(test_await_completion_forwarded);
  ALTAR_TEST(test_open_refusals);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return altar_test_main(argc, argv, add);
}
