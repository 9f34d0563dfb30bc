/* altar — implementing an execution backend: what a plug-in needs beyond the user's
 * altar/backend.h. One const ops table per backend (designated initializers), its
 * private state stored in the handle with altar_backend_set_impl, and the
 * contract's defaults for every optional operation filled in once, by core, when
 * the handle is made (altar_backend_open / altar_backend_wrap).
 *
 * Required: name, input_digest_verification (staging or task), open, close,
 * submit, poll. Everything else may be NULL (see altar/backend.h for the
 * defaults); caps declares, bit for bit, which optional operations it has
 * and what else it can do (ALTAR_BACKEND_CAP_*). The table starts as every
 * kind's does: name, caps, config_keys (altar/plugin_keys.h). */
#ifndef ALTAR_PLUGIN_BACKEND_H
#define ALTAR_PLUGIN_BACKEND_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/backend.h"

struct altar_backend_ops {
  /* Registry key and TaskHandle.backend value ("process", "local", …). */
  const char *name;
  /* ALTAR_BACKEND_CAP_*: what it can do, declared, never probed. An
   * operation bit without its operation (or the reverse) is refused. */
  unsigned caps;
  /* The keys open reads, ended by ALTAR_PLUGIN_KEYS_END ("name" is always
   * allowed). altar_backend_open and the config reader refuse any other key
   * with a suggestion (the reader with its file and line), so a typo never
   * falls back to a default. NULL: keys are left to open. */
  const altar_plugin_key_t *config_keys;
  /* Declared, never probed: where input digests are verified. */
  altar_verification_t input_digest_verification;

  /* Builds the private state from configuration keys (cfg may be NULL = no
   * keys; unknown keys are an error naming the key) and stores it with
   * altar_backend_set_impl(be, impl). 0, or a negative ALTAR_E… code with err
   * filled (having freed what it built: close is not called then). */
  int (*open)(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err);
  /* Frees altar_backend_impl(be) and everything the backend owns (not be
   * itself). Tasks that already run keep running where the platform allows. */
  void (*close)(altar_backend_t *be);

  /* Free slots per pool into *pcap (initialised empty by core; the caller
   * clears it with altar_capacity_clear). Optional. */
  int (*capacity)(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err);
  /* The pools this backend can serve at all, free or not (its pool mapping:
   * Kubernetes node pools, Modal GPU types): up to max names into pnames,
   * borrowed from the backend and valid while it is open. Returns how many
   * it has (which may be more than max), or a negative ALTAR_E… code. A
   * worker reads every such pool's jobs topic; capacity only rations the
   * pools it reports. Optional (default 0: none beyond capacity's pools). */
  int (*pools)(altar_backend_t *be, const char **pnames, size_t max);
  /* Whether this backend can serve r at all (e.g. a GPU pool it has). Returns
   * 0, or ALTAR_EINVAL with err naming "resources.gpu" etc. Optional. */
  int (*check_resources)(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err);

  /* Make each input readable at its logical path before the task runs. A
   * "staging" backend verifies digests here: a mismatch deletes the bad copy
   * and returns ALTAR_EINTEGRITY with err naming the input
   * ("inputs[i] (<logical_path>): …"). Optional. */
  int (*stage_inputs)(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
  /* Save each output's logical path to its uri after the task succeeded. Optional. */
  int (*collect_outputs)(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err);

  /* PathResolver: the root under which the task sees the logical layout
   * ("/mnt/volume", a data root; "" = identity). The string is owned by the
   * backend and lives as long as it. Optional (NULL returned counts as ""). */
  const char *(*mount_root)(altar_backend_t *be);
  /* Override only when the mapping is not a prefix: *pphysical gets a
   * malloc'd path (caller frees); an escaping logical path is ALTAR_EPATH.
   * Optional. */
  int (*resolve_path)(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err);

  /* Launch spec; return once the platform accepted it (not when it ends).
   * *phandle is zeroed by core and filled on success with
   * backend = ops->name, the external id, and copies of spec's labels and
   * plugin identity (altar_handle_init_for_spec); the caller clears it.
   * Submitting a spec again must not fail for being a resubmission.
   * Required. */
  int (*submit)(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err);
  /* Probe n handles without blocking: pstatuses[i] (n zeroed entries, caller
   * allocated) gets handles[i]'s status, in order. A task the backend can no
   * longer find is FAILED "container_missing", not an error. An error return
   * means the probe itself failed (platform unreachable); core then clears
   * every entry. Required. */
  int (*poll)(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
              altar_error_t *err);
  /* Block until every handle is terminal, then as poll. Optional
   * (default ALTAR_ENOTSUP: how often to poll is a driver's choice). */
  int (*await_completion)(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                          altar_error_t *err);
  /* Block up to timeout_ms until a task submitted through this object may
   * have changed state; a hint that a poll now would find news, so a poller
   * need not wait out its interval. 1: something changed, 0: timed out.
   * Optional (default ALTAR_ENOTSUP at once: the backend cannot tell). */
  int (*wait_change)(altar_backend_t *be, int timeout_ms);
  /* For a caller that waits on several sources at once (the worker: the log
   * and its tasks): a descriptor that polls readable when wait_change would
   * return 1 now, owned by the backend; -1 when it cannot tell at the moment
   * (the caller then polls on its clock). Only consulted with
   * ALTAR_BACKEND_CAP_WAIT_CHANGE. Optional (default -1). */
  int (*change_fd)(altar_backend_t *be);
  /* Best-effort stop and reap the task, by external id. Idempotent: a task
   * that is already gone is success. Optional. */
  int (*cancel)(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);
  /* Restart transient failures (off banned hosts) and return new handles in
   * *phandles (malloc'd array of *pn, caller frees with altar_handles_free).
   * Optional (default: none restarted, *phandles NULL, *pn 0). */
  int (*recover)(altar_backend_t *be, const altar_status_t *failures, size_t n, const char *const *banned,
                 size_t n_banned, altar_handle_t **phandles, size_t *pn, altar_error_t *err);
  /* Pipelined submit, for a caller that submits many tasks in a row: as
   * submit, but it may return once the launch is on its way rather than
   * accepted, so the next one can start; the platform's answer then comes
   * through poll, where a launch the platform refused is FAILED with the
   * reason altar_reason_for_start_error gives for the error submit would
   * have returned. Local checks (an invalid spec) still fail here.
   * Optional (default: submit). */
  int (*submit_start)(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err);
  /* For a backend that keeps and bounds task output (ALTAR_BACKEND_CAP_LOGS):
   * fills *pkept (zeroed by core) from what it already tracks, never by
   * reading the directories (a worker asks at each refresh of its gauges).
   * Optional (default ALTAR_ENOTSUP: nothing kept that it bounds). */
  int (*kept_logs)(altar_backend_t *be, altar_kept_logs_t *pkept);
};

/* A backend instance. Made by altar_backend_open / altar_backend_open_by_name /
 * altar_backend_wrap; freed by altar_backend_close. */
struct altar_backend {
  altar_backend_ops_t ops;          /* the implementation's table with every optional
                                     operation filled with its default, once, at open
                                     (also each one whose caps bit is off) */
  const altar_backend_ops_t *table; /* the table as given (identity, registry) */
  void *impl;
};

/* The private state open (or the wrapped constructor) stored. */
static inline void *altar_backend_impl(const altar_backend_t *be) { return be->impl; }
static inline void altar_backend_set_impl(altar_backend_t *be, void *impl) { be->impl = impl; }
/* From open, when the platform behind this handle lacks what the table
 * declares (a Python adapter without await_completion): clears those bits
 * of be's caps and puts the defaults in place of their operations. Bits
 * the table does not declare cannot be added. */
void altar_backend_drop_caps(altar_backend_t *be, unsigned caps);

/* Wraps an impl built by a backend-specific constructor (e.g. one taking an
 * injected command runner): the same filling of defaults as open, open not
 * called. Takes ownership of impl (freed through ops->close, also when this
 * returns NULL with err filled: a table lacking a required member, no memory). */
altar_backend_t *altar_backend_wrap(const altar_backend_ops_t *ops, void *impl, altar_error_t *err);

/* 0 when ops can make a handle: its required members are there and its
 * caps agree with its operations; else ALTAR_EINVAL with err saying what is
 * wrong ("backend 'x': caps declares cancel but the vtable has no
 * 'cancel'"). Registration, open, wrap and the plug-in loader all ask. */
int altar_backend_check_table(const altar_backend_ops_t *ops, altar_error_t *err);

/* ---- registry (filled by cli/plugins.c; the BACKEND kind of registry.h) -- */

/* Registers ops under ops->name, or under alias (e.g. "docker" for "local").
 * Re-registering the same ops under the same name is a no-op; another ops
 * under a taken name is ALTAR_EEXIST; a table lacking a required member is
 * ALTAR_EINVAL. Not thread-safe: call at start-up. */
int altar_backend_register(const altar_backend_ops_t *ops);
int altar_backend_register_alias(const char *alias, const altar_backend_ops_t *ops);
/* The ops registered under name or alias, or NULL. */
const altar_backend_ops_t *altar_backend_lookup(const char *name);

/* ---- the built-in backends --------------------------------------------- */

/* `process`: runs argv directly under <data_root>/tasks/<id>/, supervised so
 * tasks outlive the worker; verification "staging"; mount root = data_root.
 * Config keys: data_root (default ./var/data), slots (default 4), storage
 * ("auto" = the adapter for each uri's scheme, or an adapter name), log_cap
 * (bytes kept per stream, default 1 MiB), logs_keep, logs_keep_count and
 * logs_keep_days (the retention of kept output: allocated size, default
 * 1 GiB; task directories, default 10000; age in days, default 14),
 * memory ("auto": a memory cgroup when one can be made, else the RSS
 * watchdog; "watchdog"). See docs/backends.md. */
extern const altar_backend_ops_t altar_backend_process_ops;

/* The other built-ins, registered by cli/plugins.c: "local" (docker, also
 * registered as "docker"; docs/docker.md), "kubernetes" (each task a batch/v1
 * Job; README, "Kubernetes") and "modal" (a Modal sandbox per task through the
 * SDK's bridge; altar/modal.h lists its keys). */
extern const altar_backend_ops_t altar_backend_docker_ops;
extern const altar_backend_ops_t altar_backend_kubernetes_ops;
extern const altar_backend_ops_t altar_backend_modal_ops;
/* "python": an ExecutionBackend written in Python, found under the
 * altar.execution_backends entry points of the interpreter named by the
 * key python, run through one bridge process (docs/python-backends.md). */
extern const altar_backend_ops_t altar_backend_python_ops;

ALTAR_API_END

#endif
