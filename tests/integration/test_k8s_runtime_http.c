/* The real libcurl KubernetesRuntime against a local stand-in API server
 * (tests/integration/fake_k8s_server.py) over TLS on 127.0.0.1, only for
 * faults a real API server does not produce on demand: a server certificate
 * from the wrong CA, 429/5xx bursts with Retry-After, responses slower than
 * the timeout; and kubeconfigs that are malformed. Everything else runs
 * against the real control plane (test_k8s_real.c). */
#include "altar/buf.h"
#include "backends/k8s_api.h"
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

typedef enum {
  AUTH_TOKEN,
  AUTH_CERT_DATA,
  AUTH_CERT_FILES,
  AUTH_BAD_TOKEN,
  AUTH_NO_CA,
  AUTH_INSECURE,
  AUTH_OTHER_CA
} auth_t;

static char *write_kubeconfig(auth_t auth) {
  char *ca = b64_file("ca.crt"), *cert = b64_file("client.crt"), *key = b64_file("client.key");
  char *other = b64_file("other.crt");
  char cluster[4096], user[8192];
  switch (auth) {
  case AUTH_NO_CA: snprintf(cluster, sizeof cluster, "    server: %s\n", server_url); break;
  case AUTH_INSECURE:
    snprintf(cluster, sizeof cluster, "    server: %s\n    insecure-skip-tls-verify: true\n", server_url);
    break;
  case AUTH_CERT_FILES:
    snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority: ca.crt\n", server_url);
    break;
  case AUTH_OTHER_CA:
    snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority-data: %s\n", server_url, other);
    break;
  default: snprintf(cluster, sizeof cluster, "    server: %s\n    certificate-authority-data: %s\n", server_url, ca);
  }
  switch (auth) {
  case AUTH_CERT_DATA:
    snprintf(user, sizeof user, "    client-certificate-data: %s\n    client-key-data: %s\n", cert, key);
    break;
  case AUTH_CERT_FILES:
    snprintf(user, sizeof user, "    client-certificate: client.crt\n    client-key: %s/client.key\n", dir);
    break;
  case AUTH_BAD_TOKEN: snprintf(user, sizeof user, "    token: wrong-token\n"); break;
  default: snprintf(user, sizeof user, "    token: " TOKEN "\n");
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
  altar__k8s_http_config_init(&cfg);
  altar_error_t err = {0};
  int rc = altar__k8s_kubeconfig_load(kc, NULL, &cfg, &err);
  if (rc) fprintf(stderr, "kubeconfig: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  free(kc);
  cfg.max_retries = max_retries;
  cfg.backoff_initial_ms = 10;
  cfg.backoff_max_ms = 50;
  if (timeout_ms) cfg.timeout_ms = timeout_ms;
  altar_k8s_runtime_t *rt = altar__k8s_http_runtime_new(&cfg, &err);
  if (!rt) fprintf(stderr, "runtime: %s\n", err.msg);
  CU_ASSERT_FATAL(rt != NULL);
  return rt;
}

static json_t *job_manifest(const char *name, const char *app) {
  return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}, s:{s:s}}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion", "batch/v1",
                   "kind", "Job", "metadata", "name", name, "labels", "altar.dev/managed", "true", "app", app,
                   "annotations", "altar.dev/manifest-digest", "sha256:abc", "spec", "template", "spec", "containers",
                   "name", "task", "image", "busybox");
}

/* ---- tests ---- */

static void test_tls_verified(void) {
  /* A server certificate from a CA the kubeconfig does not trust is refused. */
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_OTHER_CA, 0, 0);
  altar_error_t err = {0};
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar__k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "SSL") != NULL || strstr(err.msg, "certificate") != NULL);
  altar__k8s_runtime_free(rt);
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
  CU_ASSERT_EQUAL(altar__k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), 0);
  CU_ASSERT_EQUAL(count_requests("GET", "/jobs"), 4);
  /* Creation is retried too (a 409 afterwards would mean it had landed). */
  ctl0("fail", json_pack("{s:i, s:i}", "count", 1, "code", 500));
  json_t *m = job_manifest("r-1", "x");
  char *name = NULL;
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_job(rt, m, "default", &name, NULL, &err), 0);
  free(name);
  json_decref(m);
  /* Bounded: more failures than retries is an error, marked retriable. */
  ctl0("fail", json_pack("{s:i, s:i}", "count", 10, "code", 502));
  memset(&err, 0, sizeof err);
  CU_ASSERT_EQUAL(altar__k8s_runtime_list_jobs(rt, "default", NULL, &jobs, &n, &err), ALTAR_EBACKEND);
  CU_ASSERT(err.retriable);
  CU_ASSERT(strstr(err.msg, "502") != NULL);
  ctl0("reset", NULL);
  altar__k8s_runtime_free(rt);
}

/* Reaps until n creates have finished (bounded by the retries and their
 * capped backoff, never by a sleep the test chose). */
static size_t reap_all(altar_k8s_runtime_t *rt, altar_k8s_create_done_t *done, size_t n) {
  size_t got = 0;
  for (int round = 0; got < n && round < 1000; round++) {
    int k = altar__k8s_runtime_create_reap(rt, 200, done + got, n - got);
    CU_ASSERT(k >= 0);
    if (k > 0) got += (size_t)k;
  }
  return got;
}

/* Creates in flight (the multi interface): 429 with Retry-After and 5xx are
 * retried per create, a conflict is ALTAR_EJOBEXISTS, a rejection EINVAL,
 * and more failures than retries a retriable error — each for its own id. */
static void test_multi_creates(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 3, 0);
  altar_error_t err = {0};
  ctl0("fail", json_pack("{s:i, s:i, s:i}", "count", 1, "code", 429, "retry_after", 1));
  ctl0("fail", json_pack("{s:i, s:i}", "count", 1, "code", 503));
  const char *names[] = {"m-1", "m-2", "m-3"};
  for (uint64_t i = 0; i < 3; i++) {
    json_t *m = job_manifest(names[i], "x");
    CU_ASSERT_EQUAL(altar__k8s_runtime_create_start(rt, m, "default", 10 + i, &err), 0);
    json_decref(m);
  }
  altar_k8s_create_done_t done[4];
  CU_ASSERT_EQUAL_FATAL(reap_all(rt, done, 3), 3);
  bool seen[3] = {false};
  for (size_t i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(done[i].rc, 0);
    CU_ASSERT(done[i].id >= 10 && done[i].id < 13);
    if (done[i].id >= 10 && done[i].id < 13) {
      seen[done[i].id - 10] = true;
      CU_ASSERT_STRING_EQUAL(done[i].name, names[done[i].id - 10]);
    }
    CU_ASSERT_EQUAL(strlen(done[i].uid), 36);
    free(done[i].name);
  }
  CU_ASSERT(seen[0] && seen[1] && seen[2]);
  CU_ASSERT_EQUAL(count_requests("POST", "/jobs"), 5); /* 3 + the two retried */
  /* A conflict, a rejected manifest and an outlasting 502, side by side. */
  json_t *again = job_manifest("m-1", "x");
  json_t *bad = json_pack("{s:s, s:s, s:{}}", "apiVersion", "batch/v1", "kind", "Job", "metadata");
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_start(rt, again, "default", 1, &err), 0);
  CU_ASSERT_EQUAL_FATAL(reap_all(rt, done, 1), 1);
  CU_ASSERT_EQUAL(done[0].rc, ALTAR_EJOBEXISTS);
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_start(rt, bad, "default", 2, &err), 0);
  CU_ASSERT_EQUAL_FATAL(reap_all(rt, done, 1), 1);
  CU_ASSERT_EQUAL(done[0].rc, ALTAR_EINVAL);
  ctl0("fail", json_pack("{s:i, s:i}", "count", 10, "code", 502));
  json_t *m4 = job_manifest("m-4", "x");
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_start(rt, m4, "default", 3, &err), 0);
  CU_ASSERT_EQUAL_FATAL(reap_all(rt, done, 1), 1);
  CU_ASSERT_EQUAL(done[0].rc, ALTAR_EBACKEND);
  CU_ASSERT(done[0].err.retriable);
  CU_ASSERT(strstr(done[0].err.msg, "502") != NULL);
  json_decref(again);
  json_decref(bad);
  json_decref(m4);
  ctl0("reset", NULL);
  altar__k8s_runtime_free(rt);
}

/* Waits (bounded by a count of change notifications, not a sleep) until
 * name is seen as want by the watch. */
static bool watch_until(altar_k8s_watch_t *w, const char *name, altar_k8s_seen_t seen, altar_state_t state) {
  uint64_t gen = 0;
  for (int i = 0; i < 300; i++) {
    altar_k8s_watch_view_t v;
    altar__k8s_watch_lookup(w, &name, 1, &v);
    if (v.seen == seen && (seen != ALTAR_K8S_SEEN_LIVE || v.state == state)) return true;
    altar__k8s_watch_wait(w, &gen, 100);
  }
  return false;
}

static void set_status(const char *name, const char *status_json) {
  ctl0("job_status",
       json_pack("{s:s, s:s, s:o}", "namespace", "default", "name", name, "status", json_loads(status_json, 0, NULL)));
}

/* The watch thread against the stand-in: list then watch, malformed and
 * oversized input mid-stream, a server that hangs up, an expired version
 * (as an ERROR event and as HTTP 410), and a Job deleted while nobody
 * watched. */
static void test_watch_thread(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 3, 0);
  altar_error_t err = {0};
  json_t *m = job_manifest("w-1", "x");
  char *name = NULL;
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_job(rt, m, "default", &name, NULL, &err), 0);
  free(name);
  json_decref(m);
  altar_k8s_watch_t *w = NULL;
  CU_ASSERT_EQUAL_FATAL(altar__k8s_runtime_watch_open(rt, "default", "altar.dev/managed=true", &w, &err), 0);
  /* Listed first. */
  for (int i = 0; i < 300 && !altar__k8s_watch_synced(w); i++) {
    uint64_t gen = altar__k8s_watch_generation(w);
    altar__k8s_watch_wait(w, &gen, 100);
  }
  CU_ASSERT_TRUE_FATAL(altar__k8s_watch_synced(w));
  CU_ASSERT_TRUE(watch_until(w, "w-1", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_PENDING));
  /* Then watched: a new Job and a change of state. */
  m = job_manifest("w-2", "x");
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_job(rt, m, "default", &name, NULL, &err), 0);
  free(name);
  json_decref(m);
  CU_ASSERT_TRUE(watch_until(w, "w-2", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_PENDING));
  /* Garbage between events is skipped; the stream goes on. */
  ctl0("inject", json_pack("{s:s}", "text", "this is not json\n{\"type\":\"ADDED\",\"object\":[]}\n"));
  set_status("w-1", "{\"active\":1,\"ready\":1}");
  CU_ASSERT_TRUE(watch_until(w, "w-1", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_RUNNING));
  altar_k8s_watch_stats_t st;
  altar__k8s_watch_stats(w, &st);
  if (st.bad_events != 2) fprintf(stderr, "bad events: %llu\n", (unsigned long long)st.bad_events);
  CU_ASSERT_EQUAL(st.bad_events, 2);
  CU_ASSERT_EQUAL(st.lists, 1);
  /* The server hangs up: resumed from the last version, no list. */
  ctl0("hangup", NULL);
  for (int i = 0; i < 300; i++) {
    altar__k8s_watch_stats(w, &st);
    if (st.reconnects >= 1) break;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  set_status("w-2", "{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}");
  CU_ASSERT_TRUE(watch_until(w, "w-2", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_SUCCEEDED));
  altar__k8s_watch_stats(w, &st);
  CU_ASSERT(st.reconnects >= 1);
  CU_ASSERT_EQUAL(st.lists, 1);
  CU_ASSERT_EQUAL(st.expired, 0);
  /* An expired version (ERROR 410): the watch is held, a Job deleted, the
   * history compacted, the connection dropped: one list, and the Job is
   * known deleted from its absence (no DELETED event ever reached us). */
  uint64_t deleted = st.deleted;
  ctl0("hold", NULL);
  CU_ASSERT_EQUAL(altar__k8s_runtime_delete_job(rt, "w-1", "default", NULL, &err), 0);
  ctl0("compact", NULL);
  ctl0("hangup", NULL);
  CU_ASSERT_TRUE(watch_until(w, "w-1", ALTAR_K8S_SEEN_DELETED, ALTAR_STATE_PENDING));
  altar__k8s_watch_stats(w, &st);
  CU_ASSERT(st.expired >= 1);
  CU_ASSERT(st.lists >= 2);
  CU_ASSERT_EQUAL(st.deleted, deleted);
  /* The same as HTTP 410. */
  uint64_t expired = st.expired;
  ctl0("gone_status", NULL);
  ctl0("compact", NULL);
  altar__k8s_watch_test_resume_from(w, "1");
  set_status("w-2", "{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]}");
  CU_ASSERT_TRUE(watch_until(w, "w-2", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_FAILED));
  for (int i = 0; i < 300; i++) {
    altar__k8s_watch_stats(w, &st);
    if (st.expired > expired) break;
    uint64_t gen = altar__k8s_watch_generation(w);
    altar__k8s_watch_wait(w, &gen, 100);
  }
  CU_ASSERT(st.expired > expired);
  /* A line that never ends is cut at its bound and followed by a list. */
  uint64_t lists = st.lists;
  char *big = malloc((5u << 20) + 1);
  memset(big, 'x', 5u << 20);
  big[5u << 20] = '\0';
  ctl0("inject", json_pack("{s:s}", "text", big));
  free(big);
  m = job_manifest("w-3", "x");
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_job(rt, m, "default", &name, NULL, &err), 0);
  free(name);
  json_decref(m);
  CU_ASSERT_TRUE(watch_until(w, "w-3", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_PENDING));
  for (int i = 0; i < 300; i++) {
    altar__k8s_watch_stats(w, &st);
    if (st.lists > lists) break;
    uint64_t gen = altar__k8s_watch_generation(w);
    altar__k8s_watch_wait(w, &gen, 100);
  }
  if (st.lists <= lists)
    fprintf(stderr, "watch: lists %llu expired %llu reconnects %llu bad %llu\n", (unsigned long long)st.lists,
            (unsigned long long)st.expired, (unsigned long long)st.reconnects, (unsigned long long)st.bad_events);
  CU_ASSERT(st.lists > lists);
  altar__k8s_watch_close(w);
  ctl0("reset", NULL);
  altar__k8s_runtime_free(rt);
}

static void test_timeout(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 0, 300);
  ctl0("delay", json_pack("{s:i, s:f}", "count", 1, "seconds", 2.0));
  altar_error_t err = {0};
  altar_k8s_job_info_t *info = NULL;
  CU_ASSERT_EQUAL(altar__k8s_runtime_read_job(rt, "x", "default", &info, &err), ALTAR_ETIMEOUT);
  CU_ASSERT(err.retriable);
  altar__k8s_runtime_free(rt);
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
    altar__k8s_http_config_init(&cfg);
    altar_error_t err = {0};
    int rc = altar__k8s_kubeconfig_load(path, NULL, &cfg, &err);
    CU_ASSERT_EQUAL(rc, cases[i].code);
    if (!strstr(err.msg, cases[i].want) && strcmp(cases[i].want, "kubeconfig"))
      fprintf(stderr, "case %zu: %s\n", i, err.msg);
    CU_ASSERT(strstr(err.msg, cases[i].want) != NULL || !strcmp(cases[i].want, "kubeconfig"));
    altar__k8s_http_config_clear(&cfg);
  }
  /* $KUBECONFIG: the first readable entry of the list. */
  char *good = write_kubeconfig(AUTH_TOKEN);
  char env[4096];
  snprintf(env, sizeof env, "%s/missing:%s", dir, good);
  setenv("KUBECONFIG", env, 1);
  altar_k8s_http_config_t cfg;
  altar__k8s_http_config_init(&cfg);
  CU_ASSERT_EQUAL(altar__k8s_http_config_auto(&cfg, NULL), 0);
  CU_ASSERT_STRING_EQUAL(cfg.server, server_url);
  altar__k8s_http_config_clear(&cfg);
  unsetenv("KUBECONFIG");
  free(good);
  free(path);
}

/* A watch that keeps failing without a 410 (503 on every reconnect) lists
 * again after a few tries, and so learns of a change no event ever told
 * (the stand-in's "jobs" control rewrites a Job without recording one, as
 * a server that lost its history would). */
static void test_watch_relists_after_failures(void) {
  ctl0("reset", NULL);
  altar_k8s_runtime_t *rt = runtime_for(AUTH_TOKEN, 3, 0);
  altar_error_t err = {0};
  json_t *m = job_manifest("wf-1", "x");
  char *name = NULL;
  CU_ASSERT_EQUAL(altar__k8s_runtime_create_job(rt, m, "default", &name, NULL, &err), 0);
  free(name);
  json_decref(m);
  altar_k8s_watch_t *w = NULL;
  CU_ASSERT_EQUAL_FATAL(altar__k8s_runtime_watch_open(rt, "default", "altar.dev/managed=true", &w, &err), 0);
  CU_ASSERT_TRUE(watch_until(w, "wf-1", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_PENDING));
  altar_k8s_watch_stats_t before, st;
  /* The first list's pages reach the map before the list is counted (as
   * with the relist below): wait (bounded) for its count. */
  for (int i = 0; i < 1000; i++) {
    altar__k8s_watch_stats(w, &before);
    if (before.lists >= 1) break;
    usleep(10 * 1000);
  }
  CU_ASSERT_EQUAL(before.lists, 1);
  CU_ASSERT_EQUAL(before.failure_lists, 0);
  /* The open watch goes quiet; the Job finishes where no event says so. */
  ctl0("hold", NULL);
  json_t *job = ctl("job", json_pack("{s:s, s:s}", "namespace", "default", "name", "wf-1"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(json_object_get(job, "metadata"));
  json_object_set_new(job, "status",
                      json_loads("{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}", 0, NULL));
  ctl0("jobs", json_pack("{s:s, s:O}", "namespace", "default", "job", job));
  json_decref(job);
  /* Every reconnect from now on is refused with a 503, three times. */
  ctl0("fail", json_pack("{s:i, s:i}", "code", 503, "count", 3));
  ctl0("hangup", NULL);
  CU_ASSERT_TRUE(watch_until(w, "wf-1", ALTAR_K8S_SEEN_LIVE, ALTAR_STATE_SUCCEEDED));
  /* The relist's pages update the map before the list is counted: wait
   * (bounded) for the count, then look at every figure. */
  for (int i = 0; i < 1000; i++) {
    altar__k8s_watch_stats(w, &st);
    if (st.lists > before.lists) break;
    usleep(10 * 1000);
  }
  fprintf(stderr, "  watch: lists %llu (before %llu), failure lists %llu, expired %llu, reconnects %llu\n",
          (unsigned long long)st.lists, (unsigned long long)before.lists, (unsigned long long)st.failure_lists,
          (unsigned long long)st.expired, (unsigned long long)st.reconnects);
  CU_ASSERT_EQUAL(st.failure_lists, 1);
  CU_ASSERT_EQUAL(st.lists, before.lists + 1);
  CU_ASSERT_EQUAL(st.expired, before.expired); /* no 410 was ever sent */
  CU_ASSERT(st.reconnects >= before.reconnects + 3);
  altar__k8s_watch_close(w);
  ctl0("reset", NULL);
  altar__k8s_runtime_free(rt);
}

static void add(void) {
  ALTAR_SUITE("k8s_runtime_http", suite_init, suite_clean);
  ALTAR_TEST(test_tls_verified);
  ALTAR_TEST(test_retries);
  ALTAR_TEST(test_multi_creates);
  ALTAR_TEST(test_watch_thread);
  ALTAR_TEST(test_watch_relists_after_failures);
  ALTAR_TEST(test_timeout);
  ALTAR_TEST(test_kubeconfig_errors);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
