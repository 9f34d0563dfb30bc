/* The cancels a worker has read (`altar cancel`): job ids, each for the
 * whole job or for one group key of it, oldest first. Bounded: past
 * ALTAR_CANCEL_SET_MAX entries or ALTAR_CANCEL_SET_MAX_BYTES of ids the
 * oldest are forgotten, as the commit metadata leaves the oldest out
 * (cancel_meta.h): a shard of a forgotten cancel that still arrives is
 * refused by the ledger instead. Internal to worker/. */
#ifndef ALTAR_WORKER_CANCEL_SET_H
#define ALTAR_WORKER_CANCEL_SET_H

#include <stdbool.h>
#include <stddef.h>

#define ALTAR_CANCEL_SET_MAX 1024
#define ALTAR_CANCEL_SET_MAX_BYTES (1u << 20)

typedef struct altar__cancel_set {
  char **job_ids;
  char **group_keys; /* NULL entry: the whole job */
  size_t n, cap;
  size_t bytes; /* of the ids and keys */
} altar__cancel_set_t;

/* Adds (job_id, group_key|NULL) as the newest, forgetting the oldest past
 * the bounds; *padded false when it was known already. 0 or ALTAR_ENOMEM. */
int altar__cancel_set_add(altar__cancel_set_t *s, const char *job_id, const char *group_key, bool *padded);
/* Whether a shard of job_id in group group_key (may be NULL) is cancelled. */
bool altar__cancel_set_matches(const altar__cancel_set_t *s, const char *job_id, const char *group_key);
void altar__cancel_set_free(altar__cancel_set_t *s);

#endif
