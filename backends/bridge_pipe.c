/* The JSON Lines helper process behind the modal and python backends
 * (bridge_pipe.h). */
#include "bridge_pipe.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long a helper whose stdin closed has to exit before it is killed. */
#define STOP_GRACE_STEPS 50
#define STOP_STEP_NS 20000000L

void altar__pipe_init(altar__pipe_t *p, const char *label, size_t max_reply) {
  memset(p, 0, sizeof *p);
  p->label = label;
  p->max_reply = max_reply;
  p->fd = -1;
}

int altar__pipe_spawn(altar__pipe_t *p, char *const argv[], char *const envp[], altar_error_t *err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return altar_error_set(err, ALTAR_EIO, "%s: socketpair: %s", p->label, strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp ? envp : environ);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    return altar_error_set(err, ALTAR_ECONFIG, "%s: cannot run %s: %s", p->label, argv[0], strerror(rc));
  }
  p->pid = pid;
  p->fd = sv[0];
  altar_buf_reset(&p->in);
  return ALTAR_OK;
}

void altar__pipe_stop(altar__pipe_t *p) {
  if (p->fd >= 0) close(p->fd); /* EOF on its stdin: the helper exits */
  p->fd = -1;
  if (p->pid > 0) {
    for (int i = 0; i < STOP_GRACE_STEPS; i++) {
      if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
        p->pid = 0;
        break;
      }
      struct timespec ts = {0, STOP_STEP_NS};
      nanosleep(&ts, NULL);
    }
    if (p->pid > 0) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, NULL, 0);
    }
  }
  p->pid = 0;
  altar_buf_reset(&p->in);
}

void altar__pipe_free(altar__pipe_t *p) {
  altar__pipe_stop(p);
  altar_buf_free(&p->in);
}

static long ms_since(const struct timespec *start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

int altar__pipe_read_line(altar__pipe_t *p, long limit_ms, char **pline, altar_error_t *err) {
  *pline = NULL;
  if (p->fd < 0) return altar_error_set_retriable(err, ALTAR_EBACKEND, "%s: not running", p->label);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    void *nl = p->in.len ? memchr(p->in.data, '\n', p->in.len) : NULL;
    if (nl) {
      size_t len = (size_t)((uint8_t *)nl - p->in.data);
      char *line = malloc(len + 1);
      if (!line) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", p->label);
      memcpy(line, p->in.data, len);
      line[len] = '\0';
      memmove(p->in.data, p->in.data + len + 1, p->in.len - len - 1);
      p->in.len -= len + 1;
      *pline = line;
      return ALTAR_OK;
    }
    if (p->in.len > p->max_reply)
      return altar_error_set(err, ALTAR_ETOOBIG, "%s: reply longer than %zu bytes", p->label, p->max_reply);
    long waited = ms_since(&start);
    if (waited >= limit_ms)
      return altar_error_set_retriable(err, ALTAR_ETIMEOUT, "%s: no reply within %ld ms", p->label, limit_ms);
    struct pollfd pfd = {p->fd, POLLIN, 0};
    long left = limit_ms - waited;
    int pr = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (pr <= 0) continue; /* EINTR or the deadline: checked above */
    char buf[65536];
    ssize_t n = recv(p->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return altar_error_set_retriable(err, ALTAR_EBACKEND, "%s: exited (see its message on stderr)", p->label);
    if (altar_buf_append(&p->in, buf, (size_t)n))
      return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", p->label);
  }
}

int altar__pipe_send(altar__pipe_t *p, const char *text, altar_error_t *err) {
  if (p->fd < 0) return altar_error_set_retriable(err, ALTAR_EBACKEND, "%s: not running", p->label);
  size_t len = strlen(text), off = 0;
  char *msg = malloc(len + 1);
  if (!msg) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", p->label);
  memcpy(msg, text, len);
  msg[len++] = '\n'; /* one request per line */
  int rc = ALTAR_OK;
  while (!rc && off < len) {
    ssize_t w = send(p->fd, msg + off, len - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "%s: gone: %s", p->label, strerror(errno));
    else off += (size_t)w;
  }
  free(msg);
  return rc;
}

char *altar__pipe_interrupt(altar__pipe_t *p, long grace_ms) {
  if (p->pid > 0) kill(p->pid, SIGINT);
  char *line = NULL;
  altar_error_t ignored = {0};
  if (altar__pipe_read_line(p, grace_ms, &line, &ignored) != ALTAR_OK) altar__pipe_stop(p);
  return line;
}
