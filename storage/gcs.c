/* The "gs" storage adapter (also registered as "gcs"): gs://BUCKET/KEY on
 * Google Cloud Storage through its JSON API, over libcurl.
 *
 * Uploads stream from the file (a single media upload up to
 * resumable_threshold, a resumable session in chunk_size pieces above it);
 * downloads stream into a temp file or a bounded buffer. Every transfer's
 * CRC-32C (and MD5 with checksum=md5|both) is compared with what the server
 * reports: the object resource after an upload, X-Goog-Hash on a download.
 * A mismatch is ALTAR_EINTEGRITY; a bad upload is deleted.
 *
 * The server is the endpoint option, else STORAGE_EMULATOR_HOST (an
 * emulator: no auth by default), else https://storage.googleapis.com.
 * Auth: gcs_auth.c.
 * The option table below is the one list of keys (docs/storage.md). */
#include "gcs_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LABEL "gs"
#define MIB (1024u * 1024u)

typedef struct gcs {
  altar_cloud_base_t base; /* first: the shared operations read it */
  char *endpoint;          /* scheme://host[:port], no trailing '/' */
  altar_gcs_auth_t *auth;
  uint64_t resumable_threshold, chunk_size, page_size;
  unsigned sums; /* ALTAR_CLOUD_SUM_* to check */
} gcs_t;

static const altar_plugin_key_t option_keys[] = {
    {"endpoint", "the service URL (default: the public one, or the emulator's)"},
    {"auth", "how requests are signed"},
    {"bearer_token", "a fixed OAuth token"},
    {"credentials_file", "the credentials file"},
    {"metadata_host", "the metadata server for instance credentials"},
    {"scope", "the OAuth scope asked for"},
    {"checksum", "which checksums uploads and downloads carry"},
    {"timeout_s", "longest one request may take, in seconds"},
    {"connect_timeout_s", "longest a connection may take, in seconds"},
    {"max_bytes", "largest object read into memory"},
    {"resumable_threshold", "size from which uploads are resumable"},
    {"chunk_size", "bytes per resumable upload chunk"},
    {"page_size", "objects per list page"},
    ALTAR_PLUGIN_KEYS_END,
};

static void gcs_free(gcs_t *g) {
  if (!g) return;
  altar__cloud_http_free(&g->base.http);
  altar__gcs_auth_free(g->auth);
  free(g->endpoint);
  free(g);
}

static int check_endpoint(const char *what, const char *v, altar_error_t *err) {
  if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
    return altar_error_set(err, ALTAR_EINVAL, "%s: '%.200s' must start with http:// or https://", what, v);
  if (strlen(v) > 512 || strpbrk(v, " \r\n\t?#"))
    return altar_error_set(err, ALTAR_EINVAL, "%s: '%.200s' is not a plain URL", what, v);
  return ALTAR_OK;
}

static const altar_cloud_kind_t gcs_kind;

static int gcs_open(altar_storage_t *s, const altar_strmap_t *options, altar_error_t *err) {
  int rc = ALTAR_OK; /* keys: option_keys, checked by altar_storage_open */
  gcs_t *g = calloc(1, sizeof *g);
  if (!g) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  g->base.kind = &gcs_kind;
  g->resumable_threshold = 8 * MIB;
  g->chunk_size = 16 * MIB;
  g->base.max_bytes = 1024 * MIB;
  g->page_size = 1000;
  g->sums = ALTAR_CLOUD_SUM_CRC32C;
  const char *v;
  /* An explicit endpoint first, then the emulator variable Google's clients
   * honour, then the service. */
  const char *emu = getenv("STORAGE_EMULATOR_HOST");
  v = options ? altar_strmap_get(options, "endpoint") : NULL;
  bool emulator = !v && emu && *emu;
  char emu_url[600];
  if (v) {
    rc = check_endpoint("option endpoint", v, err);
  } else if (emulator) {
    snprintf(emu_url, sizeof emu_url, "%s%s", strstr(emu, "://") ? "" : "http://", emu);
    v = emu_url;
    rc = check_endpoint("STORAGE_EMULATOR_HOST", v, err);
  } else {
    v = "https://storage.googleapis.com";
  }
  if (!rc && !(g->endpoint = strdup(v))) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) {
    size_t len = strlen(g->endpoint);
    while (len && g->endpoint[len - 1] == '/') g->endpoint[--len] = '\0';
  }
  if (!rc && (v = options ? altar_strmap_get(options, "checksum") : NULL)) {
    if (!strcmp(v, "crc32c")) g->sums = ALTAR_CLOUD_SUM_CRC32C;
    else if (!strcmp(v, "md5")) g->sums = ALTAR_CLOUD_SUM_MD5;
    else if (!strcmp(v, "both")) g->sums = ALTAR_CLOUD_SUM_CRC32C | ALTAR_CLOUD_SUM_MD5;
    else rc = altar_error_set(err, ALTAR_EINVAL, "option checksum: '%.40s' is not one of crc32c, md5, both", v);
  }
  if (!rc) rc = altar__cloud_base_options(options, &g->base, err);
  if (!rc)
    rc = altar__cloud_option_u64(options, "resumable_threshold", 0, 5ull * 1024 * MIB, &g->resumable_threshold, err);
  if (!rc) rc = altar__cloud_option_u64(options, "chunk_size", 256 * 1024, 1024 * MIB, &g->chunk_size, err);
  if (!rc) rc = altar__cloud_option_u64(options, "page_size", 1, 1000, &g->page_size, err);
  /* The service takes resumable chunks in multiples of 256 KiB. */
  if (!rc && g->chunk_size % (256 * 1024))
    rc = altar_error_set(err, ALTAR_EINVAL, "option chunk_size: %llu is not a multiple of 262144",
                         (unsigned long long)g->chunk_size);
  if (!rc) rc = altar__gcs_auth_open(options, emulator, &g->auth, err);
  if (!rc) rc = altar__cloud_http_init(&g->base.http, err);
  if (rc) {
    gcs_free(g);
    return rc;
  }
  altar_storage_set_impl(s, g);
  return ALTAR_OK;
}

static void gcs_close(altar_storage_t *s) { gcs_free(altar_storage_impl(s)); }

/* ---- requests ---------------------------------------------------------------------- */

/* The server's own words from an error body: error.message of the JSON
 * error, else the start of the text, printable bytes only. */
static void error_detail(const altar_cloud_req_t *r, char *out, size_t cap) {
  out[0] = '\0';
  if (!r->answer.len) return;
  json_t *o = json_loadb((const char *)r->answer.data, r->answer.len, 0, NULL);
  json_t *e = json_is_object(o) ? json_object_get(o, "error") : NULL;
  json_t *m = json_is_object(e) ? json_object_get(e, "message") : NULL;
  if (json_is_string(m)) {
    snprintf(out, cap, "%s", json_string_value(m));
  } else {
    size_t n = r->answer.len < cap - 1 ? r->answer.len : cap - 1;
    memcpy(out, r->answer.data, n);
    out[n] = '\0';
  }
  json_decref(o);
  altar__cloud_printable(out);
}

/* Runs r with the auth header and extra headers; one retry with a fresh
 * token when the server says 401. */
static int gcs_call(gcs_t *g, altar_cloud_req_t *r, const char *const *extra, altar_error_t *err) {
  for (int attempt = 0;; attempt++) {
    static const char *const expect[] = {"Expect:", NULL};
    struct curl_slist *h = NULL;
    if (altar__cloud_headers_add(&h, expect) || altar__cloud_headers_add(&h, extra))
      return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
    int rc = altar__gcs_auth_header(g->auth, &g->base.http, &h, err);
    if (!rc) {
      r->headers = h;
      rc = altar__cloud_perform(&g->base.http, r, LABEL, err);
      r->headers = NULL;
    }
    curl_slist_free_all(h);
    if (rc) return rc;
    if (r->status != 401 || attempt == 1 || !strcmp(altar__gcs_auth_mode(g->auth), "bearer") ||
        !strcmp(altar__gcs_auth_mode(g->auth), "none"))
      return ALTAR_OK;
    altar__gcs_auth_invalidate(g->auth);
  }
}

static int fail_status(const altar_cloud_req_t *r, const char *uri, altar_error_t *err) {
  char detail[240];
  error_detail(r, detail, sizeof detail);
  return altar__cloud_status_error(LABEL, uri, r->status, detail, err);
}

/* {endpoint}{prefix}/b/{bucket}/o[/{key}] into out. */
static int object_url(gcs_t *g, const char *api, const altar_cloud_uri_t *u, bool with_key, altar_buf_t *out) {
  if (altar_buf_append_str(out, g->endpoint) || altar_buf_append_str(out, api) || altar_buf_append_str(out, "/b/") ||
      altar__cloud_pct(out, u->bucket, false) || altar_buf_append_str(out, "/o"))
    return ALTAR_ENOMEM;
  if (with_key && (altar_buf_append_str(out, "/") || altar__cloud_pct(out, u->key, false))) return ALTAR_ENOMEM;
  return ALTAR_OK;
}

static int url_finish(altar_buf_t *b, altar_error_t *err) {
  if (altar_buf_append(b, "", 1)) return altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  return ALTAR_OK;
}

/* ---- checksums ------------------------------------------------------------------------- */

static void crc_b64(uint32_t crc, char out[16]) {
  unsigned char be[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16), (unsigned char)(crc >> 8),
                         (unsigned char)crc};
  altar__cloud_b64(be, 4, out, 16);
}

/* Compares the sums of what moved with what the server says it holds; a
 * sum the server did not report is not compared. */
static int compare_sums(const char *uri, const char *dir, altar_cloud_sum_t *k, const char *srv_crc,
                        const char *srv_md5, altar_error_t *err) {
  unsigned want = k->want;
  uint32_t crc = k->crc;
  unsigned char md5[16];
  altar__cloud_sum_final(k, md5);
  if ((want & ALTAR_CLOUD_SUM_CRC32C) && srv_crc && *srv_crc) {
    char mine[16];
    crc_b64(crc, mine);
    if (strcmp(mine, srv_crc))
      return altar_error_set(err, ALTAR_EINTEGRITY,
                             LABEL ": %.300s: the %s bytes have crc32c %s, the server "
                                   "reports %.20s",
                             uri, dir, mine, srv_crc);
  }
  if ((want & ALTAR_CLOUD_SUM_MD5) && srv_md5 && *srv_md5) {
    char mine[32];
    altar__cloud_b64(md5, 16, mine, sizeof mine);
    if (strcmp(mine, srv_md5))
      return altar_error_set(err, ALTAR_EINTEGRITY,
                             LABEL ": %.300s: the %s bytes have md5 %s, the server "
                                   "reports %.30s",
                             uri, dir, mine, srv_md5);
  }
  return ALTAR_OK;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* GET ?alt=media into fd (to_fd) or buf, checked against X-Goog-Hash. */
static int download(altar_storage_t *s, const char *uri, bool to_fd, int fd, altar_buf_t *buf, altar_error_t *err) {
  gcs_t *g = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "gs", true, &u, err);
  if (rc) return rc;
  altar_buf_t url = {0};
  if (object_url(g, "/storage/v1", &u, true, &url) || altar_buf_append_str(&url, "?alt=media"))
    rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) rc = url_finish(&url, err);
  altar_cloud_sum_t sum;
  bool sum_ok = false;
  if (!rc) sum_ok = !(rc = altar__cloud_sum_init(&sum, g->sums, err));
  altar_cloud_req_t r = {0};
  if (!rc) {
    r.method = "GET";
    r.url = (const char *)url.data;
    r.out_is_fd = to_fd;
    r.out_fd = fd;
    r.out_buf = to_fd ? NULL : buf;
    r.out_max = to_fd ? 0 : g->base.max_bytes;
    r.down_sum = &sum;
    rc = gcs_call(g, &r, NULL, err);
  }
  if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
  if (!rc && r.content_length >= 0 && (uint64_t)r.content_length != r.received)
    rc = altar_error_set_retriable(err, ALTAR_ESTORAGE, LABEL ": %.300s: got %llu of %lld bytes", uri,
                                   (unsigned long long)r.received, (long long)r.content_length);
  if (!rc) {
    rc = compare_sums(uri, "downloaded", &sum, r.goog_crc32c, r.goog_md5, err);
    sum_ok = false;
  }
  if (sum_ok) altar__cloud_sum_free(&sum);
  altar__cloud_req_clear(&r);
  altar_buf_free(&url);
  altar__cloud_uri_clear(&u);
  return rc;
}

static int gcs_exists(altar_storage_t *s, const char *uri, bool *pexists, altar_error_t *err) {
  gcs_t *g = altar_storage_impl(s);
  *pexists = false;
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "gs", true, &u, err);
  if (rc) return rc;
  altar_buf_t url = {0};
  if (object_url(g, "/storage/v1", &u, true, &url)) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) rc = url_finish(&url, err);
  altar_cloud_req_t r = {.method = "GET", .url = (const char *)url.data};
  if (!rc) rc = gcs_call(g, &r, NULL, err);
  if (!rc) {
    if (r.status >= 200 && r.status <= 299) *pexists = true;
    else if (r.status != 404) rc = fail_status(&r, uri, err);
  }
  altar__cloud_req_clear(&r);
  altar_buf_free(&url);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- writing -------------------------------------------------------------------------------- */

static void set_body(altar_cloud_req_t *r, const altar_cloud_source_t *src, uint64_t off, uint64_t len) {
  r->has_body = true;
  r->body_len = (size_t)len;
  if (src->is_fd) {
    r->body_is_fd = true;
    r->body_fd = src->fd;
    r->body_off = off;
  } else {
    r->body = src->mem ? src->mem + off : (const unsigned char *)"";
  }
}

/* Best effort: removes an object that failed its check. */
static void delete_object(gcs_t *g, const altar_cloud_uri_t *u) {
  altar_buf_t url = {0};
  if (!object_url(g, "/storage/v1", u, true, &url) && !altar_buf_append(&url, "", 1)) {
    altar_cloud_req_t r = {.method = "DELETE", .url = (const char *)url.data};
    gcs_call(g, &r, NULL, NULL);
    altar__cloud_req_clear(&r);
  }
  altar_buf_free(&url);
}

/* Checks the object resource the server answered a finished upload with. */
static int check_uploaded(gcs_t *g, const altar_cloud_uri_t *u, const char *uri, const altar_cloud_req_t *r,
                          altar_cloud_sum_t *sum, uint64_t size, altar_error_t *err) {
  json_t *o = json_loadb((const char *)r->answer.data, r->answer.len, 0, NULL);
  if (!json_is_object(o)) {
    json_decref(o);
    altar__cloud_sum_free(sum);
    return altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: the upload's answer is not an object resource", uri);
  }
  json_t *sz = json_object_get(o, "size");
  json_t *crc = json_object_get(o, "crc32c");
  json_t *md5 = json_object_get(o, "md5Hash");
  int rc = ALTAR_OK;
  if (json_is_string(sz) && strtoull(json_string_value(sz), NULL, 10) != size)
    rc = altar_error_set(err, ALTAR_EINTEGRITY, LABEL ": %.300s: sent %llu bytes, the server stored %.30s", uri,
                         (unsigned long long)size, json_string_value(sz));
  if (!rc)
    rc = compare_sums(uri, "uploaded", sum, json_is_string(crc) ? json_string_value(crc) : NULL,
                      json_is_string(md5) ? json_string_value(md5) : NULL, err);
  else altar__cloud_sum_free(sum);
  json_decref(o);
  if (rc == ALTAR_EINTEGRITY) delete_object(g, u);
  return rc;
}

static int simple_upload(gcs_t *g, const altar_cloud_uri_t *u, const char *uri, const altar_cloud_source_t *src,
                         altar_error_t *err) {
  altar_buf_t url = {0};
  int rc = ALTAR_OK;
  if (object_url(g, "/upload/storage/v1", u, false, &url) || altar_buf_append_str(&url, "?uploadType=media&name=") ||
      altar__cloud_pct(&url, u->key, false))
    rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) rc = url_finish(&url, err);
  altar_cloud_sum_t sum;
  if (!rc) rc = altar__cloud_sum_init(&sum, g->sums, err);
  if (rc) {
    altar_buf_free(&url);
    return rc;
  }
  altar_cloud_req_t r = {.method = "POST", .url = (const char *)url.data, .up_sum = &sum};
  set_body(&r, src, 0, src->size);
  static const char *const hdrs[] = {"Content-Type: application/octet-stream", NULL};
  rc = gcs_call(g, &r, hdrs, err);
  if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
  if (!rc) rc = check_uploaded(g, u, uri, &r, &sum, src->size, err);
  else altar__cloud_sum_free(&sum);
  altar__cloud_req_clear(&r);
  altar_buf_free(&url);
  return rc;
}

/* The last byte the server holds from a 308's "Range: bytes=0-N", or -1. */
static long long committed(const altar_cloud_req_t *r) {
  const char *d = strchr(r->range, '-');
  if (strncmp(r->range, "bytes=0-", 8) || !d) return -1;
  char *end;
  long long n = strtoll(d + 1, &end, 10);
  return end != d + 1 && !*end ? n : -1;
}

/* A resumable session: start it, send chunk after chunk, and cancel it when
 * a chunk fails so no half-uploaded session lingers. */
static int resumable_upload(gcs_t *g, const altar_cloud_uri_t *u, const char *uri, const altar_cloud_source_t *src,
                            altar_error_t *err) {
  altar_buf_t url = {0};
  int rc = ALTAR_OK;
  json_t *m = json_pack("{s:s}", "name", u->key);
  char *ms = m ? json_dumps(m, JSON_COMPACT) : NULL;
  json_decref(m);
  if (!ms || object_url(g, "/upload/storage/v1", u, false, &url) ||
      altar_buf_append_str(&url, "?uploadType=resumable&name=") || altar__cloud_pct(&url, u->key, false))
    rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) rc = url_finish(&url, err);
  char lenhdr[64];
  snprintf(lenhdr, sizeof lenhdr, "X-Upload-Content-Length: %llu", (unsigned long long)src->size);
  const char *const init_hdrs[] = {"Content-Type: application/json; charset=UTF-8",
                                   "X-Upload-Content-Type: application/octet-stream", lenhdr, NULL};
  altar_cloud_req_t r = {0};
  if (!rc) {
    r.method = "POST";
    r.url = (const char *)url.data;
    r.body = ms;
    r.body_len = strlen(ms);
    r.has_body = true;
    rc = gcs_call(g, &r, init_hdrs, err);
    if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, uri, err);
  }
  free(ms);
  char session[sizeof r.location];
  snprintf(session, sizeof session, "%s", r.location);
  /* The session URL carries the upload's authority: it must be on our server. */
  size_t el = strlen(g->endpoint);
  if (!rc && (strncmp(session, g->endpoint, el) || session[el] != '/'))
    rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: the resumable session URL '%.200s' is not on %s", uri,
                         session, g->endpoint);
  altar_cloud_sum_t sum;
  bool sum_live = false;
  if (!rc) sum_live = !(rc = altar__cloud_sum_init(&sum, g->sums, err));
  uint64_t off = 0;
  while (!rc) {
    uint64_t len = src->size - off < g->chunk_size ? src->size - off : g->chunk_size;
    char range[96];
    snprintf(range, sizeof range, "Content-Range: bytes %llu-%llu/%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1), (unsigned long long)src->size);
    const char *const hdrs[] = {range, NULL};
    altar__cloud_req_clear(&r);
    memset(&r, 0, sizeof r);
    r.method = "PUT";
    r.url = session;
    r.up_sum = &sum;
    set_body(&r, src, off, len);
    rc = gcs_call(g, &r, hdrs, err);
    if (rc) break;
    if (r.status == 308) {
      long long last = committed(&r);
      /* The server may keep less than was sent; go on from what it holds. A
       * server that keeps nothing new would loop forever: that is an error. */
      if (last < (long long)off - 1 || (uint64_t)(last + 1) > off + len) {
        rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: the session answered 308 with range '%.60s'", uri,
                             r.range);
        break;
      }
      if ((uint64_t)(last + 1) != off + len) {
        rc = altar_error_set_retriable(err, ALTAR_ESTORAGE,
                                       LABEL ": %.300s: the server kept %lld of the chunk's %llu bytes", uri,
                                       last + 1 - (long long)off, (unsigned long long)len);
        break;
      }
      off += len;
      continue;
    }
    if (r.status < 200 || r.status > 299) {
      rc = fail_status(&r, uri, err);
      break;
    }
    if (off + len != src->size) {
      rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: the session finished at %llu of %llu bytes", uri,
                           (unsigned long long)(off + len), (unsigned long long)src->size);
      break;
    }
    sum_live = false;
    rc = check_uploaded(g, u, uri, &r, &sum, src->size, err);
    break;
  }
  if (sum_live) altar__cloud_sum_free(&sum);
  if (rc && rc != ALTAR_EINTEGRITY && session[0] && !strncmp(session, g->endpoint, el)) {
    /* Cancel the session (the service answers 499); errors here change nothing. */
    altar_cloud_req_t d = {.method = "DELETE", .url = session};
    gcs_call(g, &d, NULL, NULL);
    altar__cloud_req_clear(&d);
  }
  altar__cloud_req_clear(&r);
  altar_buf_free(&url);
  return rc;
}

static int put_source(altar_storage_t *s, const char *uri, const altar_cloud_source_t *src, altar_error_t *err) {
  gcs_t *g = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "gs", true, &u, err);
  if (rc) return rc;
  if (src->size > g->resumable_threshold && src->size > 0) rc = resumable_upload(g, &u, uri, src, err);
  else rc = simple_upload(g, &u, uri, src, err);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- deleting ---------------------------------------------------------------------------- */

/* JSON API objects.delete: 204 when removed, 404 when already gone (success:
 * another cleaner got there first, or a retry after a lost answer). */
static int gcs_delete(altar_storage_t *s, const char *uri, altar_error_t *err) {
  gcs_t *g = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, "gs", true, &u, err);
  if (rc) return rc;
  altar_buf_t url = {0};
  if (object_url(g, "/storage/v1", &u, true, &url)) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
  if (!rc) rc = url_finish(&url, err);
  altar_cloud_req_t r = {.method = "DELETE", .url = (const char *)url.data};
  if (!rc) rc = gcs_call(g, &r, NULL, err);
  if (!rc && (r.status < 200 || r.status > 299) && r.status != 404) rc = fail_status(&r, uri, err);
  altar__cloud_req_clear(&r);
  altar_buf_free(&url);
  altar__cloud_uri_clear(&u);
  return rc;
}

/* ---- listing ---------------------------------------------------------------------------- */

static int gcs_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  gcs_t *g = altar_storage_impl(s);
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(prefix, "gs", false, &u, err);
  if (rc) return rc;
  char *token = NULL;
  altar_buf_t url = {0}, path = {0};
  for (unsigned pages = 0; !rc; pages++) {
    altar_buf_reset(&url);
    char page[32];
    snprintf(page, sizeof page, "?maxResults=%llu", (unsigned long long)g->page_size);
    if (object_url(g, "/storage/v1", &u, false, &url) || altar_buf_append_str(&url, page) ||
        (*u.key && (altar_buf_append_str(&url, "&prefix=") || altar__cloud_pct(&url, u.key, false))) ||
        (token && (altar_buf_append_str(&url, "&pageToken=") || altar__cloud_pct(&url, token, false)))) {
      rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
      break;
    }
    if ((rc = url_finish(&url, err))) break;
    altar_cloud_req_t r = {.method = "GET", .url = (const char *)url.data};
    rc = gcs_call(g, &r, NULL, err);
    if (!rc && (r.status < 200 || r.status > 299)) rc = fail_status(&r, prefix, err);
    json_t *o = rc ? NULL : json_loadb((const char *)r.answer.data, r.answer.len, 0, NULL);
    altar__cloud_req_clear(&r);
    if (!rc && !json_is_object(o))
      rc = altar_error_set(err, ALTAR_EDECODE, LABEL ": %.300s: the listing is not a JSON object", prefix);
    json_t *items = rc ? NULL : json_object_get(o, "items");
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
      const char *name = json_string_value(json_object_get(it, "name"));
      const char *sz = json_string_value(json_object_get(it, "size"));
      if (!name) continue;
      if (altar__cloud_entry_path(&path, "gs", u.bucket, name)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
        break;
      }
      altar_storage_entry_t e = {.path = (const char *)path.data, .size = sz ? strtoull(sz, NULL, 10) : 0};
      if ((rc = fn(&e, ud))) break;
    }
    const char *next = rc ? NULL : json_string_value(json_object_get(o, "nextPageToken"));
    bool more = next && *next;
    free(token);
    token = more ? strdup(next) : NULL;
    json_decref(o); /* next points into o */
    if (!rc && more && !token) rc = altar_error_set(err, ALTAR_ENOMEM, LABEL ": out of memory");
    if (!token) break;
    if (pages > 1000000) {
      rc = altar_error_set(err, ALTAR_ESTORAGE, LABEL ": %.300s: the listing does not end", prefix);
      break;
    }
  }
  free(token);
  altar_buf_free(&url);
  altar_buf_free(&path);
  altar__cloud_uri_clear(&u);
  return rc;
}

const altar_storage_ops_t altar_storage_gcs_ops = {
    .name = "gs",
    .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE | ALTAR_STORAGE_CAP_LIST | ALTAR_STORAGE_CAP_DELETE,
    .config_keys = option_keys,
    .open = gcs_open,
    .close = gcs_close,
    .read_bytes = altar__cloud_read_bytes,
    .exists = gcs_exists,
    .write_bytes = altar__cloud_write_bytes,
    .mkdirs = altar__cloud_mkdirs,
    .upload = altar__cloud_upload,
    .as_local_file = altar__cloud_as_local_file,
    .list = gcs_list,
    .delete_file = gcs_delete,
};

static const altar_cloud_kind_t gcs_kind = {.scheme = "gs", .label = LABEL, .download = download, .put = put_source};
