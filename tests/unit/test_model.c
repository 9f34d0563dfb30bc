/* The model: constructors, deep copy, equality, free, capacity lookup. */
#include "altar/task.h"
#include "testutil.h"

#include <string.h>

static altar_spec_t *sample_spec(void) {
  altar_spec_t *s = altar_spec_new("chrombpnet", "registry/img:1");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_add_arg(s, "python");
  altar_spec_add_arg(s, "-c");
  altar_spec_set_label(s, "fold", "3");
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_add_input(s, "file:///data/m.tar", "models/m.tar", "m",
                       "sha256:0000000000000000000000000000000000000000000000000000000000000000");
  altar_spec_add_output(s, "file:///out/x", "jobs/j1/x");
  altar_spec_add_avoid_host(s, "node-7");
  altar_spec_set_gpu(s, ALTAR_GPU_POOL_A100, 2);
  s->timeout_s = (altar_opt_i64_t){true, 600};
  s->resources.memory_mb = (altar_opt_i64_t){true, 2048};
  s->plugin_identity = altar_strmap_new();
  altar_strmap_set(s->plugin_identity, "abi", "1");
  return s;
}

static void test_spec_copy_equal(void) {
  altar_spec_t *a = sample_spec();
  altar_spec_t *b = altar_spec_dup(a);
  CU_ASSERT_FATAL(b != NULL);
  CU_ASSERT(altar_spec_equal(a, b));
  CU_ASSERT(a->command[0] != b->command[0]); /* deep, not shared */
  altar_spec_set_label(b, "fold", "4");
  CU_ASSERT(!altar_spec_equal(a, b));
  altar_spec_free(b);
  b = altar_spec_dup(a);
  altar_spec_add_avoid_host(b, "node-8");
  CU_ASSERT(!altar_spec_equal(a, b));
  CU_ASSERT(altar_spec_same_identity(a, b)); /* avoid_hosts is not identity */
  altar_spec_free(a);
  altar_spec_free(b);
}

static void test_spec_defaults(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  CU_ASSERT_STRING_EQUAL(s->kind, "k");
  CU_ASSERT_EQUAL(s->resources.count, 1);
  CU_ASSERT(s->resources.gpu == NULL);
  CU_ASSERT(!s->timeout_s.set);
  CU_ASSERT(s->plugin_identity == NULL);
  altar_spec_free(s);
}

static void test_labels_sorted(void) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "b", "2");
  altar_strmap_set(&m, "a", "1");
  altar_strmap_set(&m, "c", "3");
  altar_strmap_set(&m, "b", "22");
  CU_ASSERT_EQUAL(m.n, 3);
  CU_ASSERT_STRING_EQUAL(m.keys[0], "a");
  CU_ASSERT_STRING_EQUAL(m.keys[2], "c");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&m, "b"), "22");
  CU_ASSERT(altar_strmap_remove(&m, "a"));
  CU_ASSERT(altar_strmap_get(&m, "a") == NULL);
  altar_strmap_clear(&m);
}

static void test_state_names(void) {
  altar_state_t s;
  CU_ASSERT_EQUAL(altar_state_parse("succeeded", &s), 0);
  CU_ASSERT_EQUAL(s, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_STRING_EQUAL(altar_state_name(ALTAR_STATE_FAILED), "failed");
  CU_ASSERT_EQUAL(altar_state_parse("done", &s), ALTAR_EINVAL);
  CU_ASSERT(altar_state_terminal(ALTAR_STATE_FAILED));
  CU_ASSERT(!altar_state_terminal(ALTAR_STATE_RUNNING));
}

static void test_failure(void) {
  altar_failure_t *f = altar_failure_exit(3, "boom", true);
  CU_ASSERT_STRING_EQUAL(f->reason, "exit_3");
  CU_ASSERT(f->exit_code.set && f->exit_code.v == 3);
  altar_failure_t *g = altar_failure_dup(f);
  CU_ASSERT(altar_failure_equal(f, g));
  g->deterministic = false;
  CU_ASSERT(!altar_failure_equal(f, g));
  altar_failure_free(f);
  altar_failure_free(g);
  altar_failure_t *t = altar_failure_new(ALTAR_REASON_TIMEOUT, NULL, false);
  CU_ASSERT(!t->deterministic); /* the safe default */
  CU_ASSERT(!t->exit_code.set);
  altar_failure_free(t);
}

static void test_capacity_free_for(void) {
  altar_capacity_t c;
  altar_capacity_init(&c);
  altar_capacity_set(&c, "normal", 87);
  altar_capacity_set(&c, "a100", 4);
  altar_resources_t cpu = {NULL, 1, {false, 0}};
  altar_resources_t a100 = {"a100", 1, {false, 0}};
  altar_resources_t gpu = {"gpu", 1, {false, 0}};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&c, &cpu), 87);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&c, &a100), 4);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&c, &gpu), 0); /* "gpu" pool not advertised */
  altar_capacity_t d;
  altar_capacity_copy(&d, &c);
  CU_ASSERT(altar_capacity_equal(&c, &d));
  altar_capacity_clear(&c);
  altar_capacity_clear(&d);
  altar_capacity_init(&c);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&c, &cpu), 0); /* empty report */
}

static void test_handle_and_record(void) {
  altar_spec_t *s = sample_spec();
  altar_handle_t h;
  CU_ASSERT_EQUAL(altar_handle_init_for_spec(&h, "process", "t-1", s), 0);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&h.labels, "fold"), "3");
  CU_ASSERT(h.plugin_identity && !strcmp(altar_strmap_get(h.plugin_identity, "abi"), "1"));
  altar_record_t r, r2;
  CU_ASSERT_EQUAL(altar_record_init(&r, &h, "chrombpnet", s), 0);
  CU_ASSERT_EQUAL(r.state, ALTAR_STATE_PENDING);
  r.state = ALTAR_STATE_FAILED;
  r.failure = altar_failure_new(ALTAR_REASON_OOM_KILLED, NULL, false);
  r.restart_count = 2;
  CU_ASSERT_EQUAL(altar_record_copy(&r2, &r), 0);
  CU_ASSERT(altar_record_equal(&r, &r2));
  r2.consumed = true;
  CU_ASSERT(!altar_record_equal(&r, &r2));
  altar_status_t st;
  CU_ASSERT_EQUAL(altar_status_init(&st, &h, ALTAR_STATE_FAILED, altar_failure_dup(r.failure)), 0);
  altar_status_t st2;
  altar_status_copy(&st2, &st);
  CU_ASSERT(altar_status_equal(&st, &st2));
  altar_status_clear(&st);
  altar_status_clear(&st2);
  altar_record_clear(&r);
  altar_record_clear(&r2);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* A compact copy equals its source, keeps external_id right after backend
 * (the ledgers' record key), and reads like any map. */
static void test_handle_compact_copy(void) {
  for (int variant = 0; variant < 3; variant++) {
    altar_handle_t h, c;
    CU_ASSERT_EQUAL_FATAL(altar_handle_init(&h, "process", variant == 2 ? "" : "task-7"), 0);
    if (variant >= 1) {
      altar_strmap_set(&h.labels, "fold", "3");
      altar_strmap_set(&h.labels, "group", "g-1");
      altar_strmap_set(&h.labels, "", "empty key");
      h.plugin_identity = altar_strmap_new();
      altar_strmap_set(h.plugin_identity, "name", "plug");
    }
    CU_ASSERT_EQUAL_FATAL(altar_handle_copy_compact(&c, &h), 0);
    CU_ASSERT_PTR_NOT_NULL(c.block);
    CU_ASSERT(altar_handle_equal(&c, &h));
    CU_ASSERT_PTR_EQUAL(c.external_id, c.backend + strlen(c.backend) + 1);
    CU_ASSERT_EQUAL(c.labels.n, h.labels.n);
    if (variant >= 1) {
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(&c.labels, "group"), "g-1");
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(&c.labels, ""), "empty key");
      CU_ASSERT_PTR_NULL(altar_strmap_get(&c.labels, "missing"));
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(c.plugin_identity, "name"), "plug");
    } else {
      CU_ASSERT_PTR_NULL(c.plugin_identity);
    }
    altar_handle_t again; /* an ordinary copy of a compact one */
    CU_ASSERT_EQUAL(altar_handle_copy(&again, &c), 0);
    CU_ASSERT(altar_handle_equal(&again, &h));
    CU_ASSERT_PTR_NULL(again.block);
    altar_handle_clear(&again);
    altar_handle_clear(&c);
    CU_ASSERT_PTR_NULL(c.block);
    CU_ASSERT_PTR_NULL(c.backend);
    altar_handle_clear(&h);
  }
}

static void test_error_names(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_error_set(&err, ALTAR_EINVAL, "spec.%s: bad", "kind"), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "spec.kind: bad");
  altar_error_prefix(&err, "line %d", 3);
  CU_ASSERT_STRING_EQUAL(err.msg, "line 3: spec.kind: bad");
  CU_ASSERT_STRING_EQUAL(altar_err_name(ALTAR_EINTEGRITY), "EINTEGRITY");
  CU_ASSERT_STRING_EQUAL(altar_err_name(12345), "UNKNOWN");
}

static void add(void) {
  ALTAR_SUITE("model", NULL, NULL);
  ALTAR_TEST(test_spec_copy_equal);
  ALTAR_TEST(test_spec_defaults);
  ALTAR_TEST(test_labels_sorted);
  ALTAR_TEST(test_state_names);
  ALTAR_TEST(test_failure);
  ALTAR_TEST(test_capacity_free_for);
  ALTAR_TEST(test_handle_and_record);
  ALTAR_TEST(test_handle_compact_copy);
  ALTAR_TEST(test_error_names);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
