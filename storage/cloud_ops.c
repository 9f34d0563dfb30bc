/* The storage operations gs:// and s3:// share: everything around an
 * adapter's own download and put (reading into memory, a temp file, an
 * upload from a local file, directories that do not exist), and the bounds
 * both take as options. Each adapter's impl starts with altar_cloud_base_t,
 * whose kind names its scheme, label, download and put. */
#include "cloud_int.h"
#include "core/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const altar_cloud_kind_t *kind_of(altar_storage_t *s) {
  return ((const altar_cloud_base_t *)altar_storage_impl(s))->kind;
}

/* Parses uri only to check it, before anything is created or opened. */
static int uri_check(const char *uri, const char *scheme, bool want_key, altar_error_t *err) {
  altar_cloud_uri_t u;
  int rc = altar__cloud_uri_parse(uri, scheme, want_key, &u, err);
  altar__cloud_uri_clear(&u);
  return rc;
}

int altar__cloud_base_options(const altar_strmap_t *options, altar_cloud_base_t *b, altar_error_t *err) {
  uint64_t timeout = (uint64_t)b->http.timeout_s, connect = (uint64_t)b->http.connect_timeout_s;
  int rc = altar__cloud_option_u64(options, "timeout_s", 1, 86400, &timeout, err);
  if (!rc) rc = altar__cloud_option_u64(options, "connect_timeout_s", 1, 3600, &connect, err);
  if (!rc) rc = altar__cloud_option_u64(options, "max_bytes", 1, (uint64_t)SIZE_MAX / 2, &b->max_bytes, err);
  b->http.timeout_s = (long)timeout;
  b->http.connect_timeout_s = (long)connect;
  return rc;
}

int altar__cloud_read_bytes(altar_storage_t *s, const char *uri, altar_buf_t *out, altar_error_t *err) {
  const altar_cloud_kind_t *k = kind_of(s);
  altar_buf_t body = {0}; /* nothing reaches out unless it all checked out */
  int rc = k->download(s, uri, false, -1, &body, err);
  if (!rc && altar_buf_append(out, body.data ? (const void *)body.data : "", body.len))
    rc = altar_error_set(err, ALTAR_ENOMEM, "%s: %.300s: out of memory", k->label, uri);
  altar_buf_free(&body);
  return rc;
}

int altar__cloud_as_local_file(altar_storage_t *s, const char *uri, altar_local_file_t *out, altar_error_t *err) {
  const altar_cloud_kind_t *k = kind_of(s);
  out->path = NULL;
  out->release = NULL;
  int rc = uri_check(uri, k->scheme, true, err);
  if (rc) return rc;
  int fd = -1;
  rc = altar__storage_mktemp(uri, out, &fd, err);
  if (rc) return rc;
  rc = k->download(s, uri, true, fd, NULL, err);
  if (close(fd) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "%s: close failed: %s", out->path, strerror(errno));
  if (rc) altar_local_file_release(out);
  return rc;
}

int altar__cloud_write_bytes(altar_storage_t *s, const char *uri, const void *data, size_t len, altar_error_t *err) {
  altar_cloud_source_t src = {.mem = data, .size = len};
  return kind_of(s)->put(s, uri, &src, err);
}

int altar__cloud_upload(altar_storage_t *s, const char *local_path, const char *uri, altar_error_t *err) {
  const altar_cloud_kind_t *k = kind_of(s);
  int rc = uri_check(uri, k->scheme, true, err);
  if (rc) return rc;
  int fd = open(local_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%.300s: cannot open: %s", local_path,
                           strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return altar_error_set(err, ALTAR_EINVAL, "%.300s: not a regular file", local_path);
  }
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  altar_cloud_source_t src = {.is_fd = true, .fd = fd, .size = (uint64_t)st.st_size};
  rc = k->put(s, uri, &src, err);
  close(fd);
  return rc;
}

int altar__cloud_mkdirs(altar_storage_t *s, const char *uri, altar_error_t *err) {
  return uri_check(uri, kind_of(s)->scheme, false, err);
}
