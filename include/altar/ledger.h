/* altar — TaskLedger: the durable record of every submitted task and its
 * latest state. reconcile_once and the status-event applier read and write
 * only through this vtable, so the same code runs over the in-memory
 * reference (tests) and the RocksDB ledger (production).
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

typedef struct altar_ledger_ops {
  const char *name;
  bool durable; /* survives a process kill */

  /* The contract's six operations. Arrays returned through p* out-params are
   * malloc'd, sorted by (backend, external_id), and freed by the caller with
   * altar_handles_free / altar_records_free. */

  /* Persist a freshly submitted task. A no-op while a record with this
   * (backend, external_id) is open (not consumed); re-opens a consumed one,
   * resetting state, restart count, failure, spec and metadata. meta may be NULL. */
  int (*record)(void *impl, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                const altar_record_meta_t *meta, altar_error_t *err);
  /* Pending or running, not consumed: the handles to poll. */
  int (*open_handles)(void *impl, altar_handle_t **phs, size_t *pn, altar_error_t *err);
  /* Latest observed state, and the failure when FAILED (copied; ignored
   * otherwise). ALTAR_ENOTFOUND when no record has this handle. */
  int (*set_state)(void *impl, const altar_handle_t *h, altar_state_t state,
                   const altar_failure_t *failure, altar_error_t *err);
  /* Succeeded / failed records that are not consumed (with their specs). */
  int (*active_succeeded)(void *impl, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*active_failed)(void *impl, altar_record_t **precs, size_t *pn, altar_error_t *err);
  /* Marks handles consumed. Unknown handles are skipped; all-or-nothing. */
  int (*consume)(void *impl, const altar_handle_t *hs, size_t n, altar_error_t *err);

  /* Extensions. */

  /* Puts a failed, open record back to PENDING for another run: failure
   * cleared, restart_count + 1. ALTAR_ESTATE unless it is open and FAILED. */
  int (*restart)(void *impl, const altar_handle_t *h, altar_error_t *err);
  /* Copies one record (consumed or not) into *pout (caller clears with
   * altar_ledger_entry_clear). ALTAR_ENOTFOUND if absent. */
  int (*get)(void *impl, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
             altar_error_t *err);
  /* Borrowed view of an open record, or NULL; valid until the next change.
   * rec.spec may be NULL in this view even when a spec is stored. */
  const altar_ledger_entry_t *(*peek_open)(void *impl, const char *backend, const char *external_id);
  /* Borrowed view of the open record filed under task_key, or NULL. */
  const altar_ledger_entry_t *(*peek_task)(void *impl, const char *task_key);
  /* Borrowed open members of group (kind, group_key), in (backend,
   * external_id) order; valid until the next change. Work is proportional to
   * the group's size. *pmembers is NULL when n is 0. */
  int (*group_members)(void *impl, const char *kind, const char *group_key,
                       const altar_ledger_entry_t *const **pmembers, size_t *pn, altar_error_t *err);
  /* How many open members of the group succeeded and failed, in constant
   * time, so deciding a group after each event does not cost the group's
   * size. */
  int (*group_counts)(void *impl, const char *kind, const char *group_key, size_t *psucceeded, size_t *pfailed,
                      altar_error_t *err);
  /* Every record, consumed or not, in (backend, external_id) order, with
   * specs. The RocksDB ledger walks what is committed, not an open batch. */
  int (*foreach)(void *impl, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err);

  /* Batching: between begin and commit every change goes into one atomic
   * write (RocksDB: one WriteBatch), readable by later calls in the same batch.
   * Outside a batch each call is its own atomic write. abort drops every
   * change of the batch, records and side keys alike. */
  int (*begin)(void *impl, altar_error_t *err);
  int (*commit)(void *impl, altar_error_t *err);
  int (*abort)(void *impl, altar_error_t *err);

  /* The side keyspace: keys the ledger's users keep beside the records (the
   * reconciler's outbox, input offsets, settled groups, retry times), so
   * that they commit in the same atomic write as the records they go with.
   * Keys and values are opaque bytes; checksums, foreach and stats ignore
   * them. Inside a batch put and del join it and get reads them back; scan
   * visits what is committed, in bytewise key order. Optional, all four or
   * none: a ledger without them answers ALTAR_ENOTSUP (and cannot run the
   * daemon). */
  int (*aux_put)(void *impl, const void *key, size_t klen, const void *val, size_t vlen, altar_error_t *err);
  int (*aux_del)(void *impl, const void *key, size_t klen, altar_error_t *err);
  /* Appends the value to out; ALTAR_ENOTFOUND (err untouched) when absent. */
  int (*aux_get)(void *impl, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err);
  /* Visits every key starting with prefix. */
  int (*aux_scan)(void *impl, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                  altar_error_t *err);

  void (*close)(void *impl);
} altar_ledger_ops_t;

/* A ledger. ops points at the handle's own copy of the implementation's
 * table, with every optional operation filled in, so callers never test for
 * NULL. */
typedef struct altar_ledger {
  const altar_ledger_ops_t *ops;
  void *impl;
  altar_ledger_ops_t ops_; /* what ops points at; set by altar_ledger_wrap */
} altar_ledger_t;

/* A ledger handle for an implementation: checks that ops has every required
 * operation (all but the aux ones), copies it with the optional ones
 * defaulted, and takes impl. NULL with err set (ALTAR_EINVAL
 * naming the missing operation, or ALTAR_ENOMEM), in which case ops->close
 * has been called on impl. Free with altar_ledger_close. */
altar_ledger_t *altar_ledger_wrap(const altar_ledger_ops_t *ops, void *impl, altar_error_t *err);

/* The in-process reference. NULL on allocation failure. Free with altar_ledger_close. */
altar_ledger_t *altar_ledger_memory_new(void);

/* RocksDB ledger options; a zeroed struct takes the defaults. */
typedef struct altar_ledger_rocksdb_opts {
  bool sync;             /* fsync the WAL on every write (default off: a process
                            kill loses nothing, a power cut may lose the tail) */
  bool read_only;        /* open for inspection only */
  bool no_create;        /* fail when the directory holds no ledger */
  size_t write_buffer_mb; /* memtable size; 0 = 64, or 16 with no_wal */
  bool no_wal;           /* for a ledger built from scratch and used only once
                            complete (a rebuild): writes skip the write-ahead
                            log, so a crash loses the ledger, and
                            altar_ledger_rocksdb_persist makes it durable */
  bool write_behind;     /* with no_wal only: a commit hands its batch to a
                            writing thread and returns; reads wait for it, and
                            after a failed write every later commit, read and
                            persist fails (for a rebuild, which persists
                            before it counts) */
} altar_ledger_rocksdb_opts_t;

/* Opens (creating unless no_create) the RocksDB ledger in dir. opts may be
 * NULL. Returns NULL with err set. Free with altar_ledger_close. */
altar_ledger_t *altar_ledger_rocksdb_open(const char *dir, const altar_ledger_rocksdb_opts_t *opts,
                                          altar_error_t *err);

/* Writes every committed change of a RocksDB ledger to its table files and
 * waits: what a ledger opened with no_wal needs before it is swapped in. */
int altar_ledger_rocksdb_persist(altar_ledger_t *l, altar_error_t *err);

/* Closes the ledger and frees it; NULL is a no-op. */
void altar_ledger_close(altar_ledger_t *l);

/* Thin wrappers, so callers read like the contract. */
static inline int altar_ledger_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind,
                                      const altar_spec_t *spec, altar_error_t *err) {
  return l->ops->record(l->impl, h, kind, spec, NULL, err);
}
static inline int altar_ledger_record_meta(altar_ledger_t *l, const altar_handle_t *h,
                                           const char *kind, const altar_spec_t *spec,
                                           const altar_record_meta_t *meta, altar_error_t *err) {
  return l->ops->record(l->impl, h, kind, spec, meta, err);
}
static inline int altar_ledger_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn,
                                            altar_error_t *err) {
  return l->ops->open_handles(l->impl, phs, pn, err);
}
static inline int altar_ledger_set_state(altar_ledger_t *l, const altar_handle_t *h,
                                         altar_state_t state, const altar_failure_t *failure,
                                         altar_error_t *err) {
  return l->ops->set_state(l->impl, h, state, failure, err);
}
static inline int altar_ledger_active_succeeded(altar_ledger_t *l, altar_record_t **precs,
                                                size_t *pn, altar_error_t *err) {
  return l->ops->active_succeeded(l->impl, precs, pn, err);
}
static inline int altar_ledger_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn,
                                             altar_error_t *err) {
  return l->ops->active_failed(l->impl, precs, pn, err);
}
static inline int altar_ledger_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n,
                                       altar_error_t *err) {
  return l->ops->consume(l->impl, hs, n, err);
}
static inline int altar_ledger_restart(altar_ledger_t *l, const altar_handle_t *h,
                                       altar_error_t *err) {
  return l->ops->restart(l->impl, h, err);
}
static inline int altar_ledger_get(altar_ledger_t *l, const char *backend, const char *external_id,
                                   altar_ledger_entry_t *pout, altar_error_t *err) {
  return l->ops->get(l->impl, backend, external_id, pout, err);
}
static inline int altar_ledger_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx,
                                       altar_error_t *err) {
  return l->ops->foreach(l->impl, fn, ctx, err);
}
static inline int altar_ledger_begin(altar_ledger_t *l, altar_error_t *err) {
  return l->ops->begin(l->impl, err);
}
static inline int altar_ledger_commit(altar_ledger_t *l, altar_error_t *err) {
  return l->ops->commit(l->impl, err);
}
static inline int altar_ledger_abort(altar_ledger_t *l, altar_error_t *err) {
  return l->ops->abort(l->impl, err);
}
static inline int altar_ledger_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val,
                                       size_t vlen, altar_error_t *err) {
  return l->ops->aux_put(l->impl, key, klen, val, vlen, err);
}
static inline int altar_ledger_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  return l->ops->aux_del(l->impl, key, klen, err);
}
static inline int altar_ledger_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out,
                                       altar_error_t *err) {
  return l->ops->aux_get(l->impl, key, klen, out, err);
}
static inline int altar_ledger_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen,
                                        altar_ledger_aux_visit_fn fn, void *ctx, altar_error_t *err) {
  return l->ops->aux_scan(l->impl, prefix, plen, fn, ctx, err);
}

/* Digest of the ledger's logical content: SHA-256 over every record (with
 * spec and metadata) in key order, as "sha256:<64 hex>". Equal ledgers give
 * equal digests whatever their history (compactions, batch sizes, backend). */
#define ALTAR_LEDGER_CHECKSUM_LEN 71
int altar_ledger_checksum(altar_ledger_t *l, char out[ALTAR_LEDGER_CHECKSUM_LEN + 1],
                          altar_error_t *err);

/* Counts for `altar ledger stats`. */
typedef struct altar_ledger_stats {
  uint64_t records, consumed, open;
  uint64_t by_state[4]; /* indexed by altar_state_t, unconsumed records only */
} altar_ledger_stats_t;
int altar_ledger_stats(altar_ledger_t *l, altar_ledger_stats_t *pout, altar_error_t *err);

ALTAR_API_END

#endif
