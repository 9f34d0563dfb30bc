/* Importing one status partition's state into a RocksDB ledger from
 * another (a checkpoint restored beside it): a partition's state is one
 * key range per family (ledger_part.c), so the import is a DeleteRange and
 * the other ledger's keys of those ranges, in one WriteBatch. */
#include "ledger/ledger_rocksdb_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const fams[] = {"o:", "r:", "c:", "x:"};
#define N_FAMS (sizeof fams / sizeof *fams)

/* [lo, hi) of family f's range for part. */
static void range_of(const char *fam, int32_t part, char lo[2 + ALTAR__RL_PART_LEN], char hi[2 + ALTAR__RL_PART_LEN]) {
  memcpy(lo, fam, 2);
  memcpy(hi, fam, 2);
  altar__rl_part_hex(part, lo + 2);
  altar__rl_part_hex(part + 1, hi + 2);
}

/* The ledger's own value of side key k in db (malloc'd), or NULL. */
static char *own_value(rocksdb_t *db, rocksdb_readoptions_t *ro, const char *k, size_t *plen, char **dberr) {
  size_t kl = strlen(k);
  char *key = malloc(2 + ALTAR__RL_PART_LEN + kl);
  if (!key) return NULL;
  memcpy(key, "x:", 2);
  altar__rl_part_hex(ALTAR_LEDGER_SCOPE_NONE, key + 2);
  memcpy(key + 2 + ALTAR__RL_PART_LEN, k, kl);
  char *v = rocksdb_get(db, ro, key, 2 + ALTAR__RL_PART_LEN + kl, plen, dberr);
  free(key);
  return v;
}

static int greater(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c > 0 : al > bl;
}

int altar__ledger_rocksdb_import_partition(altar_ledger_t *l, const char *src_dir, int32_t part,
                                           const char *const *max_keys, size_t n_max, const char *put_key,
                                           const void *put_val, size_t put_vlen, size_t *pkeys, altar_error_t *err) {
  if (pkeys) *pkeys = 0;
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  if (part < 0 || part > ALTAR_LEDGER_SCOPE_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "ledger import: %d is not a status partition", (int)part);
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger import: a batch is open");
  int rc = altar__rl_writable(r, "import", err);
  if (!rc) rc = altar__rl_settle(r, err);
  if (rc) return rc;
  /* The source through the ledger's own open: its layout is checked. */
  altar_ledger_rocksdb_opts_t ro_opts = {.read_only = true, .no_create = true};
  altar_ledger_t *src = altar_ledger_rocksdb_open(src_dir, &ro_opts, err);
  if (!src) return altar_error_prefix(err, "ledger import of partition %d", (int)part);
  rl_t *s = altar_ledger_impl(src);
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  size_t n = 0;
  char *dberr = NULL;
  for (size_t f = 0; f < N_FAMS && !rc; f++) {
    char lo[2 + ALTAR__RL_PART_LEN], hi[2 + ALTAR__RL_PART_LEN];
    range_of(fams[f], part, lo, hi);
    rocksdb_writebatch_delete_range(wb, lo, sizeof lo, hi, sizeof hi);
    rocksdb_iterator_t *it = rocksdb_create_iterator(s->db, s->ropts);
    for (rocksdb_iter_seek(it, lo, sizeof lo); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
      size_t klen, vlen;
      const char *k = rocksdb_iter_key(it, &klen);
      if (klen < sizeof lo || memcmp(k, lo, sizeof lo)) break;
      const char *v = rocksdb_iter_value(it, &vlen);
      rocksdb_writebatch_put(wb, k, klen, v, vlen);
      n++;
    }
    rc = altar__rl_iter_end(it, rc, "ledger import", err);
  }
  /* The ledger-wide counters: the greater of the two. */
  for (size_t i = 0; i < n_max && !rc; i++) {
    size_t ol = 0, sl = 0;
    char *ov = own_value(r->db, r->ropts, max_keys[i], &ol, &dberr);
    char *sv = dberr ? NULL : own_value(s->db, s->ropts, max_keys[i], &sl, &dberr);
    if (dberr) {
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger import: reading %s: %s", max_keys[i], dberr);
    } else if (sv && (!ov || greater(sv, sl, ov, ol))) {
      size_t kl = strlen(max_keys[i]);
      char key[2 + ALTAR__RL_PART_LEN + 64];
      if (kl > 64) {
        rc = altar_error_set(err, ALTAR_EINVAL, "ledger import: counter key %.64s… is too long", max_keys[i]);
      } else {
        memcpy(key, "x:", 2);
        altar__rl_part_hex(ALTAR_LEDGER_SCOPE_NONE, key + 2);
        memcpy(key + 2 + ALTAR__RL_PART_LEN, max_keys[i], kl);
        rocksdb_writebatch_put(wb, key, 2 + ALTAR__RL_PART_LEN + kl, sv, sl);
      }
    }
    rocksdb_free(dberr);
    dberr = NULL;
    rocksdb_free(ov);
    rocksdb_free(sv);
  }
  altar_ledger_close(src);
  /* The caller's own side key of the partition, after the imported ones
   * (a key of the same name among them is replaced). */
  if (!rc && put_key) {
    if (altar__rl_key(&r->kb, 'x', part, put_key, strlen(put_key)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger import: out of memory");
    else rocksdb_writebatch_put(wb, (const char *)r->kb.data, r->kb.len, put_val, put_vlen);
  }
  if (!rc) {
    rocksdb_write(r->db, r->wopts, wb, &dberr);
    if (dberr) {
      rc =
          altar_error_set(err, ALTAR_ELEDGER, "ledger %s: importing partition %d failed: %s", r->dir, (int)part, dberr);
      rocksdb_free(dberr);
    }
  }
  rocksdb_writebatch_destroy(wb);
  if (rc) return rc;
  if ((rc = altar__rl_load_cache(r, err))) return altar_error_prefix(err, "ledger %s after the import", r->dir);
  r->parted = true;
  if (pkeys) *pkeys = n;
  return ALTAR_OK;
}
