/* Failure evidence from a task's output: bounds, UTF-8 repair, redaction. */
#include "altar/log_tail.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* Valid UTF-8 without NUL: what every decoder of our messages accepts. */
static bool utf8_valid(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; u[i];) {
    size_t k = u[i] < 0x80 ? 1 : (u[i] & 0xE0) == 0xC0 ? 2 : (u[i] & 0xF0) == 0xE0 ? 3 : (u[i] & 0xF8) == 0xF0 ? 4 : 0;
    if (!k) return false;
    for (size_t j = 1; j < k; j++)
      if ((u[i + j] & 0xC0) != 0x80) return false;
    i += k;
  }
  return true;
}

static void test_secret_names(void) {
  CU_ASSERT(altar_env_name_secret("AWS_SECRET_ACCESS_KEY", 21));
  CU_ASSERT(altar_env_name_secret("GITHUB_TOKEN", 12));
  CU_ASSERT(altar_env_name_secret("db_password", 11));
  CU_ASSERT(altar_env_name_secret("STRIPE_KEY", 10));
  CU_ASSERT(altar_env_name_secret("MODAL_TOKEN_SECRET", 18));
  CU_ASSERT_FALSE(altar_env_name_secret("PATH", 4));
  CU_ASSERT_FALSE(altar_env_name_secret("HOME", 4));
  CU_ASSERT_FALSE(altar_env_name_secret("KEYBOARD", 8));
}

static void test_redaction(void) {
  const char *env[] = {"PATH=/usr/bin", "API_TOKEN=abcd1234", "SHORT_KEY=ab", "X_PASSWORD=hunter22", "NOEQUALS", NULL};
  char *t = altar_redact_env("tok abcd1234, pw hunter22hunter22 in /usr/bin, ab", env);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_STRING_EQUAL(t, "tok [redacted], pw [redacted][redacted] in /usr/bin, ab");
  free(t);
  /* Redaction happens before the cut: no part of a secret at the edge survives. */
  const char *data = "xxxxabcd1234yyyy";
  t = altar_log_tail_text(data, strlen(data), 10, env, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_STRING_EQUAL(t, "acted]yyyy");
  free(t);
}

static void test_utf8_repair_and_cut(void) {
  /* Invalid bytes, an overlong form, a surrogate, a NUL and a control character. */
  const char bad[] = "a\xff"
                     "b\xc0\xaf"
                     "c\xed\xa0\x80"
                     "d\0e\x1b"
                     "f\n\tg \xc3\xa9";
  bool cut = true;
  char *t = altar_log_tail_text(bad, sizeof bad - 1, 1000, NULL, &cut);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_FALSE(cut);
  CU_ASSERT_STRING_EQUAL(t, "a?b??c???d?e f\n\tg \xc3\xa9");
  CU_ASSERT(utf8_valid(t));
  free(t);
  /* A cut in the middle of a character moves to the next whole one. */
  const char *euro = "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"; /* three 3-byte characters */
  t = altar_log_tail_text(euro, strlen(euro), 7, NULL, &cut);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(cut);
  CU_ASSERT_STRING_EQUAL(t, "\xe2\x82\xac\xe2\x82\xac");
  free(t);
}

static void test_detail_bounded(void) {
  size_t n = 100000;
  char *err = malloc(n), *out = malloc(n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  for (size_t i = 0; i < n; i++) {
    err[i] = (char)(i % 7 == 6 ? '\n' : 'e');
    out[i] = (char)(i % 5 == 4 ? '\n' : '\xe9'); /* invalid alone */
  }
  memcpy(err + n - 6, "LAST\n", 5);
  err[n - 1] = '\xc3'; /* a character cut at the end */
  for (size_t bound = 64; bound <= 4096; bound *= 2) {
    char *d = altar_detail_with_output("command exited with code 3", err, n, out, n, NULL, bound);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT(strlen(d) <= bound);
    CU_ASSERT(utf8_valid(d));
    if (bound >= 256) {
      CU_ASSERT(!strncmp(d, "command exited with code 3", 26));
      CU_ASSERT_PTR_NOT_NULL(strstr(d, "--- stderr (last "));
      CU_ASSERT_PTR_NOT_NULL(strstr(d, "LAST\n?"));
      CU_ASSERT_PTR_NOT_NULL(strstr(d, "--- stdout (last "));
    }
    free(d);
  }
  /* Only stderr, whole: no "last" in its header; both empty: the base alone. */
  char *d = altar_detail_with_output(NULL, "boom\n", 5, "", 0, NULL, 2048);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  CU_ASSERT_STRING_EQUAL(d, "--- stderr ---\nboom\n");
  free(d);
  d = altar_detail_with_output("base", NULL, 0, NULL, 0, NULL, 2048);
  CU_ASSERT_STRING_EQUAL(d, "base");
  free(d);
  free(err);
  free(out);
}

static void add(void) {
  ALTAR_SUITE("log_tail", NULL, NULL);
  ALTAR_TEST(test_secret_names);
  ALTAR_TEST(test_redaction);
  ALTAR_TEST(test_utf8_repair_and_cut);
  ALTAR_TEST(test_detail_bounded);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
