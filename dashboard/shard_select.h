/* The first k of a list in order, without sorting all of it: a page of a
 * filtered job shows `limit` shards after `offset`, so only offset + limit
 * of 10^5 matches need ordering. A bounded max-heap of k items keeps the
 * k smallest in one pass (n log k comparisons), then those k are sorted. */
#ifndef ALTAR_DASHBOARD_SHARD_SELECT_H
#define ALTAR_DASHBOARD_SHARD_SELECT_H

#include <stddef.h>

/* Rearranges the n pointers in items so that items[0 .. min(k, n)) are the
 * first k of the order cmp defines, in that order (what qsort then taking
 * k would give for a total order); the rest follow in no set order. cmp
 * is qsort's: it receives pointers to two elements of items. */
void altar__select_first(const void **items, size_t n, size_t k, int (*cmp)(const void *, const void *));

#endif
