"""The binding to libaltar: cffi in ABI mode, declaring only what this package calls.

The library is found, in order, at the path in ALTAR_LIBRARY, beside this
package (a copy installed with it), then by the dynamic linker's own search
("libaltar.so.0", as `cmake --install` leaves it). Nothing is compiled.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import cffi

CDEF = r"""
typedef struct altar_error { int code; _Bool retriable; char msg[512]; } altar_error_t;
const char *altar_err_name(int code);
const char *altar_strerror(int code);

typedef struct altar_strmap { size_t n; size_t cap; char **keys; char **vals; } altar_strmap_t;
int altar_strmap_set(altar_strmap_t *m, const char *key, const char *val);
altar_strmap_t *altar_strmap_new(void);
void altar_strmap_clear(altar_strmap_t *m);

typedef struct altar_opt_i64 { _Bool set; int64_t v; } altar_opt_i64_t;
typedef struct altar_resources { char *gpu; int64_t count; altar_opt_i64_t memory_mb; } altar_resources_t;

typedef struct altar_spec altar_spec_t;
altar_spec_t *altar_spec_new(const char *kind, const char *image);
void altar_spec_free(altar_spec_t *spec);
void altar_spec_clear(altar_spec_t *spec);
int altar_spec_add_avoid_host(altar_spec_t *spec, const char *host);
int altar_spec_validate(const altar_spec_t *spec, altar_error_t *err);
int altar_spec_from_json(const char *text, size_t len, altar_spec_t *pout, altar_error_t *err);
char *altar_spec_to_json(const altar_spec_t *spec, altar_error_t *err);
int altar_spec_identity(const altar_spec_t *spec, char out[65], altar_error_t *err);
int altar_spec_job_name(const altar_spec_t *spec, char out[64], altar_error_t *err);
int altar_group_event_id(const char *kind, const char *group_key, const char *const *task_keys,
                         size_t n, char out[65]);

typedef struct altar_buf { uint8_t *data; size_t len; size_t cap; } altar_buf_t;
void altar_buf_free(altar_buf_t *b);
int altar_encode_spec(const altar_spec_t *spec, altar_buf_t *out, altar_error_t *err);
int altar_decode_spec(const void *data, size_t len, altar_spec_t *pout, altar_error_t *err);

typedef struct altar_handle {
  char *backend; char *external_id; altar_strmap_t labels; altar_strmap_t *plugin_identity; void *block;
} altar_handle_t;
int altar_handle_init(altar_handle_t *h, const char *backend, const char *external_id);
void altar_handle_clear(altar_handle_t *h);
void altar_handles_free(altar_handle_t *hs, size_t n);

typedef struct altar_failure {
  char *reason; char *detail; _Bool deterministic; altar_opt_i64_t exit_code;
} altar_failure_t;
altar_failure_t *altar_failure_new(const char *reason, const char *detail, _Bool deterministic);
void altar_failure_free(altar_failure_t *f);

typedef struct altar_status { altar_handle_t handle; int state; altar_failure_t *failure; } altar_status_t;
int altar_status_init(altar_status_t *st, const altar_handle_t *h, int state, altar_failure_t *failure);
void altar_status_clear(altar_status_t *st);

typedef struct altar_capacity { size_t n; char **pools; int64_t *free_slots; } altar_capacity_t;
void altar_capacity_init(altar_capacity_t *c);
void altar_capacity_clear(altar_capacity_t *c);
int altar_capacity_set(altar_capacity_t *c, const char *pool, int64_t free_slots);
int64_t altar_capacity_free_for(const altar_capacity_t *c, const altar_resources_t *r);

typedef struct altar_transfer { char *uri; char *logical_path; char *locality_key; char *digest; } altar_transfer_t;
int altar_verify_transfer_digest(const altar_transfer_t *transfer, const char *path, _Bool record, altar_error_t *err);
_Bool altar_digest_is_valid(const char *digest);
int altar_digest_check(const char *field, const char *digest, altar_error_t *err);
int altar_sha256_file(const char *path, char out[72], altar_error_t *err);
_Bool altar_has_verification_record(const char *path, const char *digest);
int altar_verify_file_digest(const char *path, const char *digest, _Bool trust_record, _Bool record,
                             _Bool *phashed, altar_error_t *err);
const char *altar_digest_verifier_program(_Bool trust_records);
char *altar_verification_record_path(const char *path);

int altar_path_resolve(const char *root, const char *logical, char **pout, altar_error_t *err);
int altar_logical_path_check(const char *logical, altar_error_t *err);

typedef struct altar_backend_ops altar_backend_ops_t;
typedef struct altar_backend altar_backend_t;
extern altar_backend_ops_t altar_backend_process_ops;
extern altar_backend_ops_t altar_backend_docker_ops;
extern altar_backend_ops_t altar_backend_kubernetes_ops;
extern altar_backend_ops_t altar_backend_modal_ops;
int altar_backend_register(const altar_backend_ops_t *ops);
int altar_backend_register_alias(const char *alias, const altar_backend_ops_t *ops);
size_t altar_backend_names(const char **names, size_t max);
altar_backend_t *altar_backend_open_by_name(const char *name, const altar_strmap_t *cfg, altar_error_t *err);
void altar_backend_close(altar_backend_t *be);
const char *altar_backend_name(const altar_backend_t *be);
int altar_backend_verification(const altar_backend_t *be);
unsigned altar_backend_caps(const altar_backend_t *be);
const char *altar_backend_cap_name(unsigned cap);
int altar_backend_require(const altar_backend_t *be, unsigned caps, const char *needed_for, altar_error_t *err);
int altar_backend_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err);
int altar_backend_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
int altar_backend_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err);
const char *altar_backend_mount_root(altar_backend_t *be);
int altar_backend_resolve_path(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err);
int altar_backend_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err);
int altar_backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                       altar_error_t *err);
int altar_backend_await_completion(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                                   altar_status_t *pstatuses, altar_error_t *err);
int altar_backend_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);
int altar_backend_recover(altar_backend_t *be, const altar_status_t *failures, size_t n,
                          const char *const *banned, size_t n_banned, altar_handle_t **phandles,
                          size_t *pn, altar_error_t *err);

typedef struct altar_transport_ops altar_transport_ops_t;
extern altar_transport_ops_t altar_transport_local_ops;
extern altar_transport_ops_t altar_transport_kafka_ops;
int altar_transport_register(const altar_transport_ops_t *ops);
int altar_storage_register_builtin(void);
size_t altar_registry_names(int kind, const char **names, size_t max);

typedef struct altar_fleet_client altar_fleet_client_t;
typedef struct altar_group_reader altar_group_reader_t;
altar_fleet_client_t *altar_fleet_client_open(const char *config_path, const char *const *overrides, size_t n,
                                              altar_error_t *err);
void altar_fleet_client_close(altar_fleet_client_t *c);
int altar_fleet_client_submit_json(altar_fleet_client_t *c, const char *kind, const char *text, size_t len,
                                   char job_id[65], altar_error_t *err);
int altar_fleet_client_cancel(altar_fleet_client_t *c, const char *job_id, const char *group_key, altar_error_t *err);
altar_group_reader_t *altar_group_reader_open(altar_fleet_client_t *c, const char *job_id, altar_error_t *err);
void altar_group_reader_close(altar_group_reader_t *r);
int altar_group_reader_next(altar_group_reader_t *r, int timeout_ms, char **pjson, altar_error_t *err);
int altar_group_reader_caught_up(altar_group_reader_t *r, _Bool *pdone, altar_error_t *err);
const char *altar_fleet_client_ledger_path(const altar_fleet_client_t *c);

typedef struct altar_record {
  altar_handle_t handle; char *kind; int state; int64_t restart_count; altar_spec_t *spec; _Bool consumed;
  altar_failure_t *failure;
} altar_record_t;
void altar_records_free(altar_record_t *recs, size_t n);
void altar_statuses_free(altar_status_t *sts, size_t n);

typedef struct altar_ledger altar_ledger_t;
altar_ledger_t *altar_ledger_memory_open(altar_error_t *err);
typedef struct altar_ledger_rocksdb_opts {
  _Bool sync; _Bool read_only; _Bool no_create; size_t write_buffer_mb; _Bool no_wal; _Bool write_behind;
} altar_ledger_rocksdb_opts_t;
altar_ledger_t *altar_ledger_rocksdb_open(const char *dir, const altar_ledger_rocksdb_opts_t *opts, altar_error_t *err);
typedef struct altar_ledger_entry { altar_record_t rec; char *task_key; char *group_key; } altar_ledger_entry_t;
typedef int (*altar_ledger_visit_fn)(void *ctx, const altar_ledger_entry_t *e);
int altar_ledger_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err);
void altar_ledger_close(altar_ledger_t *l);
typedef struct altar_contract_ledger {
  void *ctx;
  int (*record)(void *ctx, const altar_handle_t *h, const char *kind, const altar_spec_t *spec, altar_error_t *err);
  int (*open_handles)(void *ctx, altar_handle_t **phs, size_t *pn, altar_error_t *err);
  int (*set_state)(void *ctx, const altar_handle_t *h, int state, const altar_failure_t *failure, altar_error_t *err);
  int (*active_succeeded)(void *ctx, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*active_failed)(void *ctx, altar_record_t **precs, size_t *pn, altar_error_t *err);
  int (*consume)(void *ctx, const altar_handle_t *hs, size_t n, altar_error_t *err);
} altar_contract_ledger_t;
altar_ledger_t *altar_ledger_contract_open(const altar_contract_ledger_t *c, altar_error_t *err);
int altar_record_init(altar_record_t *rec, const altar_handle_t *h, const char *kind, const altar_spec_t *spec);
int altar_ledger_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                        altar_error_t *err);
int altar_ledger_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err);
int altar_ledger_set_state(altar_ledger_t *l, const altar_handle_t *h, int state, const altar_failure_t *failure,
                           altar_error_t *err);
int altar_ledger_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
int altar_ledger_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err);
int altar_ledger_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err);
int altar_ledger_checksum(altar_ledger_t *l, char out[72], altar_error_t *err);

typedef int (*altar_ready_fn)(void *ctx, const altar_handle_t *const *shards, size_t n, _Bool *pready,
                              altar_error_t *err);
typedef struct altar_predicate {
  int rule; int64_t n; char *label; char **values; size_t n_values; char *count_label;
  altar_opt_i64_t default_count; altar_ready_fn fn; void *fn_ctx;
} altar_predicate_t;
int altar_predicate_single(altar_predicate_t *p);
int altar_predicate_count_at_least(altar_predicate_t *p, int64_t n, altar_error_t *err);
int altar_predicate_all_folds(altar_predicate_t *p, int64_t n, altar_error_t *err);
int altar_predicate_all_label_values(altar_predicate_t *p, const char *label, const char *const *values, size_t n,
                                     altar_error_t *err);
int altar_predicate_all_expected_folds(altar_predicate_t *p, const char *label, const char *count_label,
                                       const int64_t *default_count, altar_error_t *err);
int altar_predicate_custom(altar_predicate_t *p, altar_ready_fn fn, void *ctx);
void altar_predicate_clear(altar_predicate_t *p);
int altar_predicate_eval(const altar_predicate_t *p, const altar_handle_t *const *shards, size_t n, _Bool *pready,
                         altar_error_t *err);

typedef struct altar_group_by { char **labels; size_t n; } altar_group_by_t;
int altar_group_by_init(altar_group_by_t *g, const char *const *labels, size_t n);
void altar_group_by_clear(altar_group_by_t *g);
char *altar_group_by_key(const altar_group_by_t *g, const altar_handle_t *h);

typedef int (*altar_on_ready_fn)(void *ctx, const char *kind, const char *group_key, const altar_handle_t *shards,
                                 size_t n, altar_error_t *err);
typedef int (*altar_on_failed_fn)(void *ctx, const char *kind, const char *group_key, const altar_handle_t *failed,
                                  size_t n, _Bool *pdead_lettered, altar_error_t *err);
typedef struct altar_retry_backoff { double initial_s; double factor; double max_s; double jitter; } altar_retry_backoff_t;
typedef struct altar_group_spec {
  char *kind; altar_group_by_t group_by; altar_predicate_t ready_when;
  altar_on_ready_fn on_ready; void *on_ready_ctx; altar_on_failed_fn on_failed; void *on_failed_ctx;
  int failed_policy; int64_t max_restarts; altar_retry_backoff_t retry_backoff;
  char *ready_topic; char *dead_topic; int config_line;
  struct altar_followup *then; struct altar_followup *then_dead; _Bool event_outputs;
  int64_t attempts_keep; int64_t max_width;
} altar_group_spec_t;
typedef struct altar_group_specs { altar_group_spec_t *v; size_t n; } altar_group_specs_t;
int altar_group_specs_add(altar_group_specs_t *s, altar_group_spec_t *g, altar_error_t *err);
void altar_group_specs_clear(altar_group_specs_t *s);

typedef struct altar_strlist { char **v; size_t n, cap; } altar_strlist_t;
void altar_strlist_clear(altar_strlist_t *l);
typedef int (*altar_poll_fn)(void *ctx, const altar_handle_t *hs, size_t n, altar_status_t **pout, size_t *pn,
                             altar_error_t *err);
typedef struct altar_poller { altar_poll_fn poll; void *ctx; } altar_poller_t;
typedef struct altar_reconcile_result {
  size_t polled; size_t succeeded; size_t failed;
  altar_strlist_t fired_groups; altar_strlist_t dead_lettered_groups; altar_strlist_t deferred_groups;
  altar_strlist_t stalled_groups;
} altar_reconcile_result_t;
void altar_reconcile_result_clear(altar_reconcile_result_t *r);
typedef struct altar_reconcile_opts { size_t max_concurrent_callbacks; } altar_reconcile_opts_t;
int altar_reconcile_once(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                         const altar_reconcile_opts_t *opts, altar_reconcile_result_t *pres, altar_error_t *err);
typedef struct altar_reconcile_loop_opts {
  double interval_s; uint64_t max_ticks; _Bool stop_when_idle; size_t max_concurrent_callbacks;
} altar_reconcile_loop_opts_t;
int altar_run_reconcile_loop(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                             const altar_reconcile_loop_opts_t *opts, altar_reconcile_result_t **presults,
                             size_t *pn, altar_strlist_t *pstalled, altar_error_t *err);
void altar_reconcile_results_free(altar_reconcile_result_t *rs, size_t n);

typedef struct altar_storage altar_storage_t;
typedef struct altar_local_file { char *path; void (*release)(struct altar_local_file *lf); } altar_local_file_t;
typedef struct altar_csv { char **fields; size_t n_fields; altar_strmap_t *rows; size_t n_rows; } altar_csv_t;
void altar_csv_clear(altar_csv_t *c);
int altar_storage_open(const char *name, const altar_strmap_t *options, altar_storage_t **ps, altar_error_t *err);
void altar_storage_close(altar_storage_t *s);
const char *altar_storage_name(const altar_storage_t *s);
int altar_storage_read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err);
int altar_storage_exists(altar_storage_t *s, const char *path, _Bool *pexists, altar_error_t *err);
int altar_storage_read_text(altar_storage_t *s, const char *path, char **ptext, size_t *plen, altar_error_t *err);
int altar_storage_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err);
int altar_storage_write_text(altar_storage_t *s, const char *path, const char *text, altar_error_t *err);
int altar_storage_mkdirs(altar_storage_t *s, const char *path, altar_error_t *err);
int altar_storage_upload(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err);
int altar_storage_copy_from_local(altar_storage_t *s, const char *local_path, const char *dest_path,
                                  altar_error_t *err);
int altar_storage_as_local_file(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err);
void altar_local_file_release(altar_local_file_t *lf);
int altar_storage_read_csv(altar_storage_t *s, const char *path, char delim, const char *const *fieldnames,
                           size_t n_fieldnames, altar_csv_t *out, altar_error_t *err);
int altar_storage_write_csv(altar_storage_t *s, const char *path, const altar_strmap_t *rows, size_t n_rows,
                            char delim, const char *const *fieldnames, size_t n_fieldnames, altar_error_t *err);

void *calloc(size_t n, size_t size);
char *strdup(const char *s);
void free(void *ptr);
"""

# Typed as Any: cdata fields follow CDEF, which a type checker cannot read.
ffi: Any = cffi.FFI()
ffi.cdef(CDEF)

_lock = threading.Lock()
_lib: Any = None


def _candidates() -> list[str]:
    env = os.environ.get("ALTAR_LIBRARY")
    if env:
        return [env]
    here = Path(__file__).resolve().parent
    out = [str(here / "libaltar.so")]
    out.append("libaltar.so.0")
    return out


def lib() -> Any:
    """The loaded library, with altar's built-in plug-ins registered (once per process)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        loaded = None
        for path in _candidates():
            if "/" in path and not os.path.exists(path):
                errors.append(f"{path}: no such file")
                continue
            try:
                loaded = ffi.dlopen(path)
                break
            except OSError as e:
                errors.append(str(e))
        if loaded is None:
            raise ImportError(
                "altar: cannot load libaltar (set ALTAR_LIBRARY to the path of libaltar.so): "
                + "; ".join(errors)
            )
        _register_builtins(loaded)
        _lib = loaded
        return _lib


def _register_builtins(L: Any) -> None:
    # What cli/plugins.c does for the altar binary: the same names, the same tables.
    for name in ("altar_backend_process_ops", "altar_backend_docker_ops", "altar_backend_kubernetes_ops",
                 "altar_backend_modal_ops"):
        L.altar_backend_register(ffi.addressof(L, name))
    L.altar_backend_register_alias(b"docker", ffi.addressof(L, "altar_backend_docker_ops"))
    L.altar_transport_register(ffi.addressof(L, "altar_transport_kafka_ops"))
    L.altar_transport_register(ffi.addressof(L, "altar_transport_local_ops"))
    L.altar_storage_register_builtin()


def s(p: Any) -> str | None:
    """A C string as str (NULL → None)."""
    if p == ffi.NULL:
        return None
    return str(ffi.string(p).decode("utf-8"))


def b(text: str | None) -> Any:
    """str → bytes for a const char * argument (None → NULL)."""
    if text is None:
        return ffi.NULL
    return text.encode("utf-8")


def take_string(p: Any) -> str | None:
    """A malloc'd C string as str, freeing it."""
    if p == ffi.NULL:
        return None
    try:
        return s(p)
    finally:
        lib().free(p)
