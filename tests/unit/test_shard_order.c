/* The dashboard's shard order and names (dashboard/shard_order.h): values
 * compare numeric-aware (fold 2 before fold 10), a group's shards stay
 * together (group key first), then every label in key order, a missing
 * label after a present one, and the task key breaks ties, so sorting is
 * total; names leave job_id out and are bounded. */
#include "dashboard/shard_order.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static int nat(const char *a, const char *b) { return altar__natural_cmp(a, strlen(a), b, strlen(b)); }

static void test_natural(void) {
  CU_ASSERT(nat("2", "10") < 0);
  CU_ASSERT(nat("10", "2") > 0);
  CU_ASSERT(nat("fold2", "fold10") < 0);
  CU_ASSERT(nat("m1:9", "m1:10") < 0);
  CU_ASSERT(nat("a", "b") < 0);
  CU_ASSERT(nat("abc", "ab") > 0);
  CU_ASSERT(nat("", "") == 0);
  CU_ASSERT(nat("7", "07") < 0); /* same number: fewer zeros first */
  CU_ASSERT(nat("07", "8") < 0);
  CU_ASSERT(nat("x", "1") > 0);
  CU_ASSERT(nat("99999999999999999999999", "100000000000000000000000") < 0); /* beyond 64 bits */
}

static int by_order(const void *a, const void *b) { return altar__shard_order_cmp(a, b); }

static void test_order(void) {
  altar_shard_sort_key_t v[] = {
      {"train", "j:m2", "fold=1\njob_id=j\nmodel=m2\n", "k5"},
      {"train", "j:m1", "fold=10\njob_id=j\nmodel=m1\n", "k1"},
      {"train", "j:m1", "fold=2\njob_id=j\nmodel=m1\n", "k2"},
      {"score", "j", "job_id=j\n", "k9"},
      {"train", "j:m1", "job_id=j\nmodel=m1\n", "k3"},         /* no fold: after those with one */
      {"train", "j:m1", "fold=2\njob_id=j\nmodel=m1\n", "k0"}, /* same labels: by task key */
      {NULL, NULL, NULL, NULL},
  };
  size_t n = sizeof v / sizeof v[0];
  qsort(v, n, sizeof v[0], by_order);
  const char *want[] = {NULL, "k9", "k0", "k2", "k1", "k3", "k5"};
  for (size_t i = 0; i < n; i++) {
    if (!want[i]) {
      CU_ASSERT_PTR_NULL(v[i].task_key);
    } else {
      CU_ASSERT_STRING_EQUAL(v[i].task_key ? v[i].task_key : "(null)", want[i]);
    }
  }
  CU_ASSERT_EQUAL(altar__shard_order_cmp(&v[2], &v[2]), 0);
  CU_ASSERT_EQUAL(altar__shard_order_cmp(&v[2], &v[3]), -altar__shard_order_cmp(&v[3], &v[2]));
}

static void test_name(void) {
  char *s = altar__shard_name("fold=2\njob_id=j-1\nmodel=m1\n");
  CU_ASSERT_STRING_EQUAL(s, "fold=2 model=m1");
  free(s);
  s = altar__shard_name(NULL);
  CU_ASSERT_STRING_EQUAL(s, "");
  free(s);
  s = altar__shard_name("flag\n"); /* a line without '=' keeps its key */
  CU_ASSERT_STRING_EQUAL(s, "flag=");
  free(s);
  static const char pair[] = "label_with_a_long_name=value_value\n";
  char big[2000];
  size_t len = 0;
  for (int i = 0; i < 40; i++, len += sizeof pair - 1) memcpy(big + len, pair, sizeof pair - 1);
  big[len] = '\0';
  s = altar__shard_name(big);
  CU_ASSERT(strlen(s) <= ALTAR_SHARD_NAME_MAX);
  CU_ASSERT(strlen(s) > 0 && s[strlen(s) - 1] == 'e'); /* cut at a whole pair */
  free(s);
}

static void add(void) {
  ALTAR_SUITE("shard_order", NULL, NULL);
  ALTAR_TEST(test_natural);
  ALTAR_TEST(test_order);
  ALTAR_TEST(test_name);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
