/* Importing one status partition's state into a RocksDB ledger from
 * another (a checkpoint restored beside it): a partition's state is one
 * key range per family (ledger_part.c). Each range becomes one SST file
 * (a range tombstone over it and the other ledger's keys of it), and the
 * files are ingested in one call: RocksDB records them in one MANIFEST
 * edit, so a kill -9 leaves the old partition or the new, never a mix. An
 * ingested file skips the memtable and the WAL (a WriteBatch of the same
 * keys was most of a takeover: every key inserted into the memtable,
 * written to the WAL, then flushed and compacted again while the tail is
 * applied), and its tombstones are not in the memtable, where every read
 * would have to step over them until a flush. */
#include "ledger/ledger_rocksdb_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}

/* The ledger-wide counters raised to the greater of the two ledgers', in
 * a write of their own before the partition's: a counter only has to stay
 * above every key it numbered, so one raised by an import a kill -9 then
 * stopped leaves a gap in the numbers and nothing else. */
static int raise_counters(rl_t *r, rl_t *s, const char *const *max_keys, size_t n_max, altar_error_t *err) {
  rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
  int rc = ALTAR_OK;
  char *dberr = NULL;
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
  if (!rc && rocksdb_writebatch_count(wb)) {
    rocksdb_write(r->db, r->wopts, wb, &dberr);
    if (dberr) rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: raising its counters failed: %s", r->dir, dberr);
    rocksdb_free(dberr);
  }
  rocksdb_writebatch_destroy(wb);
  return rc;
}

/* One family's range of part as an SST file at path: its tombstone, the
 * keys src holds of it, and (put, plen: a whole key, NULL for none) the
 * caller's key in its place among them. */
static int write_range(rl_t *r, rl_t *s, const char *fam, int32_t part, const char *path, const char *put, size_t plen,
                       const void *pval, size_t pvlen, size_t *pn, altar_error_t *err) {
  char lo[2 + ALTAR__RL_PART_LEN], hi[2 + ALTAR__RL_PART_LEN];
  range_of(fam, part, lo, hi);
  rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
  rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(eo, r->opts);
  char *dberr = NULL;
  int rc = ALTAR_OK;
  rocksdb_sstfilewriter_open(w, path, &dberr);
  if (!dberr) rocksdb_sstfilewriter_delete_range(w, lo, sizeof lo, hi, sizeof hi, &dberr);
  /* Read once, in order: kept out of the source's cache, read ahead. */
  rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
  rocksdb_readoptions_set_fill_cache(ro, 0);
  rocksdb_readoptions_set_readahead_size(ro, 4 << 20);
  rocksdb_iterator_t *it = rocksdb_create_iterator(s->db, ro);
  for (rocksdb_iter_seek(it, lo, sizeof lo); !dberr && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(it, &klen);
    if (klen < sizeof lo || memcmp(k, lo, sizeof lo)) break;
    (*pn)++;
    int c = put ? bytes_cmp(k, klen, put, plen) : -1;
    if (c >= 0) { /* the caller's key goes here, in order (replacing an equal one) */
      rocksdb_sstfilewriter_put(w, put, plen, pval, pvlen, &dberr);
      put = NULL;
      if (!c || dberr) continue;
    }
    const char *v = rocksdb_iter_value(it, &vlen);
    rocksdb_sstfilewriter_put(w, k, klen, v, vlen, &dberr);
  }
  rc = altar__rl_iter_end(it, rc, "ledger import", err);
  rocksdb_readoptions_destroy(ro);
  if (!rc && !dberr && put) rocksdb_sstfilewriter_put(w, put, plen, pval, pvlen, &dberr);
  if (!rc && !dberr) rocksdb_sstfilewriter_finish(w, &dberr);
  if (!rc && dberr) rc = altar_error_set(err, ALTAR_ELEDGER, "ledger import: writing %s: %s", path, dberr);
  rocksdb_free(dberr);
  rocksdb_sstfilewriter_destroy(w);
  rocksdb_envoptions_destroy(eo);
  return rc;
}

/* One family's file, on a thread of its own (write_range's arguments). */
typedef struct range_job {
  rl_t *r, *s;
  const char *fam;
  int32_t part;
  const char *path, *put;
  size_t plen;
  const void *pval;
  size_t pvlen;
  size_t n;
  int rc;
  altar_error_t err;
} range_job_t;

static void *range_main(void *arg) {
  range_job_t *j = arg;
  j->rc = write_range(j->r, j->s, j->fam, j->part, j->path, j->put, j->plen, j->pval, j->pvlen, &j->n, &j->err);
  return NULL;
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
  rc = raise_counters(r, s, max_keys, n_max, err);
  /* The caller's side key of the partition (whole), among the x: keys. */
  altar_buf_t put = {0};
  if (!rc && put_key && altar__rl_key(&put, 'x', part, put_key, strlen(put_key)))
    rc = altar_error_set(err, ALTAR_ENOMEM, "ledger import: out of memory");
  char paths[N_FAMS][4096];
  const char *list[N_FAMS];
  range_job_t jobs[N_FAMS];
  size_t n = 0;
  for (size_t f = 0; f < N_FAMS; f++) {
    snprintf(paths[f], sizeof paths[f], "%s.import-%d-%ld-%zu.sst", r->dir, (int)part, (long)getpid(), f);
    unlink(paths[f]); /* a crash's leftover of this pid */
    list[f] = paths[f];
    bool x = !strcmp(fams[f], "x:") && put.len;
    jobs[f] = (range_job_t){.r = r,
                            .s = s,
                            .fam = fams[f],
                            .part = part,
                            .path = paths[f],
                            .put = x ? (const char *)put.data : NULL,
                            .plen = x ? put.len : 0,
                            .pval = put_val,
                            .pvlen = put_vlen};
  }
  /* The side keys (settled groups and their index: about half of a
   * partition's keys) on a thread of their own, the other families here:
   * two cores write the files in about half the time. */
  pthread_t th;
  bool threaded = !rc && pthread_create(&th, NULL, range_main, &jobs[N_FAMS - 1]) == 0;
  for (size_t f = 0; f < N_FAMS && !rc; f++)
    if (f < N_FAMS - 1 || !threaded) range_main(&jobs[f]);
  if (threaded) pthread_join(th, NULL);
  for (size_t f = 0; f < N_FAMS && !rc; f++) {
    n += jobs[f].n;
    if (jobs[f].rc) {
      rc = jobs[f].rc;
      if (err) *err = jobs[f].err;
    }
  }
  altar_buf_free(&put);
  altar_ledger_close(src);
  if (!rc) {
    rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
    char *dberr = NULL;
    rocksdb_ingest_external_file(r->db, list, N_FAMS, io, &dberr);
    if (dberr)
      rc =
          altar_error_set(err, ALTAR_ELEDGER, "ledger %s: importing partition %d failed: %s", r->dir, (int)part, dberr);
    rocksdb_free(dberr);
    rocksdb_ingestexternalfileoptions_destroy(io);
  }
  for (size_t f = 0; f < N_FAMS; f++) unlink(paths[f]); /* moved in already, or not wanted */
  if (rc) return rc;
  if ((rc = altar__rl_load_cache(r, err))) return altar_error_prefix(err, "ledger %s after the import", r->dir);
  r->parted = true;
  if (pkeys) *pkeys = n;
  return ALTAR_OK;
}
