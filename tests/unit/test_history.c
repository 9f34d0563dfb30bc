/* The reconciler's hour in memory (reconciler/history.h): counts land in the
 * 10 s bucket of their time, the JSON holds exactly the last hour (older
 * buckets are reused, never shown), failure reasons are bounded (beyond the
 * table "other", and a name the hour no longer counts is reused), and the
 * lag is the newest value seen in a bucket. Times are given, never read. */
#include "reconciler/history.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#define T0 1700000000.0 /* a bucket boundary (divisible by 10) */

static json_int_t at(json_t *o, const char *series, size_t i) {
  return json_integer_value(json_array_get(json_object_get(o, series), i));
}
static json_int_t total(json_t *o, const char *what) {
  return json_integer_value(json_object_get(json_object_get(o, "totals"), what));
}

static void test_buckets_and_totals(void) {
  altar_history_t *h = altar_history_new();
  CU_ASSERT_FATAL(h != NULL);
  altar_history_add(h, T0 + 1, 3, 1, 0);
  altar_history_add(h, T0 + 9.9, 2, 0, 1); /* same bucket */
  altar_history_add(h, T0 + 10, 5, 0, 0);  /* the next one */
  altar_history_failure(h, T0 + 10, "exit_3");
  altar_history_failure(h, T0 + 11, "exit_3");
  altar_history_failure(h, T0 + 12, NULL);
  altar_history_lag(h, T0 + 10, 7);
  altar_history_lag(h, T0 + 15, 4); /* newest wins */
  json_t *o = altar_history_json(h, T0 + 15);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "bucket_s")), ALTAR_HISTORY_BUCKET_S);
  CU_ASSERT_EQUAL(json_array_size(json_object_get(o, "finished")), ALTAR_HISTORY_BUCKETS);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "start")), (json_int_t)T0 + 10 - 3590);
  size_t last = ALTAR_HISTORY_BUCKETS - 1;
  CU_ASSERT_EQUAL(at(o, "finished", last - 1), 5);
  CU_ASSERT_EQUAL(at(o, "fired", last - 1), 1);
  CU_ASSERT_EQUAL(at(o, "dead_lettered", last - 1), 1);
  CU_ASSERT_EQUAL(at(o, "finished", last), 5);
  CU_ASSERT_EQUAL(at(o, "lag", last), 4);
  CU_ASSERT_TRUE(json_is_null(json_array_get(json_object_get(o, "lag"), last - 1)));
  CU_ASSERT_EQUAL(total(o, "finished"), 10);
  CU_ASSERT_EQUAL(total(o, "fired"), 1);
  CU_ASSERT_EQUAL(total(o, "dead_lettered"), 1);
  json_t *ft = json_object_get(json_object_get(o, "totals"), "failures");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(ft, "exit_3")), 2);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(ft, "unknown")), 1);
  CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(json_object_get(o, "failures"), "exit_3"), last)),
                  2);
  json_decref(o);
  altar_history_free(h);
  altar_history_free(NULL);
  altar_history_add(NULL, T0, 1, 1, 1); /* no-ops */
}

static void test_only_the_last_hour(void) {
  altar_history_t *h = altar_history_new();
  altar_history_add(h, T0, 4, 0, 0);
  altar_history_failure(h, T0, "timeout");
  /* An hour and a bucket later the old bucket is out of the window... */
  double later = T0 + 3600 + 10;
  json_t *o = altar_history_json(h, later);
  CU_ASSERT_EQUAL(total(o, "finished"), 0);
  CU_ASSERT_EQUAL(json_object_size(json_object_get(o, "failures")), 0);
  json_decref(o);
  /* ... and its slot, written again, starts empty. */
  altar_history_add(h, T0 + 3600, 1, 0, 0);
  o = altar_history_json(h, T0 + 3600);
  CU_ASSERT_EQUAL(total(o, "finished"), 1);
  CU_ASSERT_EQUAL(at(o, "finished", ALTAR_HISTORY_BUCKETS - 1), 1);
  json_decref(o);
  altar_history_free(h);
}

static void test_reasons_are_bounded(void) {
  altar_history_t *h = altar_history_new();
  char r[32];
  for (int i = 0; i < ALTAR_HISTORY_REASONS_MAX + 5; i++) {
    snprintf(r, sizeof r, "exit_%d", i);
    altar_history_failure(h, T0, r);
  }
  json_t *o = altar_history_json(h, T0);
  json_t *ft = json_object_get(json_object_get(o, "totals"), "failures");
  CU_ASSERT_EQUAL(json_object_size(ft), ALTAR_HISTORY_REASONS_MAX + 1);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(ft, "other")), 5);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(ft, "exit_0")), 1);
  json_decref(o);
  /* An hour on, the old names count nothing: a new reason gets a name of its own. */
  altar_history_failure(h, T0 + 3700, "oom_killed");
  o = altar_history_json(h, T0 + 3700);
  ft = json_object_get(json_object_get(o, "totals"), "failures");
  CU_ASSERT_EQUAL(json_object_size(ft), 1);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(ft, "oom_killed")), 1);
  json_decref(o);
  /* A long reason is cut, not refused. */
  char longr[200];
  memset(longr, 'x', sizeof longr - 1);
  longr[sizeof longr - 1] = 0;
  altar_history_failure(h, T0 + 3700, longr);
  o = altar_history_json(h, T0 + 3700);
  ft = json_object_get(json_object_get(o, "totals"), "failures");
  const char *k;
  json_t *v;
  bool found = false;
  json_object_foreach(ft, k, v) found |= strlen(k) == ALTAR_HISTORY_REASON_LEN - 1 && json_integer_value(v) == 1;
  CU_ASSERT_TRUE(found);
  json_decref(o);
  altar_history_free(h);
}

static void add(void) {
  ALTAR_SUITE("history", NULL, NULL);
  ALTAR_TEST(test_buckets_and_totals);
  ALTAR_TEST(test_only_the_last_hour);
  ALTAR_TEST(test_reasons_are_bounded);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
