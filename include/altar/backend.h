/* altar — ExecutionBackend: runs a ContainerTaskSpec to completion and reports
 * its state. The user's side: an opaque handle made by altar_backend_open /
 * altar_backend_open_by_name and freed by altar_backend_close, and one
 * ordinary function per operation (core/backend.c). Implementing a backend
 * (the ops table, the handle struct, the registry) is altar/plugin/backend.h.
 *
 * Operations a backend leaves out behave as the contract's default:
 *   capacity         → empty report (no fixed slots)
 *   pools            → none declared beyond the pools capacity reports
 *   check_resources  → accept anything
 *   stage_inputs     → nothing to do
 *   collect_outputs  → nothing to do
 *   mount_root       → "" (identity resolver)
 *   resolve_path     → altar_path_resolve(mount_root, logical)
 *   await_completion → ALTAR_ENOTSUP
 *   wait_change      → ALTAR_ENOTSUP (the caller polls on its own clock)
 *   cancel           → no-op (a missing task counts as cancelled)
 *   recover          → no-op returning no handles
 *   submit_start     → submit
 *   kept_logs        → ALTAR_ENOTSUP (nothing kept that it bounds)
 * and an operation whose ALTAR_BACKEND_CAP_* bit the backend does not
 * declare (or its open dropped) behaves as its default too.
 *
 * Threads: a backend object is used by one thread at a time unless its own
 * documentation says more. Calls never block for a task's completion, except
 * await_completion and wait_change (bounded). */
#ifndef ALTAR_BACKEND_H
#define ALTAR_BACKEND_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/plugin_keys.h"
#include "altar/spec.h"
#include "altar/strmap.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a backend checks an input's Transfer.digest. */
typedef enum altar_verification {
  ALTAR_VERIFY_NONE = 0,    /* not verified: the contract suite rejects this */
  ALTAR_VERIFY_STAGING = 1, /* stage_inputs fails with ALTAR_EINTEGRITY before any submit */
  ALTAR_VERIFY_TASK = 2,    /* the task checks its inputs and fails "input_digest_mismatch" */
} altar_verification_t;

/* "none" | "staging" | "task" ("?" for other values). */
const char *altar_verification_name(altar_verification_t v);

/* What a backend declares it can do (ops->caps), so a caller checks before
 * it relies on an operation instead of learning from a call. A bit marked
 * (op) goes with that operation: a table declaring the bit must have the
 * operation and one having the operation must declare the bit (both are
 * refused at registration and open), and a handle whose bit is off runs the
 * operation's default. */
#define ALTAR_BACKEND_CAP_CAPACITY 0x001u     /* (capacity) fixed slots per pool: a worker gates its intake on them */
#define ALTAR_BACKEND_CAP_POOLS 0x002u        /* (pools) a pool mapping beyond the pools capacity reports */
#define ALTAR_BACKEND_CAP_CANCEL 0x004u       /* (cancel) stops a running task and reaps what a finished one left */
#define ALTAR_BACKEND_CAP_AWAIT 0x008u        /* (await_completion) blocks natively until tasks end */
#define ALTAR_BACKEND_CAP_WAIT_CHANGE 0x010u  /* (wait_change) wakes a poller when a task may have changed */
#define ALTAR_BACKEND_CAP_RECOVER 0x020u      /* (recover) restarts transient failures off banned hosts */
#define ALTAR_BACKEND_CAP_SUBMIT_START 0x040u /* (submit_start) overlaps launches, refusals come through poll */
/* (adopt) a submit under the task key of a live run returns that run, from
 * any worker that reaches it: a moved partition's tasks are adopted, not run
 * twice */
#define ALTAR_BACKEND_CAP_ADOPT 0x080u
/* (logs) keeps each task's stdout and stderr under
 * <data_root>/logs/<task key>/ (altar logs) */
#define ALTAR_BACKEND_CAP_LOGS 0x100u
#define ALTAR_BACKEND_CAPS_ALL 0x1ffu

/* What a capability bit lets a backend do, as a phrase for messages ("stop
 * running tasks (cancel)"); "?" for anything but one known bit. */
const char *altar_backend_cap_name(unsigned cap);

typedef struct altar_backend altar_backend_t;
typedef struct altar_backend_ops altar_backend_ops_t;

/* ---- lifecycle ---------------------------------------------------------- */

/* New backend: ops->open(be, cfg) builds its private state. NULL with err
 * filled on failure (also when ops lacks a required member or cfg holds a key
 * ops does not read). Free with altar_backend_close. */
altar_backend_t *altar_backend_open(const altar_backend_ops_t *ops, const altar_strmap_t *cfg, altar_error_t *err);
/* altar_backend_open of the backend registered as name (or alias); an unknown
 * name is an error listing the registered ones. */
altar_backend_t *altar_backend_open_by_name(const char *name, const altar_strmap_t *cfg, altar_error_t *err);
/* ops->close, then frees be. NULL is fine. */
void altar_backend_close(altar_backend_t *be);
/* The keys ops declares (altar_plugin_keys_allow checks one), its
 * capability bits (ALTAR_BACKEND_CAP_*), for a backend known by its table. */
const altar_plugin_key_t *altar_backend_ops_keys(const altar_backend_ops_t *ops);
unsigned altar_backend_ops_caps(const altar_backend_ops_t *ops);
/* Copies up to max registered names (aliases included), sorted, into names;
 * returns how many are registered (altar_registry_names). */
size_t altar_backend_names(const char **names, size_t max);

/* ---- failures: one table for every backend ------------------------------ */

/* The contract's `deterministic` for a reason code: "exit_<n>" → true (the
 * command's own error fails again), and "invalid_spec" (a spec altar
 * refuses fails the same way on every try); "timeout", "oom_killed",
 * "input_digest_mismatch", "container_missing", "job_failed",
 * "submit_failed" and anything unknown → false (ambiguous or transient: a
 * retry is the safe answer). Every place that detects a failure takes
 * `deterministic` from here, so one failure carries one value wherever it
 * was found. */
bool altar_reason_deterministic(const char *reason);
/* The reason of a task that never started because staging or submit
 * returned rc: ALTAR_EINTEGRITY → "input_digest_mismatch" (the same failure
 * a task-side check reports), ALTAR_EINVAL and ALTAR_EPATH → "invalid_spec",
 * anything else → "submit_failed". A static string. */
const char *altar_reason_for_start_error(int rc);
/* A failure for reason with deterministic from the table above; NULL on
 * allocation failure. exit_code is set for "exit_<n>". Caller frees. */
altar_failure_t *altar_failure_for_reason(const char *reason, const char *detail);
/* "exit_<code>" failure, deterministic per the table. Caller frees. */
altar_failure_t *altar_failure_for_exit(int64_t code, const char *detail);

/* ---- operations: what callers use (core/backend.c) ----------------------- */

/* The registry key and TaskHandle.backend value ("process", "local", ...). */
const char *altar_backend_name(const altar_backend_t *be);
/* Where input digests are verified (declared by the backend). */
altar_verification_t altar_backend_verification(const altar_backend_t *be);
/* What this backend can do: ALTAR_BACKEND_CAP_* (its table's bits, less
 * what its open found the platform lacks). */
unsigned altar_backend_caps(const altar_backend_t *be);
/* 0 when be has every bit of caps; else ALTAR_ENOTSUP with err "backend
 * '<name>' cannot <what the first missing bit does>, which <needed_for>
 * needs" (needed_for NULL: the sentence ends at the capability). */
int altar_backend_require(const altar_backend_t *be, unsigned caps, const char *needed_for, altar_error_t *err);

/* Free slots per pool into *pcap (initialised empty here; the caller clears
 * it with altar_capacity_clear). Default: empty report (no fixed slots). */
int altar_backend_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err);
/* The pools the backend can serve whatever is free now (its pool mapping),
 * as opposed to capacity's free slots: up to max names into pnames,
 * borrowed from be and valid until it is closed. Returns the number it has
 * (possibly more than max), or a negative ALTAR_E… code. Default: 0 (a
 * backend without a mapping serves the pools its capacity reports, else
 * the CPU pool). */
int altar_backend_pools(altar_backend_t *be, const char **pnames, size_t max);
/* Whether this backend can serve r at all; 0, or ALTAR_EINVAL with err
 * naming "resources.gpu" etc. Default: accept anything. */
int altar_backend_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err);
/* Make each input readable at its logical path before the task runs; a
 * "staging" backend fails a digest mismatch with ALTAR_EINTEGRITY. */
int altar_backend_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
/* Save each output's logical path to its uri after the task succeeded. */
int altar_backend_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err);
/* The PathResolver's mount root; never NULL ("" = identity). */
const char *altar_backend_mount_root(altar_backend_t *be);
/* The physical path the task reads or writes for a logical path: a malloc'd
 * string in *pphysical (NULL first; caller frees), or ALTAR_EPATH for a path
 * that would leave the root. */
int altar_backend_resolve_path(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err);
/* Launch spec; *phandle is zeroed first, filled on success, cleared on
 * error; the caller clears it. */
int altar_backend_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err);
/* Pipelined submit: as altar_backend_submit, but the backend may return
 * once the launch is on its way, reporting a refusal through poll (FAILED,
 * reason as altar_reason_for_start_error). Default: submit. */
int altar_backend_submit_start(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle,
                               altar_error_t *err);
/* Probe n handles without blocking: pstatuses (n entries, caller allocated)
 * are zeroed first and cleared on error. */
int altar_backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                       altar_error_t *err);
/* Block until every handle is terminal, then as poll. Without
 * ALTAR_BACKEND_CAP_AWAIT: ALTAR_ENOTSUP naming the backend, at once. */
int altar_backend_await_completion(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                                   altar_status_t *pstatuses, altar_error_t *err);
/* Block up to timeout_ms until a task may have changed state: 1 something
 * changed, 0 timed out, ALTAR_ENOTSUP the backend cannot tell (the default). */
int altar_backend_wait_change(altar_backend_t *be, int timeout_ms);
/* A descriptor readable when wait_change would say 1, for poll() beside
 * others; -1 when the backend cannot tell now (the default). */
int altar_backend_change_fd(altar_backend_t *be);
/* What a backend keeps of finished tasks' output under its data root
 * (ALTAR_BACKEND_CAP_LOGS), against its bounds, and what its next prune
 * of that output removes. */
typedef struct altar_kept_logs {
  uint64_t dirs;             /* task directories kept now */
  uint64_t bytes;            /* what they take: allocated blocks of the directories and their files */
  uint64_t prune_next_dirs;  /* of those, what the next prune removes: past the age bound, or beyond a bound */
  uint64_t prune_next_bytes; /* and their allocated bytes */
  uint64_t keep_dirs;        /* the bounds: at most this many directories (logs_keep_count) */
  uint64_t keep_bytes;       /* at most this many allocated bytes (logs_keep) */
  double keep_age_s;         /* none older than this (logs_keep_days); 0: no age bound */
} altar_kept_logs_t;

/* The kept-output facts into *pkept (zeroed first), from what the backend
 * already tracks: no directory is read, so a caller may ask at every
 * refresh of its gauges. Same thread as the backend's other calls.
 * Default: ALTAR_ENOTSUP (the backend keeps no output it bounds). */
int altar_backend_kept_logs(altar_backend_t *be, altar_kept_logs_t *pkept);
/* Best-effort stop and reap; idempotent. Default: no-op. */
int altar_backend_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err);
/* Restart transient failures off banned hosts; *phandles (NULL first) is a
 * malloc'd array of *pn (0 first), freed with altar_handles_free. Default:
 * none restarted. */
int altar_backend_recover(altar_backend_t *be, const altar_status_t *failures, size_t n, const char *const *banned,
                          size_t n_banned, altar_handle_t **phandles, size_t *pn, altar_error_t *err);

ALTAR_API_END

#endif
