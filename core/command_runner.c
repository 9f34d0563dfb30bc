/* The real CommandRunner: posix_spawn with stdout/stderr on pipes, drained
 * with poll() under a deadline; a command past its deadline is killed with its
 * whole process group. */
#include "altar/clock.h"
#include "altar/command_runner.h"
#include "core/unconst.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void altar_cmd_result_clear(altar_cmd_result_t *res) {
  if (!res) return;
  free(res->out);
  free(res->err);
  memset(res, 0, sizeof *res);
}

static char *dup_or_empty(const char *s, size_t *plen) {
  size_t n = s ? strlen(s) : 0;
  char *p = malloc(n + 1);
  if (!p) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  *plen = n;
  return p;
}

int altar_cmd_result_set(altar_cmd_result_t *res, int exit_code, const char *out, const char *err) {
  memset(res, 0, sizeof *res);
  res->exit_code = exit_code;
  res->out = dup_or_empty(out, &res->out_len);
  res->err = dup_or_empty(err, &res->err_len);
  if (!res->out || !res->err) {
    altar_cmd_result_clear(res);
    return ALTAR_ENOMEM;
  }
  return 0;
}

char *altar_cmd_argv_render(const char *const argv[], char *buf, size_t cap) {
  size_t used = 0;
  if (cap == 0) return buf;
  buf[0] = '\0';
  for (size_t i = 0; argv && argv[i]; i++) {
    size_t n = strlen(argv[i]);
    size_t need = n + (i ? 1 : 0);
    if (used + need + 4 > cap) {
      if (used + 4 <= cap) memcpy(buf + used, "...", 4);
      return buf;
    }
    if (i) buf[used++] = ' ';
    memcpy(buf + used, argv[i], n);
    used += n;
    buf[used] = '\0';
  }
  return buf;
}

/* One captured stream: the kept bytes plus whether any were dropped. */
typedef struct capture {
  char *data;
  size_t len, cap, max;
  bool truncated;
  int fd;
} capture_t;

static int capture_read(capture_t *c) {
  char tmp[16384];
  ssize_t n = read(c->fd, tmp, sizeof tmp);
  if (n < 0) return (errno == EINTR || errno == EAGAIN) ? 1 : -1;
  if (n == 0) return 0;
  size_t keep = (size_t)n;
  if (c->len + keep > c->max) {
    keep = c->max - c->len;
    c->truncated = true;
  }
  if (keep) {
    if (c->len + keep + 1 > c->cap) {
      size_t ncap = c->cap ? c->cap : 4096;
      while (ncap < c->len + keep + 1) ncap *= 2;
      char *p = realloc(c->data, ncap);
      if (!p) return -2;
      c->data = p;
      c->cap = ncap;
    }
    memcpy(c->data + c->len, tmp, keep);
    c->len += keep;
  }
  return 1;
}

static int finish_capture(capture_t *c, char **pdata, size_t *plen, bool *ptrunc) {
  if (!c->data) {
    c->data = malloc(1);
    if (!c->data) return ALTAR_ENOMEM;
  }
  c->data[c->len] = '\0';
  *pdata = c->data;
  *plen = c->len;
  *ptrunc = c->truncated;
  c->data = NULL;
  return 0;
}

static int real_run(void *impl, const char *const argv[], const altar_cmd_opts_t *opts, altar_cmd_result_t *pres,
                    altar_error_t *err) {
  (void)impl;
  memset(pres, 0, sizeof *pres);
  pres->exit_code = -1;
  if (!argv || !argv[0] || !argv[0][0]) return altar_error_set(err, ALTAR_EINVAL, "command: argv must name a program");

  double timeout_s = opts ? opts->timeout_s : 0;
  size_t max_out = (opts && opts->max_output) ? opts->max_output : ALTAR_CMD_DEFAULT_MAX_OUTPUT;

  int outp[2] = {-1, -1}, errp[2] = {-1, -1};
  if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
    int e = errno;
    if (outp[0] >= 0) {
      close(outp[0]);
      close(outp[1]);
    }
    return altar_error_set(err, ALTAR_EIO, "command %s: pipe: %s", argv[0], strerror(e));
  }

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  /* Own process group, so a timeout kills everything the command started;
   * default signal dispositions and an empty mask, whatever the caller set. */
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, ALTAR__UNCONST(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(outp[1]);
  close(errp[1]);
  if (rc != 0) {
    close(outp[0]);
    close(errp[0]);
    if (rc == ENOENT || rc == EACCES || rc == ENOEXEC)
      return altar_error_set(err, ALTAR_ENOTFOUND, "command %s: cannot execute: %s", argv[0], strerror(rc));
    return altar_error_set(err, ALTAR_EIO, "command %s: spawn: %s", argv[0], strerror(rc));
  }

  capture_t cap[2] = {{.max = max_out, .fd = outp[0]}, {.max = max_out, .fd = errp[0]}};
  double deadline = timeout_s > 0 ? altar_mono_s() + timeout_s : 0;
  double drain_deadline = 0;
  bool killed = false, nomem = false;
  int open_fds = 2;
  while (open_fds > 0) {
    struct pollfd pfd[2];
    nfds_t n = 0;
    int idx[2];
    for (int i = 0; i < 2; i++) {
      if (cap[i].fd < 0) continue;
      pfd[n].fd = cap[i].fd;
      pfd[n].events = POLLIN;
      pfd[n].revents = 0;
      idx[n++] = i;
    }
    int wait_ms = -1;
    if (killed) {
      /* A descendant that left the group could hold a pipe open forever. */
      double left = drain_deadline - altar_mono_s();
      if (left <= 0) break;
      wait_ms = (int)(left * 1000.0) + 1;
    } else if (deadline > 0) {
      double left = deadline - altar_mono_s();
      if (left <= 0) {
        /* Past the deadline: kill the group, then keep draining to EOF. */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        killed = true;
        drain_deadline = altar_mono_s() + 5.0;
        continue;
      }
      wait_ms = (int)(left * 1000.0) + 1;
    }
    int pr = poll(pfd, n, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t k = 0; k < n; k++) {
      if (!pfd[k].revents) continue;
      capture_t *c = &cap[idx[k]];
      int r = capture_read(c);
      if (r == -2) nomem = true;
      if (r <= 0) {
        close(c->fd);
        c->fd = -1;
        open_fds--;
      }
    }
  }
  for (int i = 0; i < 2; i++)
    if (cap[i].fd >= 0) close(cap[i].fd);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      free(cap[0].data);
      free(cap[1].data);
      return altar_error_set(err, ALTAR_EIO, "command %s: waitpid: %s", argv[0], strerror(errno));
    }
  }
  if (WIFEXITED(status)) {
    pres->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    pres->term_signal = WTERMSIG(status);
  }
  pres->timed_out = killed;
  if (nomem || finish_capture(&cap[0], &pres->out, &pres->out_len, &pres->out_truncated) != 0 ||
      finish_capture(&cap[1], &pres->err, &pres->err_len, &pres->err_truncated) != 0) {
    free(cap[0].data);
    free(cap[1].data);
    altar_cmd_result_clear(pres);
    return altar_error_set(err, ALTAR_ENOMEM, "command %s: output capture", argv[0]);
  }
  if (killed) return altar_error_set(err, ALTAR_ETIMEOUT, "command %s: killed after %.1fs", argv[0], timeout_s);
  return 0;
}

static const altar_command_runner_ops_t real_ops = {
    .name = "posix_spawn",
    .run = real_run,
};

static const altar_command_runner_t real_runner = {.ops = &real_ops, .impl = NULL};

const altar_command_runner_t *altar_command_runner_default(void) { return &real_runner; }
