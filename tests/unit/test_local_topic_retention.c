/* Per-topic retention of the embedded log (transports/local_topic_conf.c):
 * what create_topic_config sets is kept with the topic and applied by whole
 * segments, over the transport's setting; the fleet's topics get their
 * lifetimes from config. Segment ages are set by the test (utimensat), never
 * waited for. */
#include "altar/config.h"
#include "altar/fleet_topics.h"
#include "altar/footprint.h"
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

static altar_transport_t *open_log(const char *dir) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "segment.bytes", "4096");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  if (!t) fprintf(stderr, "open local: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

/* Segments of topic's partition 0; with age_s > 0, sets each one's mtime
 * that many seconds back first. */
static int segments(const char *dir, const char *topic, long age_s) {
  char pd[4200];
  snprintf(pd, sizeof pd, "%s/topics/%s/0", dir, topic);
  DIR *d = opendir(pd);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  struct timespec old[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 4 || strcmp(de->d_name + l - 4, ".log")) continue;
    n++;
    if (age_s > 0) CU_ASSERT(utimensat(dirfd(d), de->d_name, old, 0) == 0);
  }
  closedir(d);
  return n;
}

static void fill(altar_transport_t *t, const char *topic, int n) {
  char val[500];
  memset(val, 'v', sizeof val);
  altar_error_t err = {0};
  for (int i = 0; i < n; i++) {
    altar_produce_rec_t rec = {.topic = topic, .partition = 0, .value = val, .value_len = sizeof val};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
    CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
  }
}

static int create_with(altar_transport_t *t, const char *topic, const char *k, const char *v, altar_error_t *err) {
  altar_strmap_t c = {0};
  altar_strmap_set(&c, k, v);
  int rc = altar_transport_create_topic_config(t, topic, 1, &c, err);
  altar_strmap_clear(&c);
  return rc;
}

/* A topic created with retention.ms loses its old segments; one created
 * without keeps everything (the transport's default, unlimited). */
static void test_topic_retention_ms(void) {
  char *dir = altar_test_tmpdir("local-topic-ret");
  altar_transport_t *t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(create_with(t, "short", "retention.ms", "3600000", &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "forever", 1, &err), 0);
  int64_t ms = 0;
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, "short", &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, 3600000);
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, "forever", &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, -1);
  fill(t, "short", 40);
  fill(t, "forever", 40);
  altar_transport_close(t);
  int before = segments(dir, "short", 0);
  CU_ASSERT(before >= 4);
  CU_ASSERT_EQUAL(segments(dir, "short", 7200), before);
  CU_ASSERT_EQUAL(segments(dir, "forever", 7200), before);
  /* The first append after opening applies retention to its partition. */
  t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  fill(t, "short", 1);
  fill(t, "forever", 1);
  CU_ASSERT_EQUAL(segments(dir, "short", 0), 1);
  CU_ASSERT_EQUAL(segments(dir, "forever", 0), before);
  altar_topic_list_t *l = NULL;
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "short", 0, &l, &err), 0);
  CU_ASSERT_EQUAL(l->topics[0].n_partitions, 1); /* the settings file is no partition */
  CU_ASSERT(l->topics[0].partitions[0].beginning > 0);
  CU_ASSERT_EQUAL(l->topics[0].partitions[0].end, 41);
  altar_topic_list_free(l);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sets the first `age_n` segments (oldest first) of topic's partition 0 to
 * age_s seconds back; returns how many it has and, in *pbytes, the
 * allocated bytes of those it aged. */
static int age_oldest(const char *dir, const char *topic, int age_n, long age_s, uint64_t *pbytes) {
  char pd[4200], *names[256];
  snprintf(pd, sizeof pd, "%s/topics/%s/0", dir, topic);
  DIR *d = opendir(pd);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 256) {
    size_t l = strlen(de->d_name);
    if (l >= 4 && !strcmp(de->d_name + l - 4, ".log")) names[n++] = strdup(de->d_name);
  }
  qsort(names, (size_t)n, sizeof names[0], by_name); /* 20-digit bases: by name is by offset */
  struct timespec old[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
  *pbytes = 0;
  for (int i = 0; i < n; i++) {
    if (i < age_n) {
      struct stat st;
      CU_ASSERT(utimensat(dirfd(d), names[i], old, 0) == 0);
      CU_ASSERT(fstatat(dirfd(d), names[i], &st, 0) == 0);
      *pbytes += (uint64_t)st.st_blocks * 512;
    }
    free(names[i]);
  }
  closedir(d);
  return n;
}

/* What the next retention pass deletes, decided as the pass decides: the
 * two oldest segments of a topic keeping an hour, once the test makes them
 * two hours old (a topic keeping everything counts nothing however old);
 * every segment made old, all but the active one; after the pass, nothing.
 * The sampler's gauges report the same figures. */
static void test_retention_due(void) {
  char *dir = altar_test_tmpdir("local-topic-ret-due");
  altar_transport_t *t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(create_with(t, "short", "retention.ms", "3600000", &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "forever", 1, &err), 0);
  fill(t, "short", 40);
  fill(t, "forever", 40);
  altar_retention_due_t due;
  CU_ASSERT_EQUAL(altar_transport_retention_due(t, &due, &err), 0);
  CU_ASSERT_EQUAL(due.segments, 0); /* everything fresh */
  CU_ASSERT_EQUAL(due.bytes, 0);
  uint64_t two = 0, all_but_active = 0, ignored = 0;
  int n = age_oldest(dir, "short", 2, 7200, &two);
  CU_ASSERT_FATAL(n >= 4);
  CU_ASSERT_EQUAL(age_oldest(dir, "forever", 1000, 7200, &ignored), n);
  CU_ASSERT(two > 0);
  CU_ASSERT_EQUAL(altar_transport_retention_due(t, &due, &err), 0);
  CU_ASSERT_EQUAL(due.segments, 2);
  CU_ASSERT_EQUAL(due.bytes, two);
  /* Through the footprint sampler: the gauges, measured when added. */
  altar_metrics_t *reg = altar_metrics_new();
  altar_footprint_sampler_t *s = altar_footprint_sampler_start(reg, NULL, 0, &err);
  CU_ASSERT_FATAL(s != NULL);
  CU_ASSERT_EQUAL(altar_footprint_sampler_add_retention(s, t, &err), 0);
  CU_ASSERT_EQUAL(altar_footprint_sampler_add_retention(s, t, &err), ALTAR_ESTATE);
  altar_metric_t *gb = altar_metrics_gauge(reg, "altar_log_retention_next_bytes", "", &err);
  altar_metric_t *gs = altar_metrics_gauge(reg, "altar_log_retention_next_segments", "", &err);
  CU_ASSERT_FATAL(gb && gs);
  CU_ASSERT_EQUAL(altar_metric_gauge_value(gb), (double)two);
  CU_ASSERT_EQUAL(altar_metric_gauge_value(gs), 2);
  altar_footprint_sampler_stop(s);
  altar_metrics_free(reg);
  /* Every segment old, the active one too: it is never counted. */
  CU_ASSERT_EQUAL(age_oldest(dir, "short", n - 1, 7200, &all_but_active), n);
  CU_ASSERT_EQUAL(age_oldest(dir, "short", n, 7200, &ignored), n);
  CU_ASSERT_EQUAL(altar_transport_retention_due(t, &due, &err), 0);
  CU_ASSERT_EQUAL(due.segments, (uint64_t)n - 1);
  CU_ASSERT_EQUAL(due.bytes, all_but_active);
  altar_transport_close(t);
  /* The pass (a producer's first record after opening) deletes exactly those. */
  t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  fill(t, "short", 1);
  CU_ASSERT_EQUAL(segments(dir, "short", 0), 1);
  CU_ASSERT_EQUAL(segments(dir, "forever", 0), n);
  CU_ASSERT_EQUAL(altar_transport_retention_due(t, &due, &err), 0);
  CU_ASSERT_EQUAL(due.segments, 0);
  CU_ASSERT_EQUAL(due.bytes, 0);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* retention.bytes per topic, by whole segments, the active one kept. */
static void test_topic_retention_bytes(void) {
  char *dir = altar_test_tmpdir("local-topic-ret-bytes");
  altar_transport_t *t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(create_with(t, "small", "retention.bytes", "10000", &err), 0);
  fill(t, "small", 200);
  int n = segments(dir, "small", 0);
  CU_ASSERT(n >= 2 && n <= 4);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* The transport's retention bounds every topic (an operator's cap on the
 * whole log); a topic's own setting can only make it shorter. */
static void test_transport_caps_every_topic(void) {
  char *dir = altar_test_tmpdir("local-topic-ret-cap");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "retention.ms", "3600000");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL_FATAL(create_with(t, "forever", "retention.ms", "-1", &err), 0);
  CU_ASSERT_EQUAL_FATAL(create_with(t, "minute", "retention.ms", "60000", &err), 0);
  CU_ASSERT_EQUAL_FATAL(create_with(t, "day", "retention.ms", "86400000", &err), 0);
  int64_t ms = 0;
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, "forever", &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, 3600000);
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, "minute", &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, 60000);
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, "day", &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, 3600000);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* Settings the embedded log cannot honour are refused by name, and nothing
 * is created. */
static void test_bad_topic_settings(void) {
  char *dir = altar_test_tmpdir("local-topic-ret-bad");
  altar_transport_t *t = open_log(dir);
  CU_ASSERT_FATAL(t != NULL);
  static const char *const bad[][2] = {{"retention.ms", "-2"},        {"retention.ms", "soon"},
                                       {"retention.bytes", ""},       {"retention.ms", "99999999999999999999"},
                                       {"cleanup.policy", "compact"}, {"segment.ms", "1"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(create_with(t, "bad", bad[i][0], bad[i][1], &err), ALTAR_ECONFIG);
    CU_ASSERT(strstr(err.msg, bad[i][0]) != NULL);
    altar_topic_list_t *l = NULL;
    CU_ASSERT_NOT_EQUAL(altar_transport_list_topics(t, "bad", 0, &l, &err), 0);
    altar_topic_list_free(l);
  }
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

/* The fleet's topics on the embedded log: a week for jobs and the others,
 * the status topic forever unless configured (docs/state.md). */
static void test_fleet_topics_lifetimes(void) {
  char *dir = altar_test_tmpdir("local-topic-ret-fleet");
  char yaml[4400], path[4200];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  snprintf(yaml, sizeof yaml, "transport: {name: local, dir: %s/log}\ntopics: {partitions: 2}\n", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs(yaml, f);
  fclose(f);
  altar_config_t cfg;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
  char logdir[4200];
  snprintf(logdir, sizeof logdir, "%s/log", dir);
  altar_transport_t *t = open_log(logdir);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(altar_fleet_topics_ensure(t, &cfg, &err), 0);
  int64_t ms = 0;
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, cfg.topics.jobs, &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, ALTAR_DEFAULT_TOPIC_RETENTION_MS);
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, cfg.topics.ready, &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, ALTAR_DEFAULT_TOPIC_RETENTION_MS);
  CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, cfg.topics.status, &ms, &err), 0);
  CU_ASSERT_EQUAL(ms, -1);
  /* Ensuring again (the next daemon to start) changes nothing. */
  CU_ASSERT_EQUAL(altar_fleet_topics_ensure(t, &cfg, &err), 0);
  altar_transport_close(t);
  altar_config_clear(&cfg);
  altar_test_rmtree(dir);
  free(dir);
}

/* With ledger checkpoints the status topic's default lifetime is the
 * other topics' (recovery needs only what follows a checkpoint); a value
 * set for it wins either way. */
static void test_status_lifetime_with_checkpoints(void) {
  static const struct {
    const char *extra;
    int64_t want;
  } cases[] = {{"ledger: {checkpoints: /tmp/cp}\n", ALTAR_DEFAULT_TOPIC_RETENTION_MS},
               {"ledger: {checkpoints: /tmp/cp}\ntopics: {status_retention_ms: 3600000}\n", 3600000},
               {"ledger: {checkpoints: /tmp/cp}\ntopics: {status_retention_ms: -1}\n", -1},
               {"topics: {retention_ms: 86400000}\n", -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *dir = altar_test_tmpdir("local-topic-ret-cp");
    char path[4200];
    snprintf(path, sizeof path, "%s/altar.yaml", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(f, "transport: {name: local, dir: %s/log}\n%s", dir, cases[i].extra);
    fclose(f);
    altar_config_t cfg;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &cfg, &err), 0);
    CU_ASSERT_EQUAL(altar_config_status_retention_ms(&cfg), cases[i].want);
    char logdir[4200];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    altar_transport_t *t = open_log(logdir);
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT_EQUAL(altar_fleet_topics_ensure(t, &cfg, &err), 0);
    int64_t ms = 0;
    CU_ASSERT_EQUAL(altar_transport_topic_retention_ms(t, cfg.topics.status, &ms, &err), 0);
    CU_ASSERT_EQUAL(ms, cases[i].want);
    altar_transport_close(t);
    altar_config_clear(&cfg);
    altar_test_rmtree(dir);
    free(dir);
  }
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local topic retention", NULL, NULL);
  ALTAR_TEST(test_topic_retention_ms);
  ALTAR_TEST(test_topic_retention_bytes);
  ALTAR_TEST(test_retention_due);
  ALTAR_TEST(test_transport_caps_every_topic);
  ALTAR_TEST(test_bad_topic_settings);
  ALTAR_TEST(test_fleet_topics_lifetimes);
  ALTAR_TEST(test_status_lifetime_with_checkpoints);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
