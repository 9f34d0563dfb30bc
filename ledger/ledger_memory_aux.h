/* The in-memory ledger's side keyspace (altar_ledger_ops_t aux_*): keys in
 * bytewise order, and a batch's changes held apart until commit, so they
 * become visible to a scan, or vanish on abort, together with the batch's
 * records. Internal to ledger/ledger_memory.c. */
#ifndef ALTAR_RECONCILER_LEDGER_MEMORY_AUX_H
#define ALTAR_RECONCILER_LEDGER_MEMORY_AUX_H

#include "altar/ledger.h"
#include "core/hmap.h"

#include <stdbool.h>

struct altar__maux_ent;

typedef struct altar__maux {
  struct altar__maux_ent **v; /* committed, sorted by key */
  size_t n, cap;
  altar__hmap_t pend;          /* key → the batch's last change of it */
  struct altar__maux_ent **pv; /* the same changes, in the order made */
  size_t n_pv, cap_pv;
} altar__maux_t;

/* With in_batch the change joins the batch (commit applies it); otherwise
 * it applies at once. 0 or ALTAR_ENOMEM (then nothing changed). */
int altar__maux_put(altar__maux_t *a, bool in_batch, const void *key, size_t klen, const void *val, size_t vlen);
int altar__maux_del(altar__maux_t *a, bool in_batch, const void *key, size_t klen);
/* The value as the batch leaves it, borrowed until the next change; NULL
 * when absent. */
const void *altar__maux_get(const altar__maux_t *a, const void *key, size_t klen, size_t *pvlen);
/* Visits the committed keys starting with prefix in key order. The visitor
 * may change the keyspace: the walk goes on from the next key after the one
 * it was given. A non-zero return stops it and is returned; ALTAR_ENOMEM
 * with *poom set when the walk itself ran out of memory. */
int altar__maux_scan(const altar__maux_t *a, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                     bool *poom);
/* Makes room for the batch's changes: the one step of a commit that can
 * fail (ALTAR_ENOMEM, nothing changed). altar__maux_commit cannot fail after it. */
int altar__maux_prepare(altar__maux_t *a);
void altar__maux_commit(altar__maux_t *a);
/* Drops the batch's changes. */
void altar__maux_abort(altar__maux_t *a);
void altar__maux_free(altar__maux_t *a);

#endif
