/* The dashboard's cost on a big job: one job ("bench") of SHARDS succeeded
 * shards in 5-fold groups, replayed from the local log into a RocksDB ledger
 * as a rebuild would, then the fleet view's pages rendered and serialised
 * as the HTTP handler does: the job page, one shard's page and a filtered
 * job page, each rendered from the view's snapshot twice, after a read of
 * the ledger (timed on its own: what the request that finds the snapshot
 * old pays on top). Prints wall and CPU milliseconds; asserts nothing.
 * usage: bench_dashboard [SHARDS]   (default 100000) */
#include "altar/config.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "dashboard/fleet_view.h"
#include "reconciler/daemon.h"
#include "util/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const altar_error_t *e) { bench_die("bench_dashboard", what, e); }

/* Renders page with q and serialises it; prints its cost and size. A page
 * the build does not have (an older one) prints why. */
static void time_page(altar_fleet_view_t *v, const char *label, const char *page, const altar_fleet_query_t *q,
                      bool fresh) {
  altar_error_t e = {0};
  if (fresh) {
    /* A read of the ledger, what the request that finds the snapshot old pays on top. */
    double t0 = bench_now_s(), c0 = bench_cpu_s();
    if (altar__fleet_view_sync(v, 60000, &e)) bench_die("bench_dashboard", "sync", &e);
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
  time_page(v, "/api/job?id=bench", "job", &job, true);
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
