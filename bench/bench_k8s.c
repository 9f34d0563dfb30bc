/* The kubernetes backend at scale against the real control plane
 * (scripts/services/k8s.sh: etcd, kube-apiserver, the Job controller, the
 * scheduler, kwok finishing the pods), at several Job counts in one run,
 * each beside a curl baseline measured in the same run.
 *
 * Per count N, two rows:
 *   altar   N Jobs through altar__k8s_submit_start with `--window W` creates
 *           in flight on one HTTP/2 connection, taken and polled as the
 *           worker's loop does: a Job submitted only while capacity leaves
 *           a free slot (`--backlog B` Jobs not yet started fill it; the
 *           bound starts at `--start S` and grows by one per start), paused
 *           on wait_change while it leaves none, and polled every 200 ms or
 *           at once when wait_change says the watch saw a change (poll
 *           answers from the Job watch); a poll asks about the Jobs not yet
 *           seen finished, as a worker asks about its running tasks
 *   curl    the same N manifests (rendered by altar) POSTed by the curl
 *           program, one connection, --parallel-max W; completions seen by
 *           a bare watch (altar's watch object, woken on every event)
 * and for each:
 *   submit/s   N / (first POST → last create answered)
 *   e2e/s      N / (first POST → all N seen finished)
 *   tick ms    one poll of every handle, all N submitted and finished
 *              (altar only; TICKS polls after the row): wall median, and the
 *              CPU time of the polling thread (the wall counts the time the
 *              cluster's processes, on the same cores, preempt it); and in
 *              the parentheses the same for a poll of TICK_FIXED of them
 *              (a worker's running tasks), which should not grow with N
 *   delay      Jobs grouped by 5 (a model's folds): from the last completion
 *              of a group (the Jobs' status.completionTime, which the server
 *              keeps to the second, so ~0.5 s of it is rounding) to when the
 *              whole group was seen finished: median and p95
 *   starved    "watcher close due to unresponsiveness" lines the API server
 *              logged during the row (it drops a controller's watch then)
 * and after each row, in parentheses: the client's CPU (the bench's, with
 * curl's) from first POST to all seen, taken from the cores the cluster
 * runs on; for altar also a Job's time to start (create → the first poll
 * that sees it running or ended; median, p95) and the backlog of Jobs not
 * yet started averaged over the polls while Jobs were left to submit: by
 * Little's law the rate the cluster starts Jobs at is that backlog over
 * that time, so a backlog that raises the time alone bought no rate; and
 * the time from the last create answered to all seen finished (the last
 * backlog's drain).
 * The rows of the i-th count take turns going first (altar first for
 * even i): give a count twice to see both orders.
 * --trace prints to stderr, once a second, what was submitted, waiting
 * and finished (curl: finished as the watch saw them).
 * Usage: bench_k8s [--window W] [--backlog B] [--start S] [--trace] [--no-curl | --no-altar] [N…]
 *   (default W 16, B ALTAR_K8S_DEFAULT_SUBMIT_BACKLOG, S ALTAR_K8S_DEFAULT_PACE_START,
 *   S >= B: no slow start; N 1000 4000)
 * Needs ALTAR_K8S_DIR (default ${TMPDIR:-/tmp}/altar-k8s-16443). */
#include "altar/buf.h"
#include "backends/k8s_api.h"
#include "backends/k8s_json_trim.h"
#include "core/unconst.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS "altar-bench"
#define GROUP 5
/* The worker's longest wait for a record in one turn (worker/worker.c). */
#define TURN_S 0.05
#define TICKS 20 /* polls of all N after a row */
/* Handles in the fixed-size poll after a row: a worker asks about its
 * running tasks, as many as its slots, whatever the number of Jobs the
 * watch holds. */
#define TICK_FIXED 1000

static char kdir[1024];
static char port[16] = "16443";

static double now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the calling thread. */
static double now_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process and its waited-for children (curl): what the
 * client takes from the cores the cluster runs on. */
static double now_proc_cpu(void) {
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  return (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) +
         (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) / 1e6;
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

/* What a row leaves behind for the next, printed before each row: the
 * namespace's Events (the Job controller's, the scheduler's and kwok's,
 * kept an hour) and the size of etcd's database (the API server's
 * apiserver_storage_size_bytes). */
static void print_cluster_state(const char *who) {
  long events = -1;
  char *body = kube("GET", "/api/v1/namespaces/" NS "/events?limit=1", NULL, NULL);
  json_t *list = body ? json_loads(body, 0, NULL) : NULL;
  free(body);
  if (list) {
    json_t *meta = json_object_get(list, "metadata");
    events = (long)json_array_size(json_object_get(list, "items")) +
             (long)json_integer_value(json_object_get(meta, "remainingItemCount"));
    json_decref(list);
  }
  double db = NAN;
  char *m = kube("GET", "/metrics", NULL, NULL);
  const char *at = m ? strstr(m, "\napiserver_storage_size_bytes{") : NULL;
  if (at && (at = strchr(at, '}'))) db = strtod(at + 1, NULL);
  free(m);
  printf("        (before %s: %ld events in " NS ", etcd %.1f MB)\n", who, events, db / 1e6);
  fflush(stdout);
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

/* The pages of a list of every Job in NS, as the server sends them. */
static size_t fetch_pages(char **pages, size_t max) {
  char cont[4096] = "";
  size_t n = 0;
  while (n < max) {
    char path[4400];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/" NS "/jobs?limit=500%s%s", cont[0] ? "&continue=" : "",
             cont);
    char *body = kube("GET", path, NULL, NULL);
    json_t *list = body ? json_loads(body, 0, NULL) : NULL;
    if (!list) {
      free(body);
      break;
    }
    pages[n++] = body;
    const char *next = json_string_value(json_object_get(json_object_get(list, "metadata"), "continue"));
    char *e = next && *next ? curl_easy_escape(NULL, next, 0) : NULL;
    snprintf(cont, sizeof cont, "%s", e ? e : "");
    curl_free(e);
    json_decref(list);
    if (!cont[0]) break;
  }
  return n;
}

typedef struct result {
  size_t n;
  double submit_per_s, e2e_per_s;
  double tick_ms_median, tick_cpu_ms_median;
  double fixed_ms_median, fixed_cpu_ms_median; /* a poll of TICK_FIXED of them */
  double delay_median, delay_p95;
  size_t succeeded;
  long starved;
  size_t polls, woken; /* altar: polls, and those wait_change asked for */
  size_t paused;       /* altar: turns with Jobs left and no free slot */
  uint64_t pace_holds; /* altar: capacity reads the backlog left without a slot */
  /* altar: a Job's time to start (its create → the first poll that sees it
   * running or ended), median and p95, and the backlog (Jobs created and not
   * started) averaged over the polls while Jobs were left to submit: by
   * Little's law the submit rate is about that backlog over that time. */
  double start_median, start_p95, backlog_mean;
  double drain_s;      /* last create answered → all seen finished */
  double client_cpu_s; /* the bench's CPU (with curl's) from first POST to all seen */
  /* A list of all N Jobs as the server sends it, decoded whole and with
   * managedFields skipped as text first (as the backend does): bytes and
   * ms for every page, median of a few decodes. */
  size_t list_bytes, list_trimmed_bytes;
  double decode_ms, decode_trim_ms;
} result_t;

static int window = 16, backlog = ALTAR_K8S_DEFAULT_SUBMIT_BACKLOG, pace_start = ALTAR_K8S_DEFAULT_PACE_START;
static bool with_curl = true, with_altar = true, trace = false;

/* Lines of the API server's log that say it dropped a slow watcher. */
static long starved_lines(void) {
  char path[1100];
  snprintf(path, sizeof path, "%s/log/kube-apiserver.log", kdir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long n = 0;
  char line[8192];
  while (fgets(line, sizeof line, f))
    if (strstr(line, "watcher close due to unresponsiveness")) n++;
  fclose(f);
  return n;
}

static altar_k8s_t *make_backend(int win) {
  char path[1100];
  snprintf(path, sizeof path, "%s/admin.kubeconfig", kdir);
  altar_k8s_http_config_t http;
  altar__k8s_http_config_init(&http);
  altar_error_t err = {0};
  if (altar__k8s_kubeconfig_load(path, NULL, &http, &err)) {
    fprintf(stderr, "bench_k8s: %s\n", err.msg);
    return NULL;
  }
  altar_k8s_runtime_t *rt = altar__k8s_http_runtime_new(&http, &err);
  altar__k8s_http_config_clear(&http);
  if (!rt) {
    fprintf(stderr, "bench_k8s: %s\n", err.msg);
    return NULL;
  }
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.namespace_ = NS;
  cfg.submit_window = win;
  cfg.submit_backlog = backlog;
  altar_k8s_t *k = altar__k8s_new(&cfg, rt, &err);
  if (!k) fprintf(stderr, "bench_k8s: %s\n", err.msg);
  else altar__k8s_pace_set_start(k, pace_start);
  return k;
}

static altar_spec_t *bench_spec(const char *run, size_t i) {
  altar_spec_t *s = altar_spec_new("bench", "busybox:1.36");
  char fold[32], model[32];
  snprintf(fold, sizeof fold, "%zu", i % GROUP);
  snprintf(model, sizeof model, "m%zu", i / GROUP);
  altar_spec_set_label(s, "job_id", run);
  altar_spec_set_label(s, "model_id", model);
  altar_spec_set_label(s, "fold", fold);
  altar_spec_add_arg(s, "true");
  return s;
}

/* Waits (bounded) until k's watch has listed. */
static int wait_synced(altar_k8s_t *k) {
  for (int i = 0; i < 600; i++) {
    altar_handle_t none = {.external_id = "bench-no-such-job"};
    altar_status_t st;
    altar_error_t err = {0};
    if (altar__k8s_poll(k, &none, 1, &st, &err) == 0) altar_status_clear(&st);
    if (altar__k8s_watch(k) && altar__k8s_watch_synced(altar__k8s_watch(k))) return 0;
    usleep(100000);
  }
  return -1;
}

/* Delay per group of GROUP from completionTime to seen. */
static void delays(const char *const *names, size_t n, const double *seen, result_t *res) {
  altar_handle_t *hs = calloc(n, sizeof *hs);
  double *done = calloc(n, sizeof *done);
  for (size_t i = 0; hs && i < n; i++) hs[i].external_id = ALTAR__UNCONST(names[i]);
  if (hs && done && completion_times(hs, n, done) == 0) {
    size_t ng = (n + GROUP - 1) / GROUP, m = 0;
    double *d = calloc(ng, sizeof *d);
    for (size_t g = 0; d && g < ng; g++) {
      double last_done = -INFINITY, last_seen = -INFINITY;
      bool ok = true;
      for (size_t i = g * GROUP; i < n && i < (g + 1) * GROUP; i++) {
        if (isnan(done[i]) || isnan(seen[i])) ok = false;
        else {
          if (done[i] > last_done) last_done = done[i];
          if (seen[i] > last_seen) last_seen = seen[i];
        }
      }
      if (ok) d[m++] = last_seen - last_done;
    }
    res->delay_median = pct(d, m, 0.5);
    res->delay_p95 = pct(d, m, 0.95);
    free(d);
  }
  free(hs);
  free(done);
}

/* Decoding a list of every Job, whole and trimmed (the same copy work in
 * both, so the difference is the parse alone). */
static void decode_cost(struct result *res);

/* The free slots of the CPU pool as the worker reads them: INT64_MAX
 * when the backend reports no fixed capacity. */
static int64_t cpu_room(altar_k8s_t *k) {
  altar_capacity_t cap;
  altar_capacity_init(&cap);
  altar_error_t err = {0};
  int64_t room = INT64_MAX;
  if (altar__k8s_capacity(k, &cap, &err) == 0 && cap.n) {
    altar_resources_t cpu = {.count = 1};
    room = altar_capacity_free_for(&cap, &cpu);
  }
  altar_capacity_clear(&cap);
  return room;
}

/* TICKS polls of hs[0..n): the median wall and CPU time of one (ms). */
static int time_polls(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *st, double *wall_ms,
                      double *cpu_ms) {
  double wall[TICKS], cpu[TICKS];
  for (int t = 0; t < TICKS; t++) {
    double a = now_mono(), c = now_cpu();
    altar_error_t err = {0};
    int rc = altar__k8s_poll(k, hs, n, st, &err);
    cpu[t] = (now_cpu() - c) * 1000.0;
    wall[t] = (now_mono() - a) * 1000.0;
    for (size_t i = 0; i < n; i++) altar_status_clear(&st[i]);
    if (rc) {
      fprintf(stderr, "bench_k8s: poll of %zu: %s\n", n, err.msg);
      return rc;
    }
  }
  *wall_ms = pct(wall, TICKS, 0.5);
  *cpu_ms = pct(cpu, TICKS, 0.5);
  return 0;
}

/* altar: pipelined submits and the worker's loop (worker/worker.c), one
 * record a turn: a record is taken only while capacity leaves the CPU pool
 * a free slot (one fewer per submit until the next read, as the worker
 * counts); with none the worker is paused and waits on the backend
 * (wait_change, up to its next poll, at most a turn), polling at once when
 * it says something changed; with every Job submitted it waits a turn on
 * the log and then asks wait_change without blocking. Otherwise a poll
 * every 200 ms; capacity is read again after each poll. */
static int run_altar(size_t n, result_t *res) {
  memset(res, 0, sizeof *res);
  res->n = n;
  if (clear_namespace()) return -1;
  altar_k8s_t *k = make_backend(window);
  if (!k || wait_synced(k)) {
    altar__k8s_free(k);
    return -1;
  }
  long starved0 = starved_lines();
  altar_handle_t *hs = calloc(n, sizeof *hs);
  altar_status_t *st = calloc(n, sizeof *st);
  double *seen = calloc(n, sizeof *seen);
  double *created = calloc(n, sizeof *created), *to_start = calloc(n, sizeof *to_start);
  const char **names = calloc(n, sizeof *names);
  /* The Jobs not yet seen finished (indices into hs) and their handles in
   * one array for poll. */
  size_t *open = calloc(n, sizeof *open), nopen = 0;
  altar_handle_t *ph = calloc(n, sizeof *ph);
  int rc = hs && st && seen && created && to_start && names && open && ph ? 0 : -1;
  size_t nstart = 0, nbacklog = 0;
  double backlog_sum = 0;
  char run[64];
  snprintf(run, sizeof run, "bench-%zu-%ld", n, (long)time(NULL));
  for (size_t i = 0; i < n; i++) seen[i] = NAN;
  size_t submitted = 0, finished = 0;
  int64_t room = cpu_room(k);
  double cpu0 = now_proc_cpu();
  double t0 = now_mono(), submit_end = NAN, next_poll = t0 + 0.2, give_up = t0 + 1800, next_trace = t0;
  while (!rc && finished < n) {
    bool got = false;
    if (submitted < n && room > 0) {
      altar_spec_t *s = bench_spec(run, submitted);
      altar_error_t err = {0};
      rc = altar__k8s_submit_start(k, s, &hs[submitted], &err);
      altar_spec_free(s);
      if (rc) {
        fprintf(stderr, "bench_k8s: submit %zu: %s\n", submitted, err.msg);
        break;
      }
      open[nopen++] = submitted;
      created[submitted++] = now_mono();
      if (room != INT64_MAX) room--;
      got = true;
    }
    if (submitted == n && isnan(submit_end)) {
      while (altar__k8s_submits_in_flight(k)) altar__k8s_submit_drive(k, 50);
      submit_end = now_mono();
    }
    double now = now_mono();
    if (!got) {
      int wait = next_poll > now ? (int)((next_poll - now) * 1000.0) + 1 : 0;
      if (wait > TURN_S * 1000) wait = (int)(TURN_S * 1000);
      bool woke = false;
      if (submitted < n) {
        res->paused++;
        woke = wait > 0 && altar__k8s_wait_change(k, wait) == 1;
      } else {
        if (wait > 0) usleep((useconds_t)wait * 1000);
        woke = altar__k8s_wait_change(k, 0) == 1;
      }
      if (woke) {
        res->woken++;
        next_poll = now_mono();
      }
    }
    if (now_mono() < next_poll) continue;
    next_poll = now_mono() + 0.2;
    res->polls++;
    for (size_t j = 0; j < nopen; j++) ph[j] = hs[open[j]]; /* shallow: poll only reads them */
    altar_error_t err = {0};
    rc = altar__k8s_poll(k, ph, nopen, st, &err);
    double wall = now_wall();
    room = cpu_room(k);
    if (rc) {
      fprintf(stderr, "bench_k8s: poll: %s\n", err.msg);
      break;
    }
    if (submitted < n) {
      backlog_sum += (double)altar__k8s_submit_backlog(k);
      nbacklog++;
    }
    size_t running = 0, still = 0;
    for (size_t j = 0; j < nopen; j++) {
      size_t i = open[j];
      running += st[j].state == ALTAR_STATE_RUNNING;
      if (st[j].state != ALTAR_STATE_PENDING && created[i] > 0) {
        to_start[nstart++] = now_mono() - created[i];
        created[i] = 0;
      }
      if (altar_state_terminal(st[j].state)) {
        finished++;
        seen[i] = wall;
        if (st[j].state == ALTAR_STATE_SUCCEEDED) res->succeeded++;
      } else {
        open[still++] = i;
      }
      altar_status_clear(&st[j]);
    }
    nopen = still;
    if (trace && now_mono() >= next_trace) {
      next_trace = now_mono() + 1.0;
      fprintf(
          stderr,
          "trace %6.1f s: submitted %zu, in flight %zu, backlog %zu of %d, pending %zu, running %zu, finished %zu\n",
          now_mono() - t0, submitted, altar__k8s_submits_in_flight(k), altar__k8s_submit_backlog(k),
          altar__k8s_pace_limit(k), submitted - running - finished, running, finished);
    }
    if (now_mono() > give_up) {
      fprintf(stderr, "bench_k8s: %zu of %zu Jobs finished after 30 min\n", finished, n);
      rc = -1;
    }
  }
  double t_end = now_mono();
  res->client_cpu_s = now_proc_cpu() - cpu0;
  /* The cost of a poll of all N, which the map answers in time
   * proportional to the handles asked about; and of TICK_FIXED of them,
   * spread over the row (every n / TICK_FIXED-th), which should not grow
   * with N. */
  if (!rc) rc = time_polls(k, hs, n, st, &res->tick_ms_median, &res->tick_cpu_ms_median);
  size_t nfixed = n < TICK_FIXED ? n : TICK_FIXED;
  for (size_t j = 0; !rc && j < nfixed; j++) ph[j] = hs[j * (n / nfixed)]; /* shallow: poll only reads them */
  if (!rc) rc = time_polls(k, ph, nfixed, st, &res->fixed_ms_median, &res->fixed_cpu_ms_median);
  res->submit_per_s = (double)n / (submit_end - t0);
  res->e2e_per_s = (double)n / (t_end - t0);
  res->drain_s = t_end - submit_end;
  res->starved = starved_lines() - starved0;
  res->pace_holds = altar__k8s_pace_holds(k);
  res->start_median = pct(to_start, nstart, 0.5);
  res->start_p95 = pct(to_start, nstart, 0.95);
  res->backlog_mean = nbacklog ? backlog_sum / (double)nbacklog : NAN;
  for (size_t i = 0; i < n; i++) names[i] = hs[i].external_id;
  if (!rc) delays(names, n, seen, res);
  if (!rc) decode_cost(res);
  for (size_t i = 0; hs && i < n; i++) altar_handle_clear(&hs[i]);
  free(hs);
  free(st);
  free(seen);
  free(created);
  free(to_start);
  free(names);
  free(open);
  free(ph);
  altar__k8s_free(k);
  return rc;
}

/* curl: the same manifests POSTed by the curl program with `window` in
 * flight on one connection; a bare watch sees them finish. */
static int run_curl(size_t n, result_t *res) {
  memset(res, 0, sizeof *res);
  res->n = n;
  res->tick_ms_median = res->tick_cpu_ms_median = NAN;
  res->fixed_ms_median = res->fixed_cpu_ms_median = NAN;
  if (clear_namespace()) return -1;
  altar_k8s_t *k = make_backend(1); /* renders, and owns the watch */
  if (!k || wait_synced(k)) {
    altar__k8s_free(k);
    return -1;
  }
  char dir[1200], cfgpath[1300];
  snprintf(dir, sizeof dir, "%s/bench-curl", kdir);
  mkdir(dir, 0700);
  snprintf(cfgpath, sizeof cfgpath, "%s/curl.cfg", dir);
  FILE *cfg = fopen(cfgpath, "w");
  char **names = calloc(n, sizeof *names);
  double *seen = calloc(n, sizeof *seen);
  int rc = cfg && names && seen ? 0 : -1;
  char run[64];
  snprintf(run, sizeof run, "curl-%zu-%ld", n, (long)time(NULL));
  for (size_t i = 0; !rc && i < n; i++) {
    altar_spec_t *s = bench_spec(run, i);
    json_t *m = NULL;
    altar_error_t err = {0};
    rc = altar__k8s_render(k, s, &m, &err);
    altar_spec_free(s);
    if (rc) break;
    names[i] = strdup(json_string_value(json_object_get(json_object_get(m, "metadata"), "name")));
    char f[1400];
    snprintf(f, sizeof f, "%s/%zu.json", dir, i);
    if (json_dump_file(m, f, JSON_COMPACT)) rc = -1;
    json_decref(m);
    /* `next` between requests: options (a body above all) would otherwise
     * accumulate over the URLs. */
    fprintf(cfg,
            "%surl = \"https://127.0.0.1:%s/apis/batch/v1/namespaces/" NS "/jobs\"\ndata-binary = \"@%s\"\n"
            "output = \"/dev/null\"\ncacert = \"%s/pki/ca.crt\"\ncert = \"%s/pki/admin.crt\"\n"
            "key = \"%s/pki/admin.key\"\nheader = \"Content-Type: application/json\"\nsilent\nshow-error\nfail\n",
            i ? "next\n" : "", port, f, kdir, kdir, kdir);
    seen[i] = NAN;
  }
  if (cfg) fclose(cfg);
  long starved0 = starved_lines();
  double cpu0 = now_proc_cpu();
  double t0 = now_mono(), submit_end = NAN;
  pid_t pid = -1;
  if (!rc) {
    char par[16], ca[1100], cert[1100], key[1100];
    snprintf(par, sizeof par, "%d", window);
    snprintf(ca, sizeof ca, "%s/pki/ca.crt", kdir);
    snprintf(cert, sizeof cert, "%s/pki/admin.crt", kdir);
    snprintf(key, sizeof key, "%s/pki/admin.key", kdir);
    pid = fork();
    if (pid == 0) {
      (void)ca, (void)cert, (void)key;
      execlp("curl", "curl", "--no-progress-meter", "--http2", "--parallel", "--parallel-max", par, "-K", cfgpath,
             (char *)NULL);
      _exit(127);
    }
    if (pid < 0) rc = -1;
  }
  altar_k8s_watch_t *w = altar__k8s_watch(k);
  uint64_t gen = 0;
  altar_k8s_watch_view_t *views = calloc(n, sizeof *views);
  size_t finished = 0;
  double give_up = t0 + 1800, next_trace = t0;
  while (!rc && views && finished < n) {
    if (isnan(submit_end)) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        submit_end = now_mono();
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
          fprintf(stderr, "bench_k8s: curl failed\n");
          rc = -1;
        }
      }
    }
    altar__k8s_watch_wait(w, &gen, 20);
    altar__k8s_watch_lookup(w, (const char *const *)names, n, views);
    double wall = now_wall();
    finished = 0;
    for (size_t i = 0; i < n; i++) {
      bool end = views[i].seen == ALTAR_K8S_SEEN_LIVE && altar_state_terminal(views[i].state);
      if (end && isnan(seen[i])) {
        seen[i] = wall;
        if (views[i].state == ALTAR_STATE_SUCCEEDED) res->succeeded++;
      }
      finished += end;
    }
    if (trace && now_mono() >= next_trace) {
      next_trace = now_mono() + 1.0;
      fprintf(stderr, "trace %6.1f s: curl %s, finished %zu\n", now_mono() - t0, isnan(submit_end) ? "posting" : "done",
              finished);
    }
    if (now_mono() > give_up) rc = -1;
  }
  if (isnan(submit_end) && pid > 0) {
    waitpid(pid, NULL, 0);
    submit_end = now_mono();
  }
  double t_end = now_mono();
  res->client_cpu_s = now_proc_cpu() - cpu0;
  res->submit_per_s = (double)n / (submit_end - t0);
  res->e2e_per_s = (double)n / (t_end - t0);
  res->drain_s = t_end - submit_end;
  res->starved = starved_lines() - starved0;
  if (!rc) delays((const char *const *)names, n, seen, res);
  for (size_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(seen);
  free(views);
  altar__k8s_free(k);
  return rc;
}

static void decode_cost(result_t *res) {
  char *pages[400];
  size_t np = fetch_pages(pages, sizeof pages / sizeof *pages);
  size_t biggest = 0;
  for (size_t i = 0; i < np; i++) {
    size_t l = strlen(pages[i]);
    res->list_bytes += l;
    if (l > biggest) biggest = l;
  }
  char *copy = malloc(biggest + 1);
  double whole[5], trim[5];
  for (int rep = 0; copy && rep < 5; rep++) {
    for (int mode = 0; mode < 2; mode++) {
      double t = now_mono();
      size_t bytes = 0;
      for (size_t i = 0; i < np; i++) {
        size_t l = strlen(pages[i]);
        memcpy(copy, pages[i], l);
        if (mode) l = altar__k8s_json_drop_member(copy, l, "managedFields");
        bytes += l;
        json_t *v = json_loadb(copy, l, 0, NULL);
        if (!v) bytes = 0;
        json_decref(v);
      }
      double ms = (now_mono() - t) * 1000.0;
      if (mode) {
        trim[rep] = ms;
        res->list_trimmed_bytes = bytes;
      } else {
        whole[rep] = ms;
      }
    }
  }
  res->decode_ms = copy ? pct(whole, 5, 0.5) : NAN;
  res->decode_trim_ms = copy ? pct(trim, 5, 0.5) : NAN;
  free(copy);
  for (size_t i = 0; i < np; i++) free(pages[i]);
}

static void print_row(const char *who, const result_t *r, double secs) {
  printf("%7zu %-6s %6d %10.1f %9.1f %9.1f %9.1f %10.2f %10.2f %9zu %8ld   (%.0f s", r->n, who, window, r->submit_per_s,
         r->e2e_per_s, r->tick_ms_median, r->tick_cpu_ms_median, r->delay_median, r->delay_p95, r->succeeded,
         r->starved, secs);
  printf("; client CPU %.1f s; last create → all seen %.1f s", r->client_cpu_s, r->drain_s);
  if (r->polls)
    printf("; %zu polls, %zu on a change; backlog %d from %d: %llu capacity reads held, %zu paused turns", r->polls,
           r->woken, backlog, pace_start < backlog ? pace_start : backlog, (unsigned long long)r->pace_holds,
           r->paused);
  if (r->polls)
    printf("; a poll of %zu of them: %.2f ms, %.2f ms CPU", r->n < TICK_FIXED ? r->n : (size_t)TICK_FIXED,
           r->fixed_ms_median, r->fixed_cpu_ms_median);
  if (r->polls)
    printf("; time to start median %.2f s, p95 %.2f s; backlog %.1f on average", r->start_median, r->start_p95,
           r->backlog_mean);
  printf(")\n");
  fflush(stdout);
}

/* A flag's whole value as an integer in [lo, hi], or a message naming it. */
static bool int_flag(const char *flag, const char *arg, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(arg, &end, 10);
  if (errno || end == arg || *end || v < lo || v > hi) {
    fprintf(stderr, "bench_k8s: %s wants %d..%d, not '%s'\n", flag, lo, hi, arg);
    return false;
  }
  *out = (int)v;
  return true;
}

int main(int argc, char **argv) {
  const char *d = getenv("ALTAR_K8S_DIR");
  if (getenv("ALTAR_K8S_PORT")) snprintf(port, sizeof port, "%s", getenv("ALTAR_K8S_PORT"));
  if (d && *d) snprintf(kdir, sizeof kdir, "%s", d);
  else snprintf(kdir, sizeof kdir, "%s/altar-k8s-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", port);
  size_t counts[16] = {1000, 4000}, nc = 2;
  bool any = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--window") && i + 1 < argc) {
      if (!int_flag("--window", argv[++i], 1, ALTAR_K8S_MAX_SUBMIT_WINDOW, &window)) return 2;
      continue;
    }
    if (!strcmp(argv[i], "--no-curl")) {
      with_curl = false;
      continue;
    }
    if (!strcmp(argv[i], "--backlog") && i + 1 < argc) {
      if (!int_flag("--backlog", argv[++i], 0, ALTAR_K8S_MAX_SUBMIT_BACKLOG, &backlog)) return 2;
      continue;
    }
    if (!strcmp(argv[i], "--start") && i + 1 < argc) {
      if (!int_flag("--start", argv[++i], 1, ALTAR_K8S_MAX_SUBMIT_BACKLOG, &pace_start)) return 2;
      continue;
    }
    if (!strcmp(argv[i], "--trace")) {
      trace = true;
      continue;
    }
    if (!strcmp(argv[i], "--no-altar")) {
      with_altar = false;
      continue;
    }
    long v = strtol(argv[i], NULL, 10);
    if (v < GROUP || v > 100000) {
      fprintf(stderr,
              "usage: bench_k8s [--window W] [--backlog B] [--start S] [--trace] [--no-curl | --no-altar] [N…]  (each "
              "%d..100000)\n",
              GROUP);
      return 2;
    }
    if (!any) nc = 0;
    any = true;
    if (nc < 16) counts[nc++] = (size_t)v;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  long status = 0;
  free(kube("GET", "/api/v1/namespaces/" NS, NULL, &status));
  if (status != 200) {
    fprintf(stderr, "bench_k8s: no control plane at %s (scripts/services/k8s.sh start)\n", kdir);
    return 1;
  }
  printf("kubernetes backend against kube-apiserver + Job controller + scheduler + kwok, namespace " NS "\n");
  printf("%7s %-6s %6s %10s %9s %9s %9s %10s %10s %9s %8s\n", "jobs", "who", "window", "submit/s", "e2e/s", "tick ms",
         "tick cpu", "delay med", "delay p95", "succeeded", "starved");
  result_t a[16] = {0}, c[16] = {0};
  /* The rows of a count take turns going first: the first burst on a
   * freshly started API server meets its smallest watch buffers, and a row
   * that always came first would always meet them. */
  for (size_t i = 0; i < nc; i++) {
    for (int turn = 0; turn < 2; turn++) {
      bool altar_turn = (turn == 0) == (i % 2 == 0);
      double t = now_mono();
      if (altar_turn ? with_altar : with_curl) print_cluster_state(altar_turn ? "altar" : "curl");
      if (altar_turn && with_altar) {
        if (run_altar(counts[i], &a[i])) return 1;
        print_row("altar", &a[i], now_mono() - t);
      } else if (!altar_turn && with_curl) {
        if (run_curl(counts[i], &c[i])) return 1;
        print_row("curl", &c[i], now_mono() - t);
      }
    }
  }
  clear_namespace();
  if (with_altar)
    printf(
        "\nlisting every Job (pages of 500, as served): decode whole / managedFields skipped first\n%7s %12s %12s %10s %10s\n",
        "jobs", "bytes", "trimmed", "ms whole", "ms trim");
  for (size_t i = 0; with_altar && i < nc; i++)
    printf("%7zu %12zu %12zu %10.1f %10.1f\n", a[i].n, a[i].list_bytes, a[i].list_trimmed_bytes, a[i].decode_ms,
           a[i].decode_trim_ms);
  if (with_curl && with_altar) {
    /* A count given twice is run in both orders, so a ratio can be read
     * with the cluster state each row left for the next on either side. */
    printf("\naltar / curl (same run, same window):\n%7s %10s %10s %12s  %s\n", "jobs", "submit", "e2e", "delay med",
           "first");
    for (size_t i = 0; i < nc; i++)
      printf("%7zu %9.2fx %9.2fx %11.2fx  %s\n", a[i].n, a[i].submit_per_s / c[i].submit_per_s,
             a[i].e2e_per_s / c[i].e2e_per_s, a[i].delay_median / c[i].delay_median, i % 2 == 0 ? "altar" : "curl");
  }
  return 0;
}
