/* The modal backend object: parameters, defaults, lifetime, and its
 * ExecutionBackend vtable. */
#include "modal_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pool → accelerator when none is configured: the normal GPU pool on an
 * A10G (Modal's common general-purpose GPU), the a100 pool on an A100. */
static const char *const default_pools[][2] = {{ALTAR_GPU_POOL_NORMAL, "A10G"}, {ALTAR_GPU_POOL_A100, "A100"}};

void altar_modal_free(altar_modal_t *m) {
  if (!m) return;
  altar_modal_runtime_free(m->rt);
  free(m->app_name);
  free(m->volume_name);
  free(m->mount_root);
  altar_strmap_clear(&m->accelerators);
  free(m);
}

altar_modal_runtime_t *altar_modal_runtime(altar_modal_t *m) { return m->rt; }

/* Modal object names: letters, digits, '-', '_', '.', at most 64. */
static bool modal_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
          c == '.'))
      return false;
  }
  return true;
}

altar_modal_t *altar_modal_new(const altar_modal_config_t *cfg, altar_modal_runtime_t *rt, altar_error_t *err) {
  altar_modal_config_t none = {0};
  if (!cfg) cfg = &none;
  const altar_modal_runtime_ops_t *ops = rt ? rt->ops : NULL;
  if (!ops || !ops->run_sandbox || !ops->poll_sandbox || !ops->upload || !ops->download) {
    altar_modal_runtime_free(rt);
    altar_error_set(err, ALTAR_EINVAL, "runtime: run_sandbox, poll_sandbox, upload and download are required");
    return NULL;
  }
  altar_modal_t *m = calloc(1, sizeof *m);
  if (!m) {
    altar_modal_runtime_free(rt);
    altar_error_set(err, ALTAR_ENOMEM, "modal backend: out of memory");
    return NULL;
  }
  m->rt = rt;
  m->storage = cfg->storage;
  m->app_name = strdup(cfg->app_name ? cfg->app_name : ALTAR_MODAL_DEFAULT_APP);
  m->volume_name = strdup(cfg->volume_name ? cfg->volume_name : ALTAR_MODAL_DEFAULT_VOLUME);
  m->mount_root = strdup(cfg->mount_root ? cfg->mount_root : ALTAR_MODAL_MOUNT_ROOT);
  int rc = !m->app_name || !m->volume_name || !m->mount_root ? ALTAR_ENOMEM : ALTAR_OK;
  if (!rc && cfg->pool_accelerators) rc = altar_strmap_copy(&m->accelerators, cfg->pool_accelerators);
  for (size_t i = 0; !rc && !cfg->pool_accelerators && i < sizeof default_pools / sizeof default_pools[0]; i++)
    rc = altar_strmap_set(&m->accelerators, default_pools[i][0], default_pools[i][1]);
  if (rc) {
    altar_error_set(err, ALTAR_ENOMEM, "modal backend: out of memory");
  } else if (!modal_name_ok(m->app_name)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "app_name: '%s' is not a valid Modal name", m->app_name);
  } else if (!modal_name_ok(m->volume_name)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "volume_name: '%s' is not a valid Modal name", m->volume_name);
  } else if (m->mount_root[0] != '/') {
    rc = altar_error_set(err, ALTAR_EINVAL, "mount_root: must be an absolute path");
  }
  for (size_t i = 0; !rc && i < m->accelerators.n; i++)
    if (!*m->accelerators.vals[i])
      rc =
          altar_error_set(err, ALTAR_EINVAL, "pool_accelerators.%s: must name an accelerator", m->accelerators.keys[i]);
  if (rc) {
    altar_modal_free(m);
    return NULL;
  }
  return m;
}

/* ---- as an ExecutionBackend ---- */

static altar_modal_t *modal_of(altar_backend_t *be) { return altar_backend_impl(be); }

static void mb_close(altar_backend_t *be) { altar_modal_free(modal_of(be)); }

/* No capacity slot: Modal autoscales, so the default empty report stands. */

/* CPU tasks, and every pool with an accelerator mapped (configured, or the
 * known defaults): Modal starts any of them on demand. */
static int mb_pools(altar_backend_t *be, const char **pnames, size_t max) {
  const altar_strmap_t *accs = &modal_of(be)->accelerators;
  size_t n = 0;
  if (n < max) pnames[n] = ALTAR_POOL_CPU;
  n++;
  for (size_t i = 0; i < accs->n; i++) {
    if (!strcmp(accs->keys[i], ALTAR_POOL_CPU)) continue;
    if (n < max) pnames[n] = accs->keys[i];
    n++;
  }
  return (int)n;
}

static int mb_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  char *gpu = NULL;
  int rc = altar_modal_accelerator(modal_of(be), r, &gpu, err);
  free(gpu);
  return rc;
}
static int mb_stage(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return altar_modal_stage_inputs(modal_of(be), ts, n, err);
}
static int mb_collect(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return altar_modal_collect_outputs(modal_of(be), ts, n, err);
}
static const char *mb_mount_root(altar_backend_t *be) { return modal_of(be)->mount_root; }
static int mb_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  return altar_modal_submit(modal_of(be), spec, ph, err);
}
static int mb_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  return altar_modal_poll(modal_of(be), hs, n, pst, err);
}
static int mb_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  return altar_modal_cancel(modal_of(be), h, err);
}

/* A positive number of milliseconds in v, for key. */
static bool parse_ms(const char *key, const char *v, long *pms, altar_error_t *err) {
  char *end;
  errno = 0;
  *pms = strtol(v, &end, 10);
  if (!*v || *end || errno || *pms <= 0) {
    altar_error_set(err, ALTAR_ECONFIG, "%s: want a positive integer (got '%s')", key, v);
    return false;
  }
  return true;
}

/* The keys mb_open reads (the config reader refuses others). data_root
 * and slots are accepted and ignored: Modal autoscales. */
static const altar_plugin_key_t mb_keys[] = {
    {"app_name", "the Modal app the sandboxes run in"},
    {"volume_name", "the Modal Volume mounted at mount_root"},
    {"mount_root", "where the Volume is mounted in a sandbox"},
    {"python", "the interpreter that runs the Modal SDK bridge"},
    {"bridge", "the bridge script (default: the installed one)"},
    {"reply_timeout_ms", "longest the bridge may take to answer"},
    {"run_timeout_ms", "longest the bridge may take to start a sandbox"},
    {"pool_accelerators", "{pool: Modal GPU type}"},
    {"data_root", "accepted and ignored (configs moved from another backend)"},
    {"slots", "accepted and ignored: Modal autoscales"},
    ALTAR_PLUGIN_KEYS_END,
};

static altar_modal_t *mb_new(const altar_strmap_t *props, altar_error_t *err) {
  altar_modal_config_t cfg = {0};
  altar_modal_bridge_config_t bcfg = {0};
  altar_strmap_t accs = {0};
  bool have_accs = false;
  for (size_t i = 0; props && i < props->n; i++) {
    const char *key = props->keys[i], *v = props->vals[i];
    if (!strcmp(key, "app_name")) cfg.app_name = v;
    else if (!strcmp(key, "volume_name")) cfg.volume_name = v;
    else if (!strcmp(key, "mount_root")) cfg.mount_root = v;
    else if (!strcmp(key, "python")) bcfg.python = v;
    else if (!strcmp(key, "bridge")) bcfg.bridge = v;
    else if (!strcmp(key, "data_root") || !strcmp(key, "slots") || !strcmp(key, "name")) continue;
    else if (!strcmp(key, "reply_timeout_ms") || !strcmp(key, "run_timeout_ms")) {
      long *pms = !strcmp(key, "reply_timeout_ms") ? &bcfg.reply_timeout_ms : &bcfg.run_timeout_ms;
      if (!parse_ms(key, v, pms, err)) {
        altar_strmap_clear(&accs);
        return NULL;
      }
    } else if (!strcmp(key, "pool_accelerators")) {
      json_error_t je;
      json_t *obj = json_loads(v, JSON_REJECT_DUPLICATES, &je);
      const char *pool;
      json_t *acc;
      bool ok = json_is_object(obj) && json_object_size(obj) <= ALTAR_MAX_MAP;
      json_object_foreach(obj, pool, acc) {
        if (!json_is_string(acc)) ok = false;
        else altar_strmap_set(&accs, pool, json_string_value(acc));
      }
      json_decref(obj);
      if (!ok) {
        altar_error_set(err, ALTAR_ECONFIG, "pool_accelerators: want a JSON object of pool → accelerator strings");
        altar_strmap_clear(&accs);
        return NULL;
      }
      have_accs = true;
    } else {
      altar_plugin_keys_refuse(mb_keys, NULL, "backend", "modal", key, err);
      altar_strmap_clear(&accs);
      return NULL;
    }
  }
  if (have_accs) cfg.pool_accelerators = &accs;
  altar_error_t e = {0};
  altar_modal_runtime_t *rt = altar_modal_bridge_runtime_new(&bcfg, &e);
  altar_modal_t *m = rt ? altar_modal_new(&cfg, rt, &e) : NULL;
  if (!m) altar_error_set(err, ALTAR_ECONFIG, "%s", e.msg);
  altar_strmap_clear(&accs);
  return m;
}

/* ops.open: the impl from mb_new, its message as the error. */
static int mb_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  void *impl = mb_new(cfg, err);
  if (!impl) return err->code = ALTAR_ECONFIG;
  altar_backend_set_impl(be, impl);
  return 0;
}

const altar_backend_ops_t altar_backend_modal_ops = {
    .name = "modal",
    .caps = ALTAR_BACKEND_CAP_POOLS | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_ADOPT,
    .config_keys = mb_keys,
    .input_digest_verification = ALTAR_VERIFY_TASK,
    .open = mb_open,
    .close = mb_close,
    .pools = mb_pools,
    .check_resources = mb_check_resources,
    .stage_inputs = mb_stage,
    .collect_outputs = mb_collect,
    .mount_root = mb_mount_root,
    .submit = mb_submit,
    .poll = mb_poll,
    .cancel = mb_cancel,
};

altar_backend_t *altar_modal_backend_wrap(altar_modal_t *m) {
  if (!m) return NULL;
  return altar_backend_wrap(&altar_backend_modal_ops, m, NULL);
}
