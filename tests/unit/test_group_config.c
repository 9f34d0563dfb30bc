/* Group specs from YAML: the shape from DESIGN.md, both a whole config and a
 * bare groups file, and errors that name file, line and key. */
#include "altar/groups.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load(const char *yaml, altar_group_specs_t *s, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  return altar_group_specs_load_string(yaml, strlen(yaml), "groups.yaml", s, err);
}

static void test_full_config(void) {
  const char *y = "transport:\n"
                  "  name: local\n"
                  "  dir: ./var/log\n"
                  "ledger: {path: ./var/ledger}\n"
                  "groups:                            # one entry per kind\n"
                  "  chrombpnet:\n"
                  "    group_by: [job_id, model_id]\n"
                  "    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n"
                  "    on_failed: retry\n"
                  "    max_restarts: 2\n"
                  "  score:\n"
                  "    group_by: [job_id]\n"
                  "    ready_when: single\n"
                  "  ens:\n"
                  "    group_by: [job_id]\n"
                  "    ready_when: {all_label_values: {label: fold, values: ['0', '1', '2']}}\n"
                  "    on_ready: {publish: altar.ens.ready}\n"
                  "    on_failed: {dead_letter: altar.ens.dead}\n"
                  "  pairs:\n"
                  "    group_by: []\n"
                  "    ready_when: {count_at_least: 2}\n"
                  "    on_failed: defer\n"
                  "  folds:\n"
                  "    group_by: [job_id]\n"
                  "    ready_when: {all_folds: 5}\n"
                  "    on_failed: dead_letter\n"
                  "  exp:\n"
                  "    group_by: [job_id]\n"
                  "    ready_when: {all_expected_folds: {count_label: n, default: 3}}\n";
  altar_group_specs_t s;
  altar_error_t err = {0};
  int rc = load(y, &s, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(s.n, 6);
  const altar_group_spec_t *g = altar_group_specs_find(&s, "chrombpnet");
  CU_ASSERT_FATAL(g != NULL);
  CU_ASSERT_EQUAL(g->group_by.n, 2);
  CU_ASSERT_STRING_EQUAL(g->group_by.labels[1], "model_id");
  CU_ASSERT_EQUAL(g->ready_when.rule, ALTAR_READY_ALL_EXPECTED_FOLDS);
  CU_ASSERT_STRING_EQUAL(g->ready_when.count_label, "num_folds");
  CU_ASSERT_FALSE(g->ready_when.default_count.set);
  CU_ASSERT_EQUAL(g->failed_policy, ALTAR_ON_FAILED_RETRY);
  CU_ASSERT_EQUAL(g->max_restarts, 2);
  CU_ASSERT_EQUAL(g->config_line, 7);
  g = altar_group_specs_find(&s, "score");
  CU_ASSERT_EQUAL(g->ready_when.rule, ALTAR_READY_SINGLE);
  CU_ASSERT_EQUAL(g->failed_policy, ALTAR_ON_FAILED_NONE); /* no on_failed: stalls are reported */
  g = altar_group_specs_find(&s, "ens");
  CU_ASSERT_EQUAL(g->ready_when.rule, ALTAR_READY_ALL_LABEL_VALUES);
  CU_ASSERT_EQUAL(g->ready_when.n_values, 3);
  CU_ASSERT_STRING_EQUAL(g->ready_topic, "altar.ens.ready");
  CU_ASSERT_STRING_EQUAL(g->dead_topic, "altar.ens.dead");
  CU_ASSERT_EQUAL(g->failed_policy, ALTAR_ON_FAILED_DEAD_LETTER);
  g = altar_group_specs_find(&s, "pairs");
  CU_ASSERT_EQUAL(g->ready_when.rule, ALTAR_READY_COUNT_AT_LEAST);
  CU_ASSERT_EQUAL(g->ready_when.n, 2);
  CU_ASSERT_EQUAL(g->group_by.n, 0);
  CU_ASSERT_EQUAL(g->failed_policy, ALTAR_ON_FAILED_DEFER);
  g = altar_group_specs_find(&s, "folds");
  CU_ASSERT_EQUAL(g->ready_when.rule, ALTAR_READY_ALL_FOLDS);
  CU_ASSERT_EQUAL(g->ready_when.n, 5);
  g = altar_group_specs_find(&s, "exp");
  CU_ASSERT_STRING_EQUAL(g->ready_when.label, "fold");
  CU_ASSERT(g->ready_when.default_count.set && g->ready_when.default_count.v == 3);
  altar_group_specs_clear(&s);
}

static void test_bare_file_and_empty(void) {
  altar_group_specs_t s;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(load("score:\n  group_by: [job_id]\n  ready_when: {single: }\n", &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 1);
  altar_group_specs_clear(&s);
  CU_ASSERT_EQUAL(load("", &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 0);
  CU_ASSERT_EQUAL(load("ledger: {path: x}\ngroups:\n", &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 0);
  /* A whole config without a groups key declares no groups (not a bare groups file). */
  CU_ASSERT_EQUAL(load("transport: {name: local, dir: /tmp/x}\nbackend: {name: process}\n", &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 0);
  altar_group_specs_clear(&s);
  /* From a file on disk. */
  char *dir = altar_test_tmpdir("gcfg");
  char path[512];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  const char *y = "groups:\n  score:\n    group_by: [job_id]\n    ready_when: single\n";
  altar_test_write_file(path, y, strlen(y));
  memset(&s, 0, sizeof s);
  CU_ASSERT_EQUAL(altar_group_specs_load_file(path, &s, &err), 0);
  CU_ASSERT_EQUAL(s.n, 1);
  altar_group_specs_clear(&s);
  snprintf(path, sizeof path, "%s/missing.yaml", dir);
  CU_ASSERT_EQUAL(altar_group_specs_load_file(path, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "missing.yaml") != NULL);
  altar_test_rmtree(dir);
  free(dir);
}

/* Each bad file must fail with ECONFIG and a message holding every needle. */
static void bad(const char *yaml, const char *n1, const char *n2) {
  altar_group_specs_t s;
  altar_error_t err = {0};
  int rc = load(yaml, &s, &err);
  CU_ASSERT_EQUAL(rc, ALTAR_ECONFIG);
  if (n1 && !strstr(err.msg, n1)) fprintf(stderr, "want '%s' in: %s\n", n1, err.msg);
  if (n2 && !strstr(err.msg, n2)) fprintf(stderr, "want '%s' in: %s\n", n2, err.msg);
  CU_ASSERT(n1 == NULL || strstr(err.msg, n1) != NULL);
  CU_ASSERT(n2 == NULL || strstr(err.msg, n2) != NULL);
  CU_ASSERT(strncmp(err.msg, "groups.yaml:", 12) == 0);
  altar_group_specs_clear(&s);
}

static void test_errors_name_file_line_key(void) {
  bad("groups:\n  score:\n    group_by: [job_id]\n    ready_when: {al_folds: 3}\n",
      "groups.yaml:4: groups.score.ready_when", "unknown rule 'al_folds'");
  bad("groups:\n  score:\n    group_by: [job_id]\n    ready_when: sometimes\n", ":4: groups.score.ready_when",
      "unknown rule 'sometimes'");
  bad("groups:\n  score:\n    ready_when: single\n", ":3: groups.score.group_by", "missing");
  bad("groups:\n  score:\n    group_by: [job_id]\n", "groups.score.ready_when", "missing");
  bad("groups:\n  score:\n    group_by: [job_id]\n    ready_when: single\n    on_faild: defer\n", ":5: groups.score",
      "unknown key 'on_faild' (did you mean \"on_failed\"?)");
  bad("groups:\n  score:\n    group_by: [job_id]\n    ready_when: single\n    on_failed: explode\n",
      ":5: groups.score.on_failed", "unknown policy 'explode'");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: {all_expected_folds: {label: fold}}\n",
      "groups.t.ready_when.all_expected_folds.count_label", "missing");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: {all_label_values: {label: fold}}\n",
      "groups.t.ready_when.all_label_values.values", "missing");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: {count_at_least: zero}\n",
      ":4: groups.t.ready_when.count_at_least", "expected an integer");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: {count_at_least: 0}\n",
      "groups.t.ready_when.count_at_least", "must be in 1..");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: {all_folds: 3, single: }\n", "groups.t.ready_when",
      "exactly one rule");
  bad("groups:\n  t:\n    group_by: job_id\n    ready_when: single\n", ":3: groups.t.group_by", "list");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: single\n    on_failed: retry\n", "groups.t.max_restarts",
      ">= 1");
  bad("groups:\n  t:\n    group_by: [job_id]\n    ready_when: single\n    max_restarts: -1\n",
      ":5: groups.t.max_restarts", "must be in 0..");
  bad("groups:\n  t: [1, 2]\n", ":2: groups.t", "expected a mapping");
  bad("groups: [a, b]\n", ":1: groups", "mapping");
  bad("- just\n- a list\n", ":1:", "mapping");
  bad("groups:\n  t: {group_by: [a]\n", "groups.yaml:", "YAML");
  bad("t:\n  group_by: [a]\n  ready_when: single\n  on_ready: {post: x}\n", ":4: t.on_ready", "unknown key 'post'");
}

static void add(void) {
  ALTAR_SUITE("group_config", NULL, NULL);
  ALTAR_TEST(test_full_config);
  ALTAR_TEST(test_bare_file_and_empty);
  ALTAR_TEST(test_errors_name_file_line_key);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
