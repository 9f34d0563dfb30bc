/* Retention of kept task output (backends/log_retention.c): the size bound
 * and the age bound, oldest first, never a running task's, only our
 * directories; the settings and the prune interval; and the process backend
 * pruning at open with a live supervisor's output kept. Ages are set with
 * utimensat and the clock is passed in: no test waits. */
#include "altar/plugin/backend.h"
#include "altar/codec.h"
#include "backends/log_retention.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOW 2000000000.0 /* wall seconds the prunes below run at */

static char *root;

static void key_of(int i, char key[65]) {
  for (int k = 0; k < 64; k++) key[k] = "0123456789abcdef"[(i * 7 + k) % 16];
  key[0] = "0123456789abcdef"[i % 16];
  key[1] = "0123456789abcdef"[(i / 16) % 16];
  key[64] = '\0';
}

/* logs/<key i>/stderr of bytes bytes, all last written at wall time when. */
static void make_kept(const char *logs, int i, size_t bytes, double when) {
  char key[65], dir[4096], file[4200];
  key_of(i, key);
  snprintf(dir, sizeof dir, "%s/%s", logs, key);
  mkdir(dir, 0755);
  snprintf(file, sizeof file, "%s/stderr", dir);
  char *data = malloc(bytes ? bytes : 1);
  memset(data, 'x', bytes);
  altar_test_write_file(file, data, bytes);
  free(data);
  struct timespec ts[2] = {{(time_t)when, 0}, {(time_t)when, 0}};
  CU_ASSERT(utimensat(AT_FDCWD, file, ts, 0) == 0);
  CU_ASSERT(utimensat(AT_FDCWD, dir, ts, 0) == 0);
}

static bool kept(const char *logs, int i) {
  char key[65], dir[4096];
  key_of(i, key);
  snprintf(dir, sizeof dir, "%s/%s", logs, key);
  return access(dir, F_OK) == 0;
}

static int running_key = -1;
static int running_asked;
static bool is_running(const char *key, void *ctx) {
  (void)ctx;
  running_asked++;
  char want[65];
  key_of(running_key, want);
  return running_key >= 0 && !strcmp(key, want);
}

static char *fresh_logs(const char *tag) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", root, tag);
  mkdir(p, 0755);
  return strdup(p);
}

/* Five tasks of 1 MiB each, last written 5..1 hours ago; keep 3 MiB: the two
 * oldest go, unless one runs, in which case the next oldest goes instead. */
static void test_size_bound_oldest_first(void) {
  char *logs = fresh_logs("size");
  for (int i = 0; i < 5; i++) make_kept(logs, i, 1u << 20, NOW - (5 - i) * 3600.0);
  char other[4096];
  snprintf(other, sizeof other, "%s/not-a-task-key", logs); /* not ours: left alone */
  mkdir(other, 0755);
  altar_log_retention_t r = {.keep_bytes = 3u << 20, .max_age_s = 0, .last_prune = -1};
  running_key = 0;
  running_asked = 0;
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_seen, 5);
  CU_ASSERT_EQUAL(f.bytes_seen, 5u << 20);
  CU_ASSERT_EQUAL(f.dirs_running, 1);
  CU_ASSERT_EQUAL(f.dirs_removed, 2);
  CU_ASSERT_EQUAL(f.removed_for_size, 2);
  CU_ASSERT_EQUAL(f.bytes_removed, 2u << 20);
  CU_ASSERT(kept(logs, 0)); /* the oldest, but running */
  CU_ASSERT(!kept(logs, 1));
  CU_ASSERT(!kept(logs, 2));
  CU_ASSERT(kept(logs, 3) && kept(logs, 4));
  CU_ASSERT(access(other, F_OK) == 0);
  CU_ASSERT_EQUAL(running_asked, 3); /* only about directories it was going to remove */
  /* Within the bound now: a second prune removes nothing and asks nothing. */
  running_asked = 0;
  altar__logs_prune(logs, &r, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_seen, 3);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  CU_ASSERT_EQUAL(running_asked, 0);
  free(logs);
}

/* Age: what was last written more than max_age_s ago goes, however small
 * the total; a running task's output stays. */
static void test_age_bound(void) {
  char *logs = fresh_logs("age");
  make_kept(logs, 10, 100, NOW - 20 * 86400.0);
  make_kept(logs, 11, 100, NOW - 15 * 86400.0);
  make_kept(logs, 12, 100, NOW - 13 * 86400.0);
  altar_log_retention_t r = {.keep_bytes = 1u << 30, .max_age_s = 14 * 86400.0, .last_prune = -1};
  running_key = 11;
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 1);
  CU_ASSERT_EQUAL(f.removed_for_age, 1);
  CU_ASSERT_EQUAL(f.dirs_running, 1);
  CU_ASSERT(!kept(logs, 10));
  CU_ASSERT(kept(logs, 11) && kept(logs, 12));
  /* No age bound: nothing goes for its age. */
  r.max_age_s = 0;
  running_key = -1;
  altar__logs_prune(logs, &r, NOW + 1000 * 86400.0, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  free(logs);
}

static void test_settings_and_interval(void) {
  altar_log_retention_t r;
  char e[256];
  CU_ASSERT(altar__log_retention_parse(NULL, &r, e, sizeof e));
  CU_ASSERT_EQUAL(r.keep_bytes, 1ull << 30);
  CU_ASSERT_EQUAL(r.max_age_s, 14 * 86400.0);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "logs_keep", "512MiB");
  altar_strmap_set(&m, "logs_keep_days", "0");
  CU_ASSERT(altar__log_retention_parse(&m, &r, e, sizeof e));
  CU_ASSERT_EQUAL(r.keep_bytes, 512ull << 20);
  CU_ASSERT_EQUAL(r.max_age_s, 0);
  altar_strmap_set(&m, "logs_keep", "2G");
  CU_ASSERT(altar__log_retention_parse(&m, &r, e, sizeof e) && r.keep_bytes == 2ull << 30);
  const char *bad[] = {"10", "1.5G", "5 GiB", "-1G", "99999999999999999999", "", "2P"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_strmap_set(&m, "logs_keep", bad[i]);
    CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, e, sizeof e));
    CU_ASSERT(strstr(e, "backend.logs_keep:") != NULL);
  }
  altar_strmap_set(&m, "logs_keep", "1GiB");
  altar_strmap_set(&m, "logs_keep_days", "x");
  CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, e, sizeof e));
  CU_ASSERT(strstr(e, "backend.logs_keep_days:") != NULL);
  altar_strmap_clear(&m);
  /* Due at once, then not again before the interval. */
  r.last_prune = -1;
  CU_ASSERT(altar__log_retention_due(&r, 100.0));
  CU_ASSERT_FALSE(altar__log_retention_due(&r, 100.0 + ALTAR_LOGS_PRUNE_INTERVAL_S - 1));
  CU_ASSERT(altar__log_retention_due(&r, 100.0 + ALTAR_LOGS_PRUNE_INTERVAL_S));
}

/* The process backend prunes its data root's logs at open by its
 * settings; logs_keep and logs_keep_days are its keys. */
static void test_process_backend_prunes_at_create(void) {
  char data[4096], logs[4200];
  snprintf(data, sizeof data, "%s/data", root);
  mkdir(data, 0755);
  snprintf(logs, sizeof logs, "%s/logs", data);
  mkdir(logs, 0755);
  double now = (double)time(NULL);
  for (int i = 20; i < 24; i++) make_kept(logs, i, 1u << 20, now - (24 - i) * 60.0);
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data);
  altar_strmap_set(&cfg, "logs_keep", "2MiB");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process, &cfg, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT(!kept(logs, 20) && !kept(logs, 21));
  CU_ASSERT(kept(logs, 22) && kept(logs, 23));
  altar_backend_close(be);
  altar_strmap_set(&cfg, "logs_keep", "tiny");
  CU_ASSERT(altar_backend_open(&altar_backend_process, &cfg, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "backend.logs_keep:") != NULL);
  altar_strmap_clear(&cfg);
}

/* A task whose supervisor is alive keeps its output, though it is the
 * oldest and past the age; finished tasks' output around it goes. */
static void test_process_keeps_running_task_output(void) {
  char data[4096], logs[4200];
  snprintf(data, sizeof data, "%s/live", root);
  mkdir(data, 0755);
  snprintf(logs, sizeof logs, "%s/logs", data);
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data);
  altar_strmap_set(&cfg, "logs_keep", "1MiB");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process, &cfg, &berr);
  CU_ASSERT_FATAL(be != NULL);
  altar_spec_t *s = altar_spec_new("retention", "img");
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, "echo still-here >&2; exec sleep 60");
  char key[ALTAR_TASK_KEY_LEN + 1], live[4400], file[4500];
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_spec_identity(s, key, &err) == 0);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  snprintf(live, sizeof live, "%s/%s", logs, key);
  snprintf(file, sizeof file, "%s/stderr", live);
  struct stat st;
  for (int i = 0; i < 2000 && !(stat(file, &st) == 0 && st.st_size > 0); i++) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT_FATAL(stat(file, &st) == 0 && st.st_size > 0);
  double now = (double)time(NULL);
  struct timespec old[2] = {{(time_t)(now - 30 * 86400.0), 0}, {(time_t)(now - 30 * 86400.0), 0}};
  CU_ASSERT(utimensat(AT_FDCWD, file, old, 0) == 0 && utimensat(AT_FDCWD, live, old, 0) == 0);
  for (int i = 30; i < 33; i++) make_kept(logs, i, 1u << 20, now - (33 - i) * 60.0);
  /* A second backend on the data root prunes at open. */
  altar_backend_t *be2 = altar_backend_open(&altar_backend_process, &cfg, &berr);
  CU_ASSERT_FATAL(be2 != NULL);
  CU_ASSERT(access(file, F_OK) == 0);
  /* 3 MiB of finished output and the running task's few bytes: over 1 MiB
   * until all the finished output is gone; the running one stays. */
  CU_ASSERT(!kept(logs, 30) && !kept(logs, 31) && !kept(logs, 32));
  altar_backend_close(be2);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
  altar_strmap_clear(&cfg);
}

static int suite_init(void) {
  root = altar_test_tmpdir("log-retention");
  return 0;
}

static int suite_clean(void) {
  altar_test_rmtree(root);
  free(root);
  return 0;
}

static void add(void) {
  ALTAR_SUITE("log_retention", suite_init, suite_clean);
  ALTAR_TEST(test_size_bound_oldest_first);
  ALTAR_TEST(test_age_bound);
  ALTAR_TEST(test_settings_and_interval);
  ALTAR_TEST(test_process_backend_prunes_at_create);
  ALTAR_TEST(test_process_keeps_running_task_output);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
