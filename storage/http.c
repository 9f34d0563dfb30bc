/* The "http" storage adapter (also registered as "https"): read-only access
 * to http:// and https:// URLs through libcurl. Responses are bounded in
 * size and time; errors carry the HTTP status. Writes are not supported.
 *
 * Options (all optional): timeout_s (whole request, default 300),
 * connect_timeout_s (default 10), max_bytes (largest body, default 1 GiB). */
#include "core/storage_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct http_impl {
  long timeout_s;
  long connect_timeout_s;
  size_t max_bytes;
} http_impl_t;

static const http_impl_t defaults = {300, 10, 1024u * 1024u * 1024u};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int parse_long(const char *key, const char *v, long min, long long max, long long *pout, altar_error_t *err) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (errno || end == v || *end || n < min || n > max)
    return altar_error_set(err, ALTAR_EINVAL, "option %s: '%.40s' is not an integer in %ld..%lld", key, v, min, max);
  *pout = n;
  return ALTAR_OK;
}

static const altar_plugin_key_t http_keys[] = {
    {"timeout_s", "longest one request may take, in seconds"},
    {"connect_timeout_s", "longest a connection may take, in seconds"},
    {"max_bytes", "largest body read into memory"},
    ALTAR_PLUGIN_KEYS_END,
};

static int http_open(altar_storage_t *s, const altar_strmap_t *options, altar_error_t *err) {
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return altar_error_set(err, ALTAR_ESTORAGE, "libcurl: %s", curl_easy_strerror(curl_init_rc));
  http_impl_t *h = malloc(sizeof *h);
  if (!h) return altar_error_set(err, ALTAR_ENOMEM, "http: out of memory");
  *h = defaults;
  for (size_t i = 0; options && i < options->n; i++) {
    const char *k = options->keys[i], *v = options->vals[i];
    long long n = 0;
    int rc;
    if (!strcmp(k, "timeout_s")) {
      if (!(rc = parse_long(k, v, 1, 86400, &n, err))) h->timeout_s = (long)n;
    } else if (!strcmp(k, "connect_timeout_s")) {
      if (!(rc = parse_long(k, v, 1, 3600, &n, err))) h->connect_timeout_s = (long)n;
    } else if (!strcmp(k, "max_bytes")) {
      if (!(rc = parse_long(k, v, 1, (long long)(SIZE_MAX / 2), &n, err))) h->max_bytes = (size_t)n;
    } else {
      rc = altar_plugin_keys_refuse(http_keys, NULL, "storage", s->ops.name, k, err);
    }
    if (rc) {
      free(h);
      return rc;
    }
  }
  altar_storage_set_impl(s, h);
  return ALTAR_OK;
}

static void http_close(altar_storage_t *s) { free(altar_storage_impl(s)); }

/* Where a response body goes: a buffer or a file descriptor, with a bound. */
typedef struct sink {
  altar_buf_t *buf;
  int fd;
  size_t got, max;
  bool too_big, io_failed;
  bool probe; /* only the first byte is wanted */
} sink_t;

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud) {
  sink_t *k = ud;
  size_t n = size * nmemb;
  if (n > k->max - k->got) {
    k->too_big = true;
    return 0; /* aborts the transfer */
  }
  k->got += n;
  if (k->buf) {
    if (altar_buf_append(k->buf, p, n)) {
      k->io_failed = true;
      return 0;
    }
    return n;
  }
  for (size_t off = 0; off < n;) {
    ssize_t w = write(k->fd, p + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      k->io_failed = true;
      return 0;
    }
    off += (size_t)w;
  }
  return n;
}

static const http_impl_t *impl_of(altar_storage_t *s) {
  const http_impl_t *h = altar_storage_impl(s);
  return h ? h : &defaults;
}

static bool is_http_url(const char *url) {
  return url && (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8));
}

/* Runs one request; *pstatus gets the final HTTP status. Transport failures
 * are errors here; the caller judges the status. */
static int perform(altar_storage_t *s, const char *method, const char *url, sink_t *k, long *pstatus,
                   altar_error_t *err) {
  *pstatus = 0;
  if (!is_http_url(url))
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': not an http:// or https:// URL", url ? url : "");
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return altar_error_set(err, ALTAR_ESTORAGE, "libcurl: %s", curl_easy_strerror(curl_init_rc));
  const http_impl_t *h = impl_of(s);
  CURL *c = curl_easy_init();
  if (!c) return altar_error_set(err, ALTAR_ENOMEM, "libcurl: cannot create a handle");
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, h->timeout_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "altar/0.1");
  if (!strcmp(method, "HEAD")) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else {
    if (!strcmp(method, "GET") && k && k->probe) curl_easy_setopt(c, CURLOPT_RANGE, "0-0");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)h->max_bytes);
    k->max = h->max_bytes;
  }
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, pstatus);
  curl_easy_cleanup(c);
  if (cc == CURLE_OK) return ALTAR_OK;
  const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);
  if ((k && k->too_big) || cc == CURLE_FILESIZE_EXCEEDED)
    return altar_error_set(err, ALTAR_ETOOBIG, "%s %.200s: response larger than %zu bytes", method, url, h->max_bytes);
  if (k && k->io_failed) return altar_error_set(err, ALTAR_EIO, "%s %.200s: cannot store the response", method, url);
  if (cc == CURLE_OPERATION_TIMEDOUT)
    return altar_error_set_retriable(err, ALTAR_ETIMEOUT, "%s %.200s: timed out: %s", method, url, why);
  return altar_error_set_retriable(err, ALTAR_ESTORAGE, "%s %.200s: %s", method, url, why);
}

static int status_error(const char *method, const char *url, long status, altar_error_t *err) {
  if (status == 404 || status == 410)
    return altar_error_set(err, ALTAR_ENOTFOUND, "%s %.200s: HTTP %ld (not found)", method, url, status);
  if (status == 408 || status == 429 || status >= 500)
    return altar_error_set_retriable(err, ALTAR_ESTORAGE, "%s %.200s: HTTP %ld", method, url, status);
  return altar_error_set(err, ALTAR_ESTORAGE, "%s %.200s: HTTP %ld", method, url, status);
}

static int http_read_bytes(altar_storage_t *s, const char *url, altar_buf_t *out, altar_error_t *err) {
  altar_buf_t body = {0}; /* an error page never reaches out */
  sink_t k = {.buf = &body, .fd = -1};
  long status;
  int rc = perform(s, "GET", url, &k, &status, err);
  if (!rc && (status < 200 || status > 299)) rc = status_error("GET", url, status, err);
  if (!rc && altar_buf_append(out, body.data ? (const void *)body.data : "", body.len))
    rc = altar_error_set(err, ALTAR_ENOMEM, "GET %.200s: out of memory", url);
  altar_buf_free(&body);
  return rc;
}

static int http_exists(altar_storage_t *s, const char *url, bool *pexists, altar_error_t *err) {
  *pexists = false;
  long status;
  int rc = perform(s, "HEAD", url, NULL, &status, err);
  if (rc) return rc;
  if (status >= 200 && status <= 299) {
    *pexists = true;
    return ALTAR_OK;
  }
  if (status == 404 || status == 410) return ALTAR_OK;
  if (status == 405 || status == 501) {
    /* A server that refuses HEAD: ask for the first byte instead. */
    altar_buf_t one = {0};
    sink_t k = {.buf = &one, .fd = -1, .probe = true};
    rc = perform(s, "GET", url, &k, &status, err);
    altar_buf_free(&one);
    if (rc) return rc;
    if (status >= 200 && status <= 299) {
      *pexists = true;
      return ALTAR_OK;
    }
    if (status == 404 || status == 410 || status == 416) return ALTAR_OK;
    return status_error("GET", url, status, err);
  }
  return status_error("HEAD", url, status, err);
}

/* Downloads straight into a temp file, never holding the body in memory. */
static int http_as_local_file(altar_storage_t *s, const char *url, altar_local_file_t *out, altar_error_t *err) {
  out->path = NULL;
  out->release = NULL;
  if (!is_http_url(url))
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': not an http:// or https:// URL", url ? url : "");
  char *q = strndup(url, strcspn(url, "?#")); /* the extension comes from the path, not the query */
  if (!q) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  int fd = -1;
  int rc = altar__storage_mktemp(q, out, &fd, err);
  free(q);
  if (rc) return rc;
  sink_t k = {.fd = fd};
  long status;
  rc = perform(s, "GET", url, &k, &status, err);
  if (!rc && (status < 200 || status > 299)) rc = status_error("GET", url, status, err);
  if (close(fd) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "%s: close failed", out->path);
  if (rc) altar_local_file_release(out);
  return rc;
}

const altar_storage_ops_t altar_storage_http_ops = {
    .name = "http",
    .caps = ALTAR_STORAGE_CAP_READ,
    .config_keys = http_keys,
    .open = http_open,
    .close = http_close,
    .read_bytes = http_read_bytes,
    .exists = http_exists,
    .as_local_file = http_as_local_file,
};
