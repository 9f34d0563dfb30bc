/* What a daemon costs (core/footprint.c, footprint_sampler.c): RSS, the
 * disk a tree takes in allocated blocks with its directories and inodes
 * counted, the walk's bound, and the gauges the sampler registers. */
#include "altar/footprint.h"
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t blocks_of(const char *p) {
  struct stat st;
  return lstat(p, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* 50 empty directories (what a run that wrote nothing used to leave), one
 * with a file, and a symlink pointing out of the tree (not followed). */
static void test_du_counts_directories(void) {
  char *dir = altar_test_tmpdir("footprint-du");
  char p[4200];
  uint64_t want = blocks_of(dir);
  for (int i = 0; i < 50; i++) {
    snprintf(p, sizeof p, "%s/d%02d", dir, i);
    CU_ASSERT_FATAL(mkdir(p, 0755) == 0);
    want += blocks_of(p);
  }
  snprintf(p, sizeof p, "%s/d00/stdout", dir);
  FILE *f = fopen(p, "w");
  CU_ASSERT_FATAL(f != NULL);
  for (int i = 0; i < 10000; i++) fputs("some output\n", f);
  fclose(f);
  want += blocks_of(p);
  snprintf(p, sizeof p, "%s/d01/up", dir);
  CU_ASSERT_FATAL(symlink("/", p) == 0);
  want += blocks_of(p);
  altar_du_t du;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_footprint_du(dir, 1000, &du, &err), 0);
  CU_ASSERT_EQUAL(du.entries, 1 + 50 + 1 + 1);
  CU_ASSERT_EQUAL(du.bytes, want);
  CU_ASSERT(du.bytes >= 10000 * 12); /* the file's blocks at least */
  CU_ASSERT_FALSE(du.truncated);
  /* Bounded: the walk stops and says so. */
  CU_ASSERT_EQUAL(altar_footprint_du(dir, 10, &du, &err), 0);
  CU_ASSERT(du.truncated);
  CU_ASSERT(du.entries <= 10);
  snprintf(p, sizeof p, "%s/none", dir);
  CU_ASSERT_EQUAL(altar_footprint_du(p, 10, &du, &err), ALTAR_ENOTFOUND);
  CU_ASSERT(strstr(err.msg, "none") != NULL);
  altar_test_rmtree(dir);
  free(dir);
}

/* RSS follows memory the process touches. */
static void test_rss(void) {
  uint64_t before = altar_footprint_rss_bytes();
  CU_ASSERT(before > 0);
  size_t n = 64u << 20;
  /* volatile: the compiler may not drop stores nobody reads */
  char *block = malloc(n);
  volatile char *m = block;
  CU_ASSERT_FATAL(m != NULL);
  for (size_t i = 0; i < n; i += 4096) m[i] = 1;
  uint64_t after = altar_footprint_rss_bytes();
  CU_ASSERT(after >= before + (n / 2));
  free(block);
}

static void test_sampler_gauges(void) {
  char *dir = altar_test_tmpdir("footprint-sampler");
  altar_metrics_t *reg = altar_metrics_new();
  CU_ASSERT_FATAL(reg != NULL);
  altar_footprint_dir_t dirs[] = {{"data_root", dir}, {"log", "/nonexistent-altar-footprint"}};
  altar_error_t err = {0};
  altar_footprint_sampler_t *s = altar_footprint_sampler_start(reg, dirs, 2, &err);
  CU_ASSERT_FATAL(s != NULL);
  altar_buf_t out = {0};
  CU_ASSERT_EQUAL(altar_metrics_render(reg, &out, &err), 0);
  altar_buf_append(&out, "", 1);
  const char *text = (const char *)out.data;
  CU_ASSERT(strstr(text, "altar_process_resident_memory_bytes ") != NULL);
  CU_ASSERT(strstr(text, "altar_disk_usage_bytes{dir=\"data_root\"}") != NULL);
  CU_ASSERT(strstr(text, "altar_disk_usage_entries{dir=\"data_root\"} 1\n") != NULL);
  CU_ASSERT(strstr(text, "altar_disk_usage_entries{dir=\"log\"} 0\n") != NULL); /* absent: zero, no error */
  CU_ASSERT(strstr(text, "altar_process_resident_memory_bytes 0\n") == NULL);
  altar_buf_free(&out);
  altar_footprint_sampler_stop(s);
  /* More directories than it reports is refused. */
  altar_footprint_dir_t many[9];
  for (int i = 0; i < 9; i++) many[i] = (altar_footprint_dir_t){"x", dir};
  CU_ASSERT(altar_footprint_sampler_start(reg, many, 9, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  altar_metrics_free(reg);
  altar_test_rmtree(dir);
  free(dir);
}

/* A transport without a log of its own (retention_due left out: the
 * default) gives no retention gauges, and says so. */
static void test_sampler_retention_optional(void) {
  char *dir = altar_test_tmpdir("footprint-retention");
  altar_transport_ops_t ops = altar_transport_local_ops;
  ops.name = "local-without-retention-due";
  ops.retention_due = NULL;
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open_ops(&ops, &cfg, NULL, &err);
  CU_ASSERT_FATAL(t != NULL);
  altar_retention_due_t due = {.segments = 7, .bytes = 7};
  CU_ASSERT_EQUAL(altar_transport_retention_due(t, &due, &err), ALTAR_ENOTSUP);
  CU_ASSERT(due.segments == 0 && due.bytes == 0);
  altar_metrics_t *reg = altar_metrics_new();
  altar_footprint_sampler_t *s = altar_footprint_sampler_start(reg, NULL, 0, &err);
  CU_ASSERT_FATAL(s != NULL);
  CU_ASSERT_EQUAL(altar_footprint_sampler_add_retention(s, t, &err), ALTAR_ENOTSUP);
  altar_buf_t out = {0};
  CU_ASSERT_EQUAL(altar_metrics_render(reg, &out, &err), 0);
  altar_buf_append(&out, "", 1);
  CU_ASSERT(strstr((const char *)out.data, "altar_log_retention_next") == NULL);
  altar_buf_free(&out);
  altar_footprint_sampler_stop(s);
  altar_metrics_free(reg);
  altar_transport_close(t);
  altar_strmap_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  ALTAR_SUITE("footprint", NULL, NULL);
  ALTAR_TEST(test_du_counts_directories);
  ALTAR_TEST(test_rss);
  ALTAR_TEST(test_sampler_gauges);
  ALTAR_TEST(test_sampler_retention_optional);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
