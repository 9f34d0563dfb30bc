/* The RocksDB ledger's internals, shared by its files (one concern each):
 *   ledger_rocksdb.c      the operations, open and close
 *   ledger_value.c        the value format of a record (ledger_value.h)
 *   ledger_batch.c        the overlay of a batch's changes and its write
 *   ledger_cache.c        the in-memory cache of open records
 *   ledger_rocksdb_aux.c  the side keyspace under x:
 *   ledger_check.c        the consistency check
 *   ledger_prune.c        when records were consumed (c:), and pruning the oldest
 *   ledger_part.c         status partitions in keys, and scans merged over them
 * Internal to those files. */
#ifndef ALTAR_RECONCILER_LEDGER_ROCKSDB_INT_H
#define ALTAR_RECONCILER_LEDGER_ROCKSDB_INT_H

#include "altar/arena.h"
#include "altar/buf.h"
#include "altar/codec.h"
#include "ledger/ledger_int.h"
#include "ledger/ledger_rocksdb.h"
#include "ledger/ledger_writer.h"

#include <rocksdb/c.h>

struct altar__rl_change;

typedef struct rl {
  rocksdb_t *db;
  rocksdb_options_t *opts;
  rocksdb_block_based_table_options_t *topts;
  rocksdb_cache_t *cache;
  rocksdb_writeoptions_t *wopts;
  rocksdb_readoptions_t *ropts;
  rocksdb_writebatch_t *wb;
  altar__hmap_t pend;           /* key → pending change of the open batch */
  altar_arena_t arena;          /* memory of the pending changes, reset per batch */
  struct altar__rl_change **pv; /* the same changes, for writing them out */
  size_t n_pv, cap_pv;
  bool in_batch;
  bool read_only;
  bool no_wal;
  altar__lwriter_t *writer; /* write-behind: commits handed to a thread */
  /* The changes of the batch the writer may still be writing (its overlay
   * and arena, kept from its commit): a read they answer, or that none of
   * them touches, need not wait for the write. Empty when nothing is in
   * flight. */
  altar__hmap_t flight;
  altar_arena_t flight_arena;
  int fail_writes; /* test hook: fail this many upcoming writes */
  altar__lindex_t ix;
  altar_buf_t kb, vb, kb2;    /* scratch */
  altar_buf_t cl;             /* scratch: the record keys one consume lists in its index entry */
  int64_t last_stamp_us;      /* the newest index stamp handed out (ledger_prune.c) */
  altar_record_fixed_t fixed; /* scratch: a record's fixed part */
  char *dir;
  altar_ledger_t *h; /* the handle: its scope names the partition of new keys */
  /* Some key carries a partition (not the ledger's own "ffff"): only then
   * does a point read with no scope that misses look in the partitions. */
  bool parted;
} rl_t;

/* ---- keys (ledger_batch.c) ---- */

/* b = prefix ':' <partition> rk. 0 or ALTAR_ENOMEM. */
int altar__rl_key(altar_buf_t *b, char prefix, int32_t part, const char *rk, size_t rklen);
/* The partition new keys go under: the handle's scope. */
static inline int32_t altar__rl_scope(const rl_t *r) { return r->h ? r->h->scope : ALTAR_LEDGER_SCOPE_NONE; }

/* ---- status partitions in keys (ledger_part.c) ---- */

#define ALTAR__RL_PART_LEN 4
/* The partition as 4 hex digits ("ffff" for ALTAR_LEDGER_SCOPE_NONE). */
void altar__rl_part_hex(int32_t p, char out[ALTAR__RL_PART_LEN]);
/* The partition 4 hex digits name; false when they are not hex digits. */
bool altar__rl_part_parse(const char *h, int32_t *pp);
/* Whether any key of r carries a partition: sets r->parted. */
int altar__rl_find_parted(rl_t *r, altar_error_t *err);
/* The partitions with keys under family fam (2 bytes: "o:", "x:", ...),
 * ascending, NONE last; *pv malloc'd. Committed keys only. */
int altar__rl_parts(rl_t *r, const char *fam, int32_t **pv, size_t *pn, altar_error_t *err);
/* One iterator per (family, partition present), each over fam <part> sub;
 * merged by what follows the partition. */
typedef struct altar__rl_merge {
  rocksdb_iterator_t **it;
  int32_t *part; /* partition of each iterator */
  size_t *fam;   /* index into the families given, of each iterator */
  char *pfx;     /* each iterator's prefix, plen bytes apiece */
  size_t plen, n;
} altar__rl_merge_t;
int altar__rl_merge_open(rl_t *r, const char *const *fams, size_t nfam, const char *sub, size_t sublen,
                         altar__rl_merge_t *m, altar_error_t *err);
/* The iterator whose key (after family and partition) is the smallest by
 * cmp (NULL: bytewise), the first of equals; SIZE_MAX when all are done. */
size_t altar__rl_merge_next(altar__rl_merge_t *m, int (*cmp)(const char *, size_t, const char *, size_t));
/* Whether iterators i and j stand on equal keys (after their partitions). */
bool altar__rl_merge_same(const altar__rl_merge_t *m, size_t i, size_t j,
                          int (*cmp)(const char *, size_t, const char *, size_t));
/* Ends every iterator (as altar__rl_iter_end) and frees m. */
int altar__rl_merge_end(altar__rl_merge_t *m, int rc, const char *what, altar_error_t *err);
void altar__rl_merge_free(altar__rl_merge_t *m);

/* ---- the batch (ledger_batch.c) ---- */

/* Waits for writes handed to the write-behind thread, so a read sees them;
 * ALTAR_ELEDGER after a failed one. */
int altar__rl_settle(rl_t *r, altar_error_t *err);
/* ALTAR_ENOTSUP naming op on a read-only ledger. */
int altar__rl_writable(rl_t *r, const char *op, altar_error_t *err);
/* Stage a put or delete of a key in the batch. 0 or ALTAR_ENOMEM. */
int altar__rl_stage_put(rl_t *r, const altar_buf_t *k, const void *v, size_t vlen);
int altar__rl_stage_del(rl_t *r, const altar_buf_t *k);
/* Stages x's value under o: (open; `fresh` when the caller knows the key is
 * not on disk) or r: (consumed), encoded now. */
int altar__rl_stage_record(rl_t *r, const altar__lent_t *x, char prefix, bool fresh, altar_error_t *err);
/* Stages the o: key of cache entry x, whose value follows x until the batch
 * is written; values that need the codec's checks are encoded now. */
int altar__rl_stage_open(rl_t *r, const altar__lent_t *x, bool fresh, altar_error_t *err);
/* Reads key as the batch would leave it: the overlay first, then the disk.
 * *pval is malloc'd (free with rocksdb_free or free); ALTAR_ENOTFOUND. */
int altar__rl_get_raw(rl_t *r, const altar_buf_t *key, char **pval, size_t *plen, altar_error_t *err);
/* Writes the batch as one WriteBatch; a failure drops it (altar__rl_rollback). */
int altar__rl_flush(rl_t *r, altar_error_t *err);
/* Ends one operation: outside a batch it is written at once; a failed
 * operation outside a batch leaves nothing behind. */
int altar__rl_op_end(rl_t *r, int rc, altar_error_t *err);
/* Drops the pending batch and rebuilds the cache from what is on disk. */
void altar__rl_rollback(rl_t *r);
/* Forgets the pending changes. */
void altar__rl_pend_clear(rl_t *r);
/* Iterates committed keys under a prefix. */
/* Ends a scan: when rc is 0, an error the iterator hit becomes rc ("<what>:
 * scan failed: ..."); the iterator is destroyed either way. */
int altar__rl_iter_end(rocksdb_iterator_t *it, int rc, const char *what, altar_error_t *err);
typedef int (*altar__rl_visit_fn)(void *ctx, const char *k, size_t klen, const char *v, size_t vlen);
int altar__rl_scan(rl_t *r, const char *pfx, size_t plen, altar__rl_visit_fn fn, void *ctx, altar_error_t *err);

/* ---- the cache of open records (ledger_cache.c) ---- */

/* Rebuilds the cache of open records from o: (consumed records are not read). */
int altar__rl_load_cache(rl_t *r, altar_error_t *err);
/* The fixed part of a record (its handle and kind entries) into r->fixed. */
int altar__rl_encode_fixed(rl_t *r, const altar_handle_t *h, const char *kind, altar_error_t *err);
/* Whether the handle of e is the one the record key rk names. */
bool altar__rl_key_matches(const char *rk, size_t rklen, const altar_ledger_entry_t *e);
/* A printable copy of key k (NUL shown as '|'), cut to cap - 1 bytes. */
void altar__rl_show_key(char *out, size_t cap, const char *k, size_t klen);

/* ---- consumed records' lifetime (ledger_prune.c) ---- */

/* Now, Unix microseconds, strictly increasing within r: the stamp of an
 * index entry. */
int64_t altar__rl_stamp_us(rl_t *r);
/* Appends record key rk to list, the value of an index entry. */
int altar__rl_index_add(altar_buf_t *list, const char *rk, size_t rklen);
/* Stages the index entry c:<part><stamp> listing the records of one
 * consume under partition part (nothing when list is empty). */
int altar__rl_stage_consumed(rl_t *r, int32_t part, const altar_buf_t *list, int64_t stamp_us);

/* ---- the side keyspace (ledger_rocksdb_aux.c): the aux_* operations ---- */

int altar__rl_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                      altar_error_t *err);
int altar__rl_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err);
int altar__rl_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err);
int altar__rl_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                       altar_error_t *err);

#endif
