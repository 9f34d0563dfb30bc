/* The real KubernetesRuntime's internals, shared by the files that talk
 * HTTP to the API server: k8s_runtime_http.c (one request at a time),
 * k8s_submit_multi.c (creates in flight on one HTTP/2 connection) and
 * k8s_watch.c (the Job watch on its own thread). Not public. */
#ifndef ALTAR_K8S_HTTP_INT_H
#define ALTAR_K8S_HTTP_INT_H

#include "altar/buf.h"
#include "k8s_int.h"

#include <curl/curl.h>
#include <pthread.h>

/* Largest response body accepted (a list page of many Jobs is big, not unbounded). */
#define ALTAR_K8S_MAX_RESPONSE (64u << 20)

typedef struct altar__k8s_multi altar__k8s_multi_t;

typedef struct altar__k8s_http {
  altar_k8s_http_config_t cfg;
  CURL *curl; /* the one-at-a-time handle, under mu */
  pthread_mutex_t mu;
  pthread_mutex_t cred_mu;   /* the token and exec credential, read by every thread */
  altar__k8s_multi_t *multi; /* creates in flight; made on first use */
} altar__k8s_http_t;

typedef struct altar__k8s_resp {
  altar_buf_t body;
  size_t max; /* 0: ALTAR_K8S_MAX_RESPONSE */
  bool too_big;
  long retry_after_s; /* -1 when absent */
} altar__k8s_resp_t;

/* CURLOPT_WRITEFUNCTION / HEADERFUNCTION over an altar__k8s_resp_t. */
size_t altar__k8s_http_on_body(char *p, size_t size, size_t n, void *ud);
size_t altar__k8s_http_on_header(char *p, size_t size, size_t n, void *ud);

/* The request headers: Accept, Content-Type when with_body, and the bearer
 * token when there is one (read under cred_mu). NULL with err filled when
 * the credential cannot be had. Caller frees with curl_slist_free_all. */
struct curl_slist *altar__k8s_http_headers(altar__k8s_http_t *rt, bool with_body, bool *pfailed, altar_error_t *err);
/* TLS, client certificate, timeouts and protocol limits on c (not the URL,
 * method or callbacks). timeout_ms 0: no whole-transfer timeout (a watch). */
void altar__k8s_http_tls(altar__k8s_http_t *rt, CURL *c, long timeout_ms);
/* The Status object's message in a response, bounded, for error text. */
void altar__k8s_http_status_message(const altar__k8s_resp_t *r, char *out, size_t outsz);
/* The error for an unexpected HTTP status, in the runtime's words. */
int altar__k8s_http_status_error(long status, const altar__k8s_resp_t *r, const char *what, altar_error_t *err);

/* Called with each page of a paged list; 0 to go on. */
typedef int (*altar__k8s_page_fn)(void *ctx, const json_t *list, altar_error_t *err);
/* GET collection?limit=…&labelSelector=…[&fieldSelector=…], following
 * continue tokens to the end; page() sees each page's object. */
int altar__k8s_http_list_paged(altar__k8s_http_t *rt, const char *collection, const char *sel, const char *fsel,
                               const char *what, altar__k8s_page_fn page, void *ctx, altar_error_t *err);

/* ---- creates in flight (k8s_submit_multi.c) ---- */

/* Queues the POST of manifest under id; the transfer starts at once. */
int altar__k8s_multi_create_start(altar__k8s_http_t *rt, const json_t *manifest, const char *ns, uint64_t id,
                                  altar_error_t *err);
/* Drives the transfers for up to timeout_ms (returning early once one has
 * finished) and moves up to max finished creates into done. Returns how
 * many it moved. */
int altar__k8s_multi_create_reap(altar__k8s_http_t *rt, int timeout_ms, altar_k8s_create_done_t *done, size_t max);
void altar__k8s_multi_free(altar__k8s_multi_t *m);

/* ---- the Job watch (k8s_watch.c) ---- */

int altar__k8s_watch_open(altar__k8s_http_t *rt, const char *ns, const char *selector, altar_k8s_watch_t **pw,
                          altar_error_t *err);

#endif
