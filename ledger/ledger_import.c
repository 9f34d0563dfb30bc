/* Importing status partitions' state into a RocksDB ledger from another
 * (a checkpoint restored beside it): a partition's state is one key range
 * per family (ledger_part.c). Each range becomes one SST file (a range
 * tombstone over it and the other ledger's keys of it), written on as
 * many threads as there are cores, and the files of every partition of
 * the import are ingested in one call: RocksDB records them in one
 * MANIFEST edit, so a kill -9 leaves the old partitions or the new, never
 * a mix. An ingested file skips the memtable and the WAL (a WriteBatch of
 * the same keys was most of a takeover: every key inserted into the
 * memtable, written to the WAL, then flushed and compacted again while the
 * tail is applied), and its tombstones are not in the memtable, where every
 * read would have to step over them until a flush. */
#include "core/job_pool.h"
#include "ledger/ledger_rocksdb_int.h"

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
    } else if (sv && (!ov || bytes_cmp(sv, sl, ov, ol) > 0)) {
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
static int write_range(rocksdb_options_t *wo, rl_t *s, const char *fam, int32_t part, const char *path, const char *put,
                       size_t plen, const void *pval, size_t pvlen, size_t *pn, altar_error_t *err) {
  char lo[2 + ALTAR__RL_PART_LEN], hi[2 + ALTAR__RL_PART_LEN];
  range_of(fam, part, lo, hi);
  rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
  rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(eo, wo);
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

/* One family's file of one partition (write_range's arguments). */
typedef struct range_job {
  rocksdb_options_t *wo;
  rl_t *s;
  size_t pi; /* which of the import's partitions */
  const char *fam;
  int32_t part;
  char path[4096];
  const char *put;
  size_t plen;
  const void *pval;
  size_t pvlen;
  size_t n;
  int rc;
  altar_error_t err;
} range_job_t;

/* One import file, on whichever of the pool's threads takes it (a
 * partition's files are independent of each other and of the others'). */
static void write_range_job(void *ctx, size_t i) {
  range_job_t *j = &((range_job_t *)ctx)[i];
  j->rc = write_range(j->wo, j->s, j->fam, j->part, j->path, j->put, j->plen, j->pval, j->pvlen, &j->n, &j->err);
}

void (*altar__ledger_import_before_ingest)(void) = NULL;

int altar__ledger_rocksdb_import_partition(altar_ledger_t *l, const char *src_dir, int32_t part,
                                           const char *const *max_keys, size_t n_max, const char *put_key,
                                           const void *put_val, size_t put_vlen, size_t *pkeys, altar_error_t *err) {
  altar_ledger_import_part_t one = {.part = part, .put_key = put_key, .put_val = put_val, .put_vlen = put_vlen};
  if (pkeys) *pkeys = 0;
  int rc = altar__ledger_rocksdb_import_partitions(l, src_dir, &one, 1, max_keys, n_max, err);
  if (!rc && pkeys) *pkeys = one.keys;
  return rc;
}

int altar__ledger_rocksdb_import_partitions(altar_ledger_t *l, const char *src_dir, altar_ledger_import_part_t *parts,
                                            size_t n_parts, const char *const *max_keys, size_t n_max,
                                            altar_error_t *err) {
  for (size_t i = 0; i < n_parts; i++) parts[i].keys = 0;
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  if (!n_parts || n_parts > ALTAR_LEDGER_SCOPE_MAX + 1)
    return altar_error_set(err, ALTAR_EINVAL, "ledger import: %zu partitions", n_parts);
  for (size_t i = 0; i < n_parts; i++) {
    if (parts[i].part < 0 || parts[i].part > ALTAR_LEDGER_SCOPE_MAX)
      return altar_error_set(err, ALTAR_EINVAL, "ledger import: %d is not a status partition", (int)parts[i].part);
    for (size_t k = 0; k < i; k++)
      if (parts[k].part == parts[i].part)
        return altar_error_set(err, ALTAR_EINVAL, "ledger import: partition %d given twice", (int)parts[i].part);
  }
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger import: a batch is open");
  int rc = altar__rl_writable(r, "import", err);
  if (!rc) rc = altar__rl_settle(r, err);
  if (rc) return rc;
  /* The source through the ledger's own open: its layout is checked. */
  altar_ledger_rocksdb_opts_t ro_opts = {.read_only = true, .no_create = true};
  altar_ledger_t *src = altar_ledger_rocksdb_open(src_dir, &ro_opts, err);
  if (!src) return altar_error_prefix(err, "ledger import of partition %d", (int)parts[0].part);
  rl_t *s = altar_ledger_impl(src);
  rc = raise_counters(r, s, max_keys, n_max, err);
  size_t n_jobs = n_parts * N_FAMS;
  range_job_t *jobs = rc ? NULL : calloc(n_jobs, sizeof *jobs);
  const char **list = rc ? NULL : calloc(n_jobs, sizeof *list);
  altar_buf_t *puts = rc ? NULL : calloc(n_parts, sizeof *puts);
  if (!rc && (!jobs || !list || !puts)) rc = altar_error_set(err, ALTAR_ENOMEM, "ledger import: out of memory");
  /* Each caller's side key of its partition (whole), among its x: keys. */
  for (size_t i = 0; i < n_parts && !rc; i++)
    if (parts[i].put_key && altar__rl_key(&puts[i], 'x', parts[i].part, parts[i].put_key, strlen(parts[i].put_key)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "ledger import: out of memory");
  /* Every partition's side keys (settled groups and their index: about
   * half of a partition's keys) first, so the biggest jobs start first. */
  static const size_t order[N_FAMS] = {3, 1, 0, 2};
  for (size_t k = 0, j = 0; k < N_FAMS && !rc; k++)
    for (size_t i = 0; i < n_parts; i++, j++) {
      size_t f = order[k];
      range_job_t *jb = &jobs[j];
      bool x = !strcmp(fams[f], "x:") && puts[i].len;
      *jb = (range_job_t){.wo = r->opts,
                          .s = s,
                          .pi = i,
                          .fam = fams[f],
                          .part = parts[i].part,
                          .put = x ? (const char *)puts[i].data : NULL,
                          .plen = x ? puts[i].len : 0,
                          .pval = parts[i].put_val,
                          .pvlen = parts[i].put_vlen};
      /* No pid in the name: one process at a time holds the ledger, and
       * a crash's leftover is removed by the next import. */
      snprintf(jb->path, sizeof jb->path, "%s.import-%d-%zu.sst", r->dir, (int)parts[i].part, f);
      unlink(jb->path);
      list[j] = jb->path;
    }
  if (!rc) {
    altar__run_jobs(n_jobs, write_range_job, jobs);
    for (size_t j = 0; j < n_jobs && !rc; j++) {
      parts[jobs[j].pi].keys += jobs[j].n;
      if (jobs[j].rc) {
        rc = jobs[j].rc;
        if (err) *err = jobs[j].err;
      }
    }
  }
  for (size_t i = 0; puts && i < n_parts; i++) altar_buf_free(&puts[i]);
  free(puts);
  altar_ledger_close(src);
  if (!rc && altar__ledger_import_before_ingest) altar__ledger_import_before_ingest();
  if (!rc) {
    rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
    char *dberr = NULL;
    rocksdb_ingest_external_file(r->db, list, n_jobs, io, &dberr);
    if (dberr)
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: importing partition %d%s failed: %s", r->dir,
                           (int)parts[0].part, n_parts > 1 ? " and others" : "", dberr);
    rocksdb_free(dberr);
    rocksdb_ingestexternalfileoptions_destroy(io);
  }
  for (size_t j = 0; jobs && j < n_jobs; j++) unlink(jobs[j].path); /* moved in already, or not wanted */
  free(jobs);
  free(list);
  if (rc) {
    for (size_t i = 0; i < n_parts; i++) parts[i].keys = 0;
    return rc;
  }
  if ((rc = altar__rl_load_cache(r, err))) return altar_error_prefix(err, "ledger %s after the import", r->dir);
  r->parted = true;
  return ALTAR_OK;
}
