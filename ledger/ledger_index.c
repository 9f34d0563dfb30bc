/* The in-memory ledger index: records by key, open records by group and by
 * task key. Evaluating a group reads only its members (work proportional to
 * the group), never the whole ledger. */
#include "ledger/ledger_int.h"

#include <stdlib.h>
#include <string.h>

void altar_ledger_entry_clear(altar_ledger_entry_t *e) {
  if (!e) return;
  altar_record_clear(&e->rec);
  free(e->task_key);
  free(e->group_key);
  memset(e, 0, sizeof *e);
}

int altar__set_str(char **dst, const char *src) {
  char *c = NULL;
  if (src && !(c = strdup(src))) return ALTAR_ENOMEM;
  free(*dst);
  *dst = c;
  return ALTAR_OK;
}

int altar__set_failure(altar_record_t *rec, altar_state_t state, const altar_failure_t *f) {
  altar_failure_t *c = NULL;
  if (state == ALTAR_STATE_FAILED && f && !(c = altar_failure_dup(f))) return ALTAR_ENOMEM;
  altar_failure_free(rec->failure);
  rec->failure = c;
  rec->state = state;
  return ALTAR_OK;
}

int altar__rkey(const char *backend, const char *external_id, char **pkey, size_t *plen) {
  size_t bl = strlen(backend), el = strlen(external_id);
  char *k = malloc(bl + el + 2);
  if (!k) return ALTAR_ENOMEM;
  memcpy(k, backend, bl);
  k[bl] = '\0';
  memcpy(k + bl + 1, external_id, el);
  k[bl + 1 + el] = '\0';
  *pkey = k;
  *plen = bl + 1 + el;
  return ALTAR_OK;
}

/* Bytewise order; '\0' sorts first, so this is (backend, external_id) order. */
int altar__rkey_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  return (alen > blen) - (alen < blen);
}

static char *put_opt(char *p, const char *s, char **pout) {
  if (!s) return p;
  size_t n = strlen(s) + 1;
  *pout = memcpy(p, s, n);
  return p + n;
}

altar__lent_t *altar__lent_new(const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                               const char *task_key, const char *group_key, size_t extra) {
  if (!kind) kind = "";
  size_t head = (sizeof(altar__lent_t) + sizeof(char *) - 1) & ~(sizeof(char *) - 1);
  size_t size = head + altar_handle_packed_size(h) + strlen(kind) + 1 + (task_key ? strlen(task_key) + 1 : 0) +
                (group_key ? strlen(group_key) + 1 : 0) + extra;
  altar__lent_t *x = malloc(size);
  if (!x) return NULL;
  memset(x, 0, sizeof *x); /* the rest is written below, or by the caller */
  x->active_pos = SIZE_MAX;
  x->one_block = true;
  altar_record_t *rec = &x->e.rec;
  rec->state = ALTAR_STATE_PENDING;
  if (spec && !(rec->spec = altar_spec_dup(spec))) {
    free(x);
    return NULL;
  }
  /* The handle first (pointer-aligned), its backend and external_id lying
   * as the record key does; then the strings; then the caller's tail. */
  char *p = altar_handle_pack(&rec->handle, h, (char *)x + head);
  x->rkey = rec->handle.backend;
  x->rkey_len = (size_t)(p - x->rkey) - 1;
  p = put_opt(p, kind, &rec->kind);
  p = put_opt(p, task_key, &x->e.task_key);
  p = put_opt(p, group_key, &x->e.group_key);
  x->tail = p;
  return x;
}

void altar__lent_free(altar__lent_t *x) {
  if (!x) return;
  if (x->one_block) {
    altar_failure_free(x->e.rec.failure);
    altar_spec_free(x->e.rec.spec);
    free(x);
    return;
  }
  altar_ledger_entry_clear(&x->e);
  free(x->rkey);
  free(x->packed);
  free(x->spec_enc);
  free(x);
}

altar__lent_t *altar__lindex_find(altar__lindex_t *ix, const char *backend, const char *external_id) {
  size_t bl = strlen(backend), el = strlen(external_id);
  altar__lent_t *x = ix->last;
  if (x && x->rkey_len == bl + 1 + el && !memcmp(x->rkey, backend, bl + 1) &&
      !memcmp(x->rkey + bl + 1, external_id, el))
    return x;
  char stackbuf[256];
  char *k = bl + el + 1 <= sizeof stackbuf ? stackbuf : malloc(bl + el + 1);
  if (!k) return NULL;
  memcpy(k, backend, bl);
  k[bl] = '\0';
  memcpy(k + bl + 1, external_id, el);
  x = altar__hmap_get(&ix->recs, k, bl + 1 + el);
  if (k != stackbuf) free(k);
  if (x) ix->last = x;
  return x;
}

static altar__lgroup_t *group_get(altar__lindex_t *ix, const char *kind, const char *gk, bool create) {
  size_t kl = strlen(kind), gl = strlen(gk);
  char stackbuf[256];
  char *k = kl + gl + 2 <= sizeof stackbuf ? stackbuf : malloc(kl + gl + 2);
  if (!k) return NULL;
  memcpy(k, kind, kl);
  k[kl] = '\0';
  memcpy(k + kl + 1, gk, gl + 1);
  uint64_t hash = altar__hash(k, kl + 1 + gl); /* once for the lookup and the insert */
  altar__lgroup_t *g = altar__hmap_get_h(&ix->groups, k, kl + 1 + gl, hash);
  if (g || !create) {
    if (k != stackbuf) free(k);
    return g;
  }
  /* A new group keeps its own copy of the key, in the same block. */
  g = calloc(1, sizeof *g + kl + gl + 2);
  if (g) {
    g->key = memcpy(g + 1, k, kl + gl + 2);
    g->key_len = kl + 1 + gl;
  }
  if (k != stackbuf) free(k);
  if (g && altar__hmap_put_h(&ix->groups, g->key, g->key_len, hash, g, NULL)) {
    free(g);
    g = NULL;
  }
  return g;
}

static void group_free(altar__lgroup_t *g) {
  if (!g) return;
  free(g->m);
  free(g);
}

int altar__lindex_attach(altar__lindex_t *ix, altar__lent_t *x) {
  if (x->active_pos != SIZE_MAX) return ALTAR_OK;
  if (ix->n_active == ix->cap_active) {
    size_t cap = ix->cap_active ? ix->cap_active * 2 : 64;
    altar__lent_t **v = realloc(ix->active, cap * sizeof *v);
    if (!v) return ALTAR_ENOMEM;
    ix->active = v;
    ix->cap_active = cap;
  }
  if (x->e.group_key) {
    altar__lgroup_t *g = group_get(ix, x->e.rec.kind, x->e.group_key, true);
    if (!g) return ALTAR_ENOMEM;
    if (g->n == g->cap) {
      size_t cap = g->cap ? g->cap * 2 : 8;
      altar__lent_t **m = realloc(g->m, cap * sizeof *m);
      if (!m) {
        if (!g->n) group_free(altar__hmap_del(&ix->groups, g->key, g->key_len));
        return ALTAR_ENOMEM;
      }
      g->m = m;
      g->cap = cap;
    }
    g->m[g->n] = x;
    x->grp = g;
    x->grp_pos = g->n++;
    if ((unsigned)x->e.rec.state < 4) g->n_state[x->e.rec.state]++;
  }
  if (x->e.task_key && altar__hmap_put(&ix->tasks, x->e.task_key, strlen(x->e.task_key), x)) {
    altar__lindex_detach(ix, x);
    return ALTAR_ENOMEM;
  }
  x->active_pos = ix->n_active;
  ix->active[ix->n_active++] = x;
  return ALTAR_OK;
}

void altar__lindex_detach(altar__lindex_t *ix, altar__lent_t *x) {
  if (x->active_pos != SIZE_MAX) {
    altar__lent_t *last = ix->active[--ix->n_active];
    ix->active[x->active_pos] = last;
    last->active_pos = x->active_pos;
    x->active_pos = SIZE_MAX;
  }
  if (x->grp) {
    altar__lgroup_t *g = x->grp;
    altar__lent_t *last = g->m[--g->n];
    g->m[x->grp_pos] = last;
    last->grp_pos = x->grp_pos;
    x->grp = NULL;
    if ((unsigned)x->e.rec.state < 4) g->n_state[x->e.rec.state]--;
    if (!g->n) group_free(altar__hmap_del(&ix->groups, g->key, g->key_len));
  }
  if (x->e.task_key) {
    size_t tl = strlen(x->e.task_key);
    uint64_t th = altar__hash(x->e.task_key, tl);
    if (altar__hmap_get_h(&ix->tasks, x->e.task_key, tl, th) == x) altar__hmap_del_h(&ix->tasks, x->e.task_key, tl, th);
  }
}

int altar__lindex_add(altar__lindex_t *ix, altar__lent_t *x) {
  x->rhash = altar__hash(x->rkey, x->rkey_len);
  if (altar__hmap_put_h(&ix->recs, x->rkey, x->rkey_len, x->rhash, x, NULL)) return ALTAR_ENOMEM;
  if (!x->e.rec.consumed && altar__lindex_attach(ix, x)) {
    altar__hmap_del_h(&ix->recs, x->rkey, x->rkey_len, x->rhash);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

void altar__lindex_remove(altar__lindex_t *ix, altar__lent_t *x) {
  if (ix->last == x) ix->last = NULL;
  altar__lindex_detach(ix, x);
  if (altar__hmap_get_h(&ix->recs, x->rkey, x->rkey_len, x->rhash) == x)
    altar__hmap_del_h(&ix->recs, x->rkey, x->rkey_len, x->rhash);
  altar__lent_free(x);
}

altar__lent_t *altar__lindex_task(const altar__lindex_t *ix, const char *task_key) {
  return altar__hmap_get(&ix->tasks, task_key, strlen(task_key));
}

void altar__lindex_restate(altar__lent_t *x, altar_state_t was) {
  if (!x->grp || x->e.rec.state == was) return;
  if ((unsigned)was < 4) x->grp->n_state[was]--;
  if ((unsigned)x->e.rec.state < 4) x->grp->n_state[x->e.rec.state]++;
}

void altar__lindex_group_counts(altar__lindex_t *ix, const char *kind, const char *group_key, size_t *psucceeded,
                                size_t *pfailed) {
  altar__lgroup_t *g = group_get(ix, kind, group_key, false);
  *psucceeded = g ? g->n_state[ALTAR_STATE_SUCCEEDED] : 0;
  *pfailed = g ? g->n_state[ALTAR_STATE_FAILED] : 0;
}

static int ent_cmp(const void *pa, const void *pb) {
  const altar__lent_t *a = *(altar__lent_t *const *)pa, *b = *(altar__lent_t *const *)pb;
  return altar__rkey_cmp(a->rkey, a->rkey_len, b->rkey, b->rkey_len);
}

int altar__lindex_group(altar__lindex_t *ix, const char *kind, const char *group_key,
                        const altar_ledger_entry_t *const **pm, size_t *pn) {
  *pm = NULL;
  *pn = 0;
  altar__lgroup_t *g = group_get(ix, kind, group_key, false);
  if (!g) return ALTAR_OK;
  if (g->n > ix->cap_scratch) {
    const altar_ledger_entry_t **s = realloc(ix->scratch, g->n * 2 * sizeof *s);
    if (!s) return ALTAR_ENOMEM;
    ix->scratch = s;
    ix->cap_scratch = g->n * 2;
  }
  /* Sorted by record key so evaluation never depends on arrival order. */
  altar__lent_t **tmp = (altar__lent_t **)(void *)ix->scratch;
  memcpy(tmp, g->m, g->n * sizeof *tmp);
  qsort(tmp, g->n, sizeof *tmp, ent_cmp);
  for (size_t i = 0; i < g->n; i++) ix->scratch[i] = &tmp[i]->e;
  *pm = ix->scratch;
  *pn = g->n;
  return ALTAR_OK;
}

int altar__lindex_open_sorted(const altar__lindex_t *ix, unsigned state_mask, altar__lent_t ***pv, size_t *pn) {
  *pv = NULL;
  *pn = 0;
  altar__lent_t **v = malloc((ix->n_active ? ix->n_active : 1) * sizeof *v);
  if (!v) return ALTAR_ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < ix->n_active; i++)
    if (state_mask & (1u << ix->active[i]->e.rec.state)) v[n++] = ix->active[i];
  qsort(v, n, sizeof *v, ent_cmp);
  *pv = v;
  *pn = n;
  return ALTAR_OK;
}

void altar__lindex_free(altar__lindex_t *ix) {
  for (size_t i = 0; i < ix->recs.cap; i++) {
    altar__hslot_t *s = &ix->recs.slots[i];
    if (s->key && s->val) {
      altar__lent_t *x = s->val;
      x->grp = NULL;
      altar__lent_free(x);
    }
  }
  for (size_t i = 0; i < ix->groups.cap; i++) {
    altar__hslot_t *s = &ix->groups.slots[i];
    if (s->key && s->val) group_free(s->val);
  }
  altar__hmap_free(&ix->recs);
  altar__hmap_free(&ix->groups);
  altar__hmap_free(&ix->tasks);
  free(ix->active);
  free(ix->scratch);
  memset(ix, 0, sizeof *ix);
}

int altar__handles_from(altar__lent_t *const *v, size_t n, altar_handle_t **phs, size_t *pn) {
  *phs = NULL;
  *pn = 0;
  altar_handle_t *hs = calloc(n ? n : 1, sizeof *hs);
  if (!hs) return ALTAR_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (altar_handle_copy(&hs[i], &v[i]->e.rec.handle)) {
      altar_handles_free(hs, i);
      return ALTAR_ENOMEM;
    }
  }
  *phs = hs;
  *pn = n;
  return ALTAR_OK;
}
