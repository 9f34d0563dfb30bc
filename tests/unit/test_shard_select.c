/* The first k of a list in order (dashboard/shard_select.h): on random
 * shards (kinds, group keys, labels with numbers, task keys) the selection
 * equals the first k of a full sort in the dashboard's shard order, for k
 * below, at and above n, and with duplicate sort keys but for the task key. */
#include "dashboard/shard_order.h"
#include "dashboard/shard_select.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shard {
  char kind[8], group[16], labels[64], task[16];
  altar_shard_sort_key_t key;
} shard_t;

static int by_order(const void *a, const void *b) {
  const shard_t *x = *(const shard_t *const *)a, *y = *(const shard_t *const *)b;
  return altar__shard_order_cmp(&x->key, &y->key);
}

static void random_shard(shard_t *s, unsigned *seed, size_t i) {
  snprintf(s->kind, sizeof s->kind, "k%d", rand_r(seed) % 3);
  snprintf(s->group, sizeof s->group, "g%d", rand_r(seed) % 20);
  /* Some shards lack the fold label; values repeat, so only the task key
   * tells some shards apart. */
  if (rand_r(seed) % 5)
    snprintf(s->labels, sizeof s->labels, "fold=%d\nmodel=m%d\n", rand_r(seed) % 12, rand_r(seed) % 4);
  else snprintf(s->labels, sizeof s->labels, "model=m%d\n", rand_r(seed) % 4);
  snprintf(s->task, sizeof s->task, "t%zu", i);
  s->key = (altar_shard_sort_key_t){s->kind, s->group, s->labels, s->task};
}

static void check(size_t n, size_t k, unsigned seed) {
  shard_t *v = calloc(n ? n : 1, sizeof *v);
  const void **full = calloc(n ? n : 1, sizeof *full), **part = calloc(n ? n : 1, sizeof *part);
  CU_ASSERT_FATAL(v && full && part);
  for (size_t i = 0; i < n; i++) random_shard(&v[i], &seed, i);
  for (size_t i = 0; i < n; i++) full[i] = part[i] = &v[i];
  if (n) qsort(full, n, sizeof *full, by_order);
  altar__select_first(part, n, k, by_order);
  size_t m = k < n ? k : n, same = 0;
  for (size_t i = 0; i < m; i++) same += full[i] == part[i];
  CU_ASSERT_EQUAL(same, m);
  /* Nothing lost or doubled: the rest are the other shards. */
  size_t seen = 0;
  char *mark = calloc(n ? n : 1, 1);
  for (size_t i = 0; mark && i < n; i++) {
    size_t at = (size_t)((const shard_t *)part[i] - v);
    if (at < n && !mark[at]) mark[at] = 1, seen++;
  }
  CU_ASSERT_EQUAL(seen, n);
  free(mark);
  free(v);
  free(full);
  free(part);
}

static void test_random(void) {
  for (unsigned seed = 1; seed <= 40; seed++) {
    size_t n = (size_t)(seed * 37 % 500) + 1;
    check(n, 1, seed);
    check(n, n / 3 + 1, seed);
    check(n, 50, seed);
    check(n, n, seed);
    check(n, n + 7, seed);
  }
  check(5000, 100, 99);
}

static void test_edges(void) {
  check(0, 10, 1);
  check(10, 0, 2); /* nothing asked: nothing moved or lost */
  altar__select_first(NULL, 0, 3, by_order);
}

static void add(void) {
  ALTAR_SUITE("shard_select", NULL, NULL);
  ALTAR_TEST(test_random);
  ALTAR_TEST(test_edges);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
