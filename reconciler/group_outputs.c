/* Collecting a fired group's outputs in member order, each uri once. */
#include "reconciler/group_outputs.h"
#include "core/hmap.h"
#include "ledger/ledger_rocksdb.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

bool altar__group_outputs_wanted(const altar_group_spec_t *gs) {
  return gs && (gs->then || gs->then_dead || gs->event_outputs);
}

static char *dup_or_null(altar_arena_t *a, const char *s, bool *bad) {
  if (!s) return NULL;
  char *d = altar_arena_strndup(a, s, strlen(s));
  if (!d) *bad = true;
  return d;
}

/* Where one member's outputs were read from. */
typedef enum { FROM_NONE, FROM_ARENA, FROM_BORROWED } from_t;

/* Member h's outputs into *pv, *pn, read without touching the disk when
 * the ledger holds its spec in memory: the RocksDB ledger's bytes of an
 * open record, decoded in place into arena a (FROM_ARENA: the strings lie
 * in a already), or the memory ledger's struct (FROM_BORROWED, valid until
 * the ledger changes). Otherwise the record is read (get into *e, which
 * the caller clears; FROM_BORROWED from it). FROM_NONE: no record, or no
 * spec. */
static int member_outputs(altar_ledger_t *l, const altar_handle_t *h, altar_arena_t *a, altar_ledger_entry_t *e,
                          const altar_transfer_t **pv, size_t *pn, from_t *from, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  *from = FROM_NONE;
  const void *enc;
  size_t len;
  if (altar__ledger_rocksdb_open_spec(l, h->backend, h->external_id, &enc, &len)) {
    altar_transfer_t *v;
    if (altar_decode_spec_outputs_canonical(enc, len, a, &v, pn) == ALTAR_OK) {
      *pv = v;
      *from = FROM_ARENA;
      return ALTAR_OK;
    } /* else: not in the encoder's form (never seen); the record says */
  } else {
    const altar_ledger_entry_t *open = altar_ledger_peek_open(l, h->backend, h->external_id);
    if (open && open->rec.spec) {
      *pv = open->rec.spec->outputs;
      *pn = open->rec.spec->n_outputs;
      *from = FROM_BORROWED;
      return ALTAR_OK;
    }
  }
  int rc = altar_ledger_get(l, h->backend, h->external_id, e, err);
  if (rc == ALTAR_ENOTFOUND) {
    if (err) memset(err, 0, sizeof *err);
    return ALTAR_OK; /* nothing known of it: no outputs to name */
  }
  if (!rc && e->rec.spec) {
    *pv = e->rec.spec->outputs;
    *pn = e->rec.spec->n_outputs;
    *from = FROM_BORROWED;
  }
  return rc;
}

int altar__group_outputs(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_arena_t *a, altar_transfer_t **pv,
                         size_t *pn, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  altar__hmap_t seen = {0};
  altar_transfer_t *v = NULL;
  size_t cnt = 0, cap = 0;
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < n; i++) {
    altar_ledger_entry_t e = {0};
    const altar_transfer_t *os;
    size_t no;
    from_t from;
    altar_arena_mark_t mark = altar_arena_mark(a);
    rc = member_outputs(l, &hs[i], a, &e, &os, &no, &from, err);
    size_t before = cnt;
    for (size_t k = 0; !rc && k < no; k++) {
      const altar_transfer_t *o = &os[k];
      size_t ul = strlen(o->uri);
      if (altar__hmap_get(&seen, o->uri, ul)) continue;
      if (ALTAR_GROW(v, cap, cnt + 1)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "group outputs: out of memory");
        break;
      }
      bool bad = false;
      altar_transfer_t *t = &v[cnt];
      if (from == FROM_ARENA) {
        *t = *o; /* its strings lie in the arena already */
      } else {
        t->uri = dup_or_null(a, o->uri, &bad);
        t->logical_path = dup_or_null(a, o->logical_path, &bad);
        t->digest = dup_or_null(a, o->digest, &bad);
        t->locality_key = dup_or_null(a, o->locality_key, &bad);
      }
      /* the key lives in the arena as long as the map is used */
      if (bad || altar__hmap_put(&seen, t->uri, ul, t)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      else cnt++;
    }
    /* A member whose outputs were all named before leaves nothing behind. */
    if (!rc && from == FROM_ARENA && cnt == before) altar_arena_rewind(a, mark);
    altar_ledger_entry_clear(&e);
  }
  altar__hmap_free(&seen);
  if (!rc && cnt) {
    altar_transfer_t *out = altar_arena_alloc(a, cnt * sizeof *out);
    if (!out) rc = altar_error_set(err, ALTAR_ENOMEM, "group outputs: out of memory");
    else {
      memcpy(out, v, cnt * sizeof *out);
      *pv = out;
      *pn = cnt;
    }
  }
  free(v);
  return rc;
}
