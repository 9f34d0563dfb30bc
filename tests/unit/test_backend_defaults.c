/* ExecutionBackend: the contract's defaults, construction, the registry, the
 * reason table, and the contract suite's own rejection of a backend that
 * declares no digest verification. */
#include "altar/plugin/backend.h"
#include "altar/registry.h"
#include "backend_contract.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* ---- a minimal backend: only what is required ---------------------------- */

static int dummy_impl_token;
static bool poll_should_fail;

static int dummy_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  if (cfg && altar_strmap_get(cfg, "fail")) return altar_error_set(err, ALTAR_ECONFIG, "backend.fail: asked to fail");
  altar_backend_set_impl(be, &dummy_impl_token);
  return 0;
}
static int closes; /* how many times dummy_close ran */
static void dummy_close(altar_backend_t *be) {
  closes++;
  altar_backend_set_impl(be, NULL);
}
static int dummy_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  if (!strcmp(spec->kind, "refuse")) {
    /* Fill something, then fail: the wrapper must clear it. */
    altar_handle_init(ph, altar_backend_name(be), "half-made");
    return altar_error_set(err, ALTAR_EBACKEND, "refused");
  }
  return altar_handle_init_for_spec(ph, altar_backend_name(be), "t1", spec);
}
static int dummy_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst,
                      altar_error_t *err) {
  (void)be;
  for (size_t i = 0; i < n; i++) altar_status_init(&pst[i], &hs[i], ALTAR_STATE_RUNNING, NULL);
  if (poll_should_fail) return altar_error_set(err, ALTAR_EBACKEND, "platform unreachable");
  return 0;
}

static const altar_backend_ops_t dummy_none = {
    .name = "dummy-none",
    .input_digest_verification = ALTAR_VERIFY_NONE,
    .open = dummy_open,
    .close = dummy_close,
    .submit = dummy_submit,
    .poll = dummy_poll,
};
static const altar_backend_ops_t dummy_task = {
    .name = "dummy-task",
    .input_digest_verification = ALTAR_VERIFY_TASK,
    .open = dummy_open,
    .close = dummy_close,
    .submit = dummy_submit,
    .poll = dummy_poll,
};
static const altar_backend_ops_t dummy_no_poll = {
    .name = "dummy-no-poll",
    .input_digest_verification = ALTAR_VERIFY_TASK,
    .open = dummy_open,
    .close = dummy_close,
    .submit = dummy_submit,
};

static altar_backend_t *make(const altar_backend_ops_t *ops) {
  altar_error_t err = {0};
  altar_backend_t *be = altar_backend_open(ops, NULL, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  return be;
}

static void test_suite_rejects_no_verification(void) {
  altar_backend_t *be = make(&dummy_none);
  char why[256] = "";
  CU_ASSERT_EQUAL(altar_contract_check_declarations(be, why, sizeof why), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "'none'"));
  altar_backend_close(be);
  be = make(&dummy_task);
  CU_ASSERT_EQUAL(altar_contract_check_declarations(be, why, sizeof why), 0);
  altar_backend_close(be);
  CU_ASSERT_EQUAL(altar_contract_check_declarations(NULL, why, sizeof why), -1);
}

static void test_defaults(void) {
  altar_backend_t *be = make(&dummy_task);
  altar_error_t err = {0};
  altar_capacity_t cap;
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  CU_ASSERT_EQUAL(cap.n, 0); /* no fixed slots */
  altar_resources_t cpu = {.count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 0);
  altar_capacity_clear(&cap);
  const char *names[4];
  CU_ASSERT_EQUAL(altar_backend_pools(be, names, 4), 0); /* no mapping: capacity's pools stand */
  altar_resources_t gpu = {.gpu = "a100", .count = 2};
  CU_ASSERT_EQUAL(altar_backend_check_resources(be, &gpu, &err), 0);
  altar_transfer_t t = {.uri = "file:///nowhere", .logical_path = "jobs/x"};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &t, 1, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_collect_outputs(be, &t, 1, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "");
  char *out = NULL;
  CU_ASSERT_EQUAL(altar_backend_resolve_path(be, "jobs/j1/x", &out, &err), 0);
  if (out) CU_ASSERT_STRING_EQUAL(out, "jobs/j1/x");
  free(out);
  CU_ASSERT_EQUAL(altar_backend_resolve_path(be, "gs://bucket/a//b", &out, &err), 0);
  if (out) CU_ASSERT_STRING_EQUAL(out, "gs://bucket/a//b"); /* identity keeps URIs */
  free(out);
  altar_handle_t h;
  altar_handle_init(&h, "dummy-task", "t1");
  altar_status_t st;
  CU_ASSERT_EQUAL(altar_backend_await_completion(be, &h, 1, &st, &err), ALTAR_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "await_completion"));
  CU_ASSERT_PTR_NULL(st.handle.external_id); /* cleared on error */
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_handle_t *hs = (altar_handle_t *)&h;
  size_t n = 5;
  CU_ASSERT_EQUAL(altar_backend_recover(be, NULL, 0, NULL, 0, &hs, &n, &err), 0);
  CU_ASSERT_PTR_NULL(hs);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT_EQUAL(altar_backend_verification(be), ALTAR_VERIFY_TASK);
  CU_ASSERT_STRING_EQUAL(altar_verification_name(ALTAR_VERIFY_STAGING), "staging");
  CU_ASSERT_STRING_EQUAL(altar_verification_name(ALTAR_VERIFY_NONE), "none");
  altar_handle_clear(&h);
  altar_backend_close(be);
}

static void test_wrappers_clean_up_on_error(void) {
  altar_backend_t *be = make(&dummy_task);
  altar_error_t err = {0};
  altar_spec_t *s = altar_spec_new("refuse", "i");
  altar_handle_t h;
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NULL(h.external_id);
  altar_spec_free(s);
  s = altar_spec_new("ok", "i");
  altar_spec_set_label(s, "fold", "1");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_STRING_EQUAL(h.backend, "dummy-task");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&h.labels, "fold"), "1");
  altar_status_t st[2];
  altar_handle_t hs[2];
  altar_handle_copy(&hs[0], &h);
  altar_handle_copy(&hs[1], &h);
  poll_should_fail = true;
  CU_ASSERT_EQUAL(altar_backend_poll(be, hs, 2, st, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NULL(st[0].handle.external_id);
  CU_ASSERT_PTR_NULL(st[1].handle.external_id);
  poll_should_fail = false;
  CU_ASSERT_EQUAL(altar_backend_poll(be, hs, 2, st, &err), 0);
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_RUNNING);
  altar_status_clear(&st[0]);
  altar_status_clear(&st[1]);
  altar_handle_clear(&hs[0]);
  altar_handle_clear(&hs[1]);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
}

static void test_open_errors(void) {
  altar_error_t err = {0};
  CU_ASSERT_PTR_NULL(altar_backend_open(&dummy_no_poll, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'poll'"));
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "fail", "1");
  CU_ASSERT_PTR_NULL(altar_backend_open(&dummy_task, &cfg, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend.fail"));
  altar_strmap_clear(&cfg);
  altar_backend_close(NULL);
}

/* wrap fills the same defaults as open, never calls open, and hands the impl
 * to close when it refuses the table. */
static void test_wrap(void) {
  altar_error_t err = {0};
  static int token;
  closes = 0;
  altar_backend_t *be = altar_backend_wrap(&dummy_task, &token, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  CU_ASSERT_PTR_EQUAL(altar_backend_impl(be), &token);
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "");
  CU_ASSERT_EQUAL(altar_backend_wait_change(be, 0), ALTAR_ENOTSUP);
  altar_backend_close(be);
  CU_ASSERT_EQUAL(closes, 1);
  CU_ASSERT_PTR_NULL(altar_backend_wrap(&dummy_no_poll, &token, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'poll'"));
  CU_ASSERT_EQUAL(closes, 2); /* the impl was not leaked */
}

static void test_registry(void) {
  CU_ASSERT_EQUAL(altar_backend_register(&dummy_task), 0);
  CU_ASSERT_EQUAL(altar_backend_register(&dummy_task), 0); /* idempotent */
  CU_ASSERT_EQUAL(altar_backend_register_alias("dummy-alias", &dummy_task), 0);
  CU_ASSERT_NOT_EQUAL(altar_backend_register_alias("dummy-alias", &dummy_none), 0);
  CU_ASSERT_NOT_EQUAL(altar_backend_register(&dummy_no_poll), 0); /* lacks poll */
  CU_ASSERT_PTR_EQUAL(altar_backend_lookup("dummy-task"), &dummy_task);
  CU_ASSERT_PTR_EQUAL(altar_backend_lookup("dummy-alias"), &dummy_task);
  CU_ASSERT_PTR_NULL(altar_backend_lookup("nope"));
  const char *names[8];
  size_t n = altar_backend_names(names, 8);
  CU_ASSERT(n >= 2);
  altar_error_t err = {0};
  altar_backend_t *be = altar_backend_open_by_name("dummy-alias", NULL, &err);
  CU_ASSERT_PTR_NOT_NULL(be);
  if (be) CU_ASSERT_STRING_EQUAL(altar_backend_name(be), "dummy-task");
  altar_backend_close(be);
  CU_ASSERT_PTR_NULL(altar_backend_open_by_name("nope", NULL, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nope"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "dummy-task")); /* lists what exists */
  altar_registry_unregister(ALTAR_REGISTRY_BACKEND, "dummy-task");
  altar_registry_unregister(ALTAR_REGISTRY_BACKEND, "dummy-alias");
}

static void test_reason_table(void) {
  CU_ASSERT_TRUE(altar_reason_deterministic("exit_3"));
  CU_ASSERT_TRUE(altar_reason_deterministic("exit_0"));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_TIMEOUT));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_OOM_KILLED));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_CONTAINER_MISSING));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_INPUT_DIGEST_MISMATCH));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_JOB_FAILED));
  CU_ASSERT_FALSE(altar_reason_deterministic("exit_"));
  CU_ASSERT_FALSE(altar_reason_deterministic("exit_4x"));
  CU_ASSERT_FALSE(altar_reason_deterministic("image_pull"));
  CU_ASSERT_FALSE(altar_reason_deterministic(NULL));
  altar_failure_t *f = altar_failure_for_reason("exit_7", "boom");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_TRUE(f->deterministic);
  CU_ASSERT_TRUE(f->exit_code.set);
  CU_ASSERT_EQUAL(f->exit_code.v, 7);
  altar_failure_free(f);
  f = altar_failure_for_reason(ALTAR_REASON_OOM_KILLED, NULL);
  CU_ASSERT_FALSE(f->deterministic);
  CU_ASSERT_FALSE(f->exit_code.set);
  altar_failure_free(f);
  /* A worker's own codes for a job that never started. */
  CU_ASSERT_TRUE(altar_reason_deterministic(ALTAR_REASON_INVALID_SPEC));
  CU_ASSERT_FALSE(altar_reason_deterministic(ALTAR_REASON_SUBMIT_FAILED));
}

/* A staging or submit error names the same reason a task-side check would,
 * so both read one row of the table. */
static void test_reason_for_start_error(void) {
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_EINTEGRITY), ALTAR_REASON_INPUT_DIGEST_MISMATCH);
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_EINVAL), ALTAR_REASON_INVALID_SPEC);
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_EPATH), ALTAR_REASON_INVALID_SPEC);
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_EIO), ALTAR_REASON_SUBMIT_FAILED);
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_ESTORAGE), ALTAR_REASON_SUBMIT_FAILED);
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(ALTAR_EBACKEND), ALTAR_REASON_SUBMIT_FAILED);
}

static void add(void) {
  ALTAR_SUITE("backend_defaults", NULL, NULL);
  ALTAR_TEST(test_suite_rejects_no_verification);
  ALTAR_TEST(test_defaults);
  ALTAR_TEST(test_wrappers_clean_up_on_error);
  ALTAR_TEST(test_open_errors);
  ALTAR_TEST(test_wrap);
  ALTAR_TEST(test_registry);
  ALTAR_TEST(test_reason_table);
  ALTAR_TEST(test_reason_for_start_error);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
