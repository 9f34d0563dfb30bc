/* The production TaskLedger on RocksDB.
 *
 * Layout (all in the default column family; rkey = backend '\0' external_id;
 * p = the status partition, 4 hex digits, "ffff" for none: ledger_part.c):
 *   o:<p><rkey>   an open (not consumed) record
 *   r:<p><rkey>   a consumed record
 *   c:<p><stamp>  the records one consume call consumed, and when (ledger_prune.c)
 *   m:version     layout version
 *   x:<p>…        keys of callers sharing the write (daemon outbox, offsets)
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
 * Changes are staged in an overlay and written as one WriteBatch
 * (ledger_batch.c); the other concerns have files of their own (see
 * ledger_rocksdb_int.h). */
#include "ledger/ledger_rocksdb_int.h"

#include "altar/codec.h"
#include "ledger/ledger_open.h"
#include "ledger/ledger_value.h"
#include "core/unconst.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 3: every key carries its status partition (ledger_part.c). */
#define LAYOUT_VERSION "3"

static void rl_free(rl_t *r);

static int rl_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                     const altar_record_meta_t *meta, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "record", err))) return rc;
  if (!h || !h->backend || !h->external_id || !kind)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.record: handle and kind are required");
  if (altar__lindex_find(&r->ix, h->backend, h->external_id)) return ALTAR_OK; /* open: no-op */
  /* Absent, or consumed: write a fresh open record (with everything reset);
   * a consumed copy under r: is shadowed by it. Not in the cache means no
   * o: key on disk, so the key is fresh. The record's fixed part and its
   * spec's bytes are made (or taken from the caller) first, so the cache
   * entry holds them in its one allocation; every later write of the
   * record reuses them. */
  const altar_spec_enc_t *se = meta ? meta->spec_enc : NULL;
  const altar_record_fixed_t *rf = meta ? meta->fixed : NULL;
  const void *fixed = rf && altar_record_fixed_len(rf) ? altar_record_fixed_data(rf) : NULL;
  const void *enc = se && altar_spec_enc_len(se) ? altar_spec_enc_data(se) : NULL;
  size_t fixed_len = fixed ? altar_record_fixed_len(rf) : 0, spec_len = enc ? altar_spec_enc_len(se) : 0;
  if (!fixed) {
    if ((rc = altar__rl_encode_fixed(r, h, kind, err))) return altar__rl_op_end(r, rc, err);
    fixed = altar_record_fixed_data(&r->fixed);
    fixed_len = altar_record_fixed_len(&r->fixed);
  }
  /* Bytes given without the struct are the spec (a replay's events carry
   * them so: altar_decode_status_canonical with ALTAR_DECODE_SPEC_BYTES). */
  bool has_spec = spec || (enc && spec_len);
  if (spec && !enc) {
    altar_buf_reset(&r->vb);
    if ((rc = altar_encode_spec(spec, &r->vb, err))) return altar__rl_op_end(r, rc, err);
    enc = r->vb.data;
    spec_len = r->vb.len;
  }
  if (!has_spec) spec_len = 0;
  altar__lent_t *x =
      altar__lent_new(h, kind, NULL, meta ? meta->task_key : NULL, meta ? meta->group_key : NULL, fixed_len + spec_len);
  if (!x) return altar__rl_op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory"), err);
  if (meta) x->e.rec.restart_count = meta->restart_count;
  x->part = altar__rl_scope(r);
  r->parted |= x->part != ALTAR_LEDGER_SCOPE_NONE;
  x->packed = memcpy(x->tail, fixed, fixed_len);
  x->packed_len = fixed_len;
  if (has_spec) {
    x->spec_enc = memcpy(x->tail + fixed_len, enc, spec_len);
    x->spec_len = spec_len;
    x->has_spec = true;
  }
  if (altar__lindex_add(&r->ix, x)) {
    altar__lent_free(x);
    return altar__rl_op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.record: out of memory"), err);
  }
  if ((rc = altar__rl_stage_open(r, x, true, err))) {
    altar__lindex_remove(&r->ix, x);
    return altar__rl_op_end(r, rc, err);
  }
  return altar__rl_op_end(r, ALTAR_OK, err);
}

static int rl_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
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

/* Reads the stored value of a consumed record as the batch would leave it:
 * under the scope's partition, or with no scope under any (the ledger's own
 * first). *ppart says where; *pval is malloc'd. */
static int load_consumed(rl_t *r, const char *rk, size_t rklen, int32_t *ppart, char **pval, size_t *plen,
                         altar_error_t *err) {
  int32_t s = altar__rl_scope(r);
  *ppart = s;
  if (altar__rl_key(&r->kb, 'r', s, rk, rklen)) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  int rc = altar__rl_get_raw(r, &r->kb, pval, plen, err);
  if (rc != ALTAR_ENOTFOUND || s != ALTAR_LEDGER_SCOPE_NONE || !r->parted) return rc;
  int32_t *pv;
  size_t pn;
  if ((rc = altar__rl_parts(r, "r:", &pv, &pn, err))) return rc;
  rc = ALTAR_ENOTFOUND;
  for (size_t i = 0; rc == ALTAR_ENOTFOUND && i < pn; i++) {
    if (pv[i] == ALTAR_LEDGER_SCOPE_NONE) continue;
    if (altar__rl_key(&r->kb, 'r', pv[i], rk, rklen)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
      break;
    }
    rc = altar__rl_get_raw(r, &r->kb, pval, plen, err);
    *ppart = pv[i];
  }
  free(pv);
  return rc;
}

/* Reads the stored value of a record as the batch would leave it: o: when
 * it is open (the cache says so, and where), r: otherwise. *pval is
 * malloc'd. */
static int load_raw(rl_t *r, const char *rk, size_t rklen, const altar__lent_t *open, char **pval, size_t *plen,
                    altar_error_t *err) {
  int32_t part;
  if (!open) return load_consumed(r, rk, rklen, &part, pval, plen, err);
  if (altar__rl_key(&r->kb, 'o', open->part, rk, rklen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return altar__rl_get_raw(r, &r->kb, pval, plen, err);
}

/* Loads a record (with its spec when want_spec) from batch or disk. */
static int load_entry(rl_t *r, const char *backend, const char *external_id, altar_ledger_entry_t *e, bool want_spec,
                      altar_error_t *err) {
  memset(e, 0, sizeof *e);
  char *rk;
  size_t rklen;
  if (altar__rkey(backend, external_id, &rk, &rklen))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  const altar__lent_t *open = altar__lindex_find(&r->ix, backend, external_id);
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
  rc = altar__lvalue_decode(val, vlen, e, &sp, &sl, want_spec, err);
  free(val);
  return rc;
}

static int rl_set_state(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state, const altar_failure_t *failure,
                        altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "set_state", err))) return rc;
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
    rc = load_consumed(r, tmp.rkey, tmp.rkey_len, &tmp.part, &val, &vlen, err);
    if (rc == ALTAR_ENOTFOUND)
      rc = altar_error_set(err, ALTAR_ENOTFOUND, "ledger.set_state: no record for %s:%s", h->backend, h->external_id);
    if (!rc) rc = altar__lvalue_decode(val, vlen, &tmp.e, &sp, &tmp.spec_len, false, err);
    if (!rc) {
      /* The stored spec bytes go back as they are (borrowed from val). */
      tmp.spec_enc = ALTAR__UNCONST(sp);
      tmp.has_spec = sp != NULL;
      if (altar__set_failure(&tmp.e.rec, state, failure))
        rc = altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
      else rc = altar__rl_stage_record(r, &tmp, 'r', false, err);
    }
    altar_ledger_entry_clear(&tmp.e);
    free(tmp.rkey);
    free(val);
    return altar__rl_op_end(r, rc, err);
  }
  if (state != ALTAR_STATE_FAILED || !failure) {
    /* No failure to check: the cache changes now and the value follows it
     * (a failed staging rolls the cache back with the batch). */
    altar_state_t was = x->e.rec.state;
    altar_failure_free(x->e.rec.failure);
    x->e.rec.failure = NULL;
    x->e.rec.state = state;
    altar__lindex_restate(x, was);
    return altar__rl_op_end(r, altar__rl_stage_open(r, x, false, err), err);
  }
  altar_failure_t *nf = NULL;
  if (!(nf = altar_failure_dup(failure))) return altar_error_set(err, ALTAR_ENOMEM, "ledger.set_state: out of memory");
  /* Build the new value on a shallow copy so the cache changes only once the
   * batch holds the whole change (the codec may refuse the failure). */
  altar__lent_t next = *x;
  next.e.rec.state = state;
  next.e.rec.failure = nf;
  if ((rc = altar__rl_stage_record(r, &next, 'o', false, err))) {
    altar_failure_free(nf);
    return altar__rl_op_end(r, rc, err);
  }
  altar_state_t was = x->e.rec.state;
  altar_failure_free(x->e.rec.failure);
  x->e.rec.failure = nf;
  x->e.rec.state = state;
  altar__lindex_restate(x, was);
  return altar__rl_op_end(r, ALTAR_OK, err);
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
  if (altar__lindex_open_sorted(&r->ix, 1u << st, &v, &n))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
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

static int rl_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(altar_ledger_impl(l), ALTAR_STATE_SUCCEEDED, precs, pn, err);
}

static int rl_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return records_of(altar_ledger_impl(l), ALTAR_STATE_FAILED, precs, pn, err);
}

static int rl_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "consume", err))) return rc;
  /* Queue every change first; the cache follows only when all are queued.
   * Room for them at once: a wide group's decision consumes 10^5 records. */
  if (altar__hmap_reserve(&r->pend, 2 * n))
    return altar__rl_op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.consume: out of memory"), err);
  /* One index entry per partition the records are under (one, unless a
   * group config change moved a group between partitions): a pass per
   * partition, in ascending order, each finding the next. */
  int32_t part = INT32_MAX;
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&r->ix, hs[i].backend, hs[i].external_id);
    if (x && x->part < part) part = x->part;
  }
  while (part != INT32_MAX) {
    int32_t next = INT32_MAX;
    altar_buf_reset(&r->cl);
    for (size_t i = 0; i < n; i++) {
      altar__lent_t *x = altar__lindex_find(&r->ix, hs[i].backend, hs[i].external_id);
      if (!x) continue; /* unknown or already consumed */
      if (x->part != part) {
        if (x->part > part && x->part < next) next = x->part;
        continue;
      }
      x->e.rec.consumed = true;
      rc = altar__rl_stage_record(r, x, 'r', false, err);
      x->e.rec.consumed = false;
      if (rc) return altar__rl_op_end(r, rc, err);
      if (altar__rl_key(&r->kb, 'o', x->part, x->rkey, x->rkey_len) || altar__rl_stage_del(r, &r->kb) ||
          altar__rl_index_add(&r->cl, x->rkey, x->rkey_len))
        return altar__rl_op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.consume: out of memory"), err);
    }
    if (altar__rl_stage_consumed(r, part, &r->cl, altar__rl_stamp_us(r)))
      return altar__rl_op_end(r, altar_error_set(err, ALTAR_ENOMEM, "ledger.consume: out of memory"), err);
    part = next;
  }
  for (size_t i = 0; i < n; i++) {
    altar__lent_t *x = altar__lindex_find(&r->ix, hs[i].backend, hs[i].external_id);
    if (x) altar__lindex_remove(&r->ix, x);
  }
  return altar__rl_op_end(r, ALTAR_OK, err);
}

static int rl_restart(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "restart", err))) return rc;
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
  return altar__rl_op_end(r, altar__rl_stage_open(r, x, false, err), err);
}

static int rl_get(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                  altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc = load_entry(r, backend, external_id, pout, true, err);
  if (rc) altar_ledger_entry_clear(pout);
  return rc;
}

static const altar_ledger_entry_t *rl_peek_open(altar_ledger_t *l, const char *backend, const char *external_id) {
  rl_t *r = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_find(&r->ix, backend, external_id);
  return x ? &x->e : NULL;
}

static const altar_ledger_entry_t *rl_peek_task(altar_ledger_t *l, const char *task_key) {
  rl_t *r = altar_ledger_impl(l);
  altar__lent_t *x = altar__lindex_task(&r->ix, task_key);
  return x ? &x->e : NULL;
}

static int rl_group_members(altar_ledger_t *l, const char *kind, const char *group_key,
                            const altar_ledger_entry_t *const **pm, size_t *pn, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  if (altar__lindex_group(&r->ix, kind, group_key, pm, pn))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger.group_members: out of memory");
  return ALTAR_OK;
}

static int rl_group_counts(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded,
                           size_t *pfailed, altar_error_t *err) {
  (void)err;
  altar__lindex_group_counts(&((rl_t *)altar_ledger_impl(l))->ix, kind, group_key, psucceeded, pfailed);
  return ALTAR_OK;
}

/* Visits every record in rkey order: o: and r: of every partition merged,
 * o: winning over a stale r: copy of a re-opened record (and the first
 * partition's r: over another's). Committed state only. */
static int rl_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  static const char *const fams[] = {"o:", "r:"};
  altar__rl_merge_t m;
  int rc = altar__rl_merge_open(r, fams, 2, NULL, 0, &m, err);
  if (rc) return rc;
  while (!rc) {
    size_t i = altar__rl_merge_next(&m, altar__rkey_cmp);
    if (i == SIZE_MAX) break;
    size_t pick = i; /* the first of equals: o: iterators come first */
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(m.it[pick], &klen);
    const char *v = rocksdb_iter_value(m.it[pick], &vlen), *sp;
    size_t sl;
    altar_ledger_entry_t e;
    size_t off = 2 + ALTAR__RL_PART_LEN;
    rc = altar__lvalue_decode(v, vlen, &e, &sp, &sl, true, err);
    if (rc) altar_error_prefix(err, "%.*s", (int)strnlen(k + off, klen - off), k + off);
    else rc = fn(ctx, &e);
    altar_ledger_entry_clear(&e);
    /* Past every copy of this record. */
    for (size_t j = m.n; j-- > i;)
      if (j == i || altar__rl_merge_same(&m, i, j, altar__rkey_cmp)) rocksdb_iter_next(m.it[j]);
  }
  return altar__rl_merge_end(&m, rc, "ledger", err);
}

static int rl_begin(altar_ledger_t *l, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  int rc;
  if ((rc = altar__rl_writable(r, "begin", err))) return rc;
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.begin: a batch is already open");
  r->in_batch = true;
  return ALTAR_OK;
}

static int rl_commit(altar_ledger_t *l, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  if (!r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger.commit: no batch is open");
  r->in_batch = false;
  return altar__rl_flush(r, err);
}

static int rl_abort(altar_ledger_t *l, altar_error_t *err) {
  rl_t *r = altar_ledger_impl(l);
  (void)err;
  r->in_batch = false;
  altar__rl_rollback(r);
  return ALTAR_OK;
}

/* Level-0 files a persisted ledger may keep: the daemon that opens it
 * compacts on its own, and RocksDB slows writes from 20 such files on. */
#define PERSIST_MAX_L0 16

static int level0_files(rl_t *r) {
  char *v = rocksdb_property_value(r->db, "rocksdb.num-files-at-level0");
  int n = v ? (int)strtol(v, NULL, 10) : 0;
  rocksdb_free(v);
  return n;
}

/* Writes the memtables to table files; `compact` also compacts a crowded
 * level 0 (not when closing: a rebuild that failed closes a directory about
 * to be deleted). */
static int persist(rl_t *r, bool compact, altar_error_t *err) {
  int rc = altar__rl_settle(r, err);
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
  rl_t *r = altar_ledger_impl(l);
  if (r->read_only) return ALTAR_OK;
  return persist(r, true, err);
}

static void rl_free(rl_t *r) {
  if (!r) return;
  if (r->db && r->no_wal) {
    /* Nothing else holds these writes; callers that must know persist first. */
    altar_error_t ignored = {0};
    persist(r, false, &ignored);
  }
  altar__lwriter_stop(r->writer);
  if (r->db) rocksdb_close(r->db);
  if (r->wb) rocksdb_writebatch_destroy(r->wb);
  altar__rl_pend_clear(r);
  altar_arena_free(&r->arena);
  altar__hmap_free(&r->pend);
  altar__hmap_free(&r->flight);
  altar_arena_free(&r->flight_arena);
  free(r->pv);
  if (r->wopts) rocksdb_writeoptions_destroy(r->wopts);
  if (r->ropts) rocksdb_readoptions_destroy(r->ropts);
  if (r->opts) rocksdb_options_destroy(r->opts);
  if (r->topts) rocksdb_block_based_options_destroy(r->topts);
  if (r->cache) rocksdb_cache_destroy(r->cache);
  altar__lindex_free(&r->ix);
  altar_buf_free(&r->kb);
  altar_buf_free(&r->kb2);
  altar_buf_free(&r->cl);
  altar_record_fixed_clear(&r->fixed);
  altar_buf_free(&r->vb);
  free(r->dir);
  free(r);
}

static void rl_close(altar_ledger_t *l) { rl_free(altar_ledger_impl(l)); }

static int rl_open(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err);

/* The keys rl_open reads: "dir" and the fields of altar_ledger_rocksdb_opts_t. */
static const altar_plugin_key_t rl_keys[] = {
    {"dir", "the database directory"},
    {"sync", "fsync every write batch (true/false)"},
    {"read_only", "open without writing (true/false)"},
    {"no_create", "refuse a directory without a ledger (true/false)"},
    {"no_wal", "write without the write-ahead log (true/false)"},
    {"write_behind", "commit batches on a writer thread (true/false)"},
    {"write_buffer_mb", "RocksDB's write buffer, in MiB"},
    ALTAR_PLUGIN_KEYS_END,
};

const altar_ledger_ops_t altar_ledger_rocksdb_ops = {
    .name = "rocksdb",
    .caps = ALTAR_LEDGER_CAP_DURABLE | ALTAR_LEDGER_CAP_SIDE_KEYS | ALTAR_LEDGER_CAP_PARTITIONS,
    .config_keys = rl_keys,
    .open = rl_open,
    .close = rl_close,
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
    .aux_put = altar__rl_aux_put,
    .aux_del = altar__rl_aux_del,
    .aux_get = altar__rl_aux_get,
    .aux_scan = altar__rl_aux_scan,
};

/* Memtable inserts with a hint per key prefix (family, partition and two
 * more bytes: "x:0005g/", "c:0005" and a timestamp's top bytes): RocksDB
 * keeps where the last key of each prefix went, so a key that follows it
 * (sequence-numbered settled groups and outbox entries, consumed-index
 * stamps, offsets and counters written again) goes in without a descent
 * from the top of the skiplist. A one-group batch of the daemon writes about
 * ten keys of different families into a memtable of ~10^5 entries; the
 * descents were a fifth of the reconciler's CPU (perf, one-shard groups).
 * The C API has no setter: the option is read from its string form. On
 * failure the options stay as they were (hints only cost or save time). */
static rocksdb_options_t *with_insert_hints(rocksdb_options_t *opts) {
  rocksdb_options_t *hinted = rocksdb_options_create();
  char *dberr = NULL;
  rocksdb_get_options_from_string(opts, "memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.8", hinted,
                                  &dberr);
  if (dberr) {
    rocksdb_free(dberr);
    rocksdb_options_destroy(hinted);
    return opts;
  }
  rocksdb_options_destroy(opts);
  return hinted;
}

/* Opens the database in dir into a new rl_t: 0 with *pr set, or an error. */
static int open_dir(const char *dir, const altar_ledger_rocksdb_opts_t *opts, rl_t **pr, altar_error_t *err) {
  altar_ledger_rocksdb_opts_t o = *opts;
  if (!dir || !*dir) return altar_error_set(err, ALTAR_EINVAL, "ledger: directory must not be empty");
  rl_t *r = calloc(1, sizeof *r);
  if (!r || !(r->dir = strdup(dir))) {
    rl_free(r);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  }
  r->read_only = o.read_only;
  r->opts = with_insert_hints(rocksdb_options_create());
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
  /* Table files' filters and indexes live in that cache, not beside it:
   * held by each open table file they would grow with the ledger (about
   * 0.7 MB per 10^5 shards, for as long as consumed records are kept),
   * outside any bound. Level 0's stay pinned (the newest, read most). */
  rocksdb_block_based_options_set_cache_index_and_filter_blocks(r->topts, 1);
  rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(r->topts, 1);
  rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(r->topts, 1);
  /* ...cut into 4 KiB partitions under a small pinned top level. A whole
   * filter is about 1.2 MB per 10^6 keys, more than one shard of the cache
   * holds (64 shards of 1 MiB), so it never stayed cached: every point read
   * of a big table read its filter from disk again and checksummed it
   * (bench_takeover at 10^5 groups: a third of the tail's time). */
  rocksdb_block_based_options_set_index_type(r->topts, rocksdb_block_based_table_index_type_two_level_index_search);
  rocksdb_block_based_options_set_partition_filters(r->topts, 1);
  rocksdb_block_based_options_set_metadata_block_size(r->topts, 4096);
  rocksdb_block_based_options_set_pin_top_level_index_and_filter(r->topts, 1);
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
  if (ver && vlen == 1 && (ver[0] == '1' || ver[0] == '2')) {
    altar_error_set(err, ALTAR_ELEDGER,
                    "ledger %s: written in layout %c, before its keys carried their status partition; this build "
                    "reads layout %s: rebuild it (altar reconciler --rebuild) or restore a newer checkpoint",
                    dir, ver[0], LAYOUT_VERSION);
    rocksdb_free(ver);
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
  if (altar__rl_load_cache(r, err)) {
    altar_error_prefix(err, "ledger %s", dir);
    goto fail;
  }
  if (altar__rl_find_parted(r, err)) {
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
  *pr = r;
  return ALTAR_OK;
fail:
  rl_free(r);
  return err && err->code ? err->code : ALTAR_ELEDGER;
}

/* The configuration keys: "dir" and the fields of altar_ledger_rocksdb_opts_t
 * by their names. */
static const char *const rl_bool_keys[] = {"sync", "read_only", "no_create", "no_wal", "write_behind"};

static bool *rl_bool_field(altar_ledger_rocksdb_opts_t *o, size_t i) {
  bool *f[] = {&o->sync, &o->read_only, &o->no_create, &o->no_wal, &o->write_behind};
  return f[i];
}

static int rl_open(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err) {
  altar_ledger_rocksdb_opts_t o = {0};
  const char *dir = NULL;
  for (size_t k = 0; cfg && k < cfg->n; k++) {
    const char *key = cfg->keys[k], *val = cfg->vals[k];
    if (!strcmp(key, "dir")) {
      dir = val;
      continue;
    }
    if (!strcmp(key, "write_buffer_mb")) {
      char *end;
      errno = 0;
      unsigned long long mb = strtoull(val, &end, 10);
      if (!*val || *end || errno || *val == '-' || mb > SIZE_MAX >> 20)
        return altar_error_set(err, ALTAR_EINVAL, "ledger.write_buffer_mb: '%.64s' is not a size in MiB", val);
      o.write_buffer_mb = (size_t)mb;
      continue;
    }
    size_t i = 0, nb = sizeof rl_bool_keys / sizeof *rl_bool_keys;
    while (i < nb && strcmp(key, rl_bool_keys[i])) i++;
    if (i == nb) return altar_plugin_keys_refuse(rl_keys, NULL, "ledger", "rocksdb", key, err);
    if (!strcmp(val, "true")) *rl_bool_field(&o, i) = true;
    else if (!strcmp(val, "false")) *rl_bool_field(&o, i) = false;
    else return altar_error_set(err, ALTAR_EINVAL, "ledger.%s: '%.64s' is not true or false", key, val);
  }
  rl_t *r = NULL;
  int rc = open_dir(dir, &o, &r, err);
  if (rc) return rc;
  r->h = l;
  altar_ledger_set_impl(l, r);
  return ALTAR_OK;
}

altar_ledger_t *altar_ledger_rocksdb_open(const char *dir, const altar_ledger_rocksdb_opts_t *opts,
                                          altar_error_t *err) {
  altar_ledger_rocksdb_opts_t o = opts ? *opts : (altar_ledger_rocksdb_opts_t){0};
  altar_strmap_t cfg;
  altar_strmap_init(&cfg);
  char mb[32];
  snprintf(mb, sizeof mb, "%zu", o.write_buffer_mb);
  int rc = altar_strmap_set(&cfg, "dir", dir ? dir : "");
  for (size_t i = 0; !rc && i < sizeof rl_bool_keys / sizeof *rl_bool_keys; i++)
    if (*rl_bool_field(&o, i)) rc = altar_strmap_set(&cfg, rl_bool_keys[i], "true");
  if (!rc && o.write_buffer_mb) rc = altar_strmap_set(&cfg, "write_buffer_mb", mb);
  altar_ledger_t *l = NULL;
  if (rc) altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  else l = altar_ledger_open(&altar_ledger_rocksdb_ops, &cfg, err);
  altar_strmap_clear(&cfg);
  return l;
}

/* ---- internal accessors ---- */

bool altar__ledger_is_rocksdb(const altar_ledger_t *l) { return l && l->table == &altar_ledger_rocksdb_ops; }

bool altar__ledger_rocksdb_open_spec(altar_ledger_t *l, const char *backend, const char *external_id,
                                     const void **pdata, size_t *plen) {
  if (!altar__ledger_is_rocksdb(l)) return false;
  const altar__lent_t *x = altar__lindex_find(&((rl_t *)altar_ledger_impl(l))->ix, backend, external_id);
  if (!x || !x->has_spec || !x->spec_enc) return false;
  *pdata = x->spec_enc;
  *plen = x->spec_len;
  return true;
}

void altar__ledger_rocksdb_fail_writes(altar_ledger_t *l, int n) {
  if (altar__ledger_is_rocksdb(l)) ((rl_t *)altar_ledger_impl(l))->fail_writes = n;
}

rocksdb_t *altar__ledger_rocksdb_db(altar_ledger_t *l) {
  return altar__ledger_is_rocksdb(l) ? ((rl_t *)altar_ledger_impl(l))->db : NULL;
}

const char *altar__ledger_rocksdb_dir(altar_ledger_t *l) {
  return altar__ledger_is_rocksdb(l) ? ((rl_t *)altar_ledger_impl(l))->dir : NULL;
}
