/* altar — the `modal` execution backend: each task a Modal Sandbox.
 *
 * The ModalRuntime is the small part of the Modal SDK the backend uses (run
 * a sandbox, poll it, terminate it, copy files in and out of a Volume) as a
 * vtable of plain values, so tests drive the backend with a fake. The real
 * runtime runs tools/modal_bridge.py (python3 + the official `modal`
 * package) as a subprocess and speaks JSON lines with it; see
 * docs/kubernetes-modal.md for the protocol. */
#ifndef ALTAR_MODAL_H
#define ALTAR_MODAL_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/backend.h"
#include "altar/error.h"
#include "altar/storage.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stdint.h>

/* Modal's longest sandbox lifetime: a spec without timeout_s gets it, a
 * longer explicit one is refused. */
#define ALTAR_MODAL_MAX_SANDBOX_TIMEOUT_S 86400
/* What a sandbox that outlived its timeout reports (as Modal's SDK does). */
#define ALTAR_MODAL_TIMEOUT_EXIT_CODE 124
/* A sandbox killed with SIGKILL (out of memory, terminated, or its own
 * doing): reported as oom_killed only when the runtime says it was memory
 * (ops->oom_killed), else as exit_137. */
#define ALTAR_MODAL_KILLED_EXIT_CODE 137
/* What the input-verification wrapper exits with when a digest fails, after
 * writing ALTAR_MODAL_DIGEST_MARK as the last line of its stderr. poll
 * reports input_digest_mismatch only for an 86 that ends with that line; any
 * other 86 is the command's own (exit_86). */
#define ALTAR_MODAL_DIGEST_EXIT_CODE 86
#define ALTAR_MODAL_DIGEST_MARK "altar-verify-inputs: an input failed its digest check; the command did not run"
#define ALTAR_MODAL_DEFAULT_APP "altar"
#define ALTAR_MODAL_DEFAULT_VOLUME "altar-data"
#define ALTAR_MODAL_MOUNT_ROOT "/mnt/volume"

/* ---- ModalRuntime ---- */

/* One sandbox to start. Everything is borrowed for the call. */
typedef struct altar_modal_sandbox_req {
  const char *app_name;
  const char *volume_name;
  const char *mount_root; /* where the volume is mounted in the sandbox */
  const char *image;      /* a registry image reference */
  char *const *command;   /* argv */
  size_t n_command;
  const char *gpu; /* Modal accelerator ("A10G", "A100:2"), NULL = CPU only */
  altar_opt_i64_t memory_mb;
  int64_t timeout_s;          /* always set: the backend maps "none" to the maximum */
  const altar_strmap_t *tags; /* the spec's labels */
  /* The spec's task key (identity hash), or NULL. When set the sandbox is
   * tagged with it, and a sandbox of the app with that key that still runs
   * is adopted: its id is returned and none is started (a dead worker's run
   * of the same task). A finished one is not adopted. */
  const char *task_key;
} altar_modal_sandbox_req_t;

/* Required: run_sandbox, poll_sandbox, upload, download. Optional:
 * terminate_sandbox (default: nothing, the sandbox runs out its timeout),
 * read_output (default: a failure's detail is its exit code alone, and an
 * exit of 86 cannot be told to be the verifier's), oom_killed (default: no
 * sandbox is known to have run out of memory), destroy. Calls return 0 or a
 * negative ALTAR_E… code with err filled. */
typedef struct altar_modal_runtime_ops {
  const char *name;
  /* Starts a detached sandbox; *psandbox_id (malloc'd) is its opaque id. */
  int (*run_sandbox)(void *impl, const altar_modal_sandbox_req_t *req, char **psandbox_id, altar_error_t *err);
  /* Without blocking: *pdone false while it runs, else *pexit_code is set.
   * ALTAR_ENOTFOUND when no sandbox has this id. */
  int (*poll_sandbox)(void *impl, const char *sandbox_id, bool *pdone, int *pexit_code, altar_error_t *err);
  /* Copies a host file into the volume at remote_path (relative to its root). */
  int (*upload)(void *impl, const char *volume_name, const char *local_path, const char *remote_path,
                altar_error_t *err);
  /* Copies remote_path (relative to the volume root) out to a host file. */
  int (*download)(void *impl, const char *volume_name, const char *remote_path, const char *local_path,
                  altar_error_t *err);
  /* Stops a sandbox; a missing one is not an error. */
  int (*terminate_sandbox)(void *impl, const char *sandbox_id, altar_error_t *err);
  /* The last at most max_bytes of an ended sandbox's stderr and stdout:
   * *perr / *pout malloc'd (NUL-terminated, *perr_len / *pout_len bytes,
   * which may hold NULs), both NULL on error. */
  int (*read_output)(void *impl, const char *sandbox_id, size_t max_bytes, char **perr, size_t *perr_len, char **pout,
                     size_t *pout_len, altar_error_t *err);
  /* *poom: whether the platform says the ended sandbox was killed for
   * exceeding its memory limit. Only the platform's own word counts; an
   * exit code of 137 alone is no evidence. */
  int (*oom_killed)(void *impl, const char *sandbox_id, bool *poom, altar_error_t *err);
  void (*destroy)(void *impl);
} altar_modal_runtime_ops_t;

typedef struct altar_modal_runtime {
  const altar_modal_runtime_ops_t *ops;
  void *impl;
} altar_modal_runtime_t;

/* Heap runtime around ops/impl; NULL on allocation failure. Free with
 * altar_modal_runtime_free (calls ops->destroy(impl)). */
altar_modal_runtime_t *altar_modal_runtime_new(const altar_modal_runtime_ops_t *ops, void *impl);
void altar_modal_runtime_free(altar_modal_runtime_t *rt);

/* How long the SDK's Sandbox.create waits for a GPU sandbox to be scheduled
 * (modal 1.6.4: 21 minutes); the C side's deadline for run_sandbox covers it. */
#define ALTAR_MODAL_SCHEDULE_WAIT_MS (21L * 60 * 1000)

typedef struct altar_modal_bridge_config {
  const char *python; /* NULL: "python3" (looked up in PATH) */
  /* NULL: $ALTAR_MODAL_BRIDGE, else <prefix>/share/altar/modal_bridge.py
   * beside the running binary's <prefix>/bin, else — only for a binary in
   * the build tree — tools/modal_bridge.py in the source tree. */
  const char *bridge;
  long reply_timeout_ms; /* each reply; 0: 600000 */
  /* run_sandbox's reply; 0: reply_timeout_ms + ALTAR_MODAL_SCHEDULE_WAIT_MS */
  long run_timeout_ms;
} altar_modal_bridge_config_t;

/* The real runtime: `python` running the bridge as a child speaking JSON
 * lines. The bridge starts on the first call; when the Modal SDK is not
 * importable, that call fails with ALTAR_ECONFIG and the bridge's message
 * (which says to `pip install modal`). A reply that misses its deadline
 * fails the call with ALTAR_ETIMEOUT; before that the bridge is sent SIGINT,
 * which cancels the SDK call in flight and lets the SDK clean up (it
 * terminates a sandbox it created but could not schedule); a bridge that
 * does not answer within the grace is killed. NULL cfg: all defaults. NULL
 * with err on failure (ALTAR_ECONFIG: no readable bridge). One thread at a
 * time. */
altar_modal_runtime_t *altar_modal_bridge_runtime_new(const altar_modal_bridge_config_t *cfg, altar_error_t *err);
/* The bridge path cfg->bridge resolves to, into out (see above); 0, or
 * ALTAR_ECONFIG naming the places tried. */
int altar_modal_bridge_find(const char *bridge, char *out, size_t out_size, altar_error_t *err);

/* ---- the backend ---- */

typedef struct altar_modal_config {
  const char *app_name;    /* NULL: "altar" */
  const char *volume_name; /* NULL: "altar-data" */
  const char *mount_root;  /* NULL: /mnt/volume (tests point it at a directory) */
  /* Pool name → Modal accelerator. NULL: {"gpu": "A10G", "a100": "A100"}. */
  const altar_strmap_t *pool_accelerators;
  /* Storage for staging and collection; NULL: opened per transfer from its
   * uri's scheme. Borrowed: it must outlive the backend. */
  altar_storage_t *storage;
} altar_modal_config_t;

typedef struct altar_modal altar_modal_t;

/* A backend over rt, which it owns from here on (also on failure). NULL
 * with err set on bad parameters. Free with altar_modal_free. */
altar_modal_t *altar_modal_new(const altar_modal_config_t *cfg, altar_modal_runtime_t *rt, altar_error_t *err);
void altar_modal_free(altar_modal_t *m);
altar_modal_runtime_t *altar_modal_runtime(altar_modal_t *m);

/* The sandbox argv for spec: the command itself when no input carries a
 * digest, else `sh -c <wrapper>` that runs the digest verifier over the
 * digest-bearing inputs and exits ALTAR_MODAL_DIGEST_EXIT_CODE on a
 * mismatch before the command starts. *pargv is a malloc'd array of *pn
 * malloc'd strings (free each and the array). */
int altar_modal_build_command(altar_modal_t *m, const altar_spec_t *spec, char ***pargv, size_t *pn,
                              altar_error_t *err);
/* The accelerator for r: NULL for CPU-only; "<acc>" or "<acc>:<count>".
 * ALTAR_EINVAL naming resources.gpu for an unmapped pool. */
int altar_modal_accelerator(altar_modal_t *m, const altar_resources_t *r, char **pgpu, altar_error_t *err);

int altar_modal_submit(altar_modal_t *m, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err);
/* pst: n zeroed statuses the caller allocated and clears. */
int altar_modal_poll(altar_modal_t *m, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err);
int altar_modal_cancel(altar_modal_t *m, const altar_handle_t *h, altar_error_t *err);
int altar_modal_stage_inputs(altar_modal_t *m, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
int altar_modal_collect_outputs(altar_modal_t *m, const altar_transfer_t *outputs, size_t n, altar_error_t *err);

/* The "modal" backend (altar_backend_modal_ops, altar/plugin/backend.h):
 * input_digest_verification "task" (the wrapper above). Its open reads these
 * keys (strings, optional): app_name, volume_name, mount_root, pool_accelerators (JSON
 * {"pool": "accelerator"}), python, bridge, reply_timeout_ms, run_timeout_ms. data_root and
 * slots are accepted and ignored (Modal autoscales: no fixed capacity). */
/* An ExecutionBackend around m; takes ownership (also on NULL return). */
altar_backend_t *altar_modal_backend_wrap(altar_modal_t *m);

ALTAR_API_END

#endif
