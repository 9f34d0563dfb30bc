/* The reconciler's hour (reconciler/history.h) kept in its ledger's side
 * keys, so `altar dashboard` in another process charts it too: one key per
 * bucket slot, ALTAR_HISTORY_PREFIX + the slot (index mod
 * ALTAR_HISTORY_BUCKETS, three digits), so at most ALTAR_HISTORY_BUCKETS
 * keys ever, each a bucket written over when its slot comes round again.
 * The value is text: "v1 INDEX FINISHED FIRED DEAD LAG\n" then one
 * "COUNT REASON\n" line per failure reason. */
#ifndef ALTAR_RECONCILER_HISTORY_STORE_H
#define ALTAR_RECONCILER_HISTORY_STORE_H

#include "altar/error.h"
#include "altar/ledger.h"
#include "reconciler/history.h"

#include <stddef.h>

#define ALTAR_HISTORY_PREFIX "history/"

/* Writes h's buckets of now and of the span before it (the last changes of
 * that span may not have been written yet) into l's side keys, as their
 * own write. 0 or the ledger's error. */
int altar__history_save(altar_history_t *h, altar_ledger_t *l, double now, altar_error_t *err);

/* Puts the buckets l keeps into h, as of now (altar__history_bucket_put):
 * a restarted reconciler goes on with the hour its previous life kept.
 * 0 or the ledger's error. */
int altar__history_load(altar_history_t *h, altar_ledger_t *l, double now, altar_error_t *err);

/* One side key's value into *b; false when it is not a bucket (a bad or
 * older format: ignored, not an error). */
bool altar__history_decode(const void *val, size_t vlen, altar_history_bucket_t *b);

#endif
