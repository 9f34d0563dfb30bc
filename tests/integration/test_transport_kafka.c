/* The kafka transport against a real Apache Kafka broker (KRaft, started by
 * scripts/services/kafka.sh; address in ALTAR_KAFKA_BROKERS). A missing or
 * unreachable broker fails every test here: it is never a skip. */
#include "altar/plugin/transport_kafka.h"
#include "testutil.h"
#include "transport_conformance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char brokers[256];
static bool broker_ok;
static char broker_why[ALTAR_ERRMSG_MAX];

static const char *broker_list(void) {
  const char *b = getenv("ALTAR_KAFKA_BROKERS");
  return b && *b ? b : "127.0.0.1:19092";
}

static void unique(char *buf, size_t cap, const char *tag) {
  static unsigned seq;
  snprintf(buf, cap, "altar-it-%s-%ld-%ld-%u", tag, (long)getpid(), (long)time(NULL), ++seq);
}

/* ---- delivery and rebalance capture ---------------------------------------- */

typedef struct dr_cap {
  int ok, failed;
  int64_t offsets[512];
  int32_t partitions[512];
  void *opaques[512];
  char last_err[ALTAR_ERRMSG_MAX];
} dr_cap_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  dr_cap_t *c = ctx;
  int i = c->ok + c->failed;
  if (i < 512) {
    c->offsets[i] = dr->offset;
    c->partitions[i] = dr->partition;
    c->opaques[i] = dr->opaque;
  }
  if (dr->err) {
    c->failed++;
    snprintf(c->last_err, sizeof c->last_err, "%s", dr->errstr ? dr->errstr : "");
  } else {
    c->ok++;
  }
}

/* ALTAR_KAFKA_DEBUG=cgrp,consumer (librdkafka debug contexts) prints them. */
static void print_log(altar_transport_t *t, int level, const char *msg, void *ctx) {
  (void)t;
  (void)ctx;
  fprintf(stderr, "[kafka %d] %s\n", level, msg);
}

static altar_transport_t *open_kafka(dr_cap_t *cap, altar_error_t *err) {
  altar_strmap_t m = {0};
  const char *dbg = getenv("ALTAR_KAFKA_DEBUG");
  if (dbg && *dbg) altar_strmap_set(&m, "debug", dbg);
  altar_strmap_set(&m, "bootstrap.servers", brokers);
  altar_strmap_set(&m, "altar.timeout.ms", "20000");
  altar_strmap_set(&m, "session.timeout.ms", "6000");
  altar_strmap_set(&m, "heartbeat.interval.ms", "500");
  altar_transport_opts_t opts = {.on_delivery = on_delivery, .delivery_ctx = cap};
  if (dbg && *dbg) opts.on_log = print_log;
  altar_transport_t *t = altar_transport_open("kafka", &m, &opts, err);
  altar_strmap_clear(&m);
  return t;
}

static int suite_init(void) {
  static bool probed;
  if (probed) return 0;
  probed = true;
  snprintf(brokers, sizeof brokers, "%s", broker_list());
  altar_transport_register(&altar_transport_kafka_ops);
  altar_error_t err = {0};
  dr_cap_t cap = {0};
  altar_transport_t *t = open_kafka(&cap, &err);
  if (!t) {
    snprintf(broker_why, sizeof broker_why, "cannot open the kafka transport: %s", err.msg);
    return 0;
  }
  altar_topic_list_t *l = NULL;
  if (altar_transport_list_topics(t, NULL, 15000, &l, &err) == 0) {
    broker_ok = true;
  } else {
    snprintf(broker_why, sizeof broker_why,
             "no Kafka broker answers at %s (ALTAR_KAFKA_BROKERS); start one with "
             "scripts/services/kafka.sh start: %s",
             brokers, err.msg);
    fprintf(stderr, "FAIL: %s\n", broker_why);
  }
  altar_topic_list_free(l);
  altar_transport_close(t);
  return 0;
}

#define NEED_BROKER()                                                                                                  \
  do {                                                                                                                 \
    if (!broker_ok) {                                                                                                  \
      fprintf(stderr, "\n  %s\n", broker_why);                                                                         \
      CU_FAIL_FATAL("Kafka broker unreachable (see message above)");                                                   \
    }                                                                                                                  \
  } while (0)

static void test_broker_reachable(void) { NEED_BROKER(); }

/* ---- kafka-specific checks --------------------------------------------------- */

/* Keys land where altar_partition_for_key says (murmur2, as Java clients and
 * the local transport); every record gets one report with its opaque; the
 * records read back carry key, value and headers, in offset order. */
static void test_keys_headers_reports(void) {
  NEED_BROKER();
  altar_error_t err = {0};
  dr_cap_t cap = {0};
  altar_transport_t *t = open_kafka(&cap, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  char topic[128];
  unique(topic, sizeof topic, "keys");
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, topic, 4, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, topic, 4, &err), ALTAR_EEXIST);
  enum { N = 40 };
  static int ids[N];
  for (int i = 0; i < N; i++) {
    char key[32], val[32];
    snprintf(key, sizeof key, "task-%d", i);
    snprintf(val, sizeof val, "value-%d", i);
    ids[i] = i;
    altar_header_t h[2] = {{"kind", "score", 5}, {"empty", NULL, 0}};
    altar_produce_rec_t rec = {.topic = topic,
                               .partition = ALTAR_PARTITION_ANY,
                               .key = key,
                               .key_len = strlen(key),
                               .value = val,
                               .value_len = strlen(val),
                               .headers = h,
                               .n_headers = 2,
                               .opaque = &ids[i]};
    CU_ASSERT_EQUAL(altar_transport_produce(t, &rec, &err), 0);
  }
  CU_ASSERT_EQUAL_FATAL(altar_transport_flush(t, 30000, &err), 0);
  CU_ASSERT_EQUAL(cap.ok, N);
  CU_ASSERT_EQUAL(cap.failed, 0);
  for (int i = 0; i < N && i < cap.ok; i++) {
    int id = *(int *)cap.opaques[i];
    char key[32];
    snprintf(key, sizeof key, "task-%d", id);
    CU_ASSERT_EQUAL(cap.partitions[i], altar_partition_for_key(key, strlen(key), 4));
    CU_ASSERT(cap.offsets[i] >= 0);
  }
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, topic, 10000, &l, &err), 0);
  CU_ASSERT_EQUAL_FATAL(l->n_topics, 1);
  CU_ASSERT_EQUAL(l->topics[0].n_partitions, 4);
  int64_t total = 0;
  for (size_t p = 0; p < l->topics[0].n_partitions; p++) {
    CU_ASSERT_EQUAL(l->topics[0].partitions[p].partition, (int32_t)p);
    total += l->topics[0].partitions[p].end - l->topics[0].partitions[p].beginning;
  }
  CU_ASSERT_EQUAL(total, N);
  altar_topic_list_free(l);
  /* Read everything back without a group. */
  altar_tp_t parts[4];
  for (int p = 0; p < 4; p++) parts[p] = (altar_tp_t){topic, p, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, parts, 4, &err), 0);
  int seen = 0;
  int64_t last[4] = {-1, -1, -1, -1};
  for (int tries = 0; seen < N && tries < 200; tries++) {
    altar_msg_t *m = NULL;
    int rc = altar_transport_consume(t, 200, &m, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (!m) continue;
    CU_ASSERT_STRING_EQUAL(m->topic, topic);
    CU_ASSERT(m->offset > last[m->partition]);
    last[m->partition] = m->offset;
    CU_ASSERT_EQUAL(m->partition, altar_partition_for_key(m->key, m->key_len, 4));
    CU_ASSERT(m->key_len > 5 && memcmp(m->key, "task-", 5) == 0);
    CU_ASSERT(m->value_len > 6 && memcmp(m->value, "value-", 6) == 0);
    const void *hv = NULL;
    size_t hl = 0;
    CU_ASSERT_EQUAL(altar_msg_header(m, "kind", &hv, &hl), 0);
    CU_ASSERT(hl == 5 && memcmp(hv, "score", 5) == 0);
    CU_ASSERT_EQUAL(altar_msg_header(m, "empty", &hv, &hl), 0);
    CU_ASSERT_EQUAL(hl, 0);
    CU_ASSERT_EQUAL(altar_msg_header(m, "nope", &hv, &hl), ALTAR_ENOTFOUND);
    CU_ASSERT(m->timestamp_ms > 0);
    altar_msg_free(m);
    seen++;
  }
  CU_ASSERT_EQUAL(seen, N);
  bool done = false;
  CU_ASSERT_EQUAL(altar_transport_caught_up(t, &done, &err), 0);
  CU_ASSERT(done);
  altar_transport_close(t);
}

static void test_topic_errors(void) {
  NEED_BROKER();
  altar_error_t err = {0};
  dr_cap_t cap = {0};
  altar_transport_t *t = open_kafka(&cap, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  char topic[128];
  unique(topic, sizeof topic, "missing");
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL(altar_transport_list_topics(t, topic, 5000, &l, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, topic));
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, "bad topic!", 1, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, topic, 0, &err), ALTAR_EINVAL);
  /* Committed offsets of a group that never committed: none, not an error. */
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, topic, 1, &err), 0);
  int64_t off = 0;
  char *md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(t, "altar-it-nobody", topic, 0, 10000, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, ALTAR_OFFSET_INVALID);
  CU_ASSERT_PTR_NULL(md);
  /* Commit without a group is a state error. */
  CU_ASSERT_EQUAL(altar_transport_commit(t, topic, 0, 1, NULL, &err), ALTAR_ESTATE);
  altar_transport_close(t);
}

/* A record over a topic's max.message.bytes is refused by the broker in its
 * delivery report, which names the settings that bound it; a smaller record
 * on the same handle still goes through. */
static void test_size_refusal_names_setting(void) {
  NEED_BROKER();
  altar_error_t err = {0};
  dr_cap_t cap = {0};
  altar_transport_t *t = open_kafka(&cap, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  char topic[128];
  unique(topic, sizeof topic, "small");
  altar_strmap_t conf = {0};
  CU_ASSERT_EQUAL_FATAL(altar_strmap_set(&conf, "max.message.bytes", "100000"), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic_config(t, topic, 1, &conf, &err), 0);
  altar_strmap_clear(&conf);
  enum { BIG = 200000 };
  char *value = malloc(BIG);
  CU_ASSERT_PTR_NOT_NULL_FATAL(value);
  memset(value, 'v', BIG);
  altar_produce_rec_t rec = {.topic = topic, .partition = 0, .value = value, .value_len = BIG};
  CU_ASSERT_EQUAL(altar_transport_produce(t, &rec, &err), 0);
  altar_transport_flush(t, 30000, &err);
  if (cap.failed != 1) fprintf(stderr, "size refusal: %d failed, %d ok: %s\n", cap.failed, cap.ok, cap.last_err);
  CU_ASSERT_EQUAL(cap.failed, 1);
  CU_ASSERT_EQUAL(cap.ok, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(cap.last_err, "max.message.bytes"));
  CU_ASSERT_PTR_NOT_NULL(strstr(cap.last_err, topic));
  rec.value_len = 1000;
  CU_ASSERT_EQUAL(altar_transport_produce(t, &rec, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 30000, &err), 0);
  CU_ASSERT_EQUAL(cap.ok, 1);
  free(value);
  altar_transport_close(t);
}

/* ---- group: commit metadata, lag, cooperative rebalance ---------------------- */

typedef struct rb_cap {
  int assigned, revoked; /* partitions currently owned per the callbacks */
  int assign_calls, revoke_calls;
  int revoked_total;
} rb_cap_t;

static void on_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  (void)t;
  (void)parts;
  rb_cap_t *c = ctx;
  if (kind == ALTAR_REBALANCE_ASSIGN) {
    c->assign_calls++;
    c->assigned += (int)n;
  } else {
    c->revoke_calls++;
    c->assigned -= (int)n;
    c->revoked_total += (int)n;
  }
}

static int owned(altar_transport_t *t) {
  altar_tp_t *p = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  if (altar_transport_assignment(t, &p, &n, &err)) return -1;
  free(p);
  return (int)n;
}

static void test_group_commit_lag_rebalance(void) {
  NEED_BROKER();
  altar_error_t err = {0};
  dr_cap_t cap = {0};
  altar_transport_t *a = open_kafka(&cap, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  char topic[128], group[128];
  unique(topic, sizeof topic, "grp");
  unique(group, sizeof group, "g");
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(a, topic, 4, &err), 0);
  for (int i = 0; i < 20; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    altar_produce_rec_t rec = {.topic = topic, .partition = i % 4, .value = v, .value_len = strlen(v)};
    CU_ASSERT_EQUAL(altar_transport_produce(a, &rec, &err), 0);
  }
  CU_ASSERT_EQUAL_FATAL(altar_transport_flush(a, 30000, &err), 0);
  rb_cap_t ra = {0}, rb = {0};
  const char *topics[] = {topic};
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(a, group, topics, 1, on_rebalance, &ra, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_subscribe(a, group, topics, 1, on_rebalance, &ra, &err), ALTAR_ESTATE);
  int got = 0;
  for (int i = 0; i < 300 && got < 20; i++) {
    altar_msg_t *m = NULL;
    altar_transport_consume(a, 100, &m, &err);
    if (m) {
      got++;
      altar_msg_free(m);
    }
  }
  CU_ASSERT_EQUAL(got, 20);
  CU_ASSERT_EQUAL(ra.assigned, 4);
  /* Commit with metadata, read it back through any handle. */
  char meta[ALTAR_COMMIT_METADATA_MAX + 1];
  memset(meta, 'm', ALTAR_COMMIT_METADATA_MAX);
  meta[ALTAR_COMMIT_METADATA_MAX] = '\0';
  CU_ASSERT_EQUAL(altar_transport_commit(a, topic, 0, 5, "done:0-4;above:[]", &err), 0);
  CU_ASSERT_EQUAL(altar_transport_commit(a, topic, 1, 3, meta, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_commit(a, topic, 2, 1, NULL, &err), 0);
  char toolong[ALTAR_COMMIT_METADATA_MAX + 2];
  memset(toolong, 'x', sizeof toolong - 1);
  toolong[sizeof toolong - 1] = '\0';
  CU_ASSERT_EQUAL(altar_transport_commit(a, topic, 3, 1, toolong, &err), ALTAR_ETOOBIG);
  CU_ASSERT_EQUAL(altar_transport_commit(a, topic, 9, 1, NULL, &err), ALTAR_ESTATE);
  int64_t off = 0;
  char *md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(a, group, topic, 0, 10000, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 5);
  CU_ASSERT_STRING_EQUAL(md ? md : "(null)", "done:0-4;above:[]");
  free(md);
  md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(a, group, topic, 1, 10000, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 3);
  CU_ASSERT(md && strcmp(md, meta) == 0);
  free(md);
  md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(a, group, topic, 3, 10000, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, ALTAR_OFFSET_INVALID);
  free(md);
  altar_lag_list_t *lag = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_lag(a, group, topic, 10000, &lag, &err), 0);
  CU_ASSERT_EQUAL_FATAL(lag->n, 4);
  CU_ASSERT_EQUAL(lag->entries[0].end, 5);
  CU_ASSERT_EQUAL(lag->entries[0].lag, 0);
  CU_ASSERT_EQUAL(lag->entries[1].lag, 2);
  CU_ASSERT_EQUAL(lag->entries[2].lag, 4);
  CU_ASSERT_EQUAL(lag->entries[3].lag, 5);
  CU_ASSERT_EQUAL(lag->entries[3].committed, ALTAR_OFFSET_INVALID);
  altar_lag_list_free(lag);

  /* A second member joins: cooperative-sticky moves only some partitions,
   * and the first member keeps the rest without a full revoke. */
  dr_cap_t cap2 = {0};
  altar_transport_t *b = open_kafka(&cap2, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(b, group, topics, 1, on_rebalance, &rb, &err), 0);
  for (int i = 0; i < 400 && !(ra.assigned == 2 && rb.assigned == 2); i++) {
    altar_msg_t *m = NULL;
    altar_transport_consume(a, 50, &m, &err);
    altar_msg_free(m);
    m = NULL;
    altar_transport_consume(b, 50, &m, &err);
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL(ra.assigned, 2);
  CU_ASSERT_EQUAL(rb.assigned, 2);
  CU_ASSERT_EQUAL(ra.revoked_total, 2); /* incremental: only what moved */
  CU_ASSERT_EQUAL(owned(a), 2);
  CU_ASSERT_EQUAL(owned(b), 2);
  /* b resumes from a's commits: partition 0 at 5 → nothing; 1 at 3 → 2 records... */
  /* When a leaves, b takes everything back. */
  altar_transport_close(a);
  CU_ASSERT_EQUAL(ra.assigned, 0);
  for (int i = 0; i < 400 && rb.assigned != 4; i++) {
    altar_msg_t *m = NULL;
    altar_transport_consume(b, 50, &m, &err);
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL(rb.assigned, 4);
  altar_transport_close(b);
}

/* ---- broker restart ----------------------------------------------------------- */

/* A private broker (not the shared one other tests use) on its own port and
 * directory, driven by the same script; ALTAR_KAFKA_RESTART_PORT moves it
 * (machines that run several brokers at once). */
static const char *restart_port(void) {
  const char *p = getenv("ALTAR_KAFKA_RESTART_PORT");
  return p && *p ? p : "19192";
}
#define RESTART_PORT restart_port()

static pid_t script_async(const char *dir, const char *verb) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "ALTAR_KAFKA_PORT=%s ALTAR_KAFKA_DIR='%s' '%s/scripts/services/kafka.sh' %s", RESTART_PORT,
           dir, altar_test_source_dir(), verb);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int script_wait(pid_t pid) {
  int st = 0;
  if (pid < 0) return -1;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

enum { RESTART_MAX = 2000 };
static int restart_ids[RESTART_MAX];
static int restart_acked[RESTART_MAX];

typedef struct restart_cap {
  int ok, failed;
  char last_err[ALTAR_ERRMSG_MAX];
} restart_cap_t;

static void on_restart_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  restart_cap_t *c = ctx;
  if (dr->err) {
    c->failed++;
    snprintf(c->last_err, sizeof c->last_err, "%s", dr->errstr ? dr->errstr : "");
    return;
  }
  c->ok++;
  restart_acked[*(int *)dr->opaque]++;
}

static void produce_ids(altar_transport_t *t, const char *topic, int from, int to) {
  altar_error_t err = {0};
  for (int i = from; i < to; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    restart_ids[i] = i;
    altar_produce_rec_t rec = {.topic = topic,
                               .partition = ALTAR_PARTITION_ANY,
                               .key = v,
                               .key_len = strlen(v),
                               .value = v,
                               .value_len = strlen(v),
                               .opaque = &restart_ids[i]};
    int rc;
    while ((rc = altar_transport_produce(t, &rec, &err)) == ALTAR_EAGAIN) altar_transport_poll(t, 10);
    CU_ASSERT_EQUAL(rc, 0);
    altar_transport_poll(t, 0);
  }
}

/* The broker is stopped (SIGTERM) and started again while records are in
 * flight: every record whose delivery was acknowledged, before, during or
 * after the restart, is in the log exactly once. */
/* Runs with the private broker up; no FATAL asserts, so the caller always
 * gets to stop it. */
static void restart_body(const char *dir) {
  char bs[64];
  snprintf(bs, sizeof bs, "127.0.0.1:%s", RESTART_PORT);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", bs);
  altar_strmap_set(&m, "message.timeout.ms", "120000");
  altar_strmap_set(&m, "reconnect.backoff.max.ms", "500");
  altar_strmap_set(&m, "altar.timeout.ms", "30000");
  restart_cap_t cap = {0};
  memset(restart_acked, 0, sizeof restart_acked);
  altar_transport_opts_t opts = {.on_delivery = on_restart_delivery, .delivery_ctx = &cap};
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("kafka", &m, &opts, &err);
  const char *topic = "restart.test";
  if (!t || altar_transport_create_topic(t, topic, 3, &err) != 0) {
    fprintf(stderr, "restart: %s\n", err.msg);
    CU_FAIL("restart: cannot open the transport or create the topic on the private broker");
    altar_transport_close(t);
    altar_strmap_clear(&m);
    return;
  }
  produce_ids(t, topic, 0, 200);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 30000, &err), 0);
  CU_ASSERT_EQUAL(cap.ok, 200);
  /* Keep producing, one record every 20 ms, while the broker goes down and
   * comes back. */
  pid_t restart = script_async(dir, "restart");
  int next = 200, st = 0;
  while (next < RESTART_MAX - 100 && waitpid(restart, &st, WNOHANG) == 0) {
    produce_ids(t, topic, next, next + 1);
    next++;
    altar_transport_poll(t, 20);
  }
  if (next >= RESTART_MAX - 100) {
    CU_ASSERT_EQUAL(script_wait(restart), 0);
  } else {
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  produce_ids(t, topic, next, next + 100);
  int total = next + 100;
  CU_ASSERT_EQUAL(altar_transport_flush(t, 120000, &err), 0);
  CU_ASSERT_EQUAL(cap.ok + cap.failed, total);
  if (cap.failed) fprintf(stderr, "restart: %d records failed, e.g. %s\n", cap.failed, cap.last_err);
  CU_ASSERT(cap.ok >= 200);
  altar_transport_close(t);

  /* Read it all back: each acknowledged record once, nothing twice. */
  restart_cap_t cap2 = {0};
  opts.delivery_ctx = &cap2;
  t = altar_transport_open("kafka", &m, &opts, &err);
  altar_tp_t parts[3];
  for (int p = 0; p < 3; p++) parts[p] = (altar_tp_t){topic, p, ALTAR_OFFSET_BEGINNING};
  if (!t || altar_transport_assign(t, parts, 3, &err) != 0) {
    CU_FAIL("restart: cannot read the topic back");
    altar_transport_close(t);
    altar_strmap_clear(&m);
    return;
  }
  static int seen[RESTART_MAX];
  memset(seen, 0, sizeof seen);
  bool done = false;
  for (int i = 0; i < 4000 && !done; i++) {
    altar_msg_t *msg = NULL;
    altar_transport_consume(t, 100, &msg, &err);
    if (!msg) {
      altar_transport_caught_up(t, &done, &err);
      continue;
    }
    char v[16] = {0};
    memcpy(v, msg->value, msg->value_len < 15 ? msg->value_len : 15);
    long id = strtol(v, NULL, 10);
    if (id >= 0 && id < RESTART_MAX) seen[id]++;
    altar_msg_free(msg);
  }
  CU_ASSERT(done);
  int lost = 0, twice = 0;
  for (int i = 0; i < RESTART_MAX; i++) {
    if (restart_acked[i] && seen[i] == 0) lost++;
    if (seen[i] > 1 || restart_acked[i] > 1) twice++;
  }
  CU_ASSERT_EQUAL(lost, 0);
  CU_ASSERT_EQUAL(twice, 0);
  fprintf(stderr, "(restart: %d produced, %d during the restart, %d acknowledged, %d failed, %d lost, %d duplicated) ",
          total, next - 200, cap.ok, cap.failed, lost, twice);
  altar_transport_close(t);
  altar_strmap_clear(&m);
}

static void test_broker_restart_keeps_acked(void) {
  NEED_BROKER(); /* the shared broker's presence says java and the jars are here */
  char *dir = altar_test_tmpdir("kafka-restart");
  int rc = script_wait(script_async(dir, "start"));
  CU_ASSERT_EQUAL(rc, 0);
  if (rc == 0) restart_body(dir);
  CU_ASSERT_EQUAL(script_wait(script_async(dir, "clean")), 0);
  altar_test_rmtree(dir);
  free(dir);
}

static altar_strmap_t conformance_props, leave_props;

static void add_kafka_suite(void) {
  ALTAR_SUITE("transport_kafka", suite_init, NULL);
  ALTAR_TEST(test_broker_reachable);
  ALTAR_TEST(test_keys_headers_reports);
  ALTAR_TEST(test_topic_errors);
  ALTAR_TEST(test_size_refusal_names_setting);
  ALTAR_TEST(test_group_commit_lag_rebalance);
  ALTAR_TEST(test_broker_restart_keeps_acked);
}

static void add(void) {
  /* First the kafka-specific suite, whose first test says plainly when no
   * broker answers; then the shared suite, same tests as the local
   * transport, on the real broker. */
  add_kafka_suite();
  snprintf(brokers, sizeof brokers, "%s", broker_list());
  altar_transport_register(&altar_transport_kafka_ops);
  altar_strmap_set(&conformance_props, "bootstrap.servers", brokers);
  altar_strmap_set(&conformance_props, "auto.offset.reset", "earliest");
  altar_strmap_set(&conformance_props, "session.timeout.ms", "6000");
  altar_strmap_set(&conformance_props, "heartbeat.interval.ms", "500");
  /* Without a broker every shared test fails anyway: fail them fast. */
  suite_init();
  altar_strmap_set(&conformance_props, "altar.timeout.ms", broker_ok ? "20000" : "2000");
  altar_strmap_set(&conformance_props, "altar.close.timeout.ms", "5000");
  /* A session far longer than the leave test's bound: only a LeaveGroup
   * can hand the partitions over in time. */
  altar_strmap_set(&leave_props, "session.timeout.ms", "45000");
  altar_strmap_set(&leave_props, "heartbeat.interval.ms", "1000");
  static altar_transport_conformance_t conf;
  conf = (altar_transport_conformance_t){
      .suite_name = "transport conformance: kafka (real broker)",
      .transport = "kafka",
      .config = &conformance_props,
      .timeout_ms = broker_ok ? 60000 : 3000,
      .topic_prefix = "altar-conf-kafka",
      .leave_overrides = &leave_props,
      .leave_within_ms = 30000,
      .wait_fd = true,
  };
  altar_transport_conformance_add(&conf);
}

int main(int argc, char **argv) {
  int rc = altar_test_main(argc, argv, add);
  altar_strmap_clear(&conformance_props);
  altar_strmap_clear(&leave_props);
  return rc;
}
