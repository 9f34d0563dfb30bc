/* The watch's Job map: removal by backward shift must leave every other key
 * reachable. Many keys are removed and put back in a seeded random order,
 * at the map's fullest (probe runs long, wrapping past the table's end),
 * and after every step each key is looked up against a plain record of
 * which are present. */
#include "backends/k8s_jobmap.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) { /* xorshift64: the same sequence every run */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void key(char *out, size_t size, size_t i) { snprintf(out, size, "job-%zu", i); }

/* Every key is present exactly when present[i] says so, and carries its tag. */
static bool all_consistent(const altar__k8s_jobmap_t *m, const bool *present, size_t nkeys) {
  size_t n = 0;
  for (size_t i = 0; i < nkeys; i++) {
    char k[32];
    key(k, sizeof k, i);
    const altar__k8s_jobent_t *e = altar__k8s_jobmap_get(m, k);
    if ((e != NULL) != present[i]) return false;
    if (e && (strcmp(e->name, k) || e->listed != (uint32_t)i)) return false;
    n += present[i];
  }
  return n == m->n;
}

static void churn(size_t nkeys, size_t steps, size_t check_every) {
  altar__k8s_jobmap_t m = {0};
  bool *present = calloc(nkeys, sizeof *present);
  CU_ASSERT_PTR_NOT_NULL_FATAL(present);
  for (size_t i = 0; i < nkeys; i++) {
    char k[32];
    key(k, sizeof k, i);
    altar__k8s_jobent_t *e = altar__k8s_jobmap_put(&m, k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    e->listed = (uint32_t)i; /* a tag that must travel with the key */
    present[i] = true;
  }
  size_t cap = m.cap;
  bool ok = all_consistent(&m, present, nkeys);
  CU_ASSERT_TRUE(ok);
  for (size_t s = 0; s < steps && ok; s++) {
    size_t i = (size_t)(next_rand() % nkeys);
    char k[32];
    key(k, sizeof k, i);
    if (present[i]) {
      CU_ASSERT_TRUE(altar__k8s_jobmap_remove(&m, k));
      CU_ASSERT_FALSE(altar__k8s_jobmap_remove(&m, k)); /* gone already */
      present[i] = false;
    } else {
      altar__k8s_jobent_t *e = altar__k8s_jobmap_put(&m, k);
      CU_ASSERT_PTR_NOT_NULL_FATAL(e);
      e->listed = (uint32_t)i;
      present[i] = true;
    }
    if (s % check_every == 0) ok = all_consistent(&m, present, nkeys);
  }
  ok = ok && all_consistent(&m, present, nkeys);
  CU_ASSERT_TRUE(ok);
  /* Never more keys than at the start: the table never needed to grow. */
  CU_ASSERT_EQUAL(m.cap, cap);
  /* Empty it entirely, then fill it again: nothing left behind. */
  for (size_t i = 0; i < nkeys; i++) {
    char k[32];
    key(k, sizeof k, i);
    CU_ASSERT_EQUAL(altar__k8s_jobmap_remove(&m, k), present[i]);
    present[i] = false;
  }
  CU_ASSERT_EQUAL(m.n, 0);
  for (size_t i = 0; i < m.cap; i++) CU_ASSERT_PTR_NULL(m.slots[i].name);
  for (size_t i = 0; i < nkeys; i += 2) {
    char k[32];
    key(k, sizeof k, i);
    altar__k8s_jobent_t *e = altar__k8s_jobmap_put(&m, k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    e->listed = (uint32_t)i;
    present[i] = true;
  }
  CU_ASSERT_TRUE(all_consistent(&m, present, nkeys));
  altar__k8s_jobmap_clear(&m);
  free(present);
}

/* 44 keys in 64 slots (the 70% bound): long runs that wrap around. */
static void test_small_full_map(void) { churn(44, 200000, 1); }

/* 20,000 keys: the size of a large run's map. */
static void test_large_map(void) { churn(20000, 200000, 20000); }

static void test_absent_and_empty(void) {
  altar__k8s_jobmap_t m = {0};
  CU_ASSERT_FALSE(altar__k8s_jobmap_remove(&m, "nothing")); /* no table yet */
  CU_ASSERT_PTR_NULL(altar__k8s_jobmap_get(&m, "nothing"));
  CU_ASSERT_PTR_NOT_NULL(altar__k8s_jobmap_put(&m, "one"));
  CU_ASSERT_FALSE(altar__k8s_jobmap_remove(&m, "two"));
  CU_ASSERT_TRUE(altar__k8s_jobmap_remove(&m, "one"));
  CU_ASSERT_EQUAL(m.n, 0);
  altar__k8s_jobmap_clear(&m);
}

static void add_suites(void) {
  ALTAR_SUITE("k8s-jobmap", NULL, NULL);
  ALTAR_TEST(test_small_full_map);
  ALTAR_TEST(test_large_map);
  ALTAR_TEST(test_absent_and_empty);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
