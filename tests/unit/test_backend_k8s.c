/* The kubernetes backend against a fake KubernetesRuntime that records every
 * call and serves programmed Jobs: the manifest, label safety, every
 * adopt/replace branch of submit, poll, capacity, cancel, the runtime's
 * defaults, and failure explanation from API objects. */
#include "altar/codec.h"
#include "altar/digest.h"
#include "backends/k8s_api.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"
#include "core/unconst.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake runtime ---- */

typedef struct fake_job {
  altar_k8s_job_info_t info;
  json_t *manifest;
  int deleting;             /* > 0: being deleted; read_job answers NULL this many more times */
  altar_failure_t *failure; /* what describe_failure answers, or NULL */
  json_t *status;           /* kubelet mode: the Job's status and its pods */
  json_t *pods;
  int ticks;
} fake_job_t;

typedef struct fake {
  fake_job_t jobs[32];
  size_t n;
  int next_uid;
  char log[8192]; /* "create:NAME;read:NAME;delete:NAME:UID;list:SEL;describe:NAME;" */
  int n_create, n_read, n_list, n_delete, n_describe;
  int create_error;      /* non-zero: create_job fails with it */
  bool async_delete;     /* delete leaves the Job "being deleted" for 2 reads */
  int read_null_forever; /* read_job always answers NULL */
  /* Called after read_job answered: tests use it to race a newer Job in. */
  void (*after_read)(struct fake *f, const char *name);
  /* Kubelet mode (the contract suite): each list "runs" the Jobs a step. */
  bool kubelet;
  /* clock for submit's settling */
  double now;
  int n_sleep;
  /* Nodes list_nodes answers (a JSON array of Node objects) and its calls. */
  const char *nodes_json;
  int n_nodes, nodes_error;
  /* list_pod_waits: calls, Job names asked about (by a job-name selector),
   * whether one asked for every pending pod, and the Job whose pod waits. */
  int n_waits, n_wait_names;
  bool waits_unfiltered;
  const char *waiting_job;
} fake_t;

static void logf_(fake_t *f, const char *a, const char *b, const char *c) {
  size_t len = strlen(f->log);
  snprintf(f->log + len, sizeof f->log - len, "%s:%s%s%s;", a, b ? b : "", c ? ":" : "", c ? c : "");
}

static fake_job_t *fake_find(fake_t *f, const char *name) {
  for (size_t i = 0; i < f->n; i++)
    if (!strcmp(f->jobs[i].info.name, name)) return &f->jobs[i];
  return NULL;
}

static void fake_remove(fake_t *f, fake_job_t *j) {
  altar__k8s_job_info_clear(&j->info);
  json_decref(j->manifest);
  json_decref(j->status);
  json_decref(j->pods);
  altar_failure_free(j->failure);
  size_t i = (size_t)(j - f->jobs);
  memmove(&f->jobs[i], &f->jobs[i + 1], (f->n - i - 1) * sizeof *j);
  f->n--;
}

/* Adds a Job as if someone created it; manifest may be NULL. */
static fake_job_t *fake_add(fake_t *f, const char *name, altar_state_t state, const char *digest) {
  CU_ASSERT_FATAL(f->n < 32);
  fake_job_t *j = &f->jobs[f->n++];
  memset(j, 0, sizeof *j);
  char uid[32];
  snprintf(uid, sizeof uid, "uid-%d", ++f->next_uid);
  j->info.name = strdup(name);
  j->info.uid = strdup(uid);
  j->info.state = state;
  altar_strmap_set(&j->info.labels, ALTAR_K8S_MANAGED_LABEL, "true");
  if (digest) altar_strmap_set(&j->info.annotations, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION, digest);
  return j;
}

static int f_create(void *impl, const json_t *manifest, const char *ns, char **pname, char **puid, altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  const json_t *meta = json_object_get(manifest, "metadata");
  const char *name = json_string_value(json_object_get(meta, "name"));
  logf_(f, "create", name, NULL);
  f->n_create++;
  if (f->create_error) return altar_error_set(err, f->create_error, "fake: create refused");
  if (fake_find(f, name)) return altar_error_set(err, ALTAR_EJOBEXISTS, "fake: %s exists", name);
  fake_job_t *j = fake_add(f, name, ALTAR_STATE_PENDING, NULL);
  altar_strmap_clear(&j->info.labels);
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(meta, "labels"), k, v) altar_strmap_set(&j->info.labels, k, json_string_value(v));
  json_object_foreach(json_object_get(meta, "annotations"), k, v)
      altar_strmap_set(&j->info.annotations, k, json_string_value(v));
  j->manifest = json_deep_copy(manifest);
  *pname = strdup(name);
  *puid = strdup(j->info.uid);
  return 0;
}

static bool selector_matches(const char *sel, const altar_strmap_t *labels) {
  if (!sel) return true;
  char key[128];
  const char *eq = strchr(sel, '=');
  if (!eq || (size_t)(eq - sel) >= sizeof key) return false;
  memcpy(key, sel, (size_t)(eq - sel));
  key[eq - sel] = '\0';
  const char *v = altar_strmap_get(labels, key);
  return v && !strcmp(v, eq + 1);
}

static void kubelet_tick(fake_t *f);

static int f_list(void *impl, const char *ns, const char *sel, altar_k8s_job_info_t **pjobs, size_t *pn,
                  altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  (void)err;
  if (f->kubelet) kubelet_tick(f);
  logf_(f, "list", sel ? sel : "*", NULL);
  f->n_list++;
  *pjobs = calloc(f->n + 1, sizeof **pjobs);
  for (size_t i = 0; i < f->n; i++)
    if (selector_matches(sel, &f->jobs[i].info.labels)) altar__k8s_job_info_copy(&(*pjobs)[(*pn)++], &f->jobs[i].info);
  return 0;
}

static int f_read(void *impl, const char *name, const char *ns, altar_k8s_job_info_t **pjob, altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  (void)err;
  logf_(f, "read", name, NULL);
  f->n_read++;
  fake_job_t *j = fake_find(f, name);
  if (!j || f->read_null_forever) return 0;
  if (j->deleting) {
    if (--j->deleting == 0) fake_remove(f, j);
    return 0;
  }
  *pjob = calloc(1, sizeof **pjob);
  altar__k8s_job_info_copy(*pjob, &j->info);
  if (f->after_read) f->after_read(f, name);
  return 0;
}

static int f_delete(void *impl, const char *name, const char *ns, const char *uid, altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  (void)err;
  logf_(f, "delete", name, uid ? uid : "-");
  f->n_delete++;
  fake_job_t *j = fake_find(f, name);
  if (j && (!uid || !strcmp(uid, j->info.uid))) {
    if (f->async_delete) j->deleting = 2;
    else fake_remove(f, j);
  }
  return 0;
}

static int f_describe(void *impl, const char *name, const char *ns, altar_failure_t **pf, altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  logf_(f, "describe", name, NULL);
  f->n_describe++;
  fake_job_t *j = fake_find(f, name);
  if (!j) return altar_error_set(err, ALTAR_ENOTFOUND, "fake: no job %s", name);
  if (j->status) {
    /* Explained from API-shaped objects, as the real runtime does. */
    json_t *job = json_pack("{s:{s:s}, s:O}", "metadata", "name", name, "status", j->status);
    *pf = altar__k8s_explain_failure(job, j->pods);
    json_decref(job);
    return *pf ? 0 : ALTAR_ENOMEM;
  }
  *pf = j->failure ? altar_failure_dup(j->failure) : altar_failure_new(ALTAR_REASON_JOB_FAILED, NULL, false);
  return 0;
}

static void f_destroy(void *impl) {
  fake_t *f = impl;
  while (f->n) fake_remove(f, &f->jobs[0]);
  free(f);
}

static const altar_k8s_runtime_ops_t fake_ops = {
    .name = "fake",
    .create_job = f_create,
    .list_jobs = f_list,
    .read_job = f_read,
    .delete_job = f_delete,
    .describe_failure = f_describe,
    .destroy = f_destroy,
};
static int f_nodes(void *impl, altar_k8s_node_info_t **pnodes, size_t *pn, altar_error_t *err) {
  fake_t *f = impl;
  f->n_nodes++;
  if (f->nodes_error) return altar_error_set(err, f->nodes_error, "list nodes: 403 Forbidden");
  json_t *arr = json_loads(f->nodes_json ? f->nodes_json : "[]", 0, NULL);
  size_t n = json_array_size(arr);
  *pnodes = calloc(n ? n : 1, sizeof **pnodes);
  *pn = 0;
  for (size_t i = 0; i < n; i++)
    if (altar__k8s_node_info_from_json(json_array_get(arr, i), &(*pnodes)[*pn], err) == 0) (*pn)++;
  json_decref(arr);
  return ALTAR_OK;
}

/* The full runtime and a node list. */
static const altar_k8s_runtime_ops_t fake_nodes_ops = {
    .name = "fake-nodes",
    .create_job = f_create,
    .list_jobs = f_list,
    .read_job = f_read,
    .delete_job = f_delete,
    .describe_failure = f_describe,
    .list_nodes = f_nodes,
    .destroy = f_destroy,
};
/* Only the required calls: read_job and describe_failure take the defaults. */
static const altar_k8s_runtime_ops_t fake_min_ops = {
    .name = "fake-min",
    .create_job = f_create,
    .list_jobs = f_list,
    .delete_job = f_delete,
    .destroy = f_destroy,
};

static double fake_clock(void *ctx) { return ((fake_t *)ctx)->now; }
static void fake_sleep(void *ctx, double s) {
  fake_t *f = ctx;
  f->now += s;
  f->n_sleep++;
}

/* ---- fixtures ---- */

static altar_k8s_t *make_backend(const altar_k8s_runtime_ops_t *ops, fake_t **pf, altar_k8s_config_t *cfg_in) {
  fake_t *f = calloc(1, sizeof *f);
  CU_ASSERT_FATAL(f != NULL);
  altar_k8s_config_t cfg;
  if (cfg_in) cfg = *cfg_in;
  else altar__k8s_config_init(&cfg);
  cfg.clock = fake_clock;
  cfg.sleep = fake_sleep;
  cfg.clock_ctx = f;
  altar_error_t err = {0};
  altar_k8s_t *k = altar__k8s_new(&cfg, altar__k8s_runtime_new(ops, f), &err);
  if (!k) fprintf(stderr, "altar__k8s_new: %s\n", err.msg);
  CU_ASSERT_FATAL(k != NULL);
  *pf = f;
  return k;
}

static const char *DIG = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

static altar_spec_t *sample_spec(void) {
  altar_spec_t *s = altar_spec_new("chrombpnet", "registry.example/img:1");
  altar_spec_add_arg(s, "python");
  altar_spec_add_arg(s, "-m");
  altar_spec_add_arg(s, "score");
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_set_label(s, "fold", "3");
  altar_spec_set_label(s, "model/id", "ENCSR000 (GM12878)");
  altar_spec_add_input(s, "file:///data/m.tar", "models/m.tar", NULL, DIG);
  altar_spec_add_input(s, "file:///data/peaks.bed", "./genomes/hg38/peaks.bed", NULL, NULL);
  altar_spec_set_gpu(s, ALTAR_GPU_POOL_A100, 2);
  s->timeout_s = (altar_opt_i64_t){true, 600};
  s->resources.memory_mb = (altar_opt_i64_t){true, 2048};
  return s;
}

static json_t *render(altar_k8s_t *k, const altar_spec_t *s) {
  json_t *m = NULL;
  altar_error_t err = {0};
  int rc = altar__k8s_render(k, s, &m, &err);
  if (rc) fprintf(stderr, "render: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  return m;
}

static const char *digest_of(const json_t *m) {
  return json_string_value(json_object_get(json_object_get(json_object_get(m, "metadata"), "annotations"),
                                           ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION));
}

static void job_name_of(const altar_spec_t *s, char out[ALTAR_JOB_NAME_MAX + 1]) {
  CU_ASSERT_FATAL(altar_spec_job_name(s, out, NULL) == 0);
}

/* ---- label safety ---- */

static bool valid_label(const char *s) {
  size_t n = strlen(s);
  if (n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool an = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!an && c != '-' && c != '_' && c != '.') return false;
    if ((i == 0 || i == n - 1) && !an) return false;
  }
  return true;
}

static void test_label_safe(void) {
  char *a = altar__k8s_label_safe("GM12878.v2_x-1");
  CU_ASSERT_STRING_EQUAL(a, "GM12878.v2_x-1"); /* already safe: unchanged */
  free(a);
  a = altar__k8s_label_safe("");
  CU_ASSERT_STRING_EQUAL(a, ""); /* an empty value is a valid value */
  free(a);
  const char *bad[] = {"ENCSR000 (GM12878)",
                       "-lead",
                       "trail-",
                       "a/b",
                       "ünï",
                       "...",
                       "0123456789012345678901234567890123456789012345678901234567890123456789"};
  char *outs[7];
  for (int i = 0; i < 7; i++) {
    outs[i] = altar__k8s_label_safe(bad[i]);
    CU_ASSERT_FATAL(outs[i] != NULL);
    CU_ASSERT(valid_label(outs[i]));
    CU_ASSERT(strcmp(outs[i], bad[i]) != 0);
  }
  /* Originals that sanitize alike stay apart through the hash. */
  char *x = altar__k8s_label_safe("a b"), *y = altar__k8s_label_safe("a_b"), *z = altar__k8s_label_safe("a:b");
  CU_ASSERT(strcmp(x, z) != 0);
  CU_ASSERT_STRING_EQUAL(y, "a_b");
  free(x);
  free(y);
  free(z);
  for (int i = 0; i < 7; i++) free(outs[i]);
  char *key = altar__k8s_label_key_safe("");
  CU_ASSERT(strlen(key) > 0 && valid_label(key));
  free(key);
  /* Keys Kubernetes accepts pass unchanged, prefix and all. */
  const char *good_keys[] = {"kwok.altar.test/exit-code", "example.com/Name_1.x", "app", "a/b",
                             "sub-1.example.org/x-y_z"};
  for (size_t i = 0; i < sizeof good_keys / sizeof *good_keys; i++) {
    CU_ASSERT(altar__k8s_label_key_ok(good_keys[i]));
    key = altar__k8s_label_key_safe(good_keys[i]);
    CU_ASSERT_STRING_EQUAL(key, good_keys[i]);
    free(key);
  }
  /* Invalid ones are made safe: a valid name part, distinct from the input. */
  const char *bad_keys[] = {"Upper.Case/x", "a/b/c",      "/x",      "x/",        "-a.com/b",
                            "a..b/c",       "ex ample/x", "x/-lead", "fold index"};
  for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
    CU_ASSERT_FALSE(altar__k8s_label_key_ok(bad_keys[i]));
    key = altar__k8s_label_key_safe(bad_keys[i]);
    CU_ASSERT_FATAL(key != NULL);
    CU_ASSERT(valid_label(key));
    CU_ASSERT(altar__k8s_label_key_ok(key));
    CU_ASSERT(strcmp(key, bad_keys[i]) != 0);
    free(key);
  }
  CU_ASSERT(altar__k8s_label_value_ok("GM12878.v2"));
  CU_ASSERT(altar__k8s_label_value_ok(""));
  CU_ASSERT_FALSE(altar__k8s_label_value_ok("a b"));
}

/* ---- the manifest ---- */

static void test_manifest_shape(void) {
  altar_k8s_pool_t pools[1] = {{.name = "a100", .max_slots = 4, .gpu_resource = NULL}};
  altar_strmap_set(&pools[0].node_selector, "cloud.google.com/gke-accelerator", "nvidia-tesla-a100");
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.namespace_ = "altar";
  cfg.pvc_name = "shared";
  cfg.run_as_user = (altar_opt_i64_t){true, 1000};
  cfg.fs_group = (altar_opt_i64_t){true, 2000};
  cfg.pools = pools;
  cfg.n_pools = 1;
  cfg.digest_verifier_image = "busybox:test";
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, &cfg);
  altar_strmap_clear(&pools[0].node_selector);
  altar_spec_t *s = sample_spec();
  altar_spec_add_avoid_host(s, "node-7");
  json_t *m = render(k, s);
  char name[64];
  job_name_of(s, name);

  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "apiVersion")), "batch/v1");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "kind")), "Job");
  json_t *meta = json_object_get(m, "metadata");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meta, "name")), name);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meta, "namespace")), "altar");
  json_t *labels = json_object_get(meta, "labels");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "fold")), "3");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, ALTAR_K8S_MANAGED_LABEL)), "true");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, ALTAR_K8S_POOL_LABEL)), "a100");
  const char *k_;
  json_t *v;
  json_object_foreach(labels, k_, v) {
    CU_ASSERT(altar__k8s_label_key_ok(k_));
    CU_ASSERT(valid_label(json_string_value(v)));
  }
  /* "model/id" is a valid prefixed key: kept; its value had to change. */
  CU_ASSERT_PTR_NOT_NULL(json_object_get(labels, "model/id"));
  CU_ASSERT(strcmp(json_string_value(json_object_get(labels, "model/id")), "ENCSR000 (GM12878)") != 0);
  /* The originals, exactly, in the annotation. */
  json_t *ann = json_object_get(meta, "annotations");
  json_t *orig = json_loads(json_string_value(json_object_get(ann, ALTAR_K8S_LABELS_ANNOTATION)), 0, NULL);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(orig, "model/id")), "ENCSR000 (GM12878)");
  CU_ASSERT_EQUAL(json_object_size(orig), 3);
  json_decref(orig);
  char key[65];
  altar_spec_identity(s, key, NULL);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ann, ALTAR_K8S_TASK_KEY_ANNOTATION)), key);

  json_t *spec = json_object_get(m, "spec");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(spec, "activeDeadlineSeconds")), 600);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(spec, "backoffLimit")), 0);
  json_t *tmpl = json_object_get(spec, "template");
  CU_ASSERT(json_equal(json_object_get(json_object_get(tmpl, "metadata"), "labels"), labels));
  json_t *pod = json_object_get(tmpl, "spec");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(pod, "restartPolicy")), "Never");
  json_t *sc = json_object_get(pod, "securityContext");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(sc, "runAsUser")), 1000);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(sc, "fsGroup")), 2000);
  CU_ASSERT(json_object_get(sc, "runAsGroup") == NULL);
  CU_ASSERT_STRING_EQUAL(
      json_string_value(json_object_get(json_object_get(pod, "nodeSelector"), "cloud.google.com/gke-accelerator")),
      "nvidia-tesla-a100");
  json_t *expr = json_array_get(
      json_object_get(json_array_get(json_object_get(json_object_get(json_object_get(json_object_get(pod, "affinity"),
                                                                                     "nodeAffinity"),
                                                                     "requiredDuringSchedulingIgnoredDuringExecution"),
                                                     "nodeSelectorTerms"),
                                     0),
                      "matchExpressions"),
      0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(expr, "key")), "kubernetes.io/hostname");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(expr, "operator")), "NotIn");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(expr, "values"), 0)), "node-7");

  json_t *c = json_array_get(json_object_get(pod, "containers"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "image")), "registry.example/img:1");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "imagePullPolicy")), "IfNotPresent");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "terminationMessagePolicy")), "FallbackToLogsOnError");
  CU_ASSERT_EQUAL(json_array_size(json_object_get(c, "command")), 3);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(c, "command"), 2)), "score");
  json_t *res = json_object_get(c, "resources");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(res, "limits"), "nvidia.com/gpu")), "2");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(res, "limits"), "memory")), "2048Mi");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(res, "requests"), "memory")), "2048Mi");
  json_t *mnt = json_array_get(json_object_get(c, "volumeMounts"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(mnt, "mountPath")), "/mnt/volume");
  json_t *vol = json_array_get(json_object_get(pod, "volumes"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(vol, "persistentVolumeClaim"), "claimName")),
                         "shared");

  /* The verify-inputs init container: the sh verifier over the same mounts,
   * one line per digest-bearing input. */
  json_t *init = json_array_get(json_object_get(pod, "initContainers"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(init, "name")), ALTAR_K8S_VERIFY_CONTAINER);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(init, "image")), "busybox:test");
  json_t *argv = json_object_get(init, "command");
  CU_ASSERT_EQUAL(json_array_size(argv), 5);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(argv, 0)), "sh");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(argv, 1)), "-c");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(argv, 2)), altar_digest_verifier_program(true));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(argv, 4)),
                         "1111111111111111111111111111111111111111111111111111111111111111  /mnt/volume/models/m.tar");
  CU_ASSERT(json_equal(json_object_get(init, "volumeMounts"), json_object_get(c, "volumeMounts")));

  /* The digest covers everything but avoid_hosts (placement, not identity)
   * and is reproducible: it is that of the same spec rendered without it. */
  char d[72];
  CU_ASSERT_EQUAL(altar__k8s_manifest_digest(m, d, NULL), 0);
  CU_ASSERT_STRING_NOT_EQUAL(d, digest_of(m));
  altar_spec_t *bare = altar_spec_dup(s);
  CU_ASSERT_FATAL(bare != NULL);
  for (size_t i = 0; i < bare->n_avoid_hosts; i++) free(bare->avoid_hosts[i]);
  free(bare->avoid_hosts);
  bare->avoid_hosts = NULL;
  bare->n_avoid_hosts = 0;
  json_t *mb = render(k, bare);
  CU_ASSERT_EQUAL(altar__k8s_manifest_digest(mb, d, NULL), 0);
  CU_ASSERT_STRING_EQUAL(d, digest_of(m));
  CU_ASSERT_STRING_EQUAL(digest_of(mb), digest_of(m));
  json_decref(mb);
  altar_spec_free(bare);
  json_t *m2 = render(k, s);
  CU_ASSERT(json_equal(m, m2));
  json_decref(m2);
  s->resources.memory_mb.v = 4096;
  m2 = render(k, s);
  CU_ASSERT(strcmp(digest_of(m2), digest_of(m)) != 0);
  json_decref(m2);

  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_manifest_defaults(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_spec_t *s = altar_spec_new("score", "img");
  altar_spec_add_arg(s, "true");
  json_t *m = render(k, s);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(m, "metadata"), "namespace")), "default");
  json_t *pod = json_object_get(json_object_get(json_object_get(m, "spec"), "template"), "spec");
  CU_ASSERT(json_object_get(json_object_get(m, "spec"), "activeDeadlineSeconds") == NULL);
  CU_ASSERT(json_object_get(pod, "initContainers") == NULL); /* no digests: nothing to verify */
  CU_ASSERT(json_object_get(pod, "securityContext") == NULL);
  CU_ASSERT(json_object_get(pod, "affinity") == NULL);
  CU_ASSERT(json_object_get(json_array_get(json_object_get(pod, "volumes"), 0), "emptyDir") != NULL);
  json_t *limits =
      json_object_get(json_object_get(json_array_get(json_object_get(pod, "containers"), 0), "resources"), "limits");
  CU_ASSERT_EQUAL(json_object_size(limits), 0);
  json_decref(m);
  /* An unknown pool on a backend with configured pools is refused, naming the field. */
  altar__k8s_free(k);
  altar_k8s_pool_t pools[1] = {{.name = "gpu", .max_slots = 2}};
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.pools = pools;
  cfg.n_pools = 1;
  k = make_backend(&fake_ops, &f, &cfg);
  altar_spec_set_gpu(s, "h100", 1);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_render(k, s, &m, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "resources.gpu") != NULL);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static int extend_tolerations(void *ctx, const altar_spec_t *spec, json_t *m, altar_error_t *err) {
  (void)ctx;
  (void)spec;
  (void)err;
  json_t *pod = json_object_get(json_object_get(json_object_get(m, "spec"), "template"), "spec");
  json_t *c = json_object();
  json_object_set_new(c, "name", json_string("sidecar"));
  json_t *mounts = json_array(), *mnt = json_object();
  json_object_set_new(mnt, "name", json_string("extra"));
  json_object_set_new(mnt, "mountPath", json_string("/extra"));
  json_array_append_new(mounts, mnt);
  json_object_set_new(c, "volumeMounts", mounts);
  json_array_append_new(json_object_get(pod, "containers"), c);
  return 0;
}

static void test_manifest_extend_mounts(void) {
  /* A volume added by extend_manifest is mounted by the verifier too. */
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.extend_manifest = extend_tolerations;
  cfg.trust_verification_records = false;
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, &cfg);
  altar_spec_t *s = sample_spec();
  json_t *m = render(k, s);
  json_t *pod = json_object_get(json_object_get(json_object_get(m, "spec"), "template"), "spec");
  json_t *init = json_array_get(json_object_get(pod, "initContainers"), 0);
  CU_ASSERT_EQUAL(json_array_size(json_object_get(init, "volumeMounts")), 2);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(init, "command"), 2)),
                         altar_digest_verifier_program(false));
  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_bad_params(void) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.namespace_ = "Not_A_Namespace";
  fake_t *f = calloc(1, sizeof *f);
  altar_error_t err = {0};
  CU_ASSERT(altar__k8s_new(&cfg, altar__k8s_runtime_new(&fake_ops, f), &err) == NULL);
  CU_ASSERT(strstr(err.msg, "namespace") != NULL);
  altar__k8s_config_init(&cfg);
  cfg.image_pull_policy = "Sometimes";
  f = calloc(1, sizeof *f);
  CU_ASSERT(altar__k8s_new(&cfg, altar__k8s_runtime_new(&fake_ops, f), &err) == NULL);
  CU_ASSERT(strstr(err.msg, "image_pull_policy") != NULL);
  altar__k8s_config_init(&cfg);
  cfg.mount_root = "relative/root";
  f = calloc(1, sizeof *f);
  CU_ASSERT(altar__k8s_new(&cfg, altar__k8s_runtime_new(&fake_ops, f), &err) == NULL);
  CU_ASSERT(strstr(err.msg, "mount_root") != NULL);
}

/* ---- submit: create, adopt, refuse, replace, settle ---- */

static void test_submit_creates(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_spec_t *s = sample_spec();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit(k, s, &h, &err), 0);
  char name[64];
  job_name_of(s, name);
  CU_ASSERT_STRING_EQUAL(h.external_id, name);
  CU_ASSERT_STRING_EQUAL(h.backend, "kubernetes");
  CU_ASSERT(altar_strmap_equal(&h.labels, &s->labels)); /* the originals, not the label-safe ones */
  CU_ASSERT_EQUAL(f->n_create, 1);
  CU_ASSERT_EQUAL(f->n_read, 0);
  CU_ASSERT_EQUAL(f->n, 1);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* A Job of the spec's name in `state`, rendered from the same manifest or not. */
static void adopt_case(altar_state_t state, bool same_digest, int want_rc) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_spec_t *s = sample_spec();
  json_t *m = render(k, s);
  char name[64];
  job_name_of(s, name);
  fake_add(f, name, state, same_digest ? digest_of(m) : "sha256:other");
  altar_handle_t h;
  altar_error_t err = {0};
  int rc = altar__k8s_submit(k, s, &h, &err);
  CU_ASSERT_EQUAL(rc, want_rc);
  if (rc == 0) {
    CU_ASSERT_STRING_EQUAL(h.external_id, name);
    CU_ASSERT(altar_strmap_equal(&h.labels, &s->labels));
    altar_handle_clear(&h);
  } else {
    CU_ASSERT(strstr(err.msg, "different manifest") != NULL);
    CU_ASSERT(strstr(err.msg, name) != NULL);
  }
  CU_ASSERT_EQUAL(f->n_create, 1);
  CU_ASSERT_EQUAL(f->n_read, 1);
  CU_ASSERT_EQUAL(f->n_delete, 0); /* an active Job is never deleted */
  CU_ASSERT_STRING_EQUAL(f->jobs[0].info.uid, "uid-1");
  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_submit_adopts_pending(void) { adopt_case(ALTAR_STATE_PENDING, true, 0); }
static void test_submit_adopts_running(void) { adopt_case(ALTAR_STATE_RUNNING, true, 0); }
static void test_submit_refuses_pending_other(void) { adopt_case(ALTAR_STATE_PENDING, false, ALTAR_EJOBEXISTS); }
static void test_submit_refuses_running_other(void) { adopt_case(ALTAR_STATE_RUNNING, false, ALTAR_EJOBEXISTS); }

/* avoid_hosts is placement, not identity (#27): the digest ignores it, and a
 * retry placed away from a host meets the still-active Job of the same task
 * and adopts it instead of failing with EJOBEXISTS. */
static void test_submit_avoid_hosts_adopts(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_spec_t *s = sample_spec();
  json_t *plain = render(k, s);
  altar_handle_t h1, h2;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit(k, s, &h1, &err), 0);
  f->jobs[0].info.state = ALTAR_STATE_RUNNING;

  CU_ASSERT_EQUAL_FATAL(altar_spec_add_avoid_host(s, "node-7"), 0);
  json_t *placed = render(k, s);
  CU_ASSERT_STRING_EQUAL(digest_of(placed), digest_of(plain));
  /* The anti-affinity is still in the Job that would be created. */
  json_t *aff = json_object_get(json_object_get(json_object_get(json_object_get(placed, "spec"), "template"), "spec"),
                                "affinity");
  CU_ASSERT(aff != NULL);

  int rc = altar__k8s_submit(k, s, &h2, &err);
  if (rc) fprintf(stderr, "submit with avoid_hosts: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc == 0) {
    CU_ASSERT_STRING_EQUAL(h2.external_id, h1.external_id);
    altar_handle_clear(&h2);
  }
  CU_ASSERT_EQUAL(f->n, 1);
  CU_ASSERT_EQUAL(f->n_delete, 0);
  CU_ASSERT_STRING_EQUAL(f->jobs[0].info.uid, "uid-1");
  altar_handle_clear(&h1);
  json_decref(plain);
  json_decref(placed);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void replace_case(altar_state_t state, bool async_delete) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  f->async_delete = async_delete;
  altar_spec_t *s = sample_spec();
  json_t *m = render(k, s);
  char name[64];
  job_name_of(s, name);
  /* Even a finished Job with the same manifest is not taken as the result. */
  fake_add(f, name, state, digest_of(m));
  altar_handle_t h;
  altar_error_t err = {0};
  int rc = altar__k8s_submit(k, s, &h, &err);
  if (rc) fprintf(stderr, "submit: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(h.external_id, name);
  /* Deleted with its uid as the precondition, then created afresh. */
  char want[256];
  snprintf(want, sizeof want, "create:%s;read:%s;delete:%s:uid-1;create:%s;", name, name, name, name);
  if (!async_delete) CU_ASSERT_STRING_EQUAL(f->log, want);
  CU_ASSERT(strncmp(f->log, want, strlen(want) - strlen(name) - 8) == 0);
  CU_ASSERT_EQUAL(f->n, 1);
  CU_ASSERT_STRING_EQUAL(f->jobs[0].info.uid, "uid-2");
  CU_ASSERT_EQUAL(f->jobs[0].info.state, ALTAR_STATE_PENDING);
  if (async_delete) {
    CU_ASSERT(f->n_create >= 3); /* conflicts while the old Job is being deleted */
    CU_ASSERT(f->n_sleep >= 2);
  }
  altar_handle_clear(&h);
  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_submit_replaces_succeeded(void) { replace_case(ALTAR_STATE_SUCCEEDED, false); }
static void test_submit_replaces_failed(void) { replace_case(ALTAR_STATE_FAILED, false); }
static void test_submit_waits_out_deletion(void) { replace_case(ALTAR_STATE_FAILED, true); }

/* Between our read and our delete, the finished Job was replaced by a newer
 * one of the same manifest: the uid precondition spares the newer Job, and
 * submit adopts it instead of deleting it. */
static const char *race_digest;
static void race_after_read(fake_t *f, const char *name) {
  fake_job_t *j = fake_find(f, name);
  if (j && !strcmp(j->info.uid, "uid-1")) {
    fake_remove(f, j);
    fake_add(f, name, ALTAR_STATE_RUNNING, race_digest); /* uid-2 */
  }
}

static void test_submit_uid_precondition(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_spec_t *s = sample_spec();
  json_t *m = render(k, s);
  char name[64];
  job_name_of(s, name);
  fake_add(f, name, ALTAR_STATE_SUCCEEDED, digest_of(m)); /* uid-1 */
  race_digest = digest_of(m);
  f->after_read = race_after_read;
  altar_handle_t h;
  altar_error_t err = {0};
  int rc = altar__k8s_submit(k, s, &h, &err);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(h.external_id, name);
  CU_ASSERT_EQUAL(f->n, 1);
  CU_ASSERT_STRING_EQUAL(f->jobs[0].info.uid, "uid-2"); /* the newer Job survived */
  char want[200];
  snprintf(want, sizeof want, "delete:%s:uid-1;", name);
  CU_ASSERT(strstr(f->log, want) != NULL);
  CU_ASSERT_EQUAL(f->n_delete, 1);
  CU_ASSERT_EQUAL(f->n_create, 2);
  altar_handle_clear(&h);
  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* A delete carrying an outdated uid leaves the current Job alone. */
static void test_delete_precondition_spares_newer(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  fake_add(f, "job-a", ALTAR_STATE_RUNNING, NULL); /* uid-1 */
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_runtime_delete_job(altar__k8s_runtime(k), "job-a", "default", "uid-0", &err), 0);
  CU_ASSERT_EQUAL(f->n, 1);
  CU_ASSERT_EQUAL(altar__k8s_runtime_delete_job(altar__k8s_runtime(k), "job-a", "default", "uid-1", &err), 0);
  CU_ASSERT_EQUAL(f->n, 0);
  altar__k8s_free(k);
}

static void test_submit_never_settles(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  f->read_null_forever = 1;
  altar_spec_t *s = sample_spec();
  char name[64];
  job_name_of(s, name);
  fake_add(f, name, ALTAR_STATE_RUNNING, NULL);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, &err), ALTAR_EJOBEXISTS);
  CU_ASSERT(strstr(err.msg, "did not settle") != NULL);
  CU_ASSERT(f->now >= 60.0 && f->now < 61.0); /* about a minute of (fake) waiting */
  CU_ASSERT(f->n_sleep > 3 && f->n_sleep < 100);
  CU_ASSERT(h.external_id == NULL);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_submit_other_errors(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  f->create_error = ALTAR_EBACKEND;
  altar_spec_t *s = sample_spec();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "create refused") != NULL);
  CU_ASSERT_EQUAL(f->n_read, 0);
  /* Bad input is refused before any API call. */
  f->create_error = 0;
  f->n_create = 0;
  altar_spec_add_input(s, "file:///x", "../escape", NULL, DIG);
  CU_ASSERT_NOT_EQUAL(altar__k8s_submit(k, s, &h, &err), 0);
  CU_ASSERT(strstr(err.msg, "inputs[2]") != NULL);
  CU_ASSERT_EQUAL(f->n_create, 0);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* Without read_job the default finds the Job through list_jobs. */
static void test_default_read_job(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_min_ops, &f, NULL);
  altar_spec_t *s = sample_spec();
  json_t *m = render(k, s);
  char name[64];
  job_name_of(s, name);
  fake_add(f, name, ALTAR_STATE_RUNNING, digest_of(m));
  fake_add(f, "other", ALTAR_STATE_RUNNING, NULL);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, &err), 0);
  CU_ASSERT_EQUAL(f->n_list, 1);
  CU_ASSERT_EQUAL(f->n_read, 0);
  altar_handle_clear(&h);
  altar_k8s_job_info_t *info = NULL;
  CU_ASSERT_EQUAL(altar__k8s_runtime_read_job(altar__k8s_runtime(k), "absent", "default", &info, &err), 0);
  CU_ASSERT(info == NULL);
  json_decref(m);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* ---- poll, capacity, cancel ---- */

static void test_poll_bulk(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  fake_add(f, "j-pending", ALTAR_STATE_PENDING, NULL);
  fake_add(f, "j-running", ALTAR_STATE_RUNNING, NULL);
  fake_add(f, "j-ok", ALTAR_STATE_SUCCEEDED, NULL);
  fake_job_t *bad = fake_add(f, "j-bad", ALTAR_STATE_FAILED, NULL);
  bad->failure = altar_failure_exit(3, "exit 3", true);
  fake_job_t *unmanaged = fake_add(f, "j-foreign", ALTAR_STATE_RUNNING, NULL);
  altar_strmap_clear(&unmanaged->info.labels);
  const char *names[] = {"j-pending", "j-running", "j-ok", "j-bad", "j-gone", "j-foreign"};
  altar_handle_t hs[6];
  for (int i = 0; i < 6; i++) {
    altar_handle_init(&hs[i], "kubernetes", names[i]);
    altar_strmap_set(&hs[i].labels, "fold", "1");
  }
  altar_status_t st[8];
  memset(st, 0, sizeof st);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, 6, st, &err), 0);
  CU_ASSERT_EQUAL(f->n_list, 1); /* one list for every handle */
  CU_ASSERT(strstr(f->log, "list:" ALTAR_K8S_MANAGED_SELECTOR ";") != NULL);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(st[2].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT(st[2].failure == NULL);
  CU_ASSERT_EQUAL(st[3].state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st[3].failure->reason, "exit_3");
  CU_ASSERT(st[3].failure->deterministic);
  CU_ASSERT_EQUAL(st[4].state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st[4].failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  CU_ASSERT(!st[4].failure->deterministic);
  /* Not ours (no managed label): not listed, so missing. */
  CU_ASSERT_STRING_EQUAL(st[5].failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  CU_ASSERT_EQUAL(f->n_describe, 1);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&st[0].handle.labels, "fold"), "1");
  for (int si = 0; si < 6; si++) altar_status_clear(&st[si]);
  for (int i = 0; i < 6; i++) altar_handle_clear(&hs[i]);
  altar__k8s_free(k);
}

/* A runtime with a watch: the test feeds the watch what a server would send. */
static altar_k8s_watch_t *fed_watch;
static int f_watch_open(void *impl, const char *ns, const char *sel, altar_k8s_watch_t **pw, altar_error_t *err) {
  (void)impl;
  (void)ns;
  (void)sel;
  (void)err;
  *pw = fed_watch = altar__k8s_watch_test_new();
  return *pw ? 0 : ALTAR_ENOMEM;
}
static const altar_k8s_runtime_ops_t fake_watch_ops = {
    .name = "fake-watch",
    .create_job = f_create,
    .list_jobs = f_list,
    .read_job = f_read,
    .delete_job = f_delete,
    .describe_failure = f_describe,
    .watch_open = f_watch_open,
    .destroy = f_destroy,
};

static void watch_event(const char *type, const char *name, const char *status) {
  char line[1024];
  snprintf(line, sizeof line,
           "{\"type\":\"%s\",\"object\":{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\","
           "\"resourceVersion\":\"7\"},\"status\":{%s}}}\n",
           type, name, name, status);
  bool expired = false;
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(fed_watch, line, strlen(line), &expired), 0);
}

/* list_pod_waits: counts what it was asked and answers one wait, for
 * f->waiting_job when the selector names it. */
static int f_pod_waits(void *impl, const char *ns, const char *sel, altar_k8s_pod_wait_t **pwaits, size_t *pn,
                       altar_error_t *err) {
  fake_t *f = impl;
  (void)ns;
  (void)err;
  f->n_waits++;
  const char *in = sel ? strstr(sel, "job-name in (") : NULL;
  if (!in) f->waits_unfiltered = true;
  else {
    f->n_wait_names++; /* names are separated by commas */
    for (const char *p = in; *p && *p != ')'; p++) f->n_wait_names += *p == ',';
  }
  *pwaits = NULL;
  *pn = 0;
  if (f->waiting_job && (!in || strstr(in, f->waiting_job))) {
    *pwaits = calloc(1, sizeof **pwaits);
    (*pwaits)->reason = ALTAR_K8S_REASON_UNSCHEDULABLE;
    (*pwaits)->job_name = strdup(f->waiting_job);
    (*pwaits)->detail = strdup("Unschedulable: 0/2 nodes are available");
    *pn = 1;
  }
  return 0;
}
static const altar_k8s_runtime_ops_t fake_watch_waits_ops = {
    .name = "fake-watch-waits",
    .create_job = f_create,
    .list_jobs = f_list,
    .read_job = f_read,
    .delete_job = f_delete,
    .describe_failure = f_describe,
    .list_pod_waits = f_pod_waits,
    .watch_open = f_watch_open,
    .destroy = f_destroy,
};

/* A pending Job (pods not ready) with activeDeadlineSeconds deadline_s
 * (0: none), started started_ago seconds before now. */
static void watch_pending(const char *name, long deadline_s, long started_ago) {
  char start[32], spec[64] = "", line[1024];
  time_t t = time(NULL) - started_ago;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (deadline_s) snprintf(spec, sizeof spec, ",\"spec\":{\"activeDeadlineSeconds\":%ld}", deadline_s);
  snprintf(line, sizeof line,
           "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\","
           "\"creationTimestamp\":\"%s\",\"resourceVersion\":\"7\"}%s,"
           "\"status\":{\"active\":1,\"ready\":0,\"startTime\":\"%s\"}}}\n",
           name, name, start, spec, start);
  bool expired = false;
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(fed_watch, line, strlen(line), &expired), 0);
}

/* With the watch, pod waits are read only for pending Jobs near (or past)
 * their deadline, by name: never a list of every pending pod, whose cost
 * grew with the Jobs pending on every poll interval. The wait read near
 * the deadline still names the failure the deadline ends the Job with. */
static void test_pod_waits_near_deadline(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_waits_ops, &f, NULL);
  altar_handle_t probe;
  altar_handle_init(&probe, "kubernetes", "j-probe");
  altar_status_t one;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, &probe, 1, &one, &err), 0); /* opens the watch */
  altar_status_clear(&one);
  altar_handle_clear(&probe);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fed_watch);
  enum { NO_DEADLINE = 200, FAR = 200, NEAR = 45, N = NO_DEADLINE + FAR + NEAR };
  altar_handle_t *hs = calloc(N, sizeof *hs);
  altar_status_t *st = calloc(N, sizeof *st);
  CU_ASSERT_FATAL(hs && st);
  for (int i = 0; i < N; i++) {
    char name[32];
    if (i < NO_DEADLINE) snprintf(name, sizeof name, "j-free-%d", i);
    else if (i < NO_DEADLINE + FAR) snprintf(name, sizeof name, "j-far-%d", i);
    else snprintf(name, sizeof name, "j-near-%d", i);
    if (i < NO_DEADLINE) watch_pending(name, 0, 1000);
    else if (i < NO_DEADLINE + FAR) watch_pending(name, 600, 5); /* 595 s to go */
    else watch_pending(name, 600, 595);                          /* 5 s to go */
    altar_handle_init(&hs[i], "kubernetes", name);
  }
  /* Only Jobs without a deadline, or far from it: no pod is read. */
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, NO_DEADLINE + FAR, st, &err), 0);
  for (int i = 0; i < NO_DEADLINE + FAR; i++) {
    CU_ASSERT_EQUAL(st[i].state, ALTAR_STATE_PENDING);
    altar_status_clear(&st[i]);
  }
  CU_ASSERT_EQUAL(f->n_waits, 0);
  /* With the near ones: their names alone, in lists of a bounded size. */
  f->waiting_job = "j-near-440";
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, N, st, &err), 0);
  for (int i = 0; i < N; i++) altar_status_clear(&st[i]);
  CU_ASSERT_FALSE(f->waits_unfiltered);
  CU_ASSERT_EQUAL(f->n_wait_names, NEAR);
  CU_ASSERT_EQUAL(f->n_waits, 2); /* 40 names a list */
  /* Within the interval nothing more is read; after it, the near ones again. */
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, N, st, &err), 0);
  for (int i = 0; i < N; i++) altar_status_clear(&st[i]);
  CU_ASSERT_EQUAL(f->n_waits, 2);
  f->now += 2.0;
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, N, st, &err), 0);
  for (int i = 0; i < N; i++) altar_status_clear(&st[i]);
  CU_ASSERT_EQUAL(f->n_waits, 4);
  CU_ASSERT_EQUAL(f->n_wait_names, 2 * NEAR);
  /* The deadline fails it and its pods are gone: the wait read before says why. */
  fake_add(f, "j-near-440", ALTAR_STATE_FAILED, NULL);
  char line[512];
  snprintf(line, sizeof line,
           "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"j-near-440\",\"uid\":\"u-j-near-440\","
           "\"resourceVersion\":\"8\"},\"status\":{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\","
           "\"reason\":\"DeadlineExceeded\"}]}}}\n");
  bool expired = false;
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(fed_watch, line, strlen(line), &expired), 0);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, &hs[440], 1, &one, &err), 0);
  CU_ASSERT_EQUAL(one.state, ALTAR_STATE_FAILED);
  CU_ASSERT(one.failure && !strcmp(one.failure->reason, ALTAR_K8S_REASON_UNSCHEDULABLE));
  altar_status_clear(&one);
  for (int i = 0; i < N; i++) altar_handle_clear(&hs[i]);
  free(hs);
  free(st);
  altar__k8s_free(k);
  fed_watch = NULL;
}

/* A Job event with the uid the fake gave the Job when it created it. */
static void watch_job(fake_t *f, const char *name, const char *status) {
  fake_job_t *j = fake_find(f, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(j);
  char line[1024];
  snprintf(line, sizeof line,
           "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\","
           "\"resourceVersion\":\"8\"},\"status\":{%s}}}\n",
           name, j->info.uid, status);
  bool expired = false;
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(fed_watch, line, strlen(line), &expired), 0);
}

static altar_spec_t *paced_spec(int i) {
  altar_spec_t *s = altar_spec_new("paced", "registry.example/img:1");
  char fold[16];
  snprintf(fold, sizeof fold, "%d", i);
  altar_spec_set_label(s, "fold", fold);
  altar_spec_add_arg(s, "true");
  return s;
}

/* Free slots of the CPU pool as capacity reports them (INT64_MAX: the
 * report leaves it out, so nothing rations it). */
static int64_t cpu_free(altar_k8s_t *k) {
  altar_capacity_t cap;
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  altar_resources_t cpu = {.count = 1};
  int64_t n = cap.n ? altar_capacity_free_for(&cap, &cpu) : INT64_MAX;
  altar_capacity_clear(&cap);
  return n;
}

/* Creates are paced by the cluster's progress, through capacity: while
 * submit_backlog Jobs this backend created have not started (as its watch
 * sees them) the CPU pool has no free slot, so the worker takes no record;
 * a Job that starts or ends leaves the backlog, one created more than 30 s
 * ago no longer counts, and once the last create is 200 ms old a full
 * backlog still leaves one slot. With no bound (0) capacity reports no
 * fixed slots. */
static void test_submit_paced_by_backlog(void) {
  for (int bound = 2; bound >= 0; bound -= 2) {
    altar_k8s_config_t cfg;
    altar__k8s_config_init(&cfg);
    cfg.submit_backlog = bound;
    fake_t *f;
    altar_k8s_t *k = make_backend(&fake_watch_ops, &f, &cfg);
    altar_handle_t h[4];
    memset(h, 0, sizeof h);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(cpu_free(k), bound ? 2 : INT64_MAX);
    for (int i = 0; i < 2; i++) {
      altar_spec_t *s = paced_spec(i);
      CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[i], &err), 0);
      altar_spec_free(s);
      CU_ASSERT_EQUAL(cpu_free(k), bound ? 1 - i : INT64_MAX);
    }
    CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), bound ? 2u : 0u);
    if (bound) {
      /* Nothing started: no slot, and the report was held back once. */
      CU_ASSERT_EQUAL(altar__k8s_pace_holds(k), 1u);
      /* One running, one ended: a slot each. */
      watch_job(f, h[0].external_id, "\"active\":1,\"ready\":1");
      watch_job(f, h[1].external_id, "\"succeeded\":1,\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
      CU_ASSERT_EQUAL(cpu_free(k), 2);
      CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 0u);
      for (int i = 2; i < 4; i++) {
        altar_spec_t *s = paced_spec(i);
        CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[i], &err), 0);
        altar_spec_free(s);
      }
      watch_job(f, h[2].external_id, "\"active\":1,\"ready\":0"); /* a pod, not started */
      CU_ASSERT_EQUAL(cpu_free(k), 0);
      CU_ASSERT_EQUAL(altar__k8s_pace_holds(k), 2u);
      /* 200 ms after the last create: one slot, however full the backlog. */
      f->now += 0.2;
      CU_ASSERT_EQUAL(cpu_free(k), 1);
      CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 2u);
      /* 30 s on, the Jobs that never started no longer hold creates back. */
      f->now += 30.0;
      CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 0u);
      CU_ASSERT_EQUAL(cpu_free(k), 2);
    } else {
      CU_ASSERT_EQUAL(altar__k8s_pace_holds(k), 0u);
    }
    /* Pacing never sleeps in submit. */
    CU_ASSERT_EQUAL(f->n_sleep, 0);
    for (int i = 0; i < 4; i++) altar_handle_clear(&h[i]);
    altar__k8s_free(k);
    fed_watch = NULL;
  }
}

/* Submits n paced specs through submit_start into h[*next...]. */
static void submit_paced(altar_k8s_t *k, altar_handle_t *h, int *next, int n) {
  for (int i = 0; i < n; i++, (*next)++) {
    altar_spec_t *s = paced_spec(*next);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[*next], &err), 0);
    altar_spec_free(s);
  }
}

/* Submits as many Jobs as the bound leaves room for, lets wait s pass and
 * has the watch report them all started: one round trip of the pacer. */
static void paced_round(fake_t *f, altar_k8s_t *k, altar_handle_t *h, int *next, double wait) {
  int n = (int)cpu_free(k);
  submit_paced(k, h, next, n);
  f->now += wait;
  for (int i = *next - n; i < *next; i++) watch_job(f, h[i].external_id, "\"active\":1,\"ready\":1");
  (void)cpu_free(k);
  /* Gone from the fake server (it holds 32), no longer in the backlog. */
  for (int i = *next - n; i < *next; i++) fake_remove(f, fake_find(f, h[i].external_id));
}

/* The bound follows the cluster's queue: while Jobs start in the least
 * time seen it doubles every round trip; once they take 4x that, the Jobs
 * waiting beyond the floor (bound * (1 - floor / average)) pass 12 and it
 * falls until they are 4-12 (32 -> 16), never below the start; when the
 * waits are back at the floor it grows again. */
static void test_backlog_follows_queue(void) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.submit_backlog = 64;
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_ops, &f, &cfg);
  altar__k8s_pace_set_start(k, 4);
  enum { N = 160 };
  altar_handle_t h[N];
  memset(h, 0, sizeof h);
  int next = 0;
  for (int r = 0; r < 3; r++) paced_round(f, k, h, &next, 1.0);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 32);
  paced_round(f, k, h, &next, 4.0);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 16);
  paced_round(f, k, h, &next, 4.0);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 16);
  for (int r = 0; r < 3; r++) paced_round(f, k, h, &next, 1.0);
  CU_ASSERT(altar__k8s_pace_limit(k) >= 30);
  CU_ASSERT(next <= N);
  CU_ASSERT_EQUAL(f->n_sleep, 0);
  for (int i = 0; i < N; i++) altar_handle_clear(&h[i]);
  altar__k8s_free(k);
  fed_watch = NULL;
}

/* A create that finds its Job already there (adopted) leaves the backlog:
 * that Job's start says nothing of how long this cluster takes. */
static void test_backlog_forgets_adopted(void) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.submit_backlog = 8;
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_ops, &f, &cfg);
  altar_handle_t h[2];
  memset(h, 0, sizeof h);
  altar_error_t err = {0};
  altar_spec_t *s = paced_spec(0);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[0], &err), 0);
  for (int i = 0; i < 50 && altar__k8s_submit_drive(k, 10) >= 0 && altar__k8s_submits_in_flight(k); i++) {}
  CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 1u);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[1], &err), 0); /* the same Job: 409, adopted */
  for (int i = 0; i < 50 && altar__k8s_submit_drive(k, 10) >= 0 && altar__k8s_submits_in_flight(k); i++) {}
  CU_ASSERT_EQUAL(altar__k8s_submits_in_flight(k), 0u);
  CU_ASSERT_EQUAL(f->n, 1);
  CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 1u);
  altar_spec_free(s);
  for (int i = 0; i < 2; i++) altar_handle_clear(&h[i]);
  altar__k8s_free(k);
  fed_watch = NULL;
}

/* Slow start: the backlog's bound begins at the start value and grows by
 * one per start the watch reports (not per create, nor per Job that
 * expired unstarted), up to submit_backlog; after 30 s without a create it
 * begins again. Default: ALTAR_K8S_DEFAULT_PACE_START free slots before
 * anything started. */
static void test_backlog_slow_start(void) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_ops, &f, &cfg);
  CU_ASSERT_EQUAL(cpu_free(k), ALTAR_K8S_DEFAULT_PACE_START);
  altar__k8s_free(k);
  fed_watch = NULL;

  cfg.submit_backlog = 8;
  k = make_backend(&fake_watch_ops, &f, &cfg);
  altar__k8s_pace_set_start(k, 2);
  enum { N = 18 };
  altar_handle_t h[N];
  memset(h, 0, sizeof h);
  int next = 0;
  const char *run = "\"active\":1,\"ready\":1";
  CU_ASSERT_EQUAL(cpu_free(k), 2);
  submit_paced(k, h, &next, 2);
  CU_ASSERT_EQUAL(cpu_free(k), 0);
  /* One start: the bound is 3, one Job still waits. */
  watch_job(f, h[0].external_id, run);
  CU_ASSERT_EQUAL(cpu_free(k), 2);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 3);
  /* A Job that ended without being seen running counts as started too. */
  watch_job(f, h[1].external_id, "\"succeeded\":1,\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  CU_ASSERT_EQUAL(cpu_free(k), 4);
  submit_paced(k, h, &next, 4);
  CU_ASSERT_EQUAL(cpu_free(k), 0);
  /* After j of these 4 start: the bound 4 + j, 4 - j waiting, 2j free. */
  for (int j = 1; j <= 4; j++) {
    watch_job(f, h[1 + j].external_id, run);
    CU_ASSERT_EQUAL(cpu_free(k), 2 * j);
    CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 4 + j);
  }
  /* 8 more start: the bound stops at submit_backlog. */
  submit_paced(k, h, &next, 8);
  CU_ASSERT_EQUAL(cpu_free(k), 0);
  for (int i = 6; i < 14; i++) watch_job(f, h[i].external_id, run);
  CU_ASSERT_EQUAL(cpu_free(k), 8);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 8);
  /* Idle 30 s: it begins again at 2. */
  f->now += 30.0;
  CU_ASSERT_EQUAL(cpu_free(k), 2);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 2);
  submit_paced(k, h, &next, 2);
  f->now += 30.0; /* both expire unstarted; the last create is 30 s old */
  CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 0u);
  CU_ASSERT_EQUAL(altar__k8s_pace_limit(k), 2);
  CU_ASSERT_EQUAL(cpu_free(k), 2);
  CU_ASSERT_EQUAL(f->n_sleep, 0);
  for (int i = 0; i < N; i++) altar_handle_clear(&h[i]);
  altar__k8s_free(k);
  fed_watch = NULL;
}

/* A submit made with the backlog full (a caller that does not read
 * capacity) still returns at once: it neither sleeps nor waits for the
 * watch, so a completion the watch reported before it is polled right
 * after it, and wait_change says so without blocking. */
static void test_paced_submit_never_blocks_poll(void) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.submit_backlog = 1;
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_ops, &f, &cfg);
  altar_handle_t h[3];
  memset(h, 0, sizeof h);
  altar_error_t err = {0};
  for (int i = 0; i < 2; i++) {
    altar_spec_t *s = paced_spec(i);
    CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[i], &err), 0);
    altar_spec_free(s);
  }
  altar_status_t st[2];
  memset(st, 0, sizeof st);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, h, 2, st, &err), 0);
  for (int i = 0; i < 2; i++) altar_status_clear(&st[i]);
  CU_ASSERT_EQUAL(altar__k8s_submit_backlog(k), 2u);
  CU_ASSERT_EQUAL(cpu_free(k), 0);
  /* The first Job completes; the second has not started. */
  watch_job(f, h[0].external_id, "\"succeeded\":1,\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  double t = f->now;
  int creates = f->n_create;
  altar_spec_t *s = paced_spec(2);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h[2], &err), 0);
  altar_spec_free(s);
  CU_ASSERT_EQUAL(f->n_create, creates + 1); /* created now, not after a wait */
  CU_ASSERT_EQUAL(f->n_sleep, 0);
  CU_ASSERT_EQUAL(f->now, t);
  CU_ASSERT_EQUAL(altar__k8s_wait_change(k, 0), 1);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, h, 2, st, &err), 0);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_PENDING);
  for (int i = 0; i < 2; i++) altar_status_clear(&st[i]);
  CU_ASSERT_EQUAL(altar__k8s_wait_change(k, 0), 0); /* polled: no news left */
  for (int i = 0; i < 3; i++) altar_handle_clear(&h[i]);
  altar__k8s_free(k);
  fed_watch = NULL;
}

/* With a watch, poll lists nothing: each handle is one lookup; a name the
 * watch never saw costs one read; a Job it saw deleted is container_missing. */
static void test_poll_from_watch(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_watch_ops, &f, NULL);
  altar_handle_t first;
  altar_handle_init(&first, "kubernetes", "j-first");
  altar_status_t st[6];
  memset(st, 0, sizeof st);
  altar_error_t err = {0};
  /* The first poll opens the watch (already synced here). */
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, &first, 1, st, &err), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fed_watch);
  CU_ASSERT_PTR_EQUAL(altar__k8s_watch(k), fed_watch);
  altar_status_clear(&st[0]);
  altar_handle_clear(&first);
  int lists = f->n_list;
  watch_event("ADDED", "j-run", "\"active\":1,\"ready\":1");
  watch_event("MODIFIED", "j-ok", "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  watch_event("ADDED", "j-del", "\"active\":1");
  watch_event("DELETED", "j-del", "\"active\":1");
  watch_event("MODIFIED", "j-bad", "\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]");
  fake_job_t *bad = fake_add(f, "j-bad", ALTAR_STATE_FAILED, NULL);
  bad->failure = altar_failure_exit(3, "exit 3", true);
  fake_add(f, "j-late", ALTAR_STATE_RUNNING, NULL); /* created, not yet watched */
  const char *names[] = {"j-run", "j-ok", "j-del", "j-bad", "j-late", "j-absent"};
  altar_handle_t hs[6];
  for (int i = 0; i < 6; i++) {
    altar_handle_init(&hs[i], "kubernetes", names[i]);
    altar_strmap_set(&hs[i].labels, "fold", i % 2 ? "1" : "0");
  }
  int reads = f->n_read;
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, hs, 6, st, &err), 0);
  CU_ASSERT_EQUAL(f->n_list, lists);     /* no list */
  CU_ASSERT_EQUAL(f->n_read - reads, 2); /* j-late and j-absent only */
  /* Each status carries its handle whole (copied into one block). */
  for (int i = 0; i < 6; i++) {
    CU_ASSERT(altar_handle_equal(&st[i].handle, &hs[i]));
    CU_ASSERT_PTR_NOT_EQUAL(st[i].handle.external_id, hs[i].external_id);
  }
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(st[2].state, ALTAR_STATE_FAILED);
  CU_ASSERT(st[2].failure && !strcmp(st[2].failure->reason, ALTAR_REASON_CONTAINER_MISSING));
  CU_ASSERT_EQUAL(st[3].state, ALTAR_STATE_FAILED);
  CU_ASSERT(st[3].failure && !strcmp(st[3].failure->reason, "exit_3"));
  CU_ASSERT_EQUAL(st[4].state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(st[5].state, ALTAR_STATE_FAILED);
  CU_ASSERT(st[5].failure && !strcmp(st[5].failure->reason, ALTAR_REASON_CONTAINER_MISSING));
  /* A change since the last poll wakes a waiter at once. */
  CU_ASSERT_EQUAL(altar__k8s_wait_change(k, 0), 0);
  watch_event("MODIFIED", "j-run", "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  CU_ASSERT_EQUAL(altar__k8s_wait_change(k, 0), 1);
  for (int i = 0; i < 6; i++) {
    altar_status_clear(&st[i]);
    altar_handle_clear(&hs[i]);
  }
  altar__k8s_free(k);
  fed_watch = NULL;
}

static void test_poll_default_describe(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_min_ops, &f, NULL);
  fake_add(f, "j-bad", ALTAR_STATE_FAILED, NULL);
  altar_handle_t h;
  altar_handle_init(&h, "kubernetes", "j-bad");
  altar_status_t st[8];
  memset(st, 0, sizeof st);
  CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, &h, 1, st, NULL), 0);
  CU_ASSERT_STRING_EQUAL(st[0].failure->reason, ALTAR_REASON_JOB_FAILED);
  CU_ASSERT(st[0].failure->deterministic); /* the default diagnose: (true, none) */
  for (int si = 0; si < 1; si++) altar_status_clear(&st[si]);
  altar_handle_clear(&h);
  altar__k8s_free(k);
}

/* The configured pools are servable whether or not a node of theirs exists
 * now (a pool at zero nodes still gets the job that scales it up), and the
 * CPU pool always is (#27). */
static void test_pools_servable(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_nodes_ops, &f, NULL);
  altar_backend_t *be = altar__k8s_backend_wrap(k);
  CU_ASSERT_FATAL(be != NULL);
  const char *names[8];
  CU_ASSERT_EQUAL_FATAL(altar_backend_pools(be, names, 8), 1); /* no pool mapping: CPU only */
  CU_ASSERT_STRING_EQUAL(names[0], ALTAR_POOL_CPU);
  altar_backend_close(be);

  altar_k8s_pool_t pools[2] = {{.name = "gpu", .max_slots = -1}, {.name = "a100", .max_slots = 4}};
  altar_strmap_set(&pools[1].node_selector, "cloud.google.com/gke-accelerator", "nvidia-tesla-a100");
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.pools = pools;
  cfg.n_pools = 2;
  k = make_backend(&fake_nodes_ops, &f, &cfg);
  altar_strmap_clear(&pools[1].node_selector);
  f->nodes_json = "[]"; /* scaled to zero */
  be = altar__k8s_backend_wrap(k);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_backend_pools(be, names, 8), 3);
  CU_ASSERT_STRING_EQUAL(names[0], ALTAR_POOL_CPU);
  CU_ASSERT_STRING_EQUAL(names[1], "gpu");
  CU_ASSERT_STRING_EQUAL(names[2], "a100");
  altar_capacity_t cap;
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, NULL), 0);
  altar_resources_t a100 = {.gpu = "a100", .count = 1};
  /* Servable, and at zero nodes bound only by its ceiling: the job that
   * makes an autoscaler add a node is submitted, not held. */
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &a100), 4);
  altar_capacity_clear(&cap);
  altar_backend_close(be);
}

static void test_capacity(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  altar_capacity_t cap;
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  CU_ASSERT_EQUAL(cap.n, 0); /* no max_slots: no fixed capacity */
  CU_ASSERT_EQUAL(f->n_list, 0);
  altar__k8s_free(k);

  altar_k8s_pool_t pools[3] = {
      {.name = "normal", .max_slots = 10}, {.name = "gpu", .max_slots = 2}, {.name = "a100", .max_slots = -1}};
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.pools = pools;
  cfg.n_pools = 3;
  k = make_backend(&fake_ops, &f, &cfg);
  altar_spec_t *s = altar_spec_new("score", "img");
  altar_spec_add_arg(s, "true");
  altar_handle_t h;
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, NULL), 0);
  altar_handle_clear(&h);
  altar_spec_set_gpu(s, "gpu", 1);
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, NULL), 0);
  altar_handle_clear(&h);
  altar_spec_set_label(s, "x", "1");
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, NULL), 0);
  altar_handle_clear(&h);
  altar_spec_set_label(s, "x", "2");
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, NULL), 0);
  altar_handle_clear(&h);
  f->jobs[3].info.state = ALTAR_STATE_SUCCEEDED; /* finished Jobs hold no slot */
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  /* a100 has no ceiling and this runtime lists no nodes: served, unbounded. */
  CU_ASSERT_EQUAL(cap.n, 3);
  altar_resources_t cpu = {.gpu = NULL, .count = 1}, gpu = {.gpu = "gpu", .count = 1},
                    a100 = {.gpu = "a100", .count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 9);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &gpu), 0);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &a100), INT64_MAX);
  altar_capacity_clear(&cap);
  altar_spec_free(s);
  altar__k8s_free(k);
}

static void test_quantity_count(void) {
  int64_t c = -1;
  CU_ASSERT(altar__k8s_quantity_count("110", &c) && c == 110);
  CU_ASSERT(altar__k8s_quantity_count("3500m", &c) && c == 3);
  CU_ASSERT(altar__k8s_quantity_count("2k", &c) && c == 2000);
  CU_ASSERT(altar__k8s_quantity_count("1Ki", &c) && c == 1024);
  CU_ASSERT(altar__k8s_quantity_count("0", &c) && c == 0);
  CU_ASSERT_FALSE(altar__k8s_quantity_count("", &c));
  CU_ASSERT_FALSE(altar__k8s_quantity_count("-1", &c));
  CU_ASSERT_FALSE(altar__k8s_quantity_count("1.5", &c));
  CU_ASSERT_FALSE(altar__k8s_quantity_count("4x", &c));
  CU_ASSERT_FALSE(altar__k8s_quantity_count(NULL, &c));
}

/* Three GPU nodes (one cordoned, one not Ready) and two CPU nodes. */
static const char NODES[] =
    "[{\"metadata\":{\"name\":\"g1\",\"labels\":{\"pool\":\"gpu\"}},"
    "  \"status\":{\"allocatable\":{\"pods\":\"110\",\"nvidia.com/gpu\":\"4\",\"amd.com/gpu\":\"2\"},"
    "  \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}},"
    " {\"metadata\":{\"name\":\"g2\",\"labels\":{\"pool\":\"gpu\"}},\"spec\":{\"unschedulable\":true},"
    "  \"status\":{\"allocatable\":{\"pods\":\"110\",\"nvidia.com/gpu\":\"8\"},"
    "  \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}},"
    " {\"metadata\":{\"name\":\"g3\",\"labels\":{\"pool\":\"gpu\"}},"
    "  \"status\":{\"allocatable\":{\"pods\":\"110\",\"nvidia.com/gpu\":\"8\"},"
    "  \"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}},"
    " {\"metadata\":{\"name\":\"c1\",\"labels\":{\"pool\":\"cpu\"}},"
    "  \"status\":{\"allocatable\":{\"pods\":\"3\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}},"
    " {\"metadata\":{\"name\":\"c2\",\"labels\":{\"pool\":\"cpu\"}},"
    "  \"status\":{\"allocatable\":{\"pods\":\"2\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}]";

static void test_capacity_from_nodes(void) {
  altar_k8s_pool_t pools[4];
  memset(pools, 0, sizeof pools);
  pools[0] = (altar_k8s_pool_t){.name = "normal", .max_slots = -1};
  altar_strmap_set(&pools[0].node_selector, "pool", "cpu");
  pools[1] = (altar_k8s_pool_t){.name = "gpu", .max_slots = -1};
  altar_strmap_set(&pools[1].node_selector, "pool", "gpu");
  pools[2] = (altar_k8s_pool_t){.name = "amd", .max_slots = 1, .gpu_resource = "amd.com/gpu"};
  /* A node pool scaled to zero: no node offers its GPUs yet. */
  pools[3] = (altar_k8s_pool_t){.name = "a100", .max_slots = -1};
  altar_strmap_set(&pools[3].node_selector, "pool", "a100");
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.pools = pools;
  cfg.n_pools = 4;
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_nodes_ops, &f, &cfg);
  f->nodes_json = NODES;
  altar_spec_t *s = altar_spec_new("score", "img");
  altar_spec_add_arg(s, "true");
  altar_handle_t h;
  CU_ASSERT_EQUAL(altar__k8s_submit(k, s, &h, NULL), 0); /* one active CPU Job */
  altar_handle_clear(&h);
  altar_capacity_t cap;
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  CU_ASSERT_EQUAL(f->n_nodes, 1);
  altar_resources_t cpu = {.count = 1}, gpu = {.gpu = "gpu", .count = 1}, amd = {.gpu = "amd", .count = 1},
                    a100 = {.gpu = "a100", .count = 1};
  /* CPU: 3 + 2 allocatable pods less the active Job. GPU: only g1 takes
   * pods (g2 is cordoned, g3 not Ready). amd: its ceiling (1) is below the
   * 2 GPUs of g1 (its selector is empty: every node counts). */
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 4);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &gpu), 4);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &amd), 1);
  /* Scaling from zero is not gated: its job must reach the cluster for an
   * autoscaler to add a node (cordoned or not-Ready nodes, as gpu's g2 and
   * g3, do bound their pool). */
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &a100), INT64_MAX);
  altar_capacity_clear(&cap);

  /* A refused node list keeps the ceilings and is not asked again at once. */
  f->nodes_error = ALTAR_EBACKEND;
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), INT64_MAX);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &amd), 1);
  altar_capacity_clear(&cap);
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  CU_ASSERT_EQUAL(f->n_nodes, 2);
  altar_capacity_clear(&cap);
  f->now += 61;
  altar_capacity_init(&cap);
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, NULL), 0);
  CU_ASSERT_EQUAL(f->n_nodes, 3);
  altar_capacity_clear(&cap);
  altar_spec_free(s);
  altar__k8s_free(k);
  for (int i = 0; i < 4; i++) altar_strmap_clear(&pools[i].node_selector);
}

static void test_cancel(void) {
  fake_t *f;
  altar_k8s_t *k = make_backend(&fake_ops, &f, NULL);
  fake_add(f, "j1", ALTAR_STATE_RUNNING, NULL);
  altar_handle_t h;
  altar_handle_init(&h, "kubernetes", "j1");
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h, NULL), 0);
  CU_ASSERT_EQUAL(f->n, 0);
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h, NULL), 0); /* already gone: fine */
  CU_ASSERT_STRING_EQUAL(f->log, "delete:j1:-;delete:j1:-;");
  altar_handle_clear(&h);
  altar__k8s_free(k);
}

/* ---- reading API objects ---- */

static json_t *J(const char *text) {
  json_error_t e;
  json_t *v = json_loads(text, 0, &e);
  if (!v) fprintf(stderr, "bad fixture: %s\n", e.text);
  CU_ASSERT_FATAL(v != NULL);
  return v;
}

static void test_job_info_from_json(void) {
  struct {
    const char *json;
    altar_state_t want;
  } cases[] = {
      {"{\"metadata\":{\"name\":\"a\",\"uid\":\"u1\",\"labels\":{\"x\":\"1\"},\"annotations\":{\"y\":\"2\"}},\"status\":{}}",
       ALTAR_STATE_PENDING},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"active\":1}}", ALTAR_STATE_RUNNING},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"active\":1,\"ready\":0}}", ALTAR_STATE_PENDING},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"active\":2,\"ready\":1}}", ALTAR_STATE_RUNNING},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}}",
       ALTAR_STATE_SUCCEEDED},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]}}",
       ALTAR_STATE_FAILED},
      {"{\"metadata\":{\"name\":\"a\"},\"status\":{\"active\":1,\"conditions\":[{\"type\":\"Failed\",\"status\":"
       "\"False\"}]}}",
       ALTAR_STATE_RUNNING},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *j = J(cases[i].json);
    altar_k8s_job_info_t info;
    CU_ASSERT_EQUAL(altar__k8s_job_info_from_json(j, &info, NULL), 0);
    CU_ASSERT_EQUAL(info.state, cases[i].want);
    CU_ASSERT_STRING_EQUAL(info.name, "a");
    if (i == 0) {
      CU_ASSERT_STRING_EQUAL(info.uid, "u1");
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(&info.labels, "x"), "1");
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(&info.annotations, "y"), "2");
    }
    altar__k8s_job_info_clear(&info);
    json_decref(j);
  }
  json_t *j = J("{\"metadata\":{}}");
  altar_k8s_job_info_t info;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_job_info_from_json(j, &info, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "metadata.name") != NULL);
  json_decref(j);
}

static void explain_case(const char *job, const char *pods, const char *reason, bool det) {
  json_t *j = J(job), *p = J(pods);
  altar_failure_t *f = altar__k8s_explain_failure(j, p);
  CU_ASSERT_FATAL(f != NULL);
  if (strcmp(f->reason, reason)) fprintf(stderr, "explain: got %s want %s\n", f->reason, reason);
  CU_ASSERT_STRING_EQUAL(f->reason, reason);
  CU_ASSERT_EQUAL(f->deterministic, det);
  CU_ASSERT(f->detail != NULL);
  altar_failure_free(f);
  json_decref(j);
  json_decref(p);
}

#define FAILED_JOB(reason)                                                                                             \
  "{\"metadata\":{\"name\":\"a\"},\"status\":{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\","               \
  "\"reason\":\"" reason "\",\"message\":\"m\"}]}}"

static void test_explain_failure(void) {
  explain_case(FAILED_JOB("DeadlineExceeded"), "{\"items\":[]}", ALTAR_REASON_TIMEOUT, false);
  /* A pod still waiting says more than the deadline that ended it. */
  explain_case(FAILED_JOB("DeadlineExceeded"),
               "{\"items\":[{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"task\",\"state\":{"
               "\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":\"Back-off pulling image\"}}}]}}]}",
               ALTAR_K8S_REASON_IMAGE_PULL, false);
  explain_case(FAILED_JOB("DeadlineExceeded"),
               "{\"items\":[{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
               "\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/2 nodes are available\"}]}}]}",
               ALTAR_K8S_REASON_UNSCHEDULABLE, false);
  /* Waiting for something else (a container being created) is no evidence. */
  explain_case(FAILED_JOB("DeadlineExceeded"),
               "{\"items\":[{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"task\",\"state\":{"
               "\"waiting\":{\"reason\":\"ContainerCreating\"}}}]}}]}",
               ALTAR_REASON_TIMEOUT, false);
  explain_case(FAILED_JOB("BackoffLimitExceeded"),
               "{\"items\":[{\"status\":{\"initContainerStatuses\":[{\"name\":\"verify-inputs\",\"state\":{"
               "\"terminated\":{\"exitCode\":1,\"reason\":\"Error\"}}}]}}]}",
               ALTAR_REASON_INPUT_DIGEST_MISMATCH, false);
  explain_case(FAILED_JOB("BackoffLimitExceeded"),
               "{\"items\":[{\"status\":{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{"
               "\"exitCode\":137,\"reason\":\"OOMKilled\"}}}]}}]}",
               ALTAR_REASON_OOM_KILLED, false);
  explain_case(FAILED_JOB("BackoffLimitExceeded"),
               "{\"items\":[{\"status\":{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{"
               "\"exitCode\":3,\"reason\":\"Error\"}}}]}}]}",
               "exit_3", true);
  explain_case(FAILED_JOB("BackoffLimitExceeded"),
               "{\"items\":[{\"status\":{\"reason\":\"Evicted\",\"message\":\"low on memory\"}}]}",
               ALTAR_REASON_JOB_FAILED, false);
  explain_case(FAILED_JOB("PodFailurePolicy"),
               "{\"items\":[{\"status\":{\"conditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\","
               "\"reason\":\"PreemptionByScheduler\"}],\"containerStatuses\":[{\"name\":\"task\",\"state\":{"
               "\"terminated\":{\"exitCode\":143}}}]}}]}",
               ALTAR_REASON_JOB_FAILED, false);
  explain_case(FAILED_JOB("BackoffLimitExceeded"), "{\"items\":[]}", ALTAR_REASON_JOB_FAILED, false);
  json_t *j = J(FAILED_JOB("BackoffLimitExceeded")),
         *p = J("{\"items\":[{\"status\":{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{"
                "\"exitCode\":42}}}]}}]}");
  altar_failure_t *f = altar__k8s_explain_failure(j, p);
  CU_ASSERT(f->exit_code.set && f->exit_code.v == 42);
  altar_failure_free(f);
  json_decref(p);
  /* The termination message (the log's end, FallbackToLogsOnError) is the
   * detail's output, with a secret of our environment redacted. */
  setenv("ALTAR_TEST_K8S_TOKEN", "tok-9f8e7d6c", 1);
  p = J("{\"items\":[{\"status\":{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{"
        "\"exitCode\":3,\"message\":\"auth tok-9f8e7d6c\\nFileNotFoundError: weights.h5\\n\"}}}]}}]}");
  f = altar__k8s_explain_failure(j, p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f->detail);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(f->detail, "container exited with code 3\n--- stderr ---\nauth [redacted]\nFileNotFoundError"));
  CU_ASSERT_PTR_NULL(strstr(f->detail, "tok-9f8e7d6c"));
  unsetenv("ALTAR_TEST_K8S_TOKEN");
  altar_failure_free(f);
  json_decref(j);
  json_decref(p);
}

/* ---- kubelet mode: the contract suite against the fake ---- */

/* Runs the verify-inputs init container's argv for real (sh + the verifier
 * program over files under the data root, which is the mount root here).
 * What it printed goes to *plog (malloc'd), as the container's log. */
static int run_init(const json_t *init, char **plog) {
  const json_t *cmd = json_object_get(init, "command");
  size_t n = json_array_size(cmd);
  char **argv = calloc(n + 1, sizeof *argv);
  for (size_t i = 0; i < n; i++) argv[i] = ALTAR__UNCONST(json_string_value(json_array_get(cmd, i)));
  FILE *log = tmpfile();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fileno(log), 1);
    dup2(fileno(log), 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  free(argv);
  int st = 0;
  waitpid(pid, &st, 0);
  rewind(log);
  char buf[2048];
  size_t got = fread(buf, 1, sizeof buf - 1, log);
  buf[got] = '\0';
  fclose(log);
  *plog = strdup(buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void set_failed(fake_job_t *j, const char *reason, json_t *pod_status) {
  j->info.state = ALTAR_STATE_FAILED;
  json_decref(j->status);
  j->status = json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "conditions", "type", "Failed", "status", "True", "reason",
                        reason, "message", "fake kubelet");
  json_decref(j->pods);
  j->pods = pod_status ? json_pack("{s:[{s:o}]}", "items", "status", pod_status) : json_pack("{s:[]}", "items");
}

static json_t *terminated(const char *list, const char *name, int code, const char *reason) {
  return json_pack("{s:[{s:s, s:{s:{s:i, s:s}}}]}", list, "name", name, "state", "terminated", "exitCode", code,
                   "reason", reason);
}

/* One step of every active Job: pending → running → the command's outcome.
 * Commands are ["altar-fake", "exit"|"sleep"|"oom"|"read", arg]. */
static void kubelet_tick(fake_t *f) {
  for (size_t i = 0; i < f->n; i++) {
    fake_job_t *j = &f->jobs[i];
    if (!j->manifest || j->deleting || altar_state_terminal(j->info.state)) continue;
    if (j->ticks++ == 0) {
      j->info.state = ALTAR_STATE_RUNNING;
      continue;
    }
    const json_t *spec = json_object_get(j->manifest, "spec");
    const json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
    const json_t *init = json_array_get(json_object_get(pod, "initContainers"), 0);
    char *log = NULL;
    if (init && run_init(init, &log) != 0) {
      /* FallbackToLogsOnError: the failed container's log is its message. */
      json_t *st = terminated("initContainerStatuses", ALTAR_K8S_VERIFY_CONTAINER, 1, "Error");
      json_object_set_new(json_object_get(json_array_get(json_object_get(st, "initContainerStatuses"), 0), "state"),
                          "terminated", json_pack("{s:i, s:s, s:s}", "exitCode", 1, "reason", "Error", "message", log));
      set_failed(j, "BackoffLimitExceeded", st);
      free(log);
      continue;
    }
    free(log);
    const json_t *c = json_array_get(json_object_get(pod, "containers"), 0);
    const json_t *cmd = json_object_get(c, "command");
    const char *op = json_string_value(json_array_get(cmd, 1));
    const char *arg = json_string_value(json_array_get(cmd, 2));
    json_t *deadline = json_object_get(spec, "activeDeadlineSeconds");
    if (!op) op = "exit";
    if (!strcmp(op, "exit")) {
      int code = arg ? (int)strtol(arg, NULL, 10) : 0;
      if (code == 0) j->info.state = ALTAR_STATE_SUCCEEDED;
      else
        set_failed(j, "BackoffLimitExceeded", terminated("containerStatuses", ALTAR_K8S_TASK_CONTAINER, code, "Error"));
    } else if (!strcmp(op, "sleep")) {
      long secs = arg ? strtol(arg, NULL, 10) : 0;
      if (deadline && json_integer_value(deadline) < secs) set_failed(j, "DeadlineExceeded", NULL);
      else if (secs < 60) j->info.state = ALTAR_STATE_SUCCEEDED;
    } else if (!strcmp(op, "oom")) {
      const char *mem =
          json_string_value(json_object_get(json_object_get(json_object_get(c, "resources"), "limits"), "memory"));
      if (mem)
        set_failed(j, "BackoffLimitExceeded",
                   terminated("containerStatuses", ALTAR_K8S_TASK_CONTAINER, 137, "OOMKilled"));
      else j->info.state = ALTAR_STATE_SUCCEEDED;
    } else if (!strcmp(op, "read")) {
      struct stat sb;
      if (arg && stat(arg, &sb) == 0) j->info.state = ALTAR_STATE_SUCCEEDED;
      else set_failed(j, "BackoffLimitExceeded", terminated("containerStatuses", ALTAR_K8S_TASK_CONTAINER, 2, "Error"));
    }
  }
}

static altar_backend_t *contract_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  fake_t *f = calloc(1, sizeof *f);
  f->kubelet = true;
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  /* The pod's mount root is the data root, so the fake kubelet runs the
   * verifier over the very paths the manifest names. */
  cfg.mount_root = data_root;
  cfg.staging_root = data_root;
  cfg.clock = fake_clock;
  cfg.sleep = fake_sleep;
  cfg.clock_ctx = f;
  altar_k8s_t *k = altar__k8s_new(&cfg, altar__k8s_runtime_new(&fake_ops, f), err);
  return altar__k8s_backend_wrap(k);
}

static int set_cmd(altar_spec_t *s, const char *op, const char *arg) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  s->n_command = 0;
  altar_spec_add_arg(s, "altar-fake");
  altar_spec_add_arg(s, op);
  return arg ? altar_spec_add_arg(s, arg) : 0;
}

static int contract_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char n[16];
  snprintf(n, sizeof n, "%d", code);
  return set_cmd(s, "exit", n);
}
static int contract_sleep(void *ctx, altar_spec_t *s, int secs) {
  (void)ctx;
  char n[16];
  snprintf(n, sizeof n, "%d", secs);
  return set_cmd(s, "sleep", n);
}
static int contract_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  s->resources.memory_mb = (altar_opt_i64_t){true, 16};
  return set_cmd(s, "oom", NULL);
}
static int contract_read(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  return set_cmd(s, "read", path);
}
static int contract_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  fake_t *f = altar__k8s_runtime(altar_backend_impl(be))->impl;
  fake_job_t *j = fake_find(f, h->external_id);
  if (!j) return -1;
  fake_remove(f, j); /* deleted behind the backend's back */
  return 0;
}

static const altar_contract_fixture_t contract_fx = {
    .name = "kubernetes (fake runtime)",
    .image = "busybox:1.36",
    .wait_s = 30,
    .make_backend = contract_make,
    .set_exit = contract_exit,
    .set_sleep = contract_sleep,
    .set_oom = contract_oom,
    .set_read_input = contract_read,
    .vanish = contract_vanish,
};

/* Registered by name, created from configuration keys. */
static void test_vtable_create(void) {
  altar_backend_register(&altar_backend_kubernetes_ops);
  CU_ASSERT(altar_backend_lookup("kubernetes") == &altar_backend_kubernetes_ops);
  char *dir = altar_test_tmpdir("k8s-kc");
  char path[1024];
  snprintf(path, sizeof path, "%s/kubeconfig", dir);
  const char *kc = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u, namespace: team-a}\n"
                   "clusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:1'}\n"
                   "users:\n- name: u\n  user: {token: t}\n";
  altar_test_write_file(path, kc, strlen(kc));
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "kubeconfig", path);
  altar_strmap_set(&props, "data_root", "./var/data"); /* accepted, unused */
  altar_strmap_set(&props, "max_slots", "{\"gpu\": 4, \"normal\": 10}");
  altar_strmap_set(&props, "pool_node_selectors", "{\"gpu\": {\"pool\": \"l4\"}}");
  altar_strmap_set(&props, "run_as_user", "1000");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open_by_name("kubernetes", &props, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT_STRING_EQUAL(altar__k8s_namespace(altar_backend_impl(be)), "team-a");
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "/mnt/volume");
  CU_ASSERT_EQUAL(altar_backend_verification(be), ALTAR_VERIFY_TASK);
  altar_resources_t h100 = {.gpu = "h100", .count = 1}, gpu = {.gpu = "gpu", .count = 1};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_check_resources(be, &h100, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "resources.gpu") != NULL);
  CU_ASSERT_EQUAL(altar_backend_check_resources(be, &gpu, &err), 0);
  altar_backend_close(be);
  altar_strmap_set(&props, "max_slots", "{\"gpu\": -1}");
  CU_ASSERT(altar_backend_open_by_name("kubernetes", &props, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "max_slots.gpu") != NULL);
  altar_strmap_remove(&props, "max_slots");
  altar_strmap_set(&props, "nmespace", "x");
  CU_ASSERT(altar_backend_open_by_name("kubernetes", &props, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "nmespace") != NULL);
  altar_strmap_clear(&props);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_storage_register_builtin(); /* staging reads file:// inputs */
  altar_contract_add_suite(&contract_fx);
  ALTAR_SUITE("kubernetes", NULL, NULL);
  ALTAR_TEST(test_vtable_create);
  ALTAR_TEST(test_label_safe);
  ALTAR_TEST(test_manifest_shape);
  ALTAR_TEST(test_manifest_defaults);
  ALTAR_TEST(test_manifest_extend_mounts);
  ALTAR_TEST(test_bad_params);
  ALTAR_TEST(test_submit_creates);
  ALTAR_TEST(test_submit_adopts_pending);
  ALTAR_TEST(test_submit_adopts_running);
  ALTAR_TEST(test_submit_refuses_pending_other);
  ALTAR_TEST(test_submit_refuses_running_other);
  ALTAR_TEST(test_submit_avoid_hosts_adopts);
  ALTAR_TEST(test_submit_replaces_succeeded);
  ALTAR_TEST(test_submit_replaces_failed);
  ALTAR_TEST(test_submit_waits_out_deletion);
  ALTAR_TEST(test_submit_uid_precondition);
  ALTAR_TEST(test_delete_precondition_spares_newer);
  ALTAR_TEST(test_submit_never_settles);
  ALTAR_TEST(test_submit_other_errors);
  ALTAR_TEST(test_default_read_job);
  ALTAR_TEST(test_poll_bulk);
  ALTAR_TEST(test_poll_from_watch);
  ALTAR_TEST(test_pod_waits_near_deadline);
  ALTAR_TEST(test_submit_paced_by_backlog);
  ALTAR_TEST(test_backlog_slow_start);
  ALTAR_TEST(test_backlog_follows_queue);
  ALTAR_TEST(test_backlog_forgets_adopted);
  ALTAR_TEST(test_paced_submit_never_blocks_poll);
  ALTAR_TEST(test_poll_default_describe);
  ALTAR_TEST(test_capacity);
  ALTAR_TEST(test_pools_servable);
  ALTAR_TEST(test_quantity_count);
  ALTAR_TEST(test_capacity_from_nodes);
  ALTAR_TEST(test_cancel);
  ALTAR_TEST(test_job_info_from_json);
  ALTAR_TEST(test_explain_failure);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
