/* The kubernetes backend's poll over its Job watch, no cluster: a watch
 * fed N Jobs' events as a server would send them, then polls of all N
 * handles (labelled as bench_k8s labels them), as the worker asks once
 * every Job is submitted. Per N: the median of a few polls, wall and CPU,
 * per Job, split into the watch's map lookups and the rest of poll (the
 * statuses it makes) plus the caller's clearing them. The aim is a cost per
 * Job flat in N.
 * Usage: bench_k8s_poll [N…]   (default 1000 10000 100000) */
#include "backends/k8s_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static altar_k8s_watch_t *fed;
static int fed_open(void *impl, const char *ns, const char *sel, altar_k8s_watch_t **pw, altar_error_t *err) {
  (void)impl, (void)ns, (void)sel, (void)err;
  *pw = fed = altar__k8s_watch_test_new();
  return *pw ? 0 : ALTAR_ENOMEM;
}
static int no_read(void *impl, const char *name, const char *ns, altar_k8s_job_info_t **pjob, altar_error_t *err) {
  (void)impl, (void)name, (void)ns, (void)err;
  *pjob = NULL;
  return 0;
}
static int no_create(void *impl, const json_t *m, const char *ns, char **pname, char **puid, altar_error_t *err) {
  (void)impl, (void)m, (void)ns, (void)pname, (void)puid;
  return altar_error_set(err, ALTAR_ENOTSUP, "no creates here");
}
static int no_list(void *impl, const char *ns, const char *sel, altar_k8s_job_info_t **pjobs, size_t *pn,
                   altar_error_t *err) {
  (void)impl, (void)ns, (void)sel, (void)err;
  *pjobs = NULL;
  *pn = 0;
  return 0;
}
static int no_delete(void *impl, const char *name, const char *ns, const char *uid, altar_error_t *err) {
  (void)impl, (void)name, (void)ns, (void)uid;
  return altar_error_set(err, ALTAR_ENOTSUP, "no deletes here");
}
static void no_destroy(void *impl) { (void)impl; }
static const altar_k8s_runtime_ops_t ops = {.name = "fed-watch",
                                            .create_job = no_create,
                                            .list_jobs = no_list,
                                            .read_job = no_read,
                                            .delete_job = no_delete,
                                            .watch_open = fed_open,
                                            .destroy = no_destroy};

#define REPS 7

static int run(size_t n) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.namespace_ = "altar-bench";
  altar_error_t err = {0};
  altar_k8s_t *k = altar__k8s_new(&cfg, altar__k8s_runtime_new(&ops, NULL), &err);
  altar_handle_t *hs = calloc(n, sizeof *hs);
  altar_status_t *st = calloc(n, sizeof *st);
  const char **names = calloc(n, sizeof *names);
  altar_k8s_watch_view_t *views = calloc(n, sizeof *views);
  if (!k || !hs || !st || !names || !views) {
    fprintf(stderr, "bench_k8s_poll: %s\n", k ? "out of memory" : err.msg);
    return -1;
  }
  altar_handle_t probe = {.external_id = "no-such-job"};
  altar_status_t one;
  if (altar__k8s_poll(k, &probe, 1, &one, &err) == 0) altar_status_clear(&one); /* opens the watch */
  if (!fed) return -1;
  for (size_t i = 0; i < n; i++) {
    char name[64], line[1024], fold[16], model[32];
    snprintf(name, sizeof name, "bench-%08zx", i * 2654435761u);
    /* Every other Job finished: both kinds of answer. */
    snprintf(line, sizeof line,
             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%s\",\"uid\":\"0b7c1f1e-0000-4000-8000-%012zx\","
             "\"resourceVersion\":\"7\",\"labels\":{\"altar.dev/pool\":\"normal\"}},\"status\":{%s}}}\n",
             name, i,
             i % 2 ? "\"active\":1,\"ready\":1" : "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
    bool expired = false;
    if (altar__k8s_watch_test_feed(fed, line, strlen(line), &expired)) return -1;
    altar_handle_init(&hs[i], "kubernetes", name);
    snprintf(fold, sizeof fold, "%zu", i % 5);
    snprintf(model, sizeof model, "m%zu", i / 5);
    altar_strmap_set(&hs[i].labels, "job_id", "bench-run");
    altar_strmap_set(&hs[i].labels, "model_id", model);
    altar_strmap_set(&hs[i].labels, "fold", fold);
    names[i] = hs[i].external_id;
  }
  double lookup[REPS], poll_wall[REPS], poll_cpu[REPS];
  size_t finished = 0;
  for (int r = 0; r < REPS; r++) {
    double a = now_s(CLOCK_MONOTONIC);
    altar__k8s_watch_lookup(fed, names, n, views);
    lookup[r] = now_s(CLOCK_MONOTONIC) - a;
    a = now_s(CLOCK_MONOTONIC);
    double c = now_s(CLOCK_THREAD_CPUTIME_ID);
    if (altar__k8s_poll(k, hs, n, st, &err)) {
      fprintf(stderr, "bench_k8s_poll: %s\n", err.msg);
      return -1;
    }
    finished = 0;
    for (size_t i = 0; i < n; i++) {
      finished += altar_state_terminal(st[i].state);
      altar_status_clear(&st[i]);
    }
    poll_cpu[r] = now_s(CLOCK_THREAD_CPUTIME_ID) - c;
    poll_wall[r] = now_s(CLOCK_MONOTONIC) - a;
  }
  qsort(lookup, REPS, sizeof *lookup, cmp_double);
  qsort(poll_wall, REPS, sizeof *poll_wall, cmp_double);
  qsort(poll_cpu, REPS, sizeof *poll_cpu, cmp_double);
  double per = 1e6 / (double)n;
  printf("%8zu %10.2f %12.3f %12.3f %12.3f %9zu\n", n, poll_wall[REPS / 2] * 1e3, poll_wall[REPS / 2] * per,
         poll_cpu[REPS / 2] * per, lookup[REPS / 2] * per, finished);
  for (size_t i = 0; i < n; i++) altar_handle_clear(&hs[i]);
  free(hs);
  free(st);
  free(names);
  free(views);
  altar__k8s_free(k);
  fed = NULL;
  return 0;
}

int main(int argc, char **argv) {
  size_t counts[16] = {1000, 10000, 100000}, nc = 3;
  if (argc > 1) nc = 0;
  for (int i = 1; i < argc && nc < 16; i++) {
    long v = strtol(argv[i], NULL, 10);
    if (v < 1 || v > 1000000) {
      fprintf(stderr, "usage: bench_k8s_poll [N…]  (each 1..1000000)\n");
      return 2;
    }
    counts[nc++] = (size_t)v;
  }
  printf("one poll of N handles answered from the Job watch (median of %d)\n", REPS);
  printf("%8s %10s %12s %12s %12s %9s\n", "jobs", "poll ms", "us/Job wall", "us/Job cpu", "lookup us/J", "finished");
  for (size_t i = 0; i < nc; i++)
    if (run(counts[i])) return 1;
  return 0;
}
