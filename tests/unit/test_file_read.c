/* The bounded whole-file reader (exact bound, one byte over, growth, errors)
 * and the one array growth rule. */
#include "altar/file_read.h"
#include "altar/grow.h"
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void write_n(size_t n) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  for (size_t i = 0; i < n; i++) fputc('a' + (int)(i % 26), f);
  fclose(f);
}

static void test_within_and_at_bound(void) {
  /* Larger than the first read chunk, so the buffer has to grow. */
  size_t sizes[] = {0, 1, 65535, 65536, 65537, 300000};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    write_n(sizes[k]);
    size_t len = 7;
    altar_error_t err = {0};
    char *b = altar_file_read(path, NULL, 300000, &len, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(len, sizes[k]);
    CU_ASSERT_EQUAL(b[len], '\0');
    if (len) CU_ASSERT_EQUAL(b[len - 1], 'a' + (int)((len - 1) % 26));
    free(b);
  }
}

static void test_over_bound_names_sizes(void) {
  write_n(1001);
  altar_error_t err = {0};
  size_t len = 0;
  CU_ASSERT_PTR_NULL(altar_file_read(path, "spec.json", 1000, &len, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ETOOBIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "spec.json: 1001 bytes exceeds the bound of 1000 bytes");
  /* Exactly at the bound is fine. */
  write_n(1000);
  char *b = altar_file_read(path, "spec.json", 1000, &len, &err);
  CU_ASSERT_PTR_NOT_NULL(b);
  CU_ASSERT_EQUAL(len, 1000);
  free(b);
}

static void test_missing_file(void) {
  altar_error_t err = {0};
  CU_ASSERT_PTR_NULL(altar_file_read("/nonexistent/altar-x", NULL, 10, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/altar-x: cannot open: "));
  /* A directory opens but cannot be read. */
  CU_ASSERT_PTR_NULL(altar_file_read("/", NULL, 10, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_EIO);
}

static void test_grow(void) {
  int *v = NULL;
  size_t cap = 0;
  CU_ASSERT_EQUAL(ALTAR_GROW(v, cap, 1), 0);
  CU_ASSERT_EQUAL(cap, 8);
  for (int i = 0; i < 1000; i++) {
    CU_ASSERT_EQUAL_FATAL(ALTAR_GROW(v, cap, (size_t)i + 1), 0);
    v[i] = i;
  }
  CU_ASSERT_EQUAL(cap, 1024);
  CU_ASSERT_EQUAL(v[999], 999);
  /* Room already: nothing moves. */
  int *same = v;
  CU_ASSERT_EQUAL(ALTAR_GROW(v, cap, 1024), 0);
  CU_ASSERT_PTR_EQUAL(v, same);
  /* A size whose bytes overflow is refused and leaves the array as it was. */
  CU_ASSERT_EQUAL(ALTAR_GROW(v, cap, SIZE_MAX / 2), ALTAR_ENOMEM);
  CU_ASSERT_PTR_EQUAL(v, same);
  CU_ASSERT_EQUAL(cap, 1024);
  free(v);
}

static int setup(void) {
  snprintf(path, sizeof path, "/tmp/altar-file-read-%ld", (long)getpid());
  return 0;
}

static int teardown(void) {
  unlink(path);
  return 0;
}

static void add(void) {
  ALTAR_SUITE("file_read", setup, teardown);
  ALTAR_TEST(test_within_and_at_bound);
  ALTAR_TEST(test_over_bound_names_sizes);
  ALTAR_TEST(test_missing_file);
  ALTAR_TEST(test_grow);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
