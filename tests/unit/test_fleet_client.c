/* The fleet client (altar/fleet_client.h) on the local transport: settings
 * and overrides, submit (refusals name the spec and field, nothing is
 * published), group events of one job read back in order, cancel on every
 * jobs and status partition. */
#include "altar/codec.h"
#include "altar/fleet_client.h"
#include "altar/plugin/transport.h"
#include "altar/transport.h"
#include "testutil.h"
#include "core/unconst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
  char *root, *cfg, *logdir;
} fixture_t;

static void fixture_open(fixture_t *f) {
  f->root = altar_test_tmpdir("fleet_client");
  size_t n = strlen(f->root) + 64;
  f->cfg = malloc(n);
  f->logdir = malloc(n);
  CU_ASSERT_FATAL(f->cfg && f->logdir);
  snprintf(f->cfg, n, "%s/altar.yaml", f->root);
  snprintf(f->logdir, n, "%s/log", f->root);
  const char *yaml = "topics: {partitions: 2}\n"
                     "groups:\n"
                     "  shard: {group_by: [job_id, model], ready_when: single, on_failed: dead_letter}\n";
  altar_test_write_file(f->cfg, yaml, strlen(yaml));
}

static void fixture_close(fixture_t *f) {
  altar_test_rmtree(f->root);
  free(f->root);
  free(f->cfg);
  free(f->logdir);
}

static altar_fleet_client_t *client(const fixture_t *f) {
  char over[4096];
  snprintf(over, sizeof over, "transport.dir=%s", f->logdir);
  const char *overrides[] = {over};
  altar_error_t err = {0};
  altar_fleet_client_t *c = altar_fleet_client_open(f->cfg, overrides, 1, &err);
  if (!c) fprintf(stderr, "open: %s\n", err.msg);
  CU_ASSERT_FATAL(c != NULL);
  return c;
}

/* Records on every partition of topic. */
static size_t count_records(const fixture_t *f, const char *topic) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", f->logdir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  altar_topic_list_t *tl = NULL;
  size_t n = 0;
  if (altar_transport_list_topics(t, topic, 1000, &tl, &err) == 0 && tl->n_topics)
    for (size_t p = 0; p < tl->topics[0].n_partitions; p++)
      n += (size_t)(tl->topics[0].partitions[p].end - tl->topics[0].partitions[p].beginning);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return n;
}

static void test_open_errors_name_their_source(void) {
  fixture_t f;
  fixture_open(&f);
  altar_error_t err = {0};
  const char *bad[] = {"no_equals_sign"};
  CU_ASSERT(altar_fleet_client_open(f.cfg, bad, 1, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "no_equals_sign") != NULL);
  const char *unknown[] = {"nonsense.key=1"};
  CU_ASSERT(altar_fleet_client_open(f.cfg, unknown, 1, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "nonsense.key") != NULL);
  const char *typo = "groups:\n  shard: {group_by: [job_id], ready_wen: single}\n";
  altar_test_write_file(f.cfg, typo, strlen(typo));
  char over[4096];
  snprintf(over, sizeof over, "transport.dir=%s", f.logdir);
  const char *overrides[] = {over};
  CU_ASSERT(altar_fleet_client_open(f.cfg, overrides, 1, &err) == NULL);
  CU_ASSERT(strstr(err.msg, "altar.yaml:2") != NULL);
  fixture_close(&f);
}

static void test_submit_publishes_one_job_or_nothing(void) {
  fixture_t f;
  fixture_open(&f);
  altar_fleet_client_t *c = client(&f);
  altar_error_t err = {0};
  char job[ALTAR_JOB_ID_BUFSZ];
  const char *good = "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"true\"],\"labels\":{\"model\":\"a\"}}\n"
                     "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"true\"],\"labels\":{\"model\":\"b\"}}\n";
  CU_ASSERT_EQUAL_FATAL(altar_fleet_client_submit_json(c, "shard", good, strlen(good), job, &err), 0);
  CU_ASSERT(strlen(job) > 0);
  CU_ASSERT_EQUAL(count_records(&f, "altar.jobs"), 2);
  /* A bad second spec: refused, naming it and its field, nothing published. */
  const char *bad = "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"true\"]}\n"
                    "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"true\"],\"timeout_s\":0}\n";
  CU_ASSERT_EQUAL(altar_fleet_client_submit_json(c, NULL, bad, strlen(bad), job, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "timeout_s") != NULL);
  CU_ASSERT(strstr(err.msg, ":2") != NULL);
  /* A kind without a group is refused too. */
  const char *orphan = "{\"kind\":\"orphan\",\"image\":\"none\",\"command\":[\"true\"]}";
  CU_ASSERT_EQUAL(altar_fleet_client_submit_json(c, NULL, orphan, strlen(orphan), job, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "orphan") != NULL);
  CU_ASSERT_EQUAL(count_records(&f, "altar.jobs"), 2);
  altar_fleet_client_close(c);
  fixture_close(&f);
}

/* Publishes a fired group event of job with one shard to topic. */
static void publish_group(const fixture_t *f, const char *topic, const char *job, const char *gk,
                          altar_group_event_kind_t kind) {
  altar_handle_t h = {0};
  CU_ASSERT_FATAL(altar_handle_init(&h, "process", gk) == 0);
  altar_strmap_set(&h.labels, "job_id", job);
  altar_group_event_t g = {.v = 1,
                           .event = kind,
                           .event_id = (char *)"e",
                           .kind = (char *)"shard",
                           .group_key = ALTAR__UNCONST(gk),
                           .shards = &h,
                           .n_shards = 1,
                           .ts = 1.5};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_group(&g, &b, &err) == 0);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", f->logdir);
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  altar_produce_rec_t rec = {
      .topic = topic, .partition = 0, .key = gk, .key_len = strlen(gk), .value = b.data, .value_len = b.len};
  CU_ASSERT(altar_transport_produce(t, &rec, &err) == 0);
  CU_ASSERT(altar_transport_flush(t, 10000, &err) == 0);
  altar_transport_close(t);
  altar_buf_free(&b);
  altar_handle_clear(&h);
}

static void test_reader_yields_one_jobs_group_events(void) {
  fixture_t f;
  fixture_open(&f);
  altar_fleet_client_t *c = client(&f);
  altar_error_t err = {0};
  publish_group(&f, "altar.ready", "other-job", "other-job:a", ALTAR_GROUP_FIRED);
  publish_group(&f, "altar.ready", "j1", "j1:a", ALTAR_GROUP_FIRED);
  publish_group(&f, "altar.dead", "j1", "j1:b", ALTAR_GROUP_DEAD_LETTERED);
  altar_group_reader_t *r = altar_group_reader_open(c, "j1", &err);
  CU_ASSERT_FATAL(r != NULL);
  char *seen[2] = {0};
  for (int i = 0; i < 2; i++) {
    char *json = NULL;
    CU_ASSERT_EQUAL(altar_group_reader_next(r, 5000, &json, &err), 1);
    seen[i] = json;
  }
  /* Both of j1's events, in either topic order, and none of the other job. */
  CU_ASSERT_FATAL(seen[0] && seen[1]);
  bool fired = strstr(seen[0], "\"j1:a\"") || strstr(seen[1], "\"j1:a\"");
  bool dead = strstr(seen[0], "\"dead_lettered\"") || strstr(seen[1], "\"dead_lettered\"");
  CU_ASSERT(fired && dead);
  CU_ASSERT(!strstr(seen[0], "other-job") && !strstr(seen[1], "other-job"));
  free(seen[0]);
  free(seen[1]);
  char *json = NULL;
  CU_ASSERT_EQUAL(altar_group_reader_next(r, 200, &json, &err), 0);
  CU_ASSERT(json == NULL);
  bool done = false;
  CU_ASSERT_EQUAL(altar_group_reader_caught_up(r, &done, &err), 0);
  CU_ASSERT(done);
  altar_group_reader_close(r);
  /* Every job's events without a filter; not caught up before reading them. */
  r = altar_group_reader_open(c, NULL, &err);
  CU_ASSERT_FATAL(r != NULL);
  done = true;
  CU_ASSERT_EQUAL(altar_group_reader_caught_up(r, &done, &err), 0);
  CU_ASSERT(!done);
  int n = 0;
  while (altar_group_reader_next(r, 200, &json, &err) == 1) {
    n++;
    free(json);
  }
  CU_ASSERT_EQUAL(n, 3);
  altar_group_reader_close(r);
  altar_fleet_client_close(c);
  fixture_close(&f);
}

static void test_cancel_reaches_every_jobs_and_status_partition(void) {
  fixture_t f;
  fixture_open(&f);
  altar_fleet_client_t *c = client(&f);
  altar_error_t err = {0};
  CU_ASSERT_STRING_EQUAL(altar_fleet_client_ledger_path(c), "./var/ledger");
  CU_ASSERT_EQUAL(altar_fleet_client_cancel(c, "", NULL, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "job_id") != NULL);
  CU_ASSERT_EQUAL(altar_fleet_client_cancel(c, "j1", NULL, &err), 0);
  CU_ASSERT_EQUAL(altar_fleet_client_cancel(c, "j1", "j1:a", &err), 0);
  /* topics.partitions is 2: two messages per topic. */
  CU_ASSERT_EQUAL(count_records(&f, "altar.jobs"), 4);
  CU_ASSERT_EQUAL(count_records(&f, "altar.status"), 4);
  CU_ASSERT_EQUAL(count_records(&f, "altar.ready"), 0);
  altar_fleet_client_close(c);
  fixture_close(&f);
}

static int setup(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  return rc == 0 || rc == ALTAR_EEXIST ? 0 : -1;
}

static void add(void) {
  ALTAR_SUITE("fleet_client", setup, NULL);
  ALTAR_TEST(test_open_errors_name_their_source);
  ALTAR_TEST(test_submit_publishes_one_job_or_nothing);
  ALTAR_TEST(test_reader_yields_one_jobs_group_events);
  ALTAR_TEST(test_cancel_reaches_every_jobs_and_status_partition);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
