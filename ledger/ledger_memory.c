/* The in-process reference TaskLedger: every record lives in the index,
 * the side keys in a sorted store beside it. A batch changes the records at
 * once and keeps a copy of each record as it was before the batch first
 * touched it, so abort puts them back; the batch's side keys wait for
 * commit. Records and side keys thus commit, or vanish, together. */
#include "ledger/ledger_int.h"
#include "ledger/ledger_memory_aux.h"

#include "altar/codec.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

/* A record as it was before the open batch first changed it. */
typedef struct undo {
  char *rkey; /* backend '\0' external_id '\0' */
  size_t rkey_len;
  altar__lent_t *was; /* a copy, or NULL when the record did not exist */
} undo_t;

typedef struct mem_ledger {
  altar__lindex_t ix;
  altar__maux_t aux;
  bool in_batch;
  altar__hmap_t touched; /* rkey → undo, the records the batch changed */
  undo_t **undo;
  size_t n_undo, cap_undo;
} mem_ledger_t;

/* A deep copy of an entry, outside any index. */
static altar__lent_t *lent_copy(const altar__lent_t *x) {
  const altar_record_t *r = &x->e.rec;
  altar__lent_t *c = altar__lent_new(&r->handle, r->kind, r->spec, x->e.task_key, x->e.group_key, 0);
  if (!c) return NULL;
  c->e.rec.state = r->state;
  c->e.rec.restart_count = r->restart_count;
  c->e.rec.consumed = r->consumed;
  if (r->failure && !(c->e.rec.failure = altar_failure_dup(r->failure))) {
    altar__lent_free(c);
    return NULL;
  }
  return c;
}

/* Inside a batch, keeps the record (backend, external_id) as it is now,
 * unless the batch has already kept it: call before changing it. 0 or
 * ALTAR_ENOMEM (then the caller changes nothing). */
static int keep(mem_ledger_t *m, const char *backend, const char *external_id) {
  if (!m->in_batch) return ALTAR_OK;
  char *rk;
  size_t rkl;
  if (altar__rkey(backend, external_id, &rk, &rkl)) return ALTAR_ENOMEM;
  if (altar__hmap_get(&m->touched, rk, rkl)) {
    free(rk);
    return ALTAR_OK;
  }
  altar__lent_t *x = altar__lindex_find(&m->ix, backend, external_id);
  undo_t *u = calloc(1, sizeof *u);
  if (!u || (x && !(u->was = lent_copy(x))) || ALTAR_GROW(m->undo, m->cap_undo, m->n_undo + 1) ||
      altar__hmap_put(&m->touched, rk, rkl, u)) {
    if (u) altar__lent_free(u->was);
    free(u);
    free(rk);
    return ALTAR_ENOMEM;
  }
  u->rkey = rk;
  u->rkey_len = rkl;
  m->undo[m->n_undo++] = u;
  return ALTAR_OK;
}

/* Ends the batch's undo log; with `restore`, first puts every kept record
 * back as it was. */
static int undo_end(mem_ledger_t *m, bool restore, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = m->n_undo; i > 0; i--) {
    undo_t *u = m->undo[i - 1];
    if (restore) {
      const char *backend = u->rkey, *eid = u->rkey + strlen(u->rkey) + 1;
      altar__lent_t *now = altar__lindex_find(&m->ix, backend, eid);
      if (now) altar__lindex_remove(&m->ix, now);
      if (u->was && altar__lindex_add(&m->ix, u->was) == ALTAR_OK) u->was = NULL;
      else if (u->was && !rc)
        rc = altar_error_set(err, ALTAR_ENOMEM, "ledger(memory).abort: out of memory restoring %s:%s", backend, eid);
    }
    altar__lent_free(u->was);
    free(u->rkey);
    free(u);
  }
  m->n_undo = 0;
  altar__hmap_clear(&m->touched);
  return rc;
}

static int mem_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                      const altar_record_meta_t *meta, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (!h || !h->backend || !h->external_id || !kind)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.record: handle and kind are required");
  altar__lent_t *old = altar__lindex_find(&m->ix, h->backend, h->external_id);
  if (old && !old->e.rec.consumed) return ALTAR_OK; /* idempotent while open */
  if (keep(m, h->backend, h->external_id)) return altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory");
  old = altar__lindex_find(&m->ix, h->backend, h->external_id);
  /* A spec given as its bytes only (meta->spec_enc, spec NULL): this ledger
   * keeps the struct, so it decodes them, in place of copying a struct. */
  altar_spec_t *decoded = NULL;
  if (!spec && meta && meta->spec_enc && altar_spec_enc_len(meta->spec_enc)) {
    if (!(decoded = calloc(1, sizeof *decoded)))
      return altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory");
    int rc = altar_decode_spec(altar_spec_enc_data(meta->spec_enc), altar_spec_enc_len(meta->spec_enc), decoded, err);
    if (rc) {
      altar_spec_free(decoded);
      return altar_error_prefix(err, "ledger.record: spec");
    }
  }
  altar__lent_t *x = altar__lent_new(h, kind, spec, meta ? meta->task_key : NULL, meta ? meta->group_key : NULL, 0);
  if (!x) {
    altar_spec_free(decoded);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory");
  }
  if (decoded) x->e.rec.spec = decoded; /* the entry owns it now */
  if (meta) x->e.rec.restart_count = meta->restart_count;
  /* Re-opening a consumed record replaces it whole: state, restarts,
   * failure, spec and metadata all start afresh. */
  if (old) altar__lindex_remove(&m->ix, old);
  if (altar__lindex_add(&m->ix, x)) {
    altar__lent_free(x);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory");
  }
  return ALTAR_OK;
}

static int mem_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t **v;
  size_t n;
  if (altar__lindex_open_sorted(&m->ix, (1u << ALTAR_STATE_PENDING) | (1u << ALTAR_STATE_RUNNING), &v, &n) ||
      altar__handles_from(v, n, phs, pn)) {
    free(v);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.open_handles: out of memory");
  }
  free(v);
  return ALTAR_OK;
}

static int mem_set_state(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state,
                         const altar_failure_t *failure, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if ((unsigned)state > ALTAR_STATE_FAILED)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.set_state: state %d is not a task state", (int)state);
  altar__lent_t *x = altar__lindex_find(&m->ix, h->backend, h->external_id);
  if (!x)
    return altar_error_set(err, ALTAR_ENOTFOUND, "ledger.set_state: no record for %s:%s", h->backend, h->external_id);
  if (keep(m, h->backend, h->external_id) || !(x = altar__lindex_find(&m->ix, h->backend, h->external_id)))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
  altar_state_t was = x->e.rec.state;
  if (altar__set_failure(&x->e.rec, state, failure))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
  altar__lindex_restate(x, was);
  return ALTAR_OK;
}

static int records_of(mem_ledger_t *m, altar_state_t st, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  altar__lent_t **v;
  size_t n;
  *precs = NULL;
  *pn = 0;
  if (altar__lindex_open_sorted(&m->ix, 1u << st, &v, &n))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  altar_record_t *recs = calloc(n ? n : 1, sizeof *recs);
  if (!recs) goto oom;
  for (size_t i = 0; i < n; i++) {
    if (altar_record_copy(&recs[i], &v[i]->e.rec)) {
      altar_records_free(recs, i);
      goto oom;
    }
  }
  free(v);
  *precs = recs;
  *pn = n;
  return ALTAR_OK;
oom:
  free(v);
  return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
}

static int mem_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(altar_ledger_impl(l), ALTAR_STATE_SUCCEEDED, precs, pn, err);
}

static int mem_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(altar_ledger_impl(l), ALTAR_STATE_FAILED, precs, pn, err);
}

static int mem_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  /* Keep them all first: all or nothing. */
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&m->ix, hs[i].backend, hs[i].external_id);
    if (x && !x->e.rec.consumed && keep(m, hs[i].backend, hs[i].external_id))
      return altar_error_set(err, ALTAR_ENOMEM, "ledger.consume: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&m->ix, hs[i].backend, hs[i].external_id);
    if (!x || x->e.rec.consumed) continue;
    x->e.rec.consumed = true;
    altar__lindex_detach(&m->ix, x);
  }
  return ALTAR_OK;
}

static int mem_restart(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_find(&m->ix, h->backend, h->external_id);
  if (!x)
    return altar_error_set(err, ALTAR_ENOTFOUND, "ledger.restart: no record for %s:%s", h->backend, h->external_id);
  if (x->e.rec.consumed || x->e.rec.state != ALTAR_STATE_FAILED)
    return altar_error_set(err, ALTAR_ESTATE, "ledger.restart: %s:%s is not an open failed record", h->backend,
                           h->external_id);
  if (keep(m, h->backend, h->external_id) || !(x = altar__lindex_find(&m->ix, h->backend, h->external_id)))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.restart: out of memory");
  altar__set_failure(&x->e.rec, ALTAR_STATE_PENDING, NULL);
  altar__lindex_restate(x, ALTAR_STATE_FAILED);
  x->e.rec.restart_count++;
  return ALTAR_OK;
}

static int entry_copy(altar_ledger_entry_t *dst, const altar_ledger_entry_t *src) {
  memset(dst, 0, sizeof *dst);
  if (altar_record_copy(&dst->rec, &src->rec) || altar__set_str(&dst->task_key, src->task_key) ||
      altar__set_str(&dst->group_key, src->group_key)) {
    altar_ledger_entry_clear(dst);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

static int mem_get(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                   altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_find(&m->ix, backend, external_id);
  memset(pout, 0, sizeof *pout);
  if (!x) return altar_error_set(err, ALTAR_ENOTFOUND, "ledger: no record for %s:%s", backend, external_id);
  if (entry_copy(pout, &x->e)) return altar_error_set(err, ALTAR_ENOMEM, "ledger.get: out of memory");
  return ALTAR_OK;
}

static const altar_ledger_entry_t *mem_peek_open(altar_ledger_t *l, const char *backend, const char *external_id) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_find(&m->ix, backend, external_id);
  return x && !x->e.rec.consumed ? &x->e : NULL;
}

static const altar_ledger_entry_t *mem_peek_task(altar_ledger_t *l, const char *task_key) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_task(&m->ix, task_key);
  return x ? &x->e : NULL;
}

static int mem_group_counts(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded,
                            size_t *pfailed, altar_error_t *err) {
  (void)err;
  altar__lindex_group_counts(&((mem_ledger_t *)altar_ledger_impl(l))->ix, kind, group_key, psucceeded, pfailed);
  return ALTAR_OK;
}

static int mem_group_members(altar_ledger_t *l, const char *kind, const char *group_key,
                             const altar_ledger_entry_t *const **pm, size_t *pn, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (altar__lindex_group(&m->ix, kind, group_key, pm, pn))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.group_members: out of memory");
  return ALTAR_OK;
}

static int ent_cmp(const void *pa, const void *pb) {
  const altar__lent_t *a = *(altar__lent_t *const *)pa, *b = *(altar__lent_t *const *)pb;
  return altar__rkey_cmp(a->rkey, a->rkey_len, b->rkey, b->rkey_len);
}

static int mem_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar__lent_t **v = malloc((m->ix.recs.n ? m->ix.recs.n : 1) * sizeof *v);
  if (!v) return altar_error_set(err, ALTAR_ENOMEM, "ledger.foreach: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < m->ix.recs.cap; i++) {
    altar__hslot_t *s = &m->ix.recs.slots[i];
    if (s->key && s->val) v[n++] = s->val;
  }
  qsort(v, n, sizeof *v, ent_cmp);
  int rc = ALTAR_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = fn(ctx, &v[i]->e);
  free(v);
  return rc;
}

static int mem_begin(altar_ledger_t *l, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (m->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.begin: a batch is already open");
  m->in_batch = true;
  return ALTAR_OK;
}

static int mem_abort(altar_ledger_t *l, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  m->in_batch = false;
  altar__maux_abort(&m->aux);
  return undo_end(m, true, err);
}

static int mem_commit(altar_ledger_t *l, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (!m->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.commit: no batch is open");
  if (altar__maux_prepare(&m->aux)) {
    mem_abort(l, err);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.commit: out of memory (the batch was dropped)");
  }
  m->in_batch = false;
  altar__maux_commit(&m->aux);
  return undo_end(m, false, err);
}

/* ---- side keys ---- */

static int mem_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                       altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (altar__maux_put(&m->aux, m->in_batch, key, klen, val, vlen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.aux_put: out of memory");
  return ALTAR_OK;
}

static int mem_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  if (altar__maux_del(&m->aux, m->in_batch, key, klen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.aux_del: out of memory");
  return ALTAR_OK;
}

static int mem_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  size_t vlen;
  const void *v = altar__maux_get(&m->aux, key, klen, &vlen);
  if (!v) return ALTAR_ENOTFOUND;
  if (altar_buf_append(out, v, vlen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger.aux_get: out of memory");
  return ALTAR_OK;
}

static int mem_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                        altar_error_t *err) {
  mem_ledger_t *m = altar_ledger_impl(l);
  bool oom;
  int rc = altar__maux_scan(&m->aux, prefix, plen, fn, ctx, &oom);
  return oom ? altar_error_set(err, ALTAR_ENOMEM, "ledger.aux_scan: out of memory") : rc;
}

static void mem_close(altar_ledger_t *l) {
  mem_ledger_t *m = altar_ledger_impl(l);
  altar_error_t ignored = {0};
  undo_end(m, false, &ignored);
  free(m->undo);
  altar__hmap_free(&m->touched);
  altar__maux_free(&m->aux);
  altar__lindex_free(&m->ix);
  free(m);
}

static int mem_open(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err) {
  (void)cfg; /* it takes no key: mem_keys */
  mem_ledger_t *m = calloc(1, sizeof *m);
  if (!m) return altar_error_set(err, ALTAR_ENOMEM, "ledger memory: out of memory");
  altar_ledger_set_impl(l, m);
  return ALTAR_OK;
}

static const altar_plugin_key_t mem_keys[] = {ALTAR_PLUGIN_KEYS_END};

const altar_ledger_ops_t altar_ledger_memory_ops = {
    .name = "memory",
    .caps = ALTAR_LEDGER_CAP_SIDE_KEYS,
    .config_keys = mem_keys,
    .open = mem_open,
    .close = mem_close,
    .record = mem_record,
    .open_handles = mem_open_handles,
    .set_state = mem_set_state,
    .active_succeeded = mem_active_succeeded,
    .active_failed = mem_active_failed,
    .consume = mem_consume,
    .restart = mem_restart,
    .get = mem_get,
    .peek_open = mem_peek_open,
    .peek_task = mem_peek_task,
    .group_members = mem_group_members,
    .group_counts = mem_group_counts,
    .foreach = mem_foreach,
    .begin = mem_begin,
    .commit = mem_commit,
    .abort = mem_abort,
    .aux_put = mem_aux_put,
    .aux_del = mem_aux_del,
    .aux_get = mem_aux_get,
    .aux_scan = mem_aux_scan,
};

altar_ledger_t *altar_ledger_memory_open(altar_error_t *err) {
  return altar_ledger_open(&altar_ledger_memory_ops, NULL, err);
}
