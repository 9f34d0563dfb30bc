/* What the gs:// and s3:// adapters share (see cloud_int.h): URI rules,
 * checksums, options, and the libcurl request runner. */
#include "cloud_int.h"
#include "core/storage_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

/* ---- URIs ------------------------------------------------------------------------- */

void altar__cloud_uri_clear(altar_cloud_uri_t *u) {
  free(u->bucket);
  free(u->key);
  u->bucket = u->key = NULL;
}

/* Lower-case letters, digits, '-', '_' and '.', 3..222 bytes (GCS allows the
 * longest, dotted names), starting and ending with a letter or digit. */
static bool bucket_ok(const char *b, size_t n) {
  if (n < 3 || n > 222) return false;
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '_' && c != '.') return false;
    if ((i == 0 || i == n - 1) && !alnum) return false;
  }
  return true;
}

static int key_check(const char *uri, const char *key, altar_error_t *err) {
  size_t n = strlen(key);
  if (n > ALTAR_CLOUD_MAX_KEY)
    return altar_error_set(err, ALTAR_EPATH, "'%.200s': key longer than %d bytes", uri, ALTAR_CLOUD_MAX_KEY);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)key[i];
    if (c < 0x20 || c == 0x7f) return altar_error_set(err, ALTAR_EPATH, "'%.200s': key holds a control character", uri);
  }
  /* Segment by segment: no empty, "." or ".." segment (a trailing '/' is a
   * folder-like key and is allowed only as the last byte). */
  const char *p = key;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if ((len == 0 && e) || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
      return altar_error_set(err, ALTAR_EPATH,
                             "'%.200s': key has an empty, '.' or '..' segment, which could name another object", uri);
    if (!e) break;
    p = e + 1;
  }
  return ALTAR_OK;
}

int altar__cloud_uri_parse(const char *uri, const char *scheme, bool want_key, altar_cloud_uri_t *out,
                           altar_error_t *err) {
  out->bucket = out->key = NULL;
  if (!uri || !*uri) return altar_error_set(err, ALTAR_EINVAL, "uri: must not be empty");
  size_t sl = strlen(scheme);
  if (strncasecmp(uri, scheme, sl) != 0 || strncmp(uri + sl, "://", 3) != 0)
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': not a %s:// URI", uri, scheme);
  const char *b = uri + sl + 3;
  const char *slash = strchr(b, '/');
  size_t bn = slash ? (size_t)(slash - b) : strlen(b);
  if (bn == 0)
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': the bucket is missing (%s://BUCKET/KEY)", uri, scheme);
  if (!bucket_ok(b, bn))
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': bucket '%.*s' is not a valid name (3-222 of a-z 0-9 - _ .)",
                           uri, (int)(bn > 80 ? 80 : bn), b);
  const char *key = slash ? slash + 1 : "";
  if (want_key && !*key) return altar_error_set(err, ALTAR_EINVAL, "'%.200s': the object key is missing", uri);
  if (want_key && key[strlen(key) - 1] == '/')
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': an object key must not end with '/'", uri);
  int rc = key_check(uri, key, err);
  if (rc) return rc;
  out->bucket = strndup(b, bn);
  out->key = strdup(key);
  if (!out->bucket || !out->key) {
    altar__cloud_uri_clear(out);
    return altar_error_set(err, ALTAR_ENOMEM, "uri: out of memory");
  }
  return ALTAR_OK;
}

int altar__cloud_pct(altar_buf_t *out, const char *s, bool keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                c == '.' || c == '~' || (keep_slash && c == '/');
    if (keep) {
      if (altar_buf_append(out, s, 1)) return ALTAR_ENOMEM;
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      if (altar_buf_append(out, e, 3)) return ALTAR_ENOMEM;
    }
  }
  return ALTAR_OK;
}

/* ---- checksums -------------------------------------------------------------------- */

static uint32_t crc_table[256];
static bool crc_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const unsigned char *p, size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = (uint32_t)c64;
  for (; n; n--, p++) c = _mm_crc32_u8(c, *p);
  return c;
}
#endif

uint32_t altar__crc32c(uint32_t crc, const void *data, size_t len) {
  pthread_once(&crc_once, crc_init);
  const unsigned char *p = data;
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (crc_hw) return ~crc_sse42(c, p, len);
#endif
  for (size_t i = 0; i < len; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

int altar__cloud_sum_init(altar_cloud_sum_t *k, unsigned want, altar_error_t *err) {
  memset(k, 0, sizeof *k);
  k->want = want;
  if (want & ALTAR_CLOUD_SUM_MD5) {
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (!m || EVP_DigestInit_ex(m, EVP_md5(), NULL) != 1) {
      EVP_MD_CTX_free(m);
      return altar_error_set(err, ALTAR_ENOMEM, "md5: cannot set up OpenSSL's digest");
    }
    k->md5 = m;
  }
  return ALTAR_OK;
}

void altar__cloud_sum_update(altar_cloud_sum_t *k, const void *p, size_t n) {
  if (k->want & ALTAR_CLOUD_SUM_CRC32C) k->crc = altar__crc32c(k->crc, p, n);
  if (k->md5) EVP_DigestUpdate(k->md5, p, n);
  k->bytes += n;
}

void altar__cloud_sum_final(altar_cloud_sum_t *k, unsigned char md5[16]) {
  if (k->md5) {
    unsigned int n = 16;
    EVP_DigestFinal_ex(k->md5, md5, &n);
  } else {
    memset(md5, 0, 16);
  }
  altar__cloud_sum_free(k);
}

void altar__cloud_sum_free(altar_cloud_sum_t *k) {
  EVP_MD_CTX_free(k->md5);
  k->md5 = NULL;
}

void altar__cloud_b64(const unsigned char *p, size_t n, char *out, size_t cap) {
  if (cap < 4 * ((n + 2) / 3) + 1) {
    if (cap) out[0] = '\0';
    return;
  }
  EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

void altar__cloud_hex(const unsigned char *p, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex[p[i] >> 4];
    out[2 * i + 1] = hex[p[i] & 15];
  }
  out[2 * n] = '\0';
}

/* ---- options ------------------------------------------------------------------------ */

int altar__cloud_opt_u64(const char *key, const char *v, uint64_t min, uint64_t max, uint64_t *pout,
                         altar_error_t *err) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || n < min || n > max)
    return altar_error_set(err, ALTAR_EINVAL, "option %s: '%.40s' is not an integer in %llu..%llu", key, v,
                           (unsigned long long)min, (unsigned long long)max);
  *pout = n;
  return ALTAR_OK;
}

const char *altar__cloud_setting(const altar_strmap_t *options, const char *key, const char *const *envs) {
  const char *v = options ? altar_strmap_get(options, key) : NULL;
  if (v) return v;
  for (; envs && *envs; envs++) {
    v = getenv(*envs);
    if (v && *v) return v;
  }
  return NULL;
}

int altar__cloud_option_u64(const altar_strmap_t *options, const char *key, uint64_t min, uint64_t max, uint64_t *pdst,
                            altar_error_t *err) {
  const char *v = options ? altar_strmap_get(options, key) : NULL;
  return v ? altar__cloud_opt_u64(key, v, min, max, pdst, err) : ALTAR_OK;
}

/* ---- requests -------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int altar__cloud_http_init(altar_cloud_http_t *h, altar_error_t *err) {
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return altar_error_set(err, ALTAR_ESTORAGE, "libcurl: %s", curl_easy_strerror(curl_init_rc));
  h->curl = curl_easy_init();
  if (!h->curl) return altar_error_set(err, ALTAR_ENOMEM, "libcurl: cannot create a handle");
  if (!h->timeout_s) h->timeout_s = 3600;
  if (!h->connect_timeout_s) h->connect_timeout_s = 10;
  return ALTAR_OK;
}

void altar__cloud_http_free(altar_cloud_http_t *h) {
  if (h->curl) curl_easy_cleanup(h->curl);
  h->curl = NULL;
}

void altar__cloud_req_clear(altar_cloud_req_t *r) { altar_buf_free(&r->answer); }

static size_t on_read(char *p, size_t size, size_t nmemb, void *ud) {
  altar_cloud_req_t *r = ud;
  size_t want = size * nmemb;
  size_t left = r->body_len - (size_t)r->sent;
  if (want > left) want = left;
  if (!want) return 0;
  if (r->body_is_fd) {
    ssize_t n;
    do n = pread(r->body_fd, p, want, (off_t)(r->body_off + r->sent));
    while (n < 0 && errno == EINTR);
    if (n <= 0) { /* the file shrank or failed under us: never send short data as if whole */
      r->io_failed = true;
      return CURL_READFUNC_ABORT;
    }
    want = (size_t)n;
  } else {
    memcpy(p, (const char *)r->body + r->sent, want);
  }
  if (r->up_sum) altar__cloud_sum_update(r->up_sum, p, want);
  r->sent += want;
  return want;
}

/* curl rewinds a body only to resend it from the start (after a redirect or
 * a refused Expect); the running checksum starts over with it. */
static int on_seek(void *ud, curl_off_t offset, int origin) {
  altar_cloud_req_t *r = ud;
  if (origin != SEEK_SET || offset != 0) return CURL_SEEKFUNC_CANTSEEK;
  r->sent = 0;
  if (r->up_sum) {
    unsigned want = r->up_sum->want;
    altar__cloud_sum_free(r->up_sum);
    if (altar__cloud_sum_init(r->up_sum, want, NULL)) return CURL_SEEKFUNC_FAIL;
  }
  return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud) {
  altar_cloud_req_t *r = ud;
  size_t n = size * nmemb;
  if (!r->to_sink) {
    /* An answer or error body: keep what fits in the bound. */
    size_t room = ALTAR_CLOUD_MAX_ANSWER - r->answer.len;
    if (n > room) {
      r->too_big = true;
      return 0;
    }
    if (altar_buf_append(&r->answer, p, n)) {
      r->io_failed = true;
      return 0;
    }
    r->received += n;
    return n;
  }
  if (r->out_max && n > r->out_max - r->received) {
    r->too_big = true;
    return 0;
  }
  if (r->down_sum) altar__cloud_sum_update(r->down_sum, p, n);
  r->received += n;
  if (r->out_is_fd) {
    for (size_t off = 0; off < n;) {
      ssize_t w = write(r->out_fd, p + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        r->io_failed = true;
        return 0;
      }
      off += (size_t)w;
    }
    return n;
  }
  if (altar_buf_append(r->out_buf, p, n)) {
    r->io_failed = true;
    return 0;
  }
  return n;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t n) {
  while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
  while (n && *v == ' ') v++, n--;
  if (n >= cap) n = cap - 1;
  memcpy(dst, v, n);
  dst[n] = '\0';
}

/* X-Goog-Hash: crc32c=BASE64,md5=BASE64 (one header or several). */
static void goog_hash(altar_cloud_req_t *r, const char *v, size_t n) {
  char tmp[256];
  copy_value(tmp, sizeof tmp, v, n);
  char *save = NULL;
  for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    if (!strncmp(tok, "crc32c=", 7)) copy_value(r->goog_crc32c, sizeof r->goog_crc32c, tok + 7, strlen(tok + 7));
    if (!strncmp(tok, "md5=", 4)) copy_value(r->goog_md5, sizeof r->goog_md5, tok + 4, strlen(tok + 4));
  }
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  altar_cloud_req_t *r = ud;
  size_t n = size * nmemb;
  if (n >= 5 && !strncmp(p, "HTTP/", 5)) { /* a new response (after a 100 or a redirect) */
    r->location[0] = r->etag[0] = r->range[0] = r->goog_crc32c[0] = r->goog_md5[0] = '\0';
    r->content_length = -1;
    return n;
  }
  const char *colon = memchr(p, ':', n);
  if (!colon) return n;
  size_t kn = (size_t)(colon - p);
  const char *v = colon + 1;
  size_t vn = n - kn - 1;
#define IS(name) (kn == sizeof(name) - 1 && !strncasecmp(p, name, kn))
  if (IS("location")) copy_value(r->location, sizeof r->location, v, vn);
  else if (IS("etag")) copy_value(r->etag, sizeof r->etag, v, vn);
  else if (IS("range")) copy_value(r->range, sizeof r->range, v, vn);
  else if (IS("date")) copy_value(r->date, sizeof r->date, v, vn);
  else if (IS("x-goog-hash")) goog_hash(r, v, vn);
  else if (IS("content-length")) {
    char tmp[32];
    copy_value(tmp, sizeof tmp, v, vn);
    char *end;
    long long cl = strtoll(tmp, &end, 10);
    r->content_length = (end != tmp && !*end && cl >= 0) ? cl : -1;
  }
#undef IS
  return n;
}

typedef struct write_ctx {
  altar_cloud_req_t *r;
  CURL *c;
  bool decided;
} write_ctx_t;

/* Decides where the body goes once the status is known (first body byte). */
static size_t on_write_first(char *p, size_t size, size_t nmemb, void *ud) {
  write_ctx_t *w = ud;
  if (!w->decided) {
    long st = 0;
    curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &st);
    w->r->to_sink = st >= 200 && st <= 299 && (w->r->out_is_fd || w->r->out_buf);
    w->decided = true;
  }
  return on_write(p, size, nmemb, w->r);
}

int altar__cloud_perform(altar_cloud_http_t *h, altar_cloud_req_t *r, const char *label, altar_error_t *err) {
  CURL *c = h->curl;
  curl_easy_reset(c); /* keeps the connection cache */
  r->status = 0;
  r->sent = r->received = 0;
  r->content_length = -1;
  r->too_big = r->io_failed = r->to_sink = false;
  altar_buf_reset(&r->answer);
  write_ctx_t w = {.r = r, .c = c};
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, r->url);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, h->timeout_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->connect_timeout_s);
  /* A stalled transfer (under 1 KiB/s for 60 s) fails rather than holding the timeout. */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "altar/0.1");
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024L);
  curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->headers);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write_first);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
  if (!strcmp(r->method, "HEAD")) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (r->has_body) {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, r);
    curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
    if (strcmp(r->method, "PUT")) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
  } else if (!strcmp(r->method, "POST")) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
  } else if (strcmp(r->method, "GET")) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
  }
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  if (cc == CURLE_OK) return ALTAR_OK;
  const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);
  if (r->too_big)
    return altar_error_set(err, ALTAR_ETOOBIG, "%s: %s %.200s: the response is larger than %llu bytes", label,
                           r->method, r->url,
                           (unsigned long long)(r->to_sink && r->out_max ? r->out_max : ALTAR_CLOUD_MAX_ANSWER));
  if (r->io_failed)
    return altar_error_set(err, ALTAR_EIO, "%s: %s %.200s: %s", label, r->method, r->url,
                           r->sent < r->body_len && r->has_body ? "reading the local file failed or it shrank"
                                                                : "cannot store the response");
  if (cc == CURLE_OPERATION_TIMEDOUT)
    return altar_error_set_retriable(err, ALTAR_ETIMEOUT, "%s: %s %.200s: timed out: %s", label, r->method, r->url,
                                     why);
  if (cc == CURLE_PARTIAL_FILE)
    return altar_error_set_retriable(err, ALTAR_ESTORAGE,
                                     "%s: %s %.200s: the response was truncated after %llu bytes: %s", label, r->method,
                                     r->url, (unsigned long long)r->received, why);
  if (cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR)
    return altar_error_set_retriable(err, ALTAR_ESTORAGE, "%s: %s %.200s: the server dropped the connection: %s", label,
                                     r->method, r->url, why);
  return altar_error_set_retriable(err, ALTAR_ESTORAGE, "%s: %s %.200s: %s", label, r->method, r->url, why);
}

int altar__cloud_status_error(const char *label, const char *what, long status, const char *detail,
                              altar_error_t *err) {
  const char *sep = detail && *detail ? ": " : "";
  detail = detail ? detail : "";
  if (status == 404)
    return altar_error_set(err, ALTAR_ENOTFOUND, "%s: %.300s: HTTP 404 (not found)%s%.200s", label, what, sep, detail);
  if (status == 401 || status == 403)
    return altar_error_set(err, ALTAR_ESTORAGE, "%s: %.300s: HTTP %ld (access denied)%s%.200s", label, what, status,
                           sep, detail);
  if (status == 408 || status == 429 || status >= 500)
    return altar_error_set_retriable(err, ALTAR_ESTORAGE, "%s: %.300s: HTTP %ld%s%.200s", label, what, status, sep,
                                     detail);
  return altar_error_set(err, ALTAR_ESTORAGE, "%s: %.300s: HTTP %ld%s%.200s", label, what, status, sep, detail);
}

int altar__cloud_headers_add(struct curl_slist **ph, const char *const *lines) {
  for (size_t i = 0; lines && lines[i]; i++) {
    struct curl_slist *t = curl_slist_append(*ph, lines[i]);
    if (!t) {
      curl_slist_free_all(*ph);
      *ph = NULL;
      return ALTAR_ENOMEM;
    }
    *ph = t;
  }
  return ALTAR_OK;
}

void altar__cloud_printable(char *s) {
  for (char *c = s; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f) *c = ' ';
}

int altar__cloud_entry_path(altar_buf_t *path, const char *scheme, const char *bucket, const char *name) {
  altar_buf_reset(path);
  if (altar_buf_append_str(path, scheme) || altar_buf_append_str(path, "://") || altar_buf_append_str(path, bucket) ||
      altar_buf_append_str(path, "/") || altar_buf_append_str(path, name) || altar_buf_append(path, "", 1))
    return ALTAR_ENOMEM;
  return ALTAR_OK;
}
