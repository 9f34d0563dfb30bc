/* The Job manifest: build_manifest, label-safe labels with the originals in
 * annotations, the verify-inputs init container, and the manifest digest. */
#include "k8s_int.h"

#include "altar/codec.h"
#include "altar/digest.h"
#include "altar/paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX 63
/* Room kept for "-" + 8 hex characters of the original's hash. */
#define LABEL_HASH_HEX 8

static bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static bool label_char_ok(char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; }

static bool label_ok(const char *s, bool allow_empty) {
  size_t n = strlen(s);
  if (n == 0) return allow_empty;
  if (n > LABEL_MAX || !is_alnum(s[0]) || !is_alnum(s[n - 1])) return false;
  for (size_t i = 0; i < n; i++)
    if (!label_char_ok(s[i])) return false;
  return true;
}

/* Replaces what a label cannot hold, trims to alphanumeric ends, and appends
 * a short hash of the original so two originals never meet on one label. */
static char *label_fix(const char *s, bool allow_empty) {
  if (label_ok(s, allow_empty)) return strdup(s);
  char hex[ALTAR_DIGEST_BUFSZ];
  if (altar_sha256_bytes(s, strlen(s), hex, NULL)) return NULL;
  char body[LABEL_MAX + 1];
  size_t n = 0;
  for (const char *p = s; *p && n < LABEL_MAX - LABEL_HASH_HEX - 1; p++) body[n++] = label_char_ok(*p) ? *p : '-';
  body[n] = '\0';
  size_t start = 0;
  while (start < n && !is_alnum(body[start])) start++;
  while (n > start && !is_alnum(body[n - 1])) n--;
  body[n] = '\0';
  char out[LABEL_MAX + 1];
  if (n > start) snprintf(out, sizeof out, "%s-%.*s", body + start, LABEL_HASH_HEX, hex + strlen(ALTAR_DIGEST_PREFIX));
  else snprintf(out, sizeof out, "%.*s", LABEL_HASH_HEX, hex + strlen(ALTAR_DIGEST_PREFIX));
  return strdup(out);
}

/* A DNS-1123 subdomain: dot-separated labels of [a-z0-9-] with alphanumeric
 * ends, at most 253 characters (what a label key's prefix must be). */
static bool dns_subdomain_ok(const char *s, size_t n) {
  if (n == 0 || n > 253) return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '.') {
      char c = s[i];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
      continue;
    }
    /* one dot-separated part: s[start, i) */
    if (i == start || s[start] == '-' || s[i - 1] == '-') return false;
    start = i + 1;
  }
  return true;
}

bool altar__k8s_label_key_ok(const char *s) {
  if (!s) return false;
  const char *slash = strchr(s, '/');
  if (!slash) return label_ok(s, false);
  return dns_subdomain_ok(s, (size_t)(slash - s)) && label_ok(slash + 1, false);
}

bool altar__k8s_label_value_ok(const char *s) { return s && label_ok(s, true); }

char *altar__k8s_label_safe(const char *s) { return label_fix(s ? s : "", true); }
/* A key Kubernetes accepts (with or without a prefix) passes unchanged;
 * anything else becomes one safe name part. */
char *altar__k8s_label_key_safe(const char *s) {
  if (altar__k8s_label_key_ok(s)) return strdup(s);
  return label_fix(s ? s : "", false);
}

/* ---- small jansson helpers: a failed set marks the builder, checked once ---- */

typedef struct mb {
  bool oom;
} mb_t;

static json_t *set(mb_t *b, json_t *obj, const char *key, json_t *val) {
  if (!val || json_object_set_new(obj, key, val)) b->oom = true;
  return val;
}
static json_t *obj_at(mb_t *b, json_t *obj, const char *key) {
  json_t *o = json_object_get(obj, key);
  return o ? o : set(b, obj, key, json_object());
}
static void push(mb_t *b, json_t *arr, json_t *val) {
  if (!val || json_array_append_new(arr, val)) b->oom = true;
}
static json_t *strmap_json(mb_t *b, const altar_strmap_t *m) {
  json_t *o = json_object();
  if (!o) b->oom = true;
  for (size_t i = 0; o && i < m->n; i++) set(b, o, m->keys[i], json_string(m->vals[i]));
  return o;
}
/* Compact JSON with sorted keys: annotation text that is stable. */
static json_t *json_text(mb_t *b, json_t *v) {
  char *s = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(v);
  if (!s) {
    b->oom = true;
    return NULL;
  }
  json_t *r = json_string(s);
  free(s);
  return r;
}

/* own_key: one of our "altar.dev/…" keys, already valid with its prefix. */
static int label_set(mb_t *b, json_t *labels, const char *key, const char *val, bool own_key) {
  char *k = own_key ? strdup(key) : altar__k8s_label_key_safe(key), *v = altar__k8s_label_safe(val);
  if (!k || !v) b->oom = true;
  else set(b, labels, k, json_string(v));
  free(k);
  free(v);
  return ALTAR_OK;
}

static int resources_json(altar_k8s_t *k, mb_t *b, const altar_spec_t *spec, json_t *container, altar_error_t *err) {
  const altar_resources_t *r = &spec->resources;
  json_t *res = obj_at(b, container, "resources");
  json_t *limits = obj_at(b, res, "limits");
  if (r->gpu) {
    const altar_k8s_pool_t *pool = altar__k8s_pool(k, r->gpu);
    if (!pool && k->n_pools)
      return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: pool '%s' is not configured for this backend", r->gpu);
    if (r->count < 1) return altar_error_set(err, ALTAR_EINVAL, "resources.count: must be >= 1");
    char count[32];
    snprintf(count, sizeof count, "%lld", (long long)r->count);
    set(b, limits, pool && pool->gpu_resource ? pool->gpu_resource : ALTAR_K8S_DEFAULT_GPU_RESOURCE,
        json_string(count));
  }
  if (r->memory_mb.set) {
    if (r->memory_mb.v <= 0) return altar_error_set(err, ALTAR_EINVAL, "resources.memory_mb: must be > 0");
    char mem[40];
    snprintf(mem, sizeof mem, "%lldMi", (long long)r->memory_mb.v);
    set(b, limits, "memory", json_string(mem));
    set(b, obj_at(b, res, "requests"), "memory", json_string(mem));
  }
  return ALTAR_OK;
}

int altar__k8s_build_manifest(altar_k8s_t *k, const altar_spec_t *spec, json_t **pmanifest, altar_error_t *err) {
  *pmanifest = NULL;
  char name[ALTAR_JOB_NAME_MAX + 1], key[ALTAR_TASK_KEY_LEN + 1];
  int rc = altar_spec_job_name(spec, name, err);
  if (!rc) rc = altar_spec_identity(spec, key, err);
  if (rc) return rc;
  mb_t b = {false};
  json_t *m = json_object();
  if (!m) return altar_error_set(err, ALTAR_ENOMEM, "manifest: out of memory");
  set(&b, m, "apiVersion", json_string("batch/v1"));
  set(&b, m, "kind", json_string("Job"));

  /* Labels: the spec's, made label-safe, plus ours. The exact originals go
   * in an annotation, so nothing the spec said is lost. */
  json_t *labels = json_object();
  if (!labels) b.oom = true;
  for (size_t i = 0; labels && i < spec->labels.n; i++)
    label_set(&b, labels, spec->labels.keys[i], spec->labels.vals[i], false);
  if (labels) {
    set(&b, labels, ALTAR_K8S_MANAGED_LABEL, json_string("true"));
    label_set(&b, labels, ALTAR_K8S_KIND_LABEL, spec->kind, true);
    label_set(&b, labels, ALTAR_K8S_POOL_LABEL, altar__k8s_pool_name(&spec->resources), true);
  }
  json_t *meta = obj_at(&b, m, "metadata");
  set(&b, meta, "name", json_string(name));
  set(&b, meta, "namespace", json_string(k->ns));
  set(&b, meta, "labels", labels);
  json_t *ann = obj_at(&b, meta, "annotations");
  set(&b, ann, ALTAR_K8S_LABELS_ANNOTATION, json_text(&b, strmap_json(&b, &spec->labels)));
  set(&b, ann, ALTAR_K8S_TASK_KEY_ANNOTATION, json_string(key));
  if (spec->plugin_identity)
    set(&b, ann, ALTAR_K8S_PLUGIN_IDENTITY_ANNOTATION, json_text(&b, strmap_json(&b, spec->plugin_identity)));

  json_t *jspec = obj_at(&b, m, "spec");
  set(&b, jspec, "backoffLimit", json_integer(k->backoff_limit));
  /* The deadline counts from the Job's start, scheduling and pulls included. */
  if (spec->timeout_s.set) set(&b, jspec, "activeDeadlineSeconds", json_integer(spec->timeout_s.v));
  json_t *tmpl = obj_at(&b, jspec, "template");
  set(&b, obj_at(&b, tmpl, "metadata"), "labels", json_deep_copy(labels));
  json_t *pod = obj_at(&b, tmpl, "spec");
  set(&b, pod, "restartPolicy", json_string("Never"));

  if (k->run_as_user.set || k->run_as_group.set || k->fs_group.set) {
    json_t *sc = obj_at(&b, pod, "securityContext");
    if (k->run_as_user.set) set(&b, sc, "runAsUser", json_integer(k->run_as_user.v));
    if (k->run_as_group.set) set(&b, sc, "runAsGroup", json_integer(k->run_as_group.v));
    if (k->fs_group.set) set(&b, sc, "fsGroup", json_integer(k->fs_group.v));
  }
  const altar_k8s_pool_t *pool = altar__k8s_pool(k, altar__k8s_pool_name(&spec->resources));
  if (pool && pool->node_selector.n) set(&b, pod, "nodeSelector", strmap_json(&b, &pool->node_selector));
  if (spec->n_avoid_hosts) {
    /* Hosts a driver saw failing: a hard anti-affinity on the hostname. */
    json_t *values = json_array();
    for (size_t i = 0; values && i < spec->n_avoid_hosts; i++) push(&b, values, json_string(spec->avoid_hosts[i]));
    json_t *expr = json_object(), *exprs = json_array(), *term = json_object(), *terms = json_array();
    if (!expr || !exprs || !term || !terms) b.oom = true;
    if (expr) {
      set(&b, expr, "key", json_string("kubernetes.io/hostname"));
      set(&b, expr, "operator", json_string("NotIn"));
      set(&b, expr, "values", values);
    }
    if (exprs) push(&b, exprs, expr);
    if (term) set(&b, term, "matchExpressions", exprs);
    if (terms) push(&b, terms, term);
    json_t *aff = obj_at(&b, obj_at(&b, pod, "affinity"), "nodeAffinity");
    set(&b, obj_at(&b, aff, "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms", terms);
  }

  json_t *c = json_object(), *argv = json_array(), *containers = json_array();
  if (!c || !argv || !containers) b.oom = true;
  for (size_t i = 0; argv && i < spec->n_command; i++) push(&b, argv, json_string(spec->command[i]));
  if (c) {
    set(&b, c, "name", json_string(ALTAR_K8S_TASK_CONTAINER));
    set(&b, c, "image", json_string(spec->image));
    set(&b, c, "imagePullPolicy", json_string(k->pull_policy));
    /* A failed container's last log lines become its termination message,
     * which poll puts into the failure's detail. */
    set(&b, c, "terminationMessagePolicy", json_string("FallbackToLogsOnError"));
    set(&b, c, "command", argv);
    rc = resources_json(k, &b, spec, c, err);
    json_t *mounts = json_array(), *mnt = json_object();
    if (!mounts || !mnt) b.oom = true;
    if (mnt) {
      set(&b, mnt, "name", json_string(ALTAR_K8S_VOLUME_NAME));
      set(&b, mnt, "mountPath", json_string(k->mount_root));
    }
    if (mounts) push(&b, mounts, mnt);
    set(&b, c, "volumeMounts", mounts);
  }
  if (containers) push(&b, containers, c);
  set(&b, pod, "containers", containers);
  json_t *vols = json_array(), *vol = json_object();
  if (!vols || !vol) b.oom = true;
  if (vol) {
    set(&b, vol, "name", json_string(ALTAR_K8S_VOLUME_NAME));
    if (k->pvc_name) set(&b, obj_at(&b, vol, "persistentVolumeClaim"), "claimName", json_string(k->pvc_name));
    else set(&b, vol, "emptyDir", json_object());
  }
  if (vols) push(&b, vols, vol);
  set(&b, pod, "volumes", vols);

  if (!rc && b.oom) rc = altar_error_set(err, ALTAR_ENOMEM, "manifest: out of memory");
  if (!rc && k->extend) rc = k->extend(k->extend_ctx, spec, m, err);
  if (rc) {
    json_decref(m);
    return rc;
  }
  *pmanifest = m;
  return ALTAR_OK;
}

/* Every volume mount of the pod's containers, once per volume name, so the
 * verifier sees exactly the files the task will read. */
static json_t *all_mounts(mb_t *b, json_t *pod) {
  json_t *out = json_array();
  if (!out) {
    b->oom = true;
    return NULL;
  }
  size_t i, j, l;
  json_t *c, *mnt, *seen;
  json_array_foreach(json_object_get(pod, "containers"), i, c) {
    json_array_foreach(json_object_get(c, "volumeMounts"), j, mnt) {
      const char *mn = json_string_value(json_object_get(mnt, "name"));
      const char *mp = json_string_value(json_object_get(mnt, "mountPath"));
      bool dup = false;
      json_array_foreach(out, l, seen) {
        if (mp && json_string_value(json_object_get(seen, "mountPath")) &&
            !strcmp(mp, json_string_value(json_object_get(seen, "mountPath"))))
          dup = true;
      }
      if (mn && mp && !dup) push(b, out, json_deep_copy(mnt));
    }
  }
  return out;
}

int altar__k8s_add_verify_container(altar_k8s_t *k, const altar_spec_t *spec, json_t *manifest, altar_error_t *err) {
  size_t n = 0;
  for (size_t i = 0; i < spec->n_inputs; i++)
    if (spec->inputs[i].digest) n++;
  if (!n) return ALTAR_OK;
  json_t *pod = json_object_get(json_object_get(json_object_get(manifest, "spec"), "template"), "spec");
  if (!json_is_object(pod))
    return altar_error_set(err, ALTAR_EINVAL, "manifest: spec.template.spec missing (extend_manifest?)");
  mb_t b = {false};
  json_t *argv = json_array();
  if (!argv) return altar_error_set(err, ALTAR_ENOMEM, "manifest: out of memory");
  push(&b, argv, json_string("sh"));
  push(&b, argv, json_string("-c"));
  push(&b, argv, json_string(altar_digest_verifier_program(k->trust_records)));
  push(&b, argv, json_string("verify"));
  for (size_t i = 0; i < spec->n_inputs; i++) {
    const altar_transfer_t *t = &spec->inputs[i];
    if (!t->digest) continue;
    char field[48];
    snprintf(field, sizeof field, "inputs[%zu].digest", i);
    int rc = altar_digest_check(field, t->digest, err);
    char *phys = NULL;
    if (!rc) rc = altar_path_resolve(k->mount_root, t->logical_path, &phys, err);
    if (rc) {
      if (rc == ALTAR_EPATH) altar_error_prefix(err, "inputs[%zu].logical_path", i);
      json_decref(argv);
      return rc;
    }
    /* sha256sum -c line: "<hex>  <path>". */
    size_t len = strlen(phys) + ALTAR_DIGEST_HEX_LEN + 3;
    char *line = malloc(len);
    if (line) snprintf(line, len, "%s  %s", t->digest + strlen(ALTAR_DIGEST_PREFIX), phys);
    push(&b, argv, line ? json_string(line) : NULL);
    free(line);
    free(phys);
  }
  json_t *c = json_object();
  if (!c) b.oom = true;
  if (c) {
    set(&b, c, "name", json_string(ALTAR_K8S_VERIFY_CONTAINER));
    set(&b, c, "image", json_string(k->verifier_image));
    set(&b, c, "imagePullPolicy", json_string(k->pull_policy));
    /* A failed container's last log lines become its termination message,
     * which poll puts into the failure's detail. */
    set(&b, c, "terminationMessagePolicy", json_string("FallbackToLogsOnError"));
    set(&b, c, "command", argv);
    set(&b, c, "volumeMounts", all_mounts(&b, pod));
  } else {
    json_decref(argv);
  }
  json_t *inits = json_object_get(pod, "initContainers");
  if (!json_is_array(inits)) inits = set(&b, pod, "initContainers", json_array());
  /* First, so no other init container runs on unverified inputs. */
  if (inits && c && json_array_insert_new(inits, 0, c)) b.oom = true;
  if (b.oom) return altar_error_set(err, ALTAR_ENOMEM, "manifest: out of memory");
  return ALTAR_OK;
}

int altar__k8s_manifest_digest(const json_t *manifest, char out[72], altar_error_t *err) {
  json_t *copy = json_deep_copy(manifest);
  if (!copy) return altar_error_set(err, ALTAR_ENOMEM, "manifest digest: out of memory");
  json_t *ann = json_object_get(json_object_get(copy, "metadata"), "annotations");
  if (ann) json_object_del(ann, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION);
  char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(copy);
  if (!text) return altar_error_set(err, ALTAR_ENOMEM, "manifest digest: out of memory");
  int rc = altar_sha256_bytes(text, strlen(text), out, err);
  free(text);
  return rc;
}

static int stamp(json_t *manifest, const char *digest, altar_error_t *err) {
  json_t *meta = json_object_get(manifest, "metadata");
  if (!json_is_object(meta)) return altar_error_set(err, ALTAR_EINVAL, "manifest: metadata missing");
  mb_t b = {false};
  json_t *ann = obj_at(&b, meta, "annotations");
  if (ann) set(&b, ann, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION, json_string(digest));
  return b.oom ? altar_error_set(err, ALTAR_ENOMEM, "manifest: out of memory") : ALTAR_OK;
}

int altar__k8s_stamp_digest(json_t *manifest, altar_error_t *err) {
  char digest[72];
  int rc = altar__k8s_manifest_digest(manifest, digest, err);
  return rc ? rc : stamp(manifest, digest, err);
}

/* The digest of the manifest spec would render to without avoid_hosts. It is
 * rendered again, not edited, so that whatever extend_manifest derives from
 * the hosts is left out too. */
static int placement_free_digest(altar_k8s_t *k, const altar_spec_t *spec, char out[72], altar_error_t *err) {
  altar_spec_t bare = *spec; /* shallow: borrowed, never freed */
  bare.avoid_hosts = NULL;
  bare.n_avoid_hosts = 0;
  json_t *m = NULL;
  int rc = altar__k8s_build_manifest(k, &bare, &m, err);
  if (!rc) rc = altar__k8s_add_verify_container(k, &bare, m, err);
  if (!rc) rc = altar__k8s_manifest_digest(m, out, err);
  json_decref(m);
  return rc;
}

int altar__k8s_render(altar_k8s_t *k, const altar_spec_t *spec, json_t **pmanifest, altar_error_t *err) {
  json_t *m = NULL;
  int rc = altar__k8s_build_manifest(k, spec, &m, err);
  if (!rc) rc = altar__k8s_add_verify_container(k, spec, m, err);
  /* avoid_hosts is placement, not identity: a retry sent away from a host
   * must meet the still-active Job of its task with the same digest, or
   * submit would refuse it as different work. */
  if (!rc && spec->n_avoid_hosts) {
    char digest[72];
    rc = placement_free_digest(k, spec, digest, err);
    if (!rc) rc = stamp(m, digest, err);
  } else if (!rc) {
    rc = altar__k8s_stamp_digest(m, err);
  }
  if (rc) {
    json_decref(m);
    m = NULL;
  }
  *pmanifest = m;
  return rc;
}
