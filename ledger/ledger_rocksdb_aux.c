/* The RocksDB ledger's side keyspace: the aux_* operations, under x:, in
 * the same batch as the records. */
#include "ledger/ledger_rocksdb_int.h"

#include <stdlib.h>

static int aux_key(altar_buf_t *b, const void *key, size_t klen) {
  altar_buf_reset(b);
  return altar_buf_append(b, "x:", 2) || altar_buf_append(b, key, klen) ? ALTAR_ENOMEM : ALTAR_OK;
}

int altar__rl_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                      altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "aux_put", err))) return rc;
  if (aux_key(&r->kb, key, klen) || altar__rl_stage_put(r, &r->kb, val, vlen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : altar__rl_flush(r, err);
}

int altar__rl_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "aux_del", err))) return rc;
  if (aux_key(&r->kb, key, klen) || altar__rl_stage_del(r, &r->kb))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : altar__rl_flush(r, err);
}

int altar__rl_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  if (aux_key(&r->kb, key, klen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  char *val;
  size_t vlen;
  int rc = altar__rl_get_raw(r, &r->kb, &val, &vlen, err);
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
  return c->fn(c->ctx, k + 2, klen - 2, v, vlen);
}

int altar__rl_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                       altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  altar_buf_t pk = {0};
  if (aux_key(&pk, prefix, plen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  aux_ctx_t c = {fn, ctx};
  int rc = altar__rl_scan(r, (const char *)pk.data, pk.len, aux_visit, &c, err);
  altar_buf_free(&pk);
  return rc;
}
