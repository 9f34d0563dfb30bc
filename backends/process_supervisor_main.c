/* The supervisor as a program of its own: the backend execs it (from a
 * memfd, see process_spawn.c) instead of forking the worker, whose address
 * space of several dozen libraries made each fork and each supervisor exit
 * cost about a millisecond. Linked with libc only; not part of the library.
 *
 * argv: altar-supervisor LOCK_FD TIMEOUT_S MEMORY_MB LOG_CAP CGROUP_VERSION
 *       TASK_DIR CGROUP_DIR|"" LOG_DIR -- COMMAND...
 * The environment is the task's. Or, as the long-lived parent that forks
 * supervisors (process_zygote.c): altar-supervisor --zygote SOCKET_FD. */
#include "process_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static int parse_ll(const char *s, long long *pv) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end) return -1;
  *pv = v;
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--zygote")) {
    long long sock;
    if (parse_ll(argv[2], &sock) || sock < 0 || sock > 1 << 20) {
      fprintf(stderr, "altar-supervisor: --zygote: malformed socket descriptor\n");
      return 2;
    }
    return altar__proc_zygote_serve((int)sock);
  }
  if (argc < 11 || strcmp(argv[9], "--")) {
    fprintf(stderr, "altar-supervisor: started with the wrong arguments (it is run by the process backend)\n");
    return 2;
  }
  altar_proc_launch_t l = {0};
  long long fd, timeout, mem, cap, cgv;
  if (parse_ll(argv[1], &fd) || parse_ll(argv[2], &timeout) || parse_ll(argv[3], &mem) || parse_ll(argv[4], &cap) ||
      parse_ll(argv[5], &cgv) || fd < 0 || cap < 0 || strlen(argv[6]) >= sizeof l.task_dir ||
      strlen(argv[7]) >= sizeof l.cgroup_dir || strlen(argv[8]) >= sizeof l.log_dir) {
    fprintf(stderr, "altar-supervisor: malformed arguments\n");
    return 2;
  }
  l.lock_fd = (int)fd;
  l.timeout_s = timeout;
  l.memory_mb = mem;
  l.log_cap = (size_t)cap;
  l.cgroup_version = (int)cgv;
  snprintf(l.task_dir, sizeof l.task_dir, "%s", argv[6]);
  snprintf(l.cgroup_dir, sizeof l.cgroup_dir, "%s", argv[7]);
  snprintf(l.log_dir, sizeof l.log_dir, "%s", argv[8]);
  l.argv = &argv[10];
  l.signals_default = true; /* posix_spawn reset them (process_spawn.c) */
  l.envp = environ;
  altar__proc_supervise(&l);
}
