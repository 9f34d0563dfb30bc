/* altar — implementing a task ledger: what a plug-in needs beyond the user's
 * altar/ledger.h: the table of operations, the handle, and the built-in
 * tables. */
#ifndef ALTAR_PLUGIN_LEDGER_H
#define ALTAR_PLUGIN_LEDGER_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/ledger.h"
#include "altar/plugin_keys.h"

struct altar_ledger_ops {
  const char *name;
  unsigned caps; /* ALTAR_LEDGER_CAP_* (altar/ledger.h) */
  /* The keys open reads, ended by ALTAR_PLUGIN_KEYS_END; altar_ledger_open
   * refuses any other before open runs (altar/plugin_keys.h). NULL: keys
   * are left to open. */
  const altar_plugin_key_t *config_keys;

  /* Builds the private state and stores it with altar_ledger_set_impl(l,
   * impl). cfg NULL = no keys. On failure it leaves nothing to free (close
   * is not called). */
  int (*open)(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err);
  /* Frees altar_ledger_impl(l). */
  void (*close)(altar_ledger_t *l);

  /* The contract's six operations. Arrays returned through p* out-params are
   * malloc'd, sorted by (backend, external_id), and freed by the caller with
   * altar_handles_free / altar_records_free. */

  /* Persist a freshly submitted task. A no-op while a record with this
   * (backend, external_id) is open (not consumed); re-opens a consumed one,
   * resetting state, restart count, failure, spec and metadata. meta may be NULL. */
  int (*record)(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                const altar_record_meta_t *meta, altar_error_t *err);
  /* Pending or running, not consumed: the handles to poll. */
  int (*open_handles)(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err);
  /* Latest observed state, and the failure when FAILED (copied; ignored
   * otherwise). ALTAR_ENOTFOUND when no record has this handle. */
  int (*set_state)(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state, const altar_failure_t *failure,
                   altar_error_t *err);
  /* Succeeded / failed records that are not consumed (with their specs). */
  int (*active_succeeded)(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*active_failed)(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
  /* Marks handles consumed. Unknown handles are skipped; all-or-nothing. */
  int (*consume)(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err);

  /* Extensions. */

  /* Puts a failed, open record back to PENDING for another run: failure
   * cleared, restart_count + 1. ALTAR_ESTATE unless it is open and FAILED. */
  int (*restart)(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err);
  /* Copies one record (consumed or not) into *pout (caller clears with
   * altar_ledger_entry_clear). ALTAR_ENOTFOUND if absent. */
  int (*get)(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
             altar_error_t *err);
  /* Borrowed view of an open record, or NULL; valid until the next change.
   * rec.spec may be NULL in this view even when a spec is stored. */
  const altar_ledger_entry_t *(*peek_open)(altar_ledger_t *l, const char *backend, const char *external_id);
  /* Borrowed view of the open record filed under task_key, or NULL. */
  const altar_ledger_entry_t *(*peek_task)(altar_ledger_t *l, const char *task_key);
  /* Borrowed open members of group (kind, group_key), in (backend,
   * external_id) order; valid until the next change. Work is proportional to
   * the group's size. *pmembers is NULL when n is 0. */
  int (*group_members)(altar_ledger_t *l, const char *kind, const char *group_key,
                       const altar_ledger_entry_t *const **pmembers, size_t *pn, altar_error_t *err);
  /* How many open members of the group succeeded and failed, in constant
   * time, so deciding a group after each event does not cost the group's
   * size. */
  int (*group_counts)(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded, size_t *pfailed,
                      altar_error_t *err);
  /* Every record, consumed or not, in (backend, external_id) order, with
   * specs. The RocksDB ledger walks what is committed, not an open batch. */
  int (*foreach)(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err);

  /* Batching: between begin and commit every change goes into one atomic
   * write (RocksDB: one WriteBatch), readable by later calls in the same batch.
   * Outside a batch each call is its own atomic write. abort drops every
   * change of the batch, records and side keys alike. */
  int (*begin)(altar_ledger_t *l, altar_error_t *err);
  int (*commit)(altar_ledger_t *l, altar_error_t *err);
  int (*abort)(altar_ledger_t *l, altar_error_t *err);

  /* The side keyspace: keys the ledger's users keep beside the records (the
   * reconciler's outbox, input offsets, settled groups, retry times), so
   * that they commit in the same atomic write as the records they go with.
   * Keys and values are opaque bytes; checksums, foreach and stats ignore
   * them. Inside a batch put and del join it and get reads them back; scan
   * visits what is committed, in bytewise key order. Optional, all four or
   * none, with ALTAR_LEDGER_CAP_SIDE_KEYS declared exactly when they are
   * there: a ledger without them answers ALTAR_ENOTSUP (and cannot run the
   * daemon). */
  int (*aux_put)(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen, altar_error_t *err);
  int (*aux_del)(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err);
  /* Appends the value to out; ALTAR_ENOTFOUND (err untouched) when absent. */
  int (*aux_get)(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err);
  /* Visits every key starting with prefix. */
  int (*aux_scan)(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                  altar_error_t *err);
};

/* The handle. ops is the implementation's table with every optional
 * operation filled with its default, once, at open; callers never test an
 * operation for NULL. */
struct altar_ledger {
  altar_ledger_ops_t ops;
  const altar_ledger_ops_t *table; /* the table as given (identity) */
  void *impl;
  int32_t scope;      /* altar_ledger_scope: NONE unless caps has PARTITIONS */
  int32_t visit_part; /* set by an implementation's aux_scan for each visit */
};

static inline void *altar_ledger_impl(const altar_ledger_t *l) { return l->impl; }
static inline void altar_ledger_set_impl(altar_ledger_t *l, void *impl) { l->impl = impl; }

/* The built-in implementations, for altar_ledger_open. */
extern const altar_ledger_ops_t altar_ledger_memory_ops;
extern const altar_ledger_ops_t altar_ledger_rocksdb_ops;

ALTAR_API_END

#endif
