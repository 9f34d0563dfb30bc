/* Retention of kept task output (backends/log_retention.c): the size bound
 * and the age bound, oldest first, never a running task's, only our
 * directories; the settings and the prune interval; and the process backend
 * pruning at open with a live supervisor's output kept. Ages are set with
 * utimensat and the clock is passed in: no test waits. */
#include "altar/plugin/backend.h"
#include "altar/codec.h"
#include "backends/log_retention.h"
#include "testutil.h"

#include <dirent.h>
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
  if (running_key < 0) return false;
  char want[65];
  key_of(running_key, want);
  return !strcmp(key, want);
}

static char *fresh_logs(const char *tag) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", root, tag);
  mkdir(p, 0755);
  return strdup(p);
}

/* Allocated bytes of logs/<key i> and what is in it, as the prune counts them. */
static uint64_t usage(const char *logs, int i) {
  char key[65], dir[4096], file[4200];
  key_of(i, key);
  snprintf(dir, sizeof dir, "%s/%s", logs, key);
  struct stat st;
  if (lstat(dir, &st) < 0) return 0;
  uint64_t b = (uint64_t)st.st_blocks * 512;
  static const char *const names[] = {"stdout", "stderr", "notes.txt"};
  for (size_t k = 0; k < 3; k++) {
    snprintf(file, sizeof file, "%s/%s", dir, names[k]);
    if (lstat(file, &st) == 0) b += (uint64_t)st.st_blocks * 512;
  }
  return b;
}

static altar_log_retention_t settings(uint64_t keep_bytes, size_t keep_count, double max_age_s) {
  return (altar_log_retention_t){
      .keep_bytes = keep_bytes, .keep_count = keep_count, .max_age_s = max_age_s, .last_prune = -1, .last_scan = -1};
}

/* Five tasks of 1 MiB each, last written 5..1 hours ago; keep what three of
 * them take: the two oldest go, unless one runs, in which case the next
 * oldest goes instead (the running one's blocks still count). */
static void test_size_bound_oldest_first(void) {
  char *logs = fresh_logs("size");
  for (int i = 0; i < 5; i++) make_kept(logs, i, 1u << 20, NOW - (5 - i) * 3600.0);
  char other[4096];
  snprintf(other, sizeof other, "%s/not-a-task-key", logs); /* not ours: left alone */
  mkdir(other, 0755);
  uint64_t each = usage(logs, 0);
  CU_ASSERT(each >= 1u << 20);
  altar_log_retention_t r = settings(3 * each, 1000, 0);
  running_key = 0;
  running_asked = 0;
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_scanned, 5);
  CU_ASSERT_EQUAL(f.dirs_seen, 5);
  CU_ASSERT_EQUAL(f.bytes_seen, 5 * each);
  CU_ASSERT_EQUAL(f.dirs_running, 1);
  CU_ASSERT_EQUAL(f.dirs_removed, 2);
  CU_ASSERT_EQUAL(f.removed_for_size, 2);
  CU_ASSERT_EQUAL(f.bytes_removed, 2 * each);
  CU_ASSERT(kept(logs, 0)); /* the oldest, but running */
  CU_ASSERT(!kept(logs, 1));
  CU_ASSERT(!kept(logs, 2));
  CU_ASSERT(kept(logs, 3) && kept(logs, 4));
  CU_ASSERT(access(other, F_OK) == 0);
  CU_ASSERT_EQUAL(running_asked, 3); /* only about directories it was going to remove */
  /* Within the bound now: a second prune (no scan: the index is fresh)
   * removes nothing, measures nothing and asks nothing. */
  running_asked = 0;
  altar__logs_prune(logs, &r, 1, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_scanned, 0);
  CU_ASSERT_EQUAL(f.dirs_measured, 0);
  CU_ASSERT_EQUAL(f.dirs_seen, 3);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  CU_ASSERT_EQUAL(running_asked, 0);
  /* The rescan interval passed: the directory is read again, same result. */
  altar__logs_prune(logs, &r, 1 + ALTAR_LOGS_RESCAN_INTERVAL_S, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_scanned, 3);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  altar__log_retention_clear(&r);
  free(logs);
}

/* Age: what was last written more than max_age_s ago goes, however small
 * the total; a running task's output stays. */
static void test_age_bound(void) {
  char *logs = fresh_logs("age");
  make_kept(logs, 10, 100, NOW - 20 * 86400.0);
  make_kept(logs, 11, 100, NOW - 15 * 86400.0);
  make_kept(logs, 12, 100, NOW - 13 * 86400.0);
  altar_log_retention_t r = settings(1u << 30, 1000, 14 * 86400.0);
  running_key = 11;
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 1);
  CU_ASSERT_EQUAL(f.removed_for_age, 1);
  CU_ASSERT_EQUAL(f.dirs_running, 1);
  CU_ASSERT(!kept(logs, 10));
  CU_ASSERT(kept(logs, 11) && kept(logs, 12));
  /* No age bound: nothing goes for its age. */
  r.max_age_s = 0;
  running_key = -1;
  altar__logs_prune(logs, &r, 1, NOW + 1000 * 86400.0, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  altar__log_retention_clear(&r);
  free(logs);
}

/* Count: twenty small outputs, keep five: the fifteen oldest go. Then each
 * task kept afterwards pushes the oldest out, looking at no more than the
 * one kept and the one removed; a key kept again replaces its entry (the
 * count stays exact, nothing else goes). */
static void test_count_bound(void) {
  char *logs = fresh_logs("count");
  for (int i = 0; i < 20; i++) make_kept(logs, 100 + i, 10, NOW - (40 - i) * 60.0);
  altar_log_retention_t r = settings(1u << 30, 5, 0);
  running_key = -1;
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_seen, 20);
  CU_ASSERT_EQUAL(f.dirs_removed, 15);
  CU_ASSERT_EQUAL(f.removed_for_count, 15);
  for (int i = 0; i < 15; i++) CU_ASSERT(!kept(logs, 100 + i));
  for (int i = 15; i < 20; i++) CU_ASSERT(kept(logs, 100 + i));
  for (int i = 20; i < 23; i++) {
    char key[65];
    key_of(100 + i, key);
    make_kept(logs, 100 + i, 10, NOW - (40 - i) * 60.0);
    altar__logs_keep(logs, &r, key, NOW, is_running, NULL, &f);
    CU_ASSERT_EQUAL(f.dirs_seen, 6);
    CU_ASSERT_EQUAL(f.dirs_removed, 1);
    CU_ASSERT_EQUAL(f.removed_for_count, 1);
    CU_ASSERT_EQUAL(f.dirs_measured, 2);
    CU_ASSERT(!kept(logs, 100 + i - 5));
  }
  /* 118 is kept again (a rerun's output): one entry, nothing pushed out. */
  char key[65];
  key_of(118, key);
  make_kept(logs, 118, 20, NOW - 60.0);
  altar__logs_keep(logs, &r, key, NOW, is_running, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_seen, 5);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  for (int i = 18; i < 23; i++) CU_ASSERT(kept(logs, 100 + i));
  altar__log_retention_clear(&r);
  free(logs);
}

/* Real disk use: directories with nothing in them take blocks too, and the
 * size bound counts them (an output-bytes bound never saw them). */
static void test_size_counts_empty_dirs(void) {
  char *logs = fresh_logs("empty");
  for (int i = 0; i < 12; i++) {
    char key[65], dir[4096];
    key_of(200 + i, key);
    snprintf(dir, sizeof dir, "%s/%s", logs, key);
    CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
    struct timespec ts[2] = {{(time_t)(NOW - (20 - i) * 60.0), 0}, {(time_t)(NOW - (20 - i) * 60.0), 0}};
    CU_ASSERT(utimensat(AT_FDCWD, dir, ts, 0) == 0);
  }
  uint64_t each = usage(logs, 200);
  altar_log_retention_t r = settings(5 * each + each / 2, 1000, 0);
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.bytes_seen, 12 * each);
  if (each == 0) {
    /* A filesystem that reports no blocks for a directory (tmpfs): nothing
     * to bound by size, and nothing may go for it. */
    fprintf(stderr, "(directories here take no blocks: size bound not exercised) ");
    CU_ASSERT_EQUAL(f.dirs_removed, 0);
  } else {
    CU_ASSERT_EQUAL(f.dirs_removed, 7);
    CU_ASSERT_EQUAL(f.removed_for_size, 7);
    CU_ASSERT_EQUAL(f.bytes_removed, 7 * each);
    for (int i = 0; i < 7; i++) CU_ASSERT(!kept(logs, 200 + i));
    for (int i = 7; i < 12; i++) CU_ASSERT(kept(logs, 200 + i));
  }
  altar__log_retention_clear(&r);
  free(logs);
}

/* Only what the backends write goes: a task directory holding a file of
 * someone else's loses our streams and stays with that file. */
static void test_only_our_files(void) {
  char *logs = fresh_logs("ours");
  make_kept(logs, 300, 10, NOW - 7200.0);
  make_kept(logs, 301, 10, NOW - 3600.0);
  char key[65], notes[4200];
  key_of(300, key);
  snprintf(notes, sizeof notes, "%s/%s/notes.txt", logs, key);
  altar_test_write_file(notes, "mine", 4);
  altar_log_retention_t r = settings(1u << 30, 1, 0);
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  CU_ASSERT(access(notes, F_OK) == 0);
  char err[4200];
  snprintf(err, sizeof err, "%s/%s/stderr", logs, key);
  CU_ASSERT(access(err, F_OK) != 0);
  CU_ASSERT(kept(logs, 301));
  /* No longer indexed: a later keep does not try it again. */
  CU_ASSERT_EQUAL(f.dirs_seen, 2);
  altar__logs_prune(logs, &r, 1, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_seen, 1);
  altar__log_retention_clear(&r);
  free(logs);
}

/* Output written again after it was indexed (a rerun of the key) is not
 * removed for its old place: it moves to the new end. */
static void test_rewritten_moves_to_new_end(void) {
  char *logs = fresh_logs("rerun");
  make_kept(logs, 400, 10, NOW - 3 * 3600.0);
  make_kept(logs, 401, 10, NOW - 2 * 3600.0);
  make_kept(logs, 402, 10, NOW - 1 * 3600.0);
  altar_log_retention_t r = settings(1u << 30, 3, 0);
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 0);
  make_kept(logs, 400, 10, NOW - 60.0); /* 400 ran again */
  make_kept(logs, 403, 10, NOW - 30.0);
  char key[65];
  key_of(403, key);
  altar__logs_keep(logs, &r, key, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_changed, 1);
  CU_ASSERT_EQUAL(f.dirs_removed, 1);
  CU_ASSERT(kept(logs, 400) && !kept(logs, 401) && kept(logs, 402) && kept(logs, 403));
  altar__log_retention_clear(&r);
  free(logs);
}

/* The index is bounded by keep_count however many tasks were kept, and
 * each keep looks at no more than two directories. */
static void test_index_bounded(void) {
  char *logs = fresh_logs("many");
  altar_log_retention_t r = settings(1u << 30, 100, 0);
  size_t most = 0, most_measured = 0;
  for (int i = 0; i < 5000; i++) {
    char key[65], dir[4096];
    snprintf(key, sizeof key, "%064x", i);
    snprintf(dir, sizeof dir, "%s/%s", logs, key);
    CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
    altar_logs_prune_facts_t f;
    altar__logs_keep(logs, &r, key, NOW, NULL, NULL, &f);
    if (altar__logs_index_footprint(&r) > most) most = altar__logs_index_footprint(&r);
    if (f.dirs_measured > most_measured) most_measured = f.dirs_measured;
  }
  CU_ASSERT(most <= 16384); /* 100 entries: a ring of 128 and its table */
  CU_ASSERT_EQUAL(most_measured, 2);
  size_t n = 0;
  DIR *d = opendir(logs);
  for (struct dirent *de; d && (de = readdir(d));) n += de->d_name[0] != '.';
  if (d) closedir(d);
  CU_ASSERT_EQUAL(n, 100);
  altar__log_retention_clear(&r);
  CU_ASSERT_EQUAL(altar__logs_index_footprint(&r), 0);
  free(logs);
}

static void test_settings_and_interval(void) {
  altar_log_retention_t r;
  altar_error_t e = {0};
  CU_ASSERT(altar__log_retention_parse(NULL, &r, &e));
  CU_ASSERT_EQUAL(r.keep_bytes, 1ull << 30);
  CU_ASSERT_EQUAL(r.max_age_s, 14 * 86400.0);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "logs_keep", "512MiB");
  altar_strmap_set(&m, "logs_keep_days", "0");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e));
  CU_ASSERT_EQUAL(r.keep_bytes, 512ull << 20);
  CU_ASSERT_EQUAL(r.max_age_s, 0);
  altar_strmap_set(&m, "logs_keep", "2G");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e) && r.keep_bytes == 2ull << 30);
  const char *bad[] = {"10", "1.5G", "5 GiB", "-1G", "99999999999999999999", "", "2P"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_strmap_set(&m, "logs_keep", bad[i]);
    CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, &e));
    CU_ASSERT(strstr(e.msg, "backend.logs_keep:") != NULL);
    CU_ASSERT_EQUAL(e.code, ALTAR_ECONFIG);
  }
  altar_strmap_set(&m, "logs_keep", "1GiB");
  altar_strmap_set(&m, "logs_keep_days", "x");
  CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, &e));
  CU_ASSERT(strstr(e.msg, "backend.logs_keep_days:") != NULL);
  altar_strmap_set(&m, "logs_keep_days", "14");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e) && r.keep_count == ALTAR_LOGS_KEEP_COUNT_DEFAULT);
  /* logs_keep_s: the age in seconds (soaks, tests), over logs_keep_days. */
  altar_strmap_set(&m, "logs_keep_s", "120");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e) && r.max_age_s == 120.0);
  const char *bad_s[] = {"-1", "2m", "", "1.5", "99999999999999999999", "3153600001"};
  for (size_t i = 0; i < sizeof bad_s / sizeof bad_s[0]; i++) {
    altar_strmap_set(&m, "logs_keep_s", bad_s[i]);
    CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, &e));
    CU_ASSERT(strstr(e.msg, "backend.logs_keep_s:") != NULL);
  }
  altar_strmap_set(&m, "logs_keep_s", "0");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e) && r.max_age_s == 0);
  altar_strmap_clear(&m);
  altar_strmap_set(&m, "logs_keep_days", "14");
  CU_ASSERT_EQUAL(ALTAR_LOGS_KEEP_COUNT_DEFAULT, 10000);
  altar_strmap_set(&m, "logs_keep_count", "500");
  CU_ASSERT(altar__log_retention_parse(&m, &r, &e) && r.keep_count == 500);
  const char *bad_count[] = {"0", "-1", "x", "", "1000001", "10k"};
  for (size_t i = 0; i < sizeof bad_count / sizeof bad_count[0]; i++) {
    altar_strmap_set(&m, "logs_keep_count", bad_count[i]);
    CU_ASSERT_FALSE(altar__log_retention_parse(&m, &r, &e));
    CU_ASSERT(strstr(e.msg, "backend.logs_keep_count:") != NULL);
  }
  altar_strmap_clear(&m);
  /* Due at once, then not again before the interval. */
  r.last_prune = -1;
  CU_ASSERT(altar__log_retention_due(&r, 100.0));
  CU_ASSERT_FALSE(altar__log_retention_due(&r, 100.0 + ALTAR_LOGS_PRUNE_INTERVAL_S - 1));
  CU_ASSERT(altar__log_retention_due(&r, 100.0 + ALTAR_LOGS_PRUNE_INTERVAL_S));
}

/* What the next prune frees, from the index alone: six directories kept,
 * three past the age bound at NOW -> those three and their bytes; a day
 * later a fourth; a task kept meanwhile is counted at once; after the prune
 * at NOW, nothing is due and what it removed is what was announced. */
static void test_kept_facts_announce_the_prune(void) {
  char *logs = fresh_logs("facts");
  for (int i = 0; i < 6; i++) make_kept(logs, 200 + i, 5000 * (i + 1), NOW - (20 - 3 * i) * 86400.0);
  /* ages at NOW: 20, 17, 14.0 + 1 s, 11, 8, 5 days */
  struct timespec ts[2] = {{(time_t)(NOW - 14 * 86400.0 - 1), 0}, {(time_t)(NOW - 14 * 86400.0 - 1), 0}};
  char key[65], dir[4096], file[4200];
  key_of(202, key);
  snprintf(dir, sizeof dir, "%s/%s", logs, key);
  snprintf(file, sizeof file, "%s/stderr", dir);
  CU_ASSERT(utimensat(AT_FDCWD, file, ts, 0) == 0 && utimensat(AT_FDCWD, dir, ts, 0) == 0);
  altar_log_retention_t r = settings(1u << 30, 1000, 0); /* no age bound yet: the scan removes nothing */
  altar_logs_kept_facts_t k;
  altar__logs_kept_facts(&r, NOW, &k); /* no index before the first scan */
  CU_ASSERT_EQUAL(k.dirs, 0);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 0);
  altar_logs_prune_facts_t f;
  altar__logs_prune(logs, &r, 0, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL_FATAL(f.dirs_seen, 6);
  r.max_age_s = 14 * 86400.0;
  uint64_t all = 0, old3 = usage(logs, 200) + usage(logs, 201) + usage(logs, 202);
  for (int i = 0; i < 6; i++) all += usage(logs, 200 + i);
  altar__logs_kept_facts(&r, NOW, &k);
  CU_ASSERT_EQUAL(k.dirs, 6);
  CU_ASSERT_EQUAL(k.bytes, all);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 3);
  CU_ASSERT_EQUAL(k.prune_next_bytes, old3);
  /* The same answer a second before the fourth turns old, a fourth after. */
  altar__logs_kept_facts(&r, NOW + 3 * 86400.0, &k);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 3);
  altar__logs_kept_facts(&r, NOW + 3 * 86400.0 + 1, &k);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 4);
  CU_ASSERT_EQUAL(k.prune_next_bytes, old3 + usage(logs, 203));
  /* The public form carries the bounds. */
  altar_kept_logs_t pk;
  altar__log_retention_kept_logs(&r, NOW, &pk);
  CU_ASSERT_EQUAL(pk.dirs, 6);
  CU_ASSERT_EQUAL(pk.prune_next_dirs, 3);
  CU_ASSERT_EQUAL(pk.prune_next_bytes, old3);
  CU_ASSERT_EQUAL(pk.keep_dirs, 1000);
  CU_ASSERT_EQUAL(pk.keep_bytes, 1u << 30);
  CU_ASSERT_EQUAL(pk.keep_age_s, 14 * 86400.0);
  /* A task kept now is counted at once (the index changed). */
  make_kept(logs, 206, 100, NOW);
  key_of(206, key);
  altar__logs_keep(logs, &r, key, NOW, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 3); /* a keep prunes the old end too */
  CU_ASSERT_EQUAL(f.bytes_removed, old3);
  altar__logs_kept_facts(&r, NOW, &k);
  CU_ASSERT_EQUAL(k.dirs, 4);
  CU_ASSERT_EQUAL(k.bytes, all - old3 + usage(logs, 206));
  CU_ASSERT_EQUAL(k.prune_next_dirs, 0);
  CU_ASSERT_EQUAL(k.prune_next_bytes, 0);
  CU_ASSERT(!kept(logs, 200) && !kept(logs, 201) && !kept(logs, 202) && kept(logs, 203));
  /* The interval's prune, a week on: 203 and 204 announced, then removed. */
  double later = NOW + 7 * 86400.0;
  altar__logs_kept_facts(&r, later, &k);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 2);
  uint64_t next = k.prune_next_bytes;
  CU_ASSERT_EQUAL(next, usage(logs, 203) + usage(logs, 204));
  altar__logs_prune(logs, &r, 1, later, NULL, NULL, &f);
  CU_ASSERT_EQUAL(f.dirs_removed, 2);
  CU_ASSERT_EQUAL(f.bytes_removed, next);
  altar__logs_kept_facts(&r, later, &k);
  CU_ASSERT_EQUAL(k.dirs, 2);
  CU_ASSERT_EQUAL(k.prune_next_dirs, 0);
  CU_ASSERT_EQUAL(k.prune_next_bytes, 0);
  altar__log_retention_clear(&r);
  free(logs);
}

/* The process backend prunes its data root's logs at open by its
 * settings; logs_keep, logs_keep_count and logs_keep_days are its keys,
 * and a misspelt one is refused by name. */
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
  altar_strmap_set(&cfg, "logs_keep_count", "2");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT(!kept(logs, 20) && !kept(logs, 21));
  CU_ASSERT(kept(logs, 22) && kept(logs, 23));
  /* What it keeps, against its bounds, from the index its open built. */
  altar_kept_logs_t k;
  CU_ASSERT_EQUAL(altar_backend_kept_logs(be, &k), ALTAR_OK);
  CU_ASSERT_EQUAL(k.dirs, 2);
  CU_ASSERT_EQUAL(k.bytes, usage(logs, 22) + usage(logs, 23));
  CU_ASSERT_EQUAL(k.prune_next_dirs, 0);
  CU_ASSERT_EQUAL(k.keep_dirs, 2);
  CU_ASSERT_EQUAL(k.keep_bytes, ALTAR_LOGS_KEEP_DEFAULT);
  CU_ASSERT_EQUAL(k.keep_age_s, ALTAR_LOGS_KEEP_DAYS_DEFAULT * 86400.0);
  altar_backend_close(be);
  altar_strmap_set(&cfg, "logs_keep", "tiny");
  CU_ASSERT(altar_backend_open(&altar_backend_process_ops, &cfg, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "backend.logs_keep:") != NULL);
  altar_strmap_clear(&cfg);
  altar_strmap_set(&cfg, "data_root", data);
  altar_strmap_set(&cfg, "logs_keep_cnt", "5");
  CU_ASSERT(altar_backend_open(&altar_backend_process_ops, &cfg, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "backend.logs_keep_cnt: unknown key for the process backend (did you mean "
                             "\"logs_keep_count\"?)") != NULL);
  altar_strmap_clear(&cfg);
}

/* Runs argv on be until it ends, then reclaims it (what a worker does
 * once the task's end is acknowledged); its key into key. */
static void run_and_reclaim(altar_backend_t *be, const char *script, char key[ALTAR_TASK_KEY_LEN + 1]) {
  altar_spec_t *s = altar_spec_new("retention", "img");
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, script);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_spec_identity(s, key, &err) == 0);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_status_t st = {0};
  for (int i = 0; i < 4000; i++) {
    altar_status_clear(&st);
    CU_ASSERT_EQUAL_FATAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
    if (altar_state_terminal(st.state)) break;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT(st.state == ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* A run that wrote nothing keeps nothing once reclaimed (no empty directory
 * per task); one that wrote keeps its output, within logs_keep_count. */
static void test_process_reclaim_keeps_only_output(void) {
  char data[4096], dir[4400];
  snprintf(data, sizeof data, "%s/reclaim", root);
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data);
  altar_strmap_set(&cfg, "logs_keep_count", "2");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  CU_ASSERT_FATAL(be != NULL);
  char key[ALTAR_TASK_KEY_LEN + 1], keys[3][ALTAR_TASK_KEY_LEN + 1];
  run_and_reclaim(be, "true", key);
  snprintf(dir, sizeof dir, "%s/logs/%s", data, key);
  CU_ASSERT(access(dir, F_OK) != 0);
  for (int i = 0; i < 3; i++) {
    char script[64];
    snprintf(script, sizeof script, "echo output %d", i);
    run_and_reclaim(be, script, keys[i]);
  }
  /* Two kept: the oldest went when the third was kept. */
  snprintf(dir, sizeof dir, "%s/logs/%s/stdout", data, keys[0]);
  CU_ASSERT(access(dir, F_OK) != 0);
  for (int i = 1; i < 3; i++) {
    snprintf(dir, sizeof dir, "%s/logs/%s/stdout", data, keys[i]);
    CU_ASSERT(access(dir, F_OK) == 0);
  }
  /* Reclaimed runs hold no slot: the backend's live set is empty again. */
  altar_capacity_t cap = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  altar_resources_t cpu = {.count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 4);
  altar_capacity_clear(&cap);
  altar_backend_close(be);
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
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
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
  altar_backend_t *be2 = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
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
  ALTAR_TEST(test_count_bound);
  ALTAR_TEST(test_size_counts_empty_dirs);
  ALTAR_TEST(test_only_our_files);
  ALTAR_TEST(test_rewritten_moves_to_new_end);
  ALTAR_TEST(test_index_bounded);
  ALTAR_TEST(test_settings_and_interval);
  ALTAR_TEST(test_kept_facts_announce_the_prune);
  ALTAR_TEST(test_process_backend_prunes_at_create);
  ALTAR_TEST(test_process_keeps_running_task_output);
  ALTAR_TEST(test_process_reclaim_keeps_only_output);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
