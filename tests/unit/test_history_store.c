/* The reconciler's hour in the ledger's side keys (reconciler/history_store.h):
 * what one history saves, another (a dashboard in another process) reads
 * back into the same JSON counts, failures by reason included; a saved
 * bucket keeps the reader's own lag when it has none; keys stay bounded
 * (one per slot of the hour); a restarted reconciler loads them back; a
 * bad value is not a bucket; a bucket older
 * than the hour, or than what its slot holds, is ignored. Times are given. */
#include "altar/ledger.h"
#include "reconciler/history_store.h"
#include "testutil.h"

#include <string.h>

#define T0 1700000000.0 /* a bucket boundary */

typedef struct scan {
  altar_history_t *into;
  double now;
  size_t keys, decoded;
} scan_t;

static int visit(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)key, (void)klen;
  scan_t *s = ctx;
  altar_history_bucket_t b;
  s->keys++;
  if (altar__history_decode(val, vlen, &b)) s->decoded++, altar__history_bucket_put(s->into, &b, s->now);
  return 0;
}

static json_t *totals(altar_history_t *h, double now) {
  json_t *o = altar_history_json(h, now);
  json_t *t = json_deep_copy(json_object_get(o, "totals"));
  json_decref(o);
  return t;
}

static void test_round_trip(void) {
  altar_history_t *rec = altar_history_new(), *dash = altar_history_new();
  altar_ledger_t *l = altar_ledger_memory_open(NULL);
  CU_ASSERT_FATAL(rec && dash && l);
  altar_history_add(rec, T0 + 1, 4, 1, 0);
  altar_history_failure(rec, T0 + 2, "exit_3");
  altar_history_add(rec, T0 + 12, 2, 0, 1);
  altar_history_failure(rec, T0 + 13, "timed out\nwith a newline");
  altar_history_lag(rec, T0 + 13, 7);
  altar_history_lag(dash, T0 + 3, 5); /* the dashboard's own lag in a bucket the reconciler saw none in */
  altar_error_t e = {0};
  CU_ASSERT_EQUAL(altar__history_save(rec, l, T0 + 15, &e), ALTAR_OK);
  scan_t s = {.into = dash, .now = T0 + 15};
  CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, ALTAR_HISTORY_PREFIX, strlen(ALTAR_HISTORY_PREFIX), visit, &s, &e),
                  ALTAR_OK);
  CU_ASSERT_EQUAL(s.keys, 2);
  CU_ASSERT_EQUAL(s.decoded, 2);
  json_t *a = totals(rec, T0 + 15), *b = totals(dash, T0 + 15);
  /* The same reasons, a newline in one read back as a space (a value is one line per reason). */
  CU_ASSERT_EQUAL(json_object_size(json_object_get(a, "failures")), json_object_size(json_object_get(b, "failures")));
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(b, "failures"), "timed out with a newline")), 1);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "finished")), 6);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "fired")), 1);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "dead_lettered")), 1);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(b, "failures"), "exit_3")), 1);
  json_decref(a);
  json_decref(b);
  json_t *o = altar_history_json(dash, T0 + 15);
  json_t *lag = json_object_get(o, "lag");
  size_t n = json_array_size(lag);
  CU_ASSERT_EQUAL(json_integer_value(json_array_get(lag, n - 2)), 5); /* kept: the saved bucket had none */
  CU_ASSERT_EQUAL(json_integer_value(json_array_get(lag, n - 1)), 7);
  json_decref(o);
  /* Read again: the same counts, not twice them. */
  s = (scan_t){.into = dash, .now = T0 + 15};
  altar_ledger_aux_scan(l, ALTAR_HISTORY_PREFIX, strlen(ALTAR_HISTORY_PREFIX), visit, &s, &e);
  b = totals(dash, T0 + 15);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "finished")), 6);
  json_decref(b);
  /* A restarted reconciler loads what its previous life kept. */
  altar_history_t *again = altar_history_new();
  CU_ASSERT_EQUAL(altar__history_load(again, l, T0 + 15, &e), ALTAR_OK);
  b = totals(again, T0 + 15);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "finished")), 6);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(b, "failures"), "exit_3")), 1);
  json_decref(b);
  altar_history_free(again);
  /* An hour of saves keeps one key per slot. */
  for (int i = 0; i < 2 * ALTAR_HISTORY_BUCKETS; i++) {
    altar_history_add(rec, T0 + 10.0 * i, 1, 0, 0);
    altar__history_save(rec, l, T0 + 10.0 * i, &e);
  }
  s = (scan_t){.into = altar_history_new(), .now = T0 + 10.0 * (2 * ALTAR_HISTORY_BUCKETS - 1)};
  altar_ledger_aux_scan(l, ALTAR_HISTORY_PREFIX, strlen(ALTAR_HISTORY_PREFIX), visit, &s, &e);
  CU_ASSERT_EQUAL(s.keys, ALTAR_HISTORY_BUCKETS);
  altar_history_free(s.into);
  altar_ledger_close(l);
  altar_history_free(rec);
  altar_history_free(dash);
}

static void test_bad_and_old(void) {
  altar_history_bucket_t b;
  CU_ASSERT_FALSE(altar__history_decode("", 0, &b));
  CU_ASSERT_FALSE(altar__history_decode("v2 1 2 3 4 5\n", 13, &b));
  CU_ASSERT_FALSE(altar__history_decode("v1 1 2 3\n", 9, &b));
  CU_ASSERT_FALSE(altar__history_decode("v1 1 2 3 4 5 6\n", 15, &b));
  CU_ASSERT_FALSE(altar__history_decode("v1 -4 2 3 4 5\n", 14, &b));
  CU_ASSERT_FALSE(altar__history_decode("v1 1 2 3 4 5\nnot-a-count\n", 25, &b));
  CU_ASSERT_TRUE(altar__history_decode("v1 1 2 3 4 -1\n9 exit_1\n", 23, &b));
  CU_ASSERT_EQUAL(b.n_failures, 1);
  CU_ASSERT_STRING_EQUAL(b.failures[0].reason, "exit_1");
  altar_history_t *h = altar_history_new();
  altar_history_add(h, T0 + 3600, 1, 0, 0); /* the slot of T0 now holds a later span */
  altar_history_bucket_t old = {.index = (int64_t)(T0 / ALTAR_HISTORY_BUCKET_S), .finished = 50, .lag = -1};
  altar__history_bucket_put(h, &old, T0 + 3600);
  json_t *o = altar_history_json(h, T0 + 3600);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(o, "totals"), "finished")), 1);
  json_decref(o);
  altar_history_free(h);
}

static void add(void) {
  ALTAR_SUITE("history_store", NULL, NULL);
  ALTAR_TEST(test_round_trip);
  ALTAR_TEST(test_bad_and_old);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
