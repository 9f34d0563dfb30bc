/* The first k of a list in order (dashboard/shard_select.h). */
#include "dashboard/shard_select.h"

#include <stdlib.h>

typedef int (*cmp_fn)(const void *, const void *);

static void swap(const void **items, size_t a, size_t b) {
  const void *t = items[a];
  items[a] = items[b];
  items[b] = t;
}

/* Restores the max-heap items[0 .. n) below position i. */
static void sift_down(const void **items, size_t n, size_t i, cmp_fn cmp) {
  for (;;) {
    size_t big = i, l = 2 * i + 1, r = l + 1;
    if (l < n && cmp(&items[l], &items[big]) > 0) big = l;
    if (r < n && cmp(&items[r], &items[big]) > 0) big = r;
    if (big == i) return;
    swap(items, i, big);
    i = big;
  }
}

void altar__select_first(const void **items, size_t n, size_t k, int (*cmp)(const void *, const void *)) {
  if (!items || !n || !k) return;
  if (k >= n) {
    qsort(items, n, sizeof *items, cmp);
    return;
  }
  /* items[0 .. k) as a max-heap: its top is the last of the k smallest so far. */
  for (size_t i = k / 2; i-- > 0;) sift_down(items, k, i, cmp);
  for (size_t i = k; i < n; i++) {
    if (cmp(&items[i], &items[0]) >= 0) continue;
    swap(items, 0, i);
    sift_down(items, k, 0, cmp);
  }
  qsort(items, k, sizeof *items, cmp);
}
