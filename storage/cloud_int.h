/* For the object-storage adapters (gs://, s3://) only; not public API.
 * What both share: URI and key rules, percent-encoding, content checksums,
 * option parsing, and one libcurl request runner that streams bodies from a
 * file range or memory and into a file, a bounded buffer or nowhere. */
#ifndef ALTAR_CLOUD_INT_H
#define ALTAR_CLOUD_INT_H

#include "altar/buf.h"
#include "altar/error.h"
#include "altar/plugin/storage.h"

#include <stdbool.h>
#include <stdint.h>

/* Longest object key either service accepts (bytes of UTF-8). */
#define ALTAR_CLOUD_MAX_KEY 1024
/* Largest JSON/XML answer or error body kept from a server. */
#define ALTAR_CLOUD_MAX_ANSWER (16u * 1024u * 1024u)

/* ---- URIs ------------------------------------------------------------------- */

/* scheme://bucket/key split and checked. A URI without a bucket is
 * ALTAR_EINVAL naming "bucket"; a key with "." or ".." segments, an empty
 * segment, a control character or more than ALTAR_CLOUD_MAX_KEY bytes is
 * ALTAR_EPATH (it could name another object than the caller meant). With
 * want_key false the key may be empty (listing a whole bucket). Caller
 * frees with altar__cloud_uri_clear. */
typedef struct altar_cloud_uri {
  char *bucket;
  char *key;
} altar_cloud_uri_t;
int altar__cloud_uri_parse(const char *uri, const char *scheme, bool want_key, altar_cloud_uri_t *out,
                           altar_error_t *err);
void altar__cloud_uri_clear(altar_cloud_uri_t *u);

/* Appends s percent-encoded: RFC 3986 unreserved bytes stay, '/' stays when
 * keep_slash, everything else becomes %XX (upper-case hex, as SigV4 wants). */
int altar__cloud_pct(altar_buf_t *out, const char *s, bool keep_slash);

/* ---- checksums ---------------------------------------------------------------- */

/* CRC-32C (Castagnoli), as GCS reports it; hardware instructions when the CPU has them. */
uint32_t altar__crc32c(uint32_t crc, const void *data, size_t len);

#define ALTAR_CLOUD_SUM_CRC32C 0x1u
#define ALTAR_CLOUD_SUM_MD5 0x2u

/* A running checksum over a stream of bytes: the sums asked for in want. */
typedef struct altar_cloud_sum {
  unsigned want;
  uint32_t crc;
  void *md5; /* EVP_MD_CTX */
  uint64_t bytes;
} altar_cloud_sum_t;
int altar__cloud_sum_init(altar_cloud_sum_t *k, unsigned want, altar_error_t *err);
void altar__cloud_sum_update(altar_cloud_sum_t *k, const void *p, size_t n);
/* Finishes md5 into 16 bytes (when wanted) and frees the context. */
void altar__cloud_sum_final(altar_cloud_sum_t *k, unsigned char md5[16]);
void altar__cloud_sum_free(altar_cloud_sum_t *k);

/* Standard base64 of n bytes into out (NUL-terminated; cap >= 4*((n+2)/3)+1). */
void altar__cloud_b64(const unsigned char *p, size_t n, char *out, size_t cap);
void altar__cloud_hex(const unsigned char *p, size_t n, char *out); /* out holds 2n+1 */

/* ---- options --------------------------------------------------------------------- */

/* An integer option in min..max, or ALTAR_EINVAL naming the key. */
int altar__cloud_opt_u64(const char *key, const char *v, uint64_t min, uint64_t max, uint64_t *pout,
                         altar_error_t *err);
/* The option key, or when it is unset, the first set environment variable
 * among envs (NULL-terminated), or NULL. */
const char *altar__cloud_setting(const altar_strmap_t *options, const char *key, const char *const *envs);
/* When options sets key, its value in min..max into *pdst; else *pdst stays. */
int altar__cloud_option_u64(const altar_strmap_t *options, const char *key, uint64_t min, uint64_t max, uint64_t *pdst,
                            altar_error_t *err);

/* ---- requests ---------------------------------------------------------------------- */

/* One libcurl handle per storage object: requests reuse its connections. */
typedef struct altar_cloud_http {
  void *curl; /* CURL */
  long timeout_s;
  long connect_timeout_s;
} altar_cloud_http_t;
int altar__cloud_http_init(altar_cloud_http_t *h, altar_error_t *err);
void altar__cloud_http_free(altar_cloud_http_t *h);

/* One request and what came back. Zero it, fill the inputs, call
 * altar__cloud_perform, read the outputs, then altar__cloud_req_clear. */
typedef struct altar_cloud_req {
  /* inputs */
  const char *method; /* GET, HEAD, PUT, POST, DELETE */
  const char *url;
  struct curl_slist *headers; /* borrowed */
  const void *body;           /* request body from memory ... */
  size_t body_len;
  bool body_is_fd; /* ... or body_len bytes of body_fd from body_off */
  int body_fd;
  uint64_t body_off;
  bool has_body;             /* send a body (possibly empty) */
  altar_cloud_sum_t *up_sum; /* sees every byte sent */
  /* A 2xx body goes to out_fd (when out_is_fd) or out_buf, bounded by out_max
   * (0: no bound; out_buf: ALTAR_CLOUD_MAX_ANSWER); without either it lands in answer. */
  bool out_is_fd;
  int out_fd;
  altar_buf_t *out_buf;
  uint64_t out_max;
  altar_cloud_sum_t *down_sum; /* sees every 2xx body byte */
  /* outputs */
  long status;
  altar_buf_t answer;     /* an error body, or a 2xx body nobody else took (bounded) */
  int64_t content_length; /* -1 when the server sent none */
  char location[2048];
  char etag[160];
  char range[96];       /* GCS resumable: "bytes=0-N" in a 308 */
  char goog_crc32c[16]; /* from X-Goog-Hash */
  char goog_md5[40];
  char date[64]; /* the server's Date header (for a clock-skew message) */
  uint64_t sent, received;
  bool too_big, io_failed;
  bool to_sink; /* internal: decided when the first body byte arrives */
} altar_cloud_req_t;

/* Runs r. A transport failure (no connection, a dropped or truncated
 * response, a timeout) is a retriable ALTAR_ESTORAGE or ALTAR_ETIMEOUT naming
 * "label" and the URL; any HTTP status returns 0 with r->status set. */
int altar__cloud_perform(altar_cloud_http_t *h, altar_cloud_req_t *r, const char *label, altar_error_t *err);
void altar__cloud_req_clear(altar_cloud_req_t *r);

/* The error for a non-2xx answer: 404 ALTAR_ENOTFOUND, 401/403 ALTAR_ESTORAGE
 * (not retriable), 408/429/5xx retriable ALTAR_ESTORAGE, with detail (the
 * server's own code and message) appended when not NULL. */
int altar__cloud_status_error(const char *label, const char *what, long status, const char *detail, altar_error_t *err);

/* Appends each of lines (NULL-terminated; NULL for none) to *ph. Out of
 * memory frees the whole list, leaves *ph NULL and returns ALTAR_ENOMEM. */
int altar__cloud_headers_add(struct curl_slist **ph, const char *const *lines);

/* Replaces control bytes with spaces, so a server's words print on one line. */
void altar__cloud_printable(char *s);

/* scheme://bucket/name, NUL-terminated, into path (reset first): a listed object. */
int altar__cloud_entry_path(altar_buf_t *path, const char *scheme, const char *bucket, const char *name);

/* ---- the operations both adapters share (cloud_ops.c) ------------------------------ */

/* Where upload bytes come from: size bytes of a file (is_fd) or of memory. */
typedef struct altar_cloud_source {
  bool is_fd;
  int fd;
  const unsigned char *mem;
  uint64_t size;
} altar_cloud_source_t;

/* What an adapter tells the shared operations about itself. */
typedef struct altar_cloud_kind {
  const char *scheme; /* of its URIs: "gs", "s3" */
  const char *label;  /* message prefix */
  /* GETs uri into fd (to_fd) or buf, checked against what the server reports. */
  int (*download)(altar_storage_t *s, const char *uri, bool to_fd, int fd, altar_buf_t *buf, altar_error_t *err);
  /* Stores src at uri. */
  int (*put)(altar_storage_t *s, const char *uri, const altar_cloud_source_t *src, altar_error_t *err);
} altar_cloud_kind_t;

/* The first member of each adapter's impl: the shared operations find the
 * adapter's kind there. */
typedef struct altar_cloud_base {
  const altar_cloud_kind_t *kind;
  altar_cloud_http_t http;
  uint64_t max_bytes; /* largest body read into memory */
} altar_cloud_base_t;

/* timeout_s, connect_timeout_s and max_bytes (both adapters' bounds) into b. */
int altar__cloud_base_options(const altar_strmap_t *options, altar_cloud_base_t *b, altar_error_t *err);

/* Storage operations for an impl (altar_storage_impl) starting with an altar_cloud_base_t. */
int altar__cloud_read_bytes(altar_storage_t *s, const char *uri, altar_buf_t *out, altar_error_t *err);
int altar__cloud_as_local_file(altar_storage_t *s, const char *uri, altar_local_file_t *out, altar_error_t *err);
int altar__cloud_write_bytes(altar_storage_t *s, const char *uri, const void *data, size_t len, altar_error_t *err);
int altar__cloud_upload(altar_storage_t *s, const char *local_path, const char *uri, altar_error_t *err);
/* Object stores have no directories: nothing to create, once the URI is sound. */
int altar__cloud_mkdirs(altar_storage_t *s, const char *uri, altar_error_t *err);

#endif
