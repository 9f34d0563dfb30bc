/* The in-memory ledger's side keyspace: a sorted array of entries, and the
 * changes of an open batch in a map beside it (see ledger_memory_aux.h). */
#include "ledger/ledger_memory_aux.h"

#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

/* One key and its value (or a delete, while pending) in one allocation. */
typedef struct altar__maux_ent {
  size_t klen, vlen;
  size_t pos; /* index in the batch's pv, while pending */
  bool del;
  char data[]; /* key, then value */
} ent_t;

static ent_t *ent_new(const void *key, size_t klen, const void *val, size_t vlen, bool del) {
  ent_t *e = malloc(sizeof *e + klen + vlen);
  if (!e) return NULL;
  e->klen = klen;
  e->vlen = vlen;
  e->del = del;
  e->pos = 0;
  if (klen) memcpy(e->data, key, klen);
  if (vlen) memcpy(e->data + klen, val, vlen);
  return e;
}

static int key_cmp(const void *a, size_t alen, const void *b, size_t blen) {
  int c = alen && blen ? memcmp(a, b, alen < blen ? alen : blen) : 0;
  return c ? c : (alen > blen) - (alen < blen);
}

/* The first committed index whose key is not below key (strictly above
 * with `after`). */
static size_t lower(const altar__maux_t *a, const void *key, size_t klen, bool after) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = key_cmp(a->v[mid]->data, a->v[mid]->klen, key, klen);
    if (c < 0 || (after && c == 0)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Applies e to the committed array, which has room for one more entry;
 * takes e (freed when it is a delete). */
static void apply(altar__maux_t *a, ent_t *e) {
  size_t i = lower(a, e->data, e->klen, false);
  bool found = i < a->n && key_cmp(a->v[i]->data, a->v[i]->klen, e->data, e->klen) == 0;
  if (e->del) {
    if (found) {
      free(a->v[i]);
      memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof *a->v);
      a->n--;
    }
    free(e);
    return;
  }
  if (found) {
    free(a->v[i]);
    a->v[i] = e;
    return;
  }
  memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof *a->v);
  a->v[i] = e;
  a->n++;
}

static int change(altar__maux_t *a, bool in_batch, const void *key, size_t klen, const void *val, size_t vlen,
                  bool del) {
  ent_t *e = ent_new(key, klen, val, vlen, del);
  if (!e) return ALTAR_ENOMEM;
  if (!in_batch) {
    if (ALTAR_GROW(a->v, a->cap, a->n + 1)) {
      free(e);
      return ALTAR_ENOMEM;
    }
    apply(a, e);
    return ALTAR_OK;
  }
  uint64_t h = altar__hash(e->data, klen);
  ent_t *old = altar__hmap_get_h(&a->pend, e->data, klen, h);
  if (!old && ALTAR_GROW(a->pv, a->cap_pv, a->n_pv + 1)) {
    free(e);
    return ALTAR_ENOMEM;
  }
  if (altar__hmap_put_h(&a->pend, e->data, klen, h, e, NULL)) {
    free(e);
    return ALTAR_ENOMEM;
  }
  if (old) {
    e->pos = old->pos; /* the later change takes the earlier one's place */
    free(old);
  } else {
    e->pos = a->n_pv++;
  }
  a->pv[e->pos] = e;
  return ALTAR_OK;
}

int altar__maux_put(altar__maux_t *a, bool in_batch, const void *key, size_t klen, const void *val, size_t vlen) {
  return change(a, in_batch, key, klen, val, vlen, false);
}

int altar__maux_del(altar__maux_t *a, bool in_batch, const void *key, size_t klen) {
  return change(a, in_batch, key, klen, NULL, 0, true);
}

const void *altar__maux_get(const altar__maux_t *a, const void *key, size_t klen, size_t *pvlen) {
  const ent_t *e = a->n_pv ? altar__hmap_get(&a->pend, key, klen) : NULL;
  if (!e) {
    size_t i = lower(a, key, klen, false);
    if (i < a->n && key_cmp(a->v[i]->data, a->v[i]->klen, key, klen) == 0) e = a->v[i];
  }
  if (!e || e->del) return NULL;
  *pvlen = e->vlen;
  return e->data + e->klen;
}

int altar__maux_scan(const altar__maux_t *a, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                     bool *poom) {
  *poom = false;
  altar_buf_t last = {0};
  size_t i = lower(a, prefix, plen, false);
  int rc = ALTAR_OK;
  while (i < a->n && a->v[i]->klen >= plen && (!plen || !memcmp(a->v[i]->data, prefix, plen))) {
    const ent_t *e = a->v[i];
    altar_buf_reset(&last);
    if (altar_buf_append(&last, e->data, e->klen)) {
      *poom = true;
      rc = ALTAR_ENOMEM;
      break;
    }
    if ((rc = fn(ctx, e->data, e->klen, e->data + e->klen, e->vlen))) break;
    i = lower(a, last.data, last.len, true); /* the visitor may have changed the array */
  }
  altar_buf_free(&last);
  return rc;
}

int altar__maux_prepare(altar__maux_t *a) { return ALTAR_GROW(a->v, a->cap, a->n + a->n_pv); }

void altar__maux_commit(altar__maux_t *a) {
  for (size_t i = 0; i < a->n_pv; i++) apply(a, a->pv[i]);
  a->n_pv = 0;
  altar__hmap_clear(&a->pend);
}

void altar__maux_abort(altar__maux_t *a) {
  for (size_t i = 0; i < a->n_pv; i++) free(a->pv[i]);
  a->n_pv = 0;
  altar__hmap_clear(&a->pend);
}

void altar__maux_free(altar__maux_t *a) {
  altar__maux_abort(a);
  for (size_t i = 0; i < a->n; i++) free(a->v[i]);
  free(a->v);
  free(a->pv);
  altar__hmap_free(&a->pend);
  memset(a, 0, sizeof *a);
}
