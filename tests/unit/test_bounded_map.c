/* The dashboard's bounded maps (dashboard/bounded_map.c): past the bound the
 * oldest insertion goes, an updated key keeps its place, and the view's
 * maps therefore stay at their bound however many entries pass. */
#include "dashboard/bounded_map.h"
#include "testutil.h"

#include <stdio.h>

static void test_oldest_goes(void) {
  json_t *m = json_object();
  CU_ASSERT_FATAL(m != NULL);
  char k[32];
  for (int i = 0; i < 1000; i++) {
    snprintf(k, sizeof k, "k%d", i);
    CU_ASSERT_EQUAL(altar__bounded_set_new(m, k, json_integer(i), 100), 0);
    CU_ASSERT(json_object_size(m) <= 100);
  }
  CU_ASSERT_EQUAL(json_object_size(m), 100);
  CU_ASSERT(json_object_get(m, "k899") == NULL);
  CU_ASSERT(json_object_get(m, "k900") != NULL);
  CU_ASSERT(json_object_get(m, "k999") != NULL);
  /* Updating k900 keeps it the oldest: the next new key pushes it out. */
  CU_ASSERT_EQUAL(altar__bounded_set_new(m, "k900", json_integer(-1), 100), 0);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(m, "k900")), -1);
  CU_ASSERT_EQUAL(altar__bounded_set_new(m, "new", json_integer(0), 100), 0);
  CU_ASSERT(json_object_get(m, "k900") == NULL);
  CU_ASSERT(json_object_get(m, "k901") != NULL);
  CU_ASSERT_EQUAL(json_object_size(m), 100);
  json_decref(m);
}

static void add(void) {
  ALTAR_SUITE("dashboard bounded maps", NULL, NULL);
  ALTAR_TEST(test_oldest_goes);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
