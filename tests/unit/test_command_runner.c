/* The real CommandRunner: argv without a shell, exit codes, captured and
 * bounded output, timeouts that kill the command's process group. */
#include "altar/command_runner.h"
#include "testutil.h"

#include <string.h>

static void test_exit_code_and_output(void) {
  const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
  altar_cmd_result_t res;
  altar_error_t err = {0};
  int rc = altar_command_run(NULL, argv, NULL, &res, &err);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(res.exit_code, 3);
  CU_ASSERT_EQUAL(res.term_signal, 0);
  CU_ASSERT_FALSE(res.timed_out);
  CU_ASSERT_STRING_EQUAL(res.out, "out\n");
  CU_ASSERT_STRING_EQUAL(res.err, "err\n");
  CU_ASSERT_EQUAL(res.out_len, 4);
  altar_cmd_result_clear(&res);
}

static void test_argv_is_not_a_shell_string(void) {
  /* One argument with spaces and shell syntax reaches the program verbatim. */
  const char *argv[] = {"printf", "%s|", "a b; echo injected", "$(id)", NULL};
  altar_cmd_result_t res;
  int rc = altar_command_run(NULL, argv, NULL, &res, NULL);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(res.exit_code, 0);
  CU_ASSERT_STRING_EQUAL(res.out, "a b; echo injected|$(id)|");
  altar_cmd_result_clear(&res);
}

static void test_output_is_bounded(void) {
  const char *argv[] = {"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done", NULL};
  altar_cmd_opts_t opts = {.max_output = 100};
  altar_cmd_result_t res;
  int rc = altar_command_run(NULL, argv, &opts, &res, NULL);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(res.exit_code, 0);
  CU_ASSERT_EQUAL(res.out_len, 100);
  CU_ASSERT_TRUE(res.out_truncated);
  CU_ASSERT_EQUAL(strlen(res.out), 100);
  CU_ASSERT_FALSE(res.err_truncated);
  altar_cmd_result_clear(&res);
}

static void test_missing_program(void) {
  const char *argv[] = {"/nonexistent/altar-no-such-program", NULL};
  altar_cmd_result_t res;
  altar_error_t err = {0};
  int rc = altar_command_run(NULL, argv, NULL, &res, &err);
  CU_ASSERT_EQUAL(rc, ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "altar-no-such-program"));
  altar_cmd_result_clear(&res);
}

static void test_empty_argv_rejected(void) {
  const char *argv[] = {NULL};
  altar_cmd_result_t res;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_command_run(NULL, argv, NULL, &res, &err), ALTAR_EINVAL);
  altar_cmd_result_clear(&res);
}

static void test_timeout_kills_group(void) {
  /* The child shell starts a grandchild holding the pipes; both must die. */
  const char *argv[] = {"sh", "-c", "echo started; sleep 30 & sleep 30; echo never", NULL};
  altar_cmd_opts_t opts = {.timeout_s = 0.5};
  altar_cmd_result_t res;
  altar_error_t err = {0};
  int rc = altar_command_run(NULL, argv, &opts, &res, &err);
  CU_ASSERT_EQUAL(rc, ALTAR_ETIMEOUT);
  CU_ASSERT_TRUE(res.timed_out);
  CU_ASSERT_EQUAL(res.exit_code, -1);
  CU_ASSERT_EQUAL(res.term_signal, 9);
  CU_ASSERT_STRING_EQUAL(res.out, "started\n");
  altar_cmd_result_clear(&res);
}

static void test_result_set_and_render(void) {
  altar_cmd_result_t res;
  CU_ASSERT_EQUAL(altar_cmd_result_set(&res, 7, "x", NULL), 0);
  CU_ASSERT_EQUAL(res.exit_code, 7);
  CU_ASSERT_STRING_EQUAL(res.out, "x");
  CU_ASSERT_STRING_EQUAL(res.err, "");
  altar_cmd_result_clear(&res);
  const char *argv[] = {"docker", "run", "-d", "img", NULL};
  char buf[64];
  CU_ASSERT_STRING_EQUAL(altar_cmd_argv_render(argv, buf, sizeof buf), "docker run -d img");
  char small[12];
  CU_ASSERT_STRING_EQUAL(altar_cmd_argv_render(argv, small, sizeof small), "docker...");
}

static void add(void) {
  ALTAR_SUITE("command_runner", NULL, NULL);
  ALTAR_TEST(test_exit_code_and_output);
  ALTAR_TEST(test_argv_is_not_a_shell_string);
  ALTAR_TEST(test_output_is_bounded);
  ALTAR_TEST(test_missing_program);
  ALTAR_TEST(test_empty_argv_rejected);
  ALTAR_TEST(test_timeout_kills_group);
  ALTAR_TEST(test_result_set_and_render);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
