/* The cancels a worker knows, carried in its commit metadata, so they
 * outlive the worker and follow a partition to its next owner: a worker
 * that starts past a cancel on the log still refuses the job's shards.
 *
 * The metadata is the offset tracker's (offset_tracker.h), then
 *   ";c:" entries joined by ",", each a job id or "job@group key",
 *   with every byte outside [A-Za-z0-9._:=+-] written as %XX,
 * newest first, at most ALTAR_CANCEL_META_MAX bytes: the oldest cancels are
 * left out when more would not fit (the ledger still refuses their shards).
 * Internal to worker/. */
#ifndef ALTAR_WORKER_CANCEL_META_H
#define ALTAR_WORKER_CANCEL_META_H

#include "worker/cancel_set.h"

#include <stddef.h>

/* Room for the cancels; with the tracker's part it stays within the
 * transports' commit metadata bound (ALTAR_COMMIT_METADATA_MAX). */
#define ALTAR_CANCEL_META_MAX 2048

/* Appends the cancels of s to the string out (size bytes in all, NUL
 * included), at most ALTAR_CANCEL_META_MAX bytes of them; nothing when s is
 * empty or no entry fits. */
void altar__cancel_meta_append(const altar__cancel_set_t *s, char *out, size_t size);

/* Cuts committed metadata in place into the tracker's part (meta itself,
 * now NUL-terminated there) and the cancels' part, returned (NULL: none). */
char *altar__cancel_meta_split(char *meta);

/* Adds the cancels of a list returned by split to s; entries that do not
 * decode are skipped (*pbad counts them). 0 or ALTAR_ENOMEM. */
int altar__cancel_meta_parse(const char *list, altar__cancel_set_t *s, size_t *padded, size_t *pbad);

#endif
