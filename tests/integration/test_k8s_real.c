/* The kubernetes backend against a real control plane: etcd, kube-apiserver,
 * the Job controller and the scheduler, with kwok playing the kubelet for two
 * nodes (scripts/services/k8s.sh start). Everything goes through the
 * project's libcurl runtime; the test reads the API directly (as the admin)
 * only to check what the server holds.
 *
 * kwok runs no containers: a pod's fate is chosen by labels on the spec that
 * the kwok stages written by k8s.sh read — kwok.altar.test/exit-code=<n>
 * (137 ends OOMKilled), kwok.altar.test/hold (keeps running),
 * kwok.altar.test/wait=<Reason> (stays Pending waiting), and
 * kwok.altar.test/verify-exit=<n> (the verify-inputs init container exits n).
 * The fixture sets verify-exit itself by hashing the staged input the way the
 * init container's verifier would, since no container runs it here.
 *
 * Needs the cluster: ALTAR_K8S_DIR (default ${TMPDIR:-/tmp}/altar-k8s-16443).
 * Without it the program exits 77 (skipped), and 1 under CI=true. */
#include "altar/backend.h"
#include "altar/buf.h"
#include "altar/digest.h"
#include "backends/k8s_api.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"
#include "core/unconst.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NS "altar-test"
#define L_EXIT "kwok.altar.test/exit-code"
#define L_HOLD "kwok.altar.test/hold"
#define L_WAIT "kwok.altar.test/wait"
#define L_VERIFY "kwok.altar.test/verify-exit"

static char kdir[1024];
static char *tmp;

static void pathof(char *out, size_t sz, const char *name) { snprintf(out, sz, "%s/%s", kdir, name); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the API as the admin, to check what the server holds ---- */

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  return altar_buf_append(ud, p, size * n) ? 0 : size * n;
}

/* method path [body] → parsed JSON (NULL if not JSON); *pstatus the HTTP status. */
static json_t *kube(const char *method, const char *path, const char *body, long *pstatus) {
  char url[2048], ca[1100], cert[1100], key[1100];
  snprintf(url, sizeof url, "https://127.0.0.1:%s%s", getenv("ALTAR_K8S_PORT") ? getenv("ALTAR_K8S_PORT") : "16443",
           path);
  pathof(ca, sizeof ca, "pki/ca.crt");
  pathof(cert, sizeof cert, "pki/admin.crt");
  pathof(key, sizeof key, "pki/admin.key");
  CURL *c = curl_easy_init();
  altar_buf_t b = {0};
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
  curl_easy_setopt(c, CURLOPT_SSLKEY, key);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  long status = 0;
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  json_t *v = b.len ? json_loadb((const char *)b.data, b.len, 0, NULL) : NULL;
  altar_buf_free(&b);
  if (pstatus) *pstatus = status;
  return v;
}

static json_t *get_job(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/" NS "/jobs/%s", name);
  long st = 0;
  json_t *j = kube("GET", path, NULL, &st);
  if (st != 200) {
    json_decref(j);
    return NULL;
  }
  return j;
}

/* The Job's pods (a PodList). */
static json_t *pods_of(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "/api/v1/namespaces/" NS "/pods?labelSelector=batch.kubernetes.io%%2Fjob-name%%3D%s",
           name);
  return kube("GET", path, NULL, NULL);
}

/* Waits (bounded) until the Job has a pod bound to a node; its node name. */
static char *wait_pod_node(const char *name, int limit_s) {
  for (int i = 0; i < limit_s * 10; i++) {
    json_t *pods = pods_of(name);
    json_t *item = json_array_get(json_object_get(pods, "items"), 0);
    const char *node = json_string_value(json_object_get(json_object_get(item, "spec"), "nodeName"));
    char *out = node ? strdup(node) : NULL;
    json_decref(pods);
    if (out) return out;
    sleep_ms(100);
  }
  return NULL;
}

/* ---- backends over the real runtime ---- */

static altar_k8s_http_config_t load_kc(const char *file) {
  char path[1100];
  pathof(path, sizeof path, file);
  altar_k8s_http_config_t cfg;
  altar__k8s_http_config_init(&cfg);
  altar_error_t err = {0};
  int rc = altar__k8s_kubeconfig_load(path, NULL, &cfg, &err);
  if (rc) fprintf(stderr, "kubeconfig %s: %s\n", path, err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  return cfg;
}

static altar_k8s_runtime_t *runtime_from(altar_k8s_http_config_t *cfg) {
  altar_error_t err = {0};
  altar_k8s_runtime_t *rt = altar__k8s_http_runtime_new(cfg, &err);
  if (!rt) fprintf(stderr, "runtime: %s\n", err.msg);
  altar__k8s_http_config_clear(cfg);
  return rt;
}

static altar_k8s_runtime_t *admin_runtime(void) {
  altar_k8s_http_config_t cfg = load_kc("admin.kubeconfig");
  return runtime_from(&cfg);
}

/* What the verifier in the init container would conclude: kwok runs no
 * container, so the fixture hashes the staged file and labels the pod. */
static int fx_extend(void *ctx, const altar_spec_t *spec, json_t *manifest, altar_error_t *err) {
  const char *staging = ctx;
  (void)err;
  bool bad = false;
  for (size_t i = 0; staging && i < spec->n_inputs; i++) {
    const altar_transfer_t *t = &spec->inputs[i];
    if (!t->digest) continue;
    char path[4200], got[ALTAR_DIGEST_BUFSZ];
    snprintf(path, sizeof path, "%s/%s", staging, t->logical_path);
    altar_error_t herr = {0};
    if (altar_sha256_file(path, got, &herr) || strcmp(got, t->digest)) bad = true;
  }
  if (bad) {
    json_t *labels = json_object_get(
        json_object_get(json_object_get(json_object_get(manifest, "spec"), "template"), "metadata"), "labels");
    json_object_set_new(labels, L_VERIFY, json_string("1"));
  }
  return ALTAR_OK;
}

typedef struct kopts {
  const char *staging_root;
  int64_t backoff_limit;
  int submit_window; /* 0: the default */
  const altar_k8s_pool_t *pools;
  size_t n_pools;
  bool unpaced; /* submit_backlog 0: capacity from the ceilings alone */
} kopts_t;

static altar_k8s_t *make_k8s(const kopts_t *o) {
  altar_k8s_config_t cfg;
  altar__k8s_config_init(&cfg);
  cfg.namespace_ = NS;
  cfg.staging_root = o ? o->staging_root : NULL;
  cfg.backoff_limit = o ? o->backoff_limit : 0;
  cfg.pools = o ? o->pools : NULL;
  cfg.n_pools = o ? o->n_pools : 0;
  if (o && o->submit_window) cfg.submit_window = o->submit_window;
  if (o && o->unpaced) cfg.submit_backlog = 0;
  cfg.extend_manifest = fx_extend;
  cfg.extend_ctx = ALTAR__UNCONST(cfg.staging_root);
  altar_error_t err = {0};
  altar_k8s_runtime_t *rt = admin_runtime();
  if (!rt) return NULL;
  altar_k8s_t *k = altar__k8s_new(&cfg, rt, &err);
  if (!k) fprintf(stderr, "altar__k8s_new: %s\n", err.msg);
  return k;
}

/* ---- the contract fixture ---- */

static altar_backend_t *fx_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  /* Slot ceilings so capacity answers from the server's Jobs. */
  altar_k8s_pool_t pools[1];
  memset(pools, 0, sizeof pools);
  pools[0].name = "normal";
  pools[0].max_slots = 1000;
  kopts_t o = {.staging_root = data_root, .pools = pools, .n_pools = 1};
  altar_k8s_t *k = make_k8s(&o);
  if (!k) {
    altar_error_set(err, ALTAR_EBACKEND, "could not build the kubernetes backend");
    return NULL;
  }
  return altar__k8s_backend_wrap(k);
}

static int fx_set_exit(void *ctx, altar_spec_t *spec, int code) {
  (void)ctx;
  char v[16];
  snprintf(v, sizeof v, "%d", code);
  return altar_spec_set_label(spec, L_EXIT, v) || altar_spec_add_arg(spec, "true") ? -1 : 0;
}
static int fx_set_sleep(void *ctx, altar_spec_t *spec, int seconds) {
  (void)ctx;
  (void)seconds; /* held until the deadline or a delete ends it */
  return altar_spec_set_label(spec, L_HOLD, "true") || altar_spec_add_arg(spec, "sleep") ? -1 : 0;
}
static int fx_set_oom(void *ctx, altar_spec_t *spec) {
  (void)ctx;
  spec->resources.memory_mb = (altar_opt_i64_t){true, 64};
  return fx_set_exit(ctx, spec, 137);
}
static int fx_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  altar_error_t err = {0};
  return altar__k8s_runtime_delete_job(altar__k8s_runtime(altar_backend_impl(be)), h->external_id, NS, NULL, &err);
}

static altar_contract_fixture_t fixture = {
    .name = "kubernetes-real",
    .image = "busybox:1.36",
    .wait_s = 90,
    .make_backend = fx_make,
    .set_exit = fx_set_exit,
    .set_sleep = fx_set_sleep,
    .set_oom = fx_set_oom,
    .vanish = fx_vanish,
    .task_check_simulated = true, /* fx_extend plays the verifier */
};

/* ---- beyond the contract ---- */

static altar_spec_t *spec_named(const char *kind, const char *tag) {
  altar_spec_t *s = altar_spec_new(kind, "busybox:1.36");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_set_label(s, "job_id", tag);
  altar_spec_add_arg(s, "true");
  return s;
}

static int submit(altar_k8s_t *k, const altar_spec_t *s, altar_handle_t *h) {
  altar_error_t err = {0};
  int rc = altar__k8s_submit(k, s, h, &err);
  if (rc) fprintf(stderr, "submit: %s (%s)\n", err.msg, altar_err_name(rc));
  return rc;
}

static int wait_end(altar_k8s_t *k, const altar_handle_t *h, altar_status_t *st) {
  for (int i = 0; i < 900; i++) {
    altar_error_t err = {0};
    int rc = altar__k8s_poll(k, h, 1, st, &err);
    if (rc) {
      fprintf(stderr, "poll: %s\n", err.msg);
      return rc;
    }
    if (altar_state_terminal(st->state)) return 0;
    altar_status_clear(st);
    sleep_ms(100);
  }
  CU_FAIL("job did not finish within 90 s");
  return -1;
}

static int wait_state(altar_k8s_t *k, const altar_handle_t *h, altar_state_t want) {
  for (int i = 0; i < 900; i++) {
    altar_status_t st;
    altar_error_t err = {0};
    if (altar__k8s_poll(k, h, 1, &st, &err)) return -1;
    altar_state_t got = st.state;
    altar_status_clear(&st);
    if (got == want) return 0;
    sleep_ms(100);
  }
  return -1;
}

/* The Job on the server has what submit rendered: labels passed through or
 * made safe, annotations, digest, limits, deadline, init container, selector. */
static void test_submit_renders_on_server(void) {
  char *data = altar_test_tmpdir("k8s-real-data");
  altar_k8s_pool_t pools[1];
  memset(pools, 0, sizeof pools);
  pools[0].name = "gpu";
  pools[0].max_slots = 16; /* above what the pool's node has: capacity reads the node */
  altar_strmap_set(&pools[0].node_selector, "altar.test/pool", "gpu");
  kopts_t o = {.staging_root = data, .backoff_limit = 2, .pools = pools, .n_pools = 1};
  altar_k8s_t *k = make_k8s(&o);
  altar_strmap_clear(&pools[0].node_selector);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  altar_spec_t *s = spec_named("k8s-render", "render-1");
  altar_spec_set_label(s, "example.com/model", "GM12878.v2");
  altar_spec_set_label(s, "fold index", "3 of 5");
  s->resources.gpu = strdup("gpu");
  s->resources.count = 2;
  s->resources.memory_mb = (altar_opt_i64_t){true, 512};
  s->timeout_s = (altar_opt_i64_t){true, 600};
  char src[4200], digest[ALTAR_DIGEST_BUFSZ], uri[4300];
  snprintf(src, sizeof src, "%s/weights.src", data);
  altar_test_write_file(src, "weights", 7);
  altar_contract_sha256("weights", 7, digest);
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_spec_add_input(s, uri, "models/w.bin", NULL, digest);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_stage_inputs(k, s->inputs, s->n_inputs, &err), 0);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(submit(k, s, &h), 0);
  json_t *job = get_job(h.external_id);
  CU_ASSERT_PTR_NOT_NULL_FATAL(job);
  json_t *meta = json_object_get(job, "metadata"), *labels = json_object_get(meta, "labels");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "example.com/model")), "GM12878.v2");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "job_id")), "render-1");
  CU_ASSERT_PTR_NULL(json_object_get(labels, "fold index"));
  const char *key;
  json_t *v;
  int safe_fold = 0;
  json_object_foreach(labels, key, v) {
    if (!strncmp(key, "fold-index-", 11)) {
      safe_fold++;
      CU_ASSERT(altar__k8s_label_value_ok(json_string_value(v)));
    }
  }
  CU_ASSERT_EQUAL(safe_fold, 1);
  json_t *ann = json_object_get(meta, "annotations");
  const char *md = json_string_value(json_object_get(ann, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION));
  CU_ASSERT(md && !strncmp(md, "sha256:", 7));
  json_t *orig = json_loads(json_string_value(json_object_get(ann, ALTAR_K8S_LABELS_ANNOTATION)), 0, NULL);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(orig, "fold index")), "3 of 5");
  json_decref(orig);
  json_t *spec = json_object_get(job, "spec");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(spec, "activeDeadlineSeconds")), 600);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(spec, "backoffLimit")), 2);
  json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pod, "nodeSelector"), "altar.test/pool")),
                         "gpu");
  json_t *init = json_array_get(json_object_get(pod, "initContainers"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(init, "name")), ALTAR_K8S_VERIFY_CONTAINER);
  json_t *limits =
      json_object_get(json_object_get(json_array_get(json_object_get(pod, "containers"), 0), "resources"), "limits");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(limits, "nvidia.com/gpu")), "2");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(limits, "memory")), "512Mi");
  json_decref(job);
  /* The gpu pool's selector puts it on the one node labelled for it. */
  char *node = wait_pod_node(h.external_id, 60);
  CU_ASSERT_PTR_NOT_NULL(node);
  if (node) CU_ASSERT_STRING_EQUAL(node, "altar-node-b");
  free(node);
  altar_status_t st;
  if (wait_end(k, &h, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    altar_status_clear(&st);
  }
  /* Capacity: the 4 GPUs altar-node-b has allocatable (the one node the
   * pool's selector matches; the ceiling is 16) less the pool's active Jobs
   * (none now); the CPU pool, not configured, is bounded only by the backlog
   * of Jobs not yet started (none: the one Job ended), so it has all of the
   * backlog's bound: the slow start's first one (a one-at-a-time submit is
   * not counted in the backlog, so its start does not grow the bound). */
  altar_capacity_t cap = {0};
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, &err), 0);
  altar_resources_t gpu = {.gpu = "gpu", .count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &gpu), 4);
  altar_resources_t cpu = {.count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), ALTAR_K8S_DEFAULT_PACE_START);
  altar_capacity_clear(&cap);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar__k8s_free(k);
  altar_test_rmtree(data);
  free(data);
}

/* Adopt an active Job with the same digest, refuse another digest, replace
 * a finished Job (a new uid). */
static void test_adopt_refuse_replace(void) {
  altar_k8s_t *k = make_k8s(NULL);
  kopts_t other = {.backoff_limit = 3};
  altar_k8s_t *k2 = make_k8s(&other); /* renders another manifest digest */
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k2);
  altar_spec_t *s = spec_named("k8s-adopt", "adopt-1");
  altar_spec_set_label(s, L_HOLD, "true");
  altar_handle_t h1, h2, h3;
  CU_ASSERT_EQUAL_FATAL(submit(k, s, &h1), 0);
  json_t *job = get_job(h1.external_id);
  char *uid1 = strdup(json_string_value(json_object_get(json_object_get(job, "metadata"), "uid")));
  json_decref(job);
  CU_ASSERT_EQUAL(submit(k, s, &h2), 0); /* adopted */
  CU_ASSERT_STRING_EQUAL(h1.external_id, h2.external_id);
  job = get_job(h1.external_id);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(job, "metadata"), "uid")), uid1);
  json_decref(job);
  altar_error_t err = {0};
  altar_handle_t hx;
  CU_ASSERT_EQUAL(altar__k8s_submit(k2, s, &hx, &err), ALTAR_EJOBEXISTS);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "different manifest"));
  /* A finished Job of the spec's name is replaced, not taken as the result. */
  altar_spec_t *done = spec_named("k8s-replace", "replace-1");
  CU_ASSERT_EQUAL_FATAL(submit(k, done, &h3), 0);
  altar_status_t st;
  if (wait_end(k, &h3, &st) == 0) altar_status_clear(&st);
  job = get_job(h3.external_id);
  char *uid3 = strdup(json_string_value(json_object_get(json_object_get(job, "metadata"), "uid")));
  json_decref(job);
  altar_handle_t h4;
  CU_ASSERT_EQUAL(submit(k, done, &h4), 0);
  job = get_job(h4.external_id);
  CU_ASSERT_PTR_NOT_NULL(job);
  const char *uid4 = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
  CU_ASSERT(uid4 && strcmp(uid4, uid3) != 0); /* a new Job, not the finished one */
  json_decref(job);
  if (wait_end(k, &h4, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    altar_status_clear(&st);
  }
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h1, &err), 0);
  free(uid1);
  free(uid3);
  altar_handle_clear(&h1);
  altar_handle_clear(&h2);
  altar_handle_clear(&h3);
  altar_handle_clear(&h4);
  altar_spec_free(s);
  altar_spec_free(done);
  altar__k8s_free(k);
  altar__k8s_free(k2);
}

/* What the real server does that a stand-in may not: 409 on a stale uid,
 * the Job still served with a deletionTimestamp under foreground deletion. */
static void test_server_semantics(void) {
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  altar_spec_t *s = spec_named("k8s-semantics", "sem-1");
  altar_spec_set_label(s, L_HOLD, "true");
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(submit(k, s, &h), 0);
  char path[512];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/" NS "/jobs/%s", h.external_id);
  long status = 0;
  json_t *r = kube("DELETE", path,
                   "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{\"uid\":"
                   "\"00000000-0000-0000-0000-000000000000\"}}",
                   &status);
  CU_ASSERT_EQUAL(status, 409);
  json_decref(r);
  /* The runtime treats that 409 as "the name is someone else's now". */
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_runtime_delete_job(altar__k8s_runtime(k), h.external_id, NS,
                                                "00000000-0000-0000-0000-000000000000", &err),
                  0);
  json_t *job = get_job(h.external_id);
  CU_ASSERT_PTR_NOT_NULL(job); /* spared */
  json_decref(job);
  char *node = wait_pod_node(h.external_id, 60); /* scheduled, so foreground deletion has a pod to wait for */
  CU_ASSERT_PTR_NOT_NULL(node);
  free(node);
  r = kube("DELETE", path, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Foreground\"}",
           &status);
  CU_ASSERT(status == 200 || status == 202);
  CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(r, "metadata"), "deletionTimestamp"));
  json_decref(r);
  /* While it is being deleted, read_job reports nothing to adopt… */
  altar_k8s_job_info_t *info = NULL;
  job = get_job(h.external_id);
  if (job) {
    CU_ASSERT_EQUAL(altar__k8s_runtime_read_job(altar__k8s_runtime(k), h.external_id, NS, &info, &err), 0);
    CU_ASSERT_PTR_NULL(info);
    altar__k8s_job_info_free(info);
    json_decref(job);
  }
  /* …and submit settles once it is gone, creating it afresh. */
  altar_handle_t h2;
  CU_ASSERT_EQUAL(submit(k, s, &h2), 0);
  job = get_job(h.external_id);
  CU_ASSERT_PTR_NOT_NULL(job);
  CU_ASSERT_PTR_NULL(json_object_get(json_object_get(job, "metadata"), "deletionTimestamp"));
  json_decref(job);
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h2, &err), 0);
  altar_handle_clear(&h);
  altar_handle_clear(&h2);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* Cancel removes the Job and, through the garbage collector, its pods. */
static void test_cancel_deletes_pods(void) {
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  altar_spec_t *s = spec_named("k8s-cancel", "cancel-1");
  altar_spec_set_label(s, L_HOLD, "true");
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(submit(k, s, &h), 0);
  CU_ASSERT_EQUAL(wait_state(k, &h, ALTAR_STATE_RUNNING), 0);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h, &err), 0);
  CU_ASSERT_EQUAL(altar__k8s_cancel(k, &h, &err), 0); /* twice is fine */
  size_t left = 1;
  for (int i = 0; i < 600 && left; i++) {
    json_t *pods = pods_of(h.external_id);
    left = json_array_size(json_object_get(pods, "items"));
    json_decref(pods);
    if (left) sleep_ms(100);
  }
  CU_ASSERT_EQUAL(left, 0);
  json_t *job = get_job(h.external_id);
  CU_ASSERT_PTR_NULL(job);
  json_decref(job);
  altar_status_t st;
  CU_ASSERT_EQUAL(altar__k8s_poll(k, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* A bulk list pages through limit/continue: 5 Jobs, 2 per page. */
static void test_list_pages(void) {
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  altar_handle_t h[5];
  altar_spec_t *s[5];
  for (int i = 0; i < 5; i++) {
    char tag[32];
    snprintf(tag, sizeof tag, "page-%d", i);
    s[i] = spec_named("k8s-pages", tag);
    altar_spec_set_label(s[i], L_HOLD, "true");
    CU_ASSERT_EQUAL_FATAL(submit(k, s[i], &h[i]), 0);
  }
  altar_k8s_http_config_t cfg = load_kc("admin.kubeconfig");
  cfg.list_limit = 2;
  altar_k8s_runtime_t *rt = runtime_from(&cfg);
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_runtime_list_jobs(rt, NS, "altar.dev/kind=k8s-pages", &jobs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 5);
  for (int i = 0; i < 5; i++) {
    bool found = false;
    for (size_t j = 0; j < n; j++) found |= !strcmp(jobs[j].name, h[i].external_id);
    CU_ASSERT(found);
  }
  altar__k8s_job_infos_free(jobs, n);
  altar__k8s_runtime_free(rt);
  for (int i = 0; i < 5; i++) {
    altar__k8s_cancel(k, &h[i], &err);
    altar_handle_clear(&h[i]);
    altar_spec_free(s[i]);
  }
  altar__k8s_free(k);
}

/* A pod stuck waiting for its image, and one no node can take, fail with
 * their own reasons when the deadline ends them, the platform's words as detail. */
static void test_waiting_reasons(void) {
  altar_k8s_pool_t pools[1];
  memset(pools, 0, sizeof pools);
  pools[0].name = "a100";
  pools[0].max_slots = -1;
  altar_strmap_set(&pools[0].node_selector, "altar.test/pool", "a100"); /* no such node */
  kopts_t o = {.pools = pools, .n_pools = 1};
  altar_k8s_t *k = make_k8s(&o);
  altar_strmap_clear(&pools[0].node_selector);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  altar_spec_t *pull = spec_named("k8s-image-pull", "wait-1");
  altar_spec_set_label(pull, L_WAIT, "ImagePullBackOff");
  pull->timeout_s = (altar_opt_i64_t){true, 4};
  altar_spec_t *nowhere = spec_named("k8s-unschedulable", "wait-2");
  nowhere->resources.gpu = strdup("a100");
  nowhere->resources.count = 1;
  nowhere->timeout_s = (altar_opt_i64_t){true, 4};
  altar_handle_t h[2];
  CU_ASSERT_EQUAL_FATAL(submit(k, pull, &h[0]), 0);
  CU_ASSERT_EQUAL_FATAL(submit(k, nowhere, &h[1]), 0);
  const char *want[2] = {ALTAR_K8S_REASON_IMAGE_PULL, ALTAR_K8S_REASON_UNSCHEDULABLE};
  const char *words[2] = {"Back-off pulling image", "nodes are available"};
  bool done[2] = {false, false};
  /* Both polled together, as a worker does: one list per tick. */
  for (int tick = 0; tick < 900 && !(done[0] && done[1]); tick++) {
    altar_status_t st[2];
    memset(st, 0, sizeof st);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar__k8s_poll(k, h, 2, st, &err), 0);
    for (int i = 0; i < 2; i++) {
      if (!done[i] && st[i].state == ALTAR_STATE_FAILED) {
        done[i] = true;
        CU_ASSERT_PTR_NOT_NULL_FATAL(st[i].failure);
        fprintf(stderr, "  %s: %s\n", st[i].failure->reason, st[i].failure->detail ? st[i].failure->detail : "");
        CU_ASSERT_STRING_EQUAL(st[i].failure->reason, want[i]);
        CU_ASSERT_FALSE(st[i].failure->deterministic);
        CU_ASSERT(st[i].failure->detail && strstr(st[i].failure->detail, words[i]));
        CU_ASSERT(st[i].failure->detail && strstr(st[i].failure->detail, "DeadlineExceeded"));
      }
      CU_ASSERT(st[i].state != ALTAR_STATE_SUCCEEDED);
      altar_status_clear(&st[i]);
    }
    sleep_ms(100);
  }
  CU_ASSERT(done[0] && done[1]);
  for (int i = 0; i < 2; i++) altar_handle_clear(&h[i]);
  altar_spec_free(pull);
  altar_spec_free(nowhere);
  altar__k8s_free(k);
}

/* avoid_hosts becomes a node anti-affinity: with two nodes, the pod lands on
 * the one not avoided; avoiding both leaves it unschedulable. */
static void test_avoid_hosts(void) {
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  const char *nodes[2] = {"altar-node-a", "altar-node-b"};
  for (int round = 0; round < 4; round++) {
    char tag[32];
    snprintf(tag, sizeof tag, "avoid-%d", round);
    altar_spec_t *s = spec_named("k8s-avoid", tag);
    altar_spec_set_label(s, L_HOLD, "true");
    const char *avoided = nodes[round % 2];
    altar_spec_add_avoid_host(s, avoided);
    altar_handle_t h;
    CU_ASSERT_EQUAL_FATAL(submit(k, s, &h), 0);
    char *node = wait_pod_node(h.external_id, 60);
    CU_ASSERT_PTR_NOT_NULL(node);
    if (node) CU_ASSERT_STRING_EQUAL(node, nodes[(round + 1) % 2]);
    free(node);
    altar_error_t err = {0};
    altar__k8s_cancel(k, &h, &err);
    altar_handle_clear(&h);
    altar_spec_free(s);
  }
  altar_spec_t *s = spec_named("k8s-avoid", "avoid-both");
  altar_spec_add_avoid_host(s, nodes[0]);
  altar_spec_add_avoid_host(s, nodes[1]);
  s->timeout_s = (altar_opt_i64_t){true, 3};
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(submit(k, s, &h), 0);
  altar_status_t st;
  if (wait_end(k, &h, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_K8S_REASON_UNSCHEDULABLE);
    altar_status_clear(&st);
  }
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* ---- auth as users have it ---- */

/* Lists Jobs in ns through a runtime; 0, or the error with its message. */
static int list_with(altar_k8s_runtime_t *rt, const char *ns, altar_error_t *err) {
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  int rc = altar__k8s_runtime_list_jobs(rt, ns, NULL, &jobs, &n, err);
  altar__k8s_job_infos_free(jobs, n);
  return rc;
}

static void write_kc(const char *path, const char *user_yaml) {
  char ca[1100], text[8192];
  pathof(ca, sizeof ca, "ca.crt");
  snprintf(text, sizeof text,
           "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:%s\n"
           "    certificate-authority: %s\ncontexts:\n- name: c\n  context: {cluster: c%s}\ncurrent-context: c\n"
           "users:\n- name: u\n  user:\n%s\n",
           getenv("ALTAR_K8S_PORT") ? getenv("ALTAR_K8S_PORT") : "16443", ca, user_yaml ? ", user: u" : "",
           user_yaml ? user_yaml : "    {}");
  altar_test_write_file(path, text, strlen(text));
}

static void test_auth_forms(void) {
  altar_error_t err = {0};
  /* Client certificates, embedded and as files; a static token. */
  const char *files[] = {"admin.kubeconfig", "cert.kubeconfig", "token.kubeconfig"};
  for (size_t i = 0; i < 3; i++) {
    altar_k8s_http_config_t cfg = load_kc(files[i]);
    altar_k8s_runtime_t *rt = runtime_from(&cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    int rc = list_with(rt, NS, &err);
    if (rc) fprintf(stderr, "%s: %s\n", files[i], err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    altar__k8s_runtime_free(rt);
  }
  /* No credentials: the real server answers 403 as system:anonymous. */
  char kc[1200];
  snprintf(kc, sizeof kc, "%s/anon.kubeconfig", tmp);
  write_kc(kc, NULL);
  altar_k8s_http_config_t cfg;
  altar__k8s_http_config_init(&cfg);
  CU_ASSERT_EQUAL(altar__k8s_kubeconfig_load(kc, NULL, &cfg, &err), 0);
  altar_k8s_runtime_t *rt = runtime_from(&cfg);
  CU_ASSERT_EQUAL(list_with(rt, NS, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "403"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "system:anonymous"));
  altar__k8s_runtime_free(rt);

  /* An exec credential plugin giving the token, with an expiry close enough
   * that every request runs it again; it counts its runs. */
  char plugin[1200], count[1200], tokfile[1100], yaml[4096];
  snprintf(plugin, sizeof plugin, "%s/cred-plugin.sh", tmp);
  snprintf(count, sizeof count, "%s/cred-runs", tmp);
  pathof(tokfile, sizeof tokfile, "token");
  const char *script = "#!/bin/sh\n"
                       "echo run >> \"$COUNT_FILE\"\n"
                       "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) exit 3 ;; esac\n"
                       "exp=$(date -u -d '+10 seconds' +%Y-%m-%dT%H:%M:%SZ)\n"
                       "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
                       "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}' \"$(cat \"$1\")\" \"$exp\"\n";
  altar_test_write_file(plugin, script, strlen(script));
  chmod(plugin, 0755);
  snprintf(yaml, sizeof yaml,
           "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./cred-plugin.sh\n"
           "      args: [\"%s\"]\n      env: [{name: COUNT_FILE, value: \"%s\"}]\n      interactiveMode: Never",
           tokfile, count);
  snprintf(kc, sizeof kc, "%s/exec.kubeconfig", tmp);
  write_kc(kc, yaml);
  altar__k8s_http_config_init(&cfg);
  int rc = altar__k8s_kubeconfig_load(kc, NULL, &cfg, &err);
  if (rc) fprintf(stderr, "exec kubeconfig: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  rt = runtime_from(&cfg);
  CU_ASSERT_EQUAL(list_with(rt, NS, &err), 0);
  CU_ASSERT_EQUAL(list_with(rt, NS, &err), 0);
  altar__k8s_runtime_free(rt);
  size_t len = 0;
  char *runs = altar_test_read_file(count, &len);
  size_t nruns = 0;
  for (size_t i = 0; runs && i < len; i++) nruns += runs[i] == '\n';
  free(runs);
  CU_ASSERT_EQUAL(nruns, 3); /* at load, then before each request */

  /* An exec plugin giving a client certificate. */
  char crt[1100], key[1100];
  pathof(crt, sizeof crt, "pki/admin.crt");
  pathof(key, sizeof key, "pki/admin.key");
  const char *cscript =
      "#!/bin/sh\n"
      "jq -n --rawfile c \"$1\" --rawfile k \"$2\" '{apiVersion:\"client.authentication.k8s.io/v1beta1\","
      "kind:\"ExecCredential\",status:{clientCertificateData:$c,clientKeyData:$k}}'\n";
  snprintf(plugin, sizeof plugin, "%s/cert-plugin.sh", tmp);
  altar_test_write_file(plugin, cscript, strlen(cscript));
  chmod(plugin, 0755);
  snprintf(yaml, sizeof yaml,
           "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: %s\n"
           "      args: [\"%s\", \"%s\"]",
           plugin, crt, key);
  write_kc(kc, yaml);
  altar__k8s_http_config_init(&cfg);
  rc = altar__k8s_kubeconfig_load(kc, NULL, &cfg, &err);
  if (rc) fprintf(stderr, "exec cert kubeconfig: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  rt = runtime_from(&cfg);
  CU_ASSERT_EQUAL(list_with(rt, NS, &err), 0);
  altar__k8s_runtime_free(rt);

  /* In-cluster: the service account's token, CA and namespace from the
   * standard files (here a directory k8s.sh filled from a TokenRequest).
   * Its Role reaches jobs in altar-test and nothing in altar-bench. */
  char sa[1100];
  pathof(sa, sizeof sa, "sa");
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", getenv("ALTAR_K8S_PORT") ? getenv("ALTAR_K8S_PORT") : "16443", 1);
  altar__k8s_http_config_init(&cfg);
  rc = altar__k8s_in_cluster_load(sa, &cfg, &err);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(cfg.namespace_, NS);
  rt = runtime_from(&cfg);
  CU_ASSERT_STRING_EQUAL(altar__k8s_runtime_default_namespace(rt), NS);
  CU_ASSERT_EQUAL(list_with(rt, NS, &err), 0);
  CU_ASSERT_EQUAL(list_with(rt, "altar-bench", &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "403"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "system:serviceaccount:altar-test:altar-worker"));
  /* Its ClusterRole lets capacity read the nodes' allocatable. */
  altar_k8s_node_info_t *nodes = NULL;
  size_t nn = 0;
  CU_ASSERT_EQUAL(altar__k8s_runtime_list_nodes(rt, &nodes, &nn, &err), 0);
  CU_ASSERT_EQUAL(nn, 2);
  for (size_t i = 0; i < nn; i++) {
    CU_ASSERT(nodes[i].schedulable);
    /* The API server serves 5000 in its canonical form, "5k". */
    int64_t pods = 0;
    CU_ASSERT(altar__k8s_quantity_count(altar_strmap_get(&nodes[i].allocatable, "pods"), &pods));
    CU_ASSERT_EQUAL(pods, 5000);
  }
  altar__k8s_node_infos_free(nodes, nn);
  altar__k8s_runtime_free(rt);
}

/* ---- many creates in flight, and the watch ---- */

/* Polls hs until every one is terminal (bounded), recording each handle's
 * first terminal status into final (cleared by the caller) and counting
 * terminal reports that changed after the first (there must be none). */
static int poll_until_done(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *final, int *pchanged,
                           int limit_s) {
  altar_status_t *st = calloc(n, sizeof *st);
  size_t left = n;
  for (int tick = 0; tick < limit_s * 10 && left; tick++) {
    altar_error_t err = {0};
    int rc = altar__k8s_poll(k, hs, n, st, &err);
    if (rc) fprintf(stderr, "poll (tick %d): %s\n", tick, err.msg);
    for (size_t i = 0; !rc && i < n; i++) {
      if (altar_state_terminal(st[i].state)) {
        if (final[i].state == ALTAR_STATE_PENDING && !final[i].handle.external_id) {
          final[i] = st[i];
          memset(&st[i], 0, sizeof st[i]);
          left--;
          continue;
        }
        if (st[i].state != final[i].state) (*pchanged)++;
      }
      altar_status_clear(&st[i]);
    }
    if (left) sleep_ms(100);
  }
  free(st);
  return left ? -1 : 0;
}

static const char *uid_of(const char *name, char *out, size_t sz) {
  json_t *job = get_job(name);
  const char *u = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
  snprintf(out, sz, "%s", u ? u : "");
  json_decref(job);
  return out;
}

/* With a window of 32 creates in flight: adopt, refuse, replace (the uid
 * precondition) and every failure reason come out as they do one at a time. */
static void test_many_in_flight(void) {
  kopts_t wide = {.submit_window = 32}, other = {.backoff_limit = 3, .submit_window = 32};
  altar_k8s_t *k = make_k8s(&wide), *k2 = make_k8s(&other);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k2);
  /* Before the burst: one held Job to adopt, one held Job of another
   * manifest to be refused, one finished Job to be replaced. */
  altar_spec_t *held = spec_named("k8s-flight", "adopt");
  altar_spec_set_label(held, L_HOLD, "true");
  altar_spec_t *theirs = spec_named("k8s-flight", "refuse");
  altar_spec_set_label(theirs, L_HOLD, "true");
  altar_spec_t *finished = spec_named("k8s-flight", "replace");
  altar_handle_t hh, ht, hf;
  CU_ASSERT_EQUAL_FATAL(submit(k, held, &hh), 0);
  CU_ASSERT_EQUAL_FATAL(submit(k2, theirs, &ht), 0);
  CU_ASSERT_EQUAL_FATAL(submit(k, finished, &hf), 0);
  altar_status_t st;
  if (wait_end(k, &hf, &st) == 0) altar_status_clear(&st);
  char uid_held[64], uid_fin[64], uid_now[64];
  uid_of(hh.external_id, uid_held, sizeof uid_held);
  uid_of(hf.external_id, uid_fin, sizeof uid_fin);
  CU_ASSERT(uid_held[0] && uid_fin[0]);

  /* The burst: 60 new Jobs (succeeding, exit 3, OOM) around the three. */
  enum { NEW = 60, N = NEW + 3 };
  altar_spec_t *specs[N];
  const char *want[N];
  for (int i = 0; i < NEW; i++) {
    char tag[32];
    snprintf(tag, sizeof tag, "burst-%d", i);
    specs[i] = spec_named("k8s-flight", tag);
    want[i] = NULL;
    if (i % 3 == 1) {
      altar_spec_set_label(specs[i], L_EXIT, "3");
      want[i] = "exit_3";
    } else if (i % 3 == 2) {
      altar_spec_set_label(specs[i], L_EXIT, "137");
      specs[i]->resources.memory_mb = (altar_opt_i64_t){true, 64};
      want[i] = ALTAR_REASON_OOM_KILLED;
    }
  }
  specs[NEW] = held;
  specs[NEW + 1] = theirs;
  specs[NEW + 2] = finished;
  altar_handle_t hs[N];
  memset(hs, 0, sizeof hs);
  size_t max_flight = 0;
  for (int i = 0; i < N; i++) {
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__k8s_submit_start(k, specs[i], &hs[i], &err), 0);
    if (altar__k8s_submits_in_flight(k) > max_flight) max_flight = altar__k8s_submits_in_flight(k);
  }
  fprintf(stderr, "  up to %zu creates in flight\n", max_flight);
  CU_ASSERT(max_flight > 1); /* they did overlap */
  CU_ASSERT(max_flight <= 32);
  /* The held one is adopted: same Job, still running, polled as running. */
  CU_ASSERT_EQUAL(wait_state(k, &hs[NEW], ALTAR_STATE_RUNNING), 0);
  CU_ASSERT_STRING_EQUAL(uid_of(hh.external_id, uid_now, sizeof uid_now), uid_held);
  altar_status_t *final = calloc(N, sizeof *final);
  int changed = 0;
  /* Every one but the adopted, held Job ends. */
  altar_handle_t ends[N - 1];
  altar_status_t *fin2 = calloc(N - 1, sizeof *fin2);
  for (int i = 0, j = 0; i < N; i++)
    if (i != NEW) ends[j++] = hs[i];
  CU_ASSERT_EQUAL(poll_until_done(k, ends, N - 1, fin2, &changed, 120), 0);
  CU_ASSERT_EQUAL(changed, 0);
  for (int i = 0, j = 0; i < N; i++) {
    if (i == NEW) continue;
    altar_status_t *f = &fin2[j++];
    if (i < NEW) {
      CU_ASSERT_EQUAL(f->state, want[i] ? ALTAR_STATE_FAILED : ALTAR_STATE_SUCCEEDED);
      if (want[i] && f->failure) CU_ASSERT_STRING_EQUAL(f->failure->reason, want[i]);
    } else if (i == NEW + 1) {
      /* Another manifest under the name: refused, reported through poll. */
      CU_ASSERT_EQUAL(f->state, ALTAR_STATE_FAILED);
      CU_ASSERT_PTR_NOT_NULL(f->failure);
      if (f->failure) {
        CU_ASSERT_STRING_EQUAL(f->failure->reason, "submit_failed");
        CU_ASSERT(f->failure->detail && strstr(f->failure->detail, "different manifest"));
      }
    } else {
      /* The finished Job was replaced by a new one (new uid) that succeeded. */
      CU_ASSERT_EQUAL(f->state, ALTAR_STATE_SUCCEEDED);
      uid_of(hf.external_id, uid_now, sizeof uid_now);
      CU_ASSERT(uid_now[0] && strcmp(uid_now, uid_fin) != 0);
    }
    altar_status_clear(f);
  }
  /* The refused one's own Job is untouched. */
  json_t *job = get_job(ht.external_id);
  CU_ASSERT_PTR_NOT_NULL(job);
  json_decref(job);
  altar_error_t err = {0};
  altar__k8s_cancel(k, &hh, &err);
  altar__k8s_cancel(k, &ht, &err);
  for (int i = 0; i < N; i++) {
    altar_handle_clear(&hs[i]);
    if (i < NEW) altar_spec_free(specs[i]);
  }
  free(final);
  free(fin2);
  altar_handle_clear(&hh);
  altar_handle_clear(&ht);
  altar_handle_clear(&hf);
  altar_spec_free(held);
  altar_spec_free(theirs);
  altar_spec_free(finished);
  altar__k8s_free(k);
  altar__k8s_free(k2);
}

/* Submits n Jobs (through the window) tagged tag; the handles into hs. */
static void submit_batch(altar_k8s_t *k, const char *tag, altar_handle_t *hs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char t[64];
    snprintf(t, sizeof t, "%s-%zu", tag, i);
    altar_spec_t *s = spec_named("k8s-watch", t);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__k8s_submit_start(k, s, &hs[i], &err), 0);
    altar_spec_free(s);
  }
}

static void expect_all_succeeded(altar_k8s_t *k, altar_handle_t *hs, size_t n) {
  altar_status_t *final = calloc(n, sizeof *final);
  int changed = 0;
  CU_ASSERT_EQUAL(poll_until_done(k, hs, n, final, &changed, 180), 0);
  CU_ASSERT_EQUAL(changed, 0);
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) {
    ok += final[i].state == ALTAR_STATE_SUCCEEDED;
    if (final[i].state == ALTAR_STATE_FAILED && final[i].failure)
      fprintf(stderr, "  %s: %s\n", hs[i].external_id, final[i].failure->reason);
    altar_status_clear(&final[i]);
  }
  CU_ASSERT_EQUAL(ok, n); /* no completion missed, none reported missing */
  free(final);
}

static void wait_synced(altar_k8s_t *k) {
  for (int i = 0; i < 300 && !(altar__k8s_watch(k) && altar__k8s_watch_synced(altar__k8s_watch(k))); i++) {
    altar_status_t st;
    altar_handle_t none = {.external_id = "altar-no-such-job"};
    altar_error_t err = {0};
    if (altar__k8s_poll(k, &none, 1, &st, &err) == 0) altar_status_clear(&st);
    sleep_ms(100);
  }
  CU_ASSERT_FATAL(altar__k8s_watch(k) && altar__k8s_watch_synced(altar__k8s_watch(k)));
}

/* The API server is killed and started again while Jobs run: the watch
 * resumes and every completion is seen, none taken for a deleted Job. */
static void test_watch_survives_apiserver_restart(void) {
  const char *src = getenv("ALTAR_SOURCE_DIR");
  CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  wait_synced(k);
  enum { N = 40 };
  altar_handle_t hs[N];
  memset(hs, 0, sizeof hs);
  submit_batch(k, "restart", hs, N);
  while (altar__k8s_submits_in_flight(k)) altar__k8s_submit_drive(k, 200);
  altar_k8s_watch_stats_t before;
  altar__k8s_watch_stats(altar__k8s_watch(k), &before);
  /* The script stops the API server by its pid and starts it over the same
   * etcd; the Jobs go on meanwhile only as far as the controllers can. */
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "ALTAR_K8S_DIR='%s' bash '%s/scripts/services/k8s.sh' restart-apiserver >&2", kdir, src);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  expect_all_succeeded(k, hs, N);
  altar_k8s_watch_stats_t after;
  altar__k8s_watch_stats(altar__k8s_watch(k), &after);
  fprintf(stderr, "  watch: %llu reconnects, %llu expired, %llu lists, %llu events\n",
          (unsigned long long)(after.reconnects - before.reconnects),
          (unsigned long long)(after.expired - before.expired), (unsigned long long)after.lists,
          (unsigned long long)after.events);
  CU_ASSERT(after.reconnects > before.reconnects); /* it did lose the connection */
  CU_ASSERT(after.events > before.events);
  for (int i = 0; i < N; i++) altar_handle_clear(&hs[i]);
  altar__k8s_free(k);
}

/* The list's resourceVersion now, as the server reports it. */
static char *jobs_version_now(void) {
  long st = 0;
  json_t *list = kube("GET", "/apis/batch/v1/namespaces/" NS "/jobs?limit=1", NULL, &st);
  const char *rv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
  char *copy = st == 200 && rv ? strdup(rv) : NULL;
  json_decref(list);
  return copy;
}

/* An expired version on the real server: a restarted API server fills its
 * watch cache from etcd's revision at that moment, so a watch from a
 * version older than that revision is answered 410 Gone. Left to itself
 * the backend's watch may resume from a version still current (nothing was
 * written while the server was down), so the test hands it one it saw
 * before writes it made itself; it must list again, and miss no completion
 * of the Jobs running across that list. */
static void test_watch_relists_on_expired_version(void) {
  const char *src = getenv("ALTAR_SOURCE_DIR");
  CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  wait_synced(k);
  char *old = jobs_version_now();
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  enum { N = 20 };
  altar_handle_t hs[N];
  memset(hs, 0, sizeof hs);
  submit_batch(k, "expired-a", hs, N / 2); /* writes after `old` */
  while (altar__k8s_submits_in_flight(k)) altar__k8s_submit_drive(k, 200);
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "ALTAR_K8S_DIR='%s' bash '%s/scripts/services/k8s.sh' restart-apiserver >&2", kdir, src);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  wait_synced(k);
  submit_batch(k, "expired-b", hs + N / 2, N / 2); /* running while the watch lists again */
  while (altar__k8s_submits_in_flight(k)) altar__k8s_submit_drive(k, 200);
  altar_k8s_watch_t *w = altar__k8s_watch(k);
  altar_k8s_watch_stats_t before, after;
  altar__k8s_watch_stats(w, &before);
  altar__k8s_watch_test_resume_from(w, old);
  for (int i = 0; i < 600; i++) {
    altar__k8s_watch_stats(w, &after);
    if (after.expired > before.expired && after.lists > before.lists && altar__k8s_watch_synced(w)) break;
    sleep_ms(100);
  }
  fprintf(stderr, "  watch from version %s: %llu expired, %llu lists\n", old,
          (unsigned long long)(after.expired - before.expired), (unsigned long long)(after.lists - before.lists));
  CU_ASSERT(after.expired > before.expired); /* the server said 410 */
  CU_ASSERT(after.lists > before.lists);     /* and the watch listed again */
  expect_all_succeeded(k, hs, N);
  for (int i = 0; i < N; i++) altar_handle_clear(&hs[i]);
  free(old);
  altar__k8s_free(k);
}

/* Someone else deletes a running Job: the watch's DELETED makes it
 * container_missing. */
static void test_watch_deleted_by_other(void) {
  altar_k8s_t *k = make_k8s(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  wait_synced(k);
  altar_spec_t *s = spec_named("k8s-watch", "deleted");
  altar_spec_set_label(s, L_HOLD, "true");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__k8s_submit_start(k, s, &h, &err), 0);
  CU_ASSERT_EQUAL_FATAL(wait_state(k, &h, ALTAR_STATE_RUNNING), 0);
  altar_k8s_watch_stats_t before;
  altar__k8s_watch_stats(altar__k8s_watch(k), &before);
  char path[512];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/" NS "/jobs/%s", h.external_id);
  long status = 0;
  json_decref(kube("DELETE", path,
                   "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Background\"}", &status));
  CU_ASSERT(status == 200 || status == 202);
  altar_status_t st;
  CU_ASSERT_EQUAL(wait_end(k, &h, &st), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_PTR_NOT_NULL(st.failure);
  if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  altar_status_clear(&st);
  altar_k8s_watch_stats_t after;
  altar__k8s_watch_stats(altar__k8s_watch(k), &after);
  CU_ASSERT(after.deleted > before.deleted); /* the watch told us */
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar__k8s_free(k);
}

/* Free slots of pool normal (ceiling 1000) as capacity reports them. */
static int64_t free_normal(altar_k8s_t *k) {
  altar_capacity_t cap;
  altar_capacity_init(&cap);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar__k8s_capacity(k, &cap, &err), 0);
  altar_resources_t cpu = {0};
  int64_t n = altar_capacity_free_for(&cap, &cpu);
  altar_capacity_clear(&cap);
  return n;
}

/* Free slots of pool normal once no Job of an earlier test holds one (up
 * to 120 s, woken by the watch): their deletions, reported while the test
 * below counts, freed slots under it (979 free where 977 were expected). */
static int64_t free_normal_settled(altar_k8s_t *k) {
  altar_k8s_watch_t *w = altar__k8s_watch(k);
  uint64_t gen = w ? altar__k8s_watch_generation(w) : 0;
  int64_t f = free_normal(k);
  for (int i = 0; w && f != 1000 && i < 600; i++) {
    altar__k8s_watch_wait(w, &gen, 200);
    f = free_normal(k);
  }
  if (f != 1000)
    fprintf(stderr, "  Jobs of earlier tests still hold %lld slots of pool normal\n", (long long)(1000 - f));
  return f;
}

/* A create in flight takes its slot at once: after each submit_start the
 * free slots are one fewer, whether the create is still on its way, has
 * been answered, or its Job is already watched (never counted twice). */
static void test_capacity_counts_in_flight(void) {
  altar_k8s_pool_t pools[1];
  memset(pools, 0, sizeof pools);
  pools[0].name = "normal";
  pools[0].max_slots = 1000;
  kopts_t o = {.pools = pools, .n_pools = 1, .submit_window = 16, .unpaced = true};
  altar_k8s_t *k = make_k8s(&o);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  wait_synced(k);
  int64_t base = free_normal_settled(k);
  enum { N = 40 };
  altar_handle_t hs[N];
  memset(hs, 0, sizeof hs);
  size_t max_flight = 0, mismatches = 0;
  for (int i = 0; i < N; i++) {
    char tag[32];
    snprintf(tag, sizeof tag, "cap-%d", i);
    altar_spec_t *s = spec_named("k8s-capacity", tag);
    altar_spec_set_label(s, L_HOLD, "true"); /* runs until deleted: keeps its slot */
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__k8s_submit_start(k, s, &hs[i], &err), 0);
    altar_spec_free(s);
    if (altar__k8s_submits_in_flight(k) > max_flight) max_flight = altar__k8s_submits_in_flight(k);
    int64_t f = free_normal(k);
    if (f != base - (i + 1)) {
      fprintf(stderr, "  after %d submits: %lld free, want %lld (%zu in flight)\n", i + 1, (long long)f,
              (long long)(base - (i + 1)), altar__k8s_submits_in_flight(k));
      mismatches++;
    }
  }
  fprintf(stderr, "  up to %zu creates in flight\n", max_flight);
  CU_ASSERT(max_flight > 1); /* some were counted while on their way */
  CU_ASSERT_EQUAL(mismatches, 0);
  /* Every create answered and every Job watched: still N taken. */
  while (altar__k8s_submits_in_flight(k)) altar__k8s_submit_drive(k, 200);
  CU_ASSERT_EQUAL(wait_state(k, &hs[N - 1], ALTAR_STATE_RUNNING), 0);
  CU_ASSERT_EQUAL(free_normal(k), base - N);
  /* Cancelled: the slots come back as the watch reports the deletions. */
  for (int i = 0; i < N; i++) {
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__k8s_cancel(k, &hs[i], &err), 0);
  }
  int64_t f = 0;
  for (int i = 0; i < 600 && (f = free_normal(k)) != base; i++) sleep_ms(100);
  CU_ASSERT_EQUAL(f, base);
  for (int i = 0; i < N; i++) altar_handle_clear(&hs[i]);
  altar__k8s_free(k);
}

/* ---- main ---- */

static int clean_namespace(void) {
  long st = 0;
  json_t *r = kube("DELETE", "/apis/batch/v1/namespaces/" NS "/jobs",
                   "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Background\"}", &st);
  json_decref(r);
  return st == 200 ? 0 : -1;
}

static void add_watch_suite(void) {
  ALTAR_SUITE("k8s-watch", NULL, NULL);
  ALTAR_TEST(test_capacity_counts_in_flight);
  ALTAR_TEST(test_many_in_flight);
  ALTAR_TEST(test_watch_deleted_by_other);
  ALTAR_TEST(test_watch_survives_apiserver_restart);
  ALTAR_TEST(test_watch_relists_on_expired_version);
}

static void add_suites(void) {
  altar_contract_add_suite(&fixture);
  ALTAR_SUITE("k8s-real", NULL, NULL);
  ALTAR_TEST(test_auth_forms);
  ALTAR_TEST(test_submit_renders_on_server);
  ALTAR_TEST(test_adopt_refuse_replace);
  ALTAR_TEST(test_server_semantics);
  ALTAR_TEST(test_cancel_deletes_pods);
  ALTAR_TEST(test_list_pages);
  ALTAR_TEST(test_waiting_reasons);
  ALTAR_TEST(test_avoid_hosts);
  add_watch_suite();
}

int main(int argc, char **argv) {
  const char *d = getenv("ALTAR_K8S_DIR");
  if (d && *d) snprintf(kdir, sizeof kdir, "%s", d);
  else
    snprintf(kdir, sizeof kdir, "%s/altar-k8s-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             getenv("ALTAR_K8S_PORT") ? getenv("ALTAR_K8S_PORT") : "16443");
  curl_global_init(CURL_GLOBAL_DEFAULT);
  altar_storage_register_builtin();
  long st = 0;
  json_t *ready = kube("GET", "/api/v1/namespaces/" NS, NULL, &st);
  json_decref(ready);
  if (st != 200) {
    const char *ci = getenv("CI");
    fprintf(stderr, "no control plane at %s (HTTP %ld); start it with scripts/services/k8s.sh start\n", kdir, st);
    return ci && !strcmp(ci, "true") ? 1 : 77;
  }
  if (clean_namespace()) {
    fprintf(stderr, "could not clear the jobs of namespace " NS "\n");
    return 1;
  }
  tmp = altar_test_tmpdir("k8s-real");
  int rc = altar_test_main(argc, argv, add_suites);
  altar_test_rmtree(tmp);
  free(tmp);
  return rc;
}
