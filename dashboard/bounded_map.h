/* A JSON object used as a map with a bound on its entries: past it, the
 * entry inserted first goes (jansson keeps insertion order). The dashboard
 * reads its topics from the beginning, so without a bound its maps would
 * hold one entry per job, group or task ever seen. Internal to dashboard/. */
#ifndef ALTAR_DASHBOARD_BOUNDED_MAP_H
#define ALTAR_DASHBOARD_BOUNDED_MAP_H

#include <jansson.h>
#include <stddef.h>

/* json_object_set_new(map, key, value) (value's reference is taken, also on
 * failure), then drops the oldest entries while more than max are kept.
 * Returns json_object_set_new's result. */
int altar__bounded_set_new(json_t *map, const char *key, json_t *value, size_t max);

#endif
