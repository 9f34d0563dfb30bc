/* `process`: a task's output kept by task key (<data_root>/logs/<key>/),
 * and the failure detail made from its tails. */
#include "process_int.h"

#include "altar/log_tail.h"
#include "altar/pools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    d = altar_detail_with_output(base, err, en, out, on, (const char *const *)environ,
                                 ALTAR_BOUND_DETAIL);
  }
  free(err);
  free(out);
  return d;
}
