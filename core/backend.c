/* ExecutionBackend: the contract's defaults in one place, construction, the
 * name registry, and the reason → deterministic table every backend shares. */
#include "altar/backend.h"
#include "altar/paths.h"
#include "altar/registry.h"
#include "altar/suggest.h"

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

/* ---- defaults ----------------------------------------------------------- */

int altar__backend_def_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  (void)be;
  (void)pcap; /* already empty: no fixed slots to report */
  (void)err;
  return 0;
}

int altar__backend_def_check_resources(altar_backend_t *be, const altar_resources_t *r,
                                       altar_error_t *err) {
  (void)be;
  (void)r;
  (void)err;
  return 0;
}

int altar__backend_def_transfers(altar_backend_t *be, const altar_transfer_t *ts, size_t n,
                                 altar_error_t *err) {
  /* Managed backends move files through submit (arguments, mounts). */
  (void)be;
  (void)ts;
  (void)n;
  (void)err;
  return 0;
}

const char *altar__backend_def_mount_root(altar_backend_t *be) {
  (void)be;
  return "";
}

int altar__backend_def_resolve_path(altar_backend_t *be, const char *logical, char **pphysical,
                                    altar_error_t *err) {
  *pphysical = NULL;
  return altar_path_resolve(altar_backend_mount_root(be), logical, pphysical, err);
}

int altar__backend_def_await(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                             altar_status_t *pstatuses, altar_error_t *err) {
  (void)handles;
  (void)n;
  (void)pstatuses;
  return altar_error_set(err, ALTAR_ENOTSUP,
                         "backend '%s': await_completion is not supported; poll instead",
                         be->ops->name);
}

int altar__backend_def_wait_change(altar_backend_t *be, int timeout_ms) {
  (void)be;
  (void)timeout_ms;
  return ALTAR_ENOTSUP;
}

int altar__backend_def_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err) {
  (void)be;
  (void)handle;
  (void)err;
  return 0;
}

int altar__backend_def_recover(altar_backend_t *be, const altar_status_t *failures, size_t n,
                               const char *const *banned, size_t n_banned,
                               altar_handle_t **phandles, size_t *pn, altar_error_t *err) {
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

/* ---- the two required calls, with output hygiene ------------------------ */

int altar__backend_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle,
                          altar_error_t *err) {
  memset(phandle, 0, sizeof *phandle);
  int rc = be->ops->submit(be, spec, phandle, err);
  if (rc < 0) altar_handle_clear(phandle);
  return rc;
}

int altar__backend_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n,
                        altar_status_t *pstatuses, bool await, altar_error_t *err) {
  if (n && pstatuses) memset(pstatuses, 0, n * sizeof *pstatuses);
  int rc;
  if (await)
    rc = be->ops->await_completion ? be->ops->await_completion(be, handles, n, pstatuses, err)
                                   : altar__backend_def_await(be, handles, n, pstatuses, err);
  else
    rc = be->ops->poll(be, handles, n, pstatuses, err);
  if (rc < 0)
    for (size_t i = 0; i < n; i++) altar_status_clear(&pstatuses[i]);
  return rc;
}

/* ---- lifecycle ---------------------------------------------------------- */

static const char *missing_member(const altar_backend_ops_t *ops) {
  if (!ops->name || !ops->name[0]) return "name";
  if (!ops->create) return "create";
  if (!ops->destroy) return "destroy";
  if (!ops->submit) return "submit";
  if (!ops->poll) return "poll";
  return NULL;
}

altar_backend_t *altar_backend_wrap(const altar_backend_ops_t *ops, void *impl) {
  altar_backend_t *be = calloc(1, sizeof *be);
  altar_backend_t tmp = {.ops = ops, .impl = impl};
  if (!be) {
    if (impl && ops->destroy) ops->destroy(&tmp);
    return NULL;
  }
  *be = tmp;
  return be;
}

bool altar_backend_knows_key(const altar_backend_ops_t *ops, const char *key, char *hint, size_t hint_size) {
  if (hint_size) hint[0] = '\0';
  if (!ops->config_keys || !strcmp(key, "name")) return true;
  for (size_t i = 0; ops->config_keys[i]; i++)
    if (!strcmp(key, ops->config_keys[i])) return true;
  altar_suggest_hint(key, (const char *const *)ops->config_keys, hint, hint_size);
  return false;
}

/* altar_backend_create, naming the backend as the caller asked for it
 * ("docker" rather than its registry name "local"). */
static altar_backend_t *create_named(const altar_backend_ops_t *ops, const char *shown, const altar_strmap_t *cfg,
                                     char *errstr, size_t errstr_size) {
  const char *miss = missing_member(ops);
  if (miss) {
    snprintf(errstr, errstr_size, "backend '%s': vtable lacks required member '%s'",
             ops->name ? ops->name : "?", miss);
    return NULL;
  }
  for (size_t i = 0; cfg && i < cfg->n; i++) {
    char hint[160];
    if (altar_backend_knows_key(ops, cfg->keys[i], hint, sizeof hint)) continue;
    snprintf(errstr, errstr_size, "backend.%.64s: unknown key for the %s backend%s", cfg->keys[i], shown, hint);
    return NULL;
  }
  if (errstr_size) errstr[0] = '\0';
  void *impl = ops->create(cfg, errstr, errstr_size);
  if (!impl) {
    if (errstr_size && !errstr[0]) snprintf(errstr, errstr_size, "backend '%s': create failed", ops->name);
    return NULL;
  }
  altar_backend_t *be = altar_backend_wrap(ops, impl);
  if (!be) snprintf(errstr, errstr_size, "backend '%s': out of memory", ops->name);
  return be;
}

altar_backend_t *altar_backend_create(const altar_backend_ops_t *ops, const altar_strmap_t *cfg,
                                      char *errstr, size_t errstr_size) {
  return create_named(ops, ops->name, cfg, errstr, errstr_size);
}

void altar_backend_destroy(altar_backend_t *be) {
  if (!be) return;
  if (be->ops && be->ops->destroy) be->ops->destroy(be);
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
  if (!ops || missing_member(ops)) return ALTAR_EINVAL;
  return altar_backend_register_alias(ops->name, ops);
}

size_t altar_backend_names(const char **names, size_t max) {
  return altar_registry_names(ALTAR_REGISTRY_BACKEND, names, max);
}

altar_backend_t *altar_backend_create_by_name(const char *name, const altar_strmap_t *cfg,
                                              char *errstr, size_t errstr_size) {
  const void *ops = NULL;
  altar_error_t e = {0};
  if (altar_registry_get(ALTAR_REGISTRY_BACKEND, name ? name : "", &ops, &e) < 0) {
    snprintf(errstr, errstr_size, "backend.name: %s", e.msg);
    return NULL;
  }
  return create_named(ops, name, cfg, errstr, errstr_size);
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
  /* Only the command's own exit code is evidence of an application error;
   * every other reason may pass on another host or another try. */
  return reason && is_exit_reason(reason, NULL);
}

altar_failure_t *altar_failure_for_exit(int64_t code, const char *detail) {
  return altar_failure_exit(code, detail, true);
}

altar_failure_t *altar_failure_for_reason(const char *reason, const char *detail) {
  int64_t code = 0;
  if (reason && is_exit_reason(reason, &code)) return altar_failure_for_exit(code, detail);
  return altar_failure_new(reason, detail, false);
}
