/* The JobQueue: parsing specs (one object, an array, JSON Lines; a bad spec
 * names its line and field and rejects the whole batch) and submitting
 * them (job id stamped, keyed by task identity, acknowledged before the
 * call returns) on the local transport. */
#include "altar/codec.h"
#include "altar/task.h"
#include "altar/plugin/transport.h"
#include "producer/job_queue.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC(fold)                                                                                                     \
  "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"/bin/true\", \"" fold "\"], "                            \
  "\"labels\": {\"fold\": \"" fold "\"}}"

static altar_transport_t *open_local(const char *dir, const altar_transport_opts_t *opts) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, opts, &err);
  if (!t) fprintf(stderr, "open local: %s\n", err.msg);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

static void free_specs(altar_spec_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) altar_spec_clear(&v[i]);
  free(v);
}

static int parse(const char *text, altar_spec_t **pv, size_t *pn, altar_error_t *err) {
  return altar__specs_parse(text, strlen(text), "specs.jsonl", pv, pn, err);
}

static void test_parse_single_object(void) {
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  /* A single object may span several lines. */
  const char *text = "{\n  \"kind\": \"shard\",\n  \"image\": \"none\",\n  \"command\": [\"/bin/true\"]\n}\n";
  CU_ASSERT_FATAL(parse(text, &v, &n, &err) == 0);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_STRING_EQUAL(v[0].kind, "shard");
  CU_ASSERT_EQUAL(v[0].n_command, 1);
  free_specs(v, n);
}

static void test_parse_array(void) {
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(parse("[" SPEC("0") ",\n" SPEC("1") ", " SPEC("2") "]", &v, &n, &err) == 0);
  CU_ASSERT_EQUAL(n, 3);
  for (size_t i = 0; i < n; i++) {
    char want[4];
    snprintf(want, sizeof want, "%zu", i);
    CU_ASSERT_STRING_EQUAL(altar_strmap_get(&v[i].labels, "fold"), want);
  }
  free_specs(v, n);
  /* A bad element names its index and field; nothing is returned. */
  CU_ASSERT(parse("[" SPEC("0") ", {\"kind\": \"shard\", \"command\": [\"x\"]}]", &v, &n, &err) != 0);
  CU_ASSERT(v == NULL && n == 0);
  CU_ASSERT(strstr(err.msg, "[1]") != NULL);
  CU_ASSERT(strstr(err.msg, "image") != NULL);
}

static void test_parse_json_lines_with_blank_lines(void) {
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  const char *text = "\n" SPEC("0") "\n\n   \t\r\n" SPEC("1") "\r\n" SPEC("2");
  CU_ASSERT_FATAL(parse(text, &v, &n, &err) == 0);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&v[2].labels, "fold"), "2");
  free_specs(v, n);
}

static void test_parse_bad_line_names_line_and_field(void) {
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  /* Line 4 (blank lines count) has a number where the image string goes. */
  const char *text =
      SPEC("0") "\n" SPEC("1") "\n\n"
                               "{\"kind\": \"shard\", \"image\": 7, \"command\": [\"x\"]}\n" SPEC("3") "\n";
  CU_ASSERT(parse(text, &v, &n, &err) != 0);
  CU_ASSERT(v == NULL && n == 0);
  CU_ASSERT(strstr(err.msg, "specs.jsonl:4") != NULL);
  CU_ASSERT(strstr(err.msg, "image") != NULL);
  /* An invalid (not malformed) spec: an escaping logical path. */
  text = SPEC("0") "\n{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"x\"], \"inputs\": "
                   "[{\"uri\": \"file:///etc/passwd\", \"logical_path\": \"../../etc/passwd\"}]}\n";
  CU_ASSERT(parse(text, &v, &n, &err) != 0);
  CU_ASSERT(v == NULL && n == 0);
  CU_ASSERT(strstr(err.msg, "specs.jsonl:2") != NULL);
  CU_ASSERT(strstr(err.msg, "logical_path") != NULL);
  /* Not JSON at all on line 2. */
  CU_ASSERT(parse(SPEC("0") "\nnot json\n", &v, &n, &err) != 0);
  CU_ASSERT(strstr(err.msg, "specs.jsonl:2") != NULL);
  /* Nothing at all. */
  CU_ASSERT(parse(" \n\n", &v, &n, &err) != 0);
  CU_ASSERT(strstr(err.msg, "no spec") != NULL);
}

/* ---- submit ----------------------------------------------------------- */

typedef struct jrec {
  char *key;
  altar_job_msg_t job;
} jrec_t;

/* Every job message on the topic (all partitions), decoded. */
static size_t read_jobs(const char *dir, const char *topic, jrec_t *out, size_t max) {
  altar_transport_t *t = open_local(dir, NULL);
  altar_error_t err = {0};
  altar_topic_list_t *tl = NULL;
  size_t n = 0;
  if (altar_transport_list_topics(t, topic, 5000, &tl, &err) != 0) {
    altar_transport_close(t);
    return 0;
  }
  const altar_topic_info_t *ti = &tl->topics[0];
  int64_t want = 0;
  altar_tp_t tps[64];
  CU_ASSERT_FATAL(ti->n_partitions <= 64);
  for (size_t p = 0; p < ti->n_partitions; p++) {
    want += ti->partitions[p].end - ti->partitions[p].beginning;
    tps[p] = (altar_tp_t){topic, ti->partitions[p].partition, ALTAR_OFFSET_BEGINNING};
  }
  CU_ASSERT_FATAL(altar_transport_assign(t, tps, ti->n_partitions, &err) == 0);
  while (want > 0) {
    altar_msg_t *m = NULL;
    CU_ASSERT_FATAL(altar_transport_consume(t, 1000, &m, &err) == 0);
    if (!m) continue;
    want--;
    CU_ASSERT_FATAL(n < max);
    out[n].key = m->key ? strndup(m->key, m->key_len) : NULL;
    memset(&out[n].job, 0, sizeof out[n].job);
    CU_ASSERT(altar_decode_job(m->value, m->value_len, &out[n].job, &err) == 0);
    n++;
    altar_msg_free(m);
  }
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return n;
}

static void jrecs_clear(jrec_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].key);
    altar_job_msg_clear(&v[i].job);
  }
}

/* A delivery callback the caller had installed: submit must put it back. */
static int caller_reports;
static void caller_dr(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)dr;
  (void)ctx;
  caller_reports++;
}

static void test_submit_stamps_keys_and_waits(void) {
  char *root = altar_test_tmpdir("jobq-submit");
  altar_transport_opts_t to = {.on_delivery = caller_dr};
  altar_transport_t *t = open_local(root, &to);
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  altar_job_queue_t q = {.transport = t, .topics = &topics, .partitions = 3};
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(parse(SPEC("0") "\n" SPEC("1") "\n" SPEC("2") "\n" SPEC("3") "\n", &v, &n, &err) == 0);
  char run_id[ALTAR_RUN_ID_MAX + 1] = "";
  int rc = altar__job_queue_submit(&q, "shard", v, n, run_id, &err);
  if (rc) fprintf(stderr, "submit: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT(strlen(run_id) > 2);
  CU_ASSERT_EQUAL(caller_reports, 0); /* the reports were submit's */
  altar_delivery_cb now_cb = NULL;
  void *now_ctx = NULL;
  altar_transport_set_delivery(t, NULL, NULL, &now_cb, &now_ctx); /* read it back ... */
  altar_transport_set_delivery(t, now_cb, now_ctx, NULL, NULL);   /* ... and put it back */
  CU_ASSERT(now_cb == caller_dr);
  /* Acknowledged before the call returned: a fresh reader sees all of them
   * while the producing handle is still open. */
  jrec_t got[16];
  size_t ng = read_jobs(root, "jobs", got, 16);
  CU_ASSERT_FATAL(ng == 4);
  for (size_t i = 0; i < ng; i++) {
    CU_ASSERT_STRING_EQUAL(got[i].job.job_id, run_id);
    CU_ASSERT_STRING_EQUAL(altar_strmap_get(&got[i].job.spec.labels, ALTAR_JOB_ID_LABEL), run_id);
    CU_ASSERT_EQUAL(got[i].job.attempt, 0);
    /* Keyed by task identity (with the job id label in it). */
    char key[ALTAR_TASK_KEY_LEN + 1];
    CU_ASSERT_FATAL(altar_spec_identity(&got[i].job.spec, key, &err) == 0);
    CU_ASSERT(got[i].key && !strcmp(got[i].key, key));
    /* The spec submitted carries the stamp too. */
    bool found = false;
    for (size_t k = 0; k < n; k++) found |= altar_spec_same_identity(&v[k], &got[i].job.spec);
    CU_ASSERT(found);
  }
  jrecs_clear(got, ng);
  free_specs(v, n);

  /* Specs that all carry one job id keep it. */
  CU_ASSERT_FATAL(parse(SPEC("7"), &v, &n, &err) == 0);
  altar_spec_set_label(&v[0], ALTAR_JOB_ID_LABEL, "my-job-1");
  CU_ASSERT_FATAL(altar__job_queue_submit(&q, NULL, v, n, run_id, &err) == 0);
  CU_ASSERT_STRING_EQUAL(run_id, "my-job-1");
  free_specs(v, n);
  ng = read_jobs(root, "jobs", got, 16);
  CU_ASSERT_EQUAL(ng, 5);
  jrecs_clear(got, ng);
  altar_transport_close(t);
  altar_test_rmtree(root);
  free(root);
}

static void test_submit_rejects_before_publishing(void) {
  char *root = altar_test_tmpdir("jobq-reject");
  altar_transport_t *t = open_local(root, NULL);
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  altar_job_queue_t q = {.transport = t, .topics = &topics};
  altar_spec_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(parse(SPEC("0") "\n" SPEC("1") "\n", &v, &n, &err) == 0);
  char run_id[ALTAR_RUN_ID_MAX + 1];
  /* The wrong kind for the job. */
  CU_ASSERT(altar__job_queue_submit(&q, "other", v, n, run_id, &err) == ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "specs[0].kind") != NULL);
  /* The second spec turned invalid: nothing at all is published. */
  free(v[1].image);
  v[1].image = NULL;
  CU_ASSERT(altar__job_queue_submit(&q, "shard", v, n, run_id, &err) != 0);
  CU_ASSERT(strstr(err.msg, "specs[1]") != NULL);
  /* A spec without kind is rejected, not dereferenced. */
  free(v[0].kind);
  v[0].kind = NULL;
  CU_ASSERT(altar__job_queue_submit(&q, "shard", v, n, run_id, &err) != 0);
  CU_ASSERT(strstr(err.msg, "kind") != NULL);
  CU_ASSERT(altar__job_queue_submit(&q, "shard", v, 0, run_id, &err) == ALTAR_EINVAL);
  jrec_t got[4];
  CU_ASSERT_EQUAL(read_jobs(root, "jobs", got, 4), 0);
  free_specs(v, n);
  altar_transport_close(t);
  altar_test_rmtree(root);
  free(root);
}

static int setup(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  return rc == 0 || rc == ALTAR_EEXIST ? 0 : -1;
}

static void add(void) {
  ALTAR_SUITE("job_queue", setup, NULL);
  ALTAR_TEST(test_parse_single_object);
  ALTAR_TEST(test_parse_array);
  ALTAR_TEST(test_parse_json_lines_with_blank_lines);
  ALTAR_TEST(test_parse_bad_line_names_line_and_field);
  ALTAR_TEST(test_submit_stamps_keys_and_waits);
  ALTAR_TEST(test_submit_rejects_before_publishing);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
