/* The progress line of `submit --wait` fits the terminal: never longer than
 * columns - 1 (a 50-column terminal must not wrap it), the bar shrinking
 * first, then the text, and the counts always there when room allows.
 * cli/ is not a library: tests/CMakeLists.txt compiles its file in. */
#include <string.h>

#include "../../cli/progress_bar.h"
#include "testutil.h"

static void test_fits_every_width(void) {
  char line[512];
  for (int cols = 1; cols <= 200; cols++) {
    size_t n = altar_cli_progress_line(line, sizeof line, cols, 1234, 56, 5000, 7, 100, 3, 3599);
    CU_ASSERT(n == strlen(line));
    CU_ASSERT(n <= (size_t)(cols > 1 ? cols - 1 : 1));
  }
}

static void test_fifty_columns(void) {
  char line[512];
  size_t n = altar_cli_progress_line(line, sizeof line, 50, 0, 2, 4, 2, 2, 2, 65);
  CU_ASSERT(n <= 49);
  /* The long text (52 columns) does not fit: the short form keeps the counts. */
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "2/4 2! g2/2 01:05"));
  CU_ASSERT_EQUAL(line[0], '[');
  /* Half the shards are terminal, all of them failed: half the bar is 'x'. */
  size_t bar = (size_t)(strchr(line, ']') - line) - 1, ok = 0, bad = 0;
  for (size_t i = 1; i <= bar; i++) ok += line[i] == '#', bad += line[i] == 'x';
  CU_ASSERT_EQUAL(ok, 0);
  CU_ASSERT_EQUAL(bad, bar / 2);
}

static void test_narrow_and_wide(void) {
  char line[512];
  /* 30 columns: no room for the long text; the short form keeps the counts. */
  altar_cli_progress_line(line, sizeof line, 30, 3, 1, 10, 1, 2, 0, 7);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "4/10 1! g1/2 00:07"));
  CU_ASSERT(strlen(line) <= 29);
  /* A wide terminal does not stretch the bar without bound. */
  altar_cli_progress_line(line, sizeof line, 300, 10, 0, 10, 2, 2, 0, 1);
  CU_ASSERT(strlen(line) < 100);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "10/10 shards"));
  /* 80 columns: the whole text and a bar. */
  altar_cli_progress_line(line, sizeof line, 80, 0, 2, 4, 2, 2, 2, 65);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "] 2/4 shards done, 2 failed; groups 2/2, 2 dead; 01:05"));
  CU_ASSERT(strlen(line) <= 79);
}

static void add(void) {
  ALTAR_SUITE("progress_bar", NULL, NULL);
  ALTAR_TEST(test_fits_every_width);
  ALTAR_TEST(test_fifty_columns);
  ALTAR_TEST(test_narrow_and_wide);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
