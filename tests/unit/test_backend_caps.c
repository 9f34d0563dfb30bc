/* Backend capability bits: a table's bits and operations must agree, a
 * handle runs only what it declares, a caller can ask before it relies on
 * one, and each built-in declares what it does. */
#include "altar/plugin/backend.h"
#include "altar/registry.h"
#include "testutil.h"

#include <string.h>

static int cancels, awaits;

static int cb_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  (void)cfg, (void)err;
  altar_backend_set_impl(be, &cancels);
  return 0;
}
static void cb_close(altar_backend_t *be) { altar_backend_set_impl(be, NULL); }
static int cb_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  (void)err;
  return altar_handle_init_for_spec(ph, altar_backend_name(be), "t1", spec);
}
static int cb_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  (void)be, (void)err;
  for (size_t i = 0; i < n; i++) altar_status_init(&pst[i], &hs[i], ALTAR_STATE_SUCCEEDED, NULL);
  return 0;
}
static int cb_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  (void)be, (void)h, (void)err;
  cancels++;
  return 0;
}
static int cb_await(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  awaits++;
  return cb_poll(be, hs, n, pst, err);
}

#define CB_BASE                                                                                                        \
  .input_digest_verification = ALTAR_VERIFY_STAGING, .open = cb_open, .close = cb_close, .submit = cb_submit,          \
  .poll = cb_poll

static const altar_backend_ops_t both = {.name = "caps-both",
                                         .caps = ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT,
                                         CB_BASE,
                                         .cancel = cb_cancel,
                                         .await_completion = cb_await};
static const altar_backend_ops_t bit_without_op = {.name = "caps-bit", .caps = ALTAR_BACKEND_CAP_CANCEL, CB_BASE};
static const altar_backend_ops_t op_without_bit = {.name = "caps-op", CB_BASE, .cancel = cb_cancel};
static const altar_backend_ops_t unknown_bit = {.name = "caps-unknown", .caps = 0x80000000u, CB_BASE};
static const altar_backend_ops_t plain = {.name = "caps-plain", .caps = ALTAR_BACKEND_CAP_ADOPT, CB_BASE};

/* A table whose bits and operations disagree is refused everywhere it can
 * enter, with what is wrong named. */
static void test_disagreeing_tables_are_refused(void) {
  altar_error_t err = {0};
  CU_ASSERT_PTR_NULL(altar_backend_open(&bit_without_op, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend 'caps-bit': caps declares cancel but the vtable has no 'cancel'");
  CU_ASSERT_PTR_NULL(altar_backend_open(&op_without_bit, NULL, &err));
  CU_ASSERT_STRING_EQUAL(
      err.msg, "backend 'caps-op': the vtable has 'cancel' but caps does not declare it (its ALTAR_BACKEND_CAP_* bit)");
  CU_ASSERT_PTR_NULL(altar_backend_open(&unknown_bit, NULL, &err));
  CU_ASSERT(strstr(err.msg, "bits altar does not define") != NULL);
  CU_ASSERT_EQUAL(altar_backend_check_table(&bit_without_op, &err), ALTAR_EINVAL); /* what the plug-in loader asks */
  CU_ASSERT(strstr(err.msg, "caps declares cancel") != NULL);
  CU_ASSERT_EQUAL(altar_backend_check_table(&both, &err), ALTAR_OK);
  CU_ASSERT_PTR_NULL(altar_backend_wrap(&op_without_bit, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_backend_register(&bit_without_op), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_backend_register(&op_without_bit), ALTAR_EINVAL);
  CU_ASSERT_PTR_NULL(altar_backend_lookup("caps-op"));
  CU_ASSERT_EQUAL(altar_backend_register(&both), ALTAR_OK);
  CU_ASSERT(altar_registry_unregister(ALTAR_REGISTRY_BACKEND, "caps-both"));
}

/* What a handle declares, it runs; what it dropped, it answers with the
 * default, without calling into the backend. */
static void test_handle_runs_what_it_declares(void) {
  altar_error_t err = {0};
  altar_backend_t *be = altar_backend_open(&both, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  CU_ASSERT_EQUAL(altar_backend_caps(be), ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT);
  CU_ASSERT_EQUAL(altar_backend_require(be, ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT, NULL, &err), ALTAR_OK);
  altar_handle_t h = {0};
  altar_status_t st[1];
  altar_handle_init(&h, "caps-both", "t1");
  cancels = awaits = 0;
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), ALTAR_OK);
  CU_ASSERT_EQUAL(altar_backend_await_completion(be, &h, 1, st, &err), ALTAR_OK);
  altar_status_clear(&st[0]);
  CU_ASSERT_EQUAL(cancels, 1);
  CU_ASSERT_EQUAL(awaits, 1);
  /* As an open does when the platform lacks what the table declares. */
  altar_backend_drop_caps(be, ALTAR_BACKEND_CAP_AWAIT | ALTAR_BACKEND_CAP_CANCEL);
  CU_ASSERT_EQUAL(altar_backend_caps(be), 0);
  CU_ASSERT_EQUAL(altar_backend_await_completion(be, &h, 1, st, &err), ALTAR_ENOTSUP);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend 'caps-both' cannot await completion (await_completion); poll instead");
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), ALTAR_OK); /* the contract's default: nothing to stop */
  CU_ASSERT_EQUAL(cancels, 1);
  CU_ASSERT_EQUAL(awaits, 1);
  CU_ASSERT_EQUAL(altar_backend_require(be, ALTAR_BACKEND_CAP_CANCEL, "altar cancel needs", &err), ALTAR_ENOTSUP);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend 'caps-both' cannot stop running tasks (cancel), which altar cancel needs");
  /* The table itself is untouched: another handle has it all. */
  CU_ASSERT_EQUAL(altar_backend_ops_caps(&both), ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT);
  altar_handle_clear(&h);
  altar_backend_close(be);
  /* A bit of behaviour only, no operation: declared and asked the same way. */
  be = altar_backend_open(&plain, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  CU_ASSERT_EQUAL(altar_backend_require(be, ALTAR_BACKEND_CAP_ADOPT, NULL, &err), ALTAR_OK);
  CU_ASSERT_EQUAL(altar_backend_require(be, ALTAR_BACKEND_CAP_LOGS, NULL, &err), ALTAR_ENOTSUP);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend 'caps-plain' cannot keep task output under its data root (altar logs)");
  /* kept_logs left out: the default says so, with every figure zero. */
  altar_kept_logs_t kept;
  memset(&kept, 0xff, sizeof kept);
  CU_ASSERT_EQUAL(altar_backend_kept_logs(be, &kept), ALTAR_ENOTSUP);
  CU_ASSERT_EQUAL(kept.dirs, 0);
  CU_ASSERT_EQUAL(kept.prune_next_bytes, 0);
  CU_ASSERT_EQUAL(kept.keep_bytes, 0);
  altar_backend_close(be);
}

static void test_every_bit_has_a_name(void) {
  for (unsigned bit = 1; bit & ALTAR_BACKEND_CAPS_ALL; bit <<= 1)
    CU_ASSERT_STRING_NOT_EQUAL(altar_backend_cap_name(bit), "?");
  CU_ASSERT_STRING_EQUAL(altar_backend_cap_name(ALTAR_BACKEND_CAPS_ALL + 1), "?");
  CU_ASSERT_STRING_EQUAL(altar_backend_cap_name(ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT), "?");
}

/* What each built-in declares, as docs/backends.md's table says (its
 * operations agreeing is checked at registration). */
static void test_builtins_declare_what_they_do(void) {
  struct {
    const altar_backend_ops_t *ops;
    unsigned caps;
  } want[] = {
      {&altar_backend_process_ops, ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL |
                                       ALTAR_BACKEND_CAP_WAIT_CHANGE | ALTAR_BACKEND_CAP_ADOPT |
                                       ALTAR_BACKEND_CAP_LOGS},
      {&altar_backend_docker_ops,
       ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_ADOPT | ALTAR_BACKEND_CAP_LOGS},
      {&altar_backend_kubernetes_ops, ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_POOLS | ALTAR_BACKEND_CAP_CANCEL |
                                          ALTAR_BACKEND_CAP_WAIT_CHANGE | ALTAR_BACKEND_CAP_SUBMIT_START |
                                          ALTAR_BACKEND_CAP_ADOPT},
      {&altar_backend_modal_ops, ALTAR_BACKEND_CAP_POOLS | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_ADOPT},
      {&altar_backend_python_ops,
       ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_AWAIT | ALTAR_BACKEND_CAP_RECOVER},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    CU_ASSERT_EQUAL(altar_backend_ops_caps(want[i].ops), want[i].caps);
    CU_ASSERT_EQUAL(altar_backend_register(want[i].ops), ALTAR_OK);
  }
}

static void add(void) {
  ALTAR_SUITE("backend_caps", NULL, NULL);
  ALTAR_TEST(test_disagreeing_tables_are_refused);
  ALTAR_TEST(test_handle_runs_what_it_declares);
  ALTAR_TEST(test_every_bit_has_a_name);
  ALTAR_TEST(test_builtins_declare_what_they_do);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
