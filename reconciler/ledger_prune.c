/* The lifetime of consumed records in the RocksDB ledger (ledger_prune.h).
 *
 * Each consumption also writes c:<u64 big-endian ms><rkey> (empty value):
 * an index in the order records were consumed, so a prune reads only the
 * old end of it, however many records are kept, and costs the same per
 * record at any ledger size. Records consumed before the index existed have
 * no entry and are kept. A record consumed twice (re-opened in between)
 * keeps both entries; the older one removes it at the older age, which only
 * ever frees it early, never keeps it. */
#include "reconciler/ledger_prune.h"

#include "reconciler/ledger_rocksdb_int.h"

#include <string.h>
#include <time.h>

#define IDX_PREFIX_LEN 10 /* "c:" + 8 bytes of time */

int64_t altar__rl_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int idx_key(altar_buf_t *b, int64_t ms, const char *rk, size_t rklen) {
  uint8_t t[8];
  uint64_t u = ms < 0 ? 0 : (uint64_t)ms;
  for (int i = 7; i >= 0; i--, u >>= 8) t[i] = (uint8_t)(u & 0xff);
  altar_buf_reset(b);
  return altar_buf_append(b, "c:", 2) || altar_buf_append(b, t, 8) || altar_buf_append(b, rk, rklen) ? ALTAR_ENOMEM
                                                                                                   : ALTAR_OK;
}

int altar__rl_stage_consumed_at(rl_t *r, const char *rk, size_t rklen, int64_t ms) {
  if (idx_key(&r->kb2, ms, rk, rklen)) return ALTAR_ENOMEM;
  return altar__rl_stage_put(r, &r->kb2, "", 0);
}

static int64_t idx_ms(const char *k) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u = u << 8 | (uint8_t)k[2 + i];
  return (int64_t)u;
}

int altar_ledger_rocksdb_prune_consumed(altar_ledger_t *l, int64_t before_ms, size_t max, size_t *ppruned,
                                        altar_error_t *err) {
  *ppruned = 0;
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger prune: a batch is open");
  int rc = altar__rl_writable(r, "prune", err);
  if (!rc) rc = altar__rl_settle(r, err); /* the iterator must see every committed consumption */
  if (rc) return rc;
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  size_t n = 0;
  for (rocksdb_iter_seek(it, "c:", 2); !rc && n < max && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen <= IDX_PREFIX_LEN || memcmp(k, "c:", 2) || idx_ms(k) >= before_ms) break;
    const char *rk = k + IDX_PREFIX_LEN;
    size_t rklen = klen - IDX_PREFIX_LEN;
    /* A record open again under its key is no longer the consumed one: its
     * stale r: copy may go, the open record stays. */
    altar_buf_reset(&r->kb2);
    if (altar__rl_key(&r->kb, 'r', rk, rklen) || altar__rl_stage_del(r, &r->kb) ||
        altar_buf_append(&r->kb2, k, klen) || altar__rl_stage_del(r, &r->kb2))
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger prune: out of memory");
    n++;
  }
  rc = altar__rl_iter_end(it, rc, "ledger prune", err);
  if (rc) {
    altar__rl_pend_clear(r);
    return rc;
  }
  rc = altar__rl_op_end(r, ALTAR_OK, err);
  if (!rc) *ppruned = n;
  return rc;
}
