/* `process`: the per-task supervisor. It runs in a process of its own (a new
 * session; the worker's child until the worker exits, then re-parented), is
 * the parent of the task's command, and is the only writer of its status:
 *   - spawns argv (no shell) in its own process group, cwd = task directory;
 *   - keeps stdout/stderr (in log_dir) bounded: the first half of log_cap, then a rolling
 *     tail of the other half, with a marker saying how much was dropped;
 *   - kills the whole group at timeout_s (reason "timeout");
 *   - enforces resources.memory_mb with a memory cgroup when one can be made
 *     (the kernel's OOM kill is read back from the cgroup's oom_kill
 *     counter), else with a watchdog that sums the group's resident memory
 *     every 50 ms and kills the group past the limit; either way the report
 *     is "oom_killed" only when such a kill happened;
 *   - appends its status section to the task file in one write, then exits
 *     (its exit releases the flock, which is what tells readers to look), or,
 *     kept by the long-lived parent for the next task (process_zygote.c),
 *     closes the lock and the task's end pipe instead.
 * Everything it needs was prepared before the fork (altar_proc_launch_t). */
#include "process_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_MS 50

typedef struct sink {
  const char *name;     /* the file, opened at the first byte */
  const char *dir;      /* its directory, made then too (NULL: the task directory) */
  const char *fallback; /* where it goes when dir cannot be made */
  bool failed;
  int fd;
  size_t head_left; /* bytes still written straight to the file */
  char *ring;       /* rolling tail, allocated once the head is full */
  size_t ring_cap, ring_pos, ring_len;
  unsigned long long omitted;
} sink_t;

static void write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

static void sink_put(sink_t *s, const char *p, size_t n) {
  if (s->fd < 0 && !s->failed) {
    const char *path = s->name;
    if (s->dir && mkdir(s->dir, 0755) < 0 && errno != EEXIST) path = s->fallback;
    s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0) s->failed = true;
  }
  if (s->fd < 0) return;
  size_t h = n < s->head_left ? n : s->head_left;
  if (h) {
    write_all(s->fd, p, h);
    s->head_left -= h;
    p += h;
    n -= h;
  }
  if (!n || !s->ring_cap) {
    s->omitted += n;
    return;
  }
  if (!s->ring) {
    s->ring = malloc(s->ring_cap);
    if (!s->ring) {
      s->ring_cap = 0;
      s->omitted += n;
      return;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (s->ring_len == s->ring_cap) s->omitted++;
    else s->ring_len++;
    s->ring[s->ring_pos] = p[i];
    s->ring_pos = (s->ring_pos + 1) % s->ring_cap;
  }
}

static void sink_finish(sink_t *s) {
  if (s->omitted) {
    char m[96];
    int k = snprintf(m, sizeof m, "\n[altar: %llu bytes omitted]\n", s->omitted);
    write_all(s->fd, m, (size_t)k);
  }
  if (s->ring_len) {
    size_t start = (s->ring_pos + s->ring_cap - s->ring_len) % s->ring_cap;
    size_t first = s->ring_cap - start < s->ring_len ? s->ring_cap - start : s->ring_len;
    write_all(s->fd, s->ring + start, first);
    write_all(s->fd, s->ring, s->ring_len - first);
  }
  free(s->ring);
  if (s->fd >= 0) close(s->fd);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_str_file(const char *path, const char *s) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  write_all(fd, s, strlen(s));
  return close(fd);
}

/* Sum of resident memory (bytes) of every process in group pgid. */
static long long group_rss(pid_t pgid) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  long long pages = 0;
  struct dirent *de;
  char path[64], buf[1024];
  while ((de = readdir(d))) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%.20s/stat", de->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    /* Fields after the command name, which may hold spaces: state is #3. */
    char *p = strrchr(buf, ')');
    if (!p) continue;
    p++;
    long long field[24] = {0};
    int idx = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok && idx <= 24; tok = strtok_r(NULL, " ", &save), idx++)
      if (idx >= 4) field[idx - 1] = strtoll(tok, NULL, 10);
    if (field[4] == (long long)pgid) pages += field[23]; /* #5 pgrp, #24 rss */
  }
  closedir(d);
  return pages * sysconf(_SC_PAGESIZE);
}

/* The cgroup's oom_kill counter (v1 memory.oom_control, v2 memory.events). */
static long long cgroup_oom_kills(const altar_proc_launch_t *l) {
  char path[ALTAR_PATH_BUF + 32], buf[2048];
  snprintf(path, sizeof path, "%s/%s", l->cgroup_dir, l->cgroup_version == 2 ? "memory.events" : "memory.oom_control");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p = strstr(buf, "oom_kill ");
  return p ? strtoll(p + 9, NULL, 10) : 0;
}

static bool cgroup_setup(const altar_proc_launch_t *l) {
  if (mkdir(l->cgroup_dir, 0755) < 0 && errno != EEXIST) return false;
  char path[ALTAR_PATH_BUF + 32], val[32];
  snprintf(val, sizeof val, "%lld", (long long)l->memory_mb * 1024 * 1024);
  if (l->cgroup_version == 2) {
    snprintf(path, sizeof path, "%s/memory.max", l->cgroup_dir);
    if (write_str_file(path, val) < 0) return false;
    snprintf(path, sizeof path, "%s/memory.swap.max", l->cgroup_dir);
    (void)write_str_file(path, "0");
  } else {
    snprintf(path, sizeof path, "%s/memory.limit_in_bytes", l->cgroup_dir);
    if (write_str_file(path, val) < 0) return false;
    /* Without swap accounting this file is absent: the limit then covers RAM only. */
    snprintf(path, sizeof path, "%s/memory.memsw.limit_in_bytes", l->cgroup_dir);
    (void)write_str_file(path, val);
  }
  return true;
}

/* Kills what is left in the cgroup (a process that left the command's group
 * still counts against its memory), then removes it. */
static void cgroup_remove(const altar_proc_launch_t *l) {
  char path[ALTAR_PATH_BUF + 32], buf[4096];
  snprintf(path, sizeof path, "%s/cgroup.procs", l->cgroup_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *save = NULL;
    for (char *tok = strtok_r(buf, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
      long pid = strtol(tok, NULL, 10);
      if (pid > 1) kill((pid_t)pid, SIGKILL);
    }
  }
  for (int i = 0; i < 100; i++) {
    if (rmdir(l->cgroup_dir) == 0 || errno == ENOENT) return;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Async-signal-safe decimal of v into buf; returns length. */
static size_t fmt_pid(char *buf, long v) {
  char tmp[24];
  size_t n = 0;
  do tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < sizeof tmp);
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  return n;
}

/* What the command's child needs; it shares our memory (CLONE_VM), so it
 * reports an exec failure by writing exec_errno here. */
typedef struct child_args {
  const altar_proc_launch_t *l;
  pid_t sup;
  int out_w, err_w;
  const char *procs_path; /* cgroup.procs to join, or NULL */
  int exec_errno;
} child_args_t;

/* In the command's child: become the group leader, join the cgroup, wire the
 * streams, exec. It runs on its own stack in our address space (like
 * posix_spawn), so only async-signal-safe calls, and nothing it writes but
 * exec_errno is seen by us. */
static int exec_command(void *arg) {
  child_args_t *a = arg;
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != a->sup) _exit(127);
  if (a->procs_path) {
    int fd = open(a->procs_path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      char b[24];
      size_t n = fmt_pid(b, (long)getpid());
      if (write(fd, b, n) < 0) { /* the limit then does not apply; nothing to report it to */
      }
      close(fd);
    }
  }
  dup2(a->out_w, 1);
  dup2(a->err_w, 2);
  execvpe(a->l->argv[0], a->l->argv, a->l->envp);
  a->exec_errno = errno ? errno : ENOEXEC;
  _exit(127);
}

/* clone(CLONE_VM | CLONE_VFORK): no copy of our page tables, and we resume
 * once the child has exec'd or failed — the cost of posix_spawn, with the
 * set-up posix_spawn cannot do (parent-death signal, cgroup). */
static pid_t spawn_command(child_args_t *a) {
  enum { STACK = 64 * 1024 };
  char *stack = malloc(STACK);
  if (!stack) {
    errno = ENOMEM;
    return -1;
  }
  pid_t pid = clone(exec_command, stack + STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
  int e = errno;
  free(stack);
  errno = e;
  return pid;
}

static bool fatal_signal_is_app(int sig) {
  /* Crashes the program causes itself; anything else came from outside. */
  return sig == SIGSEGV || sig == SIGABRT || sig == SIGFPE || sig == SIGBUS || sig == SIGILL || sig == SIGSYS ||
         sig == SIGTRAP;
}

static void sanitize(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r') *s = ' ';
}

void altar__proc_supervisor_enter(const altar_proc_launch_t *l) {
  setsid();
  /* A forked worker's handlers must not run here (a syscall per signal,
   * so only when there can be any). */
  for (int sig = 1; sig < NSIG && !l->signals_default; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_SETMASK, &chld, NULL);
}

void altar__proc_supervise(const altar_proc_launch_t *l) {
  altar__proc_supervisor_enter(l);
  /* Keep only the lock (3) from what the worker had open. */
  if (l->lock_fd != 3 && dup2(l->lock_fd, 3) < 0) _exit(1);
  fcntl(3, F_SETFD, FD_CLOEXEC);
  close_range(4, ~0U, 0);
  int null = open("/dev/null", O_RDWR);
  if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(1);
  if (null > 2) close(null);
  altar__proc_supervise_task(l);
  _exit(0);
}

/* Closes a pipe's two ends. */
static void close_pair(int fds[2]) {
  close(fds[0]);
  close(fds[1]);
}

void altar__proc_supervise_task(const altar_proc_launch_t *l) {
  pid_t sup = getpid();
  if (chdir(l->task_dir) < 0) return;

  sink_t sinks[2];
  const char *names[2] = {"stdout", "stderr"};
  char paths[2][ALTAR_PATH_BUF + 16];
  size_t head = l->log_cap / 2;
  for (int i = 0; i < 2; i++) {
    snprintf(paths[i], sizeof paths[i], "%s/%s", l->log_dir[0] ? l->log_dir : ".", names[i]);
    sinks[i] = (sink_t){.name = paths[i],
                        .dir = l->log_dir[0] ? l->log_dir : NULL,
                        .fallback = names[i],
                        .fd = -1,
                        .head_left = head,
                        .ring_cap = l->log_cap - head};
  }
  int out[2], errp[2];
  if (pipe2(out, O_CLOEXEC) < 0) return;
  if (pipe2(errp, O_CLOEXEC) < 0) {
    close_pair(out);
    return;
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    close_pair(out);
    close_pair(errp);
    return;
  }

  bool use_cg = l->memory_mb > 0 && l->cgroup_dir[0] && cgroup_setup(l);
  bool watchdog = l->memory_mb > 0 && !use_cg;
  char procs[ALTAR_PATH_BUF + 32];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", l->cgroup_dir);

  child_args_t ca = {.l = l, .sup = sup, .out_w = out[1], .err_w = errp[1], .procs_path = use_cg ? procs : NULL};
  pid_t cmd = spawn_command(&ca);
  close(out[1]);
  close(errp[1]);

  int exec_errno = 0;
  bool reaped = false, timed_out = false, oom = false, canceled = false;
  int wst = 0;
  char pidline[96];
  if (cmd < 0) {
    exec_errno = errno;
    reaped = true;
  } else {
    exec_errno = ca.exec_errno; /* CLONE_VFORK: the child has exec'd or died by now */
    setpgid(cmd, cmd);          /* also here, so a kill of the group cannot miss it */
    /* One append (O_APPEND) to the task file: readers see both lines or none. */
    int k = snprintf(pidline, sizeof pidline, "supervisor=%ld\npgid=%ld\n", (long)sup, (long)cmd);
    write_all(3, pidline, (size_t)k);
    /* A cancel that came before the pgid was published left only its marker. */
    if (access("cancel", F_OK) == 0) {
      kill(-cmd, SIGKILL);
      canceled = true;
    }
  }

  int64_t deadline = l->timeout_s > 0 ? now_ms() + l->timeout_s * 1000 : -1;
  int64_t next_watch = watchdog ? now_ms() + WATCHDOG_MS : -1;
  long long limit = (long long)l->memory_mb * 1024 * 1024;
  struct pollfd pf[3] = {
      {.fd = out[0], .events = POLLIN}, {.fd = errp[0], .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
  char buf[65536];
  while (!reaped) {
    int64_t t = now_ms(), wait = -1;
    if (deadline >= 0 && !timed_out) wait = deadline > t ? deadline - t : 0;
    if (next_watch >= 0) {
      int64_t w = next_watch > t ? next_watch - t : 0;
      if (wait < 0 || w < wait) wait = w;
    }
    if (wait > 3600 * 1000) wait = 3600 * 1000; /* a far deadline: just wake up and look again */
    int pr = poll(pf, 3, (int)wait);
    if (pr < 0 && errno != EINTR) {
      /* Cannot watch any more; at least learn how the command ends. */
      while (waitpid(cmd, &wst, 0) < 0 && errno == EINTR) {}
      reaped = true;
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(pf[i].fd, buf, sizeof buf);
      if (n > 0) sink_put(&sinks[i], buf, (size_t)n);
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(pf[i].fd);
        pf[i].fd = -1;
      }
    }
    if (pf[2].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {}
    }
    /* Reap on every wake: cheap, and robust to a coalesced SIGCHLD. */
    if (waitpid(cmd, &wst, WNOHANG) == cmd) reaped = true;
    t = now_ms();
    if (!reaped && deadline >= 0 && !timed_out && t >= deadline) {
      kill(-cmd, SIGKILL);
      timed_out = true;
    }
    if (!reaped && next_watch >= 0 && t >= next_watch) {
      long long rss = group_rss(cmd);
      if (rss > limit && !oom) {
        kill(-cmd, SIGKILL);
        oom = true;
        next_watch = -1;
      } else {
        next_watch = t + WATCHDOG_MS;
      }
    }
  }
  if (cmd > 0) kill(-cmd, SIGKILL); /* what the command left behind ends with it */

  /* Drain what is still in the pipes; a descendant that escaped the group
   * and holds them open gets at most 200 ms. */
  int64_t drain_end = now_ms() + 200;
  while (pf[0].fd >= 0 || pf[1].fd >= 0) {
    int64_t left = drain_end - now_ms();
    if (left <= 0 || poll(pf, 2, (int)left) <= 0) break;
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || !pf[i].revents) continue;
      ssize_t n = read(pf[i].fd, buf, sizeof buf);
      if (n > 0) sink_put(&sinks[i], buf, (size_t)n);
      else {
        close(pf[i].fd);
        pf[i].fd = -1;
      }
    }
  }
  for (int i = 0; i < 2; i++) {
    if (pf[i].fd >= 0) close(pf[i].fd);
    sink_finish(&sinks[i]);
  }
  if (use_cg) {
    if (cgroup_oom_kills(l) > 0) oom = true;
    cgroup_remove(l);
  }
  if (!canceled && access("cancel", F_OK) == 0 && WIFSIGNALED(wst)) canceled = true;

  /* Classify, most specific cause first. */
  char status[2048], detail[1024];
  const char *state = "failed", *reason = NULL;
  long long code = -1;
  int det = 0;
  detail[0] = '\0';
  if (exec_errno) {
    reason = "exit_127";
    code = 127;
    det = 1;
    snprintf(detail, sizeof detail, "cannot execute '%.200s': %s", l->argv[0], strerror(exec_errno));
  } else if (canceled) {
    reason = "canceled";
    snprintf(detail, sizeof detail, "canceled by request; process group killed");
  } else if (timed_out) {
    reason = ALTAR_REASON_TIMEOUT;
    snprintf(detail, sizeof detail, "ran longer than timeout_s=%lld; process group killed", (long long)l->timeout_s);
  } else if (oom) {
    reason = ALTAR_REASON_OOM_KILLED;
    snprintf(detail, sizeof detail,
             use_cg ? "exceeded memory_mb=%lld: killed by the kernel in its memory cgroup"
                    : "exceeded memory_mb=%lld: resident memory of the process group over the "
                      "limit, killed by the supervisor",
             (long long)l->memory_mb);
  } else if (WIFEXITED(wst) && WEXITSTATUS(wst) == 0) {
    state = "succeeded";
  } else if (WIFEXITED(wst)) {
    code = WEXITSTATUS(wst);
    det = 1;
    snprintf(detail, sizeof detail, "command exited with code %lld", code);
  } else if (WIFSIGNALED(wst)) {
    int sig = WTERMSIG(wst);
    code = 128 + sig;
    det = fatal_signal_is_app(sig);
    snprintf(detail, sizeof detail, "command killed by signal %d (%s)", sig, strsignal(sig));
  } else {
    reason = ALTAR_REASON_JOB_FAILED;
    snprintf(detail, sizeof detail, "supervisor lost track of the command");
  }
  char reason_buf[32];
  if (!reason && code >= 0) {
    snprintf(reason_buf, sizeof reason_buf, "exit_%lld", code);
    reason = reason_buf;
  }
  sanitize(detail);
  if (!strcmp(state, "succeeded")) snprintf(status, sizeof status, "%sstate=succeeded\n", ALTAR_PROC_STATUS_MARK);
  else if (code >= 0)
    snprintf(status, sizeof status, "%sstate=failed\nreason=%s\nexit_code=%lld\ndeterministic=%d\ndetail=%s\n",
             ALTAR_PROC_STATUS_MARK, reason, code, det, detail);
  else
    snprintf(status, sizeof status, "%sstate=failed\nreason=%s\ndeterministic=%d\ndetail=%s\n", ALTAR_PROC_STATUS_MARK,
             reason, det, detail);
  write_all(3, status, strlen(status)); /* O_APPEND, one write */
  close(sfd);
}
