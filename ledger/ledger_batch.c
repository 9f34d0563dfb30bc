/* The RocksDB ledger's batch: changes are staged in an in-memory overlay
 * (so later reads in the same batch see them) and written as one RocksDB
 * WriteBatch on commit; a key written several times in a batch is written
 * once, and an open record created and consumed within one batch never
 * writes its o: key. Every change goes into one write batch, so a kill at
 * any point leaves either all of it or none. */
#include "ledger/ledger_rocksdb_int.h"
#include "ledger/ledger_value.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int altar__rl_key(altar_buf_t *b, char prefix, int32_t part, const char *rk, size_t rklen) {
  altar_buf_reset(b);
  char p[2 + ALTAR__RL_PART_LEN] = {prefix, ':'};
  altar__rl_part_hex(part, p + 2);
  return altar_buf_append(b, p, sizeof p) || altar_buf_append(b, rk, rklen) ? ALTAR_ENOMEM : ALTAR_OK;
}

/* Waits for writes handed to the write-behind thread, so a read sees
 * them. After a failed write every read fails too: what is on disk lacks a
 * batch the caller was told had been committed. */
static void flight_clear(rl_t *r) {
  altar__hmap_clear(&r->flight);
  altar_arena_reset(&r->flight_arena);
}

/* The write-behind thread's sticky error as a read reports it. */
static int writer_failed(rl_t *r, char *werr, altar_error_t *err) {
  int rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: an earlier write failed: %s", r->dir, werr);
  free(werr);
  return rc;
}

int altar__rl_settle(rl_t *r, altar_error_t *err) {
  char *werr = r->writer ? altar__lwriter_drain(r->writer) : NULL;
  if (r->writer) flight_clear(r); /* written now */
  if (!werr) return ALTAR_OK;
  return writer_failed(r, werr, err);
}

typedef struct altar__rl_change {
  char *key;
  size_t klen;
  char *val; /* NULL for a delete or a deferred value */
  size_t vlen;
  /* An open record whose value is encoded only when the batch is written
   * (or read back): a record changed several times in one batch, or
   * consumed before it ends, is then encoded once or never. */
  const struct altar__lent *lazy;
  bool del;
  bool fresh;   /* the key did not exist before this batch */
  bool dropped; /* created and removed within the batch: nothing to write */
} pchange_t;

void altar__rl_pend_clear(rl_t *r) {
  r->n_pv = 0;
  altar__hmap_clear(&r->pend);
  altar_arena_reset(&r->arena);
}

/* Stages a put (val != NULL) or delete of key. `fresh` says the caller knows
 * the key is absent on disk (a new open record). 0 or ALTAR_ENOMEM. */
static int pend_set(rl_t *r, const altar_buf_t *k, const void *val, size_t vlen, bool del, bool fresh,
                    const altar__lent_t *lazy) {
  uint64_t hash = altar__hash(k->data, k->len); /* once for the lookup, the insert or the drop */
  pchange_t *c = altar__hmap_get_h(&r->pend, (const char *)k->data, k->len, hash);
  char *v = NULL;
  if (!del && !lazy && !(v = altar_arena_alloc(&r->arena, vlen ? vlen : 1))) return ALTAR_ENOMEM;
  if (!del && !lazy && vlen) memcpy(v, val, vlen);
  if (c) {
    c->val = v; /* the old value stays in the arena until the batch ends */
    c->vlen = vlen;
    c->lazy = lazy;
    c->del = del;
    if (del && c->fresh) {
      /* Created in this batch and gone again: the disk never sees it. */
      c->dropped = true;
      altar__hmap_del_h(&r->pend, c->key, c->klen, hash);
    }
    return ALTAR_OK;
  }
  if (r->n_pv == r->cap_pv) {
    size_t cap = r->cap_pv ? r->cap_pv * 2 : 256;
    pchange_t **pv = realloc(r->pv, cap * sizeof *pv);
    if (!pv) return ALTAR_ENOMEM;
    r->pv = pv;
    r->cap_pv = cap;
  }
  if (!(c = altar_arena_alloc(&r->arena, sizeof *c)) || !(c->key = altar_arena_alloc(&r->arena, k->len ? k->len : 1)))
    return ALTAR_ENOMEM;
  memcpy(c->key, k->data, k->len);
  c->klen = k->len;
  c->val = v;
  c->vlen = vlen;
  c->lazy = lazy;
  c->del = del;
  c->fresh = fresh && !del;
  c->dropped = false;
  if (altar__hmap_put_h(&r->pend, c->key, c->klen, hash, c, NULL)) return ALTAR_ENOMEM;
  r->pv[r->n_pv++] = c;
  return ALTAR_OK;
}

/* The value a staged change leaves (malloc'd into *pval), or ALTAR_ENOTFOUND
 * for a delete. */
static int copy_change(const pchange_t *c, char **pval, size_t *plen, altar_error_t *err) {
  if (c->del) {
    *pval = NULL;
    return ALTAR_ENOTFOUND;
  }
  if (c->lazy) {
    altar_buf_t b = {0};
    int rc = altar__lvalue_encode(&b, c->lazy, err);
    if (rc) {
      altar_buf_free(&b);
      return rc;
    }
    *plen = b.len;
    if (!(*pval = altar_buf_detach(&b))) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
    return ALTAR_OK;
  }
  if (!(*pval = malloc(c->vlen ? c->vlen : 1))) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  memcpy(*pval, c->val, c->vlen);
  *plen = c->vlen;
  return ALTAR_OK;
}

/* Reads key as the batch would leave it: the overlay first, then the batch
 * the writer has in flight, then the disk. *pval is malloc'd (free with
 * rocksdb_free or free). */
int altar__rl_get_raw(rl_t *r, const altar_buf_t *key, char **pval, size_t *plen, altar_error_t *err) {
  pchange_t *c = altar__hmap_get(&r->pend, (const char *)key->data, key->len);
  if (c) return copy_change(c, pval, plen, err);
  int rc;
  if (r->writer && (c = r->flight.n ? altar__hmap_get(&r->flight, (const char *)key->data, key->len) : NULL) &&
      !c->lazy) {
    /* Written by the batch in flight: its value is known here. */
    char *werr = altar__lwriter_failed(r->writer);
    if (werr) return writer_failed(r, werr, err);
    return copy_change(c, pval, plen, err);
  }
  if (r->writer && !c) {
    /* The batch in flight does not touch key: the disk answers the same
     * before and after its write, so the read need not wait for it. */
    char *werr = altar__lwriter_failed(r->writer);
    if (werr) return writer_failed(r, werr, err);
  } else if ((rc = altar__rl_settle(r, err))) {
    return rc; /* a value encoded at its commit: read once written */
  }
  char *dberr = NULL;
  *pval = rocksdb_get(r->db, r->ropts, (const char *)key->data, key->len, plen, &dberr);
  if (dberr) {
    rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: read failed: %s", dberr);
    rocksdb_free(dberr);
    return rc;
  }
  return *pval ? ALTAR_OK : ALTAR_ENOTFOUND;
}

int altar__rl_stage_put(rl_t *r, const altar_buf_t *k, const void *v, size_t vlen) {
  return pend_set(r, k, v, vlen, false, false, NULL);
}

int altar__rl_stage_del(rl_t *r, const altar_buf_t *k) { return pend_set(r, k, NULL, 0, true, false, NULL); }

/* Stages x's value under o: (open; `fresh` when the caller knows the key is
 * not on disk) or r: (consumed). */
int altar__rl_stage_record(rl_t *r, const altar__lent_t *x, char prefix, bool fresh, altar_error_t *err) {
  int rc = altar__lvalue_encode(&r->vb, x, err);
  if (rc) return rc;
  if (altar__rl_key(&r->kb, prefix, x->part, x->rkey, x->rkey_len) ||
      pend_set(r, &r->kb, r->vb.data, r->vb.len, false, fresh, NULL))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}

/* Stages the o: key of cache entry x, whose value follows x until the batch
 * is written; values that need the codec's checks are encoded now. */
int altar__rl_stage_open(rl_t *r, const altar__lent_t *x, bool fresh, altar_error_t *err) {
  if (!altar__lvalue_fast(x)) return altar__rl_stage_record(r, x, 'o', fresh, err);
  if (altar__rl_key(&r->kb, 'o', x->part, x->rkey, x->rkey_len) || pend_set(r, &r->kb, NULL, 0, false, fresh, x))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}

/* Drops the pending batch and rebuilds the cache from what is on disk. */
void altar__rl_rollback(rl_t *r) {
  altar__rl_pend_clear(r);
  altar_error_t ignored = {0};
  altar__rl_load_cache(r, &ignored);
}

/* A write batch is kept for the next one up to this size; a larger one (a
 * wide group's decision) is freed once written, not held for ever. */
#define WB_KEEP_BYTES (16u << 20)

/* varint32's bytes, as the WriteBatch writes lengths. */
static size_t varint_len(size_t v) {
  size_t n = 1;
  while (v >= 128) {
    v >>= 7;
    n++;
  }
  return n;
}

/* An upper bound of the bytes the batch's changes c[0..n) take in a
 * WriteBatch: the header, then per change a tag, the key and the value,
 * each with its varint length. A lazy value is bounded by its parts. */
static size_t batch_bytes(pchange_t *const *c, size_t n) {
  size_t b = 12;
  for (size_t i = 0; i < n; i++) {
    size_t v = c[i]->vlen;
    if (c[i]->lazy) {
      const altar__lent_t *x = c[i]->lazy;
      v = 256 + x->packed_len + x->spec_len + (x->e.task_key ? strlen(x->e.task_key) : 0) +
          (x->e.group_key ? strlen(x->e.group_key) : 0);
    }
    b += 1 + varint_len(c[i]->klen) + c[i]->klen + (c[i]->del ? 0 : varint_len(v) + v);
  }
  return b;
}

/* Gives the (empty) write batch room for `bytes` at once, when that is
 * large: its string then grows in one step rather than doubling its way
 * there, copying everything at each step and holding old and new at once
 * (a wide group's decision writes about 100 MB). The C API has no
 * reserve: a put of that many bytes read from untouched anonymous memory
 * (the kernel's zero page: no memory taken) sizes the string, and clear
 * keeps its capacity. Nothing is written; a failure only skips the help. */
static void batch_reserve(rocksdb_writebatch_t *wb, size_t bytes) {
  if (bytes < WB_KEEP_BYTES) return;
  void *zeros = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (zeros == MAP_FAILED) return;
  rocksdb_writebatch_put(wb, "", 0, zeros, bytes); /* capacity: bytes and the dummy's own header */
  rocksdb_writebatch_clear(wb);
  munmap(zeros, bytes);
}

static int pchange_cmp(const void *pa, const void *pb) {
  const pchange_t *a = *(pchange_t *const *)pa, *b = *(pchange_t *const *)pb;
  int c = memcmp(a->key, b->key, a->klen < b->klen ? a->klen : b->klen);
  return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

int altar__rl_flush(rl_t *r, altar_error_t *err) {
  if (r->n_pv == 0) return ALTAR_OK;
  /* Only what is written is sorted: a replay drops about half of its
   * changes (records opened and consumed in the same batch). */
  size_t n = 0;
  for (size_t i = 0; i < r->n_pv; i++)
    if (!r->pv[i]->dropped) r->pv[n++] = r->pv[i];
  /* In key order, each memtable insert starts next to the previous one. */
  qsort(r->pv, n, sizeof *r->pv, pchange_cmp);
  rocksdb_writebatch_clear(r->wb);
  if (!r->writer) batch_reserve(r->wb, batch_bytes(r->pv, n));
  for (size_t i = 0; i < n; i++) {
    pchange_t *c = r->pv[i];
    if (c->del) {
      rocksdb_writebatch_delete(r->wb, c->key, c->klen);
    } else if (c->lazy) {
      int rc = altar__lvalue_encode(&r->vb, c->lazy, err); /* the batch copies the bytes */
      if (rc) {
        rocksdb_writebatch_clear(r->wb);
        altar__rl_rollback(r);
        return rc;
      }
      rocksdb_writebatch_put(r->wb, c->key, c->klen, (const char *)r->vb.data, r->vb.len);
    } else {
      rocksdb_writebatch_put(r->wb, c->key, c->klen, c->val, c->vlen);
    }
  }
  char *dberr = NULL;
  bool writes = rocksdb_writebatch_count(r->wb) > 0;
  if (r->fail_writes > 0 && !r->writer) {
    r->fail_writes--;
    dberr = strdup("injected write failure");
  } else if (r->fail_writes > 0 && writes) {
    r->fail_writes--;
    altar__lwriter_fail_next(r->writer); /* fails behind: a later commit says so */
  }
  bool handed = false;
  if (!dberr && writes) {
    if (r->writer) handed = !(dberr = altar__lwriter_submit(r->writer, &r->wb)); /* an earlier batch's failure */
    else rocksdb_write(r->db, r->wopts, r->wb, &dberr);
  }
  size_t wb_len = 0;
  rocksdb_writebatch_data(r->wb, &wb_len);
  if (!r->writer && wb_len > WB_KEEP_BYTES) {
    rocksdb_writebatch_destroy(r->wb);
    r->wb = rocksdb_writebatch_create();
  }
  rocksdb_writebatch_clear(r->wb);
  if (dberr) {
    /* A write that failed behind sticks: trying again cannot help. */
    int rc = r->writer ? altar_error_set(err, ALTAR_ELEDGER, "ledger: write failed: %s", dberr)
                       : altar_error_set_retriable(err, ALTAR_ELEDGER, "ledger: write failed: %s", dberr);
    rocksdb_free(dberr);
    altar__rl_rollback(r);
    return rc;
  }
  if (handed) {
    /* The batch before is written (submit waited for it): this one's
     * changes take its place as the batch in flight. */
    altar__hmap_t m = r->flight;
    altar_arena_t a = r->flight_arena;
    r->flight = r->pend;
    r->flight_arena = r->arena;
    r->pend = m;
    r->arena = a;
  }
  altar__rl_pend_clear(r);
  return ALTAR_OK;
}

/* Ends one operation: outside a batch it is written at once; a failed
 * operation outside a batch leaves nothing behind. */
int altar__rl_op_end(rl_t *r, int rc, altar_error_t *err) {
  if (rc) {
    if (!r->in_batch) altar__rl_rollback(r);
    return rc;
  }
  return r->in_batch ? ALTAR_OK : altar__rl_flush(r, err);
}

int altar__rl_writable(rl_t *r, const char *op, altar_error_t *err) {
  if (r->read_only) return altar_error_set(err, ALTAR_ENOTSUP, "ledger.%s: ledger is open read-only", op);
  return ALTAR_OK;
}

int altar__rl_scan(rl_t *r, const char *pfx, size_t plen, altar__rl_visit_fn fn, void *ctx, altar_error_t *err) {
  int rc = altar__rl_settle(r, err);
  if (rc) return rc;
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  for (rocksdb_iter_seek(it, pfx, plen); !rc && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen < plen || memcmp(k, pfx, plen)) break;
    const char *v = rocksdb_iter_value(it, &vlen);
    rc = fn(ctx, k, klen, v, vlen);
  }
  return altar__rl_iter_end(it, rc, "ledger", err);
}

int altar__rl_iter_end(rocksdb_iterator_t *it, int rc, const char *what, altar_error_t *err) {
  if (!rc) {
    char *dberr = NULL;
    rocksdb_iter_get_error(it, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "%s: scan failed: %s", what, dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_iter_destroy(it);
  return rc;
}
