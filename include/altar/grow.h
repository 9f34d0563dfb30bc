/* altar — growing an array by doubling, with the overflow checks in one place. */
#ifndef ALTAR_GROW_H
#define ALTAR_GROW_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stddef.h>

/* Makes room for at least `need` elements of `elsize` bytes in *pv, whose
 * capacity is *pcap (both zero for an empty array): doubles, starting at 8.
 * 0, or ALTAR_ENOMEM with *pv and *pcap untouched (the old array stays valid).
 * Cheap when there is room already. */
int altar_grow(void *pv, size_t *pcap, size_t need, size_t elsize);

/* ALTAR_GROW(v, cap, n + 1) for an array `T *v` with capacity `size_t cap`. */
#define ALTAR_GROW(v, cap, need) altar_grow(&(v), &(cap), (need), sizeof *(v))

ALTAR_API_END

#endif
