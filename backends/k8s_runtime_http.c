/* The real KubernetesRuntime: the batch/v1 Jobs and core/v1 Pods endpoints
 * over HTTPS with libcurl (OpenSSL underneath). Bearer token or client
 * certificate; 429 and 5xx retried with capped exponential backoff; HTTP
 * statuses mapped to altar errors. Tokens never enter an error message. */
#include "altar/file_read.h"
#include "altar/grow.h"
#include "k8s_http_int.h"
#include "k8s_json_trim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TOKEN (64u << 10)
#define MAX_PAGES 10000

typedef altar__k8s_http_t http_rt_t;
typedef altar__k8s_resp_t resp_t;

size_t altar__k8s_http_on_body(char *p, size_t size, size_t n, void *ud) {
  resp_t *r = ud;
  size_t len = size * n, max = r->max ? r->max : ALTAR_K8S_MAX_RESPONSE;
  if (r->body.len + len > max) {
    r->too_big = true;
    return 0;
  }
  return altar_buf_append(&r->body, p, len) ? 0 : len;
}

size_t altar__k8s_http_on_header(char *p, size_t size, size_t n, void *ud) {
  resp_t *r = ud;
  size_t len = size * n;
  static const char name[] = "retry-after:";
  if (len > sizeof name - 1 && !strncasecmp(p, name, sizeof name - 1)) {
    char tmp[32];
    size_t vlen = len - (sizeof name - 1);
    if (vlen >= sizeof tmp) vlen = sizeof tmp - 1;
    memcpy(tmp, p + sizeof name - 1, vlen);
    tmp[vlen] = '\0';
    char *end;
    long v = strtol(tmp, &end, 10);
    /* Only delay-seconds; an HTTP-date falls back to our own backoff. */
    if (end != tmp && v >= 0 && v < 86400) r->retry_after_s = v;
  }
  return len;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* The bearer token: the token file's current content when set (service
 * account tokens rotate), else the configured one. Caller frees. */
static char *current_token(http_rt_t *rt, altar_error_t *err) {
  if (rt->cfg.exec_argv && altar__k8s_exec_refresh(&rt->cfg, false, err)) return NULL;
  if (!rt->cfg.token_file) return rt->cfg.token ? strdup(rt->cfg.token) : NULL;
  char what[160];
  snprintf(what, sizeof what, "token file %s", rt->cfg.token_file);
  size_t n = 0;
  altar_error_t rerr = {0};
  char *buf = altar_file_read(rt->cfg.token_file, what, MAX_TOKEN, &n, &rerr);
  if (!buf) {
    altar_error_set(err, ALTAR_ECONFIG, "%s", rerr.msg);
    return NULL;
  }
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
  buf[n] = '\0';
  return buf;
}

struct curl_slist *altar__k8s_http_headers(http_rt_t *rt, bool with_body, bool *pfailed, altar_error_t *err) {
  *pfailed = false;
  pthread_mutex_lock(&rt->cred_mu);
  char *token = current_token(rt, err);
  bool need = (rt->cfg.token_file || rt->cfg.exec_argv) && !token && !rt->cfg.client_cert_pem;
  pthread_mutex_unlock(&rt->cred_mu);
  if (need) {
    *pfailed = true;
    return NULL;
  }
  struct curl_slist *hdrs = NULL;
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  if (with_body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
  if (token) {
    size_t len = strlen(token) + 32;
    char *auth = malloc(len);
    if (auth) {
      snprintf(auth, len, "Authorization: Bearer %s", token);
      hdrs = curl_slist_append(hdrs, auth);
      memset(auth, 0, len);
      free(auth);
    }
    memset(token, 0, strlen(token));
    free(token);
  }
  if (!hdrs) {
    *pfailed = true;
    altar_error_set(err, ALTAR_ENOMEM, "kubernetes API: out of memory");
  }
  return hdrs;
}

void altar__k8s_http_tls(http_rt_t *rt, CURL *c, long timeout_ms) {
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (timeout_ms > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, rt->cfg.connect_timeout_ms);
  if (rt->cfg.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  pthread_mutex_lock(&rt->cred_mu);
  if (rt->cfg.ca_pem) {
    struct curl_blob b = {rt->cfg.ca_pem, rt->cfg.ca_pem_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
  }
  if (rt->cfg.client_cert_pem) {
    struct curl_blob cb = {rt->cfg.client_cert_pem, rt->cfg.client_cert_len, CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    if (rt->cfg.client_key_pem) {
      struct curl_blob kb = {rt->cfg.client_key_pem, rt->cfg.client_key_len, CURL_BLOB_COPY};
      curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
      curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
  }
  pthread_mutex_unlock(&rt->cred_mu);
}

void altar__k8s_http_status_message(const resp_t *r, char *out, size_t outsz) {
  out[0] = '\0';
  json_t *st = r->body.len ? json_loadb((const char *)r->body.data, r->body.len, 0, NULL) : NULL;
  const char *msg = json_string_value(json_object_get(st, "message"));
  if (msg) snprintf(out, outsz, "%s", msg);
  json_decref(st);
}
#define status_message altar__k8s_http_status_message

static bool idempotent(const char *method) { return !strcmp(method, "GET"); }

/* One API call with retries. *pstatus gets the final HTTP status; r the
 * body. Transport failures after the retries are errors; HTTP statuses are
 * left to the caller except 429/5xx that outlast the retries. */
static int request(http_rt_t *rt, const char *method, const char *path, const char *body, long *pstatus, resp_t *r,
                   altar_error_t *err) {
  char url[2048];
  if ((size_t)snprintf(url, sizeof url, "%s%s", rt->cfg.server, path) >= sizeof url)
    return altar_error_set(err, ALTAR_EINVAL, "kubernetes API: request path too long");
  bool failed = false;
  struct curl_slist *hdrs = altar__k8s_http_headers(rt, body != NULL, &failed, err);
  if (failed) return err && err->code ? err->code : ALTAR_ECONFIG;
  int rc = ALTAR_OK;
  long delay = rt->cfg.backoff_initial_ms;
  pthread_mutex_lock(&rt->mu);
  CURL *c = rt->curl;
  for (int attempt = 0;; attempt++) {
    altar_buf_reset(&r->body);
    r->too_big = false;
    r->retry_after_s = -1;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (body) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (!strcmp(method, "GET")) {
      curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, altar__k8s_http_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, altar__k8s_http_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    altar__k8s_http_tls(rt, c, rt->cfg.timeout_ms);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    bool last = attempt >= rt->cfg.max_retries;
    if (cc != CURLE_OK) {
      if (r->too_big) {
        rc = altar_error_set(err, ALTAR_ETOOBIG, "kubernetes API %s %s: response larger than %u bytes", method, path,
                             ALTAR_K8S_MAX_RESPONSE);
        break;
      }
      /* A request that never reached the server is safe to repeat; one that
       * may have is repeated only when it is a read. */
      bool retry = idempotent(method) || cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
      if (!retry || last) {
        int code = cc == CURLE_OPERATION_TIMEDOUT ? ALTAR_ETIMEOUT : ALTAR_EBACKEND;
        rc = altar_error_set_retriable(err, code, "kubernetes API %s %s%s: %s", method, rt->cfg.server, path,
                                       curl_easy_strerror(cc));
        break;
      }
    } else if (status == 429 || status >= 500) {
      if (last) {
        char msg[256];
        status_message(r, msg, sizeof msg);
        rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "kubernetes API %s %s: HTTP %ld after %d retries%s%s",
                                       method, path, status, attempt, msg[0] ? ": " : "", msg);
        break;
      }
      if (r->retry_after_s >= 0 && r->retry_after_s * 1000 > delay) delay = r->retry_after_s * 1000;
    } else {
      *pstatus = status;
      break;
    }
    if (delay > rt->cfg.backoff_max_ms) delay = rt->cfg.backoff_max_ms;
    sleep_ms(delay);
    delay *= 2;
  }
  pthread_mutex_unlock(&rt->mu);
  curl_slist_free_all(hdrs);
  return rc;
}

int altar__k8s_http_status_error(long status, const resp_t *r, const char *what, altar_error_t *err) {
  char msg[256];
  status_message(r, msg, sizeof msg);
  const char *sep = msg[0] ? ": " : "";
  switch (status) {
  case 401:
    return altar_error_set(err, ALTAR_EBACKEND, "%s: 401 Unauthorized (check the token or client certificate)%s%s",
                           what, sep, msg);
  case 403:
    return altar_error_set(err, ALTAR_EBACKEND, "%s: 403 Forbidden (the credentials lack permission; check RBAC)%s%s",
                           what, sep, msg);
  case 404: return altar_error_set(err, ALTAR_ENOTFOUND, "%s: 404 Not Found%s%s", what, sep, msg);
  case 409: return altar_error_set(err, ALTAR_ESTATE, "%s: 409 Conflict%s%s", what, sep, msg);
  case 400:
  case 422: return altar_error_set(err, ALTAR_EINVAL, "%s: %ld rejected by the API server%s%s", what, status, sep, msg);
  default: return altar_error_set(err, ALTAR_EBACKEND, "%s: unexpected HTTP %ld%s%s", what, status, sep, msg);
  }
}

#define status_error altar__k8s_http_status_error

/* Names and namespaces go into URL paths: only DNS-1123 characters. */
static int check_name(const char *field, const char *s, altar_error_t *err) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 253) return altar_error_set(err, ALTAR_EINVAL, "%s: must be 1..253 characters", field);
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
      return altar_error_set(err, ALTAR_EINVAL, "%s: '%s' is not a DNS-1123 name", field, s);
  }
  return ALTAR_OK;
}

static json_t *parse_body(const resp_t *r, const char *what, altar_error_t *err) {
  json_error_t je;
  json_t *v = json_loadb((const char *)r->body.data, r->body.len, 0, &je);
  if (!v) altar_error_set(err, ALTAR_EDECODE, "%s: response is not JSON (%s)", what, je.text);
  return v;
}

static int h_create(void *impl, const json_t *manifest, const char *ns, char **pname, char **puid, altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (rc) return rc;
  char path[512], what[600];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", ns);
  const char *name = json_string_value(json_object_get(json_object_get(manifest, "metadata"), "name"));
  snprintf(what, sizeof what, "create job %s in namespace %s", name ? name : "?", ns);
  char *body = json_dumps(manifest, JSON_COMPACT);
  if (!body) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
  resp_t r = {.retry_after_s = -1};
  long status = 0;
  rc = request(rt, "POST", path, body, &status, &r, err);
  free(body);
  if (!rc) {
    if (status == 409) {
      rc = altar_error_set(err, ALTAR_EJOBEXISTS, "%s: a job with that name already exists", what);
    } else if (status == 200 || status == 201 || status == 202) {
      json_t *job = parse_body(&r, what, err);
      const char *got = json_string_value(json_object_get(json_object_get(job, "metadata"), "name"));
      const char *uid = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
      if (!job) rc = ALTAR_EDECODE;
      else if (!(*pname = strdup(got ? got : (name ? name : ""))) || (uid && !(*puid = strdup(uid))))
        rc = altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
      json_decref(job);
    } else {
      rc = status_error(status, &r, what, err);
    }
  }
  altar_buf_free(&r.body);
  return rc;
}

int altar__k8s_http_list_paged(http_rt_t *rt, const char *collection, const char *sel, const char *fsel,
                               const char *what, altar__k8s_page_fn page, void *ctx, altar_error_t *err) {
  char *esel = sel ? curl_easy_escape(rt->curl, sel, 0) : NULL;
  char *efsel = fsel ? curl_easy_escape(rt->curl, fsel, 0) : NULL;
  char *cont = NULL;
  int rc = ALTAR_OK;
  resp_t r = {.retry_after_s = -1};
  for (int pg = 0; !rc; pg++) {
    if (pg >= MAX_PAGES) {
      rc = altar_error_set(err, ALTAR_ETOOBIG, "%s: more than %d pages", what, MAX_PAGES);
      break;
    }
    char *econt = cont ? curl_easy_escape(rt->curl, cont, 0) : NULL;
    size_t plen = 128 + strlen(collection) + (esel ? strlen(esel) : 0) + (efsel ? strlen(efsel) : 0) +
                  (econt ? strlen(econt) : 0);
    char *path = malloc(plen);
    if (!path) {
      curl_free(econt);
      rc = altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
      break;
    }
    snprintf(path, plen, "%s?limit=%d%s%s%s%s%s%s", collection, rt->cfg.list_limit > 0 ? rt->cfg.list_limit : 500,
             esel ? "&labelSelector=" : "", esel ? esel : "", efsel ? "&fieldSelector=" : "", efsel ? efsel : "",
             econt ? "&continue=" : "", econt ? econt : "");
    curl_free(econt);
    long status = 0;
    rc = request(rt, "GET", path, NULL, &status, &r, err);
    free(path);
    if (rc) break;
    if (status != 200) {
      rc = status_error(status, &r, what, err);
      break;
    }
    /* Never read, and ~40% of a Job's bytes: skipped as text, not parsed. */
    r.body.len = altar__k8s_json_drop_member((char *)r.body.data, r.body.len, "managedFields");
    json_t *list = parse_body(&r, what, err);
    if (!list) {
      rc = ALTAR_EDECODE;
      break;
    }
    rc = page(ctx, list, err);
    const char *next = json_string_value(json_object_get(json_object_get(list, "metadata"), "continue"));
    free(cont);
    cont = next && *next ? strdup(next) : NULL;
    json_decref(list);
    if (!cont) break;
  }
  free(cont);
  curl_free(esel);
  curl_free(efsel);
  altar_buf_free(&r.body);
  return rc;
}

typedef struct job_acc {
  altar_k8s_job_info_t *jobs;
  size_t n, cap;
} job_acc_t;

static int append_jobs(void *ctx, const json_t *list, altar_error_t *err) {
  job_acc_t *a = ctx;
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(list, "items"), i, item) {
    if (ALTAR_GROW(a->jobs, a->cap, a->n + 1)) return altar_error_set(err, ALTAR_ENOMEM, "list jobs: out of memory");
    int rc = altar__k8s_job_info_from_json(item, &a->jobs[a->n], err);
    if (rc) return rc;
    a->n++;
  }
  return ALTAR_OK;
}

static int h_list(void *impl, const char *ns, const char *sel, altar_k8s_job_info_t **pjobs, size_t *pn,
                  altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (rc) return rc;
  char what[300], coll[400];
  snprintf(what, sizeof what, "list jobs in namespace %s", ns);
  snprintf(coll, sizeof coll, "/apis/batch/v1/namespaces/%s/jobs", ns);
  job_acc_t a = {0};
  rc = altar__k8s_http_list_paged(rt, coll, sel, NULL, what, append_jobs, &a, err);
  if (rc) {
    altar__k8s_job_infos_free(a.jobs, a.n);
    return rc;
  }
  *pjobs = a.jobs;
  *pn = a.n;
  return ALTAR_OK;
}

typedef struct wait_acc {
  altar_k8s_pod_wait_t *waits;
  size_t n, cap;
} wait_acc_t;

static int append_waits(void *ctx, const json_t *list, altar_error_t *err) {
  wait_acc_t *a = ctx;
  size_t i;
  json_t *pod;
  json_array_foreach(json_object_get(list, "items"), i, pod) {
    char detail[512];
    const char *code = altar__k8s_pod_waiting(pod, detail, sizeof detail);
    const json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    const char *job = json_string_value(json_object_get(labels, "batch.kubernetes.io/job-name"));
    if (!job) job = json_string_value(json_object_get(labels, "job-name"));
    if (!code || !job) continue;
    if (ALTAR_GROW(a->waits, a->cap, a->n + 1)) return altar_error_set(err, ALTAR_ENOMEM, "list pods: out of memory");
    altar_k8s_pod_wait_t *w = &a->waits[a->n];
    w->reason = code;
    w->job_name = strdup(job);
    w->detail = strdup(detail);
    if (!w->job_name || !w->detail) {
      free(w->job_name);
      free(w->detail);
      return altar_error_set(err, ALTAR_ENOMEM, "list pods: out of memory");
    }
    a->n++;
  }
  return ALTAR_OK;
}

static int h_pod_waits(void *impl, const char *ns, const char *sel, altar_k8s_pod_wait_t **pwaits, size_t *pn,
                       altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (rc) return rc;
  char what[300], coll[400];
  snprintf(what, sizeof what, "list pending pods in namespace %s", ns);
  snprintf(coll, sizeof coll, "/api/v1/namespaces/%s/pods", ns);
  wait_acc_t a = {0};
  rc = altar__k8s_http_list_paged(rt, coll, sel, "status.phase=Pending", what, append_waits, &a, err);
  if (rc) {
    altar__k8s_pod_waits_free(a.waits, a.n);
    return rc;
  }
  *pwaits = a.waits;
  *pn = a.n;
  return ALTAR_OK;
}

typedef struct {
  altar_k8s_node_info_t *nodes;
  size_t n, cap;
} node_acc_t;

static int append_nodes(void *ctx, const json_t *list, altar_error_t *err) {
  node_acc_t *a = ctx;
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(list, "items"), i, node) {
    if (ALTAR_GROW(a->nodes, a->cap, a->n + 1)) return altar_error_set(err, ALTAR_ENOMEM, "list nodes: out of memory");
    int rc = altar__k8s_node_info_from_json(node, &a->nodes[a->n], err);
    if (rc == ALTAR_ENOMEM) return rc;
    if (!rc) a->n++; /* a node without a name cannot take pods */
  }
  return ALTAR_OK;
}

static int h_nodes(void *impl, altar_k8s_node_info_t **pnodes, size_t *pn, altar_error_t *err) {
  http_rt_t *rt = impl;
  node_acc_t a = {0};
  int rc = altar__k8s_http_list_paged(rt, "/api/v1/nodes", NULL, NULL, "list nodes", append_nodes, &a, err);
  if (rc) {
    altar__k8s_node_infos_free(a.nodes, a.n);
    return rc;
  }
  *pnodes = a.nodes;
  *pn = a.n;
  return ALTAR_OK;
}

/* GET of one object; *pobj NULL on 404. */
static int get_object(http_rt_t *rt, const char *path, const char *what, json_t **pobj, altar_error_t *err) {
  *pobj = NULL;
  resp_t r = {.retry_after_s = -1};
  long status = 0;
  int rc = request(rt, "GET", path, NULL, &status, &r, err);
  if (!rc && status == 200) {
    *pobj = parse_body(&r, what, err);
    if (!*pobj) rc = ALTAR_EDECODE;
  } else if (!rc && status != 404) {
    rc = status_error(status, &r, what, err);
  }
  altar_buf_free(&r.body);
  return rc;
}

static int h_read(void *impl, const char *name, const char *ns, altar_k8s_job_info_t **pjob, altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (!rc) rc = check_name("job name", name, err);
  if (rc) return rc;
  char path[600], what[600];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", ns, name);
  snprintf(what, sizeof what, "read job %s in namespace %s", name, ns);
  json_t *job = NULL;
  rc = get_object(rt, path, what, &job, err);
  /* A Job being deleted can be neither adopted nor replaced yet. */
  json_t *dts = json_object_get(json_object_get(job, "metadata"), "deletionTimestamp");
  if (!rc && job && (dts == NULL || json_is_null(dts))) {
    *pjob = calloc(1, sizeof **pjob);
    if (!*pjob) rc = altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
    else if ((rc = altar__k8s_job_info_from_json(job, *pjob, err))) {
      free(*pjob);
      *pjob = NULL;
    }
  }
  json_decref(job);
  return rc;
}

static int h_delete(void *impl, const char *name, const char *ns, const char *uid, altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (!rc) rc = check_name("job name", name, err);
  if (rc) return rc;
  char path[600], what[600];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", ns, name);
  snprintf(what, sizeof what, "delete job %s in namespace %s", name, ns);
  /* Background propagation removes the Job's pods too. */
  json_t *opts =
      json_pack("{s:s, s:s, s:s}", "apiVersion", "v1", "kind", "DeleteOptions", "propagationPolicy", "Background");
  if (opts && uid) json_object_set_new(opts, "preconditions", json_pack("{s:s}", "uid", uid));
  char *body = opts ? json_dumps(opts, JSON_COMPACT) : NULL;
  json_decref(opts);
  if (!body) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
  resp_t r = {.retry_after_s = -1};
  long status = 0;
  rc = request(rt, "DELETE", path, body, &status, &r, err);
  free(body);
  if (!rc && status != 200 && status != 202 && status != 404) {
    /* 409 with a uid: the name belongs to a newer Job now; leave it be. */
    if (!(status == 409 && uid)) rc = status_error(status, &r, what, err);
  }
  altar_buf_free(&r.body);
  return rc;
}

static int h_describe(void *impl, const char *name, const char *ns, altar_failure_t **pf, altar_error_t *err) {
  http_rt_t *rt = impl;
  int rc = check_name("namespace", ns, err);
  if (!rc) rc = check_name("job name", name, err);
  if (rc) return rc;
  char path[700], what[600];
  snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", ns, name);
  snprintf(what, sizeof what, "describe job %s in namespace %s", name, ns);
  json_t *job = NULL, *pods = NULL;
  rc = get_object(rt, path, what, &job, err);
  if (!rc && !job) return altar_error_set(err, ALTAR_ENOTFOUND, "%s: no such job", what);
  if (!rc) {
    /* The Job controller labels its pods job-name=<name>. */
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=job-name%%3D%s", ns, name);
    rc = get_object(rt, path, what, &pods, err);
  }
  if (!rc) {
    *pf = altar__k8s_explain_failure(job, pods);
    if (!*pf) rc = altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", what);
  }
  json_decref(job);
  json_decref(pods);
  return rc;
}

static int h_create_start(void *impl, const json_t *manifest, const char *ns, uint64_t id, altar_error_t *err) {
  int rc = check_name("namespace", ns, err);
  return rc ? rc : altar__k8s_multi_create_start(impl, manifest, ns, id, err);
}

static int h_create_reap(void *impl, int timeout_ms, altar_k8s_create_done_t *pdone, size_t max) {
  return altar__k8s_multi_create_reap(impl, timeout_ms, pdone, max);
}

static int h_watch_open(void *impl, const char *ns, const char *selector, altar_k8s_watch_t **pw, altar_error_t *err) {
  int rc = check_name("namespace", ns, err);
  return rc ? rc : altar__k8s_watch_open(impl, ns, selector, pw, err);
}

static const char *h_namespace(void *impl) { return ((http_rt_t *)impl)->cfg.namespace_; }

static void h_destroy(void *impl) {
  http_rt_t *rt = impl;
  if (!rt) return;
  altar__k8s_multi_free(rt->multi);
  if (rt->curl) curl_easy_cleanup(rt->curl);
  pthread_mutex_destroy(&rt->mu);
  pthread_mutex_destroy(&rt->cred_mu);
  altar__k8s_http_config_clear(&rt->cfg);
  free(rt);
}

static const altar_k8s_runtime_ops_t http_ops = {
    .name = "kubernetes-api",
    .create_job = h_create,
    .list_jobs = h_list,
    .read_job = h_read,
    .delete_job = h_delete,
    .describe_failure = h_describe,
    .list_pod_waits = h_pod_waits,
    .list_nodes = h_nodes,
    .create_start = h_create_start,
    .create_reap = h_create_reap,
    .watch_open = h_watch_open,
    .default_namespace = h_namespace,
    .destroy = h_destroy,
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

altar_k8s_runtime_t *altar__k8s_http_runtime_new(altar_k8s_http_config_t *cfg, altar_error_t *err) {
  if (!cfg->server || (strncmp(cfg->server, "https://", 8) && strncmp(cfg->server, "http://", 7))) {
    altar_error_set(err, ALTAR_ECONFIG, "kubernetes server: want an https:// URL (got '%s')",
                    cfg->server ? cfg->server : "");
    return NULL;
  }
  if ((cfg->client_cert_pem == NULL) != (cfg->client_key_pem == NULL)) {
    altar_error_set(err, ALTAR_ECONFIG, "kubernetes client certificate: the certificate and its key go together");
    return NULL;
  }
  pthread_once(&curl_once, curl_init_once);
  http_rt_t *rt = calloc(1, sizeof *rt);
  if (!rt || !(rt->curl = curl_easy_init())) {
    free(rt);
    altar_error_set(err, ALTAR_ENOMEM, "kubernetes runtime: out of memory");
    return NULL;
  }
  pthread_mutex_init(&rt->mu, NULL);
  pthread_mutex_init(&rt->cred_mu, NULL);
  rt->cfg = *cfg;
  altar__k8s_http_config_init(cfg);
  size_t n = strlen(rt->cfg.server);
  while (n > 8 && rt->cfg.server[n - 1] == '/') rt->cfg.server[--n] = '\0';
  altar_k8s_runtime_t *r = altar__k8s_runtime_new(&http_ops, rt);
  if (!r) {
    h_destroy(rt);
    altar_error_set(err, ALTAR_ENOMEM, "kubernetes runtime: out of memory");
  }
  return r;
}
