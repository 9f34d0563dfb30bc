/* ExecutionBackend: the contract's defaults in one place, construction, the
 * name registry, and the reason → deterministic table every backend shares. */
#include "altar/plugin/backend.h"
#include "altar/paths.h"
#include "altar/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *altar_verification_name(altar_verification_t v) {
  switch (v) {
  case ALTAR_VERIFY_NONE: return "none";
  case ALTAR_VERIFY_STAGING: return "staging";
  case ALTAR_VERIFY_TASK: return "task";
  }
  return "?";
}

/* ---- defaults (filled into the handle's table once, at open or wrap) ---- */

static int def_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  (void)be;
  (void)pcap; /* already empty: no fixed slots to report */
  (void)err;
  return 0;
}

static int def_pools(altar_backend_t *be, const char **pnames, size_t max) {
  (void)be;
  (void)pnames;
  (void)max;
  return 0; /* no mapping declared: the pools capacity reports stand */
}

static int def_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  (void)be;
  (void)r;
  (void)err;
  return 0;
}

static int def_transfers(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  /* Managed backends move files through submit (arguments, mounts). */
  (void)be;
  (void)ts;
  (void)n;
  (void)err;
  return 0;
}

static const char *def_mount_root(altar_backend_t *be) {
  (void)be;
  return "";
}

static int def_resolve_path(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err) {
  *pphysical = NULL;
  return altar_path_resolve(altar_backend_mount_root(be), logical, pphysical, err);
}

static int def_await(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                     altar_error_t *err) {
  (void)handles;
  (void)n;
  (void)pstatuses;
  return altar_backend_require(be, ALTAR_BACKEND_CAP_AWAIT, NULL, err);
}

static int def_wait_change(altar_backend_t *be, int timeout_ms) {
  (void)be;
  (void)timeout_ms;
  return ALTAR_ENOTSUP;
}

static int def_change_fd(altar_backend_t *be) {
  (void)be;
  return -1;
}

static int def_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err) {
  (void)be;
  (void)handle;
  (void)err;
  return 0;
}

static int def_recover(altar_backend_t *be, const altar_status_t *failures, size_t n, const char *const *banned,
                       size_t n_banned, altar_handle_t **phandles, size_t *pn, altar_error_t *err) {
  (void)be;
  (void)failures;
  (void)n;
  (void)banned;
  (void)n_banned;
  (void)err;
  *phandles = NULL;
  *pn = 0;
  return 0;
}

static int def_kept_logs(altar_backend_t *be, altar_kept_logs_t *pkept) {
  (void)be;
  (void)pkept; /* already zeroed */
  return ALTAR_ENOTSUP;
}

/* ---- capabilities ------------------------------------------------------- */

/* Each bit, what it lets a backend do, and the operation it goes with (NULL
 * member name: a bit of behaviour, no operation of its own). */
typedef struct cap_def {
  unsigned bit;
  const char *does;
  const char *op;
} cap_def_t;

static const cap_def_t cap_defs[] = {
    {ALTAR_BACKEND_CAP_CAPACITY, "report fixed slots per pool (capacity)", "capacity"},
    {ALTAR_BACKEND_CAP_POOLS, "declare a pool mapping (pools)", "pools"},
    {ALTAR_BACKEND_CAP_CANCEL, "stop running tasks (cancel)", "cancel"},
    {ALTAR_BACKEND_CAP_AWAIT, "await completion (await_completion); poll instead", "await_completion"},
    {ALTAR_BACKEND_CAP_WAIT_CHANGE, "wake a poller when a task changes (wait_change)", "wait_change"},
    {ALTAR_BACKEND_CAP_RECOVER, "restart failed tasks (recover)", "recover"},
    {ALTAR_BACKEND_CAP_SUBMIT_START, "overlap launches (submit_start)", "submit_start"},
    {ALTAR_BACKEND_CAP_ADOPT, "adopt a live run by task key", NULL},
    {ALTAR_BACKEND_CAP_LOGS, "keep task output under its data root (altar logs)", NULL},
};
#define N_CAP_DEFS (sizeof cap_defs / sizeof cap_defs[0])

const char *altar_backend_cap_name(unsigned cap) {
  for (size_t i = 0; i < N_CAP_DEFS; i++)
    if (cap_defs[i].bit == cap) return cap_defs[i].does;
  return "?";
}

/* Whether ops has the operation that goes with bit. */
static bool has_op(const altar_backend_ops_t *o, unsigned bit) {
  switch (bit) {
  case ALTAR_BACKEND_CAP_CAPACITY: return o->capacity != NULL;
  case ALTAR_BACKEND_CAP_POOLS: return o->pools != NULL;
  case ALTAR_BACKEND_CAP_CANCEL: return o->cancel != NULL;
  case ALTAR_BACKEND_CAP_AWAIT: return o->await_completion != NULL;
  case ALTAR_BACKEND_CAP_WAIT_CHANGE: return o->wait_change != NULL;
  case ALTAR_BACKEND_CAP_RECOVER: return o->recover != NULL;
  case ALTAR_BACKEND_CAP_SUBMIT_START: return o->submit_start != NULL;
  default: return false;
  }
}

/* Puts the default in place of the operation of every operation bit caps
 * lacks, so a handle never runs what it does not declare. */
static void default_missing_caps(altar_backend_ops_t *o, unsigned caps) {
  if (!(caps & ALTAR_BACKEND_CAP_CAPACITY)) o->capacity = def_capacity;
  if (!(caps & ALTAR_BACKEND_CAP_POOLS)) o->pools = def_pools;
  if (!(caps & ALTAR_BACKEND_CAP_CANCEL)) o->cancel = def_cancel;
  if (!(caps & ALTAR_BACKEND_CAP_AWAIT)) o->await_completion = def_await;
  if (!(caps & ALTAR_BACKEND_CAP_WAIT_CHANGE)) o->wait_change = def_wait_change;
  if (!(caps & ALTAR_BACKEND_CAP_WAIT_CHANGE) || !o->change_fd) o->change_fd = def_change_fd;
  if (!(caps & ALTAR_BACKEND_CAP_RECOVER)) o->recover = def_recover;
  if (!(caps & ALTAR_BACKEND_CAP_SUBMIT_START)) o->submit_start = o->submit;
}

static void fill_defaults(altar_backend_ops_t *o) {
  default_missing_caps(o, o->caps);
  if (!o->check_resources) o->check_resources = def_check_resources;
  if (!o->stage_inputs) o->stage_inputs = def_transfers;
  if (!o->collect_outputs) o->collect_outputs = def_transfers;
  if (!o->mount_root) o->mount_root = def_mount_root;
  if (!o->resolve_path) o->resolve_path = def_resolve_path;
  if (!o->kept_logs) o->kept_logs = def_kept_logs;
}

void altar_backend_drop_caps(altar_backend_t *be, unsigned caps) {
  be->ops.caps &= ~caps;
  default_missing_caps(&be->ops, be->ops.caps);
}

unsigned altar_backend_caps(const altar_backend_t *be) { return be->ops.caps; }

int altar_backend_require(const altar_backend_t *be, unsigned caps, const char *needed_for, altar_error_t *err) {
  unsigned missing = caps & ~be->ops.caps;
  if (!missing) return ALTAR_OK;
  unsigned first = missing & -missing;
  return altar_error_set(err, ALTAR_ENOTSUP, "backend '%s' cannot %s%s%s", be->ops.name, altar_backend_cap_name(first),
                         needed_for ? ", which " : "", needed_for ? needed_for : "");
}

const altar_plugin_key_t *altar_backend_ops_keys(const altar_backend_ops_t *ops) { return ops->config_keys; }
unsigned altar_backend_ops_caps(const altar_backend_ops_t *ops) { return ops->caps; }

/* ---- operations ----------------------------------------------------------- */

const char *altar_backend_name(const altar_backend_t *be) { return be->ops.name; }

altar_verification_t altar_backend_verification(const altar_backend_t *be) { return be->ops.input_digest_verification; }

int altar_backend_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  altar_capacity_init(pcap);
  return be->ops.capacity(be, pcap, err);
}

int altar_backend_pools(altar_backend_t *be, const char **pnames, size_t max) { return be->ops.pools(be, pnames, max); }

int altar_backend_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  return be->ops.check_resources(be, r, err);
}

int altar_backend_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err) {
  return be->ops.stage_inputs(be, inputs, n, err);
}

int altar_backend_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err) {
  return be->ops.collect_outputs(be, outputs, n, err);
}

const char *altar_backend_mount_root(altar_backend_t *be) {
  const char *r = be->ops.mount_root(be);
  return r ? r : "";
}

int altar_backend_resolve_path(altar_backend_t *be, const char *logical, char **pphysical, altar_error_t *err) {
  *pphysical = NULL;
  return be->ops.resolve_path(be, logical, pphysical, err);
}

/* The two calls with output hygiene: zero outputs first, clear them on error. */
int altar_backend_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err) {
  memset(phandle, 0, sizeof *phandle);
  int rc = be->ops.submit(be, spec, phandle, err);
  if (rc < 0) altar_handle_clear(phandle);
  return rc;
}

int altar_backend_submit_start(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle,
                               altar_error_t *err) {
  memset(phandle, 0, sizeof *phandle);
  int rc = be->ops.submit_start(be, spec, phandle, err);
  if (rc < 0) altar_handle_clear(phandle);
  return rc;
}

static int poll_or_await(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                         bool await, altar_error_t *err) {
  if (n && pstatuses) memset(pstatuses, 0, n * sizeof *pstatuses);
  int rc =
      await ? be->ops.await_completion(be, handles, n, pstatuses, err) : be->ops.poll(be, handles, n, pstatuses, err);
  if (rc < 0)
    for (size_t i = 0; i < n; i++) altar_status_clear(&pstatuses[i]);
  return rc;
}

int altar_backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                       altar_error_t *err) {
  return poll_or_await(be, handles, n, pstatuses, false, err);
}

int altar_backend_await_completion(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                                   altar_status_t *pstatuses, altar_error_t *err) {
  return poll_or_await(be, handles, n, pstatuses, true, err);
}

int altar_backend_wait_change(altar_backend_t *be, int timeout_ms) { return be->ops.wait_change(be, timeout_ms); }
int altar_backend_change_fd(altar_backend_t *be) { return be->ops.change_fd(be); }

int altar_backend_kept_logs(altar_backend_t *be, altar_kept_logs_t *pkept) {
  memset(pkept, 0, sizeof *pkept);
  return be->ops.kept_logs(be, pkept);
}

int altar_backend_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err) {
  return be->ops.cancel(be, handle, err);
}

int altar_backend_recover(altar_backend_t *be, const altar_status_t *failures, size_t n, const char *const *banned,
                          size_t n_banned, altar_handle_t **phandles, size_t *pn, altar_error_t *err) {
  *phandles = NULL;
  *pn = 0;
  return be->ops.recover(be, failures, n, banned, n_banned, phandles, pn, err);
}

/* ---- lifecycle ---------------------------------------------------------- */

static const char *missing_member(const altar_backend_ops_t *ops) {
  if (!ops->name || !ops->name[0]) return "name";
  if (!ops->open) return "open";
  if (!ops->close) return "close";
  if (!ops->submit) return "submit";
  if (!ops->poll) return "poll";
  return NULL;
}

/* The first bit whose declaration and operation disagree, or 0. */
static unsigned caps_mismatch(const altar_backend_ops_t *ops) {
  if (ops->caps & ~ALTAR_BACKEND_CAPS_ALL) return ops->caps & ~ALTAR_BACKEND_CAPS_ALL;
  for (size_t i = 0; i < N_CAP_DEFS; i++)
    if (cap_defs[i].op && !(ops->caps & cap_defs[i].bit) != !has_op(ops, cap_defs[i].bit)) return cap_defs[i].bit;
  return 0;
}

static bool table_ok(const altar_backend_ops_t *ops) { return !missing_member(ops) && !caps_mismatch(ops); }

int altar_backend_check_table(const altar_backend_ops_t *ops, altar_error_t *err) {
  const char *miss = missing_member(ops);
  if (miss)
    return altar_error_set(err, ALTAR_EINVAL, "backend '%s': vtable lacks required member '%s'",
                           ops->name ? ops->name : "?", miss);
  unsigned bad = caps_mismatch(ops);
  if (!bad) return 0;
  const char *op = NULL;
  for (size_t i = 0; i < N_CAP_DEFS; i++)
    if (cap_defs[i].bit == bad) op = cap_defs[i].op;
  if (!op)
    return altar_error_set(err, ALTAR_EINVAL, "backend '%s': caps 0x%x holds bits altar does not define", ops->name,
                           bad);
  if (ops->caps & bad)
    return altar_error_set(err, ALTAR_EINVAL, "backend '%s': caps declares %s but the vtable has no '%s'", ops->name,
                           op, op);
  return altar_error_set(err, ALTAR_EINVAL,
                         "backend '%s': the vtable has '%s' but caps does not declare it (its ALTAR_BACKEND_CAP_* bit)",
                         ops->name, op);
}

/* A handle for ops with the defaults filled in, or NULL for lack of memory. */
static altar_backend_t *new_handle(const altar_backend_ops_t *ops) {
  altar_backend_t *be = calloc(1, sizeof *be);
  if (!be) return NULL;
  be->ops = *ops;
  be->table = ops;
  fill_defaults(&be->ops);
  return be;
}

altar_backend_t *altar_backend_wrap(const altar_backend_ops_t *ops, void *impl, altar_error_t *err) {
  altar_backend_t *be = NULL;
  if (!altar_backend_check_table(ops, err) && !(be = new_handle(ops)))
    altar_error_set(err, ALTAR_ENOMEM, "backend '%s': out of memory", ops->name);
  if (!be) {
    if (impl && ops->close) {
      altar_backend_t tmp = {.ops = *ops, .table = ops, .impl = impl};
      ops->close(&tmp);
    }
    return NULL;
  }
  altar_backend_set_impl(be, impl);
  return be;
}

/* altar_backend_open, naming the backend as the caller asked for it
 * ("docker" rather than its registry name "local"). */
static altar_backend_t *open_named(const altar_backend_ops_t *ops, const char *shown, const altar_strmap_t *cfg,
                                   altar_error_t *err) {
  altar_error_t local = {0};
  if (!err) err = &local;
  if (altar_backend_check_table(ops, err)) return NULL;
  if (altar_plugin_keys_check(ops->config_keys, "backend", shown, cfg, err)) return NULL;
  altar_backend_t *be = new_handle(ops);
  if (!be) {
    altar_error_set(err, ALTAR_ENOMEM, "backend '%s': out of memory", ops->name);
    return NULL;
  }
  altar_error_clear(err);
  int rc = ops->open(be, cfg, err);
  if (rc) {
    if (!err->msg[0]) altar_error_set(err, rc < 0 ? rc : ALTAR_EBACKEND, "backend '%s': open failed", ops->name);
    free(be);
    return NULL;
  }
  return be;
}

altar_backend_t *altar_backend_open(const altar_backend_ops_t *ops, const altar_strmap_t *cfg, altar_error_t *err) {
  return open_named(ops, ops->name, cfg, err);
}

void altar_backend_close(altar_backend_t *be) {
  if (!be) return;
  be->ops.close(be);
  free(be);
}

/* ---- registry: backends are the BACKEND kind of altar/registry.h ---------- */

const altar_backend_ops_t *altar_backend_lookup(const char *name) {
  if (!name) return NULL;
  return altar_registry_lookup(ALTAR_REGISTRY_BACKEND, name);
}

int altar_backend_register_alias(const char *alias, const altar_backend_ops_t *ops) {
  if (!alias || !alias[0] || !ops) return ALTAR_EINVAL;
  return altar_registry_register(ALTAR_REGISTRY_BACKEND, alias, ops, NULL);
}

int altar_backend_register(const altar_backend_ops_t *ops) {
  if (!ops || !table_ok(ops)) return ALTAR_EINVAL;
  return altar_backend_register_alias(ops->name, ops);
}

size_t altar_backend_names(const char **names, size_t max) {
  return altar_registry_names(ALTAR_REGISTRY_BACKEND, names, max);
}

altar_backend_t *altar_backend_open_by_name(const char *name, const altar_strmap_t *cfg, altar_error_t *err) {
  const void *ops = NULL;
  altar_error_t e = {0};
  int rc = altar_registry_get(ALTAR_REGISTRY_BACKEND, name ? name : "", &ops, &e);
  if (rc < 0) {
    altar_error_set(err, rc, "backend.name: %s", e.msg);
    return NULL;
  }
  return open_named(ops, name, cfg, err);
}

/* ---- reasons ------------------------------------------------------------ */

static bool is_exit_reason(const char *reason, int64_t *pcode) {
  if (strncmp(reason, "exit_", 5) != 0) return false;
  const char *p = reason + 5;
  if (*p == '-') p++;
  if (!*p) return false;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return false;
  if (strlen(p) > 18) return false;
  if (pcode) *pcode = strtoll(reason + 5, NULL, 10);
  return true;
}

bool altar_reason_deterministic(const char *reason) {
  /* Only the command's own exit code is evidence of an application error,
   * and a spec refused as invalid is refused again; every other reason may
   * pass on another host or another try. */
  return reason && (is_exit_reason(reason, NULL) || !strcmp(reason, ALTAR_REASON_INVALID_SPEC));
}

const char *altar_reason_for_start_error(int rc) {
  switch (rc) {
  case ALTAR_EINTEGRITY: return ALTAR_REASON_INPUT_DIGEST_MISMATCH;
  case ALTAR_EINVAL:
  case ALTAR_EPATH: return ALTAR_REASON_INVALID_SPEC;
  default: return ALTAR_REASON_SUBMIT_FAILED;
  }
}

altar_failure_t *altar_failure_for_exit(int64_t code, const char *detail) {
  return altar_failure_exit(code, detail, true);
}

altar_failure_t *altar_failure_for_reason(const char *reason, const char *detail) {
  int64_t code = 0;
  if (reason && is_exit_reason(reason, &code)) return altar_failure_for_exit(code, detail);
  return altar_failure_new(reason, detail, false);
}
