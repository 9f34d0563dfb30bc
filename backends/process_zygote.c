/* `process`: the long-lived parent of supervisors. The backend starts the
 * supervisor program once in this mode; for each task it sends the launch
 * parameters and the task file's locked descriptor, and this process forks
 * a supervisor, which runs altar__proc_supervise as an exec'd one would.
 * Forking this small static program costs a fraction of exec'ing a new
 * one per task. The supervisors are in sessions of their own and hold their
 * tasks' locks, so nothing of theirs depends on this process: when it dies
 * (or exits, at the end of the socket: the worker is gone) they go on, and
 * are re-parented like the exec'd ones. It reaps the supervisors it forked.
 * In the supervisor program only, not in the library. */
#include "process_int.h"
#include "process_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The next NUL-terminated string at *pat of buf[0, len); NULL past the end. */
static char *next_str(char *buf, size_t len, size_t *pat) {
  if (*pat >= len) return NULL;
  char *s = buf + *pat;
  char *nul = memchr(s, '\0', len - *pat);
  if (!nul) return NULL;
  *pat = (size_t)(nul - buf) + 1;
  return s;
}

/* Copies s into dst[size]; false when it does not fit. */
static bool copy_str(char *dst, size_t size, const char *s) {
  size_t n = strlen(s);
  if (n >= size) return false;
  memcpy(dst, s, n + 1);
  return true;
}

/* Fills l from a request of len bytes; argv and envp point into buf
 * (*pvec: their array, malloc'd). 0 or an errno value. */
static int decode(char *buf, size_t len, altar_proc_launch_t *l, char ***pvec) {
  altar_proc_zyg_req_t rq;
  if (len < sizeof rq) return EINVAL;
  memcpy(&rq, buf, sizeof rq);
  /* Each count is bounded by the bytes (every string takes at least one). */
  if (rq.magic != ALTAR_PROC_ZYG_MAGIC || rq.argc == 0 || rq.argc > len || rq.envc > len) return EINVAL;
  size_t at = sizeof rq;
  const char *task_dir = next_str(buf, len, &at), *cg = next_str(buf, len, &at), *logs = next_str(buf, len, &at);
  if (!task_dir || !cg || !logs || !copy_str(l->task_dir, sizeof l->task_dir, task_dir) ||
      !copy_str(l->cgroup_dir, sizeof l->cgroup_dir, cg) || !copy_str(l->log_dir, sizeof l->log_dir, logs))
    return EINVAL;
  char **vec = calloc((size_t)rq.argc + rq.envc + 2, sizeof *vec);
  if (!vec) return ENOMEM;
  for (uint32_t i = 0; i < rq.argc + rq.envc; i++) {
    char *s = next_str(buf, len, &at);
    if (!s) {
      free(vec);
      return EINVAL;
    }
    vec[i < rq.argc ? i : i + 1] = s; /* argv, NULL, envp, NULL */
  }
  if (rq.timeout_s < 0 || rq.memory_mb < 0 || rq.log_cap < 64 || rq.log_cap > (1ull << 32) || rq.cgroup_version < 0 ||
      rq.cgroup_version > 2) {
    free(vec);
    return EINVAL;
  }
  l->argv = vec;
  l->envp = vec + rq.argc + 1;
  l->timeout_s = rq.timeout_s;
  l->memory_mb = rq.memory_mb;
  l->log_cap = (size_t)rq.log_cap;
  l->cgroup_version = rq.cgroup_version;
  l->signals_default = true; /* we were exec'd with them reset and set none */
  *pvec = vec;
  return 0;
}

static void reply(int sock, pid_t pid, int err, int pidfd) {
  altar_proc_zyg_rep_t rep = {.pid = pid, .err = err};
  struct iovec iov = {.iov_base = &rep, .iov_len = sizeof rep};
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (pidfd >= 0) {
    memset(&ctl, 0, sizeof ctl);
    m.msg_control = ctl.b;
    m.msg_controllen = sizeof ctl.b;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pidfd, sizeof pidfd);
  }
  /* The backend gone mid-request: the loop sees the end of the socket next. */
  while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR) {}
}

/* The received descriptors: the first SCM_RIGHTS one is the lock (-1: none);
 * any other is closed. */
static int take_fds(struct msghdr *m) {
  int lock = -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (lock < 0) lock = fd;
      else close(fd);
    }
  }
  return lock;
}

/* One request: fork its supervisor and say so. */
static void handle(int sock, int sfd, char *buf, size_t len, int lock) {
  altar_proc_launch_t *l = calloc(1, sizeof *l);
  char **vec = NULL;
  int err = l ? 0 : ENOMEM;
  if (!err) err = lock < 0 ? EINVAL : decode(buf, len, l, &vec);
  if (err) {
    if (lock >= 0) close(lock);
    free(l);
    reply(sock, -1, err, -1);
    return;
  }
  l->lock_fd = lock;
  pid_t pid = fork();
  if (pid == 0) {
    /* The supervisor: nothing of ours but the lock goes on (supervise closes
     * the rest too); execvpe looks up the command in the task's PATH. */
    close(sock);
    close(sfd);
    environ = l->envp;
    altar__proc_supervise(l);
  }
  int e = errno;
  close(lock);
  /* Opened before we reap it: the pidfd names this very process. */
  int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
  reply(sock, pid > 0 ? pid : -1, pid > 0 ? 0 : e, pidfd);
  if (pidfd >= 0) close(pidfd);
  free(vec);
  free(l);
}

int altar__proc_zygote_serve(int sock) {
  prctl(PR_SET_NAME, "altar-zygote");
  /* Hold nothing of the worker's: not its terminal or pipes (a reader
   * waiting for their end would wait for us), not its directory. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int fd = 0; fd < 3; fd++)
      if (fd != sock) dup2(null, fd);
    if (null > 2) close(null);
  }
  if (chdir("/") < 0) return 1;
  /* Nor any descriptor the worker left open across exec (a lock among
   * them would outlive the worker's own release of it). */
  if (sock > 3) close_range(3, (unsigned)sock - 1, 0);
  close_range((unsigned)sock + 1, ~0U, 0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_SETMASK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  char *buf = malloc(ALTAR_PROC_ZYG_MSG_MAX);
  int status = sfd < 0 || !buf ? 1 : -1;
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  while (status < 0) {
    struct pollfd pf[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(pf, 2, -1) < 0 && errno != EINTR) {
      status = 1;
      break;
    }
    if (pf[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {}
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    struct iovec iov = {.iov_base = buf, .iov_len = ALTAR_PROC_ZYG_MSG_MAX};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      status = 0; /* the backend closed its end, or died */
      break;
    }
    int lock = take_fds(&m);
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
      if (lock >= 0) close(lock);
      reply(sock, -1, EMSGSIZE, -1);
      continue;
    }
    handle(sock, sfd, buf, (size_t)n, lock);
  }
  free(buf);
  if (sfd >= 0) close(sfd);
  return status;
}
