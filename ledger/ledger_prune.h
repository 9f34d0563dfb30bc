/* altar — the lifetime of consumed records in the RocksDB ledger: an index
 * of when each record was consumed, and a prune of the oldest. Internal to
 * reconciler/ (the daemon, the CLI and tests). */
#ifndef ALTAR_RECONCILER_LEDGER_PRUNE_H
#define ALTAR_RECONCILER_LEDGER_PRUNE_H

#include "altar/ledger.h"

/* ledger.consumed_keep_days and its default: altar/config.h. */

#include <stddef.h>
#include <stdint.h>

/* Records one prune removes (one write batch, give or take one consume's
 * records); the daemon prunes again at once while a backlog lasts. */
#define ALTAR_CONSUMED_PRUNE_MAX 10000
/* How often the daemon prunes. */
#define ALTAR_CONSUMED_PRUNE_INTERVAL_S 60.0

/* Removes consumed records (and their index entries) consumed before
 * before_ms (Unix ms, wall clock), oldest first, in one atomic write,
 * stopping once max are removed (a whole index entry at a time: one
 * consume's records go together, so a wide group may take it past max);
 * *ppruned gets how many. Call outside a batch, on the
 * thread that writes the ledger. ALTAR_ENOTSUP for a ledger that is not
 * RocksDB. */
int altar__ledger_rocksdb_prune_consumed(altar_ledger_t *l, int64_t before_ms, size_t max, size_t *ppruned,
                                         altar_error_t *err);

/* How many consumed records a prune with the same before_ms and max would
 * remove now (whole index entries, as the prune takes them), into *pdue;
 * nothing is changed. Call on the thread that writes the ledger.
 * ALTAR_ENOTSUP for a ledger that is not RocksDB. */
int altar__ledger_rocksdb_consumed_due(altar_ledger_t *l, int64_t before_ms, size_t max, size_t *pdue,
                                       altar_error_t *err);

#endif
