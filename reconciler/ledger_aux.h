/* Keys the reconciler daemon keeps in the ledger's own store, so they share
 * its atomic writes: the outbox and the input offsets. They live in a
 * namespace the ledger's records never use; checksums ignore them.
 * Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_LEDGER_AUX_H
#define ALTAR_RECONCILER_LEDGER_AUX_H

#include "altar/buf.h"
#include "altar/ledger.h"

typedef int (*altar__aux_visit_fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen);

/* Inside a batch (altar_ledger_begin) these join its write; outside, each is
 * its own atomic write. ALTAR_ENOTSUP for a ledger without aux storage. */
int altar__ledger_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                          altar_error_t *err);
int altar__ledger_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err);
/* Appends the value to out; ALTAR_ENOTFOUND when absent. */
int altar__ledger_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err);
/* Visits every aux key starting with prefix, in key order. */
int altar__ledger_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar__aux_visit_fn fn, void *ctx,
                           altar_error_t *err);

#endif
