/* altar — ExecutionBackend: runs a ContainerTaskSpec to completion and reports
 * its state. One const vtable per backend (designated initializers), an opaque
 * impl, the contract's defaults for every optional operation in ONE place
 * (core/backend.c), and static inline wrappers that callers go through.
 *
 * Required: name, input_digest_verification (staging or task), create,
 * submit, poll, destroy. Everything else may be NULL and then behaves as the
 * contract's default:
 *   capacity         → empty report (no fixed slots)
 *   check_resources  → accept anything
 *   stage_inputs     → nothing to do
 *   collect_outputs  → nothing to do
 *   mount_root       → "" (identity resolver)
 *   resolve_path     → altar_path_resolve(mount_root, logical)
 *   await_completion → ALTAR_ENOTSUP
 *   wait_change      → ALTAR_ENOTSUP (the caller polls on its own clock)
 *   cancel           → no-op (a missing task counts as cancelled)
 *   recover          → no-op returning no handles
 *
 * Threads: a backend object is used by one thread at a time unless its own
 * documentation says more. Calls never block for a task's completion, except
 * await_completion and wait_change (bounded). */
#ifndef ALTAR_BACKEND_H
#define ALTAR_BACKEND_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/spec.h"
#include "altar/strmap.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stddef.h>

/* Where a backend checks an input's Transfer.digest. */
typedef enum altar_verification {
  ALTAR_VERIFY_NONE = 0,    /* not verified: the contract suite rejects this */
  ALTAR_VERIFY_STAGING = 1, /* stage_inputs fails with ALTAR_EINTEGRITY before any submit */
  ALTAR_VERIFY_TASK = 2,    /* the task checks its inputs and fails "input_digest_mismatch" */
} altar_verification_t;

/* "none" | "staging" | "task" ("?" for other values). */
const char *altar_verification_name(altar_verification_t v);

typedef struct altar_backend altar_backend_t;
typedef struct altar_backend_ops altar_backend_ops_t;

/* A backend instance: its vtable, its private state, and nothing else.
 * Made by altar_backend_create / altar_backend_create_by_name /
 * altar_backend_wrap; freed by altar_backend_destroy. */
struct altar_backend {
  const altar_backend_ops_t *ops;
  void *impl;
};

struct altar_backend_ops {
  /* Registry key and TaskHandle.backend value ("process", "local", …). */
  const char *name;
  /* Declared, never probed: where input digests are verified. */
  altar_verification_t input_digest_verification;

  /* Constructor of impl from configuration keys (cfg may be NULL = no keys;
   * unknown keys are an error naming the key). Returns the new impl, never
   * NULL on success; on failure NULL with a message in errstr. The backend's
   * destroy frees the impl. */
  void *(*create)(const altar_strmap_t *cfg, char *errstr, size_t errstr_size);
  /* The keys create reads, NULL-terminated ("name" is always allowed).
   * altar_backend_create and the config reader refuse any other key with a
   * suggestion (the reader with its file and line), so a typo never falls
   * back to a default. NULL: keys are left to create. */
  const char *const *config_keys;
  /* Frees impl and everything the backend owns (not be itself). Tasks that
   * already run keep running where the platform allows. */
  void (*destroy)(altar_backend_t *be);

  /* Free slots per pool into *pcap (initialised empty by the wrapper; the
   * caller clears it with altar_capacity_clear). Optional. */
  int (*capacity)(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err);
  /* Whether this backend can serve r at all (e.g. a GPU pool it has). Returns
   * 0, or ALTAR_EINVAL with err naming "resources.gpu" etc. Optional. */
  int (*check_resources)(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err);

  /* Make each input readable at its logical path before the task runs. A
   * "staging" backend verifies digests here: a mismatch deletes the bad copy
   * and returns ALTAR_EINTEGRITY with err naming the input
   * ("inputs[i] (<logical_path>): …"). Optional. */
  int (*stage_inputs)(altar_backend_t *be, const altar_transfer_t *inputs, size_t n,
                      altar_error_t *err);
  /* Save each output's logical path to its uri after the task succeeded. Optional. */
  int (*collect_outputs)(altar_backend_t *be, const altar_transfer_t *outputs, size_t n,
                         altar_error_t *err);

  /* PathResolver: the root under which the task sees the logical layout
   * ("/mnt/volume", a data root; "" = identity). The string is owned by the
   * backend and lives as long as it. Optional. */
  const char *(*mount_root)(altar_backend_t *be);
  /* Override only when the mapping is not a prefix: *pphysical gets a
   * malloc'd path (caller frees); an escaping logical path is ALTAR_EPATH.
   * Optional. */
  int (*resolve_path)(altar_backend_t *be, const char *logical, char **pphysical,
                      altar_error_t *err);

  /* Launch spec; return once the platform accepted it (not when it ends).
   * *phandle is zeroed by the wrapper and filled on success with
   * backend = ops->name, the external id, and copies of spec's labels and
   * plugin identity (altar_handle_init_for_spec); the caller clears it.
   * Submitting a spec again must not fail for being a resubmission.
   * Required. */
  int (*submit)(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle,
                altar_error_t *err);
  /* Probe n handles without blocking: pstatuses[i] (n zeroed entries, caller
   * allocated) gets handles[i]'s status, in order. A task the backend can no
   * longer find is FAILED "container_missing", not an error. An error return
   * means the probe itself failed (platform unreachable); the wrapper then
   * clears every entry. Required. */
  int (*poll)(altar_backend_t *be, const altar_handle_t *handles, size_t n,
              altar_status_t *pstatuses, altar_error_t *err);
  /* Block until every handle is terminal, then as poll. Optional
   * (default ALTAR_ENOTSUP: how often to poll is a driver's choice). */
  int (*await_completion)(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                          altar_status_t *pstatuses, altar_error_t *err);
  /* Block up to timeout_ms until a task submitted through this object may
   * have changed state; a hint that a poll now would find news, so a poller
   * need not wait out its interval. 1: something changed, 0: timed out.
   * Optional (default ALTAR_ENOTSUP at once: the backend cannot tell). */
  int (*wait_change)(altar_backend_t *be, int timeout_ms);
  /* Best-effort stop and reap the task, by external id. Idempotent: a task
   * that is already gone is success. Optional. */
  int (*cancel)(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);
  /* Restart transient failures (off banned hosts) and return new handles in
   * *phandles (malloc'd array of *pn, caller frees with altar_handles_free).
   * Optional (default: none restarted, *phandles NULL, *pn 0). */
  int (*recover)(altar_backend_t *be, const altar_status_t *failures, size_t n,
                 const char *const *banned, size_t n_banned, altar_handle_t **phandles,
                 size_t *pn, altar_error_t *err);
};

/* ---- lifecycle ---------------------------------------------------------- */

/* New backend from ops->create(cfg). NULL with errstr filled on failure
 * (also when ops lacks a required member). Free with altar_backend_destroy. */
altar_backend_t *altar_backend_create(const altar_backend_ops_t *ops, const altar_strmap_t *cfg,
                                      char *errstr, size_t errstr_size);
/* Whether ops reads key: "name", one of ops->config_keys, or any key when
 * ops lists none. When not, hint gets " (did you mean \"X\"?)" or "". */
bool altar_backend_knows_key(const altar_backend_ops_t *ops, const char *key, char *hint, size_t hint_size);
/* Wraps an impl built by a backend-specific constructor (e.g. one taking an
 * injected command runner). Takes ownership of impl (freed through
 * ops->destroy, also when this returns NULL for lack of memory). */
altar_backend_t *altar_backend_wrap(const altar_backend_ops_t *ops, void *impl);
/* ops->destroy, then frees be. NULL is fine. */
void altar_backend_destroy(altar_backend_t *be);

/* ---- registry (filled by cli/plugins.c; the BACKEND kind of registry.h) -- */

/* Registers ops under ops->name, or under alias (e.g. "docker" for "local").
 * Re-registering the same ops under the same name is a no-op; another ops
 * under a taken name is ALTAR_EEXIST. Not thread-safe: call at start-up. */
int altar_backend_register(const altar_backend_ops_t *ops);
int altar_backend_register_alias(const char *alias, const altar_backend_ops_t *ops);
/* The ops registered under name or alias, or NULL. */
const altar_backend_ops_t *altar_backend_lookup(const char *name);
/* altar_backend_create of the backend registered as name; an unknown name is
 * an error listing the registered ones. */
altar_backend_t *altar_backend_create_by_name(const char *name, const altar_strmap_t *cfg,
                                              char *errstr, size_t errstr_size);
/* Copies up to max registered names (aliases included), sorted, into names;
 * returns how many are registered (altar_registry_names). */
size_t altar_backend_names(const char **names, size_t max);

/* ---- failures: one table for every backend ------------------------------ */

/* The contract's `deterministic` for a reason code: "exit_<n>" → true (the
 * command's own error fails again); "timeout", "oom_killed",
 * "input_digest_mismatch", "container_missing", "job_failed" and anything
 * unknown → false (ambiguous or transient: a retry is the safe answer). */
bool altar_reason_deterministic(const char *reason);
/* A failure for reason with deterministic from the table above; NULL on
 * allocation failure. exit_code is set for "exit_<n>". Caller frees. */
altar_failure_t *altar_failure_for_reason(const char *reason, const char *detail);
/* "exit_<code>" failure, deterministic per the table. Caller frees. */
altar_failure_t *altar_failure_for_exit(int64_t code, const char *detail);

/* ---- the contract's defaults (used by the wrappers below) --------------- */

int altar__backend_def_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err);
int altar__backend_def_check_resources(altar_backend_t *be, const altar_resources_t *r,
                                       altar_error_t *err);
int altar__backend_def_transfers(altar_backend_t *be, const altar_transfer_t *ts, size_t n,
                                 altar_error_t *err);
const char *altar__backend_def_mount_root(altar_backend_t *be);
int altar__backend_def_resolve_path(altar_backend_t *be, const char *logical, char **pphysical,
                                    altar_error_t *err);
int altar__backend_def_await(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                             altar_status_t *pstatuses, altar_error_t *err);
int altar__backend_def_wait_change(altar_backend_t *be, int timeout_ms);
int altar__backend_def_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);
int altar__backend_def_recover(altar_backend_t *be, const altar_status_t *failures, size_t n,
                               const char *const *banned, size_t n_banned,
                               altar_handle_t **phandles, size_t *pn, altar_error_t *err);
/* Run by the submit/poll/await wrappers: zero outputs first, clear them on error. */
int altar__backend_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle,
                          altar_error_t *err);
int altar__backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                        altar_status_t *pstatuses, bool await, altar_error_t *err);

/* ---- wrappers: what callers use ----------------------------------------- */

static inline const char *altar_backend_name(const altar_backend_t *be) { return be->ops->name; }

static inline altar_verification_t altar_backend_verification(const altar_backend_t *be) {
  return be->ops->input_digest_verification;
}

static inline int altar_backend_capacity(altar_backend_t *be, altar_capacity_t *pcap,
                                         altar_error_t *err) {
  altar_capacity_init(pcap);
  return be->ops->capacity ? be->ops->capacity(be, pcap, err)
                           : altar__backend_def_capacity(be, pcap, err);
}

static inline int altar_backend_check_resources(altar_backend_t *be, const altar_resources_t *r,
                                                altar_error_t *err) {
  return be->ops->check_resources ? be->ops->check_resources(be, r, err)
                                  : altar__backend_def_check_resources(be, r, err);
}

static inline int altar_backend_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs,
                                             size_t n, altar_error_t *err) {
  return be->ops->stage_inputs ? be->ops->stage_inputs(be, inputs, n, err)
                               : altar__backend_def_transfers(be, inputs, n, err);
}

static inline int altar_backend_collect_outputs(altar_backend_t *be,
                                                const altar_transfer_t *outputs, size_t n,
                                                altar_error_t *err) {
  return be->ops->collect_outputs ? be->ops->collect_outputs(be, outputs, n, err)
                                  : altar__backend_def_transfers(be, outputs, n, err);
}

/* The PathResolver's mount root; never NULL. */
static inline const char *altar_backend_mount_root(altar_backend_t *be) {
  const char *r = be->ops->mount_root ? be->ops->mount_root(be) : NULL;
  return r ? r : altar__backend_def_mount_root(be);
}

/* The physical path the task reads or writes for a logical path: a malloc'd
 * string in *pphysical (caller frees), or ALTAR_EPATH for a path that would
 * leave the root. */
static inline int altar_backend_resolve_path(altar_backend_t *be, const char *logical,
                                             char **pphysical, altar_error_t *err) {
  *pphysical = NULL;
  return be->ops->resolve_path ? be->ops->resolve_path(be, logical, pphysical, err)
                               : altar__backend_def_resolve_path(be, logical, pphysical, err);
}

static inline int altar_backend_submit(altar_backend_t *be, const altar_spec_t *spec,
                                       altar_handle_t *phandle, altar_error_t *err) {
  return altar__backend_submit(be, spec, phandle, err);
}

static inline int altar_backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                                     altar_status_t *pstatuses, altar_error_t *err) {
  return altar__backend_poll(be, handles, n, pstatuses, false, err);
}

static inline int altar_backend_await_completion(altar_backend_t *be,
                                                 const altar_handle_t *handles, size_t n,
                                                 altar_status_t *pstatuses, altar_error_t *err) {
  return altar__backend_poll(be, handles, n, pstatuses, true, err);
}

static inline int altar_backend_wait_change(altar_backend_t *be, int timeout_ms) {
  return be->ops->wait_change ? be->ops->wait_change(be, timeout_ms)
                              : altar__backend_def_wait_change(be, timeout_ms);
}

static inline int altar_backend_cancel(altar_backend_t *be, const altar_handle_t *handle,
                                       altar_error_t *err) {
  return be->ops->cancel ? be->ops->cancel(be, handle, err)
                         : altar__backend_def_cancel(be, handle, err);
}

static inline int altar_backend_recover(altar_backend_t *be, const altar_status_t *failures,
                                        size_t n, const char *const *banned, size_t n_banned,
                                        altar_handle_t **phandles, size_t *pn, altar_error_t *err) {
  *phandles = NULL;
  *pn = 0;
  return be->ops->recover
             ? be->ops->recover(be, failures, n, banned, n_banned, phandles, pn, err)
             : altar__backend_def_recover(be, failures, n, banned, n_banned, phandles, pn, err);
}

/* ---- the built-in `process` backend ------------------------------------- */

/* `process`: runs argv directly under <data_root>/tasks/<id>/, supervised so
 * tasks outlive the worker; verification "staging"; mount root = data_root.
 * Config keys: data_root (default ./var/data), slots (default 4), storage
 * ("auto" = the adapter for each uri's scheme, or an adapter name), log_cap
 * (bytes kept per stream, default 1 MiB), logs_keep and logs_keep_days (the
 * retention of kept output: total size, default 1 GiB; age, default 14),
 * memory ("auto": a memory cgroup when one can be made, else the RSS
 * watchdog; "watchdog"). See docs/backends.md. */
extern const altar_backend_ops_t altar_backend_process;

ALTAR_API_END

#endif
