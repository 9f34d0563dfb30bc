/* Where the reconciler's input stands: the next offset of each status-topic
 * partition it has applied, stored in the ledger with the changes they caused
 * (the log's group commits lag behind: they are written only when a partition
 * is revoked and at shutdown). */
#ifndef ALTAR_RECONCILER_INPUT_OFFSETS_H
#define ALTAR_RECONCILER_INPUT_OFFSETS_H

#include "altar/error.h"
#include "altar/ledger.h"

#include <stddef.h>
#include <stdint.h>

/* Aux key of a partition's input offset ("s/<topic>/<partition>", stored
 * under that partition's scope) into out; returns its length. */
size_t altar__reconciler_offset_key(const char *topic, int32_t partition, char *out, size_t outsz);

/* *pnext = the next offset of topic/partition the reconciler stored in l,
 * -1 when it stored none. 0 or a negative code (ALTAR_ENOTSUP for a ledger
 * without aux storage). Any thread that may read l. */
int altar__reconciler_input_offset(altar_ledger_t *l, const char *topic, int32_t partition, int64_t *pnext,
                                   altar_error_t *err);

#endif
