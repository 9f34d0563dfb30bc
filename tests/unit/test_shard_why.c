/* Why a shard is not running (dashboard/shard_why.h): each reason from the
 * facts that make it, the order between them when several hold, the
 * details each carries, and its line for a person. */
#include "altar/spec.h"
#include "altar/task.h"
#include "dashboard/shard_why.h"
#include "testutil.h"

#include <string.h>

/* A shard with no record on its jobs topic, nothing known against it. */
static altar_why_facts_t queued(void) {
  return (altar_why_facts_t){.now = 1000,
                             .state = -1,
                             .pool = ALTAR_POOL_CPU,
                             .pool_workers = -1,
                             .pool_free = -1,
                             .shards_ahead = -1,
                             .jobs_ahead = -1};
}

static void test_names_are_stable(void) {
  const char *want[ALTAR_WHY_COUNT] = {"none",      "cancelled", "group_held", "lease",        "starting", "backoff",
                                       "forwarded", "no_worker", "behind",     "no_free_slot", "queued"};
  for (int r = 0; r < ALTAR_WHY_COUNT; r++) CU_ASSERT_STRING_EQUAL(altar__why_name((altar_why_reason_t)r), want[r]);
  CU_ASSERT_STRING_EQUAL(altar__why_name(ALTAR_WHY_COUNT), "none");
}

static void test_queue_reasons(void) {
  altar_why_facts_t f = queued();
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_QUEUED);
  f.pool_free = 0;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NO_FREE_SLOT);
  f.shards_ahead = 3, f.jobs_ahead = 2;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_BEHIND); /* waiting behind others says more than "busy" */
  f.pool_workers = 0;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NO_WORKER); /* nobody will ever take it as things are */
  f.forwarded_by = "w1";
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_FORWARDED);
  f = queued();
  f.shards_ahead = 0, f.pool_workers = 2, f.pool_free = 1;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_QUEUED);
}

static void test_recorded_reasons(void) {
  altar_why_facts_t f = queued();
  f.state = ALTAR_STATE_RUNNING;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f.run_worker = "w1", f.run_worker_live = true;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f.run_worker_live = false;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_LEASE);
  f.state = ALTAR_STATE_PENDING;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_LEASE);
  f.run_worker_live = true;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_STARTING);
  /* A retry put back to pending: its due time first, then its queue. */
  f = queued();
  f.state = ALTAR_STATE_PENDING, f.retry_due = 1500;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_BACKOFF);
  f.retry_due = 999; /* due already: back on its jobs topic */
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_QUEUED);
  f.pool_workers = 0;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NO_WORKER);
}

static void test_finished_cancelled_and_held(void) {
  altar_why_facts_t f = queued();
  f.state = ALTAR_STATE_SUCCEEDED;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f.held_error = "num_folds: missing";
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_GROUP_HELD);
  f.consumed = true; /* the group decided since */
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f = queued();
  f.state = ALTAR_STATE_FAILED, f.failure_reason = ALTAR_REASON_TIMEOUT;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f.failure_reason = ALTAR_REASON_CANCELLED;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_CANCELLED);
  /* A cancelled job: what had not finished will not run; what finished or
   * runs keeps its own state. */
  f = queued();
  f.group_cancelled = true, f.pool_workers = 0;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_CANCELLED);
  f.state = ALTAR_STATE_PENDING, f.retry_due = 2000;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_CANCELLED);
  f.state = ALTAR_STATE_SUCCEEDED;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
  f.state = ALTAR_STATE_RUNNING;
  CU_ASSERT_EQUAL(altar__why_decide(&f), ALTAR_WHY_NONE);
}

static void test_json_details(void) {
  altar_why_facts_t f = queued();
  f.state = ALTAR_STATE_SUCCEEDED;
  json_t *j = altar__why_json(&f);
  CU_ASSERT(json_is_null(j));
  json_decref(j);
  f = queued();
  f.pool = "a100", f.pool_free = 0, f.shards_ahead = 5, f.jobs_ahead = 2;
  j = altar__why_json(&f);
  char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  CU_ASSERT_STRING_EQUAL(text, "{\"jobs_ahead\":2,\"pool\":\"a100\",\"reason\":\"behind\",\"shards_ahead\":5}");
  char line[256];
  altar__why_text(j, line, sizeof line);
  CU_ASSERT_STRING_EQUAL(line, "behind: 2 earlier jobs (5 shards) ahead in its partition of pool a100");
  free(text);
  json_decref(j);
  f = queued();
  f.state = ALTAR_STATE_PENDING, f.retry_due = 1796486645.5;
  j = altar__why_json(&f);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "reason")), "backoff");
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(j, "until")), 1796486645.5, 1e-6);
  altar__why_text(j, line, sizeof line);
  CU_ASSERT_STRING_EQUAL(line, "backoff: retry due at 2026-12-05 16:04:05 UTC");
  json_decref(j);
  f = queued();
  f.state = ALTAR_STATE_SUCCEEDED, f.held_error = "no count", f.group = "train:j-1";
  j = altar__why_json(&f);
  text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  CU_ASSERT_STRING_EQUAL(text, "{\"error\":\"no count\",\"group\":\"train:j-1\",\"reason\":\"group_held\"}");
  free(text);
  json_decref(j);
  f = queued();
  f.state = ALTAR_STATE_RUNNING, f.run_worker = "w9";
  j = altar__why_json(&f);
  text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  CU_ASSERT_STRING_EQUAL(text, "{\"reason\":\"lease\",\"worker\":\"w9\"}");
  free(text);
  json_decref(j);
  f = queued();
  f.forwarded_by = "w2";
  j = altar__why_json(&f);
  altar__why_text(j, line, sizeof line);
  CU_ASSERT_STRING_EQUAL(line, "forwarded: by w2 (no free slot there) to a worker with one");
  json_decref(j);
  /* A tiny buffer is cut, never overrun. */
  char tiny[8];
  j = json_pack("{s:s, s:s}", "reason", "no_worker", "pool", "h100");
  altar__why_text(j, tiny, sizeof tiny);
  CU_ASSERT_STRING_EQUAL(tiny, "no_work");
  json_decref(j);
}

/* Two topics' partitions interleaved: each message of job "me" counts the
 * waiting messages of other jobs before it in its own topic partition only,
 * and the jobs among them as runs. */
static void test_ahead_per_partition(void) {
  altar_why_waiting_t v[] = {
      {"jobs", "me", "m3", 0, 40, 0, 0},     {"jobs", "a", "a1", 0, 10, 0, 0}, {"jobs.h100", "b", "b1", 0, 5, 0, 0},
      {"jobs", "b", "b2", 0, 20, 0, 0},      {"jobs", "me", "m1", 0, 5, 0, 0}, {"jobs", "a", "a2", 0, 11, 0, 0},
      {"jobs.h100", "me", "m4", 0, 9, 0, 0}, {"jobs", "me", "m2", 1, 3, 0, 0}, {"jobs", "c", "c1", 1, 1, 0, 0},
      {"jobs", "me", "m5", 0, 30, 0, 0},
  };
  size_t n = sizeof v / sizeof *v;
  altar__why_ahead(v, n, "me");
  struct {
    const char *tk;
    int64_t shards, jobs;
  } want[] = {
      {"m1", 0, 0}, /* first in jobs/0 */
      {"m5", 3, 2}, /* a1 a2 (job a), b2 (job b) */
      {"m3", 3, 2}, /* the same three: its own job's m5 is not counted */
      {"m4", 1, 1}, /* b1 in jobs.h100/0 */
      {"m2", 1, 1}, /* c1 in jobs/1 */
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
    const altar_why_waiting_t *at = NULL;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(v[i].task_key, want[k].tk)) at = &v[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    CU_ASSERT_EQUAL(at->shards_ahead, want[k].shards);
    CU_ASSERT_EQUAL(at->jobs_ahead, want[k].jobs);
    /* Found again by its position, as the pages look it up. */
    CU_ASSERT_PTR_EQUAL(altar__why_waiting_find(v, n, at->topic, at->partition, at->offset), at);
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].job, "me")) CU_ASSERT_EQUAL(v[i].shards_ahead, -1);
  CU_ASSERT_PTR_NULL(altar__why_waiting_find(v, n, "jobs", 0, 6));
  CU_ASSERT_PTR_NULL(altar__why_waiting_find(v, n, "jobs.a100", 0, 5));
  CU_ASSERT_PTR_NULL(altar__why_waiting_find(v, n, NULL, 0, 5));
  CU_ASSERT_PTR_NULL(altar__why_waiting_find(v, 0, "jobs", 0, 5));
  altar__why_ahead(NULL, 0, "me"); /* nothing waits: nothing to do */
}

static void add(void) {
  ALTAR_SUITE("shard_why", NULL, NULL);
  ALTAR_TEST(test_names_are_stable);
  ALTAR_TEST(test_queue_reasons);
  ALTAR_TEST(test_recorded_reasons);
  ALTAR_TEST(test_finished_cancelled_and_held);
  ALTAR_TEST(test_json_details);
  ALTAR_TEST(test_ahead_per_partition);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
