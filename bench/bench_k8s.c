/* The kubernetes backend at scale against the real control plane
 * (scripts/services/k8s.sh: etcd, kube-apiserver, the Job controller, the
 * scheduler, kwok finishing the pods), at several Job counts in one run.
 * The smallest count is the baseline the larger ones are compared with.
 *
 * Per count N:
 *   submit   N Jobs through altar_k8s_submit (one libcurl handle, in turn):
 *            Jobs per second
 *   tick     one altar_k8s_poll of every handle submitted so far, between
 *            one-second batches of submits (as a worker interleaves them)
 *            and on until every Job is finished: ms per tick with all N
 *            submitted, one tick once all are finished, and the API
 *            requests a tick makes
 *            (LIST calls counted by the API server's own
 *            apiserver_request_total, read before and after)
 *   delay    Jobs grouped by 5 (a model's folds): from the last completion
 *            of a group (the Jobs' status.completionTime, which the server
 *            keeps to the second) to the poll tick that sees the whole group
 *            succeeded, which is when a worker would emit the last status
 *            event the reconciler fires the group on
 * Usage: bench_k8s [N…]   (default 1000 2000 4000)
 * Needs ALTAR_K8S_DIR (default ${TMPDIR:-/tmp}/altar-k8s-16443). */
#include "altar/buf.h"
#include "backends/k8s_api.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS "altar-bench"
#define GROUP 5

static char kdir[1024];
static char port[16] = "16443";

static double now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p) {
  if (!n) return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  return altar_buf_append(ud, p, size * n) ? 0 : size * n;
}

/* The admin's view of the API: method path [body] → body text (caller frees). */
static char *kube(const char *method, const char *path, const char *body, long *pstatus) {
  char url[2048], ca[1100], cert[1100], key[1100];
  snprintf(url, sizeof url, "https://127.0.0.1:%s%s", port, path);
  snprintf(ca, sizeof ca, "%s/pki/ca.crt", kdir);
  snprintf(cert, sizeof cert, "%s/pki/admin.crt", kdir);
  snprintf(key, sizeof key, "%s/pki/admin.key", kdir);
  CURL *c = curl_easy_init();
  altar_buf_t b = {0};
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
  curl_easy_setopt(c, CURLOPT_SSLKEY, key);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  long status = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (pstatus) *pstatus = status;
  altar_buf_append(&b, "", 1);
  return (char *)b.data;
}

/* LIST requests the API server has served for jobs and pods (its own counter). */
static double list_requests(void) {
  char *m = kube("GET", "/metrics", NULL, NULL);
  double sum = 0;
  for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "apiserver_request_total{", 24) || !strstr(line, "verb=\"LIST\"")) continue;
    if (!strstr(line, "resource=\"jobs\"") && !strstr(line, "resource=\"pods\"")) continue;
    char *sp = strrchr(line, ' ');
    if (sp) sum += strtod(sp + 1, NULL);
  }
  free(m);
  return sum;
}

/* Deletes every Job (and, through the garbage collector, pod) in NS and
 * waits until both are gone, so one count does not load the next. */
static int clear_namespace(void) {
  char *r = kube("DELETE", "/apis/batch/v1/namespaces/" NS "/jobs",
                 "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Background\"}", NULL);
  free(r);
  for (int i = 0; i < 3000; i++) {
    char *p = kube("GET", "/api/v1/namespaces/" NS "/pods?limit=1", NULL, NULL);
    char *j = kube("GET", "/apis/batch/v1/namespaces/" NS "/jobs?limit=1", NULL, NULL);
    bool empty = p && j && strstr(p, "\"items\":[]") && strstr(j, "\"items\":[]");
    free(p);
    free(j);
    if (empty) return 0;
    usleep(200000);
  }
  return -1;
}

/* completionTime of each Job, by name, from one bulk read (Unix seconds). */
static int completion_times(altar_handle_t *hs, size_t n, double *pdone) {
  for (size_t i = 0; i < n; i++) pdone[i] = NAN;
  char cont[4096] = "";
  for (int page = 0; page < 10000; page++) {
    char path[4400];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/" NS "/jobs?limit=500%s%s", cont[0] ? "&continue=" : "",
             cont);
    char *body = kube("GET", path, NULL, NULL);
    json_t *list = body ? json_loads(body, 0, NULL) : NULL;
    free(body);
    if (!list) return -1;
    size_t k;
    json_t *job;
    json_array_foreach(json_object_get(list, "items"), k, job) {
      const char *name = json_string_value(json_object_get(json_object_get(job, "metadata"), "name"));
      const char *ct = json_string_value(json_object_get(json_object_get(job, "status"), "completionTime"));
      struct tm tm;
      memset(&tm, 0, sizeof tm);
      if (!name || !ct || !strptime(ct, "%Y-%m-%dT%H:%M:%SZ", &tm)) continue;
      for (size_t i = 0; i < n; i++)
        if (!strcmp(hs[i].external_id, name)) pdone[i] = (double)timegm(&tm);
    }
    const char *next = json_string_value(json_object_get(json_object_get(list, "metadata"), "continue"));
    char *e = next && *next ? curl_easy_escape(NULL, next, 0) : NULL;
    snprintf(cont, sizeof cont, "%s", e ? e : "");
    curl_free(e);
    json_decref(list);
    if (!cont[0]) break;
  }
  return 0;
}

typedef struct result {
  size_t n;
  double submit_per_s;
  double tick_ms_median, tick_ms_final;
  double lists_per_tick;
  double delay_median, delay_p95;
  size_t succeeded;
} result_t;

static altar_k8s_t *make_backend(void) {
  char path[1100];
  snprintf(path, sizeof path, "%s/admin.kubeconfig", kdir);
  altar_k8s_http_config_t http;
  altar_k8s_http_config_init(&http);
  altar_error_t err = {0};
  if (altar_k8s_kubeconfig_load(path, NULL, &http, &err)) {
    fprintf(stderr, "bench_k8s: %s\n", err.msg);
    return NULL;
  }
  altar_k8s_runtime_t *rt = altar_k8s_http_runtime_new(&http, &err);
  altar_k8s_http_config_clear(&http);
  if (!rt) {
    fprintf(stderr, "bench_k8s: %s\n", err.msg);
    return NULL;
  }
  altar_k8s_config_t cfg;
  altar_k8s_config_init(&cfg);
  cfg.namespace_ = NS;
  altar_k8s_t *k = altar_k8s_new(&cfg, rt, &err);
  if (!k) fprintf(stderr, "bench_k8s: %s\n", err.msg);
  return k;
}

static int run_count(size_t n, result_t *res) {
  memset(res, 0, sizeof *res);
  res->n = n;
  if (clear_namespace()) {
    fprintf(stderr, "bench_k8s: namespace " NS " did not empty\n");
    return -1;
  }
  altar_k8s_t *k = make_backend();
  if (!k) return -1;
  altar_handle_t *hs = calloc(n, sizeof *hs);
  altar_status_t *st = calloc(n, sizeof *st);
  double *seen = calloc(n, sizeof *seen), *done = calloc(n, sizeof *done);
  double *ticks = calloc(100000, sizeof *ticks);
  int rc = hs && st && seen && done && ticks ? 0 : -1;
  char run[64];
  snprintf(run, sizeof run, "bench-%zu-%ld", n, (long)time(NULL));
  for (size_t i = 0; i < n; i++) seen[i] = NAN;
  /* Submitting and polling interleave as in a worker: up to a second of
   * submits, then one tick over every handle submitted so far, so a Job
   * that finishes early is seen early. The submit rate counts only the
   * time inside submit. */
  size_t submitted = 0, nticks = 0, nfull = 0, finished = 0;
  double submit_s = 0, *full = calloc(100000, sizeof *full);
  double lists0 = list_requests(), give_up = now_mono() + 1800;
  if (!full) rc = -1;
  while (!rc && (submitted < n || finished < n) && nticks < 100000) {
    double batch_end = now_mono() + 1.0;
    while (!rc && submitted < n && now_mono() < batch_end) {
      size_t i = submitted;
      altar_spec_t *s = altar_spec_new("bench", "busybox:1.36");
      char fold[32], model[32];
      snprintf(fold, sizeof fold, "%zu", i % GROUP);
      snprintf(model, sizeof model, "m%zu", i / GROUP);
      altar_spec_set_label(s, "job_id", run);
      altar_spec_set_label(s, "model_id", model);
      altar_spec_set_label(s, "fold", fold);
      altar_spec_add_arg(s, "true");
      altar_error_t err = {0};
      double a = now_mono();
      rc = altar_k8s_submit(k, s, &hs[i], &err);
      submit_s += now_mono() - a;
      if (rc) fprintf(stderr, "bench_k8s: submit %zu: %s\n", i, err.msg);
      else submitted++;
      altar_spec_free(s);
    }
    if (rc || !submitted) break;
    double a = now_mono();
    altar_error_t err = {0};
    rc = altar_k8s_poll(k, hs, submitted, st, &err);
    double wall = now_wall(), ms = (now_mono() - a) * 1000.0;
    ticks[nticks++] = ms;
    if (submitted == n) full[nfull++] = ms;
    if (rc) {
      fprintf(stderr, "bench_k8s: poll: %s\n", err.msg);
      break;
    }
    finished = 0;
    for (size_t i = 0; i < submitted; i++) {
      if (altar_state_terminal(st[i].state)) {
        finished++;
        if (isnan(seen[i])) {
          seen[i] = wall;
          if (st[i].state == ALTAR_STATE_SUCCEEDED) res->succeeded++;
        }
      }
      altar_status_clear(&st[i]);
    }
    if (now_mono() > give_up) {
      fprintf(stderr, "bench_k8s: %zu of %zu Jobs finished after 30 min\n", finished, n);
      rc = -1;
    }
  }
  res->submit_per_s = submit_s > 0 ? (double)submitted / submit_s : NAN;
  double lists1 = list_requests();
  /* One more tick with everything finished: the steady cost. */
  if (!rc) {
    altar_error_t err = {0};
    double a = now_mono();
    rc = altar_k8s_poll(k, hs, n, st, &err);
    res->tick_ms_final = (now_mono() - a) * 1000.0;
    for (size_t i = 0; !rc && i < n; i++) altar_status_clear(&st[i]);
  }
  res->tick_ms_median = pct(full, nfull, 0.5);
  free(full);
  /* The two metric reads are LISTs of neither jobs nor pods, so the delta
   * counts only the ticks' own requests. */
  res->lists_per_tick = nticks ? (lists1 - lists0) / (double)nticks : NAN;
  if (!rc && completion_times(hs, n, done) == 0) {
    size_t ng = (n + GROUP - 1) / GROUP, m = 0;
    double *delays = calloc(ng, sizeof *delays);
    for (size_t g = 0; delays && g < ng; g++) {
      double last_done = -INFINITY, last_seen = -INFINITY;
      bool ok = true;
      for (size_t i = g * GROUP; i < n && i < (g + 1) * GROUP; i++) {
        if (isnan(done[i]) || isnan(seen[i])) ok = false;
        else {
          if (done[i] > last_done) last_done = done[i];
          if (seen[i] > last_seen) last_seen = seen[i];
        }
      }
      if (ok) delays[m++] = last_seen - last_done;
    }
    res->delay_median = pct(delays, m, 0.5);
    res->delay_p95 = pct(delays, m, 0.95);
    free(delays);
  }
  for (size_t i = 0; hs && i < n; i++) altar_handle_clear(&hs[i]);
  free(hs);
  free(st);
  free(seen);
  free(done);
  free(ticks);
  altar_k8s_free(k);
  return rc;
}

int main(int argc, char **argv) {
  const char *d = getenv("ALTAR_K8S_DIR");
  if (getenv("ALTAR_K8S_PORT")) snprintf(port, sizeof port, "%s", getenv("ALTAR_K8S_PORT"));
  if (d && *d) snprintf(kdir, sizeof kdir, "%s", d);
  else snprintf(kdir, sizeof kdir, "%s/altar-k8s-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", port);
  size_t counts[16] = {1000, 2000, 4000}, nc = 3;
  if (argc > 1) {
    nc = 0;
    for (int i = 1; i < argc && nc < 16; i++) {
      long v = strtol(argv[i], NULL, 10);
      if (v < GROUP || v > 100000) {
        fprintf(stderr, "usage: bench_k8s [N…]  (each %d..100000)\n", GROUP);
        return 2;
      }
      counts[nc++] = (size_t)v;
    }
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  long status = 0;
  free(kube("GET", "/api/v1/namespaces/" NS, NULL, &status));
  if (status != 200) {
    fprintf(stderr, "bench_k8s: no control plane at %s (scripts/services/k8s.sh start)\n", kdir);
    return 1;
  }
  result_t r[16];
  printf("kubernetes backend against kube-apiserver + Job controller + scheduler + kwok, namespace " NS "\n");
  printf("%7s %10s %9s %11s %11s %12s %12s %9s\n", "jobs", "submit/s", "tick ms", "final tick", "LISTs/tick",
         "delay med s", "delay p95 s", "succeeded");
  for (size_t c = 0; c < nc; c++) {
    double t = now_mono();
    if (run_count(counts[c], &r[c])) return 1;
    printf("%7zu %10.1f %9.1f %11.1f %11.2f %12.2f %12.2f %9zu   (%.0f s)\n", r[c].n, r[c].submit_per_s,
           r[c].tick_ms_median, r[c].tick_ms_final, r[c].lists_per_tick, r[c].delay_median, r[c].delay_p95,
           r[c].succeeded, now_mono() - t);
    fflush(stdout);
  }
  clear_namespace();
  printf("\nagainst the %zu-Job baseline (same run):\n", r[0].n);
  printf("%7s %14s %18s %14s\n", "jobs", "submit rate", "final tick / job", "delay median");
  for (size_t c = 0; c < nc; c++)
    printf("%7zu %13.2fx %17.2fx %13.2fx\n", r[c].n, r[c].submit_per_s / r[0].submit_per_s,
           (r[c].tick_ms_final / (double)r[c].n) / (r[0].tick_ms_final / (double)r[0].n),
           r[c].delay_median / r[0].delay_median);
  return 0;
}
