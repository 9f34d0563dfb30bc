/* The order and name the dashboard gives a job's shards: by their labels, not
 * by backend id or ledger order. Shards sort by kind, then by group key
 * (the group_by labels' values, so a group's shards stay together), then by
 * every label in key order (a shard lacking a label after one having it),
 * each value compared numeric-aware (fold 2 before fold 10), and last by
 * task key, so the order is total and stable between polls. */
#ifndef ALTAR_DASHBOARD_SHARD_ORDER_H
#define ALTAR_DASHBOARD_SHARD_ORDER_H

#include <stddef.h>

/* What a shard is sorted on. labels: "KEY=VALUE\n" lines sorted by key (the
 * fleet view's form); any field may be NULL (sorts as empty). */
typedef struct altar_shard_sort_key {
  const char *kind, *group_key, *labels, *task_key;
} altar_shard_sort_key_t;

/* <0, 0, >0 as a sorts before, with, after b. */
int altar__shard_order_cmp(const altar_shard_sort_key_t *a, const altar_shard_sort_key_t *b);
/* Numeric-aware comparison of a[0..alen) and b[0..blen): runs of digits
 * compare as numbers (leading zeros ignored, then fewer zeros first),
 * everything else byte by byte. */
int altar__natural_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* The shard's name from its labels: "KEY=VALUE" pairs joined by spaces in
 * key order, job_id left out (the page names the job already); at most
 * ALTAR_SHARD_NAME_MAX bytes, cut at a pair. Malloc'd (caller frees), NULL
 * when out of memory. */
#define ALTAR_SHARD_NAME_MAX 256
char *altar__shard_name(const char *labels);

#endif
