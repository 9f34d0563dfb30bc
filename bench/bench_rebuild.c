/* Rebuild rate: status events per second replayed from the local log into a
 * fresh RocksDB ledger (with grouping), against merely reading and decoding
 * the same events from the same log, in the same run.
 * usage: bench_rebuild [SHARDS [WIDTH]]   (default 100000 shards = 200000
 * events, in groups of WIDTH = 5 folds; a wide group shows that deciding a
 * group does not cost its width per event) */
#include "altar/codec.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "reconciler/daemon.h"
#include "util/bench_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ALTAR_BENCH_PERF_CTL=<fifo>: the measured rebuild alone is profiled
 * (perf record -D -1 --control fifo:<fifo>). */
static void perf_ctl(const char *cmd) {
  const char *p = getenv("ALTAR_BENCH_PERF_CTL");
  FILE *f = p ? fopen(p, "w") : NULL;
  if (!f) return;
  fputs(cmd, f);
  fclose(f);
}

static void die(const char *what, const altar_error_t *e) { bench_die("bench_rebuild", what, e); }

static int read_all(const altar_strmap_t *props, const char *topic, size_t *pn) {
  altar_error_t e = {0};
  altar_transport_t *t = altar_transport_open("local", props, NULL, &e);
  altar_topic_list_t *tl = NULL;
  if (!t || altar_transport_list_topics(t, topic, 10000, &tl, &e)) die("list", &e);
  size_t np = tl->topics[0].n_partitions, left = 0;
  altar_tp_t *tps = calloc(np, sizeof *tps);
  for (size_t i = 0; i < np; i++) {
    tps[i] = (altar_tp_t){topic, tl->topics[0].partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    left += tl->topics[0].partitions[i].end > tl->topics[0].partitions[i].beginning; /* an empty one never ends */
  }
  if (altar_transport_assign(t, tps, np, &e)) die("assign", &e);
  *pn = 0;
  altar_arena_t arena = {0};
  while (left) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 1000, &m, &e) || !m) continue;
    /* Decoded as the rebuild decodes: the fast path (a spec checked, kept as
     * bytes), else the full decoder. */
    altar_status_event_t ev = {0};
    altar_error_t de = {0};
    if (altar_decode_status_canonical(m->value, m->value_len, &arena, ALTAR_DECODE_SPEC_BYTES, &ev) == ALTAR_OK) {
      (*pn)++;
    } else {
      if (altar_decode_status(m->value, m->value_len, &ev, &de) == ALTAR_OK) (*pn)++;
      altar_status_event_clear(&ev);
    }
    if (*pn % 4096 == 0) altar_arena_reset(&arena); /* per batch, as the rebuild */
    for (size_t i = 0; i < np; i++)
      if (tl->topics[0].partitions[i].partition == m->partition && m->offset + 1 == tl->topics[0].partitions[i].end)
        left--;
    altar_msg_free(m);
  }
  altar_arena_free(&arena);
  free(tps);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return 0;
}

int main(int argc, char **argv) {
  long shards = argc > 1 ? atol(argv[1]) : 100000;
  long width = argc > 2 ? atol(argv[2]) : 5;
  if (width < 1 || width > ALTAR_MAX_ARRAY) width = 5;
  if (shards < width) shards = width;
  char dir[] = "/tmp/altar-bench-rebuild-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char logdir[128], ledger[128];
  snprintf(logdir, sizeof logdir, "%s/log", dir);
  snprintf(ledger, sizeof ledger, "%s/ledger", dir);
  altar_strmap_t props = {0};
  altar_error_t e = {0};
  altar_transport_t *t = bench_open_local_log("bench_rebuild", logdir, &props, "st", 4);
  /* Two events per shard: submitted (with a ~300-byte spec) and succeeded. */
  altar_spec_t *spec = altar_spec_new("bench", "img:1");
  altar_spec_add_arg(spec, "/bin/true");
  altar_spec_add_input(spec, "file:///data/models/model.tar", "models/model.tar", NULL,
                       "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  altar_buf_t b = {0};
  double t0 = bench_now_s();
  for (long i = 0; i < shards; i++) {
    char g[32], id[32];
    snprintf(g, sizeof g, "g%ld", i / width);
    snprintf(id, sizeof id, "t%ld", i);
    bench_write_succeeded_shard(t, "st", spec, &b, g, i % width, width, id);
  }
  if (altar_transport_flush(t, -1, &e)) die("flush", &e);
  altar_transport_close(t);
  double t_write = bench_now_s() - t0;
  size_t n_events = 0;
  t0 = bench_now_s();
  double c0 = bench_cpu_s();
  read_all(&props, "st", &n_events);
  double t_read = bench_now_s() - t0, c_read = bench_cpu_s() - c0;

  altar_group_specs_t groups = {0};
  const char *yaml =
      "bench:\n  group_by: [job_id, group]\n  ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n  on_failed: dead_letter\n";
  if (altar_group_specs_load_string(yaml, strlen(yaml), "bench", &groups, &e)) die("groups", &e);
  altar_topics_t topics = {"jobs", "st", "ready", "dead", "dlq"};
  altar_reconciler_stats_t st = {0};
  uint64_t published = 0;
  /* A first replay publishes the group events (as the live reconciler would
   * have); the measured one replaces its ledger, which decided them all, so
   * it publishes none, as a real rebuild does. */
  char warm[160];
  snprintf(warm, sizeof warm, "%s/ledger-first", dir);
  altar_ledger_t *first = altar_ledger_rocksdb_open(warm, NULL, &e), *l = NULL;
  if (!first ||
      altar__reconciler_rebuild("local", &props, first, &groups, &topics, NULL, NULL, true, &st, &published, &e))
    die("first rebuild", &e);
  /* As `altar reconciler --rebuild` opens it: no write-ahead log, persisted
   * (memtables written to table files) before it counts as done. */
  altar_ledger_rocksdb_opts_t no = {.no_wal = true, .write_behind = true};
  l = altar_ledger_rocksdb_open(ledger, &no, &e);
  if (!l) die("ledger", &e);
  perf_ctl("enable\n");
  t0 = bench_now_s();
  c0 = bench_cpu_s();
  if (altar__reconciler_rebuild("local", &props, l, &groups, &topics, NULL, first, true, &st, &published, &e))
    die("rebuild", &e);
  if (altar_ledger_rocksdb_persist(l, &e)) die("persist", &e);
  double t_rebuild = bench_now_s() - t0, c_rebuild = bench_cpu_s() - c0;
  altar_ledger_close(first);
  perf_ctl("disable\n");
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  altar_ledger_checksum(l, sum, &e);
  altar_ledger_close(l);
  printf("status events: %zu (%ld shards in %ld %ld-fold groups), written in %.2f s\n", n_events, shards,
         shards / width, width, t_write);
  printf("baseline  read+decode from the local log: %10.0f events/s (%.2f s)\n", (double)n_events / t_read, t_read);
  printf("altar     rebuild into RocksDB + groups:  %10.0f events/s (%.2f s), %llu groups fired, %llu published\n",
         (double)st.events / t_rebuild, t_rebuild, (unsigned long long)st.fired, (unsigned long long)published);
  printf("ratio rebuild/read: %.2f\n", t_read / t_rebuild);
  printf("per CPU second: read+decode %.0f events/s (%.2f s CPU), rebuild %.0f events/s (%.2f s CPU)\n",
         (double)n_events / c_read, c_read, (double)st.events / c_rebuild, c_rebuild);
  printf("rebuild threads: reading+decoding %.2f s CPU, applying %.2f s CPU\n", st.read_cpu_s, st.apply_cpu_s);
  altar_group_specs_clear(&groups);
  altar_strmap_clear(&props);
  altar_spec_free(spec);
  altar_buf_free(&b);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) return 1;
  return 0;
}
