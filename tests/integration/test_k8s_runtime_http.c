/* The real libcurl KubernetesRuntime against a local stand-in API server
 * (tests/integration/fake_k8s_server.py) over TLS on 127.0.0.1, with a CA,
 * server and client certificates made by `openssl` at test time and
 * kubeconfigs pointing at it. Covers create/409, list with a selector and
 * pages, read, delete with uid preconditions, pods for describe_failure,
 * bearer token and client-certificate auth, 401, TLS verification, 429/5xx
 * retries, timeouts, in-cluster config, and the backend end to end. */
#include "altar/buf.h"
#include "altar/kubernetes.h"
#include "testutil.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "s3cr3t-token-for-tests"

static char *dir;
static pid_t server_pid;
static int port;
static char server_url[64];

static char *path_in(const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int run_sh(const char *script) {
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(127);
    execl("/bin/sh", "sh", "-ec", script, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* base64 of a file, one line (for *-data fields). Caller frees. */
static char *b64_file(const char *name) {
  char cmd[512], *out = path_in("b64.tmp");
  snprintf(cmd, sizeof cmd, "base64 -w0 %s > b64.tmp", name);
  CU_ASSERT_FATAL(run_sh(cmd) == 0);
  char *data = altar_test_read_file(out, NULL);
  free(out);
  return data;
}

static int suite_init(void) {
  dir = altar_test_tmpdir("k8shttp");
  /* A CA, a server certificate for 127.0.0.1 and a client certificate. */
  const char *gen =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt "
      "-days 2 -subj /CN=altar-test-ca 2>/dev/null\n"
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr "
      "-subj /CN=127.0.0.1 2>/dev/null\n"
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n"
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
      "-extfile san.ext 2>/dev/null\n"
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key -out client.csr "
      "-subj /CN=altar-client/O=system:masters 2>/dev/null\n"
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 "
      "2>/dev/null\n"
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout other.key "
      "-out other.crt -days 2 -subj /CN=unrelated-ca 2>/dev/null\n";
  if (run_sh(gen) != 0) {
    fprintf(stderr, "openssl failed to make test certificates\n");
    return 1;
  }
  char script[1024], *pf = path_in("port");
  snprintf(script, sizeof script, "%s/tests/integration/fake_k8s_server.py", altar_test_source_dir());
  server_pid = fork();
  if (server_pid == 0) {
    if (chdir(dir) != 0) _exit(127);
    execlp("python3", "python3", script, "--cert", "server.crt", "--key", "server.key", "--client-ca", "ca.crt",
           "--token", TOKEN, "--port-file", pf, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 300 && !port; i++) {
    char *p = altar_test_read_file(pf, NULL);
    if (p) {
      port = (int)strtol(p, NULL, 10);
      free(p);
      break;
    }
    int st;
    if (waitpid(server_pid, &st, WNOHANG) == server_pid) break;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  free(pf);
  if (!port) {
    fprintf(stderr, "fake API server did not start (python3 %s)\n", script);
    return 1;
  }
  snprintf(server_url, sizeof server_url, "https://127.0.0.1:%d", port);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return 0;
}

static int suite_clean(void) {
  if (server_pid > 0) {
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
  }
  altar_test_rmtree(dir);
  free(dir);
  curl_global_cleanup();
  return 0;
}

/* ---- the control channel ---- */

static size_t sink(char *p, size_t s, size_t n, void *ud) {
  altar_buf_t *b = ud;
  altar_buf_append(b, p, s * n);
  return s * n;
}

static json_t *ctl(const char *what, json_t *body) {
  char url[256];
  snprintf(url, sizeof url, "%s/_test/%s", server_url, what);
  char *ca = path_in("ca.crt");
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  altar_buf_t out = {0};
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, text ? text : "{}");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  CURLcode cc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  free(ca);
  free(text);
  CU_ASSERT_FATAL(cc == CURLE_OK);
  json_t *r = json_loadb((const char *)out.data, out.len, 0, NULL);
  altar_buf_free(&out);
  CU_ASSERT_FATAL(r != NULL);
  return r;
}

static void ctl0(const char *what, json_t *body) { json_decref(ctl(what, body)); }

/* Requests the server saw, filtered by method (NULL = all). */
static size_t count_requests(const char *method, const char *path_part) {
  json_t *log = ctl("log", NULL);
  size_t i, n = 0;
  json_t *r;
  json_array_foreach(json_object_get(log, "requests"), i, r) {
    const char *m = json_string_value(json_object_get(r, "method"));
    const char *p = json_string_value(json_object_get(r, "path"));
    if ((!method || !strcmp(m, method)) && (!path_part || strstr(p, path_part))) n++;
  }
  json_decref(log);
  return n;
}

/* ---- kubeconfigs ---- */

typedef enum { AUTH_TOKEN, AUTH_CERT_DATA, AUTH_CERT_FILES, AUTH_BAD_TOKEN, AUTH_NO_CA, AUTH_INSECURE,
               AUTH_OTHER_CA } auth_t;

static char *write_kubeconfig(auth_t auth) {
  char *ca = b64_file("ca.crt"), *cert = b64_file("client.crt"), *key = b64_file("client.key");
  char *other = b64_file("other.crt");
  char cluster[4096], user[8192];
  switch (auth) {
  case AUTH_NO_CA:
    snprintf(cluster, sizeof cluster, "    server: %s\n", server_url);
    break;
  case AUTH_INSECURE:
    snprintf(cluster, sizeof cluster, "    server: %s\n    insecure-skip-tls-verify: true\n", server_url);
    break;
  case AUTH_CERT_FILES:
    snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority: ca.crt\n", server_url);
    break;
  case AUTH_OTHER_CA:
    snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority-data: %s\n", server_url, other);
    break;
  default:
    snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority-data: %s\n", server_url, ca);
  }
  switch (auth) {
  case AUTH_CERT_DATA:
    snprintf(user, sizeof user, "    client-certificate-data: %s\n    client-key-data: %s\n", cert, key);
    break;
  case AUTH_CERT_FILES:
    snprintf(user, sizeof user, "    client-certificate: client.crt\n    client-key: %s/client.key\n", dir);
    break;
  case AUTH_BAD_TOKEN:
    snprintf(user, sizeof user, "    token: wrong-token\n");
    break;
  default:
    snprintf(user, sizeof user, "    token: " TOKEN "\n");
  }
  size_t n = strlen(cluster) + strlen(user) + 1024;
  char *text = malloc(n);
  snprintf(text, n,
           "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
           "clusters:\n- name: decoy\n  cluster:\n    server: https://192.0.2.1:1\n"
           "- name: local\n  cluster:\n%s"
           "contexts:\n- name: test\n  context:\n    cluster: local\n    user: tester\n    namespace: altar-ns\n"
           "users:\n- name: tester\n  user:\n%s",
           cluster, user);
  char *path = path_in("kubeconfig");
  altar_test_write_file(path, text, strlen(text));
  free(text);
  free(ca);
  free(cert);
  free(key);
  free(other);
  return path;
}

static altar_k8s_runtime_t *runtime_for(auth_t auth, int max_retries, long timeout_ms) {
  char *kc = write_kubeconfig(auth);
  altar_k8s_http_config_t cfg;
  altar_k8s_http_config_init(&cfg);
  altar_error_t err = {0};
  int rc = altar_k8s_kubeconfig_load(kc, NULL, &cfg, &err);
  if (rc) fprintf(stderr, "kubeconfig: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  free(kc);
  cfg.max_retries = max_retries;
  cfg.backoff_initial_ms = 10;
  cfg.backoff_max_ms = 50;
  if (timeout_ms) cfg.timeout_ms = timeout_ms;
  altar_k8s_runtime_t *rt = altar_k8s_http_runtime_new(&cfg, &err);
  if (!rt) fprintf(stderr, "runtime: %s\n", err.msg);
  CU_ASSERT_FATAL(rt != NULL);
  return rt;
}

static json_t *job_manifest(const char *name, const char *app) {
  return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}, s:{s:s}}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                   "batch/v1", "kind", "Job", "metadata", "name", name, "labels", "altar.dev/managed", "true", "app",
                   app, "annotations", "altar.dev/manifest-digest", "sha256:abc", "spec", "template", "spec",
                   "containers", "name", "task", "image", "busybox");
}

/* ---- tests ---- */

static void test_jobs_crud(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 2, 0);
  CU_ASSERT_STRING_EQUAL(altar_k8s_runtime_default_namespace(rt), "altar-ns");
  altar_error_t err = {0};
  char *name = NULL;
  json_t *m = job_manifest("job-a", "x");
  CU_ASSERT_EQUAL_FATAL(altar_k8s_runtime_create_job(rt, m, "altar-ns", &name, &err), 0);
  CU_ASSERT_STRING_EQUAL(name, "job-a");
  free(name);
  /* A duplicate name is the job-exists error, not the server's. */
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "altar-ns", &name, &err), ALTAR_EJOBEXISTS);
  CU_ASSERT(name == NULL);
  json_decref(m);
  m = job_manifest("job-b", "y");
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "altar-ns", &name, &err), 0);
  free(name);
  json_decref(m);
  m = job_manifest("job-c", "x");
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "other-ns", &name, &err), 0);
  free(name);
  json_decref(m);

  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "altar-ns", "app=x", &jobs, &n, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  CU_ASSERT_STRING_EQUAL(jobs[0].name, "job-a");
  CU_ASSERT_EQUAL(jobs[0].state, ALTAR_STATE_PENDING);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&jobs[0].annotations, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION), "sha256:abc");
  CU_ASSERT(jobs[0].uid != NULL);
  altar_k8s_job_infos_free(jobs, n);
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "altar-ns", ALTAR_K8S_MANAGED_SELECTOR, &jobs, &n, &err), 0);
  CU_ASSERT_EQUAL(n, 2);
  altar_k8s_job_infos_free(jobs, n);

  altar_k8s_job_info_t *info = NULL;
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "job-a", "altar-ns", &info, &err), 0);
  CU_ASSERT_FATAL(info != NULL);
  char *uid = strdup(info->uid);
  altar_k8s_job_info_free(info);
  /* States come from the Job's status. */
  ctl0("job_status", json_pack("{s:s, s:s, s:{s:i}}", "namespace", "altar-ns", "name", "job-a", "status", "active", 1));
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "job-a", "altar-ns", &info, &err), 0);
  CU_ASSERT_EQUAL(info->state, ALTAR_STATE_RUNNING);
  altar_k8s_job_info_free(info);

  /* A uid that no longer matches leaves the Job alone (and is no error). */
  CU_ASSERT_EQUAL(altar_k8s_runtime_delete_job(rt, "job-a", "altar-ns", "not-the-uid", &err), 0);
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "job-a", "altar-ns", &info, &err), 0);
  CU_ASSERT(info != NULL);
  altar_k8s_job_info_free(info);
  CU_ASSERT_EQUAL(altar_k8s_runtime_delete_job(rt, "job-a", "altar-ns", uid, &err), 0);
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "job-a", "altar-ns", &info, &err), 0);
  CU_ASSERT(info == NULL);
  CU_ASSERT_EQUAL(altar_k8s_runtime_delete_job(rt, "job-a", "altar-ns", NULL, &err), 0); /* gone: fine */
  free(uid);

  /* Every delete asked for background propagation, with the uid when given. */
  json_t *log = ctl("log", NULL);
  size_t i, deletes = 0, with_uid = 0;
  json_t *r;
  json_array_foreach(json_object_get(log, "requests"), i, r) {
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "auth")), "token");
    if (strcmp(json_string_value(json_object_get(r, "method")), "DELETE")) continue;
    deletes++;
    json_t *b = json_object_get(r, "body");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(b, "propagationPolicy")), "Background");
    if (json_object_get(b, "preconditions")) with_uid++;
    if (strstr(json_string_value(json_object_get(r, "query")), "labelSelector")) CU_FAIL("delete with a query");
  }
  CU_ASSERT_EQUAL(deletes, 3);
  CU_ASSERT_EQUAL(with_uid, 2);
  json_array_foreach(json_object_get(log, "requests"), i, r) {
    const char *q = json_string_value(json_object_get(r, "query"));
    if (strstr(q, "labelSelector=app%3Dx")) with_uid += 100; /* the selector travelled escaped */
  }
  CU_ASSERT(with_uid >= 100);
  json_decref(log);
  altar_k8s_runtime_free(rt);
}

static void test_list_pages(void) {
  ctl0("reset", NULL);
  ctl0("page_size", json_pack("{s:i}", "size", 2));
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 0, 0);
  for (int i = 0; i < 5; i++) {
    char nm[16], *got = NULL;
    snprintf(nm, sizeof nm, "p-%d", i);
    json_t *m = job_manifest(nm, "x");
    CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "default", &got, NULL), 0);
    free(got);
    json_decref(m);
  }
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, NULL), 0);
  CU_ASSERT_EQUAL(n, 5);
  altar_k8s_job_infos_free(jobs, n);
  CU_ASSERT_EQUAL(count_requests("GET", "/jobs"), 3); /* 2 + 2 + 1 */
  altar_k8s_runtime_free(rt);
}

static void test_auth(void) {
  ctl0("reset", NULL);
  /* A wrong token: a clear 401, and the token itself never in the message. */
  altar_k8s_runtime_t *rt = runtime_for(AUTH_BAD_TOKEN, 0, 0);
  altar_error_t err = {0};
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "401") != NULL);
  CU_ASSERT(strstr(err.msg, "wrong-token") == NULL);
  altar_k8s_runtime_free(rt);
  /* Client certificates, inline and as files relative to the kubeconfig. */
  auth_t ways[] = {AUTH_CERT_DATA, AUTH_CERT_FILES, AUTH_INSECURE};
  for (int i = 0; i < 3; i++) {
    ctl0("reset", NULL);
    rt = runtime_for(ways[i], 0, 0);
    CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), 0);
    altar_k8s_job_infos_free(jobs, n);
    json_t *log = ctl("log", NULL);
    const char *who = json_string_value(json_object_get(json_array_get(json_object_get(log, "requests"), 0), "auth"));
    CU_ASSERT_STRING_EQUAL(who, ways[i] == AUTH_INSECURE ? "token" : "cert");
    json_decref(log);
    altar_k8s_runtime_free(rt);
  }
}

static void test_tls_verified(void) {
  /* A server certificate from a CA the kubeconfig does not trust is refused. */
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_OTHER_CA, 0, 0);
  altar_error_t err = {0};
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "SSL") != NULL || strstr(err.msg, "certificate") != NULL);
  altar_k8s_runtime_free(rt);
  CU_ASSERT_EQUAL(count_requests(NULL, NULL), 0); /* nothing reached the API */
}

static void test_retries(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 3, 0);
  altar_error_t err = {0};
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  /* Two 503s and a 429 with Retry-After, then success. */
  ctl0("fail", json_pack("{s:i, s:i}", "count", 2, "code", 503));
  ctl0("fail", json_pack("{s:i, s:i, s:i}", "count", 1, "code", 429, "retry_after", 0));
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), 0);
  CU_ASSERT_EQUAL(count_requests("GET", "/jobs"), 4);
  /* Creation is retried too (a 409 afterwards would mean it had landed). */
  ctl0("fail", json_pack("{s:i, s:i}", "count", 1, "code", 500));
  json_t *m = job_manifest("r-1", "x");
  char *name = NULL;
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "default", &name, &err), 0);
  free(name);
  json_decref(m);
  /* Bounded: more failures than retries is an error, marked retriable. */
  ctl0("fail", json_pack("{s:i, s:i}", "count", 10, "code", 502));
  memset(&err, 0, sizeof err);
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(err.retriable);
  CU_ASSERT(strstr(err.msg, "502") != NULL);
  ctl0("reset", NULL);
  altar_k8s_runtime_free(rt);
}

static void test_timeout(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 0, 300);
  ctl0("delay", json_pack("{s:i, s:f}", "count", 1, "seconds", 2.0));
  altar_error_t err = {0};
  altar_k8s_job_info_t *info = NULL;
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "x", "default", &info, &err), ALTAR_ETIMEOUT);
  CU_ASSERT(err.retriable);
  altar_k8s_runtime_free(rt);
}

static void test_being_deleted(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 0, 0);
  json_t *m = job_manifest("d-1", "x");
  char *name = NULL;
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "default", &name, NULL), 0);
  free(name);
  ctl0("linger", json_pack("{s:i}", "count", 3));
  CU_ASSERT_EQUAL(altar_k8s_runtime_delete_job(rt, "d-1", "default", NULL, NULL), 0);
  /* Still there, with a deletionTimestamp: reported as absent. */
  altar_k8s_job_info_t *info = NULL;
  CU_ASSERT_EQUAL(altar_k8s_runtime_read_job(rt, "d-1", "default", &info, NULL), 0);
  CU_ASSERT(info == NULL);
  CU_ASSERT_EQUAL(altar_k8s_runtime_create_job(rt, m, "default", &name, NULL), ALTAR_EJOBEXISTS);
  json_decref(m);
  altar_k8s_runtime_free(rt);
}

static void describe_case(const char *name, const char *job_status, const char *pod_status, const char *want,
                          bool det) {
  json_error_t je;
  json_t *st = json_loads(job_status, 0, &je);
  CU_ASSERT_FATAL(st != NULL);
  json_t *job = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:o}", "apiVersion", "batch/v1", "kind", "Job", "metadata",
                          "name", name, "labels", "altar.dev/managed", "true", "status", st);
  ctl0("jobs", json_pack("{s:s, s:o}", "namespace", "default", "job", job));
  if (pod_status) {
    json_t *ps = json_loads(pod_status, 0, &je);
    CU_ASSERT_FATAL(ps != NULL);
    ctl0("pods", json_pack("{s:s, s:{s:{s:s, s:{s:s}}, s:o}}", "namespace", "default", "pod", "metadata", "name",
                           "pod-x", "labels", "job-name", name, "status", ps));
  }
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 0, 0);
  altar_failure_t *f = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_k8s_runtime_describe_failure(rt, name, "default", &f, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->reason, want);
  CU_ASSERT_EQUAL(f->deterministic, det);
  altar_failure_free(f);
  altar_k8s_runtime_free(rt);
}

static void test_describe_failure(void) {
  ctl0("reset", NULL);
  const char *failed = "{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\",\"reason\":\"BackoffLimitExceeded\"}]}";
  describe_case("f-timeout",
                "{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\",\"reason\":\"DeadlineExceeded\"}]}", NULL,
                "timeout", false);
  describe_case("f-oom", failed,
                "{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{\"exitCode\":137,\"reason\":"
                "\"OOMKilled\"}}}]}",
                "oom_killed", false);
  describe_case("f-digest", failed,
                "{\"initContainerStatuses\":[{\"name\":\"verify-inputs\",\"state\":{\"terminated\":{\"exitCode\":1}}}]}",
                "input_digest_mismatch", false);
  describe_case("f-exit", failed,
                "{\"containerStatuses\":[{\"name\":\"task\",\"state\":{\"terminated\":{\"exitCode\":7}}}]}", "exit_7",
                true);
  describe_case("f-none", failed, NULL, "job_failed", false);
  /* The pods were asked for by the Job controller's label. */
  json_t *log = ctl("log", NULL);
  size_t i, pods = 0;
  json_t *r;
  json_array_foreach(json_object_get(log, "requests"), i, r) {
    if (strstr(json_string_value(json_object_get(r, "path")), "/pods")) {
      pods++;
      CU_ASSERT(strstr(json_string_value(json_object_get(r, "query")), "labelSelector=job-name%3Df-") != NULL);
    }
  }
  CU_ASSERT_EQUAL(pods, 5); /* one pod list per explained failure */
  json_decref(log);
}

static void test_in_cluster(void) {
  ctl0("reset", NULL);
  char *sa = path_in("sa");
  CU_ASSERT_FATAL(run_sh("mkdir -p sa && cp ca.crt sa/ca.crt && printf 'in-ns\\n' > sa/namespace && printf '"
                         TOKEN "\\n' > sa/token") == 0);
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", portstr, 1);
  altar_k8s_http_config_t cfg;
  altar_k8s_http_config_init(&cfg);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_k8s_in_cluster_load(sa, &cfg, &err), 0);
  CU_ASSERT_STRING_EQUAL(cfg.namespace_, "in-ns");
  cfg.max_retries = 0;
  altar_k8s_runtime_t *rt = altar_k8s_http_runtime_new(&cfg, &err);
  CU_ASSERT_FATAL(rt != NULL);
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "in-ns", NULL, &jobs, &n, &err), 0);
  /* The token file is read per request: a rotated (here: broken) token shows. */
  CU_ASSERT_FATAL(run_sh("printf 'rotated-bad' > sa/token") == 0);
  CU_ASSERT_EQUAL(altar_k8s_runtime_list_jobs(rt, "in-ns", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "401") != NULL);
  altar_k8s_runtime_free(rt);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  altar_k8s_http_config_init(&cfg);
  CU_ASSERT_EQUAL(altar_k8s_in_cluster_load(sa, &cfg, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "KUBERNETES_SERVICE_HOST") != NULL);
  altar_k8s_http_config_clear(&cfg);
  free(sa);
}

static void test_kubeconfig_errors(void) {
  struct {
    const char *yaml;
    const char *want;
    int code;
  } cases[] = {
      {"current-context: nope\ncontexts: []\n", "no context named 'nope'", ALTAR_ECONFIG},
      {"contexts: []\n", "current-context", ALTAR_ECONFIG},
      {"current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  "
       "cluster: {server: 'https://x'}\nusers:\n- name: u\n  user:\n    exec: {command: gcloud}\n",
       "exec.apiVersion", ALTAR_ECONFIG},
      {"current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  "
       "cluster: {server: 'https://x'}\nusers:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n",
       "auth-provider", ALTAR_ENOTSUP},
      {"current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  "
       "cluster: {server: 'https://x'}\nusers:\n- name: u\n  user:\n    exec: {command: /bin/false, "
       "apiVersion: client.authentication.k8s.io/v1}\n",
       "exited with code 1", ALTAR_ECONFIG},
      {"current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\nclusters:\n- name: k\n  cluster: "
       "{server: 'https://x', certificate-authority-data: '!!notbase64!!'}\n",
       "certificate-authority-data", ALTAR_ECONFIG},
      {"current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\nclusters:\n- name: k\n  cluster: {}\n",
       "server", ALTAR_ECONFIG},
      {"{unclosed", "kubeconfig", ALTAR_ECONFIG},
  };
  char *path = path_in("bad-kubeconfig");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    altar_test_write_file(path, cases[i].yaml, strlen(cases[i].yaml));
    altar_k8s_http_config_t cfg;
    altar_k8s_http_config_init(&cfg);
    altar_error_t err = {0};
    int rc = altar_k8s_kubeconfig_load(path, NULL, &cfg, &err);
    CU_ASSERT_EQUAL(rc, cases[i].code);
    if (!strstr(err.msg, cases[i].want) && strcmp(cases[i].want, "kubeconfig"))
      fprintf(stderr, "case %zu: %s\n", i, err.msg);
    CU_ASSERT(strstr(err.msg, cases[i].want) != NULL || !strcmp(cases[i].want, "kubeconfig"));
    altar_k8s_http_config_clear(&cfg);
  }
  /* $KUBECONFIG: the first readable entry of the list. */
  char *good = write_kubeconfig(AUTH_TOKEN);
  char env[4096];
  snprintf(env, sizeof env, "%s/missing:%s", dir, good);
  setenv("KUBECONFIG", env, 1);
  altar_k8s_http_config_t cfg;
  altar_k8s_http_config_init(&cfg);
  CU_ASSERT_EQUAL(altar_k8s_http_config_auto(&cfg, NULL), 0);
  CU_ASSERT_STRING_EQUAL(cfg.server, server_url);
  altar_k8s_http_config_clear(&cfg);
  unsetenv("KUBECONFIG");
  free(good);
  free(path);
}

/* The backend over the real runtime: create, adopt, replace, poll, cancel. */
static void test_backend_end_to_end(void) {
  ctl0("reset", NULL);
  altar_k8s_config_t kc;
  altar_k8s_config_init(&kc);
  kc.settle_timeout_s = 10;
  altar_error_t err = {0};
  altar_k8s_t *k = altar_k8s_new(&kc, runtime_for(AUTH_TOKEN, 2, 0), &err);
  CU_ASSERT_FATAL(k != NULL);
  CU_ASSERT_STRING_EQUAL(altar_k8s_namespace(k), "altar-ns"); /* from the kubeconfig context */
  altar_spec_t *s = altar_spec_new("score", "busybox:1.36");
  altar_spec_add_arg(s, "true");
  altar_spec_set_label(s, "job_id", "J 1");
  altar_spec_add_input(s, "file:///m", "models/m.tar", NULL,
                       "sha256:2222222222222222222222222222222222222222222222222222222222222222");
  altar_handle_t h1, h2, h3;
  CU_ASSERT_EQUAL_FATAL(altar_k8s_submit(k, s, &h1, &err), 0);
  /* Resubmitted while pending: adopted, nothing new created. */
  CU_ASSERT_EQUAL_FATAL(altar_k8s_submit(k, s, &h2, &err), 0);
  CU_ASSERT_STRING_EQUAL(h1.external_id, h2.external_id);
  CU_ASSERT_EQUAL(count_requests("POST", "/jobs"), 2);
  CU_ASSERT_EQUAL(count_requests("DELETE", NULL), 0);
  json_t *job = ctl("job", json_pack("{s:s, s:s}", "namespace", "altar-ns", "name", h1.external_id));
  const char *uid1 = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
  char *uid_first = strdup(uid1);
  json_t *init = json_array_get(
      json_object_get(json_object_get(json_object_get(json_object_get(job, "spec"), "template"), "spec"),
                      "initContainers"),
      0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(init, "name")), "verify-inputs");
  json_decref(job);
  /* Finished: replaced by a fresh Job (delete with the old uid, create). */
  ctl0("job_status", json_pack("{s:s, s:s, s:{s:[{s:s, s:s}]}}", "namespace", "altar-ns", "name", h1.external_id,
                               "status", "conditions", "type", "Complete", "status", "True"));
  altar_status_t st[8];
  memset(st, 0, sizeof st);
  CU_ASSERT_EQUAL(altar_k8s_poll(k, &h1, 1, st, &err), 0);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_SUCCEEDED);
  for (int si = 0; si < 1; si++) altar_status_clear(&st[si]);
  CU_ASSERT_EQUAL_FATAL(altar_k8s_submit(k, s, &h3, &err), 0);
  job = ctl("job", json_pack("{s:s, s:s}", "namespace", "altar-ns", "name", h1.external_id));
  CU_ASSERT(strcmp(json_string_value(json_object_get(json_object_get(job, "metadata"), "uid")), uid_first) != 0);
  json_decref(job);
  json_t *log = ctl("log", NULL);
  size_t i;
  json_t *r;
  bool saw_precondition = false;
  json_array_foreach(json_object_get(log, "requests"), i, r) {
    json_t *pre = json_object_get(json_object_get(r, "body"), "preconditions");
    if (pre && !strcmp(json_string_value(json_object_get(pre, "uid")), uid_first)) saw_precondition = true;
  }
  CU_ASSERT(saw_precondition);
  json_decref(log);
  /* Cancel, then the handle's Job is missing. */
  CU_ASSERT_EQUAL(altar_k8s_cancel(k, &h3, &err), 0);
  CU_ASSERT_EQUAL(altar_k8s_cancel(k, &h3, &err), 0);
  CU_ASSERT_EQUAL(altar_k8s_poll(k, &h3, 1, st, &err), 0);
  CU_ASSERT_STRING_EQUAL(st[0].failure->reason, "container_missing");
  for (int si = 0; si < 1; si++) altar_status_clear(&st[si]);
  free(uid_first);
  altar_handle_clear(&h1);
  altar_handle_clear(&h2);
  altar_handle_clear(&h3);
  altar_spec_free(s);
  altar_k8s_free(k);
}


/* `altar run SPEC --backend kubernetes` end to end: the CLI finds the
 * cluster through $KUBECONFIG, creates the Job, polls until the stand-in
 * marks it Complete, and prints the terminal status. */
static void test_altar_run_cli(void) {
  ctl0("reset", NULL);
  char *kc = write_kubeconfig(AUTH_TOKEN);
  char *spec = path_in("spec.json"), *out = path_in("run.out");
  const char *text = "{\"kind\":\"score\",\"image\":\"busybox:1.36\",\"command\":[\"true\"],"
                     "\"labels\":{\"job_id\":\"cli\"},\"timeout_s\":60}";
  altar_test_write_file(spec, text, strlen(text));
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    setenv("KUBECONFIG", kc, 1);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0) _exit(126);
    execl(altar_test_altar_bin(), "altar", "run", spec, "--backend", "kubernetes", "--quiet", (char *)NULL);
    _exit(127);
  }
  /* Wait for the create, then finish the Job as a cluster would. */
  const char *name = NULL;
  json_t *log = NULL;
  for (int i = 0; i < 600 && !name; i++) {
    json_decref(log);
    log = ctl("log", NULL);
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(log, "requests"), k, r) {
      if (!strcmp(json_string_value(json_object_get(r, "method")), "POST"))
        name = json_string_value(json_object_get(json_object_get(json_object_get(r, "body"), "metadata"), "name"));
    }
    if (!name) {
      struct timespec ts = {0, 50000000};
      nanosleep(&ts, NULL);
    }
  }
  CU_ASSERT_PTR_NOT_NULL(name);
  if (name)
    ctl0("job_status", json_pack("{s:s, s:s, s:{s:[{s:s, s:s}]}}", "namespace", "altar-ns", "name", name, "status",
                                 "conditions", "type", "Complete", "status", "True"));
  json_decref(log);
  int st = 0;
  for (int i = 0; i < 1200 && waitpid(pid, &st, WNOHANG) == 0; i++) {
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    if (i == 1199) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      CU_FAIL("altar run did not finish");
    }
  }
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *got = altar_test_read_file(out, NULL);
  json_t *status = got ? json_loads(got, 0, NULL) : NULL;
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(status, "state")), "succeeded");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(status, "handle"), "backend")), "kubernetes");
  json_decref(status);
  free(got);
  free(kc);
  free(spec);
  free(out);
}

static void add(void) {
  ALTAR_SUITE("k8s_runtime_http", suite_init, suite_clean);
  ALTAR_TEST(test_jobs_crud);
  ALTAR_TEST(test_list_pages);
  ALTAR_TEST(test_auth);
  ALTAR_TEST(test_tls_verified);
  ALTAR_TEST(test_retries);
  ALTAR_TEST(test_timeout);
  ALTAR_TEST(test_being_deleted);
  ALTAR_TEST(test_describe_failure);
  ALTAR_TEST(test_in_cluster);
  ALTAR_TEST(test_kubeconfig_errors);
  ALTAR_TEST(test_backend_end_to_end);
  ALTAR_TEST(test_altar_run_cli);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
