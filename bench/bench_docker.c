/* The docker backend's own overhead per task against bare docker commands
 * running the same container, measured in the same run.
 *
 *   bare:    docker run -d (same labels, mount) → docker inspect until exited
 *            → docker rm --force, each through posix_spawn
 *   backend: altar_backend_submit → altar_backend_poll until terminal →
 *            altar_backend_cancel
 *   attached: docker run --rm IMAGE true (the simplest thing a user would type)
 *
 * Both loops poll every 20 ms. Also: one bulk poll of N finished handles
 * against N single `docker inspect` calls.
 * Usage: bench_docker [TASKS] [IMAGE]   (default 20, altar-test/busybox:1)
 * Needs a running engine (scripts/services/dockerd.sh start). */
#include "altar/backend.h"
#include "altar/command_runner.h"
#include "backends/docker.h"
#include "util/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_SLEEP_US 20000

static double mean(const double *v, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  return sum / n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run(const char *const *argv, char *out, size_t cap) {
  altar_cmd_opts_t opts = {.timeout_s = 120};
  altar_cmd_result_t res;
  altar_error_t err = {0};
  int rc = altar_command_run(NULL, argv, &opts, &res, &err);
  int code = rc < 0 ? -1 : res.exit_code;
  if (rc < 0) fprintf(stderr, "bench_docker: %s\n", err.msg);
  if (out && cap) {
    size_t n = res.out_len < cap - 1 ? res.out_len : cap - 1;
    if (res.out) memcpy(out, res.out, n);
    out[n] = '\0';
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r')) out[--n] = '\0';
  }
  altar_cmd_result_clear(&res);
  return code;
}

static int bare_task(const char *image, const char *volume) {
  char id[128];
  const char *runv[] = {"docker",           "run", "-d",   "--label", "job_id=bench", "--label",
                        "altar.kind=bench", "-v",  volume, image,     "true",         NULL};
  if (run(runv, id, sizeof id) != 0) return -1;
  for (;;) {
    char st[64];
    const char *insp[] = {"docker", "inspect", "--type", "container", "-f", "{{.State.Status}}", id, NULL};
    if (run(insp, st, sizeof st) != 0) return -1;
    if (!strcmp(st, "exited") || !strcmp(st, "dead")) break;
    usleep(POLL_SLEEP_US);
  }
  const char *rm[] = {"docker", "rm", "--force", id, NULL};
  return run(rm, NULL, 0) == 0 ? 0 : -1;
}

static int backend_task(altar_backend_t *be, const altar_spec_t *spec) {
  altar_handle_t h;
  altar_error_t err = {0};
  if (altar_backend_submit(be, spec, &h, &err) != 0) {
    fprintf(stderr, "bench_docker: submit: %s\n", err.msg);
    return -1;
  }
  int rc = 0;
  for (;;) {
    altar_status_t st;
    if (altar_backend_poll(be, &h, 1, &st, &err) != 0) {
      fprintf(stderr, "bench_docker: poll: %s\n", err.msg);
      rc = -1;
      break;
    }
    bool done = altar_state_terminal(st.state);
    if (done && st.state != ALTAR_STATE_SUCCEEDED) rc = -1;
    altar_status_clear(&st);
    if (done) break;
    usleep(POLL_SLEEP_US);
  }
  if (altar_backend_cancel(be, &h, &err) != 0) rc = -1;
  altar_handle_clear(&h);
  return rc;
}

int main(int argc, char **argv) {
  int tasks = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20;
  const char *image = argc > 2 ? argv[2] : "altar-test/busybox:1";
  if (tasks < 1 || tasks > 10000) tasks = 20;
  const char *info[] = {"docker", "info", "--format", "{{.ServerVersion}}", NULL};
  if (run(info, NULL, 0) != 0) {
    fprintf(stderr, "bench_docker: no Docker engine (scripts/services/dockerd.sh start)\n");
    return 1;
  }
  char root[] = "/tmp/altar-bench-docker.XXXXXX";
  if (!mkdtemp(root)) return 1;
  char volume[512];
  snprintf(volume, sizeof volume, "%s:/mnt/volume", root);

  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_docker_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  if (!be) {
    fprintf(stderr, "bench_docker: %s\n", berr.msg);
    return 1;
  }
  altar_spec_t *spec = altar_spec_new("bench", image);
  altar_spec_add_arg(spec, "true");
  altar_spec_set_label(spec, "job_id", "bench");

  /* Warm the engine (first container start is slower). */
  bare_task(image, volume);
  backend_task(be, spec);

  /* Interleaved, so drift in the engine's speed hits both sides alike. */
  int fails = 0;
  double *tb = calloc((size_t)tasks, sizeof *tb), *tk = calloc((size_t)tasks, sizeof *tk);
  double *ta = calloc((size_t)tasks, sizeof *ta);
  if (!tb || !tk || !ta) return 1;
  double t0;
  for (int i = 0; i < tasks; i++) {
    t0 = bench_now_s();
    fails += bare_task(image, volume) != 0;
    tb[i] = bench_now_s() - t0;
    t0 = bench_now_s();
    fails += backend_task(be, spec) != 0;
    tk[i] = bench_now_s() - t0;
    t0 = bench_now_s();
    const char *att[] = {"docker", "run", "--rm", image, "true", NULL};
    fails += run(att, NULL, 0) != 0;
    ta[i] = bench_now_s() - t0;
  }
  double bare = mean(tb, tasks), backend = mean(tk, tasks), attached = mean(ta, tasks);
  double bare_med = median(tb, tasks), backend_med = median(tk, tasks), attached_med = median(ta, tasks);
  free(tb);
  free(tk);
  free(ta);

  /* Bulk poll: N finished containers, one poll vs N inspects. */
  altar_handle_t *hs = calloc((size_t)tasks, sizeof *hs);
  altar_status_t *sts = calloc((size_t)tasks, sizeof *sts);
  altar_error_t err = {0};
  int nh = 0;
  for (int i = 0; i < tasks; i++)
    if (altar_backend_submit(be, spec, &hs[nh], &err) == 0) nh++;
  /* Let them all finish before timing the probes. */
  for (int tries = 0; tries < 600; tries++) {
    int done = 0;
    if (altar_backend_poll(be, hs, (size_t)nh, sts, &err) != 0) break;
    for (int i = 0; i < nh; i++) {
      done += altar_state_terminal(sts[i].state);
      altar_status_clear(&sts[i]);
    }
    if (done == nh) break;
    usleep(50000);
  }
  t0 = bench_now_s();
  if (altar_backend_poll(be, hs, (size_t)nh, sts, &err) != 0) fails++;
  double bulk = bench_now_s() - t0;
  for (int i = 0; i < nh; i++) altar_status_clear(&sts[i]);
  t0 = bench_now_s();
  for (int i = 0; i < nh; i++) {
    const char *insp[] = {"docker", "inspect", "--type", "container", hs[i].external_id, NULL};
    fails += run(insp, NULL, 0) != 0;
  }
  double single = bench_now_s() - t0;
  for (int i = 0; i < nh; i++) {
    altar_backend_cancel(be, &hs[i], &err);
    altar_handle_clear(&hs[i]);
  }
  free(hs);
  free(sts);

  printf("docker backend, %d tasks of `%s true`, sequential, poll every %d ms\n", tasks, image, POLL_SLEEP_US / 1000);
  printf("                                  mean ms/task  median   ratio(mean)\n");
  printf("  bare docker run -d/inspect/rm : %8.1f  %8.1f   1.000 (baseline)\n", bare * 1e3, bare_med * 1e3);
  printf("  altar docker backend          : %8.1f  %8.1f   %.3f  overhead %+.1f ms/task\n", backend * 1e3,
         backend_med * 1e3, backend / bare, (backend - bare) * 1e3);
  printf("  docker run --rm (attached)    : %8.1f  %8.1f   %.3f\n", attached * 1e3, attached_med * 1e3,
         attached / bare);
  printf("  probe %d finished tasks       : one backend poll %.1f ms vs %d docker inspect %.1f ms  ratio %.3f\n", nh,
         bulk * 1e3, nh, single * 1e3, single > 0 ? bulk / single : 0.0);
  if (fails) printf("  (%d operations failed)\n", fails);

  altar_spec_free(spec);
  altar_backend_close(be);
  rmdir(root);
  return fails ? 1 : 0;
}
