/* The local transport: the shared conformance suite, plus what only the
 * embedded log has (the partitioner's vectors, several producer processes
 * on one partition and across many, takeover after a member is killed,
 * retention, config). */
#include "altar/plugin/transport.h"
#include "testutil.h"
#include "transport_conformance.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *root;
static altar_strmap_t conf_props;

static altar_transport_t *open_local2(const char *dir, const char *k1, const char *v1, const char *k2, const char *v2) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "rebalance.check.ms", "20");
  if (k1) altar_strmap_set(&m, k1, v1);
  if (k2) altar_strmap_set(&m, k2, v2);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  if (!t) fprintf(stderr, "open local: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

static altar_transport_t *open_local(const char *dir, const char *k1, const char *v1) {
  return open_local2(dir, k1, v1, NULL, NULL);
}

/* Kafka's own test vectors (clients UtilsTest) for murmur2. */
static void test_murmur2_vectors(void) {
  CU_ASSERT_EQUAL(altar_murmur2("21", 2), -973932308);
  CU_ASSERT_EQUAL(altar_murmur2("foobar", 6), -790332482);
  CU_ASSERT_EQUAL(altar_murmur2("a-little-bit-long-string", 24), -985981536);
  CU_ASSERT_EQUAL(altar_murmur2("a-little-bit-longer-string", 26), -1486304829);
  CU_ASSERT_EQUAL(altar_murmur2("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 48), -58897971);
  CU_ASSERT_EQUAL(altar_murmur2("abc", 3), 479470107);
  for (int n = 1; n < 10; n++) {
    int32_t p = altar_partition_for_key("foobar", 6, n);
    CU_ASSERT(p >= 0 && p < n);
    CU_ASSERT_EQUAL(p, (int32_t)((uint32_t)(-790332482 & 0x7fffffff) % (uint32_t)n));
  }
}

static void test_config_errors(void) {
  altar_error_t err = {0};
  altar_strmap_t m = {0};
  CU_ASSERT(altar_transport_open("local", &m, NULL, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "dir") != NULL);
  altar_strmap_set(&m, "dir", root);
  altar_strmap_set(&m, "fsync", "sometimes");
  CU_ASSERT(altar_transport_open("local", &m, NULL, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "fsync") != NULL);
  altar_strmap_set(&m, "fsync", "never");
  altar_strmap_set(&m, "segment.bytes", "12abc");
  CU_ASSERT(altar_transport_open("local", &m, NULL, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "segment.bytes") != NULL);
  altar_strmap_clear(&m);
  CU_ASSERT(altar_transport_open("no-such-transport", NULL, NULL, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "local") != NULL); /* lists the known ones */
}

/* A table without its optional operations gets their defaults once, at
 * open: ENOTSUP naming the transport (out-params still cleared first), lag
 * built from list_topics and committed. A table lacking a required one is
 * refused, by name, at open and at registration. */
static void test_defaults_and_required_ops(void) {
  static altar_transport_ops_t bare;
  bare = altar_transport_local_ops;
  bare.name = "bare";
  bare.leave = NULL, bare.assign = NULL, bare.assignment = NULL, bare.caught_up = NULL;
  bare.topic_members = NULL, bare.lag = NULL;
  char *dir = altar_test_tmpdir("local-bare");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open_ops(&bare, &m, NULL, &err);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_STRING_EQUAL(altar_transport_name(t), "bare");
  CU_ASSERT(t->table == &bare);
  altar_tp_t tp = {.topic = "d", .partition = 0, .offset = ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL(altar_transport_assign(t, &tp, 1, &err), ALTAR_ENOTSUP);
  CU_ASSERT_STRING_EQUAL(err.msg, "bare: assign not supported");
  altar_tp_t *parts = &tp;
  size_t n = 7;
  CU_ASSERT_EQUAL(altar_transport_assignment(t, &parts, &n, &err), ALTAR_ENOTSUP);
  CU_ASSERT(parts == NULL && n == 0);
  bool done = true;
  CU_ASSERT_EQUAL(altar_transport_caught_up(t, &done, &err), ALTAR_ENOTSUP);
  CU_ASSERT(!done);
  n = 7;
  CU_ASSERT_EQUAL(altar_transport_topic_members(t, "g", "d", 0, &n, &err), ALTAR_ENOTSUP);
  CU_ASSERT(n == 0);
  CU_ASSERT_STRING_EQUAL(err.msg, "bare: topic_members not supported");
  CU_ASSERT_EQUAL(altar_transport_leave(t, &err), ALTAR_ENOTSUP);
  CU_ASSERT(strstr(err.msg, "leave not supported") != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "d", 2, &err), 0);
  altar_lag_list_t *lag = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_lag(t, "g", "d", 0, &lag, &err), 0);
  CU_ASSERT_FATAL(lag != NULL);
  CU_ASSERT_EQUAL(lag->n, 2);
  CU_ASSERT_EQUAL(lag->entries[0].committed, ALTAR_OFFSET_INVALID);
  altar_lag_list_free(lag);
  altar_transport_close(t);

  altar_transport_ops_t half = altar_transport_local_ops;
  half.name = "half";
  half.seek = NULL;
  CU_ASSERT(altar_transport_open_ops(&half, &m, NULL, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "'seek'") != NULL);
  CU_ASSERT_EQUAL(altar_transport_register(&half), ALTAR_EINVAL);
  CU_ASSERT(altar_transport_lookup("half") == NULL);
  altar_strmap_clear(&m);
  altar_test_rmtree(dir);
  free(dir);
}

static int count_segments_of(const char *dir, const char *topic) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "ls %s/topics/%s/0 | grep -c '\\.log$'", dir, topic);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = -1;
    pclose(f);
  }
  return n;
}

/* Several processes append to one partition at once: every record lands
 * once, offsets are dense, each producer's records stay in its order. With
 * small segments the processes roll segments under each other: each must
 * notice another's roll (local_seg_watch.c) before its next append. Returns
 * the number of segments left. */
static int concurrent_producer_processes(const char *segment_bytes) {
  char *dir = altar_test_tmpdir("local-multi");
  altar_transport_t *t = open_local(dir, NULL, NULL);
  CU_ASSERT_FATAL(t != NULL);
  if (!t) return 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, "shared", 1, &err), 0);
  altar_transport_close(t);
  enum { PROCS = 3, N = 400 };
  pid_t pids[PROCS];
  for (int k = 0; k < PROCS; k++) {
    pids[k] = fork();
    CU_ASSERT(pids[k] >= 0);
    if (pids[k] < 0) return 0;
    if (pids[k] == 0) {
      altar_transport_t *c =
          open_local2(dir, "group.commit.ms", "1", segment_bytes ? "segment.bytes" : NULL, segment_bytes);
      if (!c) _exit(2);
      for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d:%d", k, i);
        altar_produce_rec_t rec = {.topic = "shared", .partition = 0, .value = v, .value_len = strlen(v)};
        altar_error_t e = {0};
        while (altar_transport_produce(c, &rec, &e) == ALTAR_EAGAIN) altar_transport_poll(c, 10);
        if (i % 37 == 0) altar_transport_flush(c, -1, &e);
      }
      int rc = altar_transport_flush(c, -1, &err);
      altar_transport_close(c);
      _exit(rc ? 1 : 0);
    }
  }
  for (int k = 0; k < PROCS; k++) {
    int st = 0;
    waitpid(pids[k], &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  t = open_local(dir, NULL, NULL);
  CU_ASSERT(t != NULL);
  if (!t) return 0;
  altar_tp_t tp = {"shared", 0, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL(altar_transport_assign(t, &tp, 1, &err), 0);
  int next[PROCS] = {0};
  int total = 0;
  for (;;) {
    altar_msg_t *m = NULL;
    CU_ASSERT_EQUAL(altar_transport_consume(t, 50, &m, &err), 0);
    if (!m) break;
    CU_ASSERT_EQUAL(m->offset, total);
    int k = -1, i = -1;
    char v[32];
    snprintf(v, sizeof v, "%.*s", (int)m->value_len, (const char *)m->value);
    CU_ASSERT(sscanf(v, "%d:%d", &k, &i) == 2);
    if (k >= 0 && k < PROCS) {
      CU_ASSERT_EQUAL(i, next[k]);
      next[k] = i + 1;
    }
    total++;
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL(total, PROCS * N);
  bool done = false;
  CU_ASSERT_EQUAL(altar_transport_caught_up(t, &done, &err), 0);
  CU_ASSERT(done);
  altar_transport_close(t);
  int segments = count_segments_of(dir, "shared");
  altar_test_rmtree(dir);
  free(dir);
  return segments;
}

static void test_concurrent_producer_processes(void) { CU_ASSERT_EQUAL(concurrent_producer_processes(NULL), 1); }

static void test_concurrent_producers_rolling(void) {
  /* 1,200 records of about 40 bytes in 1 KiB segments: dozens of rolls. */
  CU_ASSERT(concurrent_producer_processes("1024") > 20);
}

/* Processes producing to many partitions at once, each visiting them in
 * its own order: a flush keeps every partition of its batch locked until
 * all are synced, so the locks must be taken in one order everywhere or two
 * flushers wait on each other for ever (a hang here, bounded below). Every
 * record lands once, each partition's offsets are dense and each
 * producer's records keep their order in each partition. */
static void test_producers_across_partitions(void) {
  char *dir = altar_test_tmpdir("local-across");
  altar_transport_t *t = open_local(dir, NULL, NULL);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  enum { PROCS = 4, PARTS = 8, N = 4000, BOUND_MS = 120000 };
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "wide", PARTS, &err), 0);
  altar_transport_close(t);
  pid_t pids[PROCS];
  for (int k = 0; k < PROCS; k++) {
    fflush(NULL);
    pids[k] = fork();
    CU_ASSERT_FATAL(pids[k] >= 0);
    if (pids[k] == 0) {
      altar_transport_t *c = open_local(dir, "group.commit.ms", "5");
      if (!c) _exit(2);
      for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d:%d", k, i);
        int32_t part = k % 2 ? PARTS - 1 - i % PARTS : i % PARTS; /* odd producers go downwards */
        altar_produce_rec_t rec = {.topic = "wide", .partition = part, .value = v, .value_len = strlen(v)};
        altar_error_t e = {0};
        while (altar_transport_produce(c, &rec, &e) == ALTAR_EAGAIN) altar_transport_poll(c, 10);
      }
      altar_error_t e = {0};
      int rc = altar_transport_flush(c, -1, &e);
      altar_transport_close(c);
      _exit(rc ? 1 : 0);
    }
  }
  int left = PROCS, waited_ms = 0;
  bool exited[PROCS] = {false};
  while (left > 0 && waited_ms < BOUND_MS) {
    for (int k = 0; k < PROCS; k++) {
      int st = 0;
      if (exited[k] || waitpid(pids[k], &st, WNOHANG) != pids[k]) continue;
      exited[k] = true;
      left--;
      CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (left > 0) {
      poll(NULL, 0, 20);
      waited_ms += 20;
    }
  }
  for (int k = 0; k < PROCS; k++)
    if (!exited[k]) {
      kill(pids[k], SIGKILL);
      waitpid(pids[k], NULL, 0);
    }
  CU_ASSERT_EQUAL_FATAL(left, 0); /* none still waiting on another's lock */
  int total = 0;
  for (int32_t p = 0; p < PARTS; p++) {
    t = open_local(dir, NULL, NULL); /* one assignment per transport */
    CU_ASSERT_FATAL(t != NULL);
    altar_tp_t tp = {"wide", p, ALTAR_OFFSET_BEGINNING};
    CU_ASSERT_EQUAL(altar_transport_assign(t, &tp, 1, &err), 0);
    int next[PROCS], in_part = 0;
    for (int k = 0; k < PROCS; k++) next[k] = -1;
    for (;;) {
      altar_msg_t *m = NULL;
      CU_ASSERT_EQUAL(altar_transport_consume(t, 50, &m, &err), 0);
      if (!m) break;
      CU_ASSERT_EQUAL(m->offset, in_part);
      char v[32];
      snprintf(v, sizeof v, "%.*s", (int)m->value_len, (const char *)m->value);
      int k = -1, i = -1;
      CU_ASSERT(sscanf(v, "%d:%d", &k, &i) == 2);
      if (k >= 0 && k < PROCS) {
        CU_ASSERT(i > next[k]);
        next[k] = i;
      }
      in_part++;
      altar_msg_free(m);
    }
    CU_ASSERT_EQUAL(in_part, PROCS * N / PARTS);
    total += in_part;
    altar_transport_close(t);
  }
  CU_ASSERT_EQUAL(total, PROCS * N);
  altar_test_rmtree(dir);
  free(dir);
}

/* A member process that dies (kill -9) leaves its partitions to the other. */
static void test_takeover_after_kill(void) {
  char *dir = altar_test_tmpdir("local-takeover");
  altar_transport_t *t = open_local(dir, NULL, NULL);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "work", 4, &err), 0);
  int pfd[2];
  CU_ASSERT_FATAL(pipe(pfd) == 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    altar_transport_t *c = open_local(dir, NULL, NULL);
    const char *topics[] = {"work"};
    altar_error_t e = {0};
    if (!c || altar_transport_subscribe(c, "g", topics, 1, NULL, NULL, &e)) _exit(2);
    bool told = false;
    for (;;) {
      altar_msg_t *m = NULL;
      altar_transport_consume(c, 20, &m, &e);
      altar_msg_free(m);
      altar_tp_t *parts = NULL;
      size_t n = 0;
      altar_transport_assignment(c, &parts, &n, &e);
      free(parts);
      if (n == 2 && !told) { /* split with the parent: tell it */
        if (write(pfd[1], "s", 1) != 1) _exit(3);
        told = true;
      }
    }
  }
  close(pfd[1]);
  const char *topics[] = {"work"};
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(t, "g", topics, 1, NULL, NULL, &err), 0);
  /* Poll until both hold two partitions (the child reports its half). */
  char ch;
  size_t n = 0;
  altar_tp_t *parts = NULL;
  int64_t spins = 0;
  for (;; spins++) {
    altar_msg_t *m = NULL;
    altar_transport_consume(t, 20, &m, &err);
    altar_msg_free(m);
    altar_transport_assignment(t, &parts, &n, &err);
    free(parts);
    if (n == 2) break;
    CU_ASSERT_FATAL(waitpid(pid, NULL, WNOHANG) == 0); /* the child is still there */
    CU_ASSERT_FATAL(spins < 3000);
  }
  CU_ASSERT_EQUAL_FATAL(read(pfd[0], &ch, 1), 1);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  for (spins = 0;; spins++) {
    altar_msg_t *m = NULL;
    altar_transport_consume(t, 20, &m, &err);
    altar_msg_free(m);
    altar_transport_assignment(t, &parts, &n, &err);
    free(parts);
    if (n == 4) break;
    CU_ASSERT_FATAL(spins < 3000);
  }
  CU_ASSERT_EQUAL(n, 4);
  close(pfd[0]);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

static int count_segments(const char *dir) { return count_segments_of(dir, "ret"); }

static void test_retention_by_size(void) {
  char *dir = altar_test_tmpdir("local-retention");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "segment.bytes", "4096");
  altar_strmap_set(&m, "retention.bytes", "10000");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "ret", 1, &err), 0);
  char val[500];
  memset(val, 'r', sizeof val);
  for (int i = 0; i < 200; i++) {
    altar_produce_rec_t rec = {.topic = "ret", .partition = 0, .value = val, .value_len = sizeof val};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
    if (i % 10 == 9) CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  }
  CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  int segs = count_segments(dir);
  CU_ASSERT(segs >= 2 && segs <= 4); /* about 10000 bytes of 4096-byte segments kept */
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "ret", 0, &l, &err), 0);
  CU_ASSERT_EQUAL(l->topics[0].partitions[0].end, 200);
  CU_ASSERT(l->topics[0].partitions[0].beginning > 100);
  int64_t begin = l->topics[0].partitions[0].beginning;
  altar_topic_list_free(l);
  /* A reader asked for offset 0 starts at the oldest kept record. */
  altar_tp_t tp = {"ret", 0, 0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, &tp, 1, &err), 0);
  altar_msg_t *msg = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(t, 1000, &msg, &err), 0);
  CU_ASSERT_FATAL(msg != NULL);
  CU_ASSERT_EQUAL(msg->offset, begin);
  altar_msg_free(msg);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* A consumer waiting at the end of a partition sees what comes next at
 * once: the first segment of an empty partition, and each segment a roll
 * starts (it no longer lists the directory on every wake, so this checks
 * the shortcut misses neither). Each wait is far below the relisting period. */
static void test_tail_follows_rolls(void) {
  char *dir = altar_test_tmpdir("local-tail");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "segment.bytes", "2048");
  altar_strmap_set(&m, "group.commit.ms", "0");
  altar_error_t err = {0};
  altar_transport_t *prod = altar_transport_open("local", &m, NULL, &err);
  altar_transport_t *cons = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(prod && cons);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(prod, "tail", 1, &err), 0);
  altar_tp_t tp = {"tail", 0, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(cons, &tp, 1, &err), 0);
  altar_msg_t *msg = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(cons, 50, &msg, &err), 0);
  CU_ASSERT_PTR_NULL(msg); /* empty, and now waiting at its end */
  char val[300];
  memset(val, 't', sizeof val);
  int64_t want = 0;
  for (int i = 0; i < 30; i++) { /* ~7 records a segment: several rolls */
    altar_produce_rec_t rec = {.topic = "tail", .partition = 0, .value = val, .value_len = sizeof val};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(prod, &rec, &err), 0);
    CU_ASSERT_EQUAL_FATAL(altar_transport_flush(prod, -1, &err), 0);
    msg = NULL;
    CU_ASSERT_EQUAL(altar_transport_consume(cons, 200, &msg, &err), 0);
    CU_ASSERT_FATAL(msg != NULL);
    CU_ASSERT_EQUAL(msg->offset, want);
    want++;
    altar_msg_free(msg);
    msg = NULL;
    CU_ASSERT_EQUAL(altar_transport_consume(cons, 0, &msg, &err), 0);
    CU_ASSERT_PTR_NULL(msg); /* caught up again */
  }
  CU_ASSERT(count_segments_of(dir, "tail") >= 3);
  altar_transport_close(cons);
  altar_transport_close(prod);
  altar_test_rmtree(dir);
  free(dir);
}

/* The wait descriptor: none before the first consume; after an empty
 * consume quiet until another handle writes to the assigned partition,
 * then readable, and a consume without waiting returns the record. */
static void test_wait_fd_wakes_on_write(void) {
  char *dir = altar_test_tmpdir("local-waitfd");
  altar_transport_t *prod = open_local(dir, "group.commit.ms", "0");
  altar_transport_t *cons = open_local(dir, NULL, NULL);
  CU_ASSERT_FATAL(prod && cons);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(prod, "wake", 2, &err), 0);
  altar_tp_t tp = {"wake", 1, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(cons, &tp, 1, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_wait_fd(cons), -1); /* not watching yet */
  altar_msg_t *msg = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(cons, 0, &msg, &err), 0);
  CU_ASSERT_PTR_NULL(msg);
  int fd = altar_transport_wait_fd(cons);
  CU_ASSERT_FATAL(fd >= 0);
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  CU_ASSERT_EQUAL(poll(&pfd, 1, 0), 0);
  altar_produce_rec_t rec = {.topic = "wake", .partition = 1, .value = "v", .value_len = 1};
  CU_ASSERT_EQUAL_FATAL(altar_transport_produce(prod, &rec, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_flush(prod, -1, &err), 0);
  CU_ASSERT_EQUAL(poll(&pfd, 1, 60 * 1000), 1);
  CU_ASSERT_EQUAL(altar_transport_consume(cons, 0, &msg, &err), 0);
  CU_ASSERT_FATAL(msg != NULL);
  CU_ASSERT_EQUAL(msg->offset, 0);
  altar_msg_free(msg);
  msg = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(cons, 0, &msg, &err), 0);
  CU_ASSERT_PTR_NULL(msg);
  pfd.revents = 0;
  CU_ASSERT_EQUAL(poll(&pfd, 1, 0), 0); /* the news was taken */
  altar_transport_close(cons);
  altar_transport_close(prod);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_headers_and_null_fields(void) {
  char *dir = altar_test_tmpdir("local-headers");
  altar_transport_t *t = open_local(dir, NULL, NULL);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  altar_header_t hs[] = {{"trace", "abc", 3}, {"empty", NULL, 0}, {"trace", "xyz", 3}};
  altar_produce_rec_t rec = {.topic = "h", .partition = 0, .key = NULL, .value = NULL, .headers = hs, .n_headers = 3};
  CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  altar_tp_t tp = {"h", 0, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, &tp, 1, &err), 0);
  altar_msg_t *m = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(t, 1000, &m, &err), 0);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT(m->key == NULL && m->value == NULL);
  CU_ASSERT_EQUAL(m->n_headers, 3);
  const void *v;
  size_t vl;
  CU_ASSERT_EQUAL(altar_msg_header(m, "trace", &v, &vl), 0);
  CU_ASSERT(vl == 3 && !memcmp(v, "xyz", 3)); /* the last one wins */
  CU_ASSERT_EQUAL(altar_msg_header(m, "empty", &v, &vl), 0);
  CU_ASSERT(v == NULL);
  CU_ASSERT_EQUAL(altar_msg_header(m, "nope", &v, &vl), ALTAR_ENOTFOUND);
  altar_msg_free(m);
  /* Too large a record is refused up front, with no report to follow. */
  size_t big = 17u << 20;
  char *huge = calloc(1, big);
  altar_produce_rec_t r2 = {.topic = "h", .partition = 0, .value = huge, .value_len = big};
  CU_ASSERT_EQUAL(altar_transport_produce(t, &r2, &err), ALTAR_ETOOBIG);
  free(huge);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* Every fsync policy delivers every record and reads back the same. */
static void test_fsync_policies(void) {
  static const char *const policies[] = {"always", "group", "never"};
  for (size_t k = 0; k < 3; k++) {
    char *dir = altar_test_tmpdir("local-fsync");
    altar_transport_t *t = open_local(dir, "fsync", policies[k]);
    CU_ASSERT_FATAL(t != NULL);
    altar_error_t err = {0};
    for (int i = 0; i < 40; i++) {
      char v[16];
      snprintf(v, sizeof v, "%d", i);
      altar_produce_rec_t rec = {.topic = "f", .partition = 0, .value = v, .value_len = strlen(v)};
      CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
    }
    CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
    altar_tp_t tp = {"f", 0, ALTAR_OFFSET_BEGINNING};
    CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, &tp, 1, &err), 0);
    for (int i = 0; i < 40; i++) {
      altar_msg_t *m = NULL;
      CU_ASSERT_EQUAL(altar_transport_consume(t, 1000, &m, &err), 0);
      CU_ASSERT_FATAL(m != NULL);
      char v[16];
      snprintf(v, sizeof v, "%d", i);
      CU_ASSERT(m->offset == i && m->value_len == strlen(v) && !memcmp(m->value, v, m->value_len));
      altar_msg_free(m);
    }
    altar_transport_close(t);
    altar_test_rmtree(dir);
    free(dir);
  }
}

/* retention.ms: segments last written before the window go, whole. */
static void test_retention_by_age(void) {
  char *dir = altar_test_tmpdir("local-retention-age");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "segment.bytes", "4096");
  altar_strmap_set(&m, "retention.ms", "3600000");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "ret", 1, &err), 0);
  char val[500];
  memset(val, 'a', sizeof val);
  for (int i = 0; i < 40; i++) {
    altar_produce_rec_t rec = {.topic = "ret", .partition = 0, .value = val, .value_len = sizeof val};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
    CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  }
  altar_transport_close(t);
  int before = count_segments(dir);
  CU_ASSERT(before >= 4);
  /* Age every segment by two hours, then reopen: opening deletes nothing;
   * the first produce to the partition (no roll) applies retention: all
   * but the active segment go. */
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "touch -d '2 hours ago' %s/topics/ret/0/*.log", dir);
  CU_ASSERT_FATAL(system(cmd) == 0);
  t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(count_segments(dir), before);
  altar_produce_rec_t one = {.topic = "ret", .partition = 0, .value = val, .value_len = sizeof val};
  CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &one, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  CU_ASSERT_EQUAL(count_segments(dir), 1);
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "ret", 0, &l, &err), 0);
  CU_ASSERT_EQUAL(l->topics[0].partitions[0].end, 41);
  CU_ASSERT(l->topics[0].partitions[0].beginning > 0);
  altar_topic_list_free(l);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  root = altar_test_tmpdir("local-conformance");
  altar_strmap_set(&conf_props, "dir", root);
  altar_strmap_set(&conf_props, "rebalance.check.ms", "20");
  static altar_transport_conformance_t conf = {.transport = "local", .timeout_ms = 30000, .wait_fd = true};
  conf.config = &conf_props;
  altar_transport_conformance_add(&conf);
  {
    ALTAR_SUITE("local transport", NULL, NULL);
    ALTAR_TEST(test_murmur2_vectors);
    ALTAR_TEST(test_config_errors);
    ALTAR_TEST(test_defaults_and_required_ops);
    ALTAR_TEST(test_headers_and_null_fields);
    ALTAR_TEST(test_concurrent_producer_processes);
    ALTAR_TEST(test_concurrent_producers_rolling);
    ALTAR_TEST(test_producers_across_partitions);
    ALTAR_TEST(test_takeover_after_kill);
    ALTAR_TEST(test_retention_by_size);
    ALTAR_TEST(test_retention_by_age);
    ALTAR_TEST(test_tail_follows_rolls);
    ALTAR_TEST(test_fsync_policies);
    ALTAR_TEST(test_wait_fd_wakes_on_write);
  }
}

int main(int argc, char **argv) {
  int rc = altar_test_main(argc, argv, add);
  altar_test_rmtree(root);
  free(root);
  altar_strmap_clear(&conf_props);
  return rc;
}
