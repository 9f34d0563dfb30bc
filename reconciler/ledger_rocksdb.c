/* The production TaskLedger on RocksDB.
 *
 * Layout (all in the default column family; rkey = backend '\0' external_id):
 *   o:<rkey>     an open (not consumed) record
 *   r:<rkey>     a consumed record
 *   m:version    layout version
 *   x:…          keys of callers sharing the write (daemon outbox, offsets)
 * A value is: metadata header (task key, group key), the msgpack record
 * without its spec, then the spec's msgpack bytes. The record key of an open
 * record is its own index (open records are found by scanning o:, never the
 * consumed ones), and the spec travels inside the record, so a submit is one
 * key, a state change one key, and consumption two (o: deleted, r: written).
 * A consumed record that is re-opened leaves its old r: copy behind until it
 * is consumed again: o: wins over r: for the same rkey everywhere.
 * Every change goes into one write batch, so a kill at any point leaves
 * either all of it or none.
 *
 * Open records are also held in memory (with their encoded spec), rebuilt on
 * open from o:, so grouping, polling, the active sets and supersede checks
 * read no disk and never scan the ledger; the by-state views (open handles,
 * active succeeded, active failed) are derived there.
 *
 * Changes are staged in an in-memory overlay (so later reads in the same
 * batch see them) and written as one RocksDB WriteBatch on commit; a key
 * written several times in a batch is written once, and an open record
 * created and consumed within one batch never writes its o: key. */
#include "reconciler/ledger_rocksdb.h"

#include "altar/arena.h"
#include "altar/codec.h"
#include "core/codec_int.h"
#include "reconciler/ledger_int.h"
#include "reconciler/ledger_open.h"
#include "reconciler/ledger_writer.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_MAGIC 0xA2
#define LAYOUT_VERSION "2"

typedef struct rl {
  rocksdb_t *db;
  rocksdb_options_t *opts;
  rocksdb_block_based_table_options_t *topts;
  rocksdb_cache_t *cache;
  rocksdb_writeoptions_t *wopts;
  rocksdb_readoptions_t *ropts;
  rocksdb_writebatch_t *wb;
  altar__hmap_t pend;    /* key → pending change of the open batch */
  altar_arena_t arena;   /* memory of the pending changes, reset per batch */
  struct pchange **pv;   /* the same changes, for writing them out */
  size_t n_pv, cap_pv;
  bool in_batch;
  bool read_only;
  bool no_wal;
  altar__lwriter_t *writer; /* write-behind: commits handed to a thread */
  int fail_writes; /* test hook: fail this many upcoming writes */
  altar__lindex_t ix;
  altar_buf_t kb, vb, kb2; /* scratch */
  char *dir;
} rl_t;

static void rl_close(void *impl);

/* ---- keys ---- */

static int key1(altar_buf_t *b, char prefix, const char *rk, size_t rklen) {
  altar_buf_reset(b);
  char p[2] = {prefix, ':'};
  return altar_buf_append(b, p, 2) || altar_buf_append(b, rk, rklen) ? ALTAR_ENOMEM : ALTAR_OK;
}

/* ---- reading what was written ---- */

/* Waits for writes handed to the write-behind thread, so a read sees
 * them. After a failed write every read fails too: what is on disk lacks a
 * batch the caller was told had been committed. */
static int settle(rl_t *r, altar_error_t *err) {
  char *werr = r->writer ? altar__lwriter_drain(r->writer) : NULL;
  if (!werr) return ALTAR_OK;
  int rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: an earlier write failed: %s", r->dir, werr);
  free(werr);
  return rc;
}

/* ---- values ---- */

static int put_u32(altar_buf_t *b, uint32_t v) {
  unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                        (unsigned char)v};
  return altar_buf_append(b, x, 4);
}

static int put_opt_str(altar_buf_t *b, const char *s) {
  if (!s) return put_u32(b, 0xffffffffu);
  size_t n = strlen(s);
  return put_u32(b, (uint32_t)n) || altar_buf_append(b, s, n) ? ALTAR_ENOMEM : ALTAR_OK;
}

static int buf_sink(void *data, const char *p, size_t len) { return altar_buf_append(data, p, len) ? -1 : 0; }

static void pk_str(msgpack_packer *pk, const char *s) {
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

/* The changing fields of the record map around the fixed part, in the
 * codec's bytes: map of 7, "consumed", the flag, "failure", nil (records
 * with a failure go through the codec). */
static int pack_head(altar_buf_t *b, bool consumed) {
  static const char head[] = "\x87\xa8" "consumed" "\xc2\xa7" "failure" "\xc0";
  if (altar_buf_append(b, head, sizeof head - 1)) return -1;
  if (consumed) b->data[b->len - 10] = 0xc3; /* true in place of false */
  return 0;
}

static int pack_tail(altar_buf_t *b, int64_t restart_count, altar_state_t state) {
  static const char rc_key[] = "\xad" "restart_count";
  static const char spec_state[] = "\xa4" "spec" "\xc0\xa5" "state";
  if (altar_buf_append(b, rc_key, sizeof rc_key - 1)) return -1;
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, buf_sink);
  int bad = msgpack_pack_int64(&pk, restart_count);
  if (bad || altar_buf_append(b, spec_state, sizeof spec_state - 1)) return -1;
  pk_str(&pk, altar_state_name(state));
  return 0;
}

/* The parts of a record that never change ("handle" and "kind" entries of
 * the record map), encoded with the codec's bounds and UTF-8 checks into
 * r->kb2. A cached record keeps them, so each later write of it only adds
 * its few changing fields. */
static int encode_fixed(rl_t *r, const altar_record_t *rec, altar_error_t *err) {
  altar_buf_reset(&r->kb2);
  return altar__encode_record_fixed(rec, &r->kb2, err);
}

/* The fixed part of an entry loaded from disk (a new record's entry gets it
 * in its own block). */
static int pack_fixed(rl_t *r, altar__lent_t *x, altar_error_t *err) {
  int rc = encode_fixed(r, &x->e.rec, err);
  if (rc) return rc;
  altar_buf_t *tmp = &r->kb2;
  char *p = malloc(tmp->len ? tmp->len : 1);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  memcpy(p, tmp->data, tmp->len);
  free(x->packed);
  x->packed = p;
  x->packed_len = tmp->len;
  return ALTAR_OK;
}

/* True when encode_value takes its fast path for x, which cannot fail but
 * for memory: such a value may be encoded when the batch is written. */
static bool fast_value(const altar__lent_t *x) {
  return x->packed && !x->e.rec.failure && (unsigned)x->e.rec.state <= ALTAR_STATE_FAILED;
}

/* Value = magic, has_spec, task_key, group_key, u32 length of the msgpack
 * record (spec left out), the record, then the spec's encoding. The record
 * map is the codec's, so altar_decode_record reads it back; records without
 * a failure take the fast path over the pre-packed fixed part, the rest go
 * through the codec. The spec bytes are the ones encoded at submit. */
static int encode_value(altar_buf_t *b, const altar__lent_t *x, altar_error_t *err) {
  const altar_ledger_entry_t *e = &x->e;
  altar_buf_reset(b);
  unsigned char hdr[2] = {VALUE_MAGIC, x->has_spec ? 1 : 0};
  if (altar_buf_append(b, hdr, 2) || put_opt_str(b, e->task_key) || put_opt_str(b, e->group_key) || put_u32(b, 0))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  size_t start = b->len;
  if (fast_value(x)) {
    if (pack_head(b, e->rec.consumed) || altar_buf_append(b, x->packed, x->packed_len) ||
        pack_tail(b, e->rec.restart_count, e->rec.state))
      return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  } else {
    altar_record_t shallow = e->rec;
    shallow.spec = NULL;
    int rc = altar_encode_record(&shallow, b, err);
    if (rc) return rc;
  }
  size_t n = b->len - start;
  if (n > UINT32_MAX) return altar_error_set(err, ALTAR_EINVAL, "ledger: record too large");
  b->data[start - 4] = (uint8_t)(n >> 24);
  b->data[start - 3] = (uint8_t)(n >> 16);
  b->data[start - 2] = (uint8_t)(n >> 8);
  b->data[start - 1] = (uint8_t)n;
  if (x->has_spec && altar_buf_append(b, x->spec_enc, x->spec_len))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}

static int get_opt_str(const unsigned char **p, const unsigned char *end, char **pout) {
  if (end - *p < 4) return ALTAR_EDECODE;
  uint32_t n = ((uint32_t)(*p)[0] << 24) | ((uint32_t)(*p)[1] << 16) | ((uint32_t)(*p)[2] << 8) | (*p)[3];
  *p += 4;
  if (n == 0xffffffffu) {
    *pout = NULL;
    return ALTAR_OK;
  }
  if ((size_t)(end - *p) < n || n > ALTAR_MAX_STRING) return ALTAR_EDECODE;
  if (memchr(*p, 0, n)) return ALTAR_EDECODE;
  if (!(*pout = strndup((const char *)*p, n))) return ALTAR_ENOMEM;
  *p += n;
  return ALTAR_OK;
}

/* Decodes a record value into *e (zeroed first; caller clears). The spec's
 * bytes (inside data, NULL without a spec) go to *pspec and *pspec_len; with
 * want_spec the spec is decoded into e->rec.spec as well. */
static int decode_value(const char *data, size_t len, altar_ledger_entry_t *e, const char **pspec,
                        size_t *pspec_len, bool want_spec, altar_error_t *err) {
  memset(e, 0, sizeof *e);
  *pspec = NULL;
  *pspec_len = 0;
  const unsigned char *p = (const unsigned char *)data, *end = p + len;
  if (len < 2 || p[0] != VALUE_MAGIC || p[1] > 1)
    return altar_error_set(err, ALTAR_EDECODE, "ledger record: bad header");
  bool has_spec = p[1] == 1;
  p += 2;
  int rc = get_opt_str(&p, end, &e->task_key);
  if (!rc) rc = get_opt_str(&p, end, &e->group_key);
  if (rc) return altar_error_set(err, rc, "ledger record: bad metadata");
  if (end - p < 4) return altar_error_set(err, ALTAR_EDECODE, "ledger record: truncated");
  uint32_t n = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
  p += 4;
  if ((size_t)(end - p) < n) return altar_error_set(err, ALTAR_EDECODE, "ledger record: truncated");
  rc = altar_decode_record(p, n, &e->rec, err);
  if (rc) return altar_error_prefix(err, "ledger record");
  p += n;
  if (has_spec != (p < end))
    return altar_error_set(err, ALTAR_EDECODE, "ledger record: spec flag and spec bytes disagree");
  if (!has_spec) return ALTAR_OK;
  *pspec = (const char *)p;
  *pspec_len = (size_t)(end - p);
  if (!want_spec) return ALTAR_OK;
  altar_spec_t *s = calloc(1, sizeof *s);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  rc = altar_decode_spec(p, (size_t)(end - p), s, err);
  if (rc) {
    altar_spec_free(s);
    return altar_error_prefix(err, "ledger record: spec");
  }
  e->rec.spec = s;
  return ALTAR_OK;
}

/* ---- the overlay of pending changes ---- */

typedef struct pchange {
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

static void pend_clear(rl_t *r) {
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

/* Reads key as the batch would leave it: the overlay first, then the disk.
 * *pval is malloc'd (free with rocksdb_free or free). */
static int db_get(rl_t *r, const altar_buf_t *key, char **pval, size_t *plen, altar_error_t *err) {
  pchange_t *c = altar__hmap_get(&r->pend, (const char *)key->data, key->len);
  if (c) {
    if (c->del) {
      *pval = NULL;
      return ALTAR_ENOTFOUND;
    }
    if (c->lazy) {
      altar_buf_t b = {0};
      int rc = encode_value(&b, c->lazy, err);
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
  char *dberr = NULL;
  int rc = settle(r, err);
  if (rc) return rc;
  *pval = rocksdb_get(r->db, r->ropts, (const char *)key->data, key->len, plen, &dberr);
  if (dberr) {
    rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: read failed: %s", dberr);
    rocksdb_free(dberr);
    return rc;
  }
  return *pval ? ALTAR_OK : ALTAR_ENOTFOUND;
}

static int b_put(rl_t *r, const altar_buf_t *k, const void *v, size_t vlen) {
  return pend_set(r, k, v, vlen, false, false, NULL);
}
static int b_del(rl_t *r, const altar_buf_t *k) { return pend_set(r, k, NULL, 0, true, false, NULL); }

/* Stages x's value under o: (open; `fresh` when the caller knows the key is
 * not on disk) or r: (consumed). */
static int b_record(rl_t *r, const altar__lent_t *x, char prefix, bool fresh, altar_error_t *err) {
  int rc = encode_value(&r->vb, x, err);
  if (rc) return rc;
  if (key1(&r->kb, prefix, x->rkey, x->rkey_len) || pend_set(r, &r->kb, r->vb.data, r->vb.len, false, fresh, NULL))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}


/* Stages the o: key of cache entry x, whose value follows x until the batch
 * is written; values that need the codec's checks are encoded now. */
static int b_open(rl_t *r, const altar__lent_t *x, bool fresh, altar_error_t *err) {
  if (!fast_value(x)) return b_record(r, x, 'o', fresh, err);
  if (key1(&r->kb, 'o', x->rkey, x->rkey_len) || pend_set(r, &r->kb, NULL, 0, false, fresh, x))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}

/* ---- the in-memory cache of open records ---- */

/* A cache entry taking over *e, with a copy of the spec's bytes. */
static altar__lent_t *lent_from_entry(altar_ledger_entry_t *e, const char *spec, size_t spec_len) {
  altar__lent_t *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  x->active_pos = SIZE_MAX;
  if (altar__rkey(e->rec.handle.backend, e->rec.handle.external_id, &x->rkey, &x->rkey_len) ||
      (spec && !(x->spec_enc = malloc(spec_len ? spec_len : 1)))) {
    free(x->rkey);
    free(x);
    return NULL;
  }
  if (spec) memcpy(x->spec_enc, spec, spec_len);
  x->spec_len = spec_len;
  x->has_spec = spec != NULL;
  x->e = *e; /* takes ownership */
  memset(e, 0, sizeof *e);
  altar_spec_free(x->e.rec.spec); /* the cache keeps specs encoded only */
  x->e.rec.spec = NULL;
  return x;
}

/* Whether the handle of e is the one the record key k (after its prefix) names. */
static bool key_matches(const char *rk, size_t rklen, const altar_ledger_entry_t *e) {
  size_t bl = strlen(e->rec.handle.backend), el = strlen(e->rec.handle.external_id);
  return rklen == bl + 1 + el && !memcmp(rk, e->rec.handle.backend, bl) && rk[bl] == '\0' &&
         !memcmp(rk + bl + 1, e->rec.handle.external_id, el);
}

static void show_key(char *out, size_t cap, const char *k, size_t klen) {
  size_t n = klen < cap - 1 ? klen : cap - 1;
  for (size_t i = 0; i < n; i++) out[i] = k[i] ? k[i] : '|';
  out[n] = '\0';
}

/* Rebuilds the cache of open records from o: (consumed records are not read). */
static int load_cache(rl_t *r, altar_error_t *err) {
  altar__lindex_free(&r->ix);
  altar_error_t ignored = {0};
  settle(r, &ignored); /* after a failed write too: the cache is rebuilt from what the disk holds */
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  int rc = ALTAR_OK;
  for (rocksdb_iter_seek(it, "o:", 2); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen < 2 || memcmp(k, "o:", 2)) break;
    const char *v = rocksdb_iter_value(it, &vlen), *sp;
    size_t sl;
    altar_ledger_entry_t e;
    char shown[160];
    show_key(shown, sizeof shown, k, klen);
    rc = decode_value(v, vlen, &e, &sp, &sl, false, err);
    if (rc) altar_error_prefix(err, "%s", shown);
    else if (e.rec.consumed || !key_matches(k + 2, klen - 2, &e))
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: %s holds %s record %s:%s", shown,
                           e.rec.consumed ? "a consumed" : "the", e.rec.handle.backend, e.rec.handle.external_id);
    if (rc) {
      altar_ledger_entry_clear(&e);
      break;
    }
    altar__lent_t *x = lent_from_entry(&e, sp, sl);
    if (x && (rc = pack_fixed(r, x, err))) {
      altar__lent_free(x);
      break;
    }
    if (!x || altar__lindex_add(&r->ix, x)) {
      altar_ledger_entry_clear(&e);
      altar__lent_free(x);
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
      break;
    }
  }
  if (!rc) {
    char *dberr = NULL;
    rocksdb_iter_get_error(it, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: scan failed: %s", dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_iter_destroy(it);
  return rc;
}

/* ---- write path ---- */

/* Drops the pending batch and rebuilds the cache from what is on disk. */
static void rollback(rl_t *r) {
  pend_clear(r);
  altar_error_t ignored = {0};
  load_cache(r, &ignored);
}

static int pchange_cmp(const void *pa, const void *pb) {
  const pchange_t *a = *(pchange_t *const *)pa, *b = *(pchange_t *const *)pb;
  int c = memcmp(a->key, b->key, a->klen < b->klen ? a->klen : b->klen);
  return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

static int flush(rl_t *r, altar_error_t *err) {
  if (r->n_pv == 0) return ALTAR_OK;
  /* Only what is written is sorted: a replay drops about half of its
   * changes (records opened and consumed in the same batch). */
  size_t n = 0;
  for (size_t i = 0; i < r->n_pv; i++)
    if (!r->pv[i]->dropped) r->pv[n++] = r->pv[i];
  /* In key order, each memtable insert starts next to the previous one. */
  qsort(r->pv, n, sizeof *r->pv, pchange_cmp);
  rocksdb_writebatch_clear(r->wb);
  for (size_t i = 0; i < n; i++) {
    pchange_t *c = r->pv[i];
    if (c->del) {
      rocksdb_writebatch_delete(r->wb, c->key, c->klen);
    } else if (c->lazy) {
      int rc = encode_value(&r->vb, c->lazy, err); /* the batch copies the bytes */
      if (rc) {
        rocksdb_writebatch_clear(r->wb);
        rollback(r);
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
  if (!dberr && writes) {
    if (r->writer) dberr = altar__lwriter_submit(r->writer, &r->wb); /* an earlier batch's failure */
    else rocksdb_write(r->db, r->wopts, r->wb, &dberr);
  }
  rocksdb_writebatch_clear(r->wb);
  if (dberr) {
    /* A write that failed behind sticks: trying again cannot help. */
    int rc = r->writer ? altar_error_set(err, ALTAR_ELEDGER, "ledger: write failed: %s", dberr)
                       : altar_error_set_retriable(err, ALTAR_ELEDGER, "ledger: write failed: %s", dberr);
    rocksdb_free(dberr);
    rollback(r);
    return rc;
  }
  pend_clear(r);
  return ALTAR_OK;
}

/* Ends one operation: outside a batch it is written at once; a failed
 * operation outside a batch leaves nothing behind. */
static int op_end(rl_t *r, int rc, altar_error_t *err) {
  if (rc) {
    if (!r->in_batch) rollback(r);
    return rc;
  }
  return r->in_batch ? ALTAR_OK : flush(r, err);
}

static int writable(rl_t *r, const char *op, altar_error_t *err) {
  if (r->read_only) return altar_error_set(err, ALTAR_ENOTSUP, "ledger.%s: ledger is open read-only", op);
  return ALTAR_OK;
}

static int rl_record(void *impl, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                     const altar_record_meta_t *meta, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "record", err))) return rc;
  if (!h || !h->backend || !h->external_id || !kind)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.record: handle and kind are required");
  if (altar__lindex_find(&r->ix, h->backend, h->external_id)) return ALTAR_OK; /* open: no-op */
  /* Absent, or consumed: write a fresh open record (with everything reset);
   * a consumed copy under r: is shadowed by it. Not in the cache means no
   * o: key on disk, so the key is fresh. The record's fixed part and its
   * spec's bytes are made (or taken from the caller) first, so the cache
   * entry holds them in its one allocation; every later write of the
   * record reuses them. */
  const void *fixed = meta ? meta->fixed_enc : NULL, *enc = meta ? meta->spec_enc : NULL;
  size_t fixed_len = meta ? meta->fixed_len : 0, spec_len = meta ? meta->spec_len : 0;
  if (!fixed) {
    altar_record_t tmp = {.handle = *h, .kind = (char *)kind};
    if ((rc = encode_fixed(r, &tmp, err))) return op_end(r, rc, err);
    fixed = r->kb2.data;
    fixed_len = r->kb2.len;
  }
  /* Bytes given without the struct are the spec (a replay's events carry
   * them so: altar_decode_status_canonical with ALTAR_DECODE_SPEC_BYTES). */
  bool has_spec = spec || (enc && spec_len);
  if (spec && !enc) {
    altar_buf_reset(&r->vb);
    if ((rc = altar_encode_spec(spec, &r->vb, err))) return op_end(r, rc, err);
    enc = r->vb.data;
    spec_len = r->vb.len;
  }
  if (!has_spec) spec_len = 0;
  altar__lent_t *x = altar__lent_new(h, kind, NULL, meta ? meta->task_key : NULL, meta ? meta->group_key : NULL,
                                     fixed_len + spec_len);
  if (!x) return op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory"), err);
  if (meta) x->e.rec.restart_count = meta->restart_count;
  x->packed = memcpy(x->tail, fixed, fixed_len);
  x->packed_len = fixed_len;
  if (has_spec) {
    x->spec_enc = memcpy(x->tail + fixed_len, enc, spec_len);
    x->spec_len = spec_len;
    x->has_spec = true;
  }
  if (altar__lindex_add(&r->ix, x)) {
    altar__lent_free(x);
    return op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory"), err);
  }
  if ((rc = b_open(r, x, true, err))) {
    altar__lindex_remove(&r->ix, x);
    return op_end(r, rc, err);
  }
  return op_end(r, ALTAR_OK, err);
}

static int rl_open_handles(void *impl, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  rl_t *r = impl;
  altar__lent_t **v;
  size_t n;
  if (altar__lindex_open_sorted(&r->ix, (1u << ALTAR_STATE_PENDING) | (1u << ALTAR_STATE_RUNNING), &v, &n) ||
      altar__handles_from(v, n, phs, pn)) {
    free(v);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.open_handles: out of memory");
  }
  free(v);
  return ALTAR_OK;
}

/* Reads the stored value of a record as the batch would leave it: o: when
 * it is open (the cache says so), r: otherwise. *pval is malloc'd. */
static int load_raw(rl_t *r, const char *rk, size_t rklen, bool open, char **pval, size_t *plen, altar_error_t *err) {
  if (key1(&r->kb, open ? 'o' : 'r', rk, rklen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return db_get(r, &r->kb, pval, plen, err);
}

/* Loads a record (with its spec when want_spec) from batch or disk. */
static int load_entry(rl_t *r, const char *backend, const char *external_id, altar_ledger_entry_t *e, bool want_spec,
                      altar_error_t *err) {
  memset(e, 0, sizeof *e);
  char *rk;
  size_t rklen;
  if (altar__rkey(backend, external_id, &rk, &rklen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  bool open = altar__lindex_find(&r->ix, backend, external_id) != NULL;
  char *val;
  size_t vlen;
  int rc = load_raw(r, rk, rklen, open, &val, &vlen, err);
  free(rk);
  if (rc) {
    if (rc == ALTAR_ENOTFOUND)
      return altar_error_set(err, ALTAR_ENOTFOUND, "ledger: no record for %s:%s", backend, external_id);
    return rc;
  }
  const char *sp;
  size_t sl;
  rc = decode_value(val, vlen, e, &sp, &sl, want_spec, err);
  free(val);
  return rc;
}

static int rl_set_state(void *impl, const altar_handle_t *h, altar_state_t state,
                        const altar_failure_t *failure, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "set_state", err))) return rc;
  if ((unsigned)state > ALTAR_STATE_FAILED)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.set_state: state %d is not a task state", (int)state);
  altar__lent_t *x = altar__lindex_find(&r->ix, h->backend, h->external_id);
  if (!x) {
    /* A consumed record: keep its latest state for operators, no indexes. */
    altar__lent_t tmp = {.active_pos = SIZE_MAX};
    if (altar__rkey(h->backend, h->external_id, &tmp.rkey, &tmp.rkey_len))
      return altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
    char *val = NULL;
    size_t vlen;
    const char *sp = NULL;
    rc = load_raw(r, tmp.rkey, tmp.rkey_len, false, &val, &vlen, err);
    if (rc == ALTAR_ENOTFOUND)
      rc = altar_error_set(err, ALTAR_ENOTFOUND, "ledger.set_state: no record for %s:%s", h->backend, h->external_id);
    if (!rc) rc = decode_value(val, vlen, &tmp.e, &sp, &tmp.spec_len, false, err);
    if (!rc) {
      /* The stored spec bytes go back as they are (borrowed from val). */
      tmp.spec_enc = (char *)sp;
      tmp.has_spec = sp != NULL;
      if (altar__set_failure(&tmp.e.rec, state, failure))
        rc = altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
      else
        rc = b_record(r, &tmp, 'r', false, err);
    }
    altar_ledger_entry_clear(&tmp.e);
    free(tmp.rkey);
    free(val);
    return op_end(r, rc, err);
  }
  if (state != ALTAR_STATE_FAILED || !failure) {
    /* No failure to check: the cache changes now and the value follows it
     * (a failed staging rolls the cache back with the batch). */
    altar_state_t was = x->e.rec.state;
    altar_failure_free(x->e.rec.failure);
    x->e.rec.failure = NULL;
    x->e.rec.state = state;
    altar__lindex_restate(x, was);
    return op_end(r, b_open(r, x, false, err), err);
  }
  altar_failure_t *nf = NULL;
  if (!(nf = altar_failure_dup(failure))) return altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
  /* Build the new value on a shallow copy so the cache changes only once the
   * batch holds the whole change (the codec may refuse the failure). */
  altar__lent_t next = *x;
  next.e.rec.state = state;
  next.e.rec.failure = nf;
  if ((rc = b_record(r, &next, 'o', false, err))) {
    altar_failure_free(nf);
    return op_end(r, rc, err);
  }
  altar_state_t was = x->e.rec.state;
  altar_failure_free(x->e.rec.failure);
  x->e.rec.failure = nf;
  x->e.rec.state = state;
  altar__lindex_restate(x, was);
  return op_end(r, ALTAR_OK, err);
}

/* The spec of an open record, decoded from its cached bytes. */
static int load_spec(const altar__lent_t *x, altar_spec_t **pspec, altar_error_t *err) {
  *pspec = NULL;
  if (!x->has_spec) return ALTAR_OK;
  altar_spec_t *s = calloc(1, sizeof *s);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  int rc = altar_decode_spec(x->spec_enc, x->spec_len, s, err);
  if (rc) {
    altar_spec_free(s);
    return altar_error_prefix(err, "ledger: spec of %s:%s", x->e.rec.handle.backend, x->e.rec.handle.external_id);
  }
  *pspec = s;
  return ALTAR_OK;
}

static int records_of(rl_t *r, altar_state_t st, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  altar__lent_t **v;
  size_t n;
  *precs = NULL;
  *pn = 0;
  if (altar__lindex_open_sorted(&r->ix, 1u << st, &v, &n)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  altar_record_t *recs = calloc(n ? n : 1, sizeof *recs);
  int rc = recs ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  size_t done = 0;
  for (; !rc && done < n; done++) {
    if (altar_record_copy(&recs[done], &v[done]->e.rec)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
      break;
    }
    if ((rc = load_spec(v[done], &recs[done].spec, err))) {
      done++;
      break;
    }
  }
  free(v);
  if (rc) {
    altar_records_free(recs, done);
    return rc;
  }
  *precs = recs;
  *pn = n;
  return ALTAR_OK;
}

static int rl_active_succeeded(void *impl, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(impl, ALTAR_STATE_SUCCEEDED, precs, pn, err);
}

static int rl_active_failed(void *impl, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(impl, ALTAR_STATE_FAILED, precs, pn, err);
}

static int rl_consume(void *impl, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "consume", err))) return rc;
  /* Queue every change first; the cache follows only when all are queued. */
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&r->ix, hs[i].backend, hs[i].external_id);
    if (!x) continue; /* unknown or already consumed */
    x->e.rec.consumed = true;
    rc = b_record(r, x, 'r', false, err);
    x->e.rec.consumed = false;
    if (rc) return op_end(r, rc, err);
    if (key1(&r->kb, 'o', x->rkey, x->rkey_len) || b_del(r, &r->kb))
      return op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.consume: out of memory"), err);
  }
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&r->ix, hs[i].backend, hs[i].external_id);
    if (x) altar__lindex_remove(&r->ix, x);
  }
  return op_end(r, ALTAR_OK, err);
}

static int rl_restart(void *impl, const altar_handle_t *h, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "restart", err))) return rc;
  altar__lent_t *x = altar__lindex_find(&r->ix, h->backend, h->external_id);
  if (!x) {
    /* Consumed (ESTATE, as for any record that is not open and failed) or absent. */
    altar_ledger_entry_t e;
    rc = load_entry(r, h->backend, h->external_id, &e, false, err);
    altar_ledger_entry_clear(&e);
    if (rc && rc != ALTAR_ENOTFOUND) return rc;
    return altar_error_set(err, rc ? ALTAR_ENOTFOUND : ALTAR_ESTATE,
                           "ledger.restart: %s:%s is not an open failed record", h->backend, h->external_id);
  }
  if (x->e.rec.state != ALTAR_STATE_FAILED)
    return altar_error_set(err, ALTAR_ESTATE, "ledger.restart: %s:%s is not an open failed record", h->backend,
                           h->external_id);
  altar__set_failure(&x->e.rec, ALTAR_STATE_PENDING, NULL);
  altar__lindex_restate(x, ALTAR_STATE_FAILED);
  x->e.rec.restart_count++;
  return op_end(r, b_open(r, x, false, err), err);
}

static int rl_get(void *impl, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                  altar_error_t *err) {
  rl_t *r = impl;
  int rc = load_entry(r, backend, external_id, pout, true, err);
  if (rc) altar_ledger_entry_clear(pout);
  return rc;
}

static const altar_ledger_entry_t *rl_peek_open(void *impl, const char *backend, const char *external_id) {
  rl_t *r = impl;
  altar__lent_t *x = altar__lindex_find(&r->ix, backend, external_id);
  return x ? &x->e : NULL;
}

static const altar_ledger_entry_t *rl_peek_task(void *impl, const char *task_key) {
  rl_t *r = impl;
  altar__lent_t *x = altar__lindex_task(&r->ix, task_key);
  return x ? &x->e : NULL;
}

static int rl_group_members(void *impl, const char *kind, const char *group_key,
                            const altar_ledger_entry_t *const **pm, size_t *pn, altar_error_t *err) {
  rl_t *r = impl;
  if (altar__lindex_group(&r->ix, kind, group_key, pm, pn))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.group_members: out of memory");
  return ALTAR_OK;
}

static int rl_group_counts(void *impl, const char *kind, const char *group_key, size_t *psucceeded,
                           size_t *pfailed, altar_error_t *err) {
  (void)err;
  altar__lindex_group_counts(&((rl_t *)impl)->ix, kind, group_key, psucceeded, pfailed);
  return ALTAR_OK;
}

/* Iterates committed keys under a prefix. */
typedef int (*raw_visit_fn)(void *ctx, const char *k, size_t klen, const char *v, size_t vlen);

static int scan(rl_t *r, const char *pfx, size_t plen, raw_visit_fn fn, void *ctx, altar_error_t *err) {
  int rc = settle(r, err);
  if (rc) return rc;
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  for (rocksdb_iter_seek(it, pfx, plen); !rc && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen < plen || memcmp(k, pfx, plen)) break;
    const char *v = rocksdb_iter_value(it, &vlen);
    rc = fn(ctx, k, klen, v, vlen);
  }
  if (!rc) {
    char *dberr = NULL;
    rocksdb_iter_get_error(it, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: scan failed: %s", dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_iter_destroy(it);
  return rc;
}

/* Visits every record in rkey order: o: and r: merged, o: winning over a
 * stale r: copy of a re-opened record. Committed state only. */
static int rl_foreach(void *impl, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err) {
  rl_t *r = impl;
  int rc = settle(r, err);
  if (rc) return rc;
  rocksdb_iterator_t *io = rocksdb_create_iterator(r->db, r->ropts);
  rocksdb_iterator_t *ir = rocksdb_create_iterator(r->db, r->ropts);
  rocksdb_iter_seek(io, "o:", 2);
  rocksdb_iter_seek(ir, "r:", 2);
  while (!rc) {
    size_t ol = 0, rl = 0;
    const char *ok = rocksdb_iter_valid(io) ? rocksdb_iter_key(io, &ol) : NULL;
    const char *rk = rocksdb_iter_valid(ir) ? rocksdb_iter_key(ir, &rl) : NULL;
    if (ok && (ol < 2 || memcmp(ok, "o:", 2))) ok = NULL;
    if (rk && (rl < 2 || memcmp(rk, "r:", 2))) rk = NULL;
    if (!ok && !rk) break;
    int c = !ok ? 1 : !rk ? -1 : altar__rkey_cmp(ok + 2, ol - 2, rk + 2, rl - 2);
    rocksdb_iterator_t *it = c <= 0 ? io : ir;
    const char *k = c <= 0 ? ok : rk;
    size_t klen = c <= 0 ? ol : rl, vlen;
    const char *v = rocksdb_iter_value(it, &vlen), *sp;
    size_t sl;
    altar_ledger_entry_t e;
    rc = decode_value(v, vlen, &e, &sp, &sl, true, err);
    if (rc) altar_error_prefix(err, "%.*s", (int)strnlen(k + 2, klen - 2), k + 2);
    else rc = fn(ctx, &e);
    altar_ledger_entry_clear(&e);
    if (c <= 0) rocksdb_iter_next(io);
    if (c >= 0) rocksdb_iter_next(ir);
  }
  for (int i = 0; i < 2 && !rc; i++) {
    char *dberr = NULL;
    rocksdb_iter_get_error(i ? ir : io, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: scan failed: %s", dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_iter_destroy(io);
  rocksdb_iter_destroy(ir);
  return rc;
}

/* ---- the side keyspace (daemon outbox, input offsets, ...) under x: ---- */

static int aux_key(altar_buf_t *b, const void *key, size_t klen) {
  altar_buf_reset(b);
  return altar_buf_append(b, "x:", 2) || altar_buf_append(b, key, klen) ? ALTAR_ENOMEM : ALTAR_OK;
}

static int rl_aux_put(void *impl, const void *key, size_t klen, const void *val, size_t vlen, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "aux_put", err))) return rc;
  if (aux_key(&r->kb, key, klen) || b_put(r, &r->kb, val, vlen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : flush(r, err);
}

static int rl_aux_del(void *impl, const void *key, size_t klen, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "aux_del", err))) return rc;
  if (aux_key(&r->kb, key, klen) || b_del(r, &r->kb))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return r->in_batch ? ALTAR_OK : flush(r, err);
}

static int rl_aux_get(void *impl, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  rl_t *r = impl;
  if (aux_key(&r->kb, key, klen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  char *val;
  size_t vlen;
  int rc = db_get(r, &r->kb, &val, &vlen, err);
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

static int rl_aux_scan(void *impl, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                       altar_error_t *err) {
  rl_t *r = impl;
  altar_buf_t pk = {0};
  if (aux_key(&pk, prefix, plen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  aux_ctx_t c = {fn, ctx};
  int rc = scan(r, (const char *)pk.data, pk.len, aux_visit, &c, err);
  altar_buf_free(&pk);
  return rc;
}

static int rl_begin(void *impl, altar_error_t *err) {
  rl_t *r = impl;
  int rc;
  if ((rc = writable(r, "begin", err))) return rc;
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.begin: a batch is already open");
  r->in_batch = true;
  return ALTAR_OK;
}

static int rl_commit(void *impl, altar_error_t *err) {
  rl_t *r = impl;
  if (!r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.commit: no batch is open");
  r->in_batch = false;
  return flush(r, err);
}

static int rl_abort(void *impl, altar_error_t *err) {
  rl_t *r = impl;
  (void)err;
  r->in_batch = false;
  rollback(r);
  return ALTAR_OK;
}

/* Level-0 files a persisted ledger may keep: the daemon that opens it
 * compacts on its own, and RocksDB slows writes from 20 such files on. */
#define PERSIST_MAX_L0 16

static int level0_files(rl_t *r) {
  char *v = rocksdb_property_value(r->db, "rocksdb.num-files-at-level0");
  int n = v ? atoi(v) : 0;
  rocksdb_free(v);
  return n;
}

/* Writes the memtables to table files; `compact` also compacts a crowded
 * level 0 (not when closing: a rebuild that failed closes a directory about
 * to be deleted). */
static int persist(rl_t *r, bool compact, altar_error_t *err) {
  int rc = settle(r, err);
  if (rc) return rc;
  rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
  rocksdb_flushoptions_set_wait(fo, 1);
  char *dberr = NULL;
  rocksdb_flush(r->db, fo, &dberr);
  rocksdb_flushoptions_destroy(fo);
  if (!dberr && compact && r->no_wal && level0_files(r) >= PERSIST_MAX_L0) {
    rocksdb_compact_range(r->db, NULL, 0, NULL, 0);
    if (level0_files(r) >= PERSIST_MAX_L0) dberr = strdup("level 0 still holds too many files after compacting");
  }
  if (!dberr) return ALTAR_OK;
  rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: flush failed: %s", r->dir, dberr);
  rocksdb_free(dberr);
  return rc;
}

int altar_ledger_rocksdb_persist(altar_ledger_t *l, altar_error_t *err) {
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = l->impl;
  if (r->read_only) return ALTAR_OK;
  return persist(r, true, err);
}

static void rl_close(void *impl) {
  rl_t *r = impl;
  if (!r) return;
  if (r->db && r->no_wal) {
    /* Nothing else holds these writes; callers that must know persist first. */
    altar_error_t ignored = {0};
    persist(r, false, &ignored);
  }
  altar__lwriter_stop(r->writer);
  if (r->db) rocksdb_close(r->db);
  if (r->wb) rocksdb_writebatch_destroy(r->wb);
  pend_clear(r);
  altar_arena_free(&r->arena);
  altar__hmap_free(&r->pend);
  free(r->pv);
  if (r->wopts) rocksdb_writeoptions_destroy(r->wopts);
  if (r->ropts) rocksdb_readoptions_destroy(r->ropts);
  if (r->opts) rocksdb_options_destroy(r->opts);
  if (r->topts) rocksdb_block_based_options_destroy(r->topts);
  if (r->cache) rocksdb_cache_destroy(r->cache);
  altar__lindex_free(&r->ix);
  altar_buf_free(&r->kb);
  altar_buf_free(&r->kb2);
  altar_buf_free(&r->vb);
  free(r->dir);
  free(r);
}

static const altar_ledger_ops_t rl_ops = {
    .name = "rocksdb",
    .durable = true,
    .record = rl_record,
    .open_handles = rl_open_handles,
    .set_state = rl_set_state,
    .active_succeeded = rl_active_succeeded,
    .active_failed = rl_active_failed,
    .consume = rl_consume,
    .restart = rl_restart,
    .get = rl_get,
    .peek_open = rl_peek_open,
    .peek_task = rl_peek_task,
    .group_members = rl_group_members,
    .group_counts = rl_group_counts,
    .foreach = rl_foreach,
    .begin = rl_begin,
    .commit = rl_commit,
    .abort = rl_abort,
    .aux_put = rl_aux_put,
    .aux_del = rl_aux_del,
    .aux_get = rl_aux_get,
    .aux_scan = rl_aux_scan,
    .close = rl_close,
};

altar_ledger_t *altar_ledger_rocksdb_open(const char *dir, const altar_ledger_rocksdb_opts_t *opts,
                                          altar_error_t *err) {
  altar_ledger_rocksdb_opts_t o = opts ? *opts : (altar_ledger_rocksdb_opts_t){0};
  if (!dir || !*dir) {
    altar_error_set(err, ALTAR_EINVAL, "ledger: directory must not be empty");
    return NULL;
  }
  rl_t *r = calloc(1, sizeof *r);
  if (!r || !(r->dir = strdup(dir))) {
    rl_close(r);
    altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
    return NULL;
  }
  r->read_only = o.read_only;
  r->opts = rocksdb_options_create();
  rocksdb_options_set_create_if_missing(r->opts, !o.no_create && !o.read_only);
  rocksdb_options_increase_parallelism(r->opts, 2);
  /* A ledger built in one go (no_wal) takes smaller memtables: they are
   * flushed in the background while it is built, so little is left to
   * persist at the end, and inserts into a smaller skiplist cost less
   * (a replay of 200k events: 151k–175k events/s with 4–16 MiB, 109k–140k
   * with 64 MiB, in alternating runs). */
  size_t wb_mb = o.write_buffer_mb ? o.write_buffer_mb : o.no_wal ? 16 : 64;
  rocksdb_options_set_write_buffer_size(r->opts, wb_mb << 20);
  rocksdb_options_set_max_open_files(r->opts, 512);
  /* A ledger built in one go (a rebuild) leaves its table files
   * uncompressed: compressing took a tenth of a replay's CPU, and the
   * daemon's later compactions compress what they rewrite. */
  if (o.no_wal) rocksdb_options_set_compression(r->opts, rocksdb_no_compression);
  /* Nor does it compact while it is built unless level 0 grows past 32
   * files (rewriting level 0 into level 1 every 4 files took a tenth of a
   * replay's CPU), with writes slowed only from 48 on; persist compacts once
   * if 16 or more would slow the daemon's writes. */
  if (o.no_wal) {
    rocksdb_options_set_level0_file_num_compaction_trigger(r->opts, 32);
    rocksdb_options_set_level0_slowdown_writes_trigger(r->opts, 48);
    rocksdb_options_set_level0_stop_writes_trigger(r->opts, 64);
  }
  r->topts = rocksdb_block_based_options_create();
  r->cache = rocksdb_cache_create_lru(64u << 20);
  rocksdb_block_based_options_set_block_cache(r->topts, r->cache);
  /* Point reads of records dominate: a bloom filter spares most disk reads. */
  rocksdb_block_based_options_set_filter_policy(r->topts, rocksdb_filterpolicy_create_bloom(10));
  rocksdb_options_set_block_based_table_factory(r->opts, r->topts);
  r->wopts = rocksdb_writeoptions_create();
  rocksdb_writeoptions_set_sync(r->wopts, o.sync && !o.no_wal);
  rocksdb_writeoptions_disable_WAL(r->wopts, o.no_wal);
  r->no_wal = o.no_wal && !o.read_only;
  r->ropts = rocksdb_readoptions_create();
  r->wb = rocksdb_writebatch_create();
  char *dberr = NULL;
  if (!o.no_create && !o.read_only && altar__ledger_make_parents(dir, err) < 0) goto fail;
  r->db = o.read_only ? rocksdb_open_for_read_only(r->opts, dir, 0, &dberr) : rocksdb_open(r->opts, dir, &dberr);
  if (dberr || !r->db) {
    altar__ledger_open_error(dir, dberr, err);
    rocksdb_free(dberr);
    r->db = NULL;
    goto fail;
  }
  /* The layout version guards against reading a ledger written differently. */
  size_t vlen;
  char *ver = rocksdb_get(r->db, r->ropts, "m:version", 9, &vlen, &dberr);
  if (dberr) {
    altar_error_set(err, ALTAR_ELEDGER, "ledger %s: %s", dir, dberr);
    rocksdb_free(dberr);
    goto fail;
  }
  if (ver && (vlen != 1 || ver[0] != LAYOUT_VERSION[0])) {
    altar_error_set(err, ALTAR_ELEDGER, "ledger %s: m:version is '%.*s', this build reads '%s'", dir,
                    (int)(vlen < 16 ? vlen : 16), ver, LAYOUT_VERSION);
    rocksdb_free(ver);
    goto fail;
  }
  if (!ver && !o.read_only) {
    rocksdb_put(r->db, r->wopts, "m:version", 9, LAYOUT_VERSION, 1, &dberr);
    if (dberr) {
      altar_error_set(err, ALTAR_ELEDGER, "ledger %s: %s", dir, dberr);
      rocksdb_free(dberr);
      goto fail;
    }
  }
  rocksdb_free(ver);
  if (load_cache(r, err)) {
    altar_error_prefix(err, "ledger %s", dir);
    goto fail;
  }
  if (o.write_behind && !o.read_only && !o.no_wal) {
    /* A commit would return before its batch is written: no durability to promise. */
    altar_error_set(err, ALTAR_EINVAL, "ledger %s: write_behind needs no_wal", dir);
    goto fail;
  }
  if (o.write_behind && !o.read_only && !(r->writer = altar__lwriter_start(r->db, r->wopts))) {
    altar_error_set(err, ALTAR_ENOMEM, "ledger %s: cannot start the writing thread", dir);
    goto fail;
  }
  return altar_ledger_wrap(&rl_ops, r, err);
fail:
  rl_close(r);
  return NULL;
}

/* ---- internal accessors ---- */

bool altar__ledger_is_rocksdb(const altar_ledger_t *l) { return l && l->ops->close == rl_close; }

void altar__ledger_rocksdb_fail_writes(altar_ledger_t *l, int n) {
  if (altar__ledger_is_rocksdb(l)) ((rl_t *)l->impl)->fail_writes = n;
}

rocksdb_t *altar__ledger_rocksdb_db(altar_ledger_t *l) {
  return altar__ledger_is_rocksdb(l) ? ((rl_t *)l->impl)->db : NULL;
}

/* ---- consistency check ---- */

/* Checks one record key k (o: or r:) and its value v. */
static int chk_one(rl_t *r, const char *k, size_t klen, const char *v, size_t vlen, uint64_t *precords,
                   uint64_t *popen, altar_error_t *err) {
  char shown[160];
  show_key(shown, sizeof shown, k, klen);
  altar_ledger_entry_t e;
  const char *sp;
  size_t sl;
  bool open = k[0] == 'o';
  int rc = decode_value(v, vlen, &e, &sp, &sl, true, err);
  if (rc) {
    altar_ledger_entry_clear(&e);
    return altar_error_prefix(err, "check: %s", shown);
  }
  /* The record map must be the codec's own bytes, whichever path wrote it. */
  size_t at = 2;
  for (int i = 0; i < 2; i++) {
    uint32_t sl4 = ((uint32_t)(uint8_t)v[at] << 24) | ((uint32_t)(uint8_t)v[at + 1] << 16) |
                   ((uint32_t)(uint8_t)v[at + 2] << 8) | (uint8_t)v[at + 3];
    at += 4 + (sl4 == 0xffffffffu ? 0 : sl4);
  }
  size_t rec_len = ((size_t)(uint8_t)v[at] << 24) | ((size_t)(uint8_t)v[at + 1] << 16) |
                   ((size_t)(uint8_t)v[at + 2] << 8) | (uint8_t)v[at + 3];
  altar_record_t shallow = e.rec;
  shallow.spec = NULL;
  altar_buf_reset(&r->kb2);
  if (altar_encode_record(&shallow, &r->kb2, err) || r->kb2.len != rec_len || memcmp(r->kb2.data, v + at + 4, rec_len)) {
    altar_ledger_entry_clear(&e);
    return altar_error_set(err, ALTAR_ELEDGER, "check: %s is not in the codec's canonical form", shown);
  }
  altar__lent_t *x = NULL;
  if (!key_matches(k + 2, klen - 2, &e))
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s holds record %s:%s", shown, e.rec.handle.backend,
                         e.rec.handle.external_id);
  else if (e.rec.consumed == open)
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s holds a%s record", shown, open ? " consumed" : "n open");
  else
    x = altar__lindex_find(&r->ix, e.rec.handle.backend, e.rec.handle.external_id);
  if (!rc && open) {
    (*popen)++;
    (*precords)++;
    altar_spec_t *s = e.rec.spec;
    e.rec.spec = NULL;
    bool same = x && altar_record_equal(&x->e.rec, &e.rec) && x->has_spec == (sp != NULL) &&
                (!sp || (x->spec_len == sl && !memcmp(x->spec_enc, sp, sl))) &&
                ((!x->e.task_key && !e.task_key) || (x->e.task_key && e.task_key && !strcmp(x->e.task_key, e.task_key))) &&
                ((!x->e.group_key && !e.group_key) ||
                 (x->e.group_key && e.group_key && !strcmp(x->e.group_key, e.group_key)));
    e.rec.spec = s;
    if (!same)
      rc = altar_error_set(err, ALTAR_ELEDGER, "check: open record %s:%s differs from its cached copy",
                           e.rec.handle.backend, e.rec.handle.external_id);
  } else if (!rc && !x) {
    (*precords)++; /* a consumed record not shadowed by a re-opened one */
  }
  altar_ledger_entry_clear(&e);
  return rc;
}

int altar__ledger_rocksdb_check(altar_ledger_t *l, uint64_t *precords, altar_error_t *err) {
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "check: not a RocksDB ledger");
  rl_t *r = l->impl;
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "check: a batch is open");
  uint64_t records = 0, open = 0;
  int rc = settle(r, err);
  if (rc) return rc;
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  rocksdb_iter_seek_to_first(it);
  while (!rc && rocksdb_iter_valid(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen >= 2 && k[1] == ':' && k[0] == 'x') {
      rocksdb_iter_seek(it, "x;", 2); /* callers' keys: not ours to judge */
      continue;
    }
    if (klen > 2 && k[1] == ':' && (k[0] == 'o' || k[0] == 'r')) {
      const char *v = rocksdb_iter_value(it, &vlen);
      rc = chk_one(r, k, klen, v, vlen, &records, &open, err);
    } else if (!(klen == 9 && !memcmp(k, "m:version", 9))) {
      /* Anything else (an index entry of an older layout, say) is damage. */
      char shown[160];
      show_key(shown, sizeof shown, k, klen);
      rc = altar_error_set(err, ALTAR_ELEDGER, "check: unexpected key %s", shown);
    }
    if (!rc) rocksdb_iter_next(it);
  }
  if (!rc) {
    char *dberr = NULL;
    rocksdb_iter_get_error(it, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "check: scan failed: %s", dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_iter_destroy(it);
  if (!rc && open != r->ix.n_active)
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %llu open records on disk, %zu in the cache",
                         (unsigned long long)open, r->ix.n_active);
  if (precords) *precords = records;
  return rc;
}
