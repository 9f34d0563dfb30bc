/* The RocksDB ledger's cache of open records: every o: record is held in
 * memory (with its encoded spec and fixed part), rebuilt on open from o:
 * alone, so grouping, polling, the active sets and supersede checks read no
 * disk and never scan the ledger. */
#include "ledger/ledger_rocksdb_int.h"
#include "ledger/ledger_value.h"

#include <stdlib.h>
#include <string.h>

/* The parts of a record that never change ("handle" and "kind" entries of
 * the record map), encoded by the codec with its bounds and UTF-8 checks
 * into r->fixed. A cached record keeps a copy, so each later write of it
 * only adds its few changing fields. */
int altar__rl_encode_fixed(rl_t *r, const altar_handle_t *h, const char *kind, altar_error_t *err) {
  return altar_record_fixed_make(h, kind, &r->fixed, err);
}

/* The fixed part of an entry loaded from disk (a new record's entry gets it
 * in its own block). */
static int pack_fixed(rl_t *r, altar__lent_t *x, altar_error_t *err) {
  int rc = altar__rl_encode_fixed(r, &x->e.rec.handle, x->e.rec.kind, err);
  if (rc) return rc;
  size_t n = altar_record_fixed_len(&r->fixed);
  char *p = malloc(n ? n : 1);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  memcpy(p, altar_record_fixed_data(&r->fixed), n);
  free(x->packed);
  x->packed = p;
  x->packed_len = n;
  return ALTAR_OK;
}

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
bool altar__rl_key_matches(const char *rk, size_t rklen, const altar_ledger_entry_t *e) {
  size_t bl = strlen(e->rec.handle.backend), el = strlen(e->rec.handle.external_id);
  return rklen == bl + 1 + el && !memcmp(rk, e->rec.handle.backend, bl) && rk[bl] == '\0' &&
         !memcmp(rk + bl + 1, e->rec.handle.external_id, el);
}

void altar__rl_show_key(char *out, size_t cap, const char *k, size_t klen) {
  size_t n = klen < cap - 1 ? klen : cap - 1;
  for (size_t i = 0; i < n; i++) out[i] = k[i] ? k[i] : '|';
  out[n] = '\0';
}

/* Rebuilds the cache of open records from o: (consumed records are not read). */
int altar__rl_load_cache(rl_t *r, altar_error_t *err) {
  altar__lindex_free(&r->ix);
  altar_error_t ignored = {0};
  altar__rl_settle(r, &ignored); /* after a failed write too: the cache is rebuilt from what the disk holds */
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
    altar__rl_show_key(shown, sizeof shown, k, klen);
    const size_t off = 2 + ALTAR__RL_PART_LEN;
    int32_t part = 0;
    if (klen < off || !altar__rl_part_parse(k + 2, &part)) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: %s carries no status partition", shown);
      break;
    }
    rc = altar__lvalue_decode(v, vlen, &e, &sp, &sl, false, err);
    if (rc) altar_error_prefix(err, "%s", shown);
    else if (e.rec.consumed || !altar__rl_key_matches(k + off, klen - off, &e))
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: %s holds %s record %s:%s", shown,
                           e.rec.consumed ? "a consumed" : "the", e.rec.handle.backend, e.rec.handle.external_id);
    else if (altar__lindex_find(&r->ix, e.rec.handle.backend, e.rec.handle.external_id))
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger: %s: record %s:%s is open under two partitions", shown,
                           e.rec.handle.backend, e.rec.handle.external_id);
    if (rc) {
      altar_ledger_entry_clear(&e);
      break;
    }
    altar__lent_t *x = lent_from_entry(&e, sp, sl);
    if (x) x->part = part;
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
  return altar__rl_iter_end(it, rc, "ledger", err);
}
