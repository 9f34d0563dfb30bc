/* Bounded JSON maps of the fleet view (bounded_map.h). */
#include "dashboard/bounded_map.h"

int altar__bounded_set_new(json_t *map, const char *key, json_t *value, size_t max) {
  int rc = json_object_set_new(map, key, value);
  while (json_object_size(map) > max) {
    void *it = json_object_iter(map);
    if (!it) break;
    /* An existing key keeps its place, so the first is the oldest insertion. */
    if (json_object_del(map, json_object_iter_key(it))) break;
  }
  return rc;
}
