/* The worker's intake (worker/intake.h): every refusal reason, the derived
 * size bound at its edge, and the fuzz target's body over a fixed stream of
 * pseudo-random messages of every size (so `make test` runs it too). */
#include "../fuzz/fuzz_intake_body.h"
#include "altar/pools.h"
#include "producer/job_queue.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static altar_spec_t *spec_of(const char *kind) {
  altar_spec_t *s = altar_spec_new(kind, "img");
  altar_spec_add_arg(s, "/bin/true");
  altar_spec_set_label(s, ALTAR_JOB_ID_LABEL, "j-1");
  altar_spec_set_label(s, "fold", "0");
  return s;
}

/* Classifies spec as a job message arriving on topic. */
static void classify(const altar_spec_t *s, const char *topic, altar__intake_t *in) {
  fz_init();
  altar_job_msg_t job = {.v = ALTAR_SCHEMA_VERSION, .job_id = "j-1", .spec = *s, .submitted_at = 1};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_job(&job, &b, &err) == 0);
  altar_msg_t m = {.topic = topic, .value = b.data, .value_len = b.len};
  altar__intake_ctx_t c = {.backend = fz_be, .groups = &fz_groups, .jobs_topic = "jobs"};
  altar__intake_classify(&c, &m, in);
  altar_buf_free(&b);
}

static void expect_refused(altar_spec_t *s, const char *topic, const char *reason, const char *detail_part) {
  altar__intake_t in;
  classify(s, topic, &in);
  CU_ASSERT_EQUAL(in.verdict, ALTAR__INTAKE_REFUSE);
  if (in.verdict == ALTAR__INTAKE_REFUSE) {
    CU_ASSERT_STRING_EQUAL(in.reason, reason);
    if (!strstr(in.detail, detail_part)) fprintf(stderr, "detail: %s\n", in.detail);
    CU_ASSERT(strstr(in.detail, detail_part) != NULL);
    CU_ASSERT_EQUAL(strlen(in.task_key), ALTAR_TASK_KEY_LEN);
  }
  altar__intake_clear(&in);
  altar_spec_free(s);
}

static void test_refusal_reasons(void) {
  altar__intake_t in;
  altar_spec_t *ok = spec_of("shard");
  classify(ok, "jobs", &in);
  CU_ASSERT_EQUAL(in.verdict, ALTAR__INTAKE_RUN);
  altar__intake_clear(&in);
  altar_spec_free(ok);

  altar_spec_t *s = spec_of("shard");
  altar_spec_add_input(s, "file:///etc/passwd", "../../etc/passwd", NULL, NULL);
  expect_refused(s, "jobs", ALTAR_REASON_INVALID_SPEC, "logical_path");

  expect_refused(spec_of("nokind"), "jobs", ALTAR_REASON_NO_GROUP, "configured: shard");

  s = spec_of("shard");
  altar_spec_set_gpu(s, "a100", 1);
  expect_refused(s, "jobs", ALTAR_REASON_UNSERVABLE_POOL, "belongs on jobs.a100"); /* on the CPU topic */
  s = spec_of("shard");
  altar_spec_set_gpu(s, "h100", 1);
  expect_refused(s, "jobs.h100", ALTAR_REASON_UNSERVABLE_POOL, "no pool 'h100'"); /* the backend lost it */
  s = spec_of("shard");
  altar_spec_set_gpu(s, "a100", 1);
  classify(s, "jobs.a100", &in);
  CU_ASSERT_EQUAL(in.verdict, ALTAR__INTAKE_RUN);
  altar__intake_clear(&in);
  altar_spec_free(s);

  /* 3 MiB of labels: the job message fits, its submitted event could not. */
  s = spec_of("shard");
  char *v = malloc(60001);
  memset(v, 'x', 60000);
  v[60000] = 0;
  for (int i = 0; i < 52; i++) {
    char k[8];
    snprintf(k, sizeof k, "l%d", i);
    altar_spec_set_label(s, k, v);
  }
  free(v);
  expect_refused(s, "jobs", ALTAR_REASON_SPEC_TOO_LARGE, "labels");

  /* No readable identity: the DLQ alone. */
  altar_msg_t m = {.topic = "jobs", .value = "\xc1", .value_len = 1};
  altar__intake_ctx_t c = {.backend = fz_be, .groups = &fz_groups, .jobs_topic = "jobs"};
  altar__intake_classify(&c, &m, &in);
  CU_ASSERT_EQUAL(in.verdict, ALTAR__INTAKE_DLQ);
  CU_ASSERT(strstr(in.detail, "undecodable") != NULL);
  altar__intake_clear(&in);
}

/* One label of n bytes beside the fixed ones. */
static altar_spec_t *spec_with_command(size_t n) {
  altar_spec_t *s = spec_of("shard");
  char *v = malloc(ALTAR_MAX_STRING + 1);
  memset(v, 'c', ALTAR_MAX_STRING);
  while (n) {
    size_t l = n < ALTAR_MAX_STRING ? n : ALTAR_MAX_STRING;
    v[l] = 0;
    altar_spec_add_arg(s, v);
    v[l] = 'c';
    n -= l;
  }
  free(v);
  return s;
}

/* The largest spec the bound accepts really has events within the message
 * bound (its worst-case submitted event encodes), and one byte more is
 * refused at submit naming the field and both sizes. */
static void test_size_bound_edge(void) {
  fz_init();
  size_t lo = 1u << 20, hi = 5u << 20; /* lo fits, hi does not */
  altar_error_t err = {0};
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    altar_spec_t *s = spec_with_command(mid);
    if (altar_spec_check_carriable(s, &err) == ALTAR_OK) lo = mid;
    else hi = mid;
    altar_spec_free(s);
  }
  printf("\n  largest command accepted: %zu bytes\n", lo);
  CU_ASSERT(lo > (3u << 20)); /* argv is carried once: most of the bound is usable */
  altar_spec_t *under = spec_with_command(lo), *over = spec_with_command(lo + 1);
  /* Worst case: every field a worker adds at its bound. */
  altar__intake_t in = {.verdict = ALTAR__INTAKE_RUN, .reason = NULL};
  in.job.spec = *under;
  CU_ASSERT_FATAL(altar_spec_identity(under, in.task_key, &err) == 0);
  char topic[ALTAR_BOUND_TOPIC + 1];
  memset(topic, 't', ALTAR_BOUND_TOPIC);
  topic[ALTAR_BOUND_TOPIC] = 0;
  fz_check_events(&in, topic); /* aborts unless it encodes in full within the bound */
  CU_ASSERT_EQUAL(altar_spec_check_carriable(over, &err), ALTAR_ETOOBIG);
  CU_ASSERT(strstr(err.msg, "command") != NULL);
  char want[64];
  snprintf(want, sizeof want, "%u", ALTAR_MAX_MESSAGE);
  CU_ASSERT(strstr(err.msg, want) != NULL);

  /* Through the JobQueue: refused before anything is published. */
  altar_spec_t v[1] = {*over};
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  altar_job_queue_t q = {.transport = NULL, .topics = &topics, .groups = &fz_groups};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  CU_ASSERT_EQUAL(altar__job_queue_submit(&q, NULL, v, 1, run_id, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "specs[0]") && strstr(err.msg, "command"));
  altar_spec_free(under);
  altar_spec_free(over);
}

static void test_group_width_bound(void) {
  fz_init();
  /* 80 shards of one group: a group event of any width goes out (paged), but
   * a kind's max_width bounds how many shards one group may have. */
  size_t n = 80;
  altar_spec_t *v = calloc(n, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    altar_spec_t *s = spec_of("shard");
    char fold[16];
    snprintf(fold, sizeof fold, "%zu", i);
    altar_spec_set_label(s, "n", fold);
    v[i] = *s;
    free(s);
  }
  /* group_by [job_id, fold]: one group (fold "0") of 80. */
  altar_group_spec_t *gs = altar_group_specs_find_mut(&fz_groups, "shard");
  CU_ASSERT_FATAL(gs != NULL);
  gs->max_width = 79;
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  altar_job_queue_t q = {.transport = NULL, .topics = &topics, .groups = &fz_groups};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__job_queue_submit(&q, NULL, v, n, run_id, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "80 shards, more than groups.shard.max_width (79)") != NULL);
  gs->max_width = 0;
  for (size_t i = 0; i < n; i++) altar_spec_clear(&v[i]);
  free(v);
}

static void test_kinds_checked_by_queue(void) {
  fz_init();
  altar_spec_t *s = spec_of("nokind");
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  altar_job_queue_t q = {.transport = NULL, .topics = &topics, .groups = &fz_groups};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__job_queue_submit(&q, NULL, s, 1, run_id, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "'nokind' has no group config") && strstr(err.msg, "configured kinds: shard"));
  altar_spec_free(s);
  s = spec_of("shard");
  altar_spec_set_gpu(s, "a.b", 1);
  CU_ASSERT_EQUAL(altar__job_queue_submit(&q, NULL, s, 1, run_id, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "resources.gpu") != NULL);
  altar_spec_free(s);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void test_fuzz_body_stream(void) {
  uint8_t *buf = malloc(8192);
  CU_ASSERT_FATAL(buf != NULL);
  for (int i = 0; i < 3000; i++) {
    size_t n = next() % 8192;
    for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)next();
    fuzz_intake_one(buf, n);
  }
  /* Grown jobs around the bound: labels from 0 to 5 MiB. */
  for (size_t total = 0; total < (5u << 20); total += 397u << 10) {
    uint8_t d[16] = {1, (uint8_t)(total >> 16), (uint8_t)(total >> 8), (uint8_t)total, 1, 'q', 'r', 's'};
    fuzz_intake_one(d, sizeof d);
    d[4] = 7; /* for a100, on either topic */
    fuzz_intake_one(d, sizeof d);
  }
  free(buf);
  CU_PASS("no crash, and every readable identity got an outcome that encodes");
}

static void add(void) {
  ALTAR_SUITE("worker_intake", NULL, NULL);
  ALTAR_TEST(test_refusal_reasons);
  ALTAR_TEST(test_size_bound_edge);
  ALTAR_TEST(test_group_width_bound);
  ALTAR_TEST(test_kinds_checked_by_queue);
  ALTAR_TEST(test_fuzz_body_stream);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
