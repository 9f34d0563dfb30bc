/* `process`: a task's output kept by task key (<data_root>/logs/<key>/),
 * and the failure detail made from its tails. */
#include "process_int.h"

#include "altar/codec.h"
#include "altar/log_tail.h"
#include "altar/pools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Read window per stream: larger than what the detail shows, so a secret cut
 * at the window's start lies in the part the detail drops. */
#define LOG_WINDOW 8192

void altar__proc_log_dir(const altar_process_t *p, const char *key, char *buf, size_t size) {
  snprintf(buf, size, "%s/%s", p->logs_dir, key);
}

/* The last LOG_WINDOW bytes of dir/name into buf; their count (0: none). */
static size_t read_end(const char *dir, const char *name, char *buf) {
  char path[ALTAR_PATH_BUF + 16];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  struct stat st;
  size_t len = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    off_t off = st.st_size > LOG_WINDOW ? st.st_size - LOG_WINDOW : 0;
    while (len < LOG_WINDOW) {
      ssize_t r = pread(fd, buf + len, LOG_WINDOW - len, off + (off_t)len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += (size_t)r;
    }
  }
  close(fd);
  return len;
}

char *altar__proc_detail_with_logs(const char *base, const char *dir) {
  char *err = malloc(LOG_WINDOW), *out = malloc(LOG_WINDOW);
  char *d = NULL;
  if (err && out) {
    size_t en = read_end(dir, "stderr", err), on = read_end(dir, "stdout", out);
    d = altar_detail_with_output(base, err, en, out, on, (const char *const *)environ, ALTAR_BOUND_DETAIL);
  }
  free(err);
  free(out);
  return d;
}

/* Whether the environment holds a value redaction would replace. Asked at
 * every finished task, so the answer is kept while the environment's
 * entries stay the same strings (setenv and putenv replace an entry's
 * pointer): reading every name for every task was a tenth of a short
 * task's cost in the worker. */
static bool env_has_secret(void) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t known_print;
  static bool known, known_answer;
  uint64_t print = 14695981039346656037u; /* FNV-1a over the entries' addresses */
  for (char **e = environ; e && *e; e++) print = (print ^ (uint64_t)(uintptr_t)*e) * 1099511628211u;
  print = (print ^ (uint64_t)(uintptr_t)environ) * 1099511628211u;
  pthread_mutex_lock(&mu);
  bool answer = known_answer, hit = known && known_print == print;
  pthread_mutex_unlock(&mu);
  if (hit) return answer;
  answer = false;
  for (char **e = environ; e && *e && !answer; e++) {
    const char *eq = strchr(*e, '=');
    answer = eq && strlen(eq + 1) >= ALTAR_REDACT_MIN && altar_env_name_secret(*e, (size_t)(eq - *e));
  }
  pthread_mutex_lock(&mu);
  known = true;
  known_print = print;
  known_answer = answer;
  pthread_mutex_unlock(&mu);
  return answer;
}

/* Rewrites dir/name with the secret values replaced, when it holds one. */
static void redact_file(const char *dir, const char *name) {
  char path[ALTAR_PATH_BUF + 16], tmp[ALTAR_PATH_BUF + 32];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) return;
  size_t len = 0;
  char *text = altar__proc_read_small(path, (size_t)st.st_size, &len);
  if (!text) return;
  size_t rlen = len;
  char *red = altar_redact_env_n(text, &rlen, (const char *const *)environ);
  if (red && (rlen != len || memcmp(red, text, len))) {
    snprintf(tmp, sizeof tmp, "%s/.%s.redacted", dir, name);
    if (altar__proc_write_file(tmp, red, rlen) == 0) {
      if (rename(tmp, path) < 0) unlink(tmp);
    } else {
      unlink(tmp);
    }
  }
  free(red);
  free(text);
}

void altar__proc_redact_logs(const char *dir) {
  if (!env_has_secret()) return;
  redact_file(dir, "stdout");
  redact_file(dir, "stderr");
}

/* A key's output stays while its supervisor lives (asked under the keys
 * lock, so no submit of the key starts between the check and the removal). */
static bool key_running(const char *key, void *ctx) {
  char id[ALTAR_PROC_ID_MAX + 1];
  return altar__proc_keys_find_live(ctx, key, id);
}

void altar__proc_logs_prune(altar_process_t *p, double mono, altar_logs_prune_facts_t *pfacts) {
  altar__proc_keys_lock(p);
  altar__logs_prune(p->logs_dir, &p->retention, mono, (double)time(NULL), key_running, p, pfacts);
  altar__proc_keys_unlock(p);
}

void altar__proc_logs_prune_if_due(altar_process_t *p, double now) {
  if (altar__log_retention_due(&p->retention, now)) altar__proc_logs_prune(p, now, NULL);
}

void altar__proc_logs_kept(altar_process_t *p, const char *key) {
  char dir[ALTAR_PATH_BUF];
  altar__proc_log_dir(p, key, dir, sizeof dir);
  /* The supervisor makes it at the run's first byte of output: a run that
   * wrote nothing has none (or, from an earlier version, an empty one). */
  if (rmdir(dir) == 0 || errno == ENOENT) return;
  altar__logs_keep(p->logs_dir, &p->retention, key, (double)time(NULL), key_running, p, NULL);
}
