/* The dashboard's filters (dashboard/shard_filter.h): each parameter is
 * checked and bounded with an error naming it, the states each page takes,
 * and a shard matched on state, kind, a whole label line and its worker. */
#include "dashboard/shard_filter.h"
#include "testutil.h"

#include <string.h>

static int parse(altar_fleet_query_t q, bool for_jobs, altar_shard_filter_t *f, altar_error_t *e) {
  *e = (altar_error_t){0};
  return altar__shard_filter_parse(&q, for_jobs, f, e);
}

static void test_bad_values_name_their_parameter(void) {
  altar_shard_filter_t f;
  altar_error_t e;
  char long_value[ALTAR_SHARD_FILTER_VALUE_MAX + 2];
  memset(long_value, 'k', sizeof long_value - 1);
  long_value[sizeof long_value - 1] = 0;
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.state = "bogus"}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "state:"));
  /* A shard's state is not a job's, and the other way round. */
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.state = "succeeded"}, true, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.state = "fired"}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "nokv"}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "label:"));
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "=v"}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "a=b\nc=d"}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.kind = ""}, false, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "kind:"));
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.worker = long_value}, true, &f, &e), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "worker:"));
  long_value[ALTAR_SHARD_FILTER_VALUE_MAX] = 0; /* exactly the bound: taken */
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.worker = long_value}, true, &f, &e), ALTAR_OK);
  CU_ASSERT_EQUAL(altar__shard_filter_parse(NULL, false, &f, &e), ALTAR_OK);
  CU_ASSERT_FALSE(altar__shard_filter_any(&f));
}

static void test_states_of_each_page(void) {
  altar_shard_filter_t f;
  altar_error_t e;
  const char *shard[] = {"pending", "running", "succeeded", "failed", "cancelled", "waiting"};
  const char *job[] = {"running", "waiting", "fired", "dead_lettered", "cancelled", "pending"};
  for (size_t i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.state = shard[i]}, false, &f, &e), ALTAR_OK);
    CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.state = job[i]}, true, &f, &e), ALTAR_OK);
    CU_ASSERT_TRUE(altar__shard_filter_any(&f));
    CU_ASSERT_FALSE(altar__shard_filter_by_shard(&f));
  }
}

static void test_match(void) {
  altar_shard_filter_t f;
  altar_error_t e;
  const char *labels = "fold=1\nmodel=m1\n";
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "fold=1", .kind = "train", .worker = "w1"}, false, &f, &e),
                  ALTAR_OK);
  CU_ASSERT_TRUE(altar__shard_filter_by_shard(&f));
  CU_ASSERT_TRUE(altar__shard_filter_match(&f, "failed", "train", labels, "w1"));
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "eval", labels, "w1"));
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "train", labels, "w2"));
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "train", labels, NULL));      /* worker not known */
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "train", "fold=10\n", "w1")); /* whole lines only */
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "train", NULL, "w1"));
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "model=m1", .state = "succeeded"}, false, &f, &e), ALTAR_OK);
  CU_ASSERT_TRUE(altar__shard_filter_match(&f, "succeeded", "x", labels, NULL));
  CU_ASSERT_FALSE(altar__shard_filter_match(&f, "failed", "x", labels, NULL));
  CU_ASSERT_TRUE(altar__shard_filter_match(&f, NULL, "x", labels, NULL));                      /* state matched apart */
  CU_ASSERT_EQUAL(parse((altar_fleet_query_t){.label = "note=a=b"}, false, &f, &e), ALTAR_OK); /* '=' in the value */
  CU_ASSERT_TRUE(altar__shard_filter_match(&f, "running", "k", "note=a=b\n", NULL));
}

static void add(void) {
  ALTAR_SUITE("shard_filter", NULL, NULL);
  ALTAR_TEST(test_bad_values_name_their_parameter);
  ALTAR_TEST(test_states_of_each_page);
  ALTAR_TEST(test_match);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
