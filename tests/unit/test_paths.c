/* PathResolver: root + normalized logical path; escapes never resolve. */
#include "altar/paths.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *root;
  const char *logical;
  const char *want; /* NULL: must fail */
  int code;         /* expected error when want is NULL */
} path_case_t;

static const path_case_t cases[] = {
    {"/mnt/volume", "jobs/j1/out.txt", "/mnt/volume/jobs/j1/out.txt", 0},
    {"/mnt/volume/", "jobs/j1", "/mnt/volume/jobs/j1", 0},
    {"/mnt/volume", "a/./b//c", "/mnt/volume/a/b/c", 0},
    {"/mnt/volume", "./jobs/x", "/mnt/volume/jobs/x", 0},
    {"/mnt/volume", "a/b/../c", "/mnt/volume/a/c", 0},
    {"/mnt/volume", "a/..", "/mnt/volume", 0},
    {"/mnt/volume", ".", "/mnt/volume", 0},
    {"/mnt/volume", "a/b/", "/mnt/volume/a/b", 0},
    {"/mnt//volume/./", "m", "/mnt/volume/m", 0},
    {"/", "x/y", "/x/y", 0},
    {"data", "x", "data/x", 0},
    {"./data", "x/../y", "data/y", 0},
    {"/mnt/volume", "..foo/bar", "/mnt/volume/..foo/bar", 0}, /* ".." only as a whole segment */
    {"/mnt/volume", "a/../../x", NULL, ALTAR_EPATH},
    {"/mnt/volume", "..", NULL, ALTAR_EPATH},
    {"/mnt/volume", "../volume/x", NULL, ALTAR_EPATH}, /* leaves and comes back: still an escape */
    {"/mnt/volume", "a/b/../../../etc", NULL, ALTAR_EPATH},
    {"/mnt/volume", "/etc/passwd", NULL, ALTAR_EPATH},
    {"/mnt/volume", "", NULL, ALTAR_EPATH},
    /* Empty root: identity, so URIs keep their "//". */
    {"", "gs://bucket/x", "gs://bucket/x", 0},
    {NULL, "gs://bucket/x", "gs://bucket/x", 0},
    {"", "a/./b", "a/./b", 0},
};

static void test_resolve_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const path_case_t *c = &cases[i];
    char *out = (char *)"unset";
    altar_error_t err = {0};
    int rc = altar_path_resolve(c->root, c->logical, &out, &err);
    if (c->want) {
      if (rc || !out || strcmp(out, c->want))
        fprintf(stderr, "case %zu: root '%s' logical '%s': rc %d out '%s' (%s), want '%s'\n", i,
                c->root ? c->root : "(null)", c->logical, rc, out ? out : "(null)", err.msg, c->want);
      CU_ASSERT_EQUAL(rc, 0);
      CU_ASSERT_PTR_NOT_NULL(out);
      if (out) CU_ASSERT_STRING_EQUAL(out, c->want);
      free(out);
    } else {
      if (rc != c->code) fprintf(stderr, "case %zu: '%s' gave rc %d, want %d\n", i, c->logical, rc, c->code);
      CU_ASSERT_EQUAL(rc, c->code);
      CU_ASSERT_PTR_NULL(out); /* never a resolved path */
      CU_ASSERT(err.msg[0] != '\0');
    }
  }
}

static void test_nul_byte(void) {
  static const char with_nul[] = "jobs/a\0/../../etc/passwd";
  char *out = (char *)"unset";
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_path_resolven("/mnt/volume", with_nul, sizeof with_nul - 1, &out, &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "NUL"));
  out = (char *)"unset";
  CU_ASSERT_EQUAL(altar_path_resolven("", with_nul, sizeof with_nul - 1, &out, &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NULL(out);
  CU_ASSERT_EQUAL(altar_logical_path_checkn(with_nul, sizeof with_nul - 1, &err), ALTAR_EPATH);
  /* The length bounds the input: bytes after it are not read. */
  CU_ASSERT_EQUAL(altar_path_resolven("/r", "abc/def", 3, &out, &err), 0);
  CU_ASSERT_STRING_EQUAL(out, "/r/abc");
  free(out);
}

static void test_messages(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_logical_path_check("a/../../x", &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "climbs out of the root"));
  CU_ASSERT_EQUAL(altar_logical_path_check("/etc/passwd", &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "absolute"));
  CU_ASSERT_EQUAL(altar_logical_path_check("jobs/j1/x", &err), 0);
  CU_ASSERT_EQUAL(altar_logical_path_check(NULL, &err), ALTAR_EPATH);
}

static void test_too_long(void) {
  size_t n = ALTAR_PATH_MAX + 10;
  char *p = malloc(n + 1);
  memset(p, 'a', n);
  p[n] = '\0';
  char *out = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_path_resolve("/r", p, &out, &err), ALTAR_ETOOBIG);
  CU_ASSERT_PTR_NULL(out);
  free(p);
}

static void test_resolver_value(void) {
  altar_path_resolver_t identity = {0}, vol = {"/mnt/volume"};
  char *out;
  CU_ASSERT_EQUAL(altar_path_resolver_resolve(&identity, "gs://b/x", &out, NULL), 0);
  CU_ASSERT_STRING_EQUAL(out, "gs://b/x");
  free(out);
  CU_ASSERT_EQUAL(altar_path_resolver_resolve(&vol, "models/m/./w.tar", &out, NULL), 0);
  CU_ASSERT_STRING_EQUAL(out, "/mnt/volume/models/m/w.tar");
  free(out);
  CU_ASSERT_EQUAL(altar_path_resolver_resolve(&vol, "../x", &out, NULL), ALTAR_EPATH);
}

static void add(void) {
  ALTAR_SUITE("paths", NULL, NULL);
  ALTAR_TEST(test_resolve_table);
  ALTAR_TEST(test_nul_byte);
  ALTAR_TEST(test_messages);
  ALTAR_TEST(test_too_long);
  ALTAR_TEST(test_resolver_value);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
