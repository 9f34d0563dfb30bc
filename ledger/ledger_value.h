/* altar — the value the RocksDB ledger stores for a record (under o: or
 * r:): magic, has_spec, task key, group key, the u32 length of the codec's
 * record map (spec left out), that map, then the spec's encoding. The
 * format is on disk: keep it byte for byte (tests/unit/test_ledger*.c).
 * Internal to ledger/ledger_*.c. */
#ifndef ALTAR_RECONCILER_LEDGER_VALUE_H
#define ALTAR_RECONCILER_LEDGER_VALUE_H

#include "ledger/ledger_int.h"

#include <stdbool.h>
#include <stddef.h>

/* True when altar__lvalue_encode takes its fast path for x, which cannot
 * fail but for memory: such a value may be encoded when the batch is
 * written. */
bool altar__lvalue_fast(const altar__lent_t *x);
/* The value of cache entry x (with its pre-encoded fixed part and spec
 * bytes) into b (reset first). */
int altar__lvalue_encode(altar_buf_t *b, const altar__lent_t *x, altar_error_t *err);
/* Decodes a value into *e (zeroed first; caller clears). The spec's bytes
 * (inside data, NULL without a spec) go to *pspec and *pspec_len; with
 * want_spec the spec is decoded into e->rec.spec as well. */
int altar__lvalue_decode(const char *data, size_t len, altar_ledger_entry_t *e, const char **pspec, size_t *pspec_len,
                         bool want_spec, altar_error_t *err);
/* The task key of a stored value, borrowed from data (*plen bytes, not
 * NUL-terminated); false when it has none or the header is not readable. */
bool altar__lvalue_task_key(const char *data, size_t len, const char **pkey, size_t *plen);
/* Where the record map lies in a value altar__lvalue_decode accepted. */
void altar__lvalue_record_span(const char *data, size_t *pat, size_t *plen);

#endif
