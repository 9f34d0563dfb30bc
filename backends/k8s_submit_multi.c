/* Creates in flight on one connection: libcurl's multi interface with
 * HTTP/2 multiplexing, so N creates cost about one round trip rather than
 * N. How many are in flight is the backend's window (submit_window); this
 * file only carries them. 429 and 5xx are retried with capped exponential
 * backoff that honours Retry-After; a create that may or may not have
 * reached the server is repeated too, because the Job name comes from the
 * spec: a repeat meets its own Job (409), which submit then adopts. */
#include "altar/clock.h"
#include "altar/grow.h"
#include "k8s_http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A create's response is one Job object; anything larger is refused. */
#define CREATE_RESPONSE_MAX (4u << 20)

typedef struct xfer {
  CURL *easy;
  uint64_t id;
  char *url, *body;
  char what[320];
  struct curl_slist *hdrs;
  altar__k8s_resp_t r;
  int attempt;
  long delay_ms;
  double start_at; /* monotonic s; parked until then when !active */
  bool active;
} xfer_t;

struct altar__k8s_multi {
  CURLM *multi;
  xfer_t **x;
  size_t n, cap;
  altar_k8s_create_done_t *done;
  size_t ndone, capdone;
};

static void xfer_free(altar__k8s_multi_t *m, xfer_t *x) {
  if (!x) return;
  if (x->easy) {
    if (x->active) curl_multi_remove_handle(m->multi, x->easy);
    curl_easy_cleanup(x->easy);
  }
  curl_slist_free_all(x->hdrs);
  free(x->url);
  free(x->body);
  altar_buf_free(&x->r.body);
  free(x);
}

void altar__k8s_multi_free(altar__k8s_multi_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) xfer_free(m, m->x[i]);
  for (size_t i = 0; i < m->ndone; i++) free(m->done[i].name);
  free(m->x);
  free(m->done);
  if (m->multi) curl_multi_cleanup(m->multi);
  free(m);
}

static altar__k8s_multi_t *multi_get(altar__k8s_http_t *rt) {
  if (rt->multi) return rt->multi;
  altar__k8s_multi_t *m = calloc(1, sizeof *m);
  if (!m || !(m->multi = curl_multi_init())) {
    free(m);
    return NULL;
  }
  /* One connection, every create a stream on it. */
  curl_multi_setopt(m->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  curl_multi_setopt(m->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
  curl_multi_setopt(m->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)ALTAR_K8S_MAX_SUBMIT_WINDOW);
  rt->multi = m;
  return m;
}

/* (Re)arms x's easy handle and adds it to the multi. */
static int xfer_launch(altar__k8s_http_t *rt, altar__k8s_multi_t *m, xfer_t *x, altar_error_t *err) {
  bool failed = false;
  curl_slist_free_all(x->hdrs);
  x->hdrs = altar__k8s_http_headers(rt, true, &failed, err);
  if (failed) return err && err->code ? err->code : ALTAR_ECONFIG;
  CURL *c = x->easy;
  curl_easy_reset(c);
  altar_buf_reset(&x->r.body);
  x->r.too_big = false;
  x->r.retry_after_s = -1;
  x->r.max = CREATE_RESPONSE_MAX;
  curl_easy_setopt(c, CURLOPT_URL, x->url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hdrs);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, altar__k8s_http_on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &x->r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, altar__k8s_http_on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &x->r);
  curl_easy_setopt(c, CURLOPT_PRIVATE, x);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  /* Wait for the shared connection rather than open another. */
  curl_easy_setopt(c, CURLOPT_PIPEWAIT, 1L);
  altar__k8s_http_tls(rt, c, rt->cfg.timeout_ms);
  if (curl_multi_add_handle(m->multi, c) != CURLM_OK)
    return altar_error_set(err, ALTAR_EBACKEND, "%s: cannot start the transfer", x->what);
  x->active = true;
  return ALTAR_OK;
}

int altar__k8s_multi_create_start(altar__k8s_http_t *rt, const json_t *manifest, const char *ns, uint64_t id,
                                  altar_error_t *err) {
  altar__k8s_multi_t *m = multi_get(rt);
  xfer_t *x = m ? calloc(1, sizeof *x) : NULL;
  if (!x || ALTAR_GROW(m->x, m->cap, m->n + 1)) {
    free(x);
    return altar_error_set(err, ALTAR_ENOMEM, "create job: out of memory");
  }
  const char *name = json_string_value(json_object_get(json_object_get(manifest, "metadata"), "name"));
  snprintf(x->what, sizeof x->what, "create job %.200s in namespace %.63s", name ? name : "?", ns);
  size_t ulen = strlen(rt->cfg.server) + strlen(ns) + 64;
  x->id = id;
  x->delay_ms = rt->cfg.backoff_initial_ms;
  x->url = malloc(ulen);
  x->body = json_dumps(manifest, JSON_COMPACT);
  x->easy = curl_easy_init();
  if (!x->url || !x->body || !x->easy) {
    xfer_free(m, x);
    return altar_error_set(err, ALTAR_ENOMEM, "create job: out of memory");
  }
  snprintf(x->url, ulen, "%s/apis/batch/v1/namespaces/%s/jobs", rt->cfg.server, ns);
  int rc = xfer_launch(rt, m, x, err);
  if (rc) {
    xfer_free(m, x);
    return rc;
  }
  m->x[m->n++] = x;
  int running = 0;
  curl_multi_perform(m->multi, &running);
  return ALTAR_OK;
}

/* x ends with rc/err (name and uid on success); it leaves the set. */
static void finish(altar__k8s_multi_t *m, size_t i, int rc, char *name, const char *uid, const altar_error_t *err) {
  xfer_t *x = m->x[i];
  if (ALTAR_GROW(m->done, m->capdone, m->ndone + 1)) {
    /* Out of memory: the create is lost to the caller, who sees the Job
     * through its watch or next submit; nothing better is possible here. */
    free(name);
  } else {
    altar_k8s_create_done_t *d = &m->done[m->ndone++];
    memset(d, 0, sizeof *d);
    d->id = x->id;
    d->rc = rc;
    d->name = name;
    if (uid && strlen(uid) < sizeof d->uid) memcpy(d->uid, uid, strlen(uid) + 1);
    if (err) d->err = *err;
  }
  xfer_free(m, x);
  m->x[i] = m->x[--m->n];
}

/* Parks x for its next attempt: Retry-After when the server gave one, else
 * the doubling delay, both capped. */
static void park(altar__k8s_http_t *rt, xfer_t *x, double now) {
  long delay = x->delay_ms;
  if (x->r.retry_after_s >= 0 && x->r.retry_after_s * 1000 > delay) delay = x->r.retry_after_s * 1000;
  if (delay > rt->cfg.backoff_max_ms) delay = rt->cfg.backoff_max_ms;
  x->start_at = now + (double)delay / 1000.0;
  x->delay_ms = x->delay_ms * 2 < rt->cfg.backoff_max_ms ? x->delay_ms * 2 : rt->cfg.backoff_max_ms;
  x->attempt++;
}

static void on_done(altar__k8s_http_t *rt, altar__k8s_multi_t *m, xfer_t *x, CURLcode cc, double now) {
  size_t i = 0;
  while (i < m->n && m->x[i] != x) i++;
  if (i == m->n) return;
  curl_multi_remove_handle(m->multi, x->easy);
  x->active = false;
  long status = 0;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  bool last = x->attempt >= rt->cfg.max_retries;
  altar_error_t e = {0};
  if (cc != CURLE_OK) {
    if (x->r.too_big) {
      altar_error_set(&e, ALTAR_ETOOBIG, "%s: response larger than %u bytes", x->what, CREATE_RESPONSE_MAX);
      finish(m, i, e.code, NULL, NULL, &e);
    } else if (last) {
      altar_error_set_retriable(&e, cc == CURLE_OPERATION_TIMEDOUT ? ALTAR_ETIMEOUT : ALTAR_EBACKEND, "%s: %s", x->what,
                                curl_easy_strerror(cc));
      finish(m, i, e.code, NULL, NULL, &e);
    } else {
      park(rt, x, now);
    }
    return;
  }
  if (status == 429 || status >= 500) {
    if (!last) {
      park(rt, x, now);
      return;
    }
    char msg[256];
    altar__k8s_http_status_message(&x->r, msg, sizeof msg);
    altar_error_set_retriable(&e, ALTAR_EBACKEND, "%s: HTTP %ld after %d retries%s%s", x->what, status, x->attempt,
                              msg[0] ? ": " : "", msg);
    finish(m, i, e.code, NULL, NULL, &e);
    return;
  }
  if (status == 409) {
    altar_error_set(&e, ALTAR_EJOBEXISTS, "%s: a job with that name already exists", x->what);
    finish(m, i, e.code, NULL, NULL, &e);
    return;
  }
  if (status != 200 && status != 201 && status != 202) {
    int rc = altar__k8s_http_status_error(status, &x->r, x->what, &e);
    finish(m, i, rc, NULL, NULL, &e);
    return;
  }
  json_error_t je;
  json_t *job = json_loadb((const char *)x->r.body.data, x->r.body.len, 0, &je);
  const char *got = json_string_value(json_object_get(json_object_get(job, "metadata"), "name"));
  const char *uid = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
  char *name = got && strlen(got) <= 253 ? strdup(got) : NULL;
  if (!name) {
    altar_error_set(&e, ALTAR_EDECODE, "%s: the answer names no job%s%s", x->what, job ? "" : ": ", job ? "" : je.text);
    json_decref(job);
    finish(m, i, e.code, NULL, NULL, &e);
    return;
  }
  finish(m, i, ALTAR_OK, name, uid, NULL);
  json_decref(job);
}

/* Starts parked transfers whose time has come; the soonest later start. */
static double relaunch_due(altar__k8s_http_t *rt, altar__k8s_multi_t *m, double now) {
  double next = now + 3600;
  for (size_t i = 0; i < m->n;) {
    xfer_t *x = m->x[i];
    if (x->active) {
      i++;
      continue;
    }
    if (x->start_at > now) {
      if (x->start_at < next) next = x->start_at;
      i++;
      continue;
    }
    altar_error_t e = {0};
    int rc = xfer_launch(rt, m, x, &e);
    if (rc) {
      finish(m, i, rc, NULL, NULL, &e);
      continue;
    }
    i++;
  }
  return next;
}

int altar__k8s_multi_create_reap(altar__k8s_http_t *rt, int timeout_ms, altar_k8s_create_done_t *done, size_t max) {
  altar__k8s_multi_t *m = rt->multi;
  if (!m) return 0;
  double deadline = altar_mono_s() + (timeout_ms > 0 ? timeout_ms / 1000.0 : 0);
  for (;;) {
    double now = altar_mono_s();
    double next = relaunch_due(rt, m, now);
    int running = 0;
    curl_multi_perform(m->multi, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      xfer_t *x = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      if (x) on_done(rt, m, x, msg->data.result, now);
    }
    if (m->ndone || !m->n || now >= deadline) break;
    double until = next < deadline ? next : deadline;
    int wait = (int)((until - now) * 1000.0) + 1;
    curl_multi_poll(m->multi, NULL, 0, wait, NULL);
  }
  size_t k = m->ndone < max ? m->ndone : max;
  memcpy(done, m->done, k * sizeof *done);
  memmove(m->done, m->done + k, (m->ndone - k) * sizeof *m->done);
  m->ndone -= k;
  return (int)k;
}
