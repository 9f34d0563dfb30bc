/* Search and filters of the jobs list and the job page, decided on the
 * server so a job of 10^5 shards never ships every row: a query's state,
 * kind, label (KEY=VALUE) and worker, checked and bounded once, then
 * matched against each shard (or job) a page walks.
 *
 * On the job page `state` is a shard's: pending, running, succeeded,
 * failed, cancelled, waiting (on a jobs topic, no record yet). On the jobs
 * list it is a job's badge: running, waiting, fired, dead_lettered,
 * cancelled, pending; kind, label and worker there keep the jobs with at
 * least one recorded shard that matches them.
 * Pure functions: no I/O, any thread. Internal to dashboard/. */
#ifndef ALTAR_DASHBOARD_SHARD_FILTER_H
#define ALTAR_DASHBOARD_SHARD_FILTER_H

#include "altar/error.h"
#include "dashboard/fleet_view.h"

#include <stdbool.h>
#include <stddef.h>

#define ALTAR_SHARD_FILTER_VALUE_MAX 256 /* bytes of a filter's value */

/* The filters of a query; strings borrowed from it, NULL = not asked. */
typedef struct altar_shard_filter {
  const char *state, *kind, *worker;
  const char *label; /* "KEY=VALUE" as asked */
} altar_shard_filter_t;

/* Checks q's filters for the jobs list (for_jobs) or the job page into *f.
 * ALTAR_EINVAL naming the parameter (state, kind, label, worker) when one
 * is empty, too long, not KEY=VALUE, or not a state of that page. */
int altar__shard_filter_parse(const altar_fleet_query_t *q, bool for_jobs, altar_shard_filter_t *f, altar_error_t *err);

/* Whether any filter is set; whether any of kind, label, worker is. */
bool altar__shard_filter_any(const altar_shard_filter_t *f);
bool altar__shard_filter_by_shard(const altar_shard_filter_t *f);

/* Whether a shard matches every filter set. labels is its labels as
 * "KEY=VALUE\n" lines (NULL: none); state its state as the page shows it;
 * worker the worker of its latest run (NULL: not known). A filter on
 * state is skipped when state is NULL (the jobs list matches it apart). */
bool altar__shard_filter_match(const altar_shard_filter_t *f, const char *state, const char *kind, const char *labels,
                               const char *worker);

#endif
