/* `docker`: a failed container's output, kept and quoted in its failure. */
#include "backends/docker_int.h"

#include "altar/log_tail.h"
#include "altar/pools.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void keep(const char *dir, const char *name, const char *text, size_t n) {
  char path[PATH_MAX + 80], tmp[PATH_MAX + 96];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = true;
  for (const char *p = text; n && ok;) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) p += w, n -= (size_t)w;
  }
  if (close(fd) < 0) ok = false;
  if (!ok || rename(tmp, path) < 0) unlink(tmp);
}

void altar__docker_add_logs(altar_docker_t *dk, const char *id, const char *task_key, altar_failure_t *f) {
  const char *args[] = {"logs", id, NULL};
  altar_cmd_result_t res = {0};
  altar_error_t err = {0};
  if (altar__docker_cli(dk, args, &res, &err) < 0 || res.exit_code != 0) {
    altar_cmd_result_clear(&res);
    return;
  }
  const char *out = res.out ? res.out : "", *er = res.err ? res.err : "";
  size_t on = res.out ? res.out_len : 0, en = res.err ? res.err_len : 0;
  if (task_key[0]) {
    char dir[PATH_MAX + 80];
    snprintf(dir, sizeof dir, "%s/logs", dk->data_root);
    (void)mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/logs/%s", dk->data_root, task_key);
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
      size_t ron = on, ren = en;
      char *ro = altar_redact_env_n(out, &ron, (const char *const *)environ);
      char *re = altar_redact_env_n(er, &ren, (const char *const *)environ);
      if (ro && ron) keep(dir, "stdout", ro, ron);
      if (re && ren) keep(dir, "stderr", re, ren);
      free(ro);
      free(re);
      /* A container that printed nothing keeps nothing; other output is
       * the newest retention knows. */
      if (rmdir(dir) < 0 && errno != ENOENT) {
        char logs[PATH_MAX + 80];
        snprintf(logs, sizeof logs, "%s/logs", dk->data_root);
        altar__logs_keep(logs, &dk->retention, task_key, (double)time(NULL), NULL, NULL, NULL);
      }
    }
  }
  char *d = altar_detail_with_output(f->detail, er, en, out, on, (const char *const *)environ, ALTAR_BOUND_DETAIL);
  if (d) {
    free(f->detail);
    f->detail = d;
  }
  altar_cmd_result_clear(&res);
}

void altar__docker_logs_prune_if_due(altar_docker_t *dk) {
  struct timespec mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  double now = (double)mono.tv_sec + mono.tv_nsec / 1e9;
  if (!altar__log_retention_due(&dk->retention, now)) return;
  char dir[PATH_MAX + 80];
  snprintf(dir, sizeof dir, "%s/logs", dk->data_root);
  altar__logs_prune(dir, &dk->retention, now, (double)time(NULL), NULL, NULL, NULL);
}
