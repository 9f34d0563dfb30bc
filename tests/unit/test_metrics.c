/* Metrics: the registry, the exposition text (exactly), escaping, atomic
 * updates from many threads, the HTTP endpoint on 127.0.0.1 and the worker
 * and reconciler adapters. */
#include "altar/fleet.h"
#include "altar/metrics.h"
#include "reconciler/daemon_metrics.h"
#include "testutil.h"
#include "worker/worker_metrics.h"

#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(altar_metrics_t *reg) {
  altar_buf_t b = {0};
  altar_error_t e = {0};
  CU_ASSERT_FATAL(altar_metrics_render(reg, &b, &e) == ALTAR_OK);
  return altar_buf_detach(&b);
}

static void test_render_exact(void) {
  altar_metrics_t *reg = altar_metrics_new();
  CU_ASSERT_FATAL(reg != NULL);
  altar_error_t e = {0};
  altar_metric_t *jobs = altar_metrics_counter(reg, "altar_jobs_total", "Jobs seen.", &e);
  altar_metric_t *slots = altar_metrics_gauge(reg, "altar_slots", "Slots.", &e);
  altar_metric_label_t l1[] = {{"topic", "jobs"}, {"partition", "0"}};
  altar_metric_label_t l2[] = {{"partition", "1"}, {"topic", "jobs"}};
  altar_metric_t *p0 = altar_metrics_register(reg, ALTAR_METRIC_COUNTER, "altar_read_total", "Reads.", l1, 2, &e);
  altar_metric_t *p1 = altar_metrics_register(reg, ALTAR_METRIC_COUNTER, "altar_read_total", "ignored", l2, 2, &e);
  altar_metric_t *nohelp = altar_metrics_gauge(reg, "altar_nohelp", NULL, &e);
  CU_ASSERT_FATAL(jobs && slots && p0 && p1 && nohelp);
  altar_metric_inc(jobs);
  altar_metric_add(jobs, 41);
  altar_metric_set(slots, 4);
  altar_metric_add(p1, 7);
  altar_metric_set(nohelp, -2.5);
  char *s = render(reg);
  const char *want = "# HELP altar_jobs_total Jobs seen.\n"
                     "# TYPE altar_jobs_total counter\n"
                     "altar_jobs_total 42\n"
                     "# HELP altar_slots Slots.\n"
                     "# TYPE altar_slots gauge\n"
                     "altar_slots 4\n"
                     "# HELP altar_read_total Reads.\n"
                     "# TYPE altar_read_total counter\n"
                     "altar_read_total{partition=\"0\",topic=\"jobs\"} 0\n"
                     "altar_read_total{partition=\"1\",topic=\"jobs\"} 7\n"
                     "# TYPE altar_nohelp gauge\n"
                     "altar_nohelp -2.5\n";
  CU_ASSERT_STRING_EQUAL(s, want);
  free(s);
  CU_ASSERT(altar_metric_counter_value(jobs) == 42);
  CU_ASSERT(altar_metric_gauge_value(slots) == 4.0);
  altar_metrics_free(reg);
}

static void test_escaping(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar_metric_label_t l[] = {{"path", "C:\\dir \"x\"\nnext"}};
  altar_metric_t *m = altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "altar_esc",
                                             "a \\ backslash,\na newline and \"quotes\"", l, 1, &e);
  CU_ASSERT_FATAL(m != NULL);
  altar_metric_set(m, 1);
  char *s = render(reg);
  /* Help escapes \ and newline only; label values also escape the quote. */
  CU_ASSERT_STRING_EQUAL(s, "# HELP altar_esc a \\\\ backslash,\\na newline and \"quotes\"\n"
                            "# TYPE altar_esc gauge\n"
                            "altar_esc{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
  free(s);
  altar_metrics_free(reg);
}

static void test_gauge_values(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar_metric_t *g = altar_metrics_gauge(reg, "g", "", &e);
  CU_ASSERT_FATAL(g != NULL);
  struct {
    double v;
    const char *text;
  } cases[] = {{0.25, "g 0.25\n"},     {-3, "g -3\n"},          {NAN, "g NaN\n"},
               {INFINITY, "g +Inf\n"}, {-INFINITY, "g -Inf\n"}, {1e300, "g 1.0000000000000001e+300\n"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    altar_metric_set(g, cases[i].v);
    char *s = render(reg);
    const char *line = strstr(s, "\ng ");
    CU_ASSERT_PTR_NOT_NULL(line);
    if (line) CU_ASSERT_STRING_EQUAL(line + 1, cases[i].text);
    free(s);
  }
  altar_metric_set(g, 1);
  altar_metric_gauge_add(g, 2.5);
  altar_metric_gauge_add(g, -0.5);
  CU_ASSERT(altar_metric_gauge_value(g) == 3.0);
  /* Updates of the wrong kind, and on NULL, change nothing. */
  altar_metric_inc(g);
  altar_metric_add(NULL, 1);
  altar_metric_set(NULL, 1);
  CU_ASSERT(altar_metric_gauge_value(g) == 3.0);
  CU_ASSERT(altar_metric_counter_value(g) == 0);
  altar_metrics_free(reg);
}

static void test_registration_rules(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar_metric_t *a = altar_metrics_counter(reg, "altar_x_total", "X.", &e);
  CU_ASSERT_FATAL(a != NULL);
  /* Same name and labels: the same series. */
  CU_ASSERT(altar_metrics_counter(reg, "altar_x_total", "X again.", &e) == a);
  /* Same name, other type. */
  CU_ASSERT(altar_metrics_gauge(reg, "altar_x_total", "X.", &e) == NULL);
  CU_ASSERT(e.code == ALTAR_EEXIST);
  CU_ASSERT(strstr(e.msg, "altar_x_total") != NULL);
  const char *bad_names[] = {"", "1abc", "a-b", "a b", "é", NULL};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    altar_error_clear(&e);
    CU_ASSERT(altar_metrics_counter(reg, bad_names[i], "", &e) == NULL);
    CU_ASSERT(e.code == ALTAR_EINVAL);
  }
  CU_ASSERT(altar_metrics_counter(reg, "ns:sub_name_2", "", &e) != NULL); /* colons are allowed in names */
  char longname[ALTAR_METRIC_NAME_MAX + 2];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  CU_ASSERT(altar_metrics_counter(reg, longname, "", &e) == NULL);
  altar_metric_label_t reserved[] = {{"__name", "x"}};
  altar_metric_label_t colon[] = {{"a:b", "x"}};
  altar_metric_label_t dup[] = {{"a", "x"}, {"a", "y"}};
  altar_metric_label_t noval[] = {{"a", NULL}};
  altar_metric_label_t many[ALTAR_METRIC_LABELS_MAX + 1];
  char names[ALTAR_METRIC_LABELS_MAX + 1][8];
  for (size_t i = 0; i < ALTAR_METRIC_LABELS_MAX + 1; i++) {
    snprintf(names[i], sizeof names[i], "l%zu", i);
    many[i] = (altar_metric_label_t){names[i], "v"};
  }
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", reserved, 1, &e) == NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", colon, 1, &e) == NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", dup, 2, &e) == NULL);
  CU_ASSERT(strstr(e.msg, "given twice") != NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", noval, 1, &e) == NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", many, ALTAR_METRIC_LABELS_MAX + 1, &e) == NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "lbl", "", many, ALTAR_METRIC_LABELS_MAX, &e) != NULL);
  /* Nothing half-registered: no "lbl" family beyond the one good series. */
  char *s = render(reg);
  CU_ASSERT(strstr(s, "# TYPE lbl gauge\nlbl{l0=") != NULL);
  free(s);
  altar_metrics_free(reg);
  altar_metrics_free(NULL);
}

/* ---- concurrency ---------------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 200000

typedef struct {
  altar_metric_t *c, *g;
  altar_metrics_t *reg;
} conc_t;

static void *incrementer(void *arg) {
  conc_t *c = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    altar_metric_inc(c->c);
    altar_metric_gauge_add(c->g, 1.0);
  }
  return NULL;
}

static void *renderer(void *arg) {
  conc_t *c = arg;
  for (int i = 0; i < 200; i++) {
    altar_buf_t b = {0};
    altar_metrics_render(c->reg, &b, NULL);
    altar_buf_free(&b);
    /* Registration while others update and render. */
    char name[32];
    snprintf(name, sizeof name, "late_%d", i);
    altar_metrics_counter(c->reg, name, "", NULL);
  }
  return NULL;
}

static void test_concurrent_updates(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  conc_t c = {altar_metrics_counter(reg, "hits_total", "", &e), altar_metrics_gauge(reg, "level", "", &e), reg};
  CU_ASSERT_FATAL(c.c && c.g);
  pthread_t th[THREADS + 1];
  for (int i = 0; i < THREADS; i++) CU_ASSERT_FATAL(pthread_create(&th[i], NULL, incrementer, &c) == 0);
  CU_ASSERT_FATAL(pthread_create(&th[THREADS], NULL, renderer, &c) == 0);
  for (int i = 0; i <= THREADS; i++) pthread_join(th[i], NULL);
  CU_ASSERT_EQUAL(altar_metric_counter_value(c.c), (uint64_t)THREADS * PER_THREAD);
  CU_ASSERT_EQUAL(altar_metric_gauge_value(c.g), (double)THREADS * PER_THREAD);
  char *s = render(reg);
  char want[64];
  snprintf(want, sizeof want, "\nhits_total %d\n", THREADS * PER_THREAD);
  CU_ASSERT(strstr(s, want) != NULL);
  CU_ASSERT(strstr(s, "\nlate_199 0\n") != NULL);
  free(s);
  altar_metrics_free(reg);
}

/* ---- HTTP ------------------------------------------------------------------ */

static size_t on_body(char *p, size_t size, size_t n, void *ctx) {
  return altar_buf_append(ctx, p, size * n) ? 0 : size * n;
}

/* One request to 127.0.0.1:port; returns the status (0 on a connection error). */
static long http(int port, const char *method, const char *path, altar_buf_t *body, char *ctype, size_t ctsz) {
  CURL *h = curl_easy_init();
  CU_ASSERT_FATAL(h != NULL);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (!strcmp(method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  if (!strcmp(method, "POST")) curl_easy_setopt(h, CURLOPT_POSTFIELDS, "x=1");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK) {
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    if (ctype) snprintf(ctype, ctsz, "%s", ct ? ct : "");
  }
  curl_easy_cleanup(h);
  return status;
}

/* Whether /proc/net/tcp lists a listener on exactly 127.0.0.1:port. */
static bool listens_on_loopback_only(int port) {
  FILE *f = fopen("/proc/net/tcp", "r");
  if (!f) return false;
  char line[512];
  bool loopback = false, other = false;
  while (fgets(line, sizeof line, f)) {
    unsigned a, p, st;
    if (sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X", &a, &p, &st) != 3 || st != 0x0A || (int)p != port) continue;
    if (a == 0x0100007F) loopback = true; /* 127.0.0.1, little-endian */
    else other = true;
  }
  fclose(f);
  return loopback && !other;
}

static void test_http_server(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar_metric_t *c = altar_metrics_counter(reg, "altar_requests_total", "Requests.", &e);
  altar_metric_add(c, 5);
  altar_metrics_server_t *srv = altar_metrics_serve(reg, "127.0.0.1:0", &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
  int port = altar_metrics_server_port(srv);
  CU_ASSERT_FATAL(port > 0 && port < 65536);
  CU_ASSERT(listens_on_loopback_only(port));

  altar_buf_t body = {0};
  char ct[128] = "";
  CU_ASSERT_EQUAL(http(port, "GET", "/metrics", &body, ct, sizeof ct), 200);
  CU_ASSERT_STRING_EQUAL(ct, ALTAR_METRICS_CONTENT_TYPE);
  char *want = render(reg);
  CU_ASSERT_FATAL(body.data != NULL);
  CU_ASSERT_STRING_EQUAL((char *)body.data, want);
  free(want);
  /* Updates show up in the next scrape. */
  altar_metric_inc(c);
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "GET", "/metrics?x=1", &body, NULL, 0), 200);
  CU_ASSERT(body.data && strstr((char *)body.data, "\naltar_requests_total 6\n") != NULL);
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "GET", "/", &body, NULL, 0), 404);
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "GET", "/metrics/extra", &body, NULL, 0), 404);
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "POST", "/metrics", &body, NULL, 0), 405);
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "HEAD", "/metrics", &body, NULL, 0), 200);
  CU_ASSERT_EQUAL(body.len, 0);

  /* The port is taken: a second server fails, naming metrics.addr. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  altar_error_clear(&e);
  CU_ASSERT_PTR_NULL(altar_metrics_serve(reg, addr, &e));
  CU_ASSERT_EQUAL(e.code, ALTAR_EIO);
  CU_ASSERT(strstr(e.msg, "metrics.addr") != NULL);

  altar_metrics_stop(srv);
  /* Stopped: nothing answers any more, and the port can be bound again. */
  altar_buf_reset(&body);
  CU_ASSERT_EQUAL(http(port, "GET", "/metrics", &body, NULL, 0), 0);
  srv = altar_metrics_serve(reg, addr, &e);
  CU_ASSERT_PTR_NOT_NULL(srv);
  CU_ASSERT_EQUAL(altar_metrics_server_port(srv), port);
  altar_metrics_stop(srv);
  altar_metrics_stop(NULL);
  altar_buf_free(&body);
  altar_metrics_free(reg);
}

static void test_bad_addr(void) {
  altar_metrics_t *reg = altar_metrics_new();
  const char *bad[] = {NULL,
                       "",
                       "127.0.0.1",
                       ":9464",
                       "127.0.0.1:",
                       "127.0.0.1:x",
                       "127.0.0.1:-1",
                       "127.0.0.1:65536",
                       "127.0.0.1:123456",
                       "::1:9464",
                       "[::1",
                       "[::1]9464",
                       "[]:9464",
                       "127.0.0.1:94 64"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_error_t e = {0};
    altar_metrics_server_t *srv = altar_metrics_serve(reg, bad[i], &e);
    CU_ASSERT_PTR_NULL(srv);
    if (srv) {
      fprintf(stderr, "accepted a bad metrics.addr: '%s'\n", bad[i] ? bad[i] : "(null)");
      altar_metrics_stop(srv);
    }
    CU_ASSERT_EQUAL(e.code, ALTAR_ECONFIG);
    CU_ASSERT(strstr(e.msg, "metrics.addr") != NULL);
  }
  char huge[1024];
  memset(huge, 'h', sizeof huge - 1);
  huge[sizeof huge - 1] = 0;
  altar_error_t e = {0};
  CU_ASSERT_PTR_NULL(altar_metrics_serve(reg, huge, &e));
  CU_ASSERT(strstr(e.msg, "metrics.addr") != NULL);
  CU_ASSERT_PTR_NULL(altar_metrics_serve(NULL, "127.0.0.1:0", &e));
  altar_metrics_free(reg);
}

/* ---- the worker's and the reconciler's adapters ---------------------------- */

static void test_worker_adapter(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar__worker_metrics_t wm;
  CU_ASSERT_FATAL(altar__worker_metrics_init(&wm, reg, 4, true, &e) == ALTAR_OK);
  altar_worker_stats_t st = {.consumed = 3, .submitted = 2, .succeeded = 1, .status_events = 5};
  altar__worker_metrics_update(&wm, &st, 1, false);
  altar_kept_logs_t kept = {.dirs = 12,
                            .bytes = 49152,
                            .prune_next_dirs = 3,
                            .prune_next_bytes = 12288,
                            .keep_dirs = 10000,
                            .keep_bytes = 1u << 30,
                            .keep_age_s = 86400};
  altar__worker_metrics_kept_logs(&wm, &kept);
  st.consumed = 7;
  st.failed = 1;
  altar__worker_metrics_update(&wm, &st, 4, true);
  char *s = render(reg);
  const char *want[] = {"\naltar_worker_jobs_consumed_total 7\n",
                        "\naltar_worker_tasks_submitted_total 2\n",
                        "\naltar_worker_tasks_succeeded_total 1\n",
                        "\naltar_worker_tasks_failed_total 1\n",
                        "\naltar_worker_tasks_released_total 0\n",
                        "\naltar_worker_jobs_skipped_total 0\n",
                        "\naltar_worker_dead_lettered_total 0\n",
                        "\naltar_worker_status_events_total 5\n",
                        "\naltar_worker_in_flight 4\n",
                        "\naltar_worker_slots 4\n",
                        "\naltar_worker_paused 1\n",
                        "\naltar_worker_kept_logs_dirs 12\n",
                        "\naltar_worker_kept_logs_bytes 49152\n",
                        "\naltar_worker_kept_logs_prune_next_dirs 3\n",
                        "\naltar_worker_kept_logs_prune_next_bytes 12288\n",
                        "\naltar_worker_kept_logs_dirs_limit 10000\n",
                        "\naltar_worker_kept_logs_bytes_limit 1073741824\n"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!strstr(s, want[i])) fprintf(stderr, "missing %s", want[i]);
    CU_ASSERT(strstr(s, want[i]) != NULL);
  }
  free(s);
  /* A second run on the same registry adds to the counters. */
  altar__worker_metrics_t wm2;
  CU_ASSERT_FATAL(altar__worker_metrics_init(&wm2, reg, 4, false, &e) == ALTAR_OK);
  CU_ASSERT_PTR_NULL(wm2.kept_dirs); /* a backend keeping no output: no such gauges */
  altar__worker_metrics_kept_logs(&wm2, &kept);
  altar_worker_stats_t st2 = {.consumed = 2};
  altar__worker_metrics_update(&wm2, &st2, 0, false);
  CU_ASSERT_EQUAL(altar_metric_counter_value(wm2.consumed), 9);
  /* Without a registry everything is a no-op. */
  altar__worker_metrics_t off;
  CU_ASSERT(altar__worker_metrics_init(&off, NULL, 4, true, &e) == ALTAR_OK);
  altar__worker_metrics_kept_logs(&off, &kept);
  altar__worker_metrics_update(&off, &st, 1, true);

  altar__reconciler_metrics_t rm;
  CU_ASSERT_FATAL(altar__reconciler_metrics_init(&rm, reg, &e) == ALTAR_OK);
  altar_reconciler_stats_t rs = {
      .events = 10, .batches = 2, .fired = 3, .dead_lettered = 1, .retried = 4, .poison = 5, .published = 8, .held = 2};
  altar__reconciler_metrics_update(&rm, &rs);
  s = render(reg);
  const char *rwant[] = {
      "\naltar_reconciler_events_applied_total 10\n",  "\naltar_reconciler_batches_total 2\n",
      "\naltar_reconciler_groups_fired_total 3\n",     "\naltar_reconciler_groups_dead_lettered_total 1\n",
      "\naltar_reconciler_jobs_retried_total 4\n",     "\naltar_reconciler_poison_total 5\n",
      "\naltar_reconciler_outbox_published_total 8\n", "\naltar_reconciler_groups_held 2\n"};
  for (size_t i = 0; i < sizeof rwant / sizeof rwant[0]; i++) CU_ASSERT(strstr(s, rwant[i]) != NULL);
  free(s);
  altar_metrics_free(reg);
}

/* Histograms: cumulative buckets with le beside the series' labels, _sum and
 * _count, exactly; bounds validated; one family shares its bounds. */
static void test_histogram(void) {
  altar_metrics_t *reg = altar_metrics_new();
  CU_ASSERT_FATAL(reg != NULL);
  altar_error_t e = {0};
  const double b[] = {0.5, 1, 10};
  altar_metric_label_t l = {"kind", "train"};
  altar_metric_t *h = altar_metrics_histogram(reg, "altar_run_seconds", "Runs.", &l, 1, b, 3, &e);
  altar_metric_t *bare = altar_metrics_histogram(reg, "altar_wait_seconds", NULL, NULL, 0, b, 1, &e);
  CU_ASSERT_FATAL(h && bare);
  altar_metric_observe(h, 0.25);
  altar_metric_observe(h, 0.5); /* on a bound: in that bucket (le is <=) */
  altar_metric_observe(h, 3);
  altar_metric_observe(h, 100);
  altar_metric_observe(h, NAN); /* ignored */
  altar_metric_observe(bare, 2);
  char *s = render(reg);
  const char *want = "# HELP altar_run_seconds Runs.\n"
                     "# TYPE altar_run_seconds histogram\n"
                     "altar_run_seconds_bucket{kind=\"train\",le=\"0.5\"} 2\n"
                     "altar_run_seconds_bucket{kind=\"train\",le=\"1\"} 2\n"
                     "altar_run_seconds_bucket{kind=\"train\",le=\"10\"} 3\n"
                     "altar_run_seconds_bucket{kind=\"train\",le=\"+Inf\"} 4\n"
                     "altar_run_seconds_sum{kind=\"train\"} 103.75\n"
                     "altar_run_seconds_count{kind=\"train\"} 4\n"
                     "# TYPE altar_wait_seconds histogram\n"
                     "altar_wait_seconds_bucket{le=\"0.5\"} 0\n"
                     "altar_wait_seconds_bucket{le=\"+Inf\"} 1\n"
                     "altar_wait_seconds_sum 2\n"
                     "altar_wait_seconds_count 1\n";
  CU_ASSERT_STRING_EQUAL(s, want);
  free(s);
  CU_ASSERT(altar_metric_counter_value(h) == 4);
  /* The same series again is the same; other bounds, a counter update, bad bounds and "le" are refused. */
  CU_ASSERT(altar_metrics_histogram(reg, "altar_run_seconds", NULL, &l, 1, b, 3, &e) == h);
  CU_ASSERT(altar_metrics_histogram(reg, "altar_run_seconds", NULL, NULL, 0, b, 2, &e) == NULL);
  CU_ASSERT(altar_metrics_counter(reg, "altar_run_seconds", NULL, &e) == NULL);
  altar_metric_inc(h); /* the wrong update: ignored */
  CU_ASSERT(altar_metric_counter_value(h) == 4);
  const double unsorted[] = {1, 0.5}, inf[] = {INFINITY};
  CU_ASSERT(altar_metrics_histogram(reg, "altar_x", NULL, NULL, 0, unsorted, 2, &e) == NULL);
  CU_ASSERT(altar_metrics_histogram(reg, "altar_x", NULL, NULL, 0, inf, 1, &e) == NULL);
  CU_ASSERT(altar_metrics_histogram(reg, "altar_x", NULL, NULL, 0, b, 0, &e) == NULL);
  altar_metric_label_t le = {"le", "1"};
  CU_ASSERT(altar_metrics_histogram(reg, "altar_x", NULL, &le, 1, b, 3, &e) == NULL);
  CU_ASSERT(altar_metrics_register(reg, ALTAR_METRIC_HISTOGRAM, "altar_x", NULL, NULL, 0, &e) == NULL);
  altar_metrics_free(reg);
}

/* The worker's per-task series: durations by kind (bounded: the 33rd kind
 * and later are "other"), failures by reason (exit codes folded, unknown
 * reasons "other"), and its build info. */
static void test_worker_task_series(void) {
  altar_metrics_t *reg = altar_metrics_new();
  altar_error_t e = {0};
  altar__worker_metrics_t *wm = malloc(sizeof *wm);
  CU_ASSERT_FATAL(wm && altar__worker_metrics_init(wm, reg, 4, false, &e) == ALTAR_OK);
  altar__worker_metrics_task_ended(wm, "train", NULL, 0.2);
  altar_failure_t *f3 = altar_failure_exit(3, "x", true), *f4 = altar_failure_exit(4, NULL, true);
  altar_failure_t *odd = altar_failure_new("made_up_by_a_plugin", NULL, false);
  altar_failure_t *to = altar_failure_new(ALTAR_REASON_TIMEOUT, NULL, false);
  altar__worker_metrics_task_ended(wm, "train", f3, 30);
  altar__worker_metrics_task_ended(wm, "score", f4, 0.001);
  altar__worker_metrics_task_ended(wm, "score", odd, -1); /* never ran: no duration */
  altar__worker_metrics_task_ended(wm, "score", to, 7);
  for (int i = 0; i < 40; i++) {
    char k[16];
    snprintf(k, sizeof k, "k%d", i);
    altar__worker_metrics_task_ended(wm, k, NULL, 1);
  }
  char *s = render(reg);
  const char *want[] = {"\naltar_worker_task_duration_seconds_count{kind=\"train\"} 2\n",
                        "\naltar_worker_task_duration_seconds_bucket{kind=\"train\",le=\"0.25\"} 1\n",
                        "\naltar_worker_task_duration_seconds_count{kind=\"score\"} 2\n",
                        "\naltar_worker_task_duration_seconds_count{kind=\"k29\"} 1\n",
                        "\naltar_worker_task_duration_seconds_count{kind=\"other\"} 10\n",
                        "\naltar_worker_task_failures_total{reason=\"exit_code\"} 2\n",
                        "\naltar_worker_task_failures_total{reason=\"other\"} 1\n",
                        "\naltar_worker_task_failures_total{reason=\"timeout\"} 1\n",
                        "\naltar_build_info{component=\"worker\",version=\"" ALTAR_VERSION "\"} 1\n"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!strstr(s, want[i])) fprintf(stderr, "missing %s", want[i]);
    CU_ASSERT(strstr(s, want[i]) != NULL);
  }
  CU_ASSERT(strstr(s, "kind=\"k30\"") == NULL);
  free(s);
  altar_failure_free(f3);
  altar_failure_free(f4);
  altar_failure_free(odd);
  altar_failure_free(to);
  free(wm);
  altar_metrics_free(reg);
}

static void add(void) {
  ALTAR_SUITE("metrics", NULL, NULL);
  ALTAR_TEST(test_render_exact);
  ALTAR_TEST(test_escaping);
  ALTAR_TEST(test_gauge_values);
  ALTAR_TEST(test_registration_rules);
  ALTAR_TEST(test_concurrent_updates);
  ALTAR_TEST(test_http_server);
  ALTAR_TEST(test_bad_addr);
  ALTAR_TEST(test_worker_adapter);
  ALTAR_TEST(test_histogram);
  ALTAR_TEST(test_worker_task_series);
}

int main(int argc, char **argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = altar_test_main(argc, argv, add);
  curl_global_cleanup();
  return rc;
}
