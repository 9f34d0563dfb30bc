/* Tasks per second through the `process` backend running /bin/true with 4
 * slots, against two baselines measured in the same run: a plain
 * posix_spawn-and-wait loop keeping 4 in flight, and `xargs -P 4 -n 1
 * /bin/true` over the same count. Prints each figure and the ratios.
 *
 *   bench_process [N [ROUNDS]]   N tasks per contender (default 2000), run
 *                                in ROUNDS turns (default 5)
 */
#include "altar/plugin/backend.h"

#include <errno.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4

extern char **environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static double bench_backend(int n, const char *root) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_strmap_set(&cfg, "slots", "4");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  if (!be) {
    fprintf(stderr, "bench_process: %s\n", berr.msg);
    exit(1);
  }
  altar_spec_t *spec = altar_spec_new("bench", "none");
  altar_spec_add_arg(spec, "/bin/true");
  altar_spec_set_label(spec, "job_id", "bench");
  altar_handle_t inflight[SLOTS];
  altar_status_t st[SLOTS];
  size_t k = 0;
  int submitted = 0, done = 0, failed = 0;
  double t0 = now_s();
  while (done < n) {
    while (k < SLOTS && submitted < n) {
      altar_error_t err = {0};
      if (altar_backend_submit(be, spec, &inflight[k], &err) < 0) {
        fprintf(stderr, "bench_process: submit: %s\n", err.msg);
        exit(1);
      }
      k++;
      submitted++;
    }
    altar_error_t err = {0};
    if (altar_backend_poll(be, inflight, k, st, &err) < 0) {
      fprintf(stderr, "bench_process: poll: %s\n", err.msg);
      exit(1);
    }
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
      if (altar_state_terminal(st[i].state)) {
        done++;
        if (st[i].state != ALTAR_STATE_SUCCEEDED) failed++;
        altar_handle_clear(&inflight[i]);
      } else {
        inflight[j++] = inflight[i];
      }
      altar_status_clear(&st[i]);
    }
    bool progressed = j < k;
    k = j;
    /* Nothing finished: yield the CPU to the tasks for a moment. */
    if (!progressed) {
      struct timespec ts = {0, 200 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  double dt = now_s() - t0;
  if (failed) fprintf(stderr, "bench_process: %d of %d tasks failed\n", failed, n);
  altar_spec_free(spec);
  altar_backend_close(be);
  return n / dt;
}

static double bench_spawn(int n) {
  char *argv[] = {"/bin/true", NULL};
  int running = 0, started = 0, done = 0;
  double t0 = now_s();
  while (done < n) {
    while (running < SLOTS && started < n) {
      pid_t pid;
      if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
        perror("posix_spawn");
        exit(1);
      }
      running++;
      started++;
    }
    int wst;
    if (wait(&wst) > 0) {
      running--;
      done++;
    }
  }
  return n / (now_s() - t0);
}

static double bench_xargs(int n) {
  char script[128];
  snprintf(script, sizeof script, "seq 1 %d | xargs -P %d -n 1 /bin/true", n, SLOTS);
  char *argv[] = {"sh", "-c", script, NULL};
  double t0 = now_s();
  pid_t pid;
  if (posix_spawnp(&pid, "sh", NULL, NULL, argv, environ) != 0) {
    perror("posix_spawn sh");
    exit(1);
  }
  int wst;
  waitpid(pid, &wst, 0);
  double dt = now_s() - t0;
  if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
    fprintf(stderr, "bench_process: xargs failed\n");
    exit(1);
  }
  return n / dt;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2000;
  int rounds = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
  if (n <= 0 || n > 1000000 || rounds <= 0 || rounds > 100 || n < rounds) {
    fprintf(stderr, "usage: bench_process [N [ROUNDS]]\n");
    return 2;
  }
  char root[] = "/tmp/altar-bench-process-XXXXXX";
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  /* Warm-up (page cache, binaries). Then the contenders take turns in
   * rounds, in a rotating order, so a busy machine slows all three alike;
   * each figure is its total tasks over its total time. */
  bench_spawn(50);
  int per = n / rounds;
  double t_xargs = 0, t_spawn = 0, t_proc = 0;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 3; k++) {
      switch ((r + k) % 3) {
      case 0: t_xargs += per / bench_xargs(per); break;
      case 1: t_spawn += per / bench_spawn(per); break;
      case 2: t_proc += per / bench_backend(per, root); break;
      }
    }
  }
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  int total = per * rounds;
  double xargs = total / t_xargs, spawn = total / t_spawn, proc = total / t_proc;
  printf("bench_process: %d x /bin/true per contender (%d rounds), %d in flight\n", total, rounds, SLOTS);
  printf("  xargs -P %d -n 1        %9.0f tasks/s\n", SLOTS, xargs);
  printf("  posix_spawn + wait      %9.0f tasks/s\n", spawn);
  printf("  process backend         %9.0f tasks/s\n", proc);
  printf("  ratio process/xargs     %9.2f  (aim >= 0.80)\n", proc / xargs);
  printf("  ratio process/spawn     %9.2f\n", proc / spawn);
  return 0;
}
