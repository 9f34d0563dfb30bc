/* Storage: lifecycle, the one place optional operations get their defaults
 * (filled once into the handle at open), the operations every caller goes
 * through, and the text reader/writer. */
#include "altar/plugin/storage.h"
#include "altar/registry.h"
#include "core/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bound for defaults that must hold a local file in memory. */
#define DEFAULT_MAX_LOCAL_READ (1024u * 1024u * 1024u)

static int not_supported(const altar_storage_t *s, const char *op, const char *path, altar_error_t *err) {
  return altar_error_set(err, ALTAR_ENOTSUP, "storage '%s': %s is not supported (%.200s)", s->ops.name, op,
                         path ? path : "");
}

/* ---- defaults ---------------------------------------------------------------- */

static int def_read_text(altar_storage_t *s, const char *path, char **ptext, size_t *plen, altar_error_t *err) {
  altar_buf_t b = {0};
  *ptext = NULL;
  int rc = altar_storage_read_bytes(s, path, &b, err);
  if (rc) {
    altar_buf_free(&b);
    return rc;
  }
  if (b.len && memchr(b.data, '\0', b.len)) {
    altar_buf_free(&b);
    return altar_error_set(err, ALTAR_EDECODE, "%.300s: not text (contains a NUL byte)", path);
  }
  size_t len = b.len;
  char *text = altar_buf_detach(&b);
  if (!text) return altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
  *ptext = text;
  if (plen) *plen = len;
  return ALTAR_OK;
}

static int def_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err) {
  (void)data;
  (void)len;
  return not_supported(s, "write_bytes", path, err);
}

static int def_write_text(altar_storage_t *s, const char *path, const char *text, altar_error_t *err) {
  return altar_storage_write_bytes(s, path, text, strlen(text), err);
}

static int def_mkdirs(altar_storage_t *s, const char *path, altar_error_t *err) {
  return not_supported(s, "mkdirs", path, err);
}

/* Reads a whole local file, bounded. */
static int read_local(const char *path, altar_buf_t *out, altar_error_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%.300s: cannot open: %s", path,
                           strerror(errno));
  char chunk[65536];
  int rc = ALTAR_OK;
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = altar_error_set(err, ALTAR_EIO, "%.300s: read failed: %s", path, strerror(errno));
      break;
    }
    if (n == 0) break;
    if (out->len + (size_t)n > DEFAULT_MAX_LOCAL_READ) {
      rc = altar_error_set(err, ALTAR_ETOOBIG, "%.300s: larger than %u bytes", path, DEFAULT_MAX_LOCAL_READ);
      break;
    }
    if (altar_buf_append(out, chunk, (size_t)n)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
      break;
    }
  }
  close(fd);
  return rc;
}

/* Without a streaming upload, an adapter that can write takes the file in
 * one piece; one that cannot write says so (chosen at open: def_upload_none). */
static int def_upload(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err) {
  altar_buf_t b = {0};
  int rc = read_local(local_path, &b, err);
  if (!rc) rc = s->ops.write_bytes(s, dest_path, b.data ? (const void *)b.data : "", b.len, err);
  altar_buf_free(&b);
  return rc;
}

static int def_upload_none(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err) {
  (void)local_path;
  return not_supported(s, "upload", dest_path, err);
}

static int def_copy_from_local(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err) {
  return altar_storage_upload(s, local_path, dest_path, err);
}

static void release_temp(altar_local_file_t *lf) {
  if (lf->path) unlink(lf->path);
  free(lf->path);
  lf->path = NULL;
}

void altar_local_file_release(altar_local_file_t *lf) {
  if (!lf) return;
  if (lf->release) lf->release(lf);
  else free(lf->path);
  lf->path = NULL;
  lf->release = NULL;
}

/* For adapters (core/storage_int.h): a temp file under $TMPDIR that
 * keeps the stored name's extension, so tools that look at it still can. */
int altar__storage_mktemp(const char *path, altar_local_file_t *out, int *pfd, altar_error_t *err) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  const char *name = path ? strrchr(path, '/') : NULL;
  name = name ? name + 1 : (path ? path : "");
  const char *dot = strrchr(name, '.');
  const char *ext = "";
  if (dot && strlen(dot) <= 16 && !strpbrk(dot, "?#&%")) ext = dot;
  size_t n = strlen(base) + strlen(ext) + 32;
  char *tmpl = malloc(n);
  if (!tmpl) return altar_error_set(err, ALTAR_ENOMEM, "temp file: out of memory");
  snprintf(tmpl, n, "%s/altar-local-XXXXXX%s", base, ext);
  int fd = mkstemps(tmpl, (int)strlen(ext));
  if (fd < 0) {
    int e = errno;
    free(tmpl);
    return altar_error_set(err, ALTAR_EIO, "temp file under %s: %s", base, strerror(e));
  }
  out->path = tmpl;
  out->release = release_temp;
  *pfd = fd;
  return ALTAR_OK;
}

static int def_as_local_file(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err) {
  out->path = NULL;
  out->release = NULL;
  altar_buf_t b = {0};
  int rc = altar_storage_read_bytes(s, path, &b, err);
  if (rc) {
    altar_buf_free(&b);
    return rc;
  }
  int fd = -1;
  rc = altar__storage_mktemp(path, out, &fd, err);
  if (!rc) {
    size_t off = 0;
    while (off < b.len) {
      ssize_t w = write(fd, b.data + off, b.len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = altar_error_set(err, ALTAR_EIO, "%s: write failed: %s", out->path, strerror(errno));
        break;
      }
      off += (size_t)w;
    }
    if (close(fd) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "%s: close failed", out->path);
    if (rc) altar_local_file_release(out);
  }
  altar_buf_free(&b);
  return rc;
}

static int def_read_csv(altar_storage_t *s, const char *path, char delim, const char *const *fieldnames,
                        size_t n_fieldnames, altar_csv_t *out, altar_error_t *err) {
  char *text = NULL;
  size_t len = 0;
  int rc = altar_storage_read_text(s, path, &text, &len, err);
  if (!rc) {
    rc = altar_csv_parse(text, len, delim, fieldnames, n_fieldnames, out, err);
    if (rc) altar_error_prefix(err, "%.300s", path);
  }
  free(text);
  return rc;
}

static int def_write_csv(altar_storage_t *s, const char *path, const altar_strmap_t *rows, size_t n_rows, char delim,
                         const char *const *fieldnames, size_t n_fieldnames, altar_error_t *err) {
  altar_buf_t b = {0};
  int rc = altar_csv_format(rows, n_rows, delim, fieldnames, n_fieldnames, &b, err);
  if (!rc) {
    char *text = altar_buf_detach(&b);
    if (!text) return altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
    rc = altar_storage_write_text(s, path, text, err);
    free(text);
  }
  altar_buf_free(&b);
  return rc;
}

static int def_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  (void)fn;
  (void)ud;
  return not_supported(s, "list", prefix, err);
}

static int def_delete(altar_storage_t *s, const char *path, altar_error_t *err) {
  return not_supported(s, "delete", path, err);
}

/* ---- lifecycle ---------------------------------------------------------------- */

/* An adapter without open keeps no state and reads no key: any key is a typo. */
static int def_open(altar_storage_t *s, const altar_strmap_t *cfg, altar_error_t *err) {
  static const altar_plugin_key_t none[] = {ALTAR_PLUGIN_KEYS_END};
  return altar_plugin_keys_check(none, "storage", s->ops.name, cfg, err);
}

static void def_close(altar_storage_t *s) { (void)s; }

/* The first required operation ops lacks, or NULL. */
static const char *ops_missing(const altar_storage_ops_t *ops) {
  return !ops->name ? "name" : !ops->read_bytes ? "read_bytes" : !ops->exists ? "exists" : NULL;
}

/* The one place optional operations get their defaults. */
static void fill_defaults(altar_storage_ops_t *o) {
  if (!o->open) o->open = def_open;
  if (!o->close) o->close = def_close;
  if (!o->read_text) o->read_text = def_read_text;
  if (!o->upload) o->upload = o->write_bytes ? def_upload : def_upload_none;
  if (!o->write_bytes) o->write_bytes = def_write_bytes;
  if (!o->write_text) o->write_text = def_write_text;
  if (!o->mkdirs) o->mkdirs = def_mkdirs;
  if (!o->copy_from_local) o->copy_from_local = def_copy_from_local;
  if (!o->as_local_file) o->as_local_file = def_as_local_file;
  if (!o->read_csv) o->read_csv = def_read_csv;
  if (!o->write_csv) o->write_csv = def_write_csv;
  if (!o->list) o->list = def_list;
  if (!o->delete_file) o->delete_file = def_delete;
}

int altar_storage_open(const char *name, const altar_strmap_t *options, altar_storage_t **ps, altar_error_t *err) {
  *ps = NULL;
  const void *p;
  int rc = altar_registry_get(ALTAR_REGISTRY_STORAGE, name, &p, err);
  if (rc) return rc;
  const altar_storage_ops_t *ops = p;
  const char *missing = ops_missing(ops);
  if (missing)
    return altar_error_set(err, ALTAR_EINVAL, "storage '%s' lacks the required operation '%s'", name, missing);
  altar_storage_t *s = calloc(1, sizeof *s);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "storage '%s': out of memory", name);
  s->table = ops;
  s->ops = *ops;
  fill_defaults(&s->ops);
  if ((rc = altar_plugin_keys_check(ops->config_keys, "storage", name, options, err))) {
    free(s);
    return rc;
  }
  if ((rc = s->ops.open(s, options, err))) {
    free(s);
    return altar_error_prefix(err, "storage '%s'", name);
  }
  *ps = s;
  return ALTAR_OK;
}

int altar_storage_open_for_uri(const char *uri, const altar_strmap_t *options, altar_storage_t **ps,
                               altar_error_t *err) {
  *ps = NULL;
  if (!uri || !*uri) return altar_error_set(err, ALTAR_EINVAL, "uri: must not be empty");
  const char *colon = strstr(uri, "://");
  char scheme[32] = "file";
  if (colon) {
    size_t n = (size_t)(colon - uri);
    if (n == 0 || n >= sizeof scheme) return altar_error_set(err, ALTAR_EINVAL, "uri '%.200s': bad scheme", uri);
    for (size_t i = 0; i < n; i++) {
      char c = uri[i];
      if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))
        return altar_error_set(err, ALTAR_EINVAL, "uri '%.200s': bad scheme", uri);
      scheme[i] = c;
    }
    scheme[n] = '\0';
  }
  return altar_storage_open(scheme, options, ps, err);
}

void altar_storage_close(altar_storage_t *s) {
  if (!s) return;
  s->ops.close(s);
  free(s);
}

/* ---- operations ------------------------------------------------------------------- */

const char *altar_storage_name(const altar_storage_t *s) { return s->ops.name; }

unsigned altar_storage_caps(const altar_storage_t *s) { return s->ops.caps; }

int altar_storage_read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err) {
  return s->ops.read_bytes(s, path, out, err);
}

int altar_storage_exists(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err) {
  return s->ops.exists(s, path, pexists, err);
}

int altar_storage_read_text(altar_storage_t *s, const char *path, char **ptext, size_t *plen, altar_error_t *err) {
  return s->ops.read_text(s, path, ptext, plen, err);
}

int altar_storage_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err) {
  return s->ops.write_bytes(s, path, data, len, err);
}

int altar_storage_write_text(altar_storage_t *s, const char *path, const char *text, altar_error_t *err) {
  return s->ops.write_text(s, path, text, err);
}

int altar_storage_mkdirs(altar_storage_t *s, const char *path, altar_error_t *err) {
  return s->ops.mkdirs(s, path, err);
}

int altar_storage_upload(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err) {
  return s->ops.upload(s, local_path, dest_path, err);
}

int altar_storage_copy_from_local(altar_storage_t *s, const char *local_path, const char *dest_path,
                                  altar_error_t *err) {
  return s->ops.copy_from_local(s, local_path, dest_path, err);
}

int altar_storage_as_local_file(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err) {
  return s->ops.as_local_file(s, path, out, err);
}

int altar_storage_read_csv(altar_storage_t *s, const char *path, char delim, const char *const *fieldnames,
                           size_t n_fieldnames, altar_csv_t *out, altar_error_t *err) {
  return s->ops.read_csv(s, path, delim, fieldnames, n_fieldnames, out, err);
}

int altar_storage_write_csv(altar_storage_t *s, const char *path, const altar_strmap_t *rows, size_t n_rows, char delim,
                            const char *const *fieldnames, size_t n_fieldnames, altar_error_t *err) {
  return s->ops.write_csv(s, path, rows, n_rows, delim, fieldnames, n_fieldnames, err);
}

int altar_storage_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  return s->ops.list(s, prefix, fn, ud, err);
}

int altar_storage_delete(altar_storage_t *s, const char *path, altar_error_t *err) {
  return s->ops.delete_file(s, path, err);
}

/* ---- text reader ------------------------------------------------------------------ */

struct altar_text_reader {
  char *text;
  size_t len;
  size_t pos;
};

int altar_storage_open_text(altar_storage_t *s, const char *path, altar_text_reader_t **pr, altar_error_t *err) {
  *pr = NULL;
  altar_text_reader_t *r = calloc(1, sizeof *r);
  if (!r) return altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
  int rc = altar_storage_read_text(s, path, &r->text, &r->len, err);
  if (rc) {
    free(r);
    return rc;
  }
  *pr = r;
  return ALTAR_OK;
}

int altar_text_reader_next_line(altar_text_reader_t *r, const char **pline, size_t *plen) {
  if (r->pos >= r->len) return 0;
  const char *start = r->text + r->pos;
  const char *nl = memchr(start, '\n', r->len - r->pos);
  size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
  r->pos += n + (nl ? 1 : 0);
  if (n && start[n - 1] == '\r') n--;
  *pline = start;
  *plen = n;
  return 1;
}

const char *altar_text_reader_text(const altar_text_reader_t *r, size_t *plen) {
  if (plen) *plen = r->len;
  return r->text;
}

void altar_text_reader_close(altar_text_reader_t *r) {
  if (!r) return;
  free(r->text);
  free(r);
}

/* ---- text writer ------------------------------------------------------------------ */

struct altar_text_writer {
  altar_storage_t *s;
  char *path;
  altar_buf_t buf;
  bool failed; /* an append ran out of memory: close must not write a truncated file */
};

altar_text_writer_t *altar_storage_open_text_writer(altar_storage_t *s, const char *path, altar_error_t *err) {
  altar_text_writer_t *w = calloc(1, sizeof *w);
  if (w) w->path = strdup(path);
  if (!w || !w->path) {
    free(w);
    altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
    return NULL;
  }
  w->s = s;
  return w;
}

int altar_text_writer_write(altar_text_writer_t *w, const char *text, size_t len) {
  if (altar_buf_append(&w->buf, text, len)) {
    w->failed = true;
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

int altar_text_writer_printf(altar_text_writer_t *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || altar_buf_reserve(&w->buf, (size_t)n + 1)) {
    w->failed = true;
    return ALTAR_ENOMEM;
  }
  va_start(ap, fmt);
  vsnprintf((char *)w->buf.data + w->buf.len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  w->buf.len += (size_t)n;
  return ALTAR_OK;
}

int altar_text_writer_close(altar_text_writer_t *w, altar_error_t *err) {
  if (!w) return ALTAR_OK;
  int rc;
  if (w->failed) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: a write ran out of memory; nothing written", w->path);
  } else if (w->buf.len && memchr(w->buf.data, '\0', w->buf.len)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "%.300s: text holds a NUL byte; nothing written", w->path);
  } else {
    if (altar_buf_append(&w->buf, "", 1)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", w->path);
    } else {
      rc = altar_storage_write_text(w->s, w->path, (const char *)w->buf.data, err);
    }
  }
  altar_text_writer_abort(w);
  return rc;
}

void altar_text_writer_abort(altar_text_writer_t *w) {
  if (!w) return;
  altar_buf_free(&w->buf);
  free(w->path);
  free(w);
}
