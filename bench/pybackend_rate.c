/* The python backend's cost, measured in one run against the C `process`
 * backend (run by bench_pybackend.sh, which supplies the interpreter):
 *
 *   1. tasks/s: N tasks, SLOTS in flight, submit then poll until terminal,
 *      through `process` running /bin/true, through the bridge to a no-op
 *      adapter (every task done when first polled: what is left is the
 *      bridge), and through the bridge to the example subprocess adapter
 *      running /bin/true (a Python backend that really starts processes);
 *   2. per-call overhead: capacity() called M times through the bridge
 *      against the same call on `process`.
 *
 *   pybackend_rate [N [M]]   (default 2000 tasks, 5000 calls; the example
 *                             adapter runs N/4 tasks: each starts a Python
 *                             supervisor) */
#include "altar/plugin/backend.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4

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

static altar_backend_t *open_or_die(const altar_backend_ops_t *ops, altar_strmap_t *cfg) {
  altar_error_t err = {0};
  altar_backend_t *be = altar_backend_open(ops, cfg, &err);
  altar_strmap_clear(cfg);
  if (!be) {
    fprintf(stderr, "pybackend_rate: %s: %s\n", ops->name, err.msg);
    exit(1);
  }
  return be;
}

/* Tasks per second with SLOTS in flight. */
static double rate(altar_backend_t *be, int n) {
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
        fprintf(stderr, "pybackend_rate: submit: %s\n", err.msg);
        exit(1);
      }
      k++;
      submitted++;
    }
    altar_error_t err = {0};
    if (altar_backend_poll(be, inflight, k, st, &err) < 0) {
      fprintf(stderr, "pybackend_rate: poll: %s\n", err.msg);
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
    if (!progressed) { /* nothing finished: give the tasks the CPU a moment */
      struct timespec ts = {0, 200 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  double dt = now_s() - t0;
  if (failed) fprintf(stderr, "pybackend_rate: %d of %d tasks failed\n", failed, n);
  altar_spec_free(spec);
  return n / dt;
}

/* Microseconds per capacity() call. */
static double per_call_us(altar_backend_t *be, int m) {
  double t0 = now_s();
  for (int i = 0; i < m; i++) {
    altar_capacity_t cap;
    altar_error_t err = {0};
    if (altar_backend_capacity(be, &cap, &err) < 0) {
      fprintf(stderr, "pybackend_rate: capacity: %s\n", err.msg);
      exit(1);
    }
    altar_capacity_clear(&cap);
  }
  return (now_s() - t0) * 1e6 / m;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2000;
  int m = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5000;
  const char *py = getenv("ALTAR_BENCH_PYTHON");
  if (n < 4 || m < 1 || !py || !*py) {
    fprintf(stderr, "usage: ALTAR_BENCH_PYTHON=<venv python> pybackend_rate [N>=4 [M]] (see bench_pybackend.sh)\n");
    return 2;
  }
  char root[] = "/tmp/altar-bench-pybackend.XXXXXX";
  if (!mkdtemp(root)) return perror("mkdtemp"), 1;
  char proc_root[64], ex_root[64], ex_opts[128];
  snprintf(proc_root, sizeof proc_root, "%s/process", root);
  snprintf(ex_root, sizeof ex_root, "%s/example", root);
  snprintf(ex_opts, sizeof ex_opts, "{\"data_root\": \"%s\"}", ex_root);

  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", proc_root);
  altar_strmap_set(&cfg, "slots", "4");
  altar_backend_t *proc = open_or_die(&altar_backend_process_ops, &cfg);
  altar_strmap_set(&cfg, "adapter", "noop");
  altar_strmap_set(&cfg, "python", py);
  altar_backend_t *noop = open_or_die(&altar_backend_python_ops, &cfg);
  altar_strmap_set(&cfg, "adapter", "subprocess");
  altar_strmap_set(&cfg, "python", py);
  altar_strmap_set(&cfg, "options", ex_opts);
  altar_backend_t *example = open_or_die(&altar_backend_python_ops, &cfg);

  /* Interleaved, so a busy moment on the machine hits every contender. */
  double r_proc = rate(proc, n / 2), r_noop = rate(noop, n / 2);
  r_proc = (r_proc + rate(proc, n / 2)) / 2;
  r_noop = (r_noop + rate(noop, n / 2)) / 2;
  double r_ex = rate(example, n / 4);
  double c_py = per_call_us(noop, m), c_proc = per_call_us(proc, m);

  printf("tasks/s, %d in flight:\n", SLOTS);
  printf("  process backend, /bin/true          %8.0f\n", r_proc);
  printf("  python backend, no-op adapter       %8.0f   (%.2fx process)\n", r_noop, r_noop / r_proc);
  printf("  python backend, example subprocess  %8.0f   (%.2fx process)\n", r_ex, r_ex / r_proc);
  printf("per call (capacity), %d calls:\n", m);
  printf("  through the bridge                  %8.1f us\n", c_py);
  printf("  process backend                     %8.3f us   (bridge overhead %.1f us per call)\n", c_proc,
         c_py - c_proc);

  altar_backend_close(example);
  altar_backend_close(noop);
  altar_backend_close(proc);
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
