/* Strict reading of what a person typed: "did you mean" suggestions, unknown
 * spec keys named with their line, JSON syntax errors at their real line
 * (a trailing comma on the line it is on), and specs parsed by the
 * JobQueue the same way. */
#include "altar/json_pos.h"
#include "altar/spec_keys.h"
#include "altar/suggest.h"
#include "altar/task.h"
#include "producer/job_queue.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void test_suggest(void) {
  static const char *const keys[] = {"command", "image", "inputs", "kind", "labels", "outputs", "timeout_s", NULL};
  CU_ASSERT_STRING_EQUAL(altar_suggest("timeout", keys), "timeout_s");
  CU_ASSERT_STRING_EQUAL(altar_suggest("output", keys), "outputs");
  CU_ASSERT_STRING_EQUAL(altar_suggest("imgae", keys), "image"); /* adjacent swap */
  CU_ASSERT_STRING_EQUAL(altar_suggest("comand", keys), "command");
  CU_ASSERT_PTR_NULL(altar_suggest("zzzzzz", keys));
  CU_ASSERT_PTR_NULL(altar_suggest("", keys));
  static const char *const local[] = {"dir", "fsync", NULL};
  CU_ASSERT_STRING_EQUAL(altar_suggest("dri", local), "dir");
  char hint[64];
  altar_suggest_hint("kidn", keys, hint, sizeof hint);
  CU_ASSERT_STRING_EQUAL(hint, " (did you mean \"kind\"?)");
  altar_suggest_hint("qqqqqqqq", keys, hint, sizeof hint);
  CU_ASSERT_STRING_EQUAL(hint, "");
}

static void test_spec_keys(void) {
  altar_error_t err = {0};
  const char *ok = "{\"kind\": \"k\", \"image\": \"i\", \"labels\": {\"anything\": \"goes\"},\n"
                   " \"outputs\": [{\"uri\": \"file:///x\", \"logical_path\": \"y\"}], \"resources\": {\"count\": 1}}";
  CU_ASSERT_EQUAL(altar_spec_json_check_keys(ok, strlen(ok), "f.json", 1, &err), 0);
  const char *top = "{\n  \"kind\": \"k\",\n  \"timeout\": 1\n}\n";
  CU_ASSERT_EQUAL(altar_spec_json_check_keys(top, strlen(top), "f.json", 1, &err), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "f.json:3: spec: unknown key \"timeout\" (did you mean \"timeout_s\"?)");
  const char *nested = "{\"kind\": \"k\",\n \"outputs\": [{\"uri\": \"u\", \"logical_path\": \"p\"},\n"
                       "  {\"uri\": \"u\", \"logical_pth\": \"p\"}]}";
  CU_ASSERT_EQUAL(altar_spec_json_check_keys(nested, strlen(nested), "f.json", 1, &err), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg,
                         "f.json:3: spec outputs[1]: unknown key \"logical_pth\" (did you mean \"logical_path\"?)");
  const char *res = "[{\"kind\": \"k\"}, {\"kind\": \"k\", \"resources\": {\"gpus\": 1}}]";
  CU_ASSERT_EQUAL(altar_spec_json_check_keys(res, strlen(res), "a.json", 7, &err), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "a.json:7: spec [1].resources: unknown key \"gpus\" (did you mean \"gpu\"?)");
  /* Keys inside strings and free maps are not keys of the spec. */
  const char *quoted = "{\"kind\": \"k\\\"x\", \"labels\": {\"timeout\": \"{\\\"a\\\": 1}\"}}";
  CU_ASSERT_EQUAL(altar_spec_json_check_keys(quoted, strlen(quoted), "q.json", 1, &err), 0);
}

static void test_json_error_position(void) {
  const char *t = "{\n  \"a\": 1,\n  \"b\": 2,\n}\n";
  int line, col;
  bool comma;
  /* jansson stops just past the '}' on line 4. */
  altar_json_error_position(t, strlen(t), (size_t)(strchr(t, '}') - t) + 1, &line, &col, &comma);
  CU_ASSERT_TRUE(comma);
  CU_ASSERT_EQUAL(line, 3);
  CU_ASSERT_EQUAL(col, 9);
}

static void test_parse_reports_real_line(void) {
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  const char *trailing = "{\n  \"kind\": \"shard\",\n  \"image\": \"none\",\n}\n";
  CU_ASSERT_EQUAL(altar__specs_parse(trailing, strlen(trailing), "s.json", &v, &n, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "s.json:3: invalid JSON at line 3 column 18: trailing comma") != NULL);
  const char *typo = "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"a\"]}\n"
                     "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"b\"], \"output\": []}\n";
  CU_ASSERT_EQUAL(altar__specs_parse(typo, strlen(typo), "s.jsonl", &v, &n, &err), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "s.jsonl:2: spec: unknown key \"output\" (did you mean \"outputs\"?)");
  CU_ASSERT_EQUAL(n, 0);
  const char *bad_line = "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"a\"]}\n{\"kind\": }\n";
  CU_ASSERT_EQUAL(altar__specs_parse(bad_line, strlen(bad_line), "s.jsonl", &v, &n, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "s.jsonl:2: invalid JSON at column") != NULL);
}

static void add(void) {
  ALTAR_SUITE("strict_input", NULL, NULL);
  ALTAR_TEST(test_suggest);
  ALTAR_TEST(test_spec_keys);
  ALTAR_TEST(test_json_error_position);
  ALTAR_TEST(test_parse_reports_real_line);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
