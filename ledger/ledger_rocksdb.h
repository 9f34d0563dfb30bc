/* altar — RocksDB ledger internals for the reconciler daemon and tests:
 * the database handle and the consistency check.
 * Internal to reconciler/ (and its tests). Keys the ledger owns start with
 * "o:" (open records), "r:" (consumed records), "c:" (which were consumed
 * when) and "m:"; callers that share
 * the database put theirs under "x:" (the aux_* operations of altar_ledger_ops_t).
 * Each family puts the key's status partition (4 hex digits) right after
 * its prefix (ledger/ledger_part.c). */
#ifndef ALTAR_RECONCILER_LEDGER_ROCKSDB_H
#define ALTAR_RECONCILER_LEDGER_ROCKSDB_H

#include "altar/ledger.h"

#include <rocksdb/c.h>
#include <stdint.h>

/* True when l is a RocksDB ledger. */
bool altar__ledger_is_rocksdb(const altar_ledger_t *l);
/* The open database (borrowed), or NULL for another kind of ledger. */
rocksdb_t *altar__ledger_rocksdb_db(altar_ledger_t *l);
/* The directory the database lives in (borrowed), or NULL. */
const char *altar__ledger_rocksdb_dir(altar_ledger_t *l);
/* The spec of open record (backend, external_id) as the ledger keeps it in
 * memory (altar_encode_spec's bytes), borrowed until the ledger next
 * changes: true with *pdata and *plen set; false when l is not a RocksDB
 * ledger, or the record is not open or has no spec. Reads no disk. */
bool altar__ledger_rocksdb_open_spec(altar_ledger_t *l, const char *backend, const char *external_id,
                                     const void **pdata, size_t *plen);
/* Test hook (fault injection): the next n writes fail as a RocksDB write
 * error would, so callers' rollback paths can be exercised. */
void altar__ledger_rocksdb_fail_writes(altar_ledger_t *l, int n);

/* Checks the stored ledger against itself: every record (o: and r:) decodes
 * with its spec and sits under its own handle's key; o: holds only open
 * records and r: only consumed ones; no other key outside m:version, c: and x:
 * exists. Also checks the in-memory cache against the o: records, one to
 * one. 0, or ALTAR_ELEDGER naming the first inconsistency. *precords (may
 * be NULL) gets the number of records (an r: copy shadowed by a re-opened
 * o: record counts once). */
int altar__ledger_rocksdb_check(altar_ledger_t *l, uint64_t *precords, altar_error_t *err);

/* Replaces status partition `part` of l with that of the RocksDB ledger in
 * src_dir (a restored checkpoint, opened read-only), in one atomic write:
 * every key of the partition in l goes (DeleteRange of each family's
 * range), every key of it in src is put; each of the n_max side keys of the
 * ledger's own state (fixed-width counters: the outbox's "q", the settled
 * groups' "gn") takes the bytewise greater of the two ledgers' values, so
 * no later sequence number meets an imported one. The cache of open
 * records is then rebuilt. No batch may be open. *pkeys (may be NULL) gets
 * the number of keys imported. put_key (may be NULL): one side key of the
 * partition the caller puts in the same write, with value put_val (the
 * reconciler's import marker, reconciler/import_marker.h). */
int altar__ledger_rocksdb_import_partition(altar_ledger_t *l, const char *src_dir, int32_t part,
                                           const char *const *max_keys, size_t n_max, const char *put_key,
                                           const void *put_val, size_t put_vlen, size_t *pkeys, altar_error_t *err);

/* One partition of altar__ledger_rocksdb_import_partitions: which, the side
 * key put with it (may be NULL), and (out) the keys imported. */
typedef struct altar_ledger_import_part {
  int32_t part;
  const char *put_key;
  const void *put_val;
  size_t put_vlen;
  size_t keys;
} altar_ledger_import_part_t;

/* The same for n_parts partitions of one source at once, in one atomic
 * write (one ingestion: a kill -9 leaves all of them old or all new), their
 * files written on as many threads as there are cores. */
int altar__ledger_rocksdb_import_partitions(altar_ledger_t *l, const char *src_dir, altar_ledger_import_part_t *parts,
                                            size_t n_parts, const char *const *max_keys, size_t n_max,
                                            altar_error_t *err);

/* Test hook (fault injection): called by an import once its files are
 * written, before they are ingested; a test _exit()s there to stand for a
 * kill -9. NULL in production. */
extern void (*altar__ledger_import_before_ingest)(void);

#endif
