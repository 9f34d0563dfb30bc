/* The "s3" storage adapter: s3://BUCKET/KEY on Amazon S3 or a service that
 * speaks its protocol (MinIO and others), over libcurl, signed with SigV4
 * (s3_sign.c) using credentials from s3_creds.c.
 *
 * Every request body is signed with its real SHA-256, so the server checks
 * the bytes it received. Files up to multipart_threshold go in one PUT;
 * larger ones as a multipart upload of part_size parts, two parts in
 * memory (the next is read and hashed while the current one is sent),
 * aborted when any step fails. Downloads stream into a temp
 * file or a bounded buffer, and a single-part object's ETag (its MD5) is
 * compared with the MD5 of what arrived.
 *
 * Addressing: virtual-host (https://BUCKET.host/KEY) or path style
 * (https://host/BUCKET/KEY); auto picks virtual-host for AWS's own
 * endpoints (path style for a bucket with dots) and path style for an
 * endpoint override (endpoint option, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL). */
#include "s3_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LABEL "s3"
#define MIB (1024u * 1024u)
#define MAX_PARTS 10000u

typedef struct s3 {
  altar_cloud_base_t base; /* first: the shared operations read it */
  char *scheme;            /* "http" or "https" */
  char *hostport;          /* host[:port] of the endpoint */
  bool virtual_host;
  bool style_auto; /* a dotted bucket then goes path style (its name breaks the TLS host match) */
  char *region;
  altar_s3_creds_t creds;
  uint64_t multipart_threshold, part_size, page_size;
  long long time_offset_s; /* added to the clock for signing */
  bool check_md5;
} s3_t;

static const altar_plugin_key_t option_keys[] = {
    {"endpoint", "the service URL (default: the public one, or the emulator's)"},
    {"region", "the bucket's region"},
    {"addressing_style", "path or virtual-host bucket addressing"},
    {"access_key_id", "the access key"},
    {"secret_access_key", "the secret key"},
    {"session_token", "a session token of temporary credentials"},
    {"profile", "the credentials file's profile"},
    {"credentials_file", "the credentials file"},
    {"checksum", "which checksums uploads and downloads carry"},
    {"timeout_s", "longest one request may take, in seconds"},
    {"connect_timeout_s", "longest a connection may take, in seconds"},
    {"max_bytes", "largest object read into memory"},
    {"multipart_threshold", "size from which uploads are multipart"},
    {"part_size", "bytes per multipart part"},
    {"page_size", "objects per list page"},
    {"time_offset_s", "seconds added to the clock when signing"},
    ALTAR_PLUGIN_KEYS_END,
};

static void s3_free(s3_t *b) {
  if (!b) return;
  altar__cloud_http_free(&b->base.http);
  altar__s3_creds_clear(&b->creds);
  free(b->scheme);
  free(b->hostport);
  free(b->region);
  free(b);
}

static int region_ok(const char *r) {
  size_t n = strlen(r);
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-')) return 0;
  return 1;
}

/* scheme://host[:port] with nothing after it (a trailing '/' is fine). */
static int split_endpoint(s3_t *b, const char *what, const char *v, altar_error_t *err) {
  const char *rest;
  if (!strncmp(v, "http://", 7)) rest = v + 7, b->scheme = strdup("http");
  else if (!strncmp(v, "https://", 8)) rest = v + 8, b->scheme = strdup("https");
  else return altar_error_set(err, ALTAR_EINVAL, "%s: '%.200s' must start with http:// or https://", what, v);
  size_t n = strcspn(rest, "/");
  if (n == 0 || n > 255 || (rest[n] && strcmp(rest + n, "/")) || memchr(rest, '@', n) || strpbrk(rest, " \r\n\t?#"))
    return altar_error_set(err, ALTAR_EINVAL, "%s: '%.200s' must be scheme://host[:port] without a path", what, v);
  b->hostport = strndup(rest, n);
  if (!b->scheme || !b->hostport) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  return ALTAR_OK;
}

static const altar_cloud_kind_t s3_kind;

static int s3_open(altar_storage_t *s, const altar_strmap_t *options, altar_error_t *err) {
  int rc = ALTAR_OK; /* keys: option_keys, checked by altar_storage_open */
  s3_t *b = calloc(1, sizeof *b);
  if (!b) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  b->base.kind = &s3_kind;
  b->multipart_threshold = 16 * MIB;
  b->part_size = 16 * MIB;
  b->base.max_bytes = 1024 * MIB;
  b->page_size = 1000;
  b->check_md5 = true;
  static const char *const region_env[] = {"AWS_REGION", "AWS_DEFAULT_REGION", NULL};
  static const char *const endpoint_env[] = {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", NULL};
  const char *region = altar__cloud_setting(options, "region", region_env);
  if (!region) region = "us-east-1";
  if (!region_ok(region))
    rc = altar_error_set(err, ALTAR_EINVAL, "option region: '%.64s' is not a region name (a-z 0-9 -)", region);
  else if (!(b->region = strdup(region))) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  const char *endpoint = altar__cloud_setting(options, "endpoint", endpoint_env);
  bool custom = endpoint != NULL;
  char aws[128];
  if (!custom) {
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
    endpoint = aws;
  }
  if (!rc) rc = split_endpoint(b, custom ? "option endpoint (or AWS_ENDPOINT_URL)" : "endpoint", endpoint, err);
  const char *style = options ? altar_strmap_get(options, "addressing_style") : NULL;
  if (!rc) {
    if (!style || !strcmp(style, "auto")) b->virtual_host = !custom, b->style_auto = true;
    else if (!strcmp(style, "virtual")) b->virtual_host = true;
    else if (!strcmp(style, "path")) b->virtual_host = false;
    else
      rc = altar_error_set(err, ALTAR_EINVAL, "option addressing_style: '%.40s' is not one of auto, path, virtual",
                           style);
  }
  const char *v;
  if (!rc && (v = options ? altar_strmap_get(options, "checksum") : NULL)) {
    if (!strcmp(v, "md5")) b->check_md5 = true;
    else if (!strcmp(v, "none")) b->check_md5 = false;
    else rc = altar_error_set(err, ALTAR_EINVAL, "option checksum: '%.40s' is not one of md5, none", v);
  }
  if (!rc) rc = altar__cloud_base_options(options, &b->base, err);
  /* S3 takes parts of 5 MiB and more (the last may be smaller) and single PUTs up to 5 GiB. */
  if (!rc)
    rc = altar__cloud_option_u64(options, "multipart_threshold", 5 * MIB, 5ull * 1024 * MIB, &b->multipart_threshold,
                                 err);
  if (!rc) rc = altar__cloud_option_u64(options, "part_size", 5 * MIB, 5ull * 1024 * MIB, &b->part_size, err);
  if (!rc) rc = altar__cloud_option_u64(options, "page_size", 1, 1000, &b->page_size, err);
  if (!rc && (v = options ? altar_strmap_get(options, "time_offset_s") : NULL)) {
    char *end;
    errno = 0;
    long long off = strtoll(v, &end, 10);
    if (errno || end == v || *end || off < -86400 || off > 86400)
      rc = altar_error_set(err, ALTAR_EINVAL, "option time_offset_s: '%.40s' is not an integer in -86400..86400", v);
    else b->time_offset_s = off;
  }
  if (!rc) rc = altar__s3_creds_load(options, &b->creds, err);
  if (!rc) rc = altar__cloud_http_init(&b->base.http, err);
  if (rc) {
    s3_free(b);
    return rc;
  }
  altar_storage_set_impl(s, b);
  return ALTAR_OK;
}

static void s3_close(altar_storage_t *s) { s3_free(altar_storage_impl(s)); }

/* ---- requests ------------------------------------------------------------------------- */

/* The text of the first element named name under node (depth-first). */
static xmlNode *find(xmlNode *node, const char *name) {
  for (xmlNode *n = node; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    if (!strcmp((const char *)n->name, name)) return n;
    xmlNode *c = find(n->children, name);
    if (c) return c;
  }
  return NULL;
}

static void text_of(xmlNode *n, char *out, size_t cap) {
  out[0] = '\0';
  if (!n) return;
  xmlChar *t = xmlNodeGetContent(n);
  if (t) snprintf(out, cap, "%s", (const char *)t);
  xmlFree(t);
}

static xmlDoc *parse_xml(const altar_cloud_req_t *r) {
  if (!r->answer.len || r->answer.len > INT32_MAX) return NULL;
  return xmlReadMemory((const char *)r->answer.data, (int)r->answer.len, "s3.xml", NULL,
                       XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

/* "Code: Message" of an S3 <Error> answer, printable only. */
static void error_detail(const altar_cloud_req_t *r, char *out, size_t cap) {
  out[0] = '\0';
  xmlDoc *d = parse_xml(r);
  if (d) {
    char code[96], msg[200];
    xmlNode *root = xmlDocGetRootElement(d);
    text_of(find(root, "Code"), code, sizeof code);
    text_of(find(root, "Message"), msg, sizeof msg);
    if (*code) snprintf(out, cap, "%s%s%s", code, *msg ? ": " : "", msg);
    xmlFreeDoc(d);
  }
  altar__cloud_printable(out);
}

static int fail_status(const altar_cloud_req_t *r, const char *uri, altar_error_t *err) {
  char detail[320];
  error_detail(r, detail, sizeof detail);
  if (!*detail && r->status == 403 && !strcmp(r->method, "HEAD"))
    snprintf(detail, sizeof detail, "a HEAD answer has no body; a wrong key, secret, region or clock all look alike");
  return altar__cloud_status_error(LABEL, uri, r->status, detail, err);
}

/* One signed request to bucket/key with an already-encoded, sorted query.
 * payload_hash NULL: the empty body's. */
static int s3_call(s3_t *b, altar_cloud_req_t *r, const char *bucket, const char *key, const char *query,
                   const char *payload_hash, const char *const *extra, altar_error_t *err) {
  altar_buf_t path = {0}, url = {0}, host = {0}, auth = {0};
  int rc = ALTAR_OK;
  bool vh = b->virtual_host && !(b->style_auto && strchr(bucket, '.'));
  if (vh) {
    if (altar_buf_append_str(&host, bucket) || altar_buf_append_str(&host, ".")) rc = ALTAR_ENOMEM;
  }
  if (!rc && (altar_buf_append_str(&host, b->hostport) || altar_buf_append(&host, "", 1))) rc = ALTAR_ENOMEM;
  if (!rc && !vh && (altar_buf_append_str(&path, "/") || altar__cloud_pct(&path, bucket, false))) rc = ALTAR_ENOMEM;
  if (!rc && (*key || vh) && (altar_buf_append_str(&path, "/") || altar__cloud_pct(&path, key, true)))
    rc = ALTAR_ENOMEM;
  if (!rc && altar_buf_append(&path, "", 1)) rc = ALTAR_ENOMEM;
  if (!rc &&
      (altar_buf_append_str(&url, b->scheme) || altar_buf_append_str(&url, "://") ||
       altar_buf_append_str(&url, (const char *)host.data) || altar_buf_append_str(&url, (const char *)path.data) ||
       (*query && (altar_buf_append_str(&url, "?") || altar_buf_append_str(&url, query))) ||
       altar_buf_append(&url, "", 1)))
    rc = ALTAR_ENOMEM;
  char date[17];
  altar__s3_amz_date(time(NULL) + (time_t)b->time_offset_s, date);
  const char *ph = payload_hash ? payload_hash : ALTAR_S3_EMPTY_SHA256;
  altar_s3_header_t sh[4] = {{"host", (const char *)host.data},
                             {"x-amz-content-sha256", ph},
                             {"x-amz-date", date},
                             {"x-amz-security-token", b->creds.session_token}};
  size_t nsh = b->creds.session_token ? 4 : 3;
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  rc = altar__s3_sign(r->method, (const char *)path.data, query, sh, nsh, ph, date, b->region, "s3",
                      b->creds.access_key, b->creds.secret_key, &auth, err);
  struct curl_slist *h = NULL;
  if (!rc) {
    static const char *const expect[] = {"Expect:", NULL};
    char line[8400];
    const char *const one[] = {line, NULL};
    for (size_t i = 0; i < nsh && !rc; i++) {
      snprintf(line, sizeof line, "%s: %s", sh[i].name, sh[i].value);
      rc = altar__cloud_headers_add(&h, one);
    }
    if (!rc) rc = altar__cloud_headers_add(&h, expect);
    if (!rc) rc = altar__cloud_headers_add(&h, extra);
    snprintf(line, sizeof line, "Authorization: %s", (const char *)auth.data);
    if (!rc) rc = altar__cloud_headers_add(&h, one);
    if (rc) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  }
  if (!rc) {
    r->url = (const char *)url.data;
    r->headers = h;
    rc = altar__cloud_perform(&b->base.http, r, LABEL, err);
    r->url = NULL;
    r->headers = NULL;
  }
  curl_slist_free_all(h);
  altar_buf_free(&path);
  altar_buf_free(&url);
  altar_buf_free(&host);
  altar_buf_free(&auth);
  return rc;
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* An ETag that is a plain MD5 (a single-part upload without SSE-KMS) into out[33]. */
static bool etag_md5(const char *etag, char out[33]) {
  const char *p = etag;
  if (*p == '"') p++;
  size_t n = strcspn(p, "\"");
  if (n != 32) return false;
  for (size_t i = 0; i < 32; i++) {
    char c = p[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
    out[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  }
  out[32] = '\0';
  return true;
}

static int download(altar_storage_t *s, const char *uri, bool to_fd, int fd, altar_buf_t *buf, altar_error_t *err) {
  s3_t *b = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "s3", true, &u, err);
  if (rc) return rc;
  altar_cloud_sum_t sum;
  rc = altar__cloud_sum_init(&sum, b->check_md5 ? ALTAR_CLOUD_SUM_MD5 : 0, err);
  if (rc) {
    altar__cloud_uri_clear(&u);
    return rc;
  }
  altar_cloud_req_t r = {.method = "GET",
                         .out_is_fd = to_fd,
                         .out_fd = fd,
                         .out_buf = to_fd ? NULL : buf,
                         .out_max = to_fd ? 0 : b->base.max_bytes,
                         .down_sum = &sum};
  rc = s3_call(b, &r, u.bucket, u.key, "", NULL, NULL, err);
  if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
  if (!rc && r.content_length >= 0 && (uint64_t)r.content_length != r.received)
    rc = altar_error_set_retriable(err, ALTAR_ESTORAGE, LABEL ": %.300s: got %llu of %lld bytes", uri,
                                   (unsigned long long)r.received, (long long)r.content_length);
  unsigned char md5[16];
  altar__cloud_sum_final(&sum, md5);
  char want[33];
  if (!rc && b->check_md5 && etag_md5(r.etag, want)) {
    char got[33];
    altar__cloud_hex(md5, 16, got);
    if (strcmp(got, want))
      rc = altar_error_set(err, ALTAR_EINTEGRITY, LABEL ": %.300s: the downloaded bytes have md5 %s, the ETag says %s",
                           uri, got, want);
  }
  altar__cloud_req_clear(&r);
  altar__cloud_uri_clear(&u);
  return rc;
}

static int s3_exists(altar_storage_t *s, const char *uri, bool *pexists, altar_error_t *err) {
  s3_t *b = altar_storage_impl(s);
  *pexists = false;
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "s3", true, &u, err);
  if (rc) return rc;
  altar_cloud_req_t r = {.method = "HEAD"};
  rc = s3_call(b, &r, u.bucket, u.key, "", NULL, NULL, err);
  if (!rc) {
    if (r.status >= 200 && r.status <= 299) *pexists = true;
    else if (r.status != 404) rc = fail_status(&r, uri, err);
  }
  altar__cloud_req_clear(&r);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- writing ------------------------------------------------------------------------------------- */

/* The bytes [off, off+len) of src: a pointer into memory, or read into buf. */
static int source_bytes(const altar_cloud_source_t *src, uint64_t off, size_t len, unsigned char *buf,
                        const unsigned char **pdata, const char *what, altar_error_t *err) {
  if (!src->is_fd) {
    *pdata = src->mem ? src->mem + off : (const unsigned char *)"";
    return ALTAR_OK;
  }
  size_t got = 0;
  while (got < len) {
    ssize_t n = pread(src->fd, buf + got, len - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return altar_error_set(err, ALTAR_EIO, "%.300s: reading the local file failed or it shrank: %s", what,
                             n < 0 ? strerror(errno) : "end of file");
    got += (size_t)n;
  }
  *pdata = buf;
  return ALTAR_OK;
}

static int put_single(s3_t *b, const altar_cloud_uri_t *u, const char *uri, const altar_cloud_source_t *src,
                      altar_error_t *err) {
  unsigned char *buf = src->is_fd ? malloc(src->size ? (size_t)src->size : 1) : NULL;
  if (src->is_fd && !buf) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  const unsigned char *data;
  int rc = source_bytes(src, 0, (size_t)src->size, buf, &data, uri, err);
  if (!rc) {
    char hash[65];
    altar__s3_sha256_hex(data, (size_t)src->size, hash);
    altar_cloud_req_t r = {.method = "PUT", .body = data, .body_len = (size_t)src->size, .has_body = true};
    static const char *const hdrs[] = {"Content-Type: application/octet-stream", NULL};
    rc = s3_call(b, &r, u->bucket, u->key, "", hash, hdrs, err);
    if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
    altar__cloud_req_clear(&r);
  }
  free(buf);
  return rc;
}

/* Aborting frees the parts the service holds; its own failure changes nothing. */
static void abort_upload(s3_t *b, const altar_cloud_uri_t *u, const char *upload_id) {
  altar_buf_t q = {0};
  if (!altar_buf_append_str(&q, "uploadId=") && !altar__cloud_pct(&q, upload_id, false) &&
      !altar_buf_append(&q, "", 1)) {
    altar_cloud_req_t r = {.method = "DELETE"};
    s3_call(b, &r, u->bucket, u->key, (const char *)q.data, NULL, NULL, NULL);
    altar__cloud_req_clear(&r);
  }
  altar_buf_free(&q);
}

/* One part made ready to send: its bytes (read into buf from a file) and
 * their SHA-256. */
typedef struct prep {
  const altar_cloud_source_t *src;
  const char *uri;
  uint64_t off;
  size_t len;
  unsigned char *buf;
  const unsigned char *data;
  char hash[65];
  int rc;
  altar_error_t err;
} prep_t;

static void prep_range(prep_t *p, uint64_t off, uint64_t part) {
  p->off = off;
  p->len = (size_t)(p->src->size - off < part ? p->src->size - off : part);
  p->rc = ALTAR_OK;
}

static void prep_part(prep_t *p) {
  p->rc = source_bytes(p->src, p->off, p->len, p->buf, &p->data, p->uri, &p->err);
  if (!p->rc) altar__s3_sha256_hex(p->data, p->len, p->hash);
}

static void *prep_thread(void *arg) {
  prep_part(arg);
  return NULL;
}

static int put_multipart(s3_t *b, const altar_cloud_uri_t *u, const char *uri, const altar_cloud_source_t *src,
                         altar_error_t *err) {
  /* At most MAX_PARTS parts: grow the part size (in whole MiB) for huge files. */
  uint64_t part = b->part_size;
  if ((src->size + part - 1) / part > MAX_PARTS) part = ((src->size / MAX_PARTS) / MIB + 1) * MIB;
  size_t nparts = (size_t)((src->size + part - 1) / part);
  char upload_id[1024] = "";
  altar_cloud_req_t r = {.method = "POST"};
  int rc = s3_call(b, &r, u->bucket, u->key, "uploads=", NULL, NULL, err);
  if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
  if (!rc) {
    xmlDoc *d = parse_xml(&r);
    text_of(d ? find(xmlDocGetRootElement(d), "UploadId") : NULL, upload_id, sizeof upload_id);
    xmlFreeDoc(d);
    if (!*upload_id || strpbrk(upload_id, "\r\n"))
      rc = altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: starting the multipart upload gave no UploadId", uri);
  }
  altar__cloud_req_clear(&r);
  if (rc) return rc;
  /* Two part buffers: the next part is read and hashed on a helper thread
   * while the current one is on the wire. */
  prep_t slot[2] = {{.src = src, .uri = uri}, {.src = src, .uri = uri}};
  for (int k = 0; k < 2 && src->is_fd; k++) slot[k].buf = malloc((size_t)part);
  char(*etags)[160] = calloc(nparts, sizeof *etags);
  altar_buf_t q = {0}, done = {0};
  if ((src->is_fd && (!slot[0].buf || !slot[1].buf)) || !etags)
    rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) {
    prep_range(&slot[0], 0, part);
    prep_part(&slot[0]);
  }
  for (size_t i = 0; i < nparts && !rc; i++) {
    prep_t *cur = &slot[i % 2], *next = &slot[(i + 1) % 2];
    if (cur->rc) {
      rc = cur->rc;
      *err = cur->err;
      break;
    }
    pthread_t helper;
    bool threaded = false, ahead = i + 1 < nparts;
    if (ahead) {
      prep_range(next, (uint64_t)(i + 1) * part, part);
      threaded = pthread_create(&helper, NULL, prep_thread, next) == 0;
    }
    char num[32];
    snprintf(num, sizeof num, "partNumber=%zu&uploadId=", i + 1);
    altar_buf_reset(&q);
    if (altar_buf_append_str(&q, num) || altar__cloud_pct(&q, upload_id, false) || altar_buf_append(&q, "", 1))
      rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
    altar_cloud_req_t p = {.method = "PUT", .body = cur->data, .body_len = cur->len, .has_body = true};
    if (!rc) rc = s3_call(b, &p, u->bucket, u->key, (const char *)q.data, cur->hash, NULL, err);
    if (!rc && (p.status < 200 || p.status > 299)) rc = fail_status(&p, uri, err);
    if (!rc && (!p.etag[0] || strpbrk(p.etag, "<>&")))
      rc = altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: part %zu came back without a usable ETag", uri, i + 1);
    if (!rc) snprintf(etags[i], sizeof etags[i], "%s", p.etag);
    altar__cloud_req_clear(&p);
    if (rc) altar_error_prefix(err, "part %zu of %zu", i + 1, nparts);
    if (threaded) pthread_join(helper, NULL);
    else if (ahead && !rc) prep_part(next);
  }
  if (!rc) {
    rc = altar_buf_append_str(&done, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < nparts && !rc; i++) {
      char one[256];
      snprintf(one, sizeof one, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1, etags[i]);
      rc = altar_buf_append_str(&done, one);
    }
    if (!rc) rc = altar_buf_append_str(&done, "</CompleteMultipartUpload>");
    altar_buf_reset(&q);
    if (!rc)
      rc = altar_buf_append_str(&q, "uploadId=") || altar__cloud_pct(&q, upload_id, false) ||
           altar_buf_append(&q, "", 1);
    if (rc) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  }
  if (!rc) {
    char hash[65];
    altar__s3_sha256_hex(done.data, done.len, hash);
    altar_cloud_req_t c = {.method = "POST", .body = done.data, .body_len = done.len, .has_body = true};
    static const char *const hdrs[] = {"Content-Type: application/xml", NULL};
    rc = s3_call(b, &c, u->bucket, u->key, (const char *)q.data, hash, hdrs, err);
    if (!rc && (c.status < 200 || c.status > 299)) rc = fail_status(&c, uri, err);
    /* The service may answer 200 and still fail: the body says which. */
    if (!rc) {
      xmlDoc *d = parse_xml(&c);
      xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
      if (!root || strcmp((const char *)root->name, "CompleteMultipartUploadResult")) {
        char detail[320];
        error_detail(&c, detail, sizeof detail);
        rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: completing the multipart upload failed: %s", uri,
                             *detail ? detail : "no CompleteMultipartUploadResult in the answer");
      }
      xmlFreeDoc(d);
    }
    altar__cloud_req_clear(&c);
  }
  if (rc) abort_upload(b, u, upload_id);
  free(slot[0].buf);
  free(slot[1].buf);
  free(etags);
  altar_buf_free(&q);
  altar_buf_free(&done);
  return rc;
}

static int put_source(altar_storage_t *s, const char *uri, const altar_cloud_source_t *src, altar_error_t *err) {
  s3_t *b = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "s3", true, &u, err);
  if (rc) return rc;
  rc = src->size > b->multipart_threshold ? put_multipart(b, &u, uri, src, err) : put_single(b, &u, uri, src, err);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- deleting ------------------------------------------------------------------------------------ */

/* DeleteObject, signed as every other request: 204 whether the key was
 * there or not; a 404 (NoSuchKey from some servers) is success as well. */
static int s3_delete(altar_storage_t *s, const char *uri, altar_error_t *err) {
  s3_t *b = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "s3", true, &u, err);
  if (rc) return rc;
  altar_cloud_req_t r = {.method = "DELETE"};
  rc = s3_call(b, &r, u.bucket, u.key, "", NULL, NULL, err);
  if (!rc && (r.status < 200 || r.status > 299) && r.status != 404) rc = fail_status(&r, uri, err);
  altar__cloud_req_clear(&r);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- listing ------------------------------------------------------------------------------------- */

static int s3_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  s3_t *b = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(prefix, "s3", false, &u, err);
  if (rc) return rc;
  char token[2048] = "";
  altar_buf_t q = {0}, path = {0};
  for (unsigned pages = 0; !rc; pages++) {
    char num[64];
    altar_buf_reset(&q);
    /* Query parameters in the sorted order SigV4 signs them in. */
    if (*token && (altar_buf_append_str(&q, "continuation-token=") || altar__cloud_pct(&q, token, false) ||
                   altar_buf_append_str(&q, "&")))
      rc = ALTAR_ENOMEM;
    snprintf(num, sizeof num, "list-type=2&max-keys=%llu", (unsigned long long)b->page_size);
    if (!rc && altar_buf_append_str(&q, num)) rc = ALTAR_ENOMEM;
    if (!rc && *u.key && (altar_buf_append_str(&q, "&prefix=") || altar__cloud_pct(&q, u.key, false)))
      rc = ALTAR_ENOMEM;
    if (!rc && altar_buf_append(&q, "", 1)) rc = ALTAR_ENOMEM;
    if (rc) {
      rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
      break;
    }
    altar_cloud_req_t r = {.method = "GET"};
    rc = s3_call(b, &r, u.bucket, "", (const char *)q.data, NULL, NULL, err);
    if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, prefix, err);
    xmlDoc *d = rc ? NULL : parse_xml(&r);
    altar__cloud_req_clear(&r);
    xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
    if (!rc && (!root || strcmp((const char *)root->name, "ListBucketResult")))
      rc = altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: the listing is not a ListBucketResult", prefix);
    for (xmlNode *c = root ? root->children : NULL; c && !rc; c = c->next) {
      if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, "Contents")) continue;
      char key[ALTAR_CLOUD_MAX_KEY + 1], size[32];
      text_of(find(c->children, "Key"), key, sizeof key);
      text_of(find(c->children, "Size"), size, sizeof size);
      if (!*key) continue;
      if (altar__cloud_entry_path(&path, "s3", u.bucket, key)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
        break;
      }
      altar_storage_entry_t e = {.path = (const char *)path.data, .size = strtoull(size, NULL, 10)};
      rc = fn(&e, ud);
    }
    char truncated[16] = "";
    token[0] = '\0';
    if (!rc && root) {
      text_of(find(root->children, "IsTruncated"), truncated, sizeof truncated);
      text_of(find(root->children, "NextContinuationToken"), token, sizeof token);
    }
    xmlFreeDoc(d);
    if (rc || strcmp(truncated, "true")) break;
    if (!*token) {
      rc = altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: a truncated listing without a continuation token",
                           prefix);
      break;
    }
    if (pages > 1000000) {
      rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: the listing does not end", prefix);
      break;
    }
  }
  altar_buf_free(&q);
  altar_buf_free(&path);
  altar__cloud_uri_clear(&u);
  return rc;
}

const altar_storage_ops_t altar_storage_s3_ops = {
    .name = "s3",
    .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE | ALTAR_STORAGE_CAP_LIST | ALTAR_STORAGE_CAP_DELETE,
    .config_keys = option_keys,
    .open = s3_open,
    .close = s3_close,
    .read_bytes = altar__cloud_read_bytes,
    .exists = s3_exists,
    .write_bytes = altar__cloud_write_bytes,
    .mkdirs = altar__cloud_mkdirs,
    .upload = altar__cloud_upload,
    .as_local_file = altar__cloud_as_local_file,
    .list = s3_list,
    .delete_file = s3_delete,
};

static const altar_cloud_kind_t s3_kind = {.scheme = "s3", .label = LABEL, .download = download, .put = put_source};
