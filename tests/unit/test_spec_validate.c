/* altar_spec_validate: each rule fails with a message naming the field. */
#include "altar/spec.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOOD_DIGEST "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"

static altar_spec_t *good(void) {
  altar_spec_t *s = altar_spec_new("score", "img:1");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_add_arg(s, "python");
  altar_spec_add_arg(s, ""); /* an empty argument is legal */
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_set_label(s, "note", "");
  altar_spec_add_input(s, "gs://b/m.tar", "models/m.tar", NULL, GOOD_DIGEST);
  altar_spec_add_input(s, "file:///data/p.bed", "jobs/j1/p.bed", "m", NULL);
  altar_spec_add_output(s, "gs://b/out", "jobs/j1/out.tsv");
  return s;
}

/* Runs validate and checks the error code and exact message. */
static void expect(altar_spec_t *s, const char *msg) {
  altar_error_t err = {0};
  int rc = altar_spec_validate(s, &err);
  if (!msg) {
    if (rc) fprintf(stderr, "unexpected: %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, 0);
  } else {
    CU_ASSERT_EQUAL(rc, ALTAR_EINVAL);
    if (strcmp(err.msg, msg)) fprintf(stderr, "got '%s'\nwant '%s'\n", err.msg, msg);
    CU_ASSERT_STRING_EQUAL(err.msg, msg);
  }
  altar_spec_free(s);
}

static void test_valid(void) {
  expect(good(), NULL);
  altar_spec_t *s = good();
  s->timeout_s = (altar_opt_i64_t){true, 60};
  s->resources.memory_mb = (altar_opt_i64_t){true, 512};
  altar_spec_set_gpu(s, "a100", 2);
  expect(s, NULL);
}

static void test_required_strings(void) {
  altar_spec_t *s = good();
  free(s->kind);
  s->kind = strdup("");
  expect(s, "kind: must not be empty");
  s = good();
  free(s->image);
  s->image = NULL;
  expect(s, "image: required");
  s = altar_spec_new("k", "i");
  expect(s, "command: must have at least one element");
  s = good();
  free(s->command[0]);
  s->command[0] = strdup("");
  expect(s, "command[0]: must not be empty");
}

static void test_transfers(void) {
  altar_spec_t *s = good();
  free(s->inputs[1].digest);
  s->inputs[1].digest = strdup("sha256:ABC");
  expect(s, "inputs[1].digest: malformed (want sha256:<64 lowercase hex>)");
  s = good();
  free(s->inputs[0].digest);
  s->inputs[0].digest = strdup(&GOOD_DIGEST[7]); /* bare hex */
  expect(s, "inputs[0].digest: malformed (want sha256:<64 lowercase hex>)");
  s = good();
  free(s->inputs[0].logical_path);
  s->inputs[0].logical_path = strdup("a/../../etc/passwd");
  expect(s, "inputs[0].logical_path: logical path 'a/../../etc/passwd': '..' climbs out of the root");
  s = good();
  free(s->outputs[0].logical_path);
  s->outputs[0].logical_path = strdup("/etc/passwd");
  expect(s, "outputs[0].logical_path: logical path '/etc/passwd': absolute (must be relative to the root)");
  s = good();
  free(s->outputs[0].uri);
  s->outputs[0].uri = strdup("");
  expect(s, "outputs[0].uri: must not be empty");
  s = good();
  free(s->inputs[1].logical_path);
  s->inputs[1].logical_path = NULL;
  expect(s, "inputs[1].logical_path: required");
}

static void test_numbers(void) {
  altar_spec_t *s = good();
  s->timeout_s = (altar_opt_i64_t){true, 0};
  expect(s, "timeout_s: 0, must be positive when set");
  s = good();
  s->timeout_s = (altar_opt_i64_t){true, -5};
  expect(s, "timeout_s: -5, must be positive when set");
  s = good();
  s->resources.count = 0;
  expect(s, "resources.count: 0, must be at least 1");
  s = good();
  s->resources.memory_mb = (altar_opt_i64_t){true, -1};
  expect(s, "resources.memory_mb: -1, must be positive when set");
}

static void test_labels_and_bounds(void) {
  altar_spec_t *s = good();
  altar_spec_set_label(s, "", "x");
  expect(s, "labels key #0: must not be empty");
  s = good();
  size_t n = ALTAR_MAX_STRING + 1;
  char *big = malloc(n + 1);
  memset(big, 'a', n);
  big[n] = '\0';
  altar_spec_add_arg(s, big);
  expect(s, "command[2]: longer than 65536 bytes");
  s = good();
  free(s->image);
  s->image = big;
  expect(s, "image: longer than 65536 bytes");
  s = good();
  for (unsigned i = 0; i <= ALTAR_MAX_MAP; i++) {
    char k[32];
    snprintf(k, sizeof k, "k%u", i);
    altar_spec_set_label(s, k, "v");
  }
  expect(s, "labels: 1027 entries, more than 1024");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_spec_validate(NULL, &err), ALTAR_EINVAL);
}

static void add(void) {
  ALTAR_SUITE("spec_validate", NULL, NULL);
  ALTAR_TEST(test_valid);
  ALTAR_TEST(test_required_strings);
  ALTAR_TEST(test_transfers);
  ALTAR_TEST(test_numbers);
  ALTAR_TEST(test_labels_and_bounds);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
