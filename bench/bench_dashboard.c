/* The dashboard's cost on a big job: one job ("bench") of SHARDS succeeded
 * shards in 5-fold groups, replayed from the local log into a RocksDB ledger
 * as a rebuild would, then the fleet view's pages rendered and serialised
 * as the HTTP handler does: the job page, one shard's page and a filtered
 * job page, each rendered from the view's snapshot twice, after a read of
 * the ledger (timed on its own: what the request that finds the snapshot
 * old pays on top). Then the new path: the view's reader thread keeps the
 * snapshot fresh and the job page is asked for 9 times; its median against
 * the old path (a read, then the render) measured above in the same run,
 * with how many ledger reads the requests made. Last, ordering a page of
 * SHARDS matches: the whole list sorted against the page's first 50
 * selected. Prints wall and CPU milliseconds; asserts nothing.
 * usage: bench_dashboard [SHARDS]   (default 100000) */
#include "altar/config.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "dashboard/fleet_view.h"
#include "dashboard/shard_order.h"
#include "dashboard/shard_select.h"
#include "reconciler/daemon.h"
#include "util/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const altar_error_t *e) { bench_die("bench_dashboard", what, e); }

/* Renders page with q and serialises it; prints its cost and size; returns
 * its wall seconds. A page the build does not have (an older one) prints
 * why. With fresh, the ledger is read first (the old path's request that
 * found the snapshot old): *pread gets that read's wall seconds. */
static double time_page_read(altar_fleet_view_t *v, const char *label, const char *page, const altar_fleet_query_t *q,
                             bool fresh, double *pread) {
  altar_error_t e = {0};
  if (fresh) {
    /* A read of the ledger, what the request that finds the snapshot old pays on top. */
    double t0 = bench_now_s(), c0 = bench_cpu_s();
    if (altar__fleet_view_sync(v, 60000, &e)) bench_die("bench_dashboard", "sync", &e);
    if (pread) *pread = bench_now_s() - t0;
    printf("%-34s %-8s %8.1f ms wall %8.1f ms CPU\n", "(ledger read)", "", (bench_now_s() - t0) * 1e3,
           (bench_cpu_s() - c0) * 1e3);
  }
  json_t *o = NULL;
  double t0 = bench_now_s(), c0 = bench_cpu_s();
  int rc = altar__fleet_view_render(v, page, q, &o, &e);
  char *text = rc ? NULL : json_dumps(o, JSON_COMPACT);
  double wall = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
  if (rc) printf("%-34s not served: %s\n", label, e.msg);
  else
    printf("%-34s %-8s %8.1f ms wall %8.1f ms CPU %9zu bytes\n", label, "render", wall * 1e3, cpu * 1e3,
           text ? strlen(text) : 0);
  free(text);
  json_decref(o);
  return wall;
}

static double time_page(altar_fleet_view_t *v, const char *label, const char *page, const altar_fleet_query_t *q,
                        bool fresh) {
  return time_page_read(v, label, page, q, fresh, NULL);
}

static int by_shard_order(const void *a, const void *b) {
  return altar__shard_order_cmp(*(const altar_shard_sort_key_t *const *)a, *(const altar_shard_sort_key_t *const *)b);
}

/* Ordering a page of n matches in the job page's order (labels as the
 * bench's shards have them, in a shuffled order): the whole list sorted
 * (the old path) against the first `page` selected (the new). */
static void time_order(long n, size_t page) {
  altar_shard_sort_key_t *keys = calloc((size_t)n, sizeof *keys);
  char(*labels)[96] = calloc((size_t)n, sizeof *labels), (*tk)[24] = calloc((size_t)n, sizeof *tk),
  (*gk)[32] = calloc((size_t)n, sizeof *gk);
  const void **a = calloc((size_t)n, sizeof *a), **b = calloc((size_t)n, sizeof *b);
  if (!keys || !labels || !tk || !gk || !a || !b) bench_die("bench_dashboard", "out of memory", NULL);
  unsigned seed = 7;
  for (long i = 0; i < n; i++) {
    long at = i;
    snprintf(gk[at], sizeof gk[at], "bench\ng%ld", i / 5);
    snprintf(labels[at], sizeof labels[at], "fold=%ld\ngroup=g%ld\njob_id=bench\nnum_folds=5\n", i % 5, i / 5);
    snprintf(tk[at], sizeof tk[at], "t%ld", i);
    keys[at] = (altar_shard_sort_key_t){"bench", gk[at], labels[at], tk[at]};
    a[i] = &keys[at];
  }
  for (long i = n - 1; i > 0; i--) { /* ledger order is not label order */
    long j = rand_r(&seed) % (i + 1);
    const void *t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
  memcpy(b, a, (size_t)n * sizeof *a);
  double c0 = bench_cpu_s();
  qsort(a, (size_t)n, sizeof *a, by_shard_order);
  double full = bench_cpu_s() - c0;
  c0 = bench_cpu_s();
  altar__select_first(b, (size_t)n, page, by_shard_order);
  double part = bench_cpu_s() - c0;
  bool same = !memcmp(a, b, page * sizeof *a);
  printf("ordering %ld matches for a page of %zu: full sort %.1f ms CPU, first %zu selected %.1f ms CPU = %.1fx%s\n", n,
         page, full * 1e3, page, part * 1e3, part > 0 ? full / part : 0, same ? "" : " (PAGES DIFFER)");
  free(keys);
  free(labels);
  free(tk);
  free(gk);
  free(a);
  free(b);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  long shards = argc > 1 ? atol(argv[1]) : 100000;
  const long width = 5;
  if (shards < width) shards = width;
  char dir[] = "/tmp/altar-bench-dashboard-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char logdir[128], ledger[128], cfgpath[128];
  snprintf(logdir, sizeof logdir, "%s/log", dir);
  snprintf(ledger, sizeof ledger, "%s/ledger", dir);
  snprintf(cfgpath, sizeof cfgpath, "%s/altar.yaml", dir);
  altar_strmap_t props = {0};
  altar_error_t e = {0};
  altar_transport_t *t = bench_open_local_log("bench_dashboard", logdir, &props, "altar.status", 4);
  altar_spec_t *spec = altar_spec_new("bench", "img:1");
  altar_spec_add_arg(spec, "/bin/true");
  altar_buf_t b = {0};
  char first_key[32] = "";
  for (long i = 0; i < shards; i++) {
    char g[32], id[32];
    snprintf(g, sizeof g, "g%ld", i / width);
    snprintf(id, sizeof id, "t%ld", i);
    bench_write_succeeded_shard(t, "altar.status", spec, &b, g, i % width, width, id);
    if (!i) snprintf(first_key, sizeof first_key, "%s", id);
  }
  if (altar_transport_flush(t, -1, &e)) die("flush", &e);
  altar_transport_close(t);

  altar_group_specs_t groups = {0};
  const char *yaml =
      "bench:\n  group_by: [job_id, group]\n  ready_when: {all_expected_folds: {label: fold, count_label: "
      "num_folds}}\n  on_failed: dead_letter\n";
  if (altar_group_specs_load_string(yaml, strlen(yaml), "bench", &groups, &e)) die("groups", &e);
  altar_topics_t topics = {"altar.jobs", "altar.status", "altar.ready", "altar.dead", "altar.dlq"};
  altar_reconciler_stats_t st = {0};
  uint64_t published = 0;
  altar_ledger_t *l = altar_ledger_rocksdb_open(ledger, NULL, &e);
  if (!l || altar__reconciler_rebuild("local", &props, l, &groups, &topics, NULL, NULL, true, &st, &published, &e))
    die("rebuild", &e);
  /* With BENCH_DASHBOARD_WAL=1 the rebuild's write-ahead log stays, as a live
   * reconciler's does: every read-only open replays it. */
  const char *wal = getenv("BENCH_DASHBOARD_WAL");
  if (!(wal && !strcmp(wal, "1")) && altar_ledger_rocksdb_persist(l, &e)) die("persist", &e);
  altar_ledger_close(l);

  FILE *f = fopen(cfgpath, "w");
  if (!f) return 1;
  fprintf(f, "transport: {name: local, dir: %s}\nbackend: {name: process, data_root: %s/data}\nledger: {path: %s}\n",
          logdir, dir, ledger);
  fclose(f);
  altar_config_t cfg = {0};
  if (altar_config_load(cfgpath, &cfg, &e)) die("config", &e);
  altar_fleet_view_t *v = altar__fleet_view_new(&cfg, &e);
  if (!v) die("fleet view", &e);
  if (altar__fleet_view_sync(v, 60000, &e)) die("sync", &e);
  printf("one job of %ld shards in %ld groups (%llu fired), ledger at %s\n", shards, shards / width,
         (unsigned long long)st.fired, ledger);
  altar_fleet_query_t job = {.job = "bench"};
  double old_read = 0, old_render = time_page_read(v, "/api/job?id=bench", "job", &job, true, &old_read);
  time_page(v, "/api/job?id=bench", "job", &job, false);
  altar_fleet_query_t jobs = {0};
  time_page(v, "/api/jobs", "jobs", &jobs, true);
  time_page(v, "/api/jobs", "jobs", &jobs, false);
  /* The task key the bench writer gave the first shard stands for it. */
  altar_fleet_query_t shard = {.key = first_key};
  time_page(v, "/api/shard?key=(first shard)", "shard", &shard, true);
  time_page(v, "/api/shard?key=(first shard)", "shard", &shard, false);
  altar_fleet_query_t filtered = {.job = "bench", .label = "fold=3", .state = "succeeded"};
  time_page(v, "/api/job?id=bench&label=fold=3&state=..", "job", &filtered, true);
  time_page(v, "/api/job?id=bench&label=fold=3&state=..", "job", &filtered, false);
  /* The new path: the view's own thread keeps the snapshot fresh, so a
   * request pays only its render (the job summaries computed once per
   * snapshot). The old path: a read of the ledger, then the render. */
  altar_fleet_view_counters_t c0, c1;
  if (altar__fleet_view_start_reader(v, &e)) die("reader", &e);
  altar__fleet_view_counters(v, &c0);
  enum { RUNS = 9 };
  double walls[RUNS];
  for (int i = 0; i < RUNS; i++) {
    walls[i] = time_page(v, "/api/job?id=bench (reader)", "job", &job, false);
    usleep(300 * 1000); /* requests spread over the reader's period */
  }
  altar__fleet_view_counters(v, &c1);
  qsort(walls, RUNS, sizeof *walls, cmp_double);
  double median = walls[RUNS / 2], old = old_read + old_render;
  printf("job page with the reader: median %.1f ms wall over %d requests; %llu ledger reads in them, %llu by the "
         "reader, %llu job-summary builds\n",
         median * 1e3, RUNS, (unsigned long long)(c1.ledger_reads_in_render - c0.ledger_reads_in_render),
         (unsigned long long)(c1.background_reads - c0.background_reads),
         (unsigned long long)(c1.jobs_builds - c0.jobs_builds));
  printf("old path (read + render) %.1f ms wall / new path %.1f ms wall = %.1fx\n", old * 1e3, median * 1e3,
         median > 0 ? old / median : 0);
  time_order(shards, ALTAR_FLEET_VIEW_LIMIT_DEFAULT);
  altar__fleet_view_free(v);
  altar_config_clear(&cfg);
  altar_group_specs_clear(&groups);
  altar_strmap_clear(&props);
  altar_spec_free(spec);
  altar_buf_free(&b);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) ? 1 : 0;
}
