/* Which follow-up jobs are on the log already: the keys (task keys) of the
 * jobs topics follow-ups go to. A reconciler that lost track of whether a
 * follow-up went out (killed between the log's acknowledgement and the
 * outbox delete, or a --rebuild) asks here before publishing it, so a
 * follow-up is submitted once. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_FOLLOWUP_SEEN_H
#define ALTAR_RECONCILER_FOLLOWUP_SEEN_H

#include "altar/error.h"
#include "altar/strmap.h"

#include <stdbool.h>
#include "core/hmap.h"

typedef struct altar__keys_seen {
  altar__hmap_t keys; /* key → itself, malloc'd */
} altar__keys_seen_t;

/* Reads the keys of every record of topics[0..n) from their beginning up to
 * their end as of now, through a transport of its own (tname, props). A
 * topic that does not exist holds none. */
int altar__keys_seen_read(altar__keys_seen_t *s, const char *tname, const altar_strmap_t *props,
                          const char *const *topics, size_t n, altar_error_t *err);
bool altar__keys_seen_has(const altar__keys_seen_t *s, const char *key);
void altar__keys_seen_free(altar__keys_seen_t *s);

#endif
