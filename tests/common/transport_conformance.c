/* The transport conformance suite (see transport_conformance.h). */
#include "transport_conformance.h"

#include "testutil.h"

#include "altar/spec.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const altar_transport_conformance_t *conf;

#define DR_MAX 2048
#define TP_MAX 64

static int wait_ms(void) { return conf->timeout_ms > 0 ? conf->timeout_ms : 30000; }

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void unique(char *out, size_t n, const char *what) {
  static unsigned counter;
  snprintf(out, n, "%s-%s-%ld-%lld-%u", conf->topic_prefix ? conf->topic_prefix : "altar-conf", what, (long)getpid(),
           (long long)(time(NULL) % 100000), ++counter);
}

/* ---- delivery reports --------------------------------------------------- */

typedef struct drs {
  size_t n, n_ok, n_err;
  int32_t part[DR_MAX];
  int64_t off[DR_MAX];
  void *opaque[DR_MAX];
  char last_err[256];
} drs_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  drs_t *d = ctx;
  if (dr->err) {
    d->n_err++;
    snprintf(d->last_err, sizeof d->last_err, "%s", dr->errstr ? dr->errstr : "?");
  } else {
    d->n_ok++;
  }
  if (d->n < DR_MAX) {
    d->part[d->n] = dr->partition;
    d->off[d->n] = dr->offset;
    d->opaque[d->n] = dr->opaque;
  }
  d->n++;
}

static altar_transport_t *open_transport_with(drs_t *d, const altar_strmap_t *overrides) {
  altar_transport_opts_t opts = {0};
  if (d) {
    memset(d, 0, sizeof *d);
    opts.on_delivery = on_delivery;
    opts.delivery_ctx = d;
  }
  altar_strmap_t *made = conf->make_config ? conf->make_config(conf->make_config_ctx) : NULL;
  if (overrides) {
    if (!made) made = altar_strmap_dup(conf->config);
    if (!made) made = altar_strmap_new();
    for (size_t i = 0; made && i < overrides->n; i++) altar_strmap_set(made, overrides->keys[i], overrides->vals[i]);
  }
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open(conf->transport, made ? made : conf->config, &opts, &err);
  altar_strmap_free(made);
  if (!t) fprintf(stderr, "conformance: cannot open transport %s: %s\n", conf->transport, err.msg);
  return t;
}

static altar_transport_t *open_transport(drs_t *d) { return open_transport_with(d, NULL); }

static void create_topic(altar_transport_t *t, const char *topic, int32_t parts) {
  altar_error_t err = {0};
  int rc = altar_transport_create_topic(t, topic, parts, &err);
  if (rc) fprintf(stderr, "conformance: create_topic %s: %s\n", topic, err.msg);
  CU_ASSERT_FATAL(rc == 0);
}

static int produce(altar_transport_t *t, const char *topic, int32_t partition, const char *key, const char *value,
                   void *opaque) {
  altar_produce_rec_t rec = {.topic = topic,
                             .partition = partition,
                             .key = key,
                             .key_len = key ? strlen(key) : 0,
                             .value = value,
                             .value_len = value ? strlen(value) : 0,
                             .opaque = opaque};
  altar_error_t err = {0};
  int rc;
  while ((rc = altar_transport_produce(t, &rec, &err)) == ALTAR_EAGAIN) altar_transport_poll(t, 100);
  if (rc) fprintf(stderr, "conformance: produce to %s: %s\n", topic, err.msg);
  return rc;
}

static void flush_all(altar_transport_t *t) {
  altar_error_t err = {0};
  int rc = altar_transport_flush(t, wait_ms(), &err);
  if (rc) fprintf(stderr, "conformance: flush: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
}

/* ---- assignments --------------------------------------------------------- */

typedef struct asg {
  const char *topic;
  int32_t parts[TP_MAX];
  size_t n;
  int assigns, revokes;
  bool pause_p0;         /* pause partition 0 as soon as it is assigned */
  bool commit_on_revoke; /* commit offset 1 of every revoked partition */
  int revoke_commits_ok, revoke_commits_failed;
  int64_t seek_on_assign; /* > 0: seek each assigned partition there in the callback */
  int seeks_ok, seeks_failed;
} asg_t;

static bool asg_has(const asg_t *a, int32_t p) {
  for (size_t i = 0; i < a->n; i++)
    if (a->parts[i] == p) return true;
  return false;
}

static void on_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  asg_t *a = ctx;
  if (kind == ALTAR_REBALANCE_ASSIGN) a->assigns++;
  else a->revokes++;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(parts[i].topic, a->topic) != 0) continue;
    if (kind == ALTAR_REBALANCE_ASSIGN) {
      if (!asg_has(a, parts[i].partition) && a->n < TP_MAX) a->parts[a->n++] = parts[i].partition;
      if (a->seek_on_assign > 0) {
        altar_error_t err = {0};
        if (altar_transport_seek(t, parts[i].topic, parts[i].partition, a->seek_on_assign, &err) == 0) {
          a->seeks_ok++;
        } else {
          fprintf(stderr, "conformance: seek in the assign callback: %s\n", err.msg);
          a->seeks_failed++;
        }
      }
      if (a->pause_p0 && parts[i].partition == 0) {
        altar_tp_t tp = {parts[i].topic, 0, ALTAR_OFFSET_INVALID};
        altar_error_t err = {0};
        CU_ASSERT(altar_transport_pause(t, &tp, 1, &err) == 0);
      }
    } else {
      if (a->commit_on_revoke) {
        altar_error_t err = {0};
        if (altar_transport_commit(t, parts[i].topic, parts[i].partition, 1, "revoked", &err) == 0)
          a->revoke_commits_ok++;
        else a->revoke_commits_failed++;
      }
      for (size_t j = 0; j < a->n; j++)
        if (a->parts[j] == parts[i].partition) a->parts[j--] = a->parts[--a->n];
    }
  }
}

static void subscribe(altar_transport_t *t, const char *group, const char *topic, asg_t *a) {
  const char *topics[] = {topic};
  altar_error_t err = {0};
  int rc = altar_transport_subscribe(t, group, topics, 1, on_rebalance, a, &err);
  if (rc) fprintf(stderr, "conformance: subscribe: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
}

/* The next record, waiting up to the suite's bound; NULL when none came. */
static altar_msg_t *next_msg(altar_transport_t *t, int within_ms) {
  int64_t deadline = mono_ms() + within_ms;
  while (mono_ms() < deadline) {
    altar_msg_t *m = NULL;
    altar_error_t err = {0};
    int rc = altar_transport_consume(t, 200, &m, &err);
    if (rc) {
      fprintf(stderr, "conformance: consume: %s\n", err.msg);
      CU_FAIL("consume returned an error");
    }
    if (m) return m;
  }
  return NULL;
}

static bool value_is(const altar_msg_t *m, const char *s) {
  return m->value && m->value_len == strlen(s) && !memcmp(m->value, s, m->value_len);
}

/* ---- tests --------------------------------------------------------------- */

static void test_delivery_report_per_record(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200];
  unique(topic, sizeof topic, "dr");
  create_topic(t, topic, 3);
  enum { N = 300 };
  static int tags[N];
  for (int i = 0; i < N; i++) {
    char key[32], val[32];
    snprintf(key, sizeof key, "key-%d", i % 17);
    snprintf(val, sizeof val, "value-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, ALTAR_PARTITION_ANY, i % 5 ? key : NULL, val, &tags[i]) == 0);
    if (i % 50 == 0) altar_transport_poll(t, 0);
  }
  flush_all(t);
  CU_ASSERT_EQUAL(d->n, N);
  CU_ASSERT_EQUAL(d->n_ok, N);
  CU_ASSERT_EQUAL(d->n_err, 0);
  /* Every opaque came back exactly once; offsets are unique per partition. */
  static int seen[N];
  memset(seen, 0, sizeof seen);
  for (size_t i = 0; i < d->n && i < DR_MAX; i++) {
    int idx = (int)((int *)d->opaque[i] - tags);
    CU_ASSERT_FATAL(idx >= 0 && idx < N);
    seen[idx]++;
    CU_ASSERT(d->part[i] >= 0 && d->part[i] < 3);
    CU_ASSERT(d->off[i] >= 0);
    for (size_t j = 0; j < i; j++)
      if (d->part[j] == d->part[i]) CU_ASSERT(d->off[j] != d->off[i]);
  }
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(seen[i], 1);
  altar_transport_close(t);
  free(d);
}

static void test_order_within_partition(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "order");
  unique(group, sizeof group, "order-g");
  create_topic(t, topic, 2);
  enum { N = 200 };
  for (int i = 0; i < N; i++) {
    char val[32];
    snprintf(val, sizeof val, "o-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, 1, "same", val, NULL) == 0);
  }
  flush_all(t);
  CU_ASSERT_EQUAL(d->n_ok, N);
  /* Delivery offsets of one partition rise with produce order. */
  for (size_t i = 1; i < d->n && i < DR_MAX; i++) CU_ASSERT(d->off[i] == d->off[i - 1] + 1);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  int64_t prev = -1;
  for (int i = 0; i < N; i++) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    char val[32];
    snprintf(val, sizeof val, "o-%d", i);
    CU_ASSERT_EQUAL(m->partition, 1);
    CU_ASSERT(value_is(m, val));
    CU_ASSERT(m->key_len == 4 && !memcmp(m->key, "same", 4));
    CU_ASSERT(prev < 0 || m->offset == prev + 1);
    CU_ASSERT(m->timestamp_ms > 0);
    prev = m->offset;
    altar_msg_free(m);
  }
  altar_transport_close(t);
  free(d);
}

static void test_keys_map_to_stable_partitions(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200];
  unique(topic, sizeof topic, "keys");
  enum { P = 6, K = 40 };
  create_topic(t, topic, P);
  static int keyidx[K * 3];
  for (int round = 0; round < 3; round++)
    for (int k = 0; k < K; k++) {
      char key[32];
      snprintf(key, sizeof key, "task-%d", k);
      keyidx[round * K + k] = k;
      CU_ASSERT_FATAL(produce(t, topic, ALTAR_PARTITION_ANY, key, "x", &keyidx[round * K + k]) == 0);
    }
  flush_all(t);
  CU_ASSERT_EQUAL(d->n_ok, K * 3);
  int32_t where[K];
  for (int k = 0; k < K; k++) where[k] = -1;
  bool spread = false;
  for (size_t i = 0; i < d->n && i < DR_MAX; i++) {
    int k = *(int *)d->opaque[i];
    char key[32];
    snprintf(key, sizeof key, "task-%d", k);
    /* Same partition every time, and the one Kafka's murmur2 picks. */
    CU_ASSERT_EQUAL(d->part[i], altar_partition_for_key(key, strlen(key), P));
    if (where[k] >= 0) CU_ASSERT_EQUAL(d->part[i], where[k]);
    where[k] = d->part[i];
    if (d->part[i] != d->part[0]) spread = true;
  }
  CU_ASSERT(spread);
  altar_transport_close(t);
  free(d);
}

static void test_commit_and_resume(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "resume");
  unique(group, sizeof group, "resume-g");
  create_topic(t, topic, 1);
  for (int i = 0; i < 20; i++) {
    char val[32];
    snprintf(val, sizeof val, "r-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, 0, NULL, val, NULL) == 0);
  }
  flush_all(t);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  int64_t last = -1;
  for (int i = 0; i < 10; i++) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    last = m->offset;
    altar_msg_free(m);
  }
  altar_error_t err = {0};
  int rc = altar_transport_commit(t, topic, 0, last + 1, "resume-here", &err);
  if (rc) fprintf(stderr, "conformance: commit: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  altar_transport_close(t);

  /* A new member of the group starts right after the commit. */
  altar_transport_t *t2 = open_transport(NULL);
  CU_ASSERT_FATAL(t2 != NULL);
  int64_t off = -5;
  char *md = NULL;
  CU_ASSERT_EQUAL(altar_transport_committed(t2, group, topic, 0, wait_ms(), &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, last + 1);
  CU_ASSERT(md && !strcmp(md, "resume-here"));
  free(md);
  asg_t a2 = {.topic = topic};
  subscribe(t2, group, topic, &a2);
  altar_msg_t *m = next_msg(t2, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL(m->offset, last + 1);
  CU_ASSERT(value_is(m, "r-10"));
  altar_msg_free(m);
  altar_transport_close(t2);
  free(d);
}

static void test_commit_metadata_round_trip(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "meta");
  unique(group, sizeof group, "meta-g");
  create_topic(t, topic, 1);
  CU_ASSERT_FATAL(produce(t, topic, 0, NULL, "one", NULL) == 0);
  flush_all(t);
  altar_error_t err = {0};
  int64_t off = 0;
  char *md = NULL;
  /* Nothing committed yet. */
  CU_ASSERT_EQUAL(altar_transport_committed(t, group, topic, 0, wait_ms(), &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, ALTAR_OFFSET_INVALID);
  CU_ASSERT(md == NULL || md[0] == '\0');
  free(md);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  altar_msg_t *m = next_msg(t, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  altar_msg_free(m);
  /* Metadata of the shape the worker keeps: finished offsets as JSON. */
  char meta[2000];
  int k = snprintf(meta, sizeof meta, "{\"done\":[");
  for (int i = 0; i < 150; i++) k += snprintf(meta + k, sizeof meta - (size_t)k, "%s%d", i ? "," : "", 1000 + i);
  snprintf(meta + k, sizeof meta - (size_t)k, "],\"note\":\"tab\\t ü\"}");
  CU_ASSERT_EQUAL_FATAL(altar_transport_commit(t, topic, 0, 1, meta, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_committed(t, group, topic, 0, wait_ms(), &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 1);
  CU_ASSERT(md && !strcmp(md, meta));
  free(md);
  /* A later commit replaces both. */
  CU_ASSERT_EQUAL_FATAL(altar_transport_commit(t, topic, 0, 1, "second", &err), 0);
  CU_ASSERT_EQUAL(altar_transport_committed(t, group, topic, 0, wait_ms(), &off, &md, &err), 0);
  CU_ASSERT(md && !strcmp(md, "second"));
  free(md);
  altar_transport_close(t);
}

static void test_pause_and_resume(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "pause");
  unique(group, sizeof group, "pause-g");
  create_topic(t, topic, 2);
  for (int i = 0; i < 5; i++) {
    char val[32];
    snprintf(val, sizeof val, "p0-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, 0, NULL, val, NULL) == 0);
    snprintf(val, sizeof val, "p1-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, 1, NULL, val, NULL) == 0);
  }
  flush_all(t);
  asg_t a = {.topic = topic, .pause_p0 = true};
  subscribe(t, group, topic, &a);
  int got1 = 0;
  while (got1 < 5) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    CU_ASSERT_EQUAL(m->partition, 1); /* partition 0 is paused */
    got1 += m->partition == 1;
    altar_msg_free(m);
  }
  /* Paused: nothing from partition 0 however long we poll. */
  for (int i = 0; i < 5; i++) {
    altar_msg_t *m = NULL;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_transport_consume(t, 200, &m, &err), 0);
    CU_ASSERT(m == NULL);
    altar_msg_free(m);
  }
  CU_ASSERT_FATAL(asg_has(&a, 0));
  altar_tp_t tp = {topic, 0, ALTAR_OFFSET_INVALID};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_resume(t, &tp, 1, &err), 0);
  for (int i = 0; i < 5; i++) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    char val[32];
    snprintf(val, sizeof val, "p0-%d", i);
    CU_ASSERT_EQUAL(m->partition, 0);
    CU_ASSERT(value_is(m, val));
    altar_msg_free(m);
  }
  altar_transport_close(t);
}

static void test_seek_to_beginning(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "seek");
  unique(group, sizeof group, "seek-g");
  create_topic(t, topic, 1);
  for (int i = 0; i < 6; i++) {
    char val[32];
    snprintf(val, sizeof val, "s-%d", i);
    CU_ASSERT_FATAL(produce(t, topic, 0, NULL, val, NULL) == 0);
  }
  flush_all(t);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  int64_t first = -1;
  for (int i = 0; i < 6; i++) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    if (i == 0) first = m->offset;
    altar_msg_free(m);
  }
  altar_error_t err = {0};
  int rc = altar_transport_seek(t, topic, 0, ALTAR_OFFSET_BEGINNING, &err);
  if (rc) fprintf(stderr, "conformance: seek: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  for (int i = 0; i < 6; i++) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    char val[32];
    snprintf(val, sizeof val, "s-%d", i);
    CU_ASSERT_EQUAL(m->offset, first + i);
    CU_ASSERT(value_is(m, val));
    altar_msg_free(m);
  }
  altar_transport_close(t);
}

/* The wait descriptor: after a consume that found nothing, polling it and
 * then consuming without a timeout finds the next record written to an
 * owned partition (a wake may also come for other news: poll again). */
static void test_wait_fd_wakes(void) {
  altar_transport_t *t = open_transport(NULL), *p = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL && p != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "wake");
  unique(group, sizeof group, "wake-g");
  create_topic(p, topic, 1);
  CU_ASSERT_FATAL(produce(p, topic, 0, NULL, "w-0", NULL) == 0);
  flush_all(p);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  altar_msg_t *m = next_msg(t, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  altar_msg_free(m);
  altar_error_t err = {0};
  for (bool more = true; more;) { /* what is already fetched, without waiting */
    m = NULL;
    CU_ASSERT_EQUAL_FATAL(altar_transport_consume(t, 0, &m, &err), 0);
    more = m != NULL;
    altar_msg_free(m);
  }
  int fd = altar_transport_wait_fd(t);
  if (!conf->wait_fd) {
    CU_ASSERT_EQUAL(fd, -1);
  } else {
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(produce(p, topic, 0, NULL, "w-1", NULL) == 0);
    flush_all(p);
    int64_t deadline = mono_ms() + wait_ms();
    m = NULL;
    while (!m && mono_ms() < deadline) {
      struct pollfd pfd = {.fd = altar_transport_wait_fd(t), .events = POLLIN};
      if (poll(&pfd, 1, (int)(deadline - mono_ms())) <= 0) break;
      CU_ASSERT_EQUAL_FATAL(altar_transport_consume(t, 0, &m, &err), 0);
    }
    CU_ASSERT_FATAL(m != NULL);
    CU_ASSERT(value_is(m, "w-1"));
    altar_msg_free(m);
  }
  altar_transport_close(t);
  altar_transport_close(p);
}

/* The largest message altar writes (ALTAR_MAX_MESSAGE bytes, with a key and
 * a header) goes through a topic the transport created and comes back whole:
 * on Kafka this holds against a broker on its default size limits only
 * because altar creates its topics with a matching max.message.bytes. */
static void test_largest_message_round_trip(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200];
  unique(topic, sizeof topic, "big");
  create_topic(t, topic, 1);
  size_t len = ALTAR_MAX_MESSAGE;
  unsigned char *value = malloc(len);
  CU_ASSERT_FATAL(value != NULL);
  for (size_t i = 0; i < len; i++) value[i] = (unsigned char)(i * 131u + (i >> 12));
  char key[128];
  memset(key, 'k', sizeof key);
  altar_header_t h = {"trace", "0123456789abcdef", 16};
  altar_produce_rec_t rec = {.topic = topic,
                             .partition = 0,
                             .key = key,
                             .key_len = sizeof key,
                             .value = value,
                             .value_len = len,
                             .headers = &h,
                             .n_headers = 1};
  altar_error_t err = {0};
  int rc = altar_transport_produce(t, &rec, &err);
  if (rc) fprintf(stderr, "conformance: produce %zu bytes: %s\n", len, err.msg);
  CU_ASSERT_FATAL(rc == 0);
  flush_all(t);
  if (d->n_err) fprintf(stderr, "conformance: delivery of %zu bytes: %s\n", len, d->last_err);
  CU_ASSERT_EQUAL(d->n_ok, 1);
  CU_ASSERT_EQUAL(d->n_err, 0);
  altar_tp_t tp = {topic, 0, ALTAR_OFFSET_BEGINNING};
  CU_ASSERT_FATAL(altar_transport_assign(t, &tp, 1, &err) == 0);
  altar_msg_t *m = next_msg(t, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL(m->value_len, len);
  CU_ASSERT(m->value_len == len && !memcmp(m->value, value, len));
  CU_ASSERT(m->key_len == sizeof key && !memcmp(m->key, key, sizeof key));
  const void *hv = NULL;
  size_t hl = 0;
  CU_ASSERT_EQUAL(altar_msg_header(m, "trace", &hv, &hl), 0);
  CU_ASSERT(hl == 16 && !memcmp(hv, "0123456789abcdef", 16));
  altar_msg_free(m);
  free(value);
  altar_transport_close(t);
  free(d);
}

/* A seek made in the ASSIGN callback sets where the partition starts, ahead
 * of the group's committed offset (the reconciler resumes from its ledger's
 * offsets this way). */
static void test_seek_in_assign_callback(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "aseek");
  unique(group, sizeof group, "aseek-g");
  create_topic(t, topic, 2);
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < 6; i++) CU_ASSERT_FATAL(produce(t, topic, p, NULL, "v", NULL) == 0);
  flush_all(t);
  /* First member: commits offset 1 on both partitions, then leaves. */
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  altar_msg_t *m = next_msg(t, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  altar_msg_free(m);
  altar_error_t err = {0};
  for (int p = 0; p < 2; p++) CU_ASSERT_EQUAL(altar_transport_commit(t, topic, p, 1, NULL, &err), 0);
  altar_transport_close(t);
  /* Second member seeks both to 4 while they are being assigned. */
  t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  asg_t b = {.topic = topic, .seek_on_assign = 4};
  subscribe(t, group, topic, &b);
  int got[2] = {0, 0};
  for (int i = 0; i < 4; i++) {
    m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    CU_ASSERT(m->offset >= 4); /* never the committed 1..3 */
    if (m->partition >= 0 && m->partition < 2) got[m->partition]++;
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL(b.seeks_ok, 2);
  CU_ASSERT_EQUAL(b.seeks_failed, 0);
  CU_ASSERT_EQUAL(got[0], 2);
  CU_ASSERT_EQUAL(got[1], 2);
  altar_transport_close(t);
}

/* Polls both members until pred holds or the bound passes; records consumed
 * meanwhile must come from a partition the consumer owns. */
static int drain_both(altar_transport_t *ta, asg_t *a, altar_transport_t *tb, asg_t *b, int *pcount,
                      bool (*pred)(const asg_t *, const asg_t *, int)) {
  int64_t deadline = mono_ms() + wait_ms();
  while (mono_ms() < deadline) {
    altar_transport_t *ts[2] = {ta, tb};
    asg_t *as[2] = {a, b};
    for (int k = 0; k < 2; k++) {
      if (!ts[k]) continue;
      altar_msg_t *m = NULL;
      altar_error_t err = {0};
      altar_transport_consume(ts[k], 100, &m, &err);
      if (m) {
        CU_ASSERT(asg_has(as[k], m->partition));
        (*pcount)++;
        altar_msg_free(m);
      }
    }
    if (pred(a, b, *pcount)) return 0;
  }
  return -1;
}

static bool split_done(const asg_t *a, const asg_t *b, int count) {
  (void)count;
  if (a->n == 0 || b->n == 0 || a->n + b->n != 4) return false;
  for (size_t i = 0; i < a->n; i++)
    if (asg_has(b, a->parts[i])) return false;
  return true;
}

static bool a_has_all(const asg_t *a, const asg_t *b, int count) {
  (void)b;
  (void)count;
  return a->n == 4;
}

static void test_group_split_and_rebalance(void) {
  altar_transport_t *tp = open_transport(NULL);
  CU_ASSERT_FATAL(tp != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "split");
  unique(group, sizeof group, "split-g");
  create_topic(tp, topic, 4);
  for (int p = 0; p < 4; p++)
    for (int i = 0; i < 5; i++) CU_ASSERT_FATAL(produce(tp, topic, p, NULL, "x", NULL) == 0);
  flush_all(tp);
  altar_transport_t *ta = open_transport(NULL), *tb = open_transport(NULL);
  CU_ASSERT_FATAL(ta && tb);
  asg_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  a->topic = b->topic = topic;
  subscribe(ta, group, topic, a);
  subscribe(tb, group, topic, b);
  int count = 0;
  CU_ASSERT_EQUAL_FATAL(drain_both(ta, a, tb, b, &count, split_done), 0);
  CU_ASSERT(a->n >= 1 && b->n >= 1);
  /* B leaves: its partitions are revoked and A takes them over. */
  altar_transport_close(tb);
  CU_ASSERT_EQUAL(b->n, 0);
  CU_ASSERT(b->revokes >= 1);
  CU_ASSERT_EQUAL(drain_both(ta, a, NULL, b, &count, a_has_all), 0);
  CU_ASSERT_EQUAL(a->n, 4);
  /* Nothing was committed, so A reads everything B had not... and what it
   * had: at least the 20 records overall were seen once by someone. */
  int64_t deadline = mono_ms() + wait_ms();
  while (count < 20 && mono_ms() < deadline) {
    altar_msg_t *m = next_msg(ta, 500);
    if (m) {
      CU_ASSERT(asg_has(a, m->partition));
      count++;
      altar_msg_free(m);
    }
  }
  CU_ASSERT(count >= 20);
  altar_transport_close(ta);
  altar_transport_close(tp);
  free(a);
  free(b);
}

/* leave: the partitions are revoked within the call (commits still work
 * there), the other member gets all of them while the leaver's handle is
 * still open, and the leaver keeps producing. */
static void test_leave_hands_over(void) {
  altar_transport_t *tp = open_transport(NULL);
  CU_ASSERT_FATAL(tp != NULL);
  char topic[200], group[200], other[200];
  unique(topic, sizeof topic, "leave");
  unique(other, sizeof other, "leave-out");
  unique(group, sizeof group, "leave-g");
  create_topic(tp, topic, 4);
  create_topic(tp, other, 1);
  for (int p = 0; p < 4; p++) CU_ASSERT_FATAL(produce(tp, topic, p, NULL, "x", NULL) == 0);
  flush_all(tp);
  drs_t *da = calloc(1, sizeof *da);
  altar_transport_t *ta = open_transport_with(da, conf->leave_overrides);
  altar_transport_t *tb = open_transport_with(NULL, conf->leave_overrides);
  CU_ASSERT_FATAL(ta && tb);
  asg_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  a->topic = b->topic = topic;
  a->commit_on_revoke = true;
  subscribe(ta, group, topic, a);
  subscribe(tb, group, topic, b);
  int count = 0;
  CU_ASSERT_EQUAL_FATAL(drain_both(ta, a, tb, b, &count, split_done), 0);
  size_t a_had = a->n;
  int32_t had[TP_MAX];
  memcpy(had, a->parts, a_had * sizeof had[0]);
  /* Count only the leave's revokes: the split itself may have revoked (and
   * committed) some of A's partitions already. */
  a->revoke_commits_ok = a->revoke_commits_failed = 0;
  altar_error_t err = {0};
  int rc = altar_transport_leave(ta, &err);
  if (rc) fprintf(stderr, "conformance: leave: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  /* Revoked within the call, each commit made there accepted. */
  CU_ASSERT_EQUAL(a->n, 0);
  CU_ASSERT(a->revokes >= 1);
  CU_ASSERT_EQUAL(a->revoke_commits_ok, (int)a_had);
  CU_ASSERT_EQUAL(a->revoke_commits_failed, 0);
  CU_ASSERT_EQUAL(altar_transport_leave(ta, &err), 0); /* again: no-op */
  /* The other member takes everything over while A's handle stays open. */
  int64_t deadline = mono_ms() + (conf->leave_within_ms > 0 ? conf->leave_within_ms : wait_ms());
  while (b->n != 4 && mono_ms() < deadline) {
    altar_msg_t *m = NULL;
    altar_transport_consume(tb, 100, &m, &err);
    if (m) {
      CU_ASSERT(asg_has(b, m->partition));
      altar_msg_free(m);
    }
    altar_transport_consume(ta, 0, &m, &err);
    CU_ASSERT(m == NULL); /* A reads nothing any more */
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL(b->n, 4);
  /* What A committed while revoking is what the group holds now. */
  for (size_t i = 0; i < a_had; i++) {
    int64_t off = ALTAR_OFFSET_INVALID;
    char *md = NULL;
    CU_ASSERT_EQUAL(altar_transport_committed(tb, group, topic, had[i], wait_ms(), &off, &md, &err), 0);
    CU_ASSERT_EQUAL(off, 1);
    CU_ASSERT(md && !strcmp(md, "revoked"));
    free(md);
  }
  /* A's producer side still works, and its consumer side refuses. */
  CU_ASSERT_EQUAL(produce(ta, other, 0, NULL, "after-leave", da), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(ta, wait_ms(), &err), 0);
  CU_ASSERT_EQUAL(da->n_ok, 1);
  CU_ASSERT(altar_transport_commit(ta, topic, 0, 1, NULL, &err) < 0);
  altar_msg_t *m = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(ta, 10, &m, &err), 0);
  CU_ASSERT(m == NULL);
  /* A leave on a handle that never subscribed is a no-op. */
  CU_ASSERT_EQUAL(altar_transport_leave(tp, &err), 0);
  int revokes_before_close = a->revokes;
  altar_transport_close(ta);
  CU_ASSERT_EQUAL(a->revokes, revokes_before_close); /* nothing left to revoke */
  altar_transport_close(tb);
  altar_transport_close(tp);
  free(a);
  free(b);
  free(da);
}

/* After detach no callback fires: records produced before it are delivered
 * with no report callback, and close revokes the owned partition without
 * calling the rebalance callback (without detach it would: see the leave
 * test's close). */
static void test_detach_silences_callbacks(void) {
  drs_t *d = calloc(1, sizeof *d);
  altar_transport_t *t = open_transport(d);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "detach");
  unique(group, sizeof group, "detach-g");
  create_topic(t, topic, 1);
  CU_ASSERT_FATAL(produce(t, topic, 0, NULL, "before", NULL) == 0);
  flush_all(t);
  CU_ASSERT_EQUAL(d->n_ok, 1);
  asg_t *a = calloc(1, sizeof *a);
  a->topic = topic;
  subscribe(t, group, topic, a);
  altar_msg_t *m = next_msg(t, wait_ms());
  CU_ASSERT_FATAL(m != NULL);
  altar_msg_free(m);
  CU_ASSERT_EQUAL(a->n, 1); /* partition 0 is owned */
  int assigns = a->assigns, revokes = a->revokes;
  CU_ASSERT_FATAL(produce(t, topic, 0, NULL, "after", NULL) == 0);
  altar_transport_detach(t);
  flush_all(t); /* delivered, but nobody is called */
  CU_ASSERT_EQUAL(d->n, 1);
  altar_transport_detach(t); /* again: no-op */
  altar_transport_close(t);
  CU_ASSERT_EQUAL(a->assigns, assigns);
  CU_ASSERT_EQUAL(a->revokes, revokes);
  CU_ASSERT_EQUAL(a->n, 1);
  CU_ASSERT_EQUAL(d->n, 1);
  altar_transport_detach(NULL);
  free(a);
  free(d);
}

static void test_list_topics_and_lag(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "list");
  unique(group, sizeof group, "list-g");
  create_topic(t, topic, 3);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_transport_create_topic(t, topic, 3, &err), ALTAR_EEXIST);
  const int counts[3] = {2, 3, 0};
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < counts[p]; i++) CU_ASSERT_FATAL(produce(t, topic, p, NULL, "v", NULL) == 0);
  flush_all(t);
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, topic, wait_ms(), &l, &err), 0);
  CU_ASSERT_EQUAL_FATAL(l->n_topics, 1);
  CU_ASSERT_STRING_EQUAL(l->topics[0].name, topic);
  CU_ASSERT_EQUAL_FATAL(l->topics[0].n_partitions, 3);
  for (int p = 0; p < 3; p++) {
    CU_ASSERT_EQUAL(l->topics[0].partitions[p].partition, p);
    CU_ASSERT_EQUAL(l->topics[0].partitions[p].end - l->topics[0].partitions[p].beginning, counts[p]);
  }
  int64_t end0 = l->topics[0].partitions[0].end;
  altar_topic_list_free(l);
  l = NULL;
  /* Every topic: ours is among them. */
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, NULL, wait_ms(), &l, &err), 0);
  bool found = false;
  for (size_t i = 0; i < l->n_topics; i++) found |= !strcmp(l->topics[i].name, topic);
  CU_ASSERT(found);
  altar_topic_list_free(l);

  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  int got = 0;
  while (got < 5) {
    altar_msg_t *m = next_msg(t, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    got++;
    altar_msg_free(m);
  }
  CU_ASSERT_EQUAL_FATAL(altar_transport_commit(t, topic, 0, end0, NULL, &err), 0);
  altar_lag_list_t *lag = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_lag(t, group, topic, wait_ms(), &lag, &err), 0);
  CU_ASSERT_EQUAL_FATAL(lag->n, 3);
  CU_ASSERT_EQUAL(lag->entries[0].committed, end0);
  CU_ASSERT_EQUAL(lag->entries[0].lag, 0);
  CU_ASSERT_EQUAL(lag->entries[1].committed, ALTAR_OFFSET_INVALID);
  CU_ASSERT_EQUAL(lag->entries[1].lag, 3);
  CU_ASSERT_EQUAL(lag->entries[2].lag, 0);
  altar_lag_list_free(lag);
  altar_transport_close(t);
}

/* topic_members: a member that reads a topic counts for it, not for
 * another topic; none are counted for a group nobody joined. */
static void test_topic_members(void) {
  altar_transport_t *t = open_transport(NULL), *probe = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL && probe != NULL);
  char topic[200], other[200], group[200], nobody[200];
  unique(topic, sizeof topic, "members");
  unique(other, sizeof other, "members-other");
  unique(group, sizeof group, "members-g");
  unique(nobody, sizeof nobody, "members-none");
  create_topic(t, topic, 2);
  create_topic(t, other, 1);
  asg_t a = {.topic = topic};
  subscribe(t, group, topic, &a);
  size_t n = 0, n_other = 9, n_nobody = 9;
  altar_error_t err = {0};
  int64_t deadline = mono_ms() + wait_ms();
  while (mono_ms() < deadline && n != 1) {
    altar_msg_t *m = NULL;
    altar_transport_consume(t, 200, &m, &err); /* serves the rebalance, keeps the member alive */
    altar_msg_free(m);
    if (!a.n) continue;
    int rc = altar_transport_topic_members(probe, group, topic, wait_ms(), &n, &err);
    if (rc == ALTAR_ENOTSUP) break;
    CU_ASSERT_EQUAL_FATAL(rc, 0);
  }
  if (n == 1) {
    CU_ASSERT_EQUAL(altar_transport_topic_members(probe, group, other, wait_ms(), &n_other, &err), 0);
    CU_ASSERT_EQUAL(n_other, 0);
    CU_ASSERT_EQUAL(altar_transport_topic_members(probe, nobody, topic, wait_ms(), &n_nobody, &err), 0);
    CU_ASSERT_EQUAL(n_nobody, 0);
  }
  CU_ASSERT_EQUAL(n, 1);
  altar_transport_close(probe);
  altar_transport_close(t);
}

/* end_offsets: the same ends list_topics reports, from a handle that reads
 * nothing and from one that consumed the partitions (kafka answers there
 * from its last fetch), also after more records came; a partition the
 * topic lacks is ALTAR_OFFSET_INVALID, a missing topic ALTAR_ENOTFOUND. */
static void expect_ends(altar_transport_t *t, const char *topic, const int64_t want[3]) {
  const int32_t parts[4] = {0, 1, 2, 7};
  int64_t ends[4] = {0};
  altar_error_t err = {0};
  int rc = altar_transport_end_offsets(t, topic, parts, 4, wait_ms(), ends, &err);
  if (rc) fprintf(stderr, "conformance: end_offsets: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  for (int p = 0; p < 3; p++) CU_ASSERT_EQUAL(ends[p], want[p]);
  CU_ASSERT_EQUAL(ends[3], ALTAR_OFFSET_INVALID);
}

static void test_end_offsets(void) {
  altar_transport_t *t = open_transport(NULL), *reader = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL && reader != NULL);
  char topic[200], group[200];
  unique(topic, sizeof topic, "ends");
  unique(group, sizeof group, "ends-g");
  create_topic(t, topic, 3);
  const int counts[3] = {2, 3, 0};
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < counts[p]; i++) CU_ASSERT_FATAL(produce(t, topic, p, NULL, "v", NULL) == 0);
  flush_all(t);
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, topic, wait_ms(), &l, &err), 0);
  int64_t want[3];
  for (int p = 0; p < 3; p++) want[p] = l->topics[0].partitions[p].end;
  altar_topic_list_free(l);
  expect_ends(t, topic, want);
  asg_t a = {.topic = topic};
  subscribe(reader, group, topic, &a);
  for (int got = 0; got < 5; got++) {
    altar_msg_t *m = next_msg(reader, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    altar_msg_free(m);
  }
  expect_ends(reader, topic, want);
  for (int i = 0; i < 4; i++) CU_ASSERT_FATAL(produce(t, topic, 1, NULL, "more", NULL) == 0);
  flush_all(t);
  want[1] += 4;
  for (int got = 0; got < 4; got++) {
    altar_msg_t *m = next_msg(reader, wait_ms());
    CU_ASSERT_FATAL(m != NULL);
    altar_msg_free(m);
  }
  expect_ends(reader, topic, want);
  expect_ends(t, topic, want);
  char missing[200];
  unique(missing, sizeof missing, "ends-none");
  const int32_t p0 = 0;
  int64_t e = 0;
  CU_ASSERT_EQUAL(altar_transport_end_offsets(t, missing, &p0, 1, wait_ms(), &e, &err), ALTAR_ENOTFOUND);
  CU_ASSERT(altar_transport_end_offsets(t, "../bad", &p0, 1, wait_ms(), &e, &err) < 0);
  altar_transport_close(reader);
  altar_transport_close(t);
}

static void test_bad_arguments(void) {
  altar_transport_t *t = open_transport(NULL);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT(altar_transport_create_topic(t, "../escape", 1, &err) < 0);
  CU_ASSERT(strstr(err.msg, "topic") != NULL);
  CU_ASSERT(altar_transport_create_topic(t, "ok-name", 0, &err) < 0);
  altar_produce_rec_t rec = {.topic = "bad/topic", .partition = ALTAR_PARTITION_ANY, .value = "x", .value_len = 1};
  CU_ASSERT(altar_transport_produce(t, &rec, &err) < 0);
  altar_msg_t *m = NULL;
  CU_ASSERT(altar_transport_consume(t, 0, &m, &err) < 0); /* not subscribed */
  CU_ASSERT(m == NULL);
  altar_transport_close(t);
}

void altar_transport_conformance_add(const altar_transport_conformance_t *c) {
  conf = c;
  static char name[128];
  snprintf(name, sizeof name, "%s", c->suite_name ? c->suite_name : "transport conformance");
  if (!c->suite_name) snprintf(name, sizeof name, "transport conformance: %s", c->transport);
  ALTAR_SUITE(name, NULL, NULL);
  ALTAR_TEST(test_delivery_report_per_record);
  ALTAR_TEST(test_order_within_partition);
  ALTAR_TEST(test_keys_map_to_stable_partitions);
  ALTAR_TEST(test_commit_and_resume);
  ALTAR_TEST(test_commit_metadata_round_trip);
  ALTAR_TEST(test_pause_and_resume);
  ALTAR_TEST(test_seek_to_beginning);
  ALTAR_TEST(test_seek_in_assign_callback);
  ALTAR_TEST(test_wait_fd_wakes);
  ALTAR_TEST(test_largest_message_round_trip);
  ALTAR_TEST(test_group_split_and_rebalance);
  ALTAR_TEST(test_leave_hands_over);
  ALTAR_TEST(test_detach_silences_callbacks);
  ALTAR_TEST(test_list_topics_and_lag);
  ALTAR_TEST(test_topic_members);
  ALTAR_TEST(test_end_offsets);
  ALTAR_TEST(test_bad_arguments);
}
