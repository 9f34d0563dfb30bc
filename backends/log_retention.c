/* Kept task output: bounded by total size and by age, oldest first, never
 * a running task's. */
#include "backends/log_retention.h"

#include "altar/codec.h"
#include "altar/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A number with an optional binary or decimal-looking suffix (both binary:
 * "512M" and "512MiB" are the same); false when not one. */
static bool parse_bytes(const char *s, uint64_t *pv) {
  char *end = NULL;
  errno = 0;
  if (!s || *s < '0' || *s > '9') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return false;
  static const struct {
    const char *suffix;
    unsigned shift;
  } units[] = {{"", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].suffix)) continue;
    if (v > (UINT64_MAX >> units[i].shift)) return false;
    *pv = (uint64_t)v << units[i].shift;
    return true;
  }
  return false;
}

bool altar__log_retention_parse(const altar_strmap_t *cfg, altar_log_retention_t *pr, char *errstr,
                                size_t errstr_size) {
  pr->keep_bytes = ALTAR_LOGS_KEEP_DEFAULT;
  pr->max_age_s = ALTAR_LOGS_KEEP_DAYS_DEFAULT * 86400.0;
  pr->last_prune = -1;
  const char *keep = cfg ? altar_strmap_get(cfg, "logs_keep") : NULL;
  const char *days = cfg ? altar_strmap_get(cfg, "logs_keep_days") : NULL;
  if (keep) {
    uint64_t v = 0;
    if (!parse_bytes(keep, &v) || v < ALTAR_LOGS_KEEP_MIN || v > ALTAR_LOGS_KEEP_MAX) {
      snprintf(errstr, errstr_size,
               "backend.logs_keep: '%.40s' is not a size from 1MiB to 1024TiB (bytes, or a number with K, M, G, "
               "T, KiB, MiB, GiB, TiB)",
               keep);
      return false;
    }
    pr->keep_bytes = v;
  }
  if (days) {
    char *end = NULL;
    errno = 0;
    long d = strtol(days, &end, 10);
    if (!*days || *end || errno || d < 0 || d > ALTAR_LOGS_KEEP_DAYS_MAX) {
      snprintf(errstr, errstr_size, "backend.logs_keep_days: '%.40s' is not an integer in [0, %d] (0: no age bound)",
               days, ALTAR_LOGS_KEEP_DAYS_MAX);
      return false;
    }
    pr->max_age_s = (double)d * 86400.0;
  }
  return true;
}

bool altar__log_retention_due(altar_log_retention_t *r, double now) {
  if (r->last_prune >= 0 && now - r->last_prune < ALTAR_LOGS_PRUNE_INTERVAL_S) return false;
  r->last_prune = now;
  return true;
}

typedef struct kept {
  char key[ALTAR_TASK_KEY_LEN + 1];
  uint64_t bytes;
  double written; /* newest mtime of the directory and its files */
} kept_t;

static bool is_task_key(const char *name) {
  size_t n = 0;
  for (; name[n]; n++)
    if (!((name[n] >= '0' && name[n] <= '9') || (name[n] >= 'a' && name[n] <= 'f'))) return false;
  return n == ALTAR_TASK_KEY_LEN;
}

static double mtime_of(const struct stat *st) { return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9; }

/* Size and last write of the directory name in logs (one level: a task's
 * streams); false when it is not a directory. */
static bool measure(int logs, const char *name, kept_t *k) {
  struct stat st;
  if (fstatat(logs, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) return false;
  k->bytes = 0;
  k->written = mtime_of(&st);
  int fd = openat(logs, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return true;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) continue;
    k->bytes += (uint64_t)st.st_size;
    if (mtime_of(&st) > k->written) k->written = mtime_of(&st);
  }
  closedir(d);
  return true;
}

/* Removes the files of logs/name, then the directory (what is not a plain
 * file is left, and with it the directory). */
static void remove_kept(int logs, const char *name) {
  int fd = openat(logs, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)))
      if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) (void)unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
  } else if (fd >= 0) {
    close(fd);
  }
  (void)unlinkat(logs, name, AT_REMOVEDIR);
}

static int by_written(const void *a, const void *b) {
  const kept_t *x = a, *y = b;
  return x->written < y->written ? -1 : x->written > y->written ? 1 : strcmp(x->key, y->key);
}

void altar__logs_prune(const char *logs_dir, const altar_log_retention_t *r, double now, altar_logs_running_fn running,
                       void *ctx, altar_logs_prune_facts_t *pfacts) {
  altar_logs_prune_facts_t facts = {0};
  kept_t *ks = NULL;
  size_t n = 0, cap = 0;
  int logs = open(logs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = logs >= 0 ? fdopendir(logs) : NULL;
  if (!d) {
    if (logs >= 0) close(logs);
    if (pfacts) *pfacts = facts;
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)) && n < ALTAR_LOGS_PRUNE_MAX_DIRS) {
    if (!is_task_key(de->d_name)) continue; /* only ours: <task key> */
    if (ALTAR_GROW(ks, cap, n + 1)) break;  /* out of memory: prune what was measured */
    memcpy(ks[n].key, de->d_name, ALTAR_TASK_KEY_LEN + 1);
    if (!measure(dirfd(d), de->d_name, &ks[n])) continue;
    facts.bytes_seen += ks[n].bytes;
    n++;
  }
  facts.dirs_seen = n;
  if (n) qsort(ks, n, sizeof *ks, by_written); /* ks is NULL when nothing was measured */
  uint64_t total = facts.bytes_seen;
  for (size_t i = 0; i < n; i++) {
    bool old = r->max_age_s > 0 && now - ks[i].written > r->max_age_s;
    bool over = total > r->keep_bytes;
    if (!old && !over) continue;
    if (running && running(ks[i].key, ctx)) {
      facts.dirs_running++;
      continue;
    }
    remove_kept(dirfd(d), ks[i].key);
    total -= ks[i].bytes;
    facts.bytes_removed += ks[i].bytes;
    facts.dirs_removed++;
    if (old) facts.removed_for_age++;
    else facts.removed_for_size++;
  }
  closedir(d);
  free(ks);
  if (pfacts) *pfacts = facts;
}
