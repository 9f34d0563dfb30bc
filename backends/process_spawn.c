/* `process`: starting a task's supervisor. By default a long-lived parent
 * forks it (process_zygote.c: the cheapest start); when that parent cannot
 * be had, or with backend.supervisor_start: exec, the supervisor program,
 * loaded once into a sealed memfd, is started per task with posix_spawn, which (in glibc)
 * runs the exec in a vfork-like child sharing our memory: no copy of the
 * worker's address space (dozens of libraries, the heap), which a fork
 * copies and the supervisor's exit tears down again — about a millisecond
 * of CPU per task between the two. If the program cannot be loaded or
 * exec'd (no memfd, no /proc, exec from memfd forbidden), supervisors are
 * forked as before. Every way the supervisor holds the inherited lock and
 * behaves the same; only the long-lived parent's are not our children. */
#include "process_int.h"
#include "core/unconst.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* The program in a sealed memfd (>= 0), or -1 when supervisors are forked. */
static int load_program(altar_process_t *p) {
  if (p->sup_fd != ALTAR_PROC_SUP_UNTRIED) return p->sup_fd;
  p->sup_fd = -1;
  size_t len = 0;
  const unsigned char *prog = altar__proc_sup_program(&len);
  if (!len) return -1;
  int fd = memfd_create("altar-supervisor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  size_t at = 0;
  while (at < len) {
    ssize_t w = write(fd, prog + at, len - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return -1;
    }
    at += (size_t)w;
  }
  /* Nobody, not even a task that finds the fd, can change what we exec. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
    close(fd);
    return -1;
  }
  p->sup_fd = fd;
  return fd;
}

/* argv of the program: see process_supervisor_main.c. */
enum { N_FIXED = 10 };

int altar__proc_exec_program(int prog_fd, char **argv, char **envp, int keep_fd, pid_t *ppid) {
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", prog_fd);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc) return rc;
  if ((rc = posix_spawnattr_init(&at))) {
    posix_spawn_file_actions_destroy(&fa);
    return rc;
  }
  /* dup2 onto itself clears close-on-exec: keep_fd is the one fd the
   * program keeps. Signals start unblocked with default actions; the
   * program sets its own. */
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  rc = posix_spawn_file_actions_adddup2(&fa, keep_fd, keep_fd);
  if (!rc) rc = posix_spawnattr_setsigmask(&at, &none);
  if (!rc) rc = posix_spawnattr_setsigdefault(&at, &all);
  if (!rc) rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (!rc) rc = posix_spawn(ppid, path, &fa, &at, argv, envp);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

/* Starts the program for one task; 0 with *ppid, or an errno value (exec
 * failures included: glibc reports them from the child). */
static int spawn_program(int prog_fd, const altar_proc_launch_t *l, pid_t *ppid) {
  size_t argc = 0;
  while (l->argv[argc]) argc++;
  char **argv = calloc(N_FIXED + argc + 1, sizeof *argv);
  if (!argv) return ENOMEM;
  char nums[5][24];
  snprintf(nums[0], sizeof nums[0], "%d", l->lock_fd);
  snprintf(nums[1], sizeof nums[1], "%lld", (long long)l->timeout_s);
  snprintf(nums[2], sizeof nums[2], "%lld", (long long)l->memory_mb);
  snprintf(nums[3], sizeof nums[3], "%zu", l->log_cap);
  snprintf(nums[4], sizeof nums[4], "%d", l->cgroup_version);
  argv[0] = "altar-supervisor";
  for (int i = 0; i < 5; i++) argv[1 + i] = nums[i];
  argv[6] = ALTAR__UNCONST(l->task_dir);
  argv[7] = ALTAR__UNCONST(l->cgroup_dir);
  argv[8] = ALTAR__UNCONST(l->log_dir);
  argv[9] = "--";
  for (size_t i = 0; i < argc; i++) argv[N_FIXED + i] = l->argv[i];
  int rc = altar__proc_exec_program(prog_fd, argv, l->envp, l->lock_fd, ppid);
  free(argv);
  return rc;
}

pid_t altar__proc_spawn_supervisor(altar_process_t *p, altar_proc_launch_t *l, altar_proc_child_t *pchild) {
  *pchild = (altar_proc_child_t){.fd = -1};
  int prog = load_program(p);
  if (prog >= 0) {
    int rc = altar__proc_zygote_ask(p, prog, l, pchild);
    if (rc == 0) return pchild->pid;
    if (rc != ALTAR_PROC_ZYG_UNUSED) {
      errno = rc;
      return -1;
    }
    pid_t pid;
    rc = spawn_program(prog, l, &pid);
    if (!rc) return pchild->pid = pid;
    if (rc == EAGAIN) {
      errno = rc;
      return -1; /* fork would fail the same way (process limit) */
    }
    /* Exec from memory refused here (no /proc, vm.memfd_noexec): fork from now on. */
    altar__proc_zygote_stop(p);
    close(p->sup_fd);
    p->sup_fd = -1;
  }
  pid_t pid = fork();
  if (pid == 0) altar__proc_supervise(l);
  if (pid > 0) pchild->pid = pid;
  return pid;
}
