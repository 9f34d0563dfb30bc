/* `process`: the long-lived parent of supervisors. The backend starts the
 * supervisor program once in this mode; for each task it sends the launch
 * parameters and the task file's locked descriptor, and this process hands
 * them to a supervisor it keeps idle, or forks a new one. A supervisor runs
 * altar__proc_supervise_task as an exec'd one would, then, instead of
 * exiting, closes the task's lock, says it is idle, closes the task's end
 * pipe (the backend's sign that the status is final: it reads the pipe's
 * end as it read a supervisor's pidfd) and waits on its socket for the next
 * task. A process created per task
 * cost about a tenth of a short task's CPU (fork, its first writes to
 * copied pages, exit). The supervisors are in sessions of their own and
 * hold their tasks' locks, so no task depends on this process: when it dies
 * (or exits, at the end of the socket: the worker is gone) they finish
 * their tasks, see the end of their own sockets and exit. It reaps the
 * supervisors it forked. In the supervisor program only, not in the
 * library. */
#include "process_int.h"
#include "process_zygote.h"
#include "core/unconst.h"

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

/* The received descriptors: the first max into fds (the rest are closed);
 * how many came. */
static size_t take_fds(struct msghdr *m, int *fds, size_t max) {
  size_t got = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (got < max) fds[got++] = fd;
      else close(fd);
    }
  }
  return got;
}

/* ---- a supervisor kept for one task after another ----------------------- */

/* Supervisors kept idle beyond this many are let go: the backend's slots
 * bound how many it keeps busy. Beyond KEPT_MAX in all, a new one runs its
 * task only. */
#define KEPT_IDLE_MAX 64
#define KEPT_MAX 1024
#define IDLE_TOKEN 'I'

typedef struct kept {
  pid_t pid;
  int ctl; /* our end of its socket */
  bool idle;
} kept_t;

typedef struct pool {
  kept_t v[KEPT_MAX];
  size_t n;
} pool_t;

static void pool_drop(pool_t *pool, size_t i) {
  close(pool->v[i].ctl); /* it exits at the end of its socket, once its task is done */
  pool->v[i] = pool->v[--pool->n];
}

static char *no_env[] = {NULL};

/* stdin, stdout and stderr on /dev/null wherever none is open: the parent's
 * socket to the backend may have had one of those numbers, and a task's
 * descriptors must not land there. */
static void stdio_on_null(void) {
  int null = -1;
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0) {
      if (null < 0) null = open("/dev/null", O_RDWR);
      if (null >= 0 && null != fd) dup2(null, fd);
    }
  if (null > 2) close(null);
}

/* fd moved off descriptor 3, where the task's lock goes; false when it
 * cannot be. */
static bool off_3(int *fd) {
  if (*fd != 3) return true;
  int d = fcntl(3, F_DUPFD_CLOEXEC, 4);
  if (d < 0) return false;
  close(3);
  *fd = d;
  return true;
}

/* One task in a kept supervisor: its lock to 3, the task, the lock closed.
 * Then the parent hears it is idle before the task's end pipe ends: a
 * backend that submits the next task once it sees the end finds it idle.
 * The backend reads the task file once the pipe has ended, the lock free. */
static void run_kept(altar_proc_launch_t *l, int lock, int end, int *ctl) {
  if (off_3(ctl) && off_3(&end) && (lock == 3 || dup3(lock, 3, O_CLOEXEC) == 3)) {
    if (lock != 3) close(lock);
    environ = l->envp; /* execvpe looks up the command in the task's PATH */
    altar__proc_supervise_task(l);
    environ = no_env; /* l->envp is freed after the task */
    close(3);
  } else {
    close(lock);
  }
  if (chdir("/") < 0) { /* keeps no task directory busy; / is always there */
  }
  char token = IDLE_TOKEN;
  if (*ctl >= 0 && send(*ctl, &token, 1, MSG_NOSIGNAL) != 1) {
    close(*ctl);
    *ctl = -1;
  }
  close(end);
}

/* A forked supervisor's life: the first task, then each one its parent
 * sends, until the end of its socket (ctl -1: one task only). */
static void serve_tasks(altar_proc_launch_t *l, char **vec, int lock, int end, int ctl, char *buf) {
  prctl(PR_SET_NAME, "altar-supervise");
  altar__proc_supervisor_enter(l);
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int) * 4)];
  } cm;
  for (;;) {
    run_kept(l, lock, end, &ctl);
    free(vec);
    vec = NULL;
    if (ctl < 0) _exit(0);
    for (;;) {
      struct iovec iov = {.iov_base = buf, .iov_len = ALTAR_PROC_ZYG_MSG_MAX};
      struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
      ssize_t n;
      while ((n = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
      if (n <= 0) _exit(0); /* the parent is gone, or let us go */
      int fds[2] = {-1, -1};
      size_t got = take_fds(&m, fds, 2);
      memset(l, 0, sizeof *l);
      /* The parent checked the request; one that still fails here ends the
       * task's pipe with its lock free and no status ("exited without
       * recording a status", as a supervisor that died would). */
      if (got == 2 && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && decode(buf, (size_t)n, l, &vec) == 0) {
        lock = fds[0];
        end = fds[1];
        break;
      }
      for (size_t k = 0; k < got; k++) close(fds[k]);
      char token = IDLE_TOKEN;
      if (send(ctl, &token, 1, MSG_NOSIGNAL) != 1) _exit(0);
    }
  }
}

/* A new supervisor for l with its own socket to us (none when no socket can
 * be made: it runs this task only). Its pid, or -1 with errno. */
static pid_t fork_kept(pool_t *pool, int sock, int sfd, altar_proc_launch_t *l, char **vec, int lock, int end[2],
                       char *buf) {
  int sv[2] = {-1, -1};
  bool keep = pool->n < KEPT_MAX;
  if (keep && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) keep = false;
  pid_t pid = fork();
  if (pid == 0) {
    /* Nothing of ours but the task's lock and end and its own socket goes on. */
    close(sock);
    close(sfd);
    close(end[0]);
    for (size_t i = 0; i < pool->n; i++) close(pool->v[i].ctl);
    if (keep) close(sv[0]);
    stdio_on_null();
    serve_tasks(l, vec, lock, end[1], keep ? sv[1] : -1, buf);
  }
  int e = errno;
  if (keep) {
    close(sv[1]);
    if (pid > 0) pool->v[pool->n++] = (kept_t){.pid = pid, .ctl = sv[0], .idle = false};
    else close(sv[0]);
  }
  errno = e;
  return pid;
}

/* The request to an idle supervisor, looked for from the pool's end. Its
 * pid, or 0 when none took it. */
static pid_t hand_to_idle(pool_t *pool, const char *buf, size_t len, int lock, int end) {
  int fds[2] = {lock, end};
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof fds)];
  } cm;
  for (size_t i = pool->n; i-- > 0;) {
    if (!pool->v[i].idle) continue;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = ALTAR__UNCONST(buf), .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t n;
    while ((n = sendmsg(pool->v[i].ctl, &m, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR) {}
    if (n == (ssize_t)len) {
      pool->v[i].idle = false;
      return pool->v[i].pid;
    }
    pool_drop(pool, i); /* gone, or not reading: not trusted with a task */
  }
  return 0;
}

/* One request: a supervisor runs it; the reply carries the read end of the
 * task's end pipe. */
static void handle(int sock, int sfd, pool_t *pool, char *buf, size_t len, int lock) {
  altar_proc_launch_t *l = calloc(1, sizeof *l);
  char **vec = NULL;
  int err = l ? 0 : ENOMEM;
  if (!err) err = lock < 0 ? EINVAL : decode(buf, len, l, &vec);
  int end[2] = {-1, -1};
  if (!err && pipe2(end, O_CLOEXEC) < 0) err = errno;
  if (err) {
    if (lock >= 0) close(lock);
    free(vec);
    free(l);
    reply(sock, -1, err, -1);
    return;
  }
  l->lock_fd = lock;
  pid_t pid = hand_to_idle(pool, buf, len, lock, end[1]);
  if (pid == 0) pid = fork_kept(pool, sock, sfd, l, vec, lock, end, buf);
  int e = errno;
  close(lock);
  close(end[1]);
  /* Tests only: a parent that hangs once it has handed a task over. */
  if (!(pid > 0 && getenv("ALTAR_TEST_ZYGOTE_MUTE")))
    reply(sock, pid > 0 ? pid : -1, pid > 0 ? 0 : e, pid > 0 ? end[0] : -1);
  close(end[0]);
  free(vec);
  free(l);
}

/* A kept supervisor's socket is readable: it is idle again, or gone. */
static void heard_from(pool_t *pool, size_t i) {
  char token;
  ssize_t n = recv(pool->v[i].ctl, &token, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n != 1 || token != IDLE_TOKEN) {
    pool_drop(pool, i);
    return;
  }
  size_t idle = 0;
  for (size_t k = 0; k < pool->n; k++) idle += pool->v[k].idle;
  if (idle >= KEPT_IDLE_MAX) pool_drop(pool, i);
  else pool->v[i].idle = true;
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
  static pool_t pool;
  static struct pollfd pf[KEPT_MAX + 2];
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  while (status < 0) {
    size_t kept = pool.n;
    pf[0] = (struct pollfd){.fd = sock, .events = POLLIN};
    pf[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
    for (size_t i = 0; i < kept; i++) pf[2 + i] = (struct pollfd){.fd = pool.v[i].ctl, .events = POLLIN};
    if (poll(pf, (nfds_t)(kept + 2), -1) < 0 && errno != EINTR) {
      status = 1;
      break;
    }
    if (pf[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {}
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    /* Backwards: a drop moves the last entry into the dropped one's place. */
    for (size_t i = kept; i-- > 0;)
      if (pf[2 + i].revents) heard_from(&pool, i);
    if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    struct iovec iov = {.iov_base = buf, .iov_len = ALTAR_PROC_ZYG_MSG_MAX};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      status = 0; /* the backend closed its end, or died */
      break;
    }
    int lock = -1;
    take_fds(&m, &lock, 1);
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
      if (lock >= 0) close(lock);
      reply(sock, -1, EMSGSIZE, -1);
      continue;
    }
    handle(sock, sfd, &pool, buf, (size_t)n, lock);
  }
  while (pool.n) pool_drop(&pool, pool.n - 1);
  free(buf);
  if (sfd >= 0) close(sfd);
  return status;
}
