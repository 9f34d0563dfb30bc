/* The RocksDB ledger's side keyspace: the aux_* operations, under
 * x:<partition> (the handle's scope), in the same batch as the records. A
 * scan with no scope visits every partition merged in key order. */
#include "ledger/ledger_rocksdb_int.h"

#include <stdlib.h>

#define AUX_PFX (2 + ALTAR__RL_PART_LEN)

static int aux_key(altar_buf_t *b, int32_t part, const void *key, size_t klen) {
  char p[AUX_PFX] = {'x', ':'};
  altar__rl_part_hex(part, p + 2);
  altar_buf_reset(b);
  return altar_buf_append(b, p, sizeof p) || altar_buf_append(b, key, klen) ? ALTAR_ENOMEM : ALTAR_OK;
}

int altar__rl_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                      altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "aux_put", err))) return rc;
  r->parted |= l->scope != ALTAR_LEDGER_SCOPE_NONE;
  if (aux_key(&r->kb, l->scope, key, klen) || altar__rl_stage_put(r, &r->kb, val, vlen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : altar__rl_flush(r, err);
}

int altar__rl_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "aux_del", err))) return rc;
  if (aux_key(&r->kb, l->scope, key, klen) || altar__rl_stage_del(r, &r->kb))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : altar__rl_flush(r, err);
}

int altar__rl_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  if (aux_key(&r->kb, l->scope, key, klen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  char *val;
  size_t vlen;
  int rc = altar__rl_get_raw(r, &r->kb, &val, &vlen, err);
  if (rc == ALTAR_ENOTFOUND && l->scope == ALTAR_LEDGER_SCOPE_NONE && r->parted) {
    /* With no scope, under whichever partition holds it (readers outside
     * the apply path: the ledger's own state first, then each partition). */
    int32_t *pv;
    size_t pn;
    if ((rc = altar__rl_parts(r, "x:", &pv, &pn, err))) return rc;
    rc = ALTAR_ENOTFOUND;
    for (size_t i = 0; rc == ALTAR_ENOTFOUND && i < pn; i++) {
      if (pv[i] == ALTAR_LEDGER_SCOPE_NONE) continue;
      if (aux_key(&r->kb, pv[i], key, klen)) rc = altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
      else rc = altar__rl_get_raw(r, &r->kb, &val, &vlen, err);
    }
    free(pv);
  }
  if (rc == ALTAR_ENOTFOUND) return ALTAR_ENOTFOUND;
  if (rc) return rc;
  rc = altar_buf_append(out, val, vlen) ? altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory") : ALTAR_OK;
  rocksdb_free(val);
  return rc;
}

typedef struct aux_ctx {
  altar_ledger_aux_visit_fn fn;
  void *ctx;
} aux_ctx_t;

static int aux_visit(void *vctx, const char *k, size_t klen, const char *v, size_t vlen) {
  aux_ctx_t *c = vctx;
  return c->fn(c->ctx, k + AUX_PFX, klen - AUX_PFX, v, vlen);
}

/* Every partition's keys under prefix, merged by key (equal keys in
 * partition order), each visit told its partition. */
static int scan_merged(altar_ledger_t *l, rl_t *r, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn,
                       void *ctx, altar_error_t *err) {
  static const char *const fam[] = {"x:"};
  altar__rl_merge_t m;
  int rc = altar__rl_merge_open(r, fam, 1, prefix, plen, &m, err);
  size_t i;
  while (!rc && (i = altar__rl_merge_next(&m, NULL)) != SIZE_MAX) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(m.it[i], &klen), *v = rocksdb_iter_value(m.it[i], &vlen);
    l->visit_part = m.part[i];
    rc = fn(ctx, k + AUX_PFX, klen - AUX_PFX, v, vlen);
    rocksdb_iter_next(m.it[i]);
  }
  l->visit_part = ALTAR_LEDGER_SCOPE_NONE;
  return altar__rl_merge_end(&m, rc, "ledger", err);
}

int altar__rl_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                       altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  if (l->scope == ALTAR_LEDGER_SCOPE_NONE) return scan_merged(l, r, prefix, plen, fn, ctx, err);
  altar_buf_t pk = {0};
  if (aux_key(&pk, l->scope, prefix, plen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  aux_ctx_t c = {fn, ctx};
  l->visit_part = l->scope;
  int rc = altar__rl_scan(r, (const char *)pk.data, pk.len, aux_visit, &c, err);
  l->visit_part = ALTAR_LEDGER_SCOPE_NONE;
  altar_buf_free(&pk);
  return rc;
}
