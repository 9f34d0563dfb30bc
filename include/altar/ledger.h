/* altar — TaskLedger: the durable record of every submitted task and its
 * latest state. reconcile_once and the status-event applier read and write
 * only through this vtable, so the same code runs over the in-memory
 * reference (tests) and the RocksDB ledger (production). Implementing a
 * ledger: altar/plugin/ledger.h.
 *
 * Records are keyed by (backend, external_id). Besides the contract's
 * record, each row keeps two pieces of metadata: the task key (spec identity,
 * used for group event ids and to supersede an older run of the same task)
 * and the group key it was filed under (the (kind, group key) → members
 * index, so evaluating a group never scans the ledger).
 *
 * Thread safety: a ledger is used by one thread at a time. */
#ifndef ALTAR_LEDGER_H
#define ALTAR_LEDGER_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/buf.h"
#include "altar/codec.h"
#include "altar/error.h"
#include "altar/strmap.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Optional metadata for record(). NULL fields mean absent. */
typedef struct altar_record_meta {
  const char *task_key;  /* spec identity hash; NULL if unknown */
  const char *group_key; /* group this shard belongs to; NULL = not grouped */
  int64_t restart_count; /* starting restart count of a fresh record (normally 0) */
  /* optional: the spec's encoding, when the caller has it (a status event's
   * spec_enc). Given (non-empty) with spec == NULL, it IS the record's spec
   * (a status event's spec kept as bytes only): the codec made it from a
   * valid spec, so the ledger stores it without decoding it. */
  const altar_spec_enc_t *spec_enc;
  /* optional: the record's "handle" and "kind" entries as the codec wrote
   * them (a status event's record_fixed), for this handle and kind. */
  const altar_record_fixed_t *fixed;
} altar_record_meta_t;

/* A record plus its metadata. */
typedef struct altar_ledger_entry {
  altar_record_t rec;
  char *task_key;  /* NULL if absent */
  char *group_key; /* NULL if absent */
} altar_ledger_entry_t;

void altar_ledger_entry_clear(altar_ledger_entry_t *e);

/* Called once per record, in (backend, external_id) order. The entry is
 * borrowed for the call. A non-zero return stops the walk and is returned. */
typedef int (*altar_ledger_visit_fn)(void *ctx, const altar_ledger_entry_t *e);

/* Called once per side key (see aux_put), in key order; key and value are
 * borrowed for the call. A non-zero return stops the scan and is returned. */
typedef int (*altar_ledger_aux_visit_fn)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen);

/* A ledger: opaque to its users; implementations see it through
 * altar/plugin/ledger.h. */
typedef struct altar_ledger altar_ledger_t;
/* An implementation's table of operations (altar/plugin/ledger.h). */
typedef struct altar_ledger_ops altar_ledger_ops_t;

/* What a ledger declares it can do (ops->caps). */
#define ALTAR_LEDGER_CAP_DURABLE 0x1u /* its records survive a process kill */
/* the aux_* side keyspace, written atomically with the records (the
 * reconciler daemon's outbox and offsets need it) */
#define ALTAR_LEDGER_CAP_SIDE_KEYS 0x2u
/* keys carry the status partition the scope names (altar_ledger_scope): a
 * partition's state is a fixed set of key ranges, importable on its own */
#define ALTAR_LEDGER_CAP_PARTITIONS 0x4u

/* The scope of the ledger's own state (no status partition), and the
 * largest partition a scope can name. */
#define ALTAR_LEDGER_SCOPE_NONE (-1)
#define ALTAR_LEDGER_SCOPE_MAX 65534

/* A ledger handle for an implementation: checks that ops has every required
 * operation (all but the aux ones) and that its caps match its operations
 * (ALTAR_EINVAL naming what is wrong, and ops->open is not called), refuses
 * a key of cfg that ops does not declare (ALTAR_ECONFIG "ledger.<key>:
 * unknown key for the <name> ledger", with a suggestion), copies the table
 * with the optional operations defaulted, and calls ops->open with cfg
 * (NULL = no keys). NULL with err set. Free with altar_ledger_close. */
altar_ledger_t *altar_ledger_open(const altar_ledger_ops_t *ops, const altar_strmap_t *cfg, altar_error_t *err);
/* ALTAR_LEDGER_CAP_* of l. */
unsigned altar_ledger_caps(const altar_ledger_t *l);

/* The status partition the next changes belong to (ALTAR_LEDGER_CAP_PARTITIONS;
 * elsewhere a no-op): a new record and every side key written, read or
 * deleted go under it, and a side-key scan visits it alone. An open record
 * stays under the partition it was created in, whatever the scope.
 * ALTAR_LEDGER_SCOPE_NONE (the default): point operations on the ledger's
 * own state; scans (aux_scan, foreach) visit every partition merged in key
 * order, as if the keys carried none. Returns the scope it replaces; a
 * partition outside [0, ALTAR_LEDGER_SCOPE_MAX] is taken as NONE. */
int32_t altar_ledger_scope(altar_ledger_t *l, int32_t partition);
int32_t altar_ledger_scope_get(const altar_ledger_t *l);
/* Inside an aux_scan visit: the partition of the key being visited
 * (ALTAR_LEDGER_SCOPE_NONE for the ledger's own state, or a ledger without
 * partitions). */
int32_t altar_ledger_visit_partition(const altar_ledger_t *l);

/* A ledger made of the contract's six operations and nothing more: what an
 * embedder (the Python package's TaskLedger subclasses) implements. Each
 * operation is called with ctx and the same arguments and ownership rules
 * as altar/plugin/ledger.h's (arrays returned are malloc'd and freed by the
 * caller with altar_handles_free / altar_records_free). Enough for
 * altar_reconcile_once; the fleet's extras (lookups, groups, transactions)
 * answer ALTAR_ENOTSUP, except begin/commit/abort, which do nothing: each
 * operation is the implementation's own unit of durability. */
typedef struct altar_contract_ledger {
  void *ctx;
  int (*record)(void *ctx, const altar_handle_t *h, const char *kind, const altar_spec_t *spec, altar_error_t *err);
  int (*open_handles)(void *ctx, altar_handle_t **phs, size_t *pn, altar_error_t *err);
  int (*set_state)(void *ctx, const altar_handle_t *h, altar_state_t state, const altar_failure_t *failure,
                   altar_error_t *err);
  int (*active_succeeded)(void *ctx, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*active_failed)(void *ctx, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*consume)(void *ctx, const altar_handle_t *hs, size_t n, altar_error_t *err);
} altar_contract_ledger_t;

/* A ledger handle over c (copied; every operation required, ALTAR_EINVAL
 * naming a missing one). NULL with err set. Free with altar_ledger_close,
 * which does not touch c->ctx. */
altar_ledger_t *altar_ledger_contract_open(const altar_contract_ledger_t *c, altar_error_t *err);

/* The in-process reference (it takes no configuration keys). NULL with err
 * set (err may be NULL) on allocation failure. Free with altar_ledger_close. */
altar_ledger_t *altar_ledger_memory_open(altar_error_t *err);

/* RocksDB ledger options; a zeroed struct takes the defaults. */
typedef struct altar_ledger_rocksdb_opts {
  bool sync;              /* fsync the WAL on every write (default off: a process
                            kill loses nothing, a power cut may lose the tail) */
  bool read_only;         /* open for inspection only */
  bool no_create;         /* fail when the directory holds no ledger */
  size_t write_buffer_mb; /* memtable size; 0 = 64, or 16 with no_wal */
  bool no_wal;            /* for a ledger built from scratch and used only once
                            complete (a rebuild): writes skip the write-ahead
                            log, so a crash loses the ledger, and
                            altar_ledger_rocksdb_persist makes it durable */
  bool write_behind;      /* with no_wal only: a commit hands its batch to a
                            writing thread and returns; reads wait for it, and
                            after a failed write every later commit, read and
                            persist fails (for a rebuild, which persists
                            before it counts) */
} altar_ledger_rocksdb_opts_t;

/* Opens (creating unless no_create) the RocksDB ledger in dir. opts may be
 * NULL. Returns NULL with err set. Free with altar_ledger_close. The same as
 * altar_ledger_open(&altar_ledger_rocksdb_ops, cfg, err) with cfg holding
 * "dir" and the options by their field names ("sync", "read_only",
 * "no_create", "no_wal", "write_behind": "true"/"false"; "write_buffer_mb":
 * a number). */
altar_ledger_t *altar_ledger_rocksdb_open(const char *dir, const altar_ledger_rocksdb_opts_t *opts, altar_error_t *err);

/* Writes every committed change of a RocksDB ledger to its table files and
 * waits: what a ledger opened with no_wal needs before it is swapped in. */
int altar_ledger_rocksdb_persist(altar_ledger_t *l, altar_error_t *err);

/* A RocksDB ledger's memory by RocksDB's accounting, in bytes: memtables
 * (bounded by write_buffer_mb, twice while one is flushed), the block cache
 * (64 MiB, of which `pinned` is held by readers or pinned index and filter
 * blocks) and table readers (beside the cache, per open table file). */
typedef struct altar_ledger_memory {
  uint64_t memtables, block_cache, block_cache_pinned, table_readers;
} altar_ledger_memory_t;
/* ALTAR_ENOTSUP (zeros) for a ledger of another kind. */
int altar_ledger_rocksdb_memory(altar_ledger_t *l, altar_ledger_memory_t *pout, altar_error_t *err);

/* Closes the ledger and frees it; NULL is a no-op. */
void altar_ledger_close(altar_ledger_t *l);

/* The operations (see altar/plugin/ledger.h for what each does): one call
 * through the handle's table. */
int altar_ledger_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                        altar_error_t *err);
int altar_ledger_record_meta(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                             const altar_record_meta_t *meta, altar_error_t *err);
int altar_ledger_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err);
int altar_ledger_set_state(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state,
                           const altar_failure_t *failure, altar_error_t *err);
int altar_ledger_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
int altar_ledger_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
int altar_ledger_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err);
int altar_ledger_restart(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err);
int altar_ledger_get(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                     altar_error_t *err);
/* Borrowed view of an open record, or NULL; valid until the next change.
 * rec.spec may be NULL in this view even when a spec is stored. */
const altar_ledger_entry_t *altar_ledger_peek_open(altar_ledger_t *l, const char *backend, const char *external_id);
/* Borrowed view of the open record filed under task_key, or NULL. */
const altar_ledger_entry_t *altar_ledger_peek_task(altar_ledger_t *l, const char *task_key);
/* Borrowed open members of group (kind, group_key), in (backend,
 * external_id) order; valid until the next change. *pmembers is NULL when
 * n is 0. */
int altar_ledger_group_members(altar_ledger_t *l, const char *kind, const char *group_key,
                               const altar_ledger_entry_t *const **pmembers, size_t *pn, altar_error_t *err);
/* How many open members of the group succeeded and failed, in constant time. */
int altar_ledger_group_counts(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded,
                              size_t *pfailed, altar_error_t *err);
int altar_ledger_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err);
int altar_ledger_begin(altar_ledger_t *l, altar_error_t *err);
int altar_ledger_commit(altar_ledger_t *l, altar_error_t *err);
int altar_ledger_abort(altar_ledger_t *l, altar_error_t *err);
int altar_ledger_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                         altar_error_t *err);
int altar_ledger_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err);
/* Appends the value to out; ALTAR_ENOTFOUND (err untouched) when absent. */
int altar_ledger_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err);
int altar_ledger_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                          altar_error_t *err);

/* Digest of the ledger's logical content: SHA-256 over every record (with
 * spec and metadata) in key order, as "sha256:<64 hex>". Equal ledgers give
 * equal digests whatever their history (compactions, batch sizes, backend). */
#define ALTAR_LEDGER_CHECKSUM_LEN 71
int altar_ledger_checksum(altar_ledger_t *l, char out[ALTAR_LEDGER_CHECKSUM_LEN + 1], altar_error_t *err);

/* Counts for `altar ledger stats`. */
typedef struct altar_ledger_stats {
  uint64_t records, consumed, open;
  uint64_t by_state[4]; /* indexed by altar_state_t, unconsumed records only */
} altar_ledger_stats_t;
int altar_ledger_stats(altar_ledger_t *l, altar_ledger_stats_t *pout, altar_error_t *err);

ALTAR_API_END

#endif
