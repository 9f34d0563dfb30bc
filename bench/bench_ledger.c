/* Status events applied per second through the RocksDB ledger with grouping
 * (5-fold groups, ~300-byte specs), against a baseline measured in the same
 * run: the same number of raw RocksDB WriteBatch puts of the same bytes (each
 * event's msgpack encoding), in batches of the same size, with the same write
 * options (WAL on, no fsync per write). Then the cost per event with 10^4 and
 * 10^6 records already in the ledger. Events are decoded from their bytes
 * before timing, as the reconciler's batch loop decodes them before applying
 * (a canonical submitted event hands its spec bytes over with it).
 *
 *   bench_ledger [EVENTS] [BIG]     defaults: 300000 events, 1000000 records */
#include "altar/codec.h"
#include "altar/ledger.h"
#include "altar/reconcile.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000
#define FOLDS 5
#define ROUNDS 3

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the calling thread: RocksDB writes (memtable, WAL) run there,
 * so this is the work per event with other load on the machine factored out. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static double last_cpu; /* CPU seconds of the last timed section */

/* The machine is shared: the load average says how far to trust wall times. */
static void print_load(const char *when) {
  double la[3];
  if (getloadavg(la, 3) == 3) printf("load average %-6s %.2f %.2f %.2f\n", when, la[0], la[1], la[2]);
}

static void die(const char *what, const altar_error_t *err) {
  fprintf(stderr, "bench_ledger: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

static void rm_rf(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_ledger: could not remove %s\n", dir);
}

/* Events for groups [g0, g0+ngroups): per shard submitted, running, succeeded. */
static altar_status_event_t *make_events(size_t g0, size_t ngroups, const char *tag, size_t *pn) {
  size_t n = ngroups * FOLDS * 3, k = 0;
  altar_status_event_t *evs = calloc(n, sizeof *evs);
  if (!evs) die("out of memory", NULL);
  /* A wave: every shard is submitted, then every shard runs, then every
   * shard succeeds, so one shard's events land in different write batches
   * (as in a real fleet, where tasks take minutes) rather than coalescing. */
  for (int phase = 0; phase < 3; phase++) {
    for (size_t g = g0; g < g0 + ngroups; g++) {
      char job[48], eid[64], fold[8];
      snprintf(job, sizeof job, "%s-job-%zu", tag, g);
      for (int f = 0; f < FOLDS; f++) {
        altar_status_event_t *e = &evs[k++];
        e->v = 1;
        e->event = phase == 0 ? ALTAR_EV_SUBMITTED : ALTAR_EV_STATE;
        e->state = phase == 0 ? ALTAR_STATE_PENDING : phase == 1 ? ALTAR_STATE_RUNNING : ALTAR_STATE_SUCCEEDED;
        e->kind = strdup("chrombpnet");
        snprintf(eid, sizeof eid, "%s-f%d", job, f);
        snprintf(fold, sizeof fold, "%d", f);
        e->task_key = strdup(eid);
        altar_handle_init(&e->handle, "process", eid);
        altar_strmap_set(&e->handle.labels, "job_id", job);
        altar_strmap_set(&e->handle.labels, "model_id", "m1");
        altar_strmap_set(&e->handle.labels, "fold", fold);
        altar_strmap_set(&e->handle.labels, "num_folds", "5");
        e->ts = (double)k;
        if (phase == 0) {
          /* About 300 bytes of spec once encoded. */
          altar_spec_t *s = altar_spec_new("chrombpnet", "registry.example.org/chrombpnet:1.4.2");
          altar_spec_add_arg(s, "python");
          altar_spec_add_arg(s, "-m");
          altar_spec_add_arg(s, "chrombpnet.train");
          altar_spec_add_arg(s, "--fold");
          altar_spec_add_arg(s, fold);
          altar_spec_set_label(s, "job_id", job);
          altar_spec_set_label(s, "model_id", "m1");
          altar_spec_set_label(s, "fold", fold);
          altar_spec_set_label(s, "num_folds", "5");
          altar_spec_add_input(s, "gs://bucket/data/peaks.bed.gz", "inputs/peaks.bed.gz", NULL, NULL);
          altar_spec_add_output(s, "gs://bucket/out/model.h5", "outputs/model.h5");
          e->spec = s;
        }
      }
    }
  }
  /* As the reconciler gets them: decoded from their encoded bytes, so each
   * carries what the decoder hands over (a submitted event's spec bytes). */
  altar_buf_t b = {0};
  for (size_t i = 0; i < n; i++) {
    altar_status_event_t d;
    altar_error_t err = {0};
    altar_buf_reset(&b);
    if (altar_encode_status(&evs[i], &b, &err) || altar_decode_status(b.data, b.len, &d, &err)) die("round trip", &err);
    altar_status_event_clear(&evs[i]);
    evs[i] = d;
  }
  altar_buf_free(&b);
  *pn = n;
  return evs;
}

static void free_events(altar_status_event_t *evs, size_t n) {
  for (size_t i = 0; i < n; i++) altar_status_event_clear(&evs[i]);
  free(evs);
}

static const char *groups_yaml = "chrombpnet:\n"
                                 "  group_by: [job_id, model_id]\n"
                                 "  ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n"
                                 "  on_failed: dead_letter\n";

/* Applies events in batches; returns seconds and counts fired groups. */
static double apply_all(altar_ledger_t *l, const altar_group_specs_t *gs, const altar_status_event_t *evs, size_t n,
                        size_t *pfired) {
  double t0 = now(), c0 = cpu_now();
  size_t fired = 0;
  for (size_t i = 0; i < n; i += BATCH) {
    altar_apply_result_t r = {0};
    altar_error_t err = {0};
    if (altar_apply_events_atomic(l, gs, evs + i, i + BATCH < n ? BATCH : n - i, -1.0, &r, &err)) die("apply", &err);
    fired += r.n_events;
    altar_apply_result_clear(&r);
  }
  if (pfired) *pfired = fired;
  last_cpu = cpu_now() - c0;
  return now() - t0;
}

/* The baseline: one raw put per event of that event's encoded bytes. */
static double raw_puts(const char *dir, const altar_status_event_t *evs, size_t n, size_t *pbytes) {
  altar_buf_t *vals = calloc(n, sizeof *vals);
  altar_error_t err = {0};
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (altar_encode_status(&evs[i], &vals[i], &err)) die("encode", &err);
    bytes += vals[i].len;
  }
  rocksdb_options_t *o = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(o, 1);
  rocksdb_options_increase_parallelism(o, 2);
  rocksdb_options_set_write_buffer_size(o, 64u << 20);
  rocksdb_block_based_table_options_t *to = rocksdb_block_based_options_create();
  rocksdb_cache_t *cache = rocksdb_cache_create_lru(64u << 20);
  rocksdb_block_based_options_set_block_cache(to, cache);
  rocksdb_block_based_options_set_filter_policy(to, rocksdb_filterpolicy_create_bloom(10));
  rocksdb_options_set_block_based_table_factory(o, to);
  char *dberr = NULL;
  rocksdb_t *db = rocksdb_open(o, dir, &dberr);
  if (!db) die(dberr ? dberr : "raw open", NULL);
  rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
  rocksdb_writeoptions_set_sync(wo, 0);
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  double t0 = now(), c0 = cpu_now();
  for (size_t i = 0; i < n; i++) {
    char key[96];
    int kl = snprintf(key, sizeof key, "r:%s%c%s:%zu", evs[i].handle.backend, 0, evs[i].handle.external_id, i);
    rocksdb_writebatch_put(wb, key, (size_t)kl, (const char *)vals[i].data, vals[i].len);
    if ((i + 1) % BATCH == 0 || i + 1 == n) {
      rocksdb_write(db, wo, wb, &dberr);
      if (dberr) die(dberr, NULL);
      rocksdb_writebatch_clear(wb);
    }
  }
  double dt = now() - t0;
  last_cpu = cpu_now() - c0;
  rocksdb_writebatch_destroy(wb);
  rocksdb_writeoptions_destroy(wo);
  rocksdb_close(db);
  rocksdb_options_destroy(o);
  rocksdb_block_based_options_destroy(to);
  rocksdb_cache_destroy(cache);
  for (size_t i = 0; i < n; i++) altar_buf_free(&vals[i]);
  free(vals);
  *pbytes = bytes;
  return dt;
}

/* Fills a ledger with `records` settled records (whole groups that fired). */
static void prefill(altar_ledger_t *l, const altar_group_specs_t *gs, size_t records) {
  size_t groups = records / FOLDS, chunk = 20000;
  for (size_t g = 0; g < groups; g += chunk) {
    size_t n, ng = g + chunk < groups ? chunk : groups - g;
    altar_status_event_t *evs = make_events(g, ng, "fill", &n);
    apply_all(l, gs, evs, n, NULL);
    free_events(evs, n);
  }
}

/* µs per event for a measured stream on top of `records` existing ones. */
static double cost_at(const char *base, const altar_group_specs_t *gs, size_t records, size_t nev, double *pfill_s,
                      double *pcpu_us) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/at-%zu", base, records);
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  if (!l) die("open", &err);
  double t0 = now();
  prefill(l, gs, records);
  *pfill_s = now() - t0;
  /* Three measured waves on top; the best one counts (see ROUNDS). */
  double best = 1e30, best_cpu = 1e30;
  size_t n = 0;
  for (int round = 0; round < ROUNDS; round++) {
    char tag[32];
    snprintf(tag, sizeof tag, "measure%d", round);
    altar_status_event_t *evs = make_events(0, nev / (FOLDS * 3 * ROUNDS) + 1, tag, &n);
    double dt = apply_all(l, gs, evs, n, NULL);
    free_events(evs, n);
    if (dt < best) best = dt;
    if (last_cpu < best_cpu) best_cpu = last_cpu;
  }
  double dt = best;
  *pcpu_us = best_cpu * 1e6 / (double)n;
  altar_ledger_close(l);
  rm_rf(dir);
  return dt * 1e6 / (double)n;
}

int main(int argc, char **argv) {
  size_t nev = argc > 1 ? strtoul(argv[1], NULL, 10) : 300000;
  size_t big = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
  if (nev < FOLDS * 3) nev = FOLDS * 3;
  char base[] = "/tmp/bench-ledger.XXXXXX";
  if (!mkdtemp(base)) die("mkdtemp", NULL);
  altar_group_specs_t gs = {0};
  altar_error_t err = {0};
  print_load("start");
  fflush(stdout);
  if (altar_group_specs_load_string(groups_yaml, strlen(groups_yaml), "bench", &gs, &err)) die("groups", &err);

  /* Other work on the machine skews single runs, so the two sides take
   * turns, ROUNDS times, and the best run of each is compared. */
  size_t n, fired = 0, bytes = 0;
  altar_status_event_t *evs = make_events(0, nev / (FOLDS * 3), "run", &n);
  double raw_s = 1e30, led_s = 1e30, raw_cpu = 1e30, led_cpu = 1e30;
  for (int round = 0; round < ROUNDS; round++) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/raw", base);
    double t = raw_puts(dir, evs, n, &bytes);
    rm_rf(dir);
    if (t < raw_s) raw_s = t;
    if (last_cpu < raw_cpu) raw_cpu = last_cpu;
    snprintf(dir, sizeof dir, "%s/ledger", base);
    altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
    if (!l) die("open", &err);
    t = apply_all(l, &gs, evs, n, &fired);
    if (last_cpu < led_cpu) led_cpu = last_cpu;
    altar_ledger_close(l);
    rm_rf(dir);
    if (t < led_s) led_s = t;
    if (fired != n / (FOLDS * 3)) {
      fprintf(stderr, "bench_ledger: expected %zu groups to fire, saw %zu\n", n / (FOLDS * 3), fired);
      return 1;
    }
  }
  free_events(evs, n);

  printf("settings: RocksDB WAL on, sync=off, 64 MiB memtable, default (snappy) compression, bloom filter\n"
         "          (the ledger's defaults, both sides), write batches of %d events, 5-fold groups,\n"
         "          events decoded before timing (submitted with spec, running, succeeded per shard),\n"
         "          best of %d alternating runs per side\n",
         BATCH, ROUNDS);
  printf("events                         %zu (%zu groups fired, mean encoded event %.0f bytes)\n", n, fired,
         (double)bytes / (double)n);
  printf("ledger apply with grouping     %10.0f events/s  (%.2f s)\n", (double)n / led_s, led_s);
  printf("raw WriteBatch puts (baseline) %10.0f puts/s    (%.2f s)\n", (double)n / raw_s, raw_s);
  printf("ratio ledger/raw               %10.2f\n", raw_s / led_s);
  printf("same, by CPU time of the writing thread: ledger %.0f events/s, raw %.0f puts/s, ratio %.2f\n",
         (double)n / led_cpu, (double)n / raw_cpu, raw_cpu / led_cpu);
  fflush(stdout);

  size_t small = 10000;
  double fill_small, fill_big, cpu_small, cpu_big;
  double c_small = cost_at(base, &gs, small, nev, &fill_small, &cpu_small);
  double c_big = cost_at(base, &gs, big, nev, &fill_big, &cpu_big);
  printf("cost per event, %8zu records in the ledger   %.2f us  (CPU of the writing thread %.2f us)\n", small, c_small,
         cpu_small);
  printf(
      "cost per event, %8zu records in the ledger   %.2f us  (CPU of the writing thread %.2f us; prefill took %.1f s)\n",
      big, c_big, cpu_big, fill_big);
  printf("ratio cost(%zu)/cost(%zu)       %.2f  (by CPU time %.2f)\n", big, small, c_big / c_small,
         cpu_big / cpu_small);
  print_load("end");
  altar_group_specs_clear(&gs);
  rmdir(base);
  return 0;
}
