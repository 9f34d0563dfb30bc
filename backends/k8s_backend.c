/* The kubernetes backend object: parameters, defaults, lifetime. */
#include "k8s_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void altar__k8s_config_init(altar_k8s_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->trust_verification_records = true;
  cfg->settle_timeout_s = ALTAR_K8S_SETTLE_TIMEOUT_S;
  cfg->submit_window = ALTAR_K8S_DEFAULT_SUBMIT_WINDOW;
  cfg->submit_backlog = ALTAR_K8S_DEFAULT_SUBMIT_BACKLOG;
  cfg->watch = true;
  cfg->pod_wait_interval_ms = ALTAR_K8S_DEFAULT_POD_WAIT_INTERVAL_MS;
}

static void pool_clear(altar_k8s_pool_t *p) {
  free(p->name);
  free(p->gpu_resource);
  altar_strmap_clear(&p->node_selector);
}

void altar__k8s_free(altar_k8s_t *k) {
  if (!k) return;
  /* The watch's thread uses the runtime: it goes first. */
  altar__k8s_watch_close(k->watch);
  altar__k8s_inflight_clear(k);
  altar__k8s_pace_clear(k);
  altar_strmap_clear(&k->outcome);
  altar__k8s_runtime_free(k->rt);
  free(k->ns);
  free(k->mount_root);
  free(k->pvc_name);
  free(k->pull_policy);
  free(k->verifier_image);
  free(k->staging_root);
  for (size_t i = 0; i < k->n_pools; i++) pool_clear(&k->pools[i]);
  free(k->pools);
  altar_strmap_clear(&k->wait_reason);
  altar_strmap_clear(&k->wait_detail);
  free(k);
}

static int dup_or(char **dst, const char *s, const char *def) {
  const char *v = s ? s : def;
  *dst = v ? strdup(v) : NULL;
  return v && !*dst ? ALTAR_ENOMEM : ALTAR_OK;
}

/* A DNS-1123 label: what namespaces and PVC names must be. */
static bool dns_label_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i > 0 && i + 1 < n))) return false;
  }
  return true;
}

altar_k8s_t *altar__k8s_new(const altar_k8s_config_t *cfg, altar_k8s_runtime_t *rt, altar_error_t *err) {
  altar_k8s_config_t defaults;
  if (!cfg) {
    altar__k8s_config_init(&defaults);
    cfg = &defaults;
  }
  if (!rt || !rt->ops || !rt->ops->create_job || !rt->ops->list_jobs || !rt->ops->delete_job) {
    altar__k8s_runtime_free(rt);
    altar_error_set(err, ALTAR_EINVAL, "runtime: create_job, list_jobs and delete_job are required");
    return NULL;
  }
  altar_k8s_t *k = calloc(1, sizeof *k);
  if (!k) {
    altar__k8s_runtime_free(rt);
    altar_error_set(err, ALTAR_ENOMEM, "kubernetes backend: out of memory");
    return NULL;
  }
  k->rt = rt;
  const char *ns = cfg->namespace_ ? cfg->namespace_ : altar__k8s_runtime_default_namespace(rt);
  if (dup_or(&k->ns, ns, ALTAR_K8S_DEFAULT_NAMESPACE) ||
      dup_or(&k->mount_root, cfg->mount_root, ALTAR_K8S_DEFAULT_MOUNT_ROOT) ||
      dup_or(&k->pvc_name, cfg->pvc_name, NULL) ||
      dup_or(&k->pull_policy, cfg->image_pull_policy, ALTAR_K8S_DEFAULT_PULL_POLICY) ||
      dup_or(&k->verifier_image, cfg->digest_verifier_image, ALTAR_K8S_DEFAULT_VERIFIER_IMAGE) ||
      dup_or(&k->staging_root, cfg->staging_root, NULL))
    goto oom;
  /* mount_root is a container path the argv and verifier lines are built on. */
  size_t mlen = strlen(k->mount_root);
  while (mlen > 1 && k->mount_root[mlen - 1] == '/') k->mount_root[--mlen] = '\0';
  if (k->mount_root[0] != '/' || strstr(k->mount_root, "/../") || strstr(k->mount_root, "/./")) {
    altar_error_set(err, ALTAR_EINVAL, "mount_root: must be an absolute, normalized path (got '%s')", k->mount_root);
    goto fail;
  }
  if (!dns_label_ok(k->ns)) {
    altar_error_set(err, ALTAR_EINVAL, "namespace: '%s' is not a DNS-1123 label", k->ns);
    goto fail;
  }
  if (strcmp(k->pull_policy, "IfNotPresent") && strcmp(k->pull_policy, "Always") && strcmp(k->pull_policy, "Never")) {
    altar_error_set(err, ALTAR_EINVAL, "image_pull_policy: '%s' is not Always, IfNotPresent or Never", k->pull_policy);
    goto fail;
  }
  if (cfg->backoff_limit < 0) {
    altar_error_set(err, ALTAR_EINVAL, "backoff_limit: must be >= 0");
    goto fail;
  }
  if (cfg->settle_timeout_s < 0) {
    altar_error_set(err, ALTAR_EINVAL, "settle_timeout_s: must be >= 0");
    goto fail;
  }
  if (cfg->submit_window < 1 || cfg->submit_window > ALTAR_K8S_MAX_SUBMIT_WINDOW) {
    altar_error_set(err, ALTAR_EINVAL, "submit_window: want 1..%d creates in flight (got %d)",
                    ALTAR_K8S_MAX_SUBMIT_WINDOW, cfg->submit_window);
    goto fail;
  }
  if (cfg->submit_backlog < 0 || cfg->submit_backlog > ALTAR_K8S_MAX_SUBMIT_BACKLOG) {
    altar_error_set(err, ALTAR_EINVAL, "submit_backlog: want 0..%d Jobs not yet started (got %d)",
                    ALTAR_K8S_MAX_SUBMIT_BACKLOG, cfg->submit_backlog);
    goto fail;
  }
  if (cfg->pod_wait_interval_ms < 0) {
    altar_error_set(err, ALTAR_EINVAL, "pod_wait_interval_ms: must be >= 0");
    goto fail;
  }
  k->submit_window = cfg->submit_window;
  k->submit_backlog = cfg->submit_backlog;
  altar__k8s_pace_set_start(k, ALTAR_K8S_DEFAULT_PACE_START);
  k->watch_on = cfg->watch;
  k->pod_wait_interval_ms = cfg->pod_wait_interval_ms;
  k->backoff_limit = cfg->backoff_limit;
  k->run_as_user = cfg->run_as_user;
  k->run_as_group = cfg->run_as_group;
  k->fs_group = cfg->fs_group;
  k->trust_records = cfg->trust_verification_records;
  k->extend = cfg->extend_manifest;
  k->extend_ctx = cfg->extend_ctx;
  k->settle_timeout_s = cfg->settle_timeout_s;
  k->clock = cfg->clock;
  k->sleep = cfg->sleep;
  k->clock_ctx = cfg->clock_ctx;
  if (cfg->n_pools) {
    k->pools = calloc(cfg->n_pools, sizeof *k->pools);
    if (!k->pools) goto oom;
    for (size_t i = 0; i < cfg->n_pools; i++) {
      const altar_k8s_pool_t *src = &cfg->pools[i];
      if (!src->name || !*src->name) {
        altar_error_set(err, ALTAR_EINVAL, "pools[%zu].name: must not be empty", i);
        goto fail;
      }
      altar_k8s_pool_t *p = &k->pools[k->n_pools++];
      if (dup_or(&p->name, src->name, NULL) || dup_or(&p->gpu_resource, src->gpu_resource, NULL) ||
          altar_strmap_copy(&p->node_selector, &src->node_selector))
        goto oom;
      p->max_slots = src->max_slots;
    }
  }
  return k;
oom:
  altar_error_set(err, ALTAR_ENOMEM, "kubernetes backend: out of memory");
fail:
  altar__k8s_free(k);
  return NULL;
}

const char *altar__k8s_namespace(const altar_k8s_t *k) { return k->ns; }
const char *altar__k8s_mount_root(const altar_k8s_t *k) { return k->mount_root; }
altar_k8s_runtime_t *altar__k8s_runtime(altar_k8s_t *k) { return k->rt; }

const altar_k8s_pool_t *altar__k8s_pool(const altar_k8s_t *k, const char *name) {
  for (size_t i = 0; name && i < k->n_pools; i++)
    if (!strcmp(k->pools[i].name, name)) return &k->pools[i];
  return NULL;
}

const char *altar__k8s_pool_name(const altar_resources_t *r) { return r->gpu ? r->gpu : ALTAR_POOL_CPU; }

double altar__k8s_now(const altar_k8s_t *k) {
  if (k->clock) return k->clock(k->clock_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void altar__k8s_sleep(const altar_k8s_t *k, double seconds) {
  if (k->sleep) {
    k->sleep(k->clock_ctx, seconds);
    return;
  }
  if (seconds <= 0) return;
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- as an ExecutionBackend ---- */

static altar_k8s_t *k8s_of(altar_backend_t *be) { return altar_backend_impl(be); }

static void kb_close(altar_backend_t *be) { altar__k8s_free(k8s_of(be)); }

static int kb_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  return altar__k8s_capacity(k8s_of(be), pcap, err);
}

/* The CPU pool (any cluster runs CPU tasks) and every configured pool,
 * whether or not a node of it exists now: a pool that autoscales from zero
 * needs the job that makes it grow. */
static int kb_pools(altar_backend_t *be, const char **pnames, size_t max) {
  altar_k8s_t *k = k8s_of(be);
  size_t n = 0;
  if (!altar__k8s_pool(k, ALTAR_POOL_CPU)) {
    if (n < max) pnames[n] = ALTAR_POOL_CPU;
    n++;
  }
  for (size_t i = 0; i < k->n_pools; i++) {
    if (n < max) pnames[n] = k->pools[i].name;
    n++;
  }
  return (int)n;
}

/* A GPU pool the backend was not told about is refused when pools are
 * configured; with none configured any pool name goes to the default GPU
 * resource (the cluster decides). */
static int kb_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  altar_k8s_t *k = k8s_of(be);
  if (r->gpu && k->n_pools && !altar__k8s_pool(k, r->gpu))
    return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: pool '%s' is not configured for kubernetes", r->gpu);
  if (r->gpu && r->count < 1) return altar_error_set(err, ALTAR_EINVAL, "resources.count: must be >= 1");
  return ALTAR_OK;
}

static int kb_stage(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return altar__k8s_stage_inputs(k8s_of(be), ts, n, err);
}
static int kb_collect(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  return altar__k8s_collect_outputs(k8s_of(be), ts, n, err);
}
static const char *kb_mount_root(altar_backend_t *be) { return k8s_of(be)->mount_root; }
static int kb_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  return altar__k8s_submit(k8s_of(be), spec, ph, err);
}
static int kb_submit_start(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  return altar__k8s_submit_start(k8s_of(be), spec, ph, err);
}
static int kb_wait_change(altar_backend_t *be, int timeout_ms) {
  return altar__k8s_wait_change(k8s_of(be), timeout_ms);
}
static int kb_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  return altar__k8s_poll(k8s_of(be), hs, n, pst, err);
}
static int kb_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  return altar__k8s_cancel(k8s_of(be), h, err);
}

/* ---- create() from configuration keys ---- */

static int parse_i64(const char *key, const char *s, int64_t min, int64_t *pv, altar_error_t *err) {
  char *end;
  errno = 0;
  long long v = s ? strtoll(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < min) {
    altar_error_set(err, ALTAR_ECONFIG, "%s: want an integer >= %lld (got '%s')", key, (long long)min, s ? s : "");
    return ALTAR_EINVAL;
  }
  *pv = v;
  return ALTAR_OK;
}

static int parse_bool(const char *key, const char *s, bool *pv, altar_error_t *err) {
  if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes")) *pv = true;
  else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) *pv = false;
  else {
    altar_error_set(err, ALTAR_ECONFIG, "%s: want true or false (got '%s')", key, s);
    return ALTAR_EINVAL;
  }
  return ALTAR_OK;
}

/* The pool called name in pools (grown as needed). */
static altar_k8s_pool_t *pool_at(altar_k8s_pool_t **pools, size_t *n, const char *name) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*pools)[i].name, name)) return &(*pools)[i];
  altar_k8s_pool_t *grown = realloc(*pools, (*n + 1) * sizeof *grown);
  if (!grown) return NULL;
  *pools = grown;
  altar_k8s_pool_t *p = &grown[(*n)++];
  memset(p, 0, sizeof *p);
  p->max_slots = -1;
  p->name = strdup(name);
  return p->name ? p : NULL;
}

/* One of the JSON-object keys: {"pool": value}. */
static int parse_pool_map(const char *key, const char *text, altar_k8s_pool_t **pools, size_t *n, altar_error_t *err) {
  json_error_t je;
  json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(obj) || json_object_size(obj) > ALTAR_MAX_MAP) {
    altar_error_set(err, ALTAR_ECONFIG, "%s: want a JSON object of pools (%s)", key, obj ? "not an object" : je.text);
    json_decref(obj);
    return ALTAR_EINVAL;
  }
  const char *pool;
  json_t *v;
  int rc = ALTAR_OK;
  json_object_foreach(obj, pool, v) {
    altar_k8s_pool_t *p = pool_at(pools, n, pool);
    if (!p) {
      rc = ALTAR_ENOMEM;
      altar_error_set(err, ALTAR_ECONFIG, "%s: out of memory", key);
      break;
    }
    if (!strcmp(key, "max_slots")) {
      if (!json_is_integer(v) || json_integer_value(v) < 0) {
        altar_error_set(err, ALTAR_ECONFIG, "max_slots.%s: want an integer >= 0", pool);
        rc = ALTAR_EINVAL;
        break;
      }
      p->max_slots = json_integer_value(v);
    } else if (!strcmp(key, "gpu_resources")) {
      if (!json_is_string(v) || !*json_string_value(v)) {
        altar_error_set(err, ALTAR_ECONFIG, "gpu_resources.%s: want a resource name", pool);
        rc = ALTAR_EINVAL;
        break;
      }
      free(p->gpu_resource);
      p->gpu_resource = strdup(json_string_value(v));
    } else {
      const char *lk;
      json_t *lv;
      if (!json_is_object(v)) {
        altar_error_set(err, ALTAR_ECONFIG, "pool_node_selectors.%s: want an object of node labels", pool);
        rc = ALTAR_EINVAL;
        break;
      }
      json_object_foreach(v, lk, lv) {
        if (!json_is_string(lv)) {
          altar_error_set(err, ALTAR_ECONFIG, "pool_node_selectors.%s.%s: want a string", pool, lk);
          rc = ALTAR_EINVAL;
          break;
        }
        altar_strmap_set(&p->node_selector, lk, json_string_value(lv));
      }
      if (rc) break;
    }
  }
  json_decref(obj);
  return rc;
}

/* The keys kb_open reads (the config reader refuses others). data_root
 * and slots are accepted and ignored: the cluster has the capacity. */
static const altar_plugin_key_t kb_keys[] = {
    {"namespace", "namespace of the Jobs (default: the kubeconfig's, else default)"},
    {"mount_root", "where the shared volume is mounted in the task's container"},
    {"pvc_name", "the PersistentVolumeClaim mounted at mount_root"},
    {"image_pull_policy", "the containers' imagePullPolicy"},
    {"digest_verifier_image", "image of the verify-inputs init container"},
    {"staging_root", "a host view of the shared volume, for staging inputs from the worker"},
    {"kubeconfig", "the kubeconfig file (default: KUBECONFIG, ~/.kube/config)"},
    {"context", "the kubeconfig context (default: its current-context)"},
    {"in_cluster", "auto, true or false: use the pod's service account"},
    {"data_root", "accepted and ignored (configs moved from another backend)"},
    {"slots", "accepted and ignored: the cluster has the capacity"},
    {"backoff_limit", "the Jobs' backoffLimit"},
    {"run_as_user", "the pods' securityContext.runAsUser"},
    {"run_as_group", "the pods' securityContext.runAsGroup"},
    {"fs_group", "the pods' securityContext.fsGroup"},
    {"trust_verification_records", "trust staged inputs' verification records instead of hashing again"},
    {"settle_timeout_s", "how long a finished Job's pods may take to report"},
    {"request_timeout_ms", "longest one API request may take"},
    {"max_retries", "retries of a failed API request (at most 100)"},
    {"pool_node_selectors", "{pool: {node label: value}}"},
    {"max_slots", "{pool: most Jobs at once}"},
    {"gpu_resources", "{pool: the extended resource name of its GPUs}"},
    {"submit_window", "creates in flight at once"},
    {"submit_backlog", "most Jobs created and not yet started before capacity leaves no free slot; the bound adapts "
                       "below it to the cluster's queue (0: no bound)"},
    {"watch", "watch Jobs instead of listing them on every poll"},
    {"pod_wait_interval_ms", "how often a pending pod's reason is read"},
    ALTAR_PLUGIN_KEYS_END,
};

static altar_k8s_t *kb_new(const altar_strmap_t *props, altar_error_t *err) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  altar_k8s_pool_t *pools = NULL;
  size_t n_pools = 0;
  const char *kubeconfig = NULL, *context = NULL, *in_cluster = "auto";
  int64_t req_timeout = -1, retries = -1;
  int rc = ALTAR_OK;
  for (size_t i = 0; props && i < props->n && !rc; i++) {
    const char *key = props->keys[i], *v = props->vals[i];
    int64_t iv = 0;
    if (!strcmp(key, "namespace")) cfg.namespace_ = v;
    else if (!strcmp(key, "mount_root")) cfg.mount_root = v;
    else if (!strcmp(key, "pvc_name")) cfg.pvc_name = v;
    else if (!strcmp(key, "image_pull_policy")) cfg.image_pull_policy = v;
    else if (!strcmp(key, "digest_verifier_image")) cfg.digest_verifier_image = v;
    else if (!strcmp(key, "staging_root")) cfg.staging_root = v;
    else if (!strcmp(key, "kubeconfig")) kubeconfig = v;
    else if (!strcmp(key, "context")) context = v;
    else if (!strcmp(key, "in_cluster")) in_cluster = v;
    else if (!strcmp(key, "data_root") || !strcmp(key, "slots") || !strcmp(key, "name")) continue;
    else if (!strcmp(key, "backoff_limit")) rc = parse_i64(key, v, 0, &cfg.backoff_limit, err);
    else if (!strcmp(key, "run_as_user") || !strcmp(key, "run_as_group") || !strcmp(key, "fs_group")) {
      rc = parse_i64(key, v, 0, &iv, err);
      altar_opt_i64_t *dst = !strcmp(key, "run_as_user")    ? &cfg.run_as_user
                             : !strcmp(key, "run_as_group") ? &cfg.run_as_group
                                                            : &cfg.fs_group;
      *dst = (altar_opt_i64_t){true, iv};
    } else if (!strcmp(key, "trust_verification_records"))
      rc = parse_bool(key, v, &cfg.trust_verification_records, err);
    else if (!strcmp(key, "settle_timeout_s")) {
      rc = parse_i64(key, v, 0, &iv, err);
      cfg.settle_timeout_s = (double)iv;
    } else if (!strcmp(key, "request_timeout_ms")) rc = parse_i64(key, v, 1, &req_timeout, err);
    else if (!strcmp(key, "max_retries")) rc = parse_i64(key, v, 0, &retries, err);
    else if (!strcmp(key, "submit_window")) {
      rc = parse_i64(key, v, 1, &iv, err);
      if (!rc && iv > ALTAR_K8S_MAX_SUBMIT_WINDOW) {
        altar_error_set(err, ALTAR_ECONFIG, "submit_window: want 1..%d creates in flight (got %s)",
                        ALTAR_K8S_MAX_SUBMIT_WINDOW, v);
        rc = ALTAR_EINVAL;
      }
      cfg.submit_window = (int)iv;
    } else if (!strcmp(key, "submit_backlog")) {
      rc = parse_i64(key, v, 0, &iv, err);
      if (!rc && iv > ALTAR_K8S_MAX_SUBMIT_BACKLOG) {
        altar_error_set(err, ALTAR_ECONFIG, "submit_backlog: want 0..%d Jobs not yet started (got %s)",
                        ALTAR_K8S_MAX_SUBMIT_BACKLOG, v);
        rc = ALTAR_EINVAL;
      }
      cfg.submit_backlog = (int)iv;
    } else if (!strcmp(key, "watch")) rc = parse_bool(key, v, &cfg.watch, err);
    else if (!strcmp(key, "pod_wait_interval_ms")) rc = parse_i64(key, v, 0, &cfg.pod_wait_interval_ms, err);
    else if (!strcmp(key, "pool_node_selectors") || !strcmp(key, "max_slots") || !strcmp(key, "gpu_resources"))
      rc = parse_pool_map(key, v, &pools, &n_pools, err);
    else rc = altar_plugin_keys_refuse(kb_keys, NULL, "backend", "kubernetes", key, err);
  }
  altar_k8s_t *k = NULL;
  if (!rc) {
    altar_k8s_http_config_t http;
    altar__k8s_http_config_init(&http);
    altar_error_t e = {0};
    bool cluster = !strcmp(in_cluster, "true") ||
                   (!strcmp(in_cluster, "auto") && !kubeconfig && getenv("KUBERNETES_SERVICE_HOST"));
    if (strcmp(in_cluster, "true") && strcmp(in_cluster, "false") && strcmp(in_cluster, "auto"))
      rc = altar_error_set(&e, ALTAR_EINVAL, "in_cluster: want auto, true or false (got '%s')", in_cluster);
    else if (cluster) rc = altar__k8s_in_cluster_load(NULL, &http, &e);
    else rc = altar__k8s_kubeconfig_load(kubeconfig, context, &http, &e);
    if (req_timeout > 0) http.timeout_ms = (long)req_timeout;
    if (retries >= 0) http.max_retries = (int)(retries > 100 ? 100 : retries);
    altar_k8s_runtime_t *rt = rc ? NULL : altar__k8s_http_runtime_new(&http, &e);
    altar__k8s_http_config_clear(&http);
    cfg.pools = pools;
    cfg.n_pools = n_pools;
    if (rt) k = altar__k8s_new(&cfg, rt, &e);
    if (!k) altar_error_set(err, ALTAR_ECONFIG, "%s", e.msg);
  }
  for (size_t i = 0; i < n_pools; i++) pool_clear(&pools[i]);
  free(pools);
  return k;
}

/* ops.open: the impl from kb_new, its message as the error. */
static int kb_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  void *impl = kb_new(cfg, err);
  if (!impl) return err->code = ALTAR_ECONFIG; /* every refusal of a key's value is one */
  altar_backend_set_impl(be, impl);
  return 0;
}

const altar_backend_ops_t altar_backend_kubernetes_ops = {
    .name = "kubernetes",
    .caps = ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_POOLS | ALTAR_BACKEND_CAP_CANCEL |
            ALTAR_BACKEND_CAP_WAIT_CHANGE | ALTAR_BACKEND_CAP_SUBMIT_START | ALTAR_BACKEND_CAP_ADOPT,
    .config_keys = kb_keys,
    .input_digest_verification = ALTAR_VERIFY_TASK,
    .open = kb_open,
    .close = kb_close,
    .capacity = kb_capacity,
    .pools = kb_pools,
    .check_resources = kb_check_resources,
    .stage_inputs = kb_stage,
    .collect_outputs = kb_collect,
    .mount_root = kb_mount_root,
    .submit = kb_submit,
    .submit_start = kb_submit_start,
    .poll = kb_poll,
    .wait_change = kb_wait_change,
    .cancel = kb_cancel,
};

altar_backend_t *altar__k8s_backend_wrap(altar_k8s_t *k) {
  if (!k) return NULL;
  return altar_backend_wrap(&altar_backend_kubernetes_ops, k, NULL);
}
