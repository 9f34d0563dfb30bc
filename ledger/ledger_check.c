/* The RocksDB ledger's consistency check (altar__ledger_rocksdb_check). */
#include "ledger/ledger_rocksdb_int.h"
#include "ledger/ledger_value.h"

#include <stdlib.h>
#include <string.h>

/* Checks one record key k (o: or r:) and its value v. */
static int chk_one(rl_t *r, const char *k, size_t klen, const char *v, size_t vlen, uint64_t *precords, uint64_t *popen,
                   altar_error_t *err) {
  char shown[160];
  altar__rl_show_key(shown, sizeof shown, k, klen);
  altar_ledger_entry_t e;
  const char *sp;
  size_t sl;
  bool open = k[0] == 'o';
  int rc = altar__lvalue_decode(v, vlen, &e, &sp, &sl, true, err);
  if (rc) {
    altar_ledger_entry_clear(&e);
    return altar_error_prefix(err, "check: %s", shown);
  }
  /* The record map must be the codec's own bytes, whichever path wrote it. */
  size_t at, rec_len;
  altar__lvalue_record_span(v, &at, &rec_len);
  altar_record_t shallow = e.rec;
  shallow.spec = NULL;
  altar_buf_reset(&r->kb2);
  if (altar_encode_record(&shallow, &r->kb2, err) || r->kb2.len != rec_len || memcmp(r->kb2.data, v + at, rec_len)) {
    altar_ledger_entry_clear(&e);
    return altar_error_set(err, ALTAR_ELEDGER, "check: %s is not in the codec's canonical form", shown);
  }
  altar__lent_t *x = NULL;
  const size_t off = 2 + ALTAR__RL_PART_LEN;
  int32_t part;
  if (klen < off || !altar__rl_part_parse(k + 2, &part))
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s carries no status partition", shown);
  else if (!altar__rl_key_matches(k + off, klen - off, &e))
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s holds record %s:%s", shown, e.rec.handle.backend,
                         e.rec.handle.external_id);
  else if (e.rec.consumed == open)
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s holds a%s record", shown, open ? " consumed" : "n open");
  else x = altar__lindex_find(&r->ix, e.rec.handle.backend, e.rec.handle.external_id);
  if (!rc && open && x && x->part != part)
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %s: its cached copy is under another partition", shown);
  if (!rc && open) {
    (*popen)++;
    (*precords)++;
    altar_spec_t *s = e.rec.spec;
    e.rec.spec = NULL;
    bool same =
        x && altar_record_equal(&x->e.rec, &e.rec) && x->has_spec == (sp != NULL) &&
        (!sp || (x->spec_len == sl && !memcmp(x->spec_enc, sp, sl))) &&
        ((!x->e.task_key && !e.task_key) || (x->e.task_key && e.task_key && !strcmp(x->e.task_key, e.task_key))) &&
        ((!x->e.group_key && !e.group_key) || (x->e.group_key && e.group_key && !strcmp(x->e.group_key, e.group_key)));
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
  rl_t *r = altar_ledger_impl(l);
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "check: a batch is open");
  uint64_t records = 0, open = 0;
  int rc = altar__rl_settle(r, err);
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
    if (klen > 2 + ALTAR__RL_PART_LEN && k[1] == ':' && (k[0] == 'o' || k[0] == 'r')) {
      const char *v = rocksdb_iter_value(it, &vlen);
      rc = chk_one(r, k, klen, v, vlen, &records, &open, err);
    } else if (klen == 2 + ALTAR__RL_PART_LEN + 8 && k[0] == 'c' && k[1] == ':') {
      /* when a record was consumed (ledger_prune.c): an index, no record */
    } else if (!(klen == 9 && !memcmp(k, "m:version", 9))) {
      /* Anything else (an index entry of an older layout, say) is damage. */
      char shown[160];
      altar__rl_show_key(shown, sizeof shown, k, klen);
      rc = altar_error_set(err, ALTAR_ELEDGER, "check: unexpected key %s", shown);
    }
    if (!rc) rocksdb_iter_next(it);
  }
  rc = altar__rl_iter_end(it, rc, "check", err);
  if (!rc && open != r->ix.n_active)
    rc = altar_error_set(err, ALTAR_ELEDGER, "check: %llu open records on disk, %zu in the cache",
                         (unsigned long long)open, r->ix.n_active);
  if (precords) *precords = records;
  return rc;
}
