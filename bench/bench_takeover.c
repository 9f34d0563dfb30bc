/* Takeover after retention: how long a reconciler with no ledger of its own
 * takes, once started, to fire the first group whose events came after the
 * history, restoring the newest checkpoint first (ledger.checkpoints) or
 * replaying the whole status topic (no checkpoints); and what checkpoints
 * cost the applying reconciler, as a ratio to applying without them, in
 * the same run.
 * usage: bench_takeover [GROUPS...]   (default 10000 100000; groups of 5
 *        shards: 10 status events each; the local log, as `make run`)
 * The owner's last checkpoint is followed by TAIL groups (ALTAR_BENCH_TAIL,
 * default 6000 = 60,000 events: a minute, the default checkpoint interval,
 * at 1,000 events/s) that the new owner reads from the log before the group
 * it waits for: what a kill -9 just before the next checkpoint leaves.
 * ALTAR_BENCH_TAKEOVER_ONLY=1 skips the two runs only the other columns
 * need (the history applied without checkpoints, the full replay): the
 * takeover figure alone, in a third of the time.
 * warm s: the same takeover by a standby that only restored that
 * checkpoint (a copy moved to the ledger path, then the whole tail: what a
 * standby did before it applied the status topic itself).
 * hot s: the same by a hot standby (`--standby`, reconciler/standby.c)
 * whose copy applied the tail as it came (the daemon following, by
 * assignment, publishing nothing; the owner's publications of the tail's
 * groups matched as the ready topic would show them): its copy moved to
 * the ledger path, then only the last group's events. All three from the
 * moment the owner is known gone (on Kafka a session timeout later).
 * running s: a reconciler already running with other partitions gains a
 * dead owner's (issue #26): the history applied and checkpointed by the
 * owner, which then runs (a process of its own, its checkpoints failing)
 * beside the survivor (this process), each owning 2 of the status topic's
 * 4 partitions; the TAIL groups are applied and published by both; the
 * owner is killed -9; from that moment until the survivor fires a group
 * written then into each partition it gained (the first and the last of
 * them): the local log's check for dead members, the import of each gained
 * partition from the owner's checkpoint, the ready topic read from the
 * ends it recorded, the owner's share of the tail applied again (its group
 * events found published, not sent again). ALTAR_BENCH_RUNNING_ONLY=1 runs
 * this case alone; ALTAR_BENCH_VERBOSE=1 lets the survivor log its steps. */
#include "altar/codec.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "altar/storage.h"
#include "reconciler/checkpoint.h"
#include "reconciler/daemon.h"
#include "reconciler/published_seen.h"
#include "util/bench_util.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WIDTH 5

static void die(const char *what, const altar_error_t *e) { bench_die("bench_takeover", what, e); }

/* Appends the events of groups [from, to) (submitted + succeeded per shard),
 * named g<i>, or those of the groups named in names when given. */
static void write_named(const altar_strmap_t *props, long from, long to, char (*names)[48]) {
  altar_error_t e = {0};
  altar_transport_t *t = altar_transport_open("local", props, NULL, &e);
  if (!t) die("open", &e);
  altar_spec_t *spec = altar_spec_new("bench", "img:1");
  altar_spec_add_arg(spec, "/bin/true");
  altar_buf_t b = {0};
  for (long gi = from; gi < to; gi++) {
    char g[48];
    if (names) snprintf(g, sizeof g, "%s", names[gi]);
    else snprintf(g, sizeof g, "g%ld", gi);
    for (long f = 0; f < WIDTH; f++) {
      char id[48];
      snprintf(id, sizeof id, "t%ld-%ld", gi, f);
      bench_write_succeeded_shard(t, "st", spec, &b, g, f, WIDTH, id);
    }
  }
  if (altar_transport_flush(t, -1, &e)) die("flush", &e);
  altar_transport_close(t);
  altar_spec_free(spec);
  altar_buf_free(&b);
}

static void write_groups(const altar_strmap_t *props, long from, long to) { write_named(props, from, to, NULL); }

typedef struct run {
  volatile sig_atomic_t stop;
  const char *want; /* stop once a group event naming this group is published */
  double first_at;
} run_t;

static void on_published(void *ctx, const char *topic, const void *value, size_t len) {
  run_t *r = ctx;
  (void)topic;
  if (r->want && !r->first_at && memmem(value, len, r->want, strlen(r->want))) {
    r->first_at = bench_now_s();
    r->stop = 1;
  }
}

/* Runs a reconciler on ledger dir until idle (want NULL) or until want's
 * group event is published; returns its wall time. */
static double reconcile(const altar_strmap_t *props, const char *dir, const altar_group_specs_t *groups,
                        const char *cp_uri, const char *want, altar_reconciler_stats_t *st) {
  altar_error_t e = {0};
  altar_topics_t topics = {"jobs", "st", "ready", "dead", "dlq", "fleet"};
  double o0 = bench_now_s();
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &e);
  if (getenv("ALTAR_BENCH_VERBOSE")) fprintf(stderr, "ledger open: %.3f s\n", bench_now_s() - o0);
  altar_transport_t *t = l ? altar_transport_open("local", props, NULL, &e) : NULL;
  if (!t) die("reconciler open", &e);
  run_t r = {.want = want};
  altar_reconciler_opts_t o = {.transport = t,
                               .ledger = l,
                               .groups = groups,
                               .topics = &topics,
                               .group = "bench.rec",
                               .stop = &r.stop,
                               .exit_when_idle = !want,
                               .quiet = true,
                               .on_published = on_published,
                               .on_published_ctx = &r,
                               .checkpoint_uri = cp_uri,
                               .checkpoint_interval_s = 1};
  double t0 = bench_now_s();
  if (altar__reconciler_run(&o, st, &e)) die("reconciler", &e);
  double took = (want ? r.first_at : bench_now_s()) - t0;
  altar_transport_close(t);
  altar_ledger_close(l);
  return took;
}

/* The follower stops once its copy holds every status event written. */
typedef struct follow_ctx {
  int64_t target;
} follow_ctx_t;

static int caught_up(void *ctx, const altar_tp_t *v, size_t n, bool gap) {
  (void)gap;
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += v[i].offset > 0 ? v[i].offset : 0;
  return sum >= ((follow_ctx_t *)ctx)->target;
}

static int64_t status_events(const altar_strmap_t *props) {
  altar_error_t e = {0};
  altar_transport_t *t = altar_transport_open("local", props, NULL, &e);
  altar_topic_list_t *tl = NULL;
  if (!t || altar_transport_list_topics(t, "st", 5000, &tl, &e) || !tl->n_topics) die("list st", &e);
  int64_t n = 0;
  for (size_t i = 0; i < tl->topics[0].n_partitions; i++) n += tl->topics[0].partitions[i].end;
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return n;
}

/* A hot standby's copy (dir, restored from the checkpoint) applies the
 * status topic up to its end, publishing nothing; the group events it held
 * are then matched as the owner's publications would be. Returns its wall
 * time. */
static double follow(const altar_strmap_t *props, const char *dir, const altar_group_specs_t *groups,
                     altar_reconciler_stats_t *st) {
  altar_error_t e = {0};
  altar_topics_t topics = {"jobs", "st", "ready", "dead", "dlq", "fleet"};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &e);
  altar_transport_t *t = l ? altar_transport_open("local", props, NULL, &e) : NULL;
  if (!t) die("follower open", &e);
  follow_ctx_t fc = {.target = status_events(props)};
  altar__published_seen_t seen = {.ledger = l};
  altar_reconciler_opts_t o = {.transport = t,
                               .ledger = l,
                               .groups = groups,
                               .topics = &topics,
                               .group = "bench.rec",
                               .quiet = true,
                               .follow = true,
                               .follow_tick = caught_up,
                               .follow_ctx = &fc,
                               .published = &seen};
  double t0 = bench_now_s();
  if (altar__reconciler_run(&o, st, &e)) die("follower", &e);
  double took = bench_now_s() - t0;
  /* The owner published each of them: the ready topic says so. */
  char **ids = calloc(seen.pending.n ? seen.pending.n : 1, sizeof *ids);
  size_t n = 0;
  for (size_t i = 0; ids && i < seen.pending.cap; i++)
    if (seen.pending.ctrl[i]) ids[n++] = strdup(seen.pending.slots[i].key);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] && altar__published_seen_note(&seen, ids[i], &e)) die("match", &e);
    free(ids[i]);
  }
  free(ids);
  altar__published_seen_free(&seen);
  altar_transport_close(t);
  altar_ledger_close(l);
  return took;
}

#define RUN_PARTS 4
static const char *const run_yaml =
    "bench:\n  group_by: [job_id, group]\n  ready_when: {all_expected_folds: {label: fold, "
    "count_label: num_folds}}\n  on_failed: dead_letter\n";

/* The owner of the running case, a process of its own (so that a kill -9
 * is one): `bench_takeover --owner LOGDIR LEDGER CHECKPOINTS` runs a
 * reconciler in group bench.run until it is killed. */
static int run_owner(const char *logdir, const char *ledger, const char *cp) {
  altar_transport_register(&altar_transport_local_ops);
  altar_storage_register_builtin();
  altar_group_specs_t groups = {0};
  altar_error_t e = {0};
  if (altar_group_specs_load_string(run_yaml, strlen(run_yaml), "bench", &groups, &e)) die("groups", &e);
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", logdir);
  altar_strmap_set(&props, "fsync", "never");
  altar_topics_t topics = {"jobs", "st", "ready", "dead", "dlq", "fleet"};
  altar_ledger_t *l = altar_ledger_rocksdb_open(ledger, NULL, &e);
  altar_transport_t *t = l ? altar_transport_open("local", &props, NULL, &e) : NULL;
  if (!t) die("owner open", &e);
  altar_reconciler_opts_t o = {.transport = t,
                               .ledger = l,
                               .groups = &groups,
                               .topics = &topics,
                               .group = "bench.run",
                               .quiet = true,
                               .transport_name = "local",
                               .transport_props = &props,
                               .checkpoint_uri = cp,
                               .checkpoint_interval_s = 1};
  if (altar__reconciler_run(&o, NULL, &e)) die("owner", &e);
  return 0;
}

typedef struct survivor {
  const altar_strmap_t *props;
  const altar_group_specs_t *groups;
  char ledger[160], cp[160];
  volatile sig_atomic_t stop;
  char want[RUN_PARTS][48];
  volatile double fired[RUN_PARTS]; /* when (bench_now_s) each want's group event went out */
  volatile int armed;
  altar_reconciler_stats_t st;
  altar_error_t err;
  int rc;
} survivor_t;

static void on_survivor_published(void *ctx, const char *topic, const void *value, size_t len) {
  survivor_t *s = ctx;
  (void)topic;
  if (!s->armed) return;
  for (int i = 0; i < RUN_PARTS; i++)
    if (!s->fired[i] && memmem(value, len, s->want[i], strlen(s->want[i]))) s->fired[i] = bench_now_s();
}

static void *survivor_main(void *arg) {
  survivor_t *s = arg;
  altar_topics_t topics = {"jobs", "st", "ready", "dead", "dlq", "fleet"};
  altar_ledger_t *l = altar_ledger_rocksdb_open(s->ledger, NULL, &s->err);
  altar_transport_t *t = l ? altar_transport_open("local", s->props, NULL, &s->err) : NULL;
  if (!t) die("survivor open", &s->err);
  altar_reconciler_opts_t o = {.transport = t,
                               .ledger = l,
                               .groups = s->groups,
                               .topics = &topics,
                               .group = "bench.run",
                               .stop = &s->stop,
                               .quiet = getenv("ALTAR_BENCH_VERBOSE") == NULL,
                               .transport_name = "local",
                               .transport_props = s->props,
                               .on_published = on_survivor_published,
                               .on_published_ctx = s,
                               .checkpoint_uri = s->cp,
                               .checkpoint_interval_s = 1};
  s->rc = altar__reconciler_run(&o, &s->st, &s->err);
  altar_transport_close(t);
  altar_ledger_close(l);
  return NULL;
}

/* Which of the 4 partitions of st the member with pid owns in bench.run
 * (the local log's owner files name the member, its pid inside). */
static int owned_by(const char *logdir, long pid, bool mine[RUN_PARTS]) {
  char tag[24];
  snprintf(tag, sizeof tag, "-%010ld-", pid);
  int n = 0;
  for (int p = 0; p < RUN_PARTS; p++) {
    char path[256], buf[128] = {0};
    snprintf(path, sizeof path, "%s/groups/bench.run/owners/st.%d.lock", logdir, p);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[got] = 0;
    mine[p] = strstr(buf, tag) != NULL;
    n += mine[p];
  }
  return n;
}

static int64_t topic_events(const altar_strmap_t *props, const char *topic) {
  altar_error_t e = {0};
  altar_transport_t *t = altar_transport_open("local", props, NULL, &e);
  altar_topic_list_t *tl = NULL;
  int64_t n = 0;
  if (t && altar_transport_list_topics(t, topic, 5000, &tl, &e) == ALTAR_OK && tl->n_topics)
    for (size_t i = 0; i < tl->topics[0].n_partitions; i++) n += tl->topics[0].partitions[i].end;
  altar_topic_list_free(tl);
  if (t) altar_transport_close(t);
  return n;
}

/* Waits (bounded) for cond; exits saying what did not happen. */
#define WAIT_FOR(cond, what)                                                                                           \
  do {                                                                                                                 \
    double until_ = bench_now_s() + 600;                                                                               \
    while (!(cond)) {                                                                                                  \
      if (bench_now_s() > until_) {                                                                                    \
        fprintf(stderr, "bench_takeover: running case: %s did not happen within 600 s\n", what);                       \
        exit(1);                                                                                                       \
      }                                                                                                                \
      usleep(20 * 1000);                                                                                               \
    }                                                                                                                  \
  } while (0)

/* The running case for H groups of history and `tail` after the owner's
 * last checkpoint; prints its row. */
static void running_takeover(const char *self, long H, long tail, const altar_group_specs_t *groups) {
  char dir[] = "/tmp/altar-bench-takeover-run-XXXXXX";
  if (!mkdtemp(dir)) exit(1);
  char logdir[128], cp[160], lo[160], broken[160];
  snprintf(logdir, sizeof logdir, "%s/log", dir);
  snprintf(cp, sizeof cp, "%s/checkpoints", dir);
  snprintf(lo, sizeof lo, "%s/ledger-owner", dir);
  snprintf(broken, sizeof broken, "%s/no-checkpoints", dir); /* a file: the owner's later checkpoints fail */
  altar_strmap_t props = {0};
  altar_transport_close(bench_open_local_log("bench_takeover", logdir, &props, "st", RUN_PARTS));
  write_groups(&props, 0, H);
  /* The owner applies the history and checkpoints it (its clean stop's
   * checkpoint covers every partition). */
  altar_reconciler_stats_t st0 = {0};
  double t_apply = reconcile(&props, lo, groups, cp, NULL, &st0);
  FILE *bf = fopen(broken, "w");
  if (bf) fclose(bf);
  pid_t owner = fork();
  if (owner < 0) exit(1);
  if (owner == 0) {
    execl(self, self, "--owner", logdir, lo, broken, (char *)NULL);
    _exit(127);
  }
  survivor_t *s = calloc(1, sizeof *s);
  if (!s) exit(1);
  s->props = &props;
  s->groups = groups;
  snprintf(s->ledger, sizeof s->ledger, "%s/ledger-survivor", dir);
  snprintf(s->cp, sizeof s->cp, "%s", cp);
  bool of_owner[RUN_PARTS], of_survivor[RUN_PARTS];
  WAIT_FOR(owned_by(logdir, owner, of_owner) == RUN_PARTS, "the owner owning every partition");
  pthread_t th;
  if (pthread_create(&th, NULL, survivor_main, s)) exit(1);
  WAIT_FOR(owned_by(logdir, owner, of_owner) == 2 && owned_by(logdir, getpid(), of_survivor) == 2,
           "the owner and the survivor splitting the partitions");
  /* The tail: both apply and publish their shares. */
  write_groups(&props, H, H + tail);
  WAIT_FOR(topic_events(&props, "ready") >= H + tail, "every group of the history and the tail published");
  /* A group per partition, written after the kill: the survivor's own
   * fire at once; the ones it gains fire once it took them over. */
  for (int p = 0; p < RUN_PARTS; p++)
    for (long k = 0;; k++) {
      char name[48];
      snprintf(name, sizeof name, "want-%d-%ld", p, k);
      if (altar_partition_for_key(name, strlen(name), RUN_PARTS) == p) {
        snprintf(s->want[p], sizeof s->want[p], "%s", name);
        break;
      }
    }
  s->armed = 1;
  kill(owner, SIGKILL);
  double t0 = bench_now_s();
  waitpid(owner, NULL, 0);
  write_named(&props, 0, RUN_PARTS, s->want);
  WAIT_FOR(s->fired[0] && s->fired[1] && s->fired[2] && s->fired[3], "the survivor firing a group in every partition");
  double first = 0, last = 0, own = 0;
  for (int p = 0; p < RUN_PARTS; p++) {
    double at = s->fired[p] - t0;
    if (!of_owner[p]) {
      own = at > own ? at : own;
      continue;
    }
    first = !first || at < first ? at : first;
    last = at > last ? at : last;
  }
  s->stop = 1;
  pthread_join(th, NULL);
  if (s->rc) die("survivor", &s->err);
  /* Each group once: the owner's tail, decided again, is not published again. */
  long long again = (long long)topic_events(&props, "ready") - (H + tail + RUN_PARTS);
  printf("%10ld %12llu %12.2f %12.3f %12.3f %12.3f %10llu %12llu %10lld\n", H, (unsigned long long)st0.events, t_apply,
         first, last, own, (unsigned long long)s->st.partitions_imported, (unsigned long long)s->st.events, again);
  fflush(stdout);
  free(s);
  altar_strmap_clear(&props);
  bench_rm_tree(dir);
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--owner")) return run_owner(argv[2], argv[3], argv[4]);
  long sizes[8] = {10000, 100000};
  int n_sizes = 2;
  if (argc > 1) {
    n_sizes = 0;
    for (int i = 1; i < argc && n_sizes < 8; i++) sizes[n_sizes++] = atol(argv[i]);
  }
  const char *te = getenv("ALTAR_BENCH_TAIL");
  long tail = te ? atol(te) : 6000;
  if (tail < 0) tail = 0;
  altar_transport_register(&altar_transport_local_ops);
  altar_storage_register_builtin();
  altar_group_specs_t groups = {0};
  altar_error_t e = {0};
  if (altar_group_specs_load_string(run_yaml, strlen(run_yaml), "bench", &groups, &e)) die("groups", &e);
  bool running_only = getenv("ALTAR_BENCH_RUNNING_ONLY") && !strcmp(getenv("ALTAR_BENCH_RUNNING_ONLY"), "1");
  if (!running_only)
    printf("%10s %12s %14s %10s %12s %12s %12s %12s %12s %10s\n", "groups", "events", "apply ev/s", "with cp",
           "restore s", "takeover s", "warm s", "hot s", "replay s", "ratio");
  for (int si = 0; si < n_sizes && !running_only; si++) {
    long H = sizes[si];
    char dir[] = "/tmp/altar-bench-takeover-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char logdir[128], p[160], cp[160], want[48];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    snprintf(cp, sizeof cp, "%s/checkpoints", dir);
    altar_strmap_t props = {0};
    altar_strmap_set(&props, "dir", logdir);
    altar_strmap_set(&props, "fsync", "never");
    write_groups(&props, 0, H);
    /* The history applied twice: without checkpoints and with one a second. */
    altar_reconciler_stats_t st0 = {0}, st1 = {0}, st2 = {0}, st3 = {0};
    bool only = getenv("ALTAR_BENCH_TAKEOVER_ONLY") && !strcmp(getenv("ALTAR_BENCH_TAKEOVER_ONLY"), "1");
    snprintf(p, sizeof p, "%s/ledger-plain", dir);
    double t_plain = only ? 0 : reconcile(&props, p, &groups, NULL, NULL, &st0);
    snprintf(p, sizeof p, "%s/ledger-cp", dir);
    double t_cp = reconcile(&props, p, &groups, cp, NULL, &st1);
    /* The owner goes on for TAIL groups after its last checkpoint; a hot
     * standby, restored from that checkpoint, applies them as they come. */
    write_groups(&props, H, H + tail);
    altar_checkpoint_t c = {0};
    char hot[176], hot_at[160];
    snprintf(hot, sizeof hot, "%s/ledger-hot.standby", dir);
    snprintf(hot_at, sizeof hot_at, "%s/ledger-hot", dir);
    if (altar__checkpoint_restore(cp, hot, &c, &e)) die("hot standby restore", &e);
    altar__checkpoint_clear(&c);
    altar_reconciler_stats_t st5 = {0};
    double t_follow = follow(&props, hot, &groups, &st5);
    /* The owner is gone; one more group's events arrive after its last
     * checkpoint. A fresh reconciler takes over. */
    write_groups(&props, H + tail, H + tail + 1);
    snprintf(want, sizeof want, "g%ld", H + tail);
    snprintf(p, sizeof p, "%s/ledger-restored", dir);
    double r0 = bench_now_s();
    if (altar__checkpoint_restore(cp, p, &c, &e)) die("restore", &e);
    double t_restore = bench_now_s() - r0;
    double t_tail = reconcile(&props, p, &groups, NULL, want, &st2);
    altar__checkpoint_clear(&c);
    /* A standby restored the same checkpoint before the owner died. */
    char warm[176], sb[160];
    snprintf(warm, sizeof warm, "%s/ledger-standby.standby", dir);
    snprintf(sb, sizeof sb, "%s/ledger-standby", dir);
    if (altar__checkpoint_restore(cp, warm, &c, &e)) die("standby restore", &e);
    altar__checkpoint_clear(&c);
    altar_reconciler_stats_t st4 = {0};
    double s0 = bench_now_s();
    if (rename(warm, sb) != 0) return 1;
    double t_moved = bench_now_s() - s0;
    double t_standby = t_moved + reconcile(&props, sb, &groups, NULL, want, &st4);
    altar_reconciler_stats_t st6 = {0};
    s0 = bench_now_s();
    if (rename(hot, hot_at) != 0) return 1;
    t_moved = bench_now_s() - s0;
    double t_hot = t_moved + reconcile(&props, hot_at, &groups, NULL, want, &st6);
    snprintf(p, sizeof p, "%s/ledger-replayed", dir);
    double t_replay = only ? 0 : reconcile(&props, p, &groups, NULL, want, &st3);
    double took = t_restore + t_tail;
    if (only) {
      printf("%10ld %12llu %14s %10s %12.3f %12.3f %12.3f %12.3f %12s %10s   (cp apply %.0f ev/s; hot: %llu tail "
             "events applied while standing by in %.2f s, %llu read at takeover)\n",
             H, (unsigned long long)st1.events, "-", "-", t_restore, took, t_standby, t_hot, "-", "-",
             (double)st1.events / t_cp, (unsigned long long)st5.events, t_follow, (unsigned long long)st6.events);
    } else {
      printf("%10ld %12llu %14.0f %10.2f %12.3f %12.3f %12.3f %12.3f %12.3f %10.3f   (hot: %llu tail events applied "
             "while standing by in %.2f s, %llu read at takeover)\n",
             H, (unsigned long long)st0.events, (double)st0.events / t_plain,
             ((double)st1.events / t_cp) / ((double)st0.events / t_plain), t_restore, took, t_standby, t_hot, t_replay,
             took / t_replay, (unsigned long long)st5.events, t_follow, (unsigned long long)st6.events);
    }
    fflush(stdout);
    altar_strmap_clear(&props);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
  }
  if (!running_only)
    printf("apply ev/s: the history applied without checkpoints; with cp: apply rate with a checkpoint every second, "
           "as a ratio to that; takeover s: restore + the %ld groups after the checkpoint until the last fired; "
           "warm s: the same by a standby whose copy holds only the checkpoint (no restore, the whole tail); "
           "hot s: the same by a hot standby whose copy applied the tail as it came (only the last group read); "
           "replay s: the same from an empty ledger replaying every event; ratio: takeover / replay\n",
           tail);
  printf("\nrunning: a reconciler running with 2 of the 4 status partitions gains the other 2 when their owner is "
         "killed -9\n%10s %12s %12s %12s %12s %12s %10s %12s %10s\n",
         "groups", "events", "apply s", "running s", "last s", "own s", "imported", "applied", "again");
  for (int si = 0; si < n_sizes; si++) running_takeover("/proc/self/exe", sizes[si], tail, &groups);
  printf("running s: kill -9 of the owner until the survivor fired the first group written then into a partition it "
         "gained; last s: the last of them; own s: the groups in its own partitions (it never stopped); imported: "
         "partitions it imported (at its join too); applied: status events it applied in all; again: group events on "
         "the ready topic beyond one per group\n");
  altar_group_specs_clear(&groups);
  return 0;
}
