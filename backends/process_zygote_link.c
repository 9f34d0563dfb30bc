/* `process`: the backend's side of the long-lived supervisor parent
 * (process_zygote.c). Started at the first submit from the supervisor
 * program in its memfd; asked once per task over a socket pair; restarted
 * when it has died; given up (supervisors exec'd per task from then on)
 * after ALTAR_PROC_ZYG_MAX_FAILURES failures in a row. A request the
 * parent may or may not have acted on (it died, or hung, after receiving
 * it) is settled by the task file's lock: held by someone means a
 * supervisor got it, so the task is not started twice. */
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
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* How long stop waits for the parent to leave before it kills it. */
#define ZYG_STOP_WAIT_MS 1000

static int start(altar_process_t *p, int prog_fd) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return errno;
  char num[24];
  snprintf(num, sizeof num, "%d", sv[1]);
  char *argv[] = {"altar-supervisor", "--zygote", num, NULL};
  pid_t pid;
  int rc = altar__proc_exec_program(prog_fd, argv, environ, sv[1], &pid);
  close(sv[1]);
  if (rc) {
    close(sv[0]);
    return rc;
  }
  p->zyg_pid = pid;
  p->zyg_owner = getpid();
  p->zyg_sock = sv[0];
  p->zyg_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  return 0;
}

/* Our handles on the parent, closed and cleared. */
static void forget(altar_process_t *p) {
  if (p->zyg_sock >= 0) close(p->zyg_sock);
  if (p->zyg_pidfd >= 0) close(p->zyg_pidfd);
  p->zyg_pid = 0;
  p->zyg_sock = p->zyg_pidfd = -1;
}

/* Waits for the parent to end (killed first when kill is set); only its
 * starter may (a fork of it holds a copy of the object, not the child). */
static void reap_parent(altar_process_t *p, bool kill_it) {
  if (p->zyg_owner != getpid()) return;
  if (kill_it) kill(p->zyg_pid, SIGKILL); /* its supervisors do not need it */
  while (waitpid(p->zyg_pid, NULL, 0) < 0 && errno == EINTR) {}
}

/* The parent failed us: it goes (killed, reaped) and counts as a failure. */
static void discard(altar_process_t *p) {
  if (p->zyg_pid > 0) reap_parent(p, true);
  forget(p);
  p->zyg_failures++;
}

void altar__proc_zygote_stop(altar_process_t *p) {
  if (p->zyg_pid <= 0) return;
  if (p->zyg_owner == getpid()) {
    close(p->zyg_sock); /* the end of its socket: it exits */
    p->zyg_sock = -1;
    struct pollfd pf = {.fd = p->zyg_pidfd, .events = POLLIN};
    bool gone = p->zyg_pidfd >= 0 && poll(&pf, 1, ZYG_STOP_WAIT_MS) > 0;
    reap_parent(p, !gone); /* hung: killed */
  }
  forget(p);
}

static size_t str_size(const char *s) { return strlen(s) + 1; }

/* The request for l (malloc'd, *plen bytes); NULL when out of memory or
 * larger than a request may be (*plen 0 then). */
static char *encode(const altar_proc_launch_t *l, size_t *plen) {
  altar_proc_zyg_req_t rq = {.magic = ALTAR_PROC_ZYG_MAGIC,
                             .cgroup_version = l->cgroup_version,
                             .timeout_s = l->timeout_s,
                             .memory_mb = l->memory_mb,
                             .log_cap = l->log_cap};
  size_t len = sizeof rq + str_size(l->task_dir) + str_size(l->cgroup_dir) + str_size(l->log_dir);
  for (char **a = l->argv; *a && len <= ALTAR_PROC_ZYG_MSG_MAX; a++, rq.argc++) len += str_size(*a);
  for (char **e = l->envp; *e && len <= ALTAR_PROC_ZYG_MSG_MAX; e++, rq.envc++) len += str_size(*e);
  *plen = 0;
  if (len > ALTAR_PROC_ZYG_MSG_MAX) return NULL;
  char *buf = malloc(len);
  if (!buf) return NULL;
  memcpy(buf, &rq, sizeof rq);
  size_t at = sizeof rq;
  const char *fixed[] = {l->task_dir, l->cgroup_dir, l->log_dir};
  for (size_t i = 0; i < 3; i++) {
    memcpy(buf + at, fixed[i], str_size(fixed[i]));
    at += str_size(fixed[i]);
  }
  for (char **v = l->argv; *v; v++) {
    memcpy(buf + at, *v, str_size(*v));
    at += str_size(*v);
  }
  for (char **v = l->envp; *v; v++) {
    memcpy(buf + at, *v, str_size(*v));
    at += str_size(*v);
  }
  *plen = len;
  return buf;
}

static int send_req(int sock, const char *buf, size_t len, int lock_fd) {
  struct iovec iov = {.iov_base = ALTAR__UNCONST(buf), .iov_len = len};
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &lock_fd, sizeof lock_fd);
  ssize_t n;
  while ((n = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
  return n == (ssize_t)len ? 0 : n < 0 ? errno : EPIPE;
}

/* The reply, with the descriptor it carries (*pfd, -1: none: the task's end
 * pipe); 0, or an errno value when none came in time. */
static int recv_rep(int sock, altar_proc_zyg_rep_t *prep, int *pfd) {
  *pfd = -1;
  struct pollfd pf = {.fd = sock, .events = POLLIN};
  int r;
  while ((r = poll(&pf, 1, ALTAR_PROC_ZYG_REPLY_TIMEOUT_MS)) < 0 && errno == EINTR) {}
  if (r == 0) return ETIMEDOUT;
  if (r < 0) return errno;
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  struct iovec iov = {.iov_base = prep, .iov_len = sizeof *prep};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
  ssize_t n;
  while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*pfd < 0) *pfd = fd;
      else close(fd);
    }
  }
  if (n != (ssize_t)sizeof *prep) {
    if (*pfd >= 0) close(*pfd);
    *pfd = -1;
    return n < 0 ? errno : EPIPE;
  }
  return 0;
}

/* A supervisor started the task of this file (its "supervisor=" line,
 * which no line of submit's can look like: their values are escaped). */
static bool started(int fd) {
  bool whole = false;
  char *tail = altar__proc_read_tail(fd, &whole);
  bool yes = tail && strstr(tail, "\nsupervisor=") != NULL;
  free(tail);
  return yes;
}

/* After a request the dead parent may have acted on: the lock, tried
 * through a new descriptor once ours is closed, is free when no supervisor
 * holds it: then ours again and nothing was started, unless a supervisor
 * got the task and ran it to its end before we looked (a parent that hung
 * after handing it over), which the task file says; poll then reads its
 * status, and the task does not run twice. */
static int settle(altar_proc_launch_t *l, altar_proc_child_t *pchild) {
  char path[ALTAR_PATH_BUF + 8];
  snprintf(path, sizeof path, "%s/task", l->task_dir);
  close(l->lock_fd);
  l->lock_fd = -1;
  int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) return errno;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    if (!started(fd)) {
      l->lock_fd = fd;
      return ALTAR_PROC_ZYG_UNUSED;
    }
    close(fd);
    *pchild = (altar_proc_child_t){.pid = 0, .fd = -1, .foreign = true}; /* ended; poll reads its status */
    return 0;
  }
  int e = errno;
  close(fd);
  if (e != EWOULDBLOCK) return e;
  *pchild = (altar_proc_child_t){.pid = 0, .fd = -1, .foreign = true}; /* running; poll reads its lock */
  return 0;
}

int altar__proc_zygote_ask(altar_process_t *p, int prog_fd, altar_proc_launch_t *l, altar_proc_child_t *pchild) {
  if (p->start != ALTAR_PROC_START_PARENT || p->zyg_failures >= ALTAR_PROC_ZYG_MAX_FAILURES)
    return ALTAR_PROC_ZYG_UNUSED;
  size_t len;
  char *req = encode(l, &len);
  if (!req) return ALTAR_PROC_ZYG_UNUSED; /* too large for a request: exec takes any size */
  int rc = ALTAR_PROC_ZYG_UNUSED;
  /* Twice: a parent found dead at the send is replaced once. */
  for (int attempt = 0; attempt < 2 && p->zyg_failures < ALTAR_PROC_ZYG_MAX_FAILURES; attempt++) {
    if (p->zyg_pid <= 0 && start(p, prog_fd) != 0) {
      p->zyg_failures++;
      continue;
    }
    if (send_req(p->zyg_sock, req, len, l->lock_fd) != 0) {
      discard(p); /* nothing was delivered: a new parent may take it */
      continue;
    }
    altar_proc_zyg_rep_t rep;
    int fd;
    if (recv_rep(p->zyg_sock, &rep, &fd) != 0) {
      discard(p);
      rc = settle(l, pchild);
      break;
    }
    p->zyg_failures = 0;
    if (rep.pid > 0) {
      *pchild = (altar_proc_child_t){.pid = rep.pid, .fd = fd, .foreign = true};
      rc = 0;
    } else if (rep.err == EAGAIN) {
      rc = EAGAIN; /* the process limit: exec would fail the same way */
    }
    break; /* other refusals: exec, which reports its own errors */
  }
  free(req);
  return rc;
}
