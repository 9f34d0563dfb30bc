/* kill -9 of producer processes in the middle of appending, in a loop (two
 * at a time on the same partitions): on reopen every record whose delivery
 * report fired is in the log, at the reported offset, in produce order,
 * exactly once. */
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 50
#define PARTS 2
#define WRITERS 2
#define MAX_ACKS 200000

typedef struct ack {
  int32_t round, seq, partition;
  int64_t offset;
} ack_t;

static ack_t *acks;
static size_t n_acks;
static int ack_fd = -1;
static int torn;

static void child_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  int round = *(int *)ctx;
  if (dr->err) return;
  ack_t a = {round, (int32_t)(intptr_t)dr->opaque, dr->partition, dr->offset};
  /* One write per report: the parent trusts only what it read. */
  if (write(ack_fd, &a, sizeof a) != (ssize_t)sizeof a) _exit(4);
}

static altar_transport_t *open_log(const char *dir, altar_transport_opts_t *opts) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "fsync", "group");
  altar_strmap_set(&m, "group.commit.ms", "1");
  altar_strmap_set(&m, "segment.bytes", "262144"); /* roll often */
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, opts, &err);
  if (!t) fprintf(stderr, "open: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

static void quiet_log(altar_transport_t *t, int level, const char *msg, void *ctx) {
  (void)t;
  (void)level;
  (*(int *)ctx)++;
  if (getenv("ALTAR_TEST_VERBOSE")) fprintf(stderr, "log: %s\n", msg);
}

static void run_child(const char *dir, int round, int fd) {
  ack_fd = fd;
  altar_transport_opts_t opts = {.on_delivery = child_delivery, .delivery_ctx = &round};
  altar_transport_t *t = open_log(dir, &opts);
  if (!t) _exit(2);
  static char val[1u << 20];
  srand((unsigned)getpid());
  for (int seq = 0;; seq++) {
    /* Mostly small records, some spanning many pages, so that a kill can
     * land inside one write. */
    int dice = rand() % 80;
    size_t len = dice == 0  ? (256u << 10) + (size_t)(rand() % (768 << 10))
                 : dice < 5 ? 20000 + (size_t)(rand() % 40000)
                            : 16 + (size_t)(rand() % 600);
    int k = snprintf(val, sizeof val, "r%d-s%d|", round, seq);
    memset(val + k, 'a' + seq % 26, len - (size_t)k);
    altar_produce_rec_t rec = {
        .topic = "crash", .partition = seq % PARTS, .value = val, .value_len = len, .opaque = (void *)(intptr_t)seq};
    altar_error_t err = {0};
    while (altar_transport_produce(t, &rec, &err) == ALTAR_EAGAIN) altar_transport_poll(t, 5);
    altar_transport_poll(t, 0);
  }
}

/* Appends the first part of a plausible record to the partition's newest
 * segment. */
static void tear_tail(const char *dir, int partition) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "ls %s/topics/crash/%d | grep '\\.log$' | sort | tail -1", dir, partition);
  FILE *f = popen(cmd, "r");
  char name[64] = "";
  if (f) {
    if (!fgets(name, sizeof name, f)) name[0] = '\0';
    pclose(f);
  }
  name[strcspn(name, "\n")] = '\0';
  CU_ASSERT_FATAL(name[0] != '\0');
  char path[4300];
  snprintf(path, sizeof path, "%s/topics/crash/%d/%s", dir, partition, name);
  FILE *seg = fopen(path, "ab");
  CU_ASSERT_FATAL(seg != NULL);
  unsigned char part[64] = {0, 0, 2, 0, 0x12, 0x34, 0x56, 0x78, 1, 0};
  for (size_t i = 10; i < sizeof part; i++) part[i] = (unsigned char)rand();
  fwrite(part, 1, 1 + (size_t)(rand() % (int)sizeof part), seg);
  fclose(seg);
  torn++;
}

static void test_kill9_producer_loop(void) {
  char *dir = altar_test_tmpdir("local-crash");
  acks = calloc(MAX_ACKS, sizeof *acks);
  CU_ASSERT_FATAL(acks != NULL);
  n_acks = 0;
  int warnings = 0;
  altar_transport_opts_t lopts = {.on_log = quiet_log, .log_ctx = &warnings};
  torn = 0;
  {
    altar_transport_t *t = open_log(dir, &lopts);
    CU_ASSERT_FATAL(t != NULL);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "crash", PARTS, &err), 0);
    altar_transport_close(t);
  }
  srand(12345);
  for (int round = 0; round < ROUNDS; round++) {
    int pfd[2];
    CU_ASSERT_FATAL(pipe(pfd) == 0);
    /* Two producer processes append to the same partitions at once; each
     * report (smaller than PIPE_BUF) reaches the pipe whole. */
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
      pids[w] = fork();
      CU_ASSERT_FATAL(pids[w] >= 0);
      if (pids[w] == 0) {
        close(pfd[0]);
        run_child(dir, round * WRITERS + w, pfd[1]);
        _exit(0);
      }
    }
    close(pfd[1]);
    size_t want = 1 + (size_t)(rand() % 400), got = 0;
    bool killed = false;
    for (;;) {
      ack_t a;
      ssize_t r = read(pfd[0], &a, sizeof a);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      CU_ASSERT_FATAL(r == (ssize_t)sizeof a);
      if (n_acks < MAX_ACKS) acks[n_acks++] = a;
      if (++got >= want && !killed) {
        usleep((useconds_t)(rand() % 3000)); /* land anywhere, often inside a write */
        for (int w = 0; w < WRITERS; w++) kill(pids[w], SIGKILL);
        killed = true;
      }
    }
    close(pfd[0]);
    for (int w = 0; w < WRITERS; w++) {
      int st = 0;
      waitpid(pids[w], &st, 0);
      CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    /* A kill rarely lands inside write(); leave a torn record behind on
     * purpose every third round, as such a kill would. */
    if (round % 3 == 1) tear_tail(dir, round % PARTS);
  }

  /* Reopen (recovery runs) and read everything back. */
  altar_transport_t *t = open_log(dir, &lopts);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "crash", 0, &l, &err), 0);
  int64_t ends[PARTS];
  for (int p = 0; p < PARTS; p++) ends[p] = l->topics[0].partitions[p].end;
  altar_topic_list_free(l);
  /* value prefix per (partition, offset) */
  int32_t *lr[PARTS], *ls[PARTS];
  for (int p = 0; p < PARTS; p++) {
    lr[p] = calloc((size_t)ends[p] + 1, sizeof *lr[p]);
    ls[p] = calloc((size_t)ends[p] + 1, sizeof *ls[p]);
    CU_ASSERT_FATAL(lr[p] && ls[p]);
  }
  altar_tp_t tps[PARTS];
  for (int p = 0; p < PARTS; p++) tps[p] = (altar_tp_t){"crash", p, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, tps, PARTS, &err), 0);
  int64_t seen = 0;
  int64_t next[PARTS] = {0};
  for (;;) {
    altar_msg_t *m = NULL;
    int rc = altar_transport_consume(t, 100, &m, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (!m) break;
    int p = m->partition;
    CU_ASSERT_FATAL(p >= 0 && p < PARTS);
    CU_ASSERT_EQUAL(m->offset, next[p]); /* dense, in order */
    next[p] = m->offset + 1;
    int r = -1, s = -1;
    char head[40];
    snprintf(head, sizeof head, "%.*s", (int)(m->value_len < 39 ? m->value_len : 39), (const char *)m->value);
    CU_ASSERT(sscanf(head, "r%d-s%d|", &r, &s) == 2);
    /* The body after the prefix is intact. */
    const char *bar = memchr(m->value, '|', m->value_len);
    CU_ASSERT_FATAL(bar != NULL);
    for (const char *c = bar + 1; c < (const char *)m->value + m->value_len; c++)
      if (*c != 'a' + s % 26) {
        CU_FAIL("record body damaged");
        break;
      }
    if (m->offset < ends[p]) {
      lr[p][m->offset] = r + 1;
      ls[p][m->offset] = s;
    }
    seen++;
    altar_msg_free(m);
  }
  for (int p = 0; p < PARTS; p++) CU_ASSERT_EQUAL(next[p], ends[p]);
  /* Every acknowledged record is where its report said. */
  size_t missing = 0;
  for (size_t i = 0; i < n_acks; i++) {
    ack_t *a = &acks[i];
    if (a->offset >= ends[a->partition] || lr[a->partition][a->offset] != a->round + 1 ||
        ls[a->partition][a->offset] != a->seq)
      missing++;
  }
  CU_ASSERT_EQUAL(missing, 0);
  /* Once and in order: within a partition, each writer's seq strictly rises. */
  for (int p = 0; p < PARTS; p++) {
    int32_t last[ROUNDS * WRITERS];
    for (int k = 0; k < ROUNDS * WRITERS; k++) last[k] = -1;
    for (int64_t o = 0; o < ends[p]; o++) {
      int tag = lr[p][o] - 1;
      CU_ASSERT_FATAL(tag >= 0 && tag < ROUNDS * WRITERS);
      if (ls[p][o] <= last[tag]) {
        CU_FAIL("records out of order or duplicated");
        break;
      }
      last[tag] = ls[p][o];
    }
  }
  fprintf(stderr, "\n  %d rounds: %zu acknowledged, %lld in the log, %d torn tails left\n", ROUNDS, n_acks,
          (long long)seen, torn);
  CU_ASSERT(n_acks >= ROUNDS);
  /* The log accepts appends after all that. */
  altar_produce_rec_t rec = {.topic = "crash", .partition = 0, .value = "after", .value_len = 5};
  CU_ASSERT_EQUAL(altar_transport_produce(t, &rec, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  for (int p = 0; p < PARTS; p++) {
    free(lr[p]);
    free(ls[p]);
  }
  altar_transport_close(t);
  free(acks);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local log: kill -9 of producers", NULL, NULL);
  ALTAR_TEST(test_kill9_producer_loop);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
