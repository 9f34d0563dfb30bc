/* The local log's consumer groups: sticky, minimal-movement assignment that
 * every member computes alike, fast detection of joins, leaves and deaths
 * (kill -9 of a member process), members subscribing different topics,
 * and commits written by a thread yet read as written and before handover.
 * Assertions are on recorded facts (which partitions each member was
 * given or had taken, in how many rebalance callbacks); the latencies are
 * printed for the record, not asserted. */
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TP_MAX 64

typedef struct tp {
  char topic[32];
  int32_t p;
} tp_t;

/* What one member's rebalance callback saw. */
typedef struct rec {
  tp_t owned[TP_MAX];
  size_t n_owned;
  int assign_rounds, revoke_rounds;
  tp_t assigned[TP_MAX * 4], revoked[TP_MAX * 4];
  size_t n_assigned, n_revoked;
} rec_t;

static bool tp_in(const tp_t *set, size_t n, const char *topic, int32_t p) {
  for (size_t i = 0; i < n; i++)
    if (set[i].p == p && !strcmp(set[i].topic, topic)) return true;
  return false;
}

static void on_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  (void)t;
  rec_t *r = ctx;
  if (kind == ALTAR_REBALANCE_ASSIGN) r->assign_rounds++;
  else r->revoke_rounds++;
  for (size_t i = 0; i < n; i++) {
    tp_t x = {.p = parts[i].partition};
    snprintf(x.topic, sizeof x.topic, "%s", parts[i].topic);
    if (kind == ALTAR_REBALANCE_ASSIGN) {
      if (r->n_owned < TP_MAX) r->owned[r->n_owned++] = x;
      if (r->n_assigned < TP_MAX * 4) r->assigned[r->n_assigned++] = x;
    } else {
      for (size_t j = 0; j < r->n_owned; j++)
        if (r->owned[j].p == x.p && !strcmp(r->owned[j].topic, x.topic)) r->owned[j--] = r->owned[--r->n_owned];
      if (r->n_revoked < TP_MAX * 4) r->revoked[r->n_revoked++] = x;
    }
  }
}

static void rec_reset_log(rec_t *r) {
  r->assign_rounds = r->revoke_rounds = 0;
  r->n_assigned = r->n_revoked = 0;
}

static size_t owned_of(const rec_t *r, const char *topic) {
  size_t k = 0;
  for (size_t i = 0; i < r->n_owned; i++) k += !strcmp(r->owned[i].topic, topic);
  return k;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The default check interval (100 ms): the latencies printed are a real
 * member's. */
static altar_transport_t *open_member(const char *dir) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  if (!t) fprintf(stderr, "open local: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

static void join(altar_transport_t *t, const char *const *topics, size_t n, rec_t *r) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(t, "g", topics, n, on_rebalance, r, &err), 0);
}

/* Serves every member until pred holds; false after 20 s (a failure). */
static bool serve_until(altar_transport_t **ts, size_t n, bool (*pred)(void *), void *ctx) {
  int64_t deadline = mono_ms() + 20000;
  while (mono_ms() < deadline) {
    for (size_t i = 0; i < n; i++) {
      if (!ts[i]) continue;
      altar_msg_t *m = NULL;
      altar_error_t err = {0};
      altar_transport_consume(ts[i], 1, &m, &err);
      altar_msg_free(m);
    }
    if (pred(ctx)) return true;
  }
  return false;
}

typedef struct want {
  rec_t **recs;
  size_t n;
  const char *topic;
  size_t each[8]; /* partitions each member must own of topic */
} want_t;

static bool balanced(void *ctx) {
  want_t *w = ctx;
  for (size_t i = 0; i < w->n; i++)
    if (owned_of(w->recs[i], w->topic) != w->each[i]) return false;
  return true;
}

/* Join and leave of 12 partitions among 3 members, then a 4th: only the
 * joiner's share moves (one partition from each), in one callback per
 * member involved; then the joiner leaves and only its share moves back. */
static void test_join_and_leave_move_only_the_share(void) {
  char *dir = altar_test_tmpdir("local-group-join");
  altar_transport_t *ts[4] = {0};
  rec_t *r[4];
  for (int i = 0; i < 4; i++) {
    ts[i] = open_member(dir);
    CU_ASSERT_FATAL(ts[i] != NULL);
    r[i] = calloc(1, sizeof *r[i]);
  }
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(ts[0], "work", 12, &err), 0);
  const char *topics[] = {"work"};
  want_t w = {.recs = r, .topic = "work"};
  /* One member, then two, then three, each balanced before the next. */
  static const size_t steps[3][3] = {{12, 0, 0}, {6, 6, 0}, {4, 4, 4}};
  for (int k = 0; k < 3; k++) {
    join(ts[k], topics, 1, r[k]);
    w.n = (size_t)k + 1;
    memcpy(w.each, steps[k], sizeof steps[k]);
    CU_ASSERT_FATAL(serve_until(ts, w.n, balanced, &w));
  }
  tp_t before[3][TP_MAX];
  for (int i = 0; i < 3; i++) {
    memcpy(before[i], r[i]->owned, sizeof before[i]);
    rec_reset_log(r[i]);
  }
  /* The fourth joins. */
  int64_t t0 = mono_ms();
  join(ts[3], topics, 1, r[3]);
  w.n = 4;
  static const size_t four[4] = {3, 3, 3, 3};
  memcpy(w.each, four, sizeof four);
  CU_ASSERT_FATAL(serve_until(ts, 4, balanced, &w));
  printf("\n    join: 4th member owns its 3 of 12 partitions after %lld ms\n", (long long)(mono_ms() - t0));
  CU_ASSERT_EQUAL(r[3]->n_assigned, 3);
  for (int i = 0; i < 3; i++) {
    /* Exactly one partition taken, in one callback, none given. */
    CU_ASSERT_EQUAL(r[i]->revoke_rounds, 1);
    CU_ASSERT_EQUAL(r[i]->n_revoked, 1);
    CU_ASSERT_EQUAL(r[i]->assign_rounds, 0);
    for (size_t j = 0; j < r[i]->n_owned; j++) CU_ASSERT(tp_in(before[i], 4, "work", r[i]->owned[j].p));
    /* The partition it lost is one the joiner got. */
    CU_ASSERT(tp_in(r[3]->assigned, r[3]->n_assigned, "work", r[i]->revoked[0].p));
    rec_reset_log(r[i]);
  }
  /* The fourth leaves (leave, its handle still open): its 3 go back, one each. */
  t0 = mono_ms();
  CU_ASSERT_EQUAL(altar_transport_leave(ts[3], &err), 0);
  w.n = 3;
  static const size_t three[3] = {4, 4, 4};
  memcpy(w.each, three, sizeof three);
  CU_ASSERT_FATAL(serve_until(ts, 3, balanced, &w));
  printf("    leave: the 3 partitions are owned again after %lld ms\n", (long long)(mono_ms() - t0));
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(r[i]->assign_rounds, 1);
    CU_ASSERT_EQUAL(r[i]->n_assigned, 1);
    CU_ASSERT_EQUAL(r[i]->revoke_rounds, 0);
  }
  for (int i = 0; i < 4; i++) {
    altar_transport_close(ts[i]);
    free(r[i]);
  }
  altar_test_rmtree(dir);
  free(dir);
}

typedef struct kill_ctx {
  rec_t *r;
  size_t want;
} kill_ctx_t;

static bool owns_n(void *ctx) {
  kill_ctx_t *k = ctx;
  return k->r->n_owned == k->want;
}

/* A member process killed with SIGKILL: its partitions are taken over by
 * the survivor, which gives up none of its own. */
static void test_dead_member_taken_over(void) {
  char *dir = altar_test_tmpdir("local-group-kill");
  altar_transport_t *t = open_member(dir);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "work", 8, &err), 0);
  const char *topics[] = {"work"};
  /* Forked before the parent holds anything: a child must not inherit the
   * parent's lock descriptors (they would keep its locks held). */
  int pfd[2], go[2];
  CU_ASSERT_FATAL(pipe(pfd) == 0 && pipe(go) == 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    close(go[1]);
    char g1;
    if (read(go[0], &g1, 1) != 1) _exit(4);
    altar_transport_t *c = open_member(dir);
    rec_t *cr = calloc(1, sizeof *cr);
    altar_error_t e = {0};
    if (!c || !cr || altar_transport_subscribe(c, "g", topics, 1, on_rebalance, cr, &e)) _exit(2);
    bool told = false;
    int64_t until = mono_ms() + 60000; /* never outlives a failed test */
    while (getppid() == parent && mono_ms() < until) {
      altar_msg_t *m = NULL;
      altar_transport_consume(c, 5, &m, &e);
      altar_msg_free(m);
      if (cr->n_owned == 4 && !told) {
        char buf[TP_MAX * 4];
        size_t bl = 0;
        for (size_t i = 0; i < cr->n_owned; i++) buf[bl++] = (char)cr->owned[i].p;
        if (write(pfd[1], buf, bl) != (ssize_t)bl) _exit(3);
        told = true;
      }
    }
    _exit(0);
  }
  close(pfd[1]);
  close(go[0]);
  rec_t *r = calloc(1, sizeof *r);
  join(t, topics, 1, r);
  kill_ctx_t k = {r, 8};
  altar_transport_t *ts[1] = {t};
  CU_ASSERT_FATAL(serve_until(ts, 1, owns_n, &k));
  CU_ASSERT_FATAL(write(go[1], "g", 1) == 1);
  close(go[1]);
  k.want = 4;
  CU_ASSERT_FATAL(serve_until(ts, 1, owns_n, &k));
  char got[4];
  CU_ASSERT_EQUAL_FATAL(read(pfd[0], got, 4), 4);
  rec_reset_log(r);
  int64_t t0 = mono_ms();
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  k.want = 8;
  CU_ASSERT_FATAL(serve_until(ts, 1, owns_n, &k));
  printf("\n    kill -9: the dead member's 4 partitions are owned again after %lld ms\n", (long long)(mono_ms() - t0));
  /* Exactly the dead member's partitions came, and nothing was taken. */
  CU_ASSERT_EQUAL(r->n_assigned, 4);
  CU_ASSERT_EQUAL(r->revoke_rounds, 0);
  for (int i = 0; i < 4; i++) CU_ASSERT(tp_in(r->assigned, r->n_assigned, "work", got[i]));
  close(pfd[0]);
  altar_transport_close(t);
  free(r);
  altar_test_rmtree(dir);
  free(dir);
}

typedef struct mixed {
  rec_t *a, *b, *c;
} mixed_t;

static bool mixed_balanced(void *ctx) {
  mixed_t *m = ctx;
  return owned_of(m->a, "t1") == 2 && owned_of(m->b, "t1") == 2 && owned_of(m->b, "t2") == 2 &&
         owned_of(m->c, "t2") == 2;
}

/* Members of one group with different subscriptions: each topic is shared
 * only among the members that subscribe to it. */
static void test_mixed_subscriptions(void) {
  char *dir = altar_test_tmpdir("local-group-mixed");
  altar_transport_t *ts[3];
  rec_t *r[3];
  for (int i = 0; i < 3; i++) {
    ts[i] = open_member(dir);
    CU_ASSERT_FATAL(ts[i] != NULL);
    r[i] = calloc(1, sizeof *r[i]);
  }
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(ts[0], "t1", 4, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(ts[0], "t2", 4, &err), 0);
  const char *only1[] = {"t1"}, *both[] = {"t2", "t1"}, *only2[] = {"t2"};
  join(ts[0], only1, 1, r[0]);
  join(ts[1], both, 2, r[1]);
  join(ts[2], only2, 1, r[2]);
  mixed_t m = {r[0], r[1], r[2]};
  CU_ASSERT_FATAL(serve_until(ts, 3, mixed_balanced, &m));
  CU_ASSERT_EQUAL(owned_of(r[0], "t2"), 0);
  CU_ASSERT_EQUAL(owned_of(r[2], "t1"), 0);
  for (size_t i = 0; i < r[0]->n_assigned; i++) CU_ASSERT_STRING_EQUAL(r[0]->assigned[i].topic, "t1");
  for (size_t i = 0; i < r[2]->n_assigned; i++) CU_ASSERT_STRING_EQUAL(r[2]->assigned[i].topic, "t2");
  /* The member with both topics leaves: each topic goes whole to its one
   * remaining subscriber. */
  CU_ASSERT_EQUAL(altar_transport_leave(ts[1], &err), 0);
  kill_ctx_t ka = {r[0], 4}, kc = {r[2], 4};
  altar_transport_t *rest[2] = {ts[0], ts[2]};
  CU_ASSERT_FATAL(serve_until(rest, 2, owns_n, &ka));
  CU_ASSERT_FATAL(serve_until(rest, 2, owns_n, &kc));
  CU_ASSERT_EQUAL(owned_of(r[0], "t1"), 4);
  CU_ASSERT_EQUAL(owned_of(r[2], "t2"), 4);
  for (int i = 0; i < 3; i++) {
    altar_transport_close(ts[i]);
    free(r[i]);
  }
  altar_test_rmtree(dir);
  free(dir);
}

/* What a member that commits on revoke (as a worker does) saw, and what a
 * member reading commits on assign read. */
typedef struct commit_rec {
  rec_t r;
  int64_t read_at[TP_MAX]; /* by partition: the committed offset read on assign */
  bool read_ok[TP_MAX];
} commit_rec_t;

static void on_rebalance_commit(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                void *ctx) {
  commit_rec_t *c = ctx;
  for (size_t i = 0; i < n; i++) {
    altar_error_t err = {0};
    char md[32];
    snprintf(md, sizeof md, "meta-%d", (int)parts[i].partition);
    if (kind == ALTAR_REBALANCE_REVOKE) {
      CU_ASSERT_EQUAL(
          altar_transport_commit(t, parts[i].topic, parts[i].partition, 1000 + parts[i].partition, md, &err), 0);
    } else if (parts[i].partition >= 0 && parts[i].partition < TP_MAX) {
      int64_t off = -1;
      char *got = NULL;
      int rc = altar_transport_committed(t, "g", parts[i].topic, parts[i].partition, 0, &off, &got, &err);
      c->read_ok[parts[i].partition] = rc == 0 && got && !strcmp(got, md);
      c->read_at[parts[i].partition] = rc == 0 ? off : -1;
      free(got);
    }
  }
  on_rebalance(t, kind, parts, n, &c->r);
}

/* Commits are written by a thread (local_committer.c): a member reads its
 * own commit at once, and a partition is let go only once the commit its
 * owner made on revoke is written, so the next owner starts from it. */
static void test_commits_written_before_handover(void) {
  /* A slow disk: each batch the thread writes waits 300 ms first, so a
   * partition let go before its commit is written is read without it. */
  setenv("ALTAR_TEST_COMMIT_DELAY_MS", "300", 1);
  char *dir = altar_test_tmpdir("local-group-commits");
  altar_transport_t *ts[2] = {open_member(dir), open_member(dir)};
  CU_ASSERT_FATAL(ts[0] && ts[1]);
  commit_rec_t *c[2] = {calloc(1, sizeof *c[0]), calloc(1, sizeof *c[1])};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(ts[0], "work", 12, &err), 0);
  const char *topics[] = {"work"};
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(ts[0], "g", topics, 1, on_rebalance_commit, c[0], &err), 0);
  rec_t *rs[2] = {&c[0]->r, &c[1]->r};
  want_t w = {.recs = rs, .n = 1, .topic = "work", .each = {12}};
  CU_ASSERT_FATAL(serve_until(ts, 1, balanced, &w));
  /* Read as written (each commit a new offset), the thread slow or not. */
  for (int64_t k = 1; k <= 5; k++) {
    CU_ASSERT_EQUAL(altar_transport_commit(ts[0], "work", 3, k, "x", &err), 0);
    int64_t off = -1;
    char *md = NULL;
    CU_ASSERT_EQUAL(altar_transport_committed(ts[0], "g", "work", 3, 0, &off, &md, &err), 0);
    CU_ASSERT_EQUAL(off, k);
    free(md);
  }
  /* The second member joins: the 6 partitions it is given were committed
   * by the first in its revoke callback, and it reads those commits. */
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(ts[1], "g", topics, 1, on_rebalance_commit, c[1], &err), 0);
  w.n = 2;
  w.each[0] = w.each[1] = 6;
  CU_ASSERT_FATAL(serve_until(ts, 2, balanced, &w));
  CU_ASSERT_EQUAL(c[1]->r.n_assigned, 6);
  for (size_t i = 0; i < c[1]->r.n_assigned; i++) {
    int32_t p = c[1]->r.assigned[i].p;
    CU_ASSERT_EQUAL(c[1]->read_at[p], 1000 + p);
    CU_ASSERT(c[1]->read_ok[p]);
  }
  for (int i = 0; i < 2; i++) {
    altar_transport_close(ts[i]);
    free(c[i]);
  }
  unsetenv("ALTAR_TEST_COMMIT_DELAY_MS");
  altar_test_rmtree(dir);
  free(dir);
}

/* A commit the thread could not write is told: by the member's next commit
 * of that partition (a retriable error naming it), after which it commits
 * again as usual. */
static void test_commit_failure_told(void) {
  char *dir = altar_test_tmpdir("local-group-commit-fail");
  altar_transport_t *ts[1] = {open_member(dir)};
  CU_ASSERT_FATAL(ts[0] != NULL);
  rec_t *r = calloc(1, sizeof *r);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(ts[0], "work", 2, &err), 0);
  const char *topics[] = {"work"};
  join(ts[0], topics, 1, r);
  want_t w = {.recs = &r, .n = 1, .topic = "work", .each = {2}};
  CU_ASSERT_FATAL(serve_until(ts, 1, balanced, &w));
  CU_ASSERT_EQUAL(altar_transport_commit(ts[0], "work", 0, 5, NULL, &err), 0);
  int64_t off = -1;
  char *md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(ts[0], "g", "work", 0, 0, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 5);
  free(md);
  /* The offsets directory becomes a file: the next write fails. */
  char *odir = NULL, *aside = NULL;
  CU_ASSERT_FATAL(asprintf(&odir, "%s/groups/g/offsets", dir) > 0 && asprintf(&aside, "%s.aside", odir) > 0);
  CU_ASSERT_EQUAL_FATAL(rename(odir, aside), 0);
  FILE *f = fopen(odir, "w");
  CU_ASSERT_FATAL(f != NULL);
  fclose(f);
  CU_ASSERT_EQUAL(altar_transport_commit(ts[0], "work", 0, 6, NULL, &err), 0); /* recorded */
  /* Reading waits for the write, which failed: no commit is readable now. */
  off = -1;
  altar_transport_committed(ts[0], "g", "work", 0, 0, &off, &md, &err);
  free(md);
  md = NULL;
  CU_ASSERT_NOT_EQUAL(off, 6);
  /* Put back; the next commit tells the failure (retriable, naming the
   * partition) and is itself recorded and written. */
  CU_ASSERT_EQUAL(unlink(odir), 0);
  CU_ASSERT_EQUAL(rename(aside, odir), 0);
  err = (altar_error_t){0};
  CU_ASSERT_EQUAL(altar_transport_commit(ts[0], "work", 0, 7, NULL, &err), ALTAR_EIO);
  CU_ASSERT(err.retriable);
  CU_ASSERT(strstr(err.msg, "commit g/work/0") != NULL);
  CU_ASSERT_EQUAL(altar_transport_committed(ts[0], "g", "work", 0, 0, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 7);
  free(md);
  /* Told once: the commit after it succeeds. */
  CU_ASSERT_EQUAL(altar_transport_commit(ts[0], "work", 0, 8, NULL, &err), 0);
  md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(ts[0], "g", "work", 0, 0, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 8);
  free(md);
  free(odir);
  free(aside);
  altar_transport_close(ts[0]);
  free(r);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local log groups", NULL, NULL);
  ALTAR_TEST(test_join_and_leave_move_only_the_share);
  ALTAR_TEST(test_dead_member_taken_over);
  ALTAR_TEST(test_mixed_subscriptions);
  ALTAR_TEST(test_commits_written_before_handover);
  ALTAR_TEST(test_commit_failure_told);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
