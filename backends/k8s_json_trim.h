/* Dropping a member from JSON text before it is parsed: the API server's
 * Job and Pod objects carry metadata.managedFields (server-side apply's
 * bookkeeping, about 40% of a list's bytes) that the backend never reads,
 * and skipping it as bytes costs far less than building it as a tree.
 * Not public. */
#ifndef ALTAR_K8S_JSON_TRIM_H
#define ALTAR_K8S_JSON_TRIM_H

#include <stddef.h>

/* Removes every object member named key (matched byte for byte, as the
 * server writes it) with its value and one separating comma, in place;
 * returns the new length. Text that is not well-formed JSON is left as it
 * is from the first place the scan cannot follow, so the parser reports
 * the error as it would have. */
size_t altar__k8s_json_drop_member(char *text, size_t len, const char *key);

#endif
