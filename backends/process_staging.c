/* `process` staging: inputs copied from their uri (through the Storage
 * adapter for the uri, or the one named by backend.storage) to
 * <data_root>/<logical>, verified after the copy; outputs copied back.
 * Verification happens here ("staging"): a copy whose bytes do not match is
 * deleted before the error returns, so no task can read it; a good copy gets
 * a verification record, and an input whose destination already holds a
 * recorded copy of the same digest is neither copied nor hashed again. */
#include "process_int.h"

#include "altar/digest.h"
#include "altar/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_storage(const altar_process_t *p, const char *uri, altar_storage_t **ps, altar_error_t *err) {
  if (!strcmp(p->storage, "auto")) return altar_storage_open_for_uri(uri, NULL, ps, err);
  return altar_storage_open(p->storage, NULL, ps, err);
}

static int mkdir_parents(const char *path) {
  char tmp[ALTAR_PATH_BUF];
  int n = snprintf(tmp, sizeof tmp, "%s", path);
  if (n < 0 || (size_t)n >= sizeof tmp) return -1;
  char *slash = strrchr(tmp, '/');
  if (!slash || slash == tmp) return 0;
  *slash = '\0';
  for (char *c = tmp + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
    *c = '/';
  }
  return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Copies src to dst through dst.altar-tmp + rename, so a reader never sees a
 * half-written input. */
static int copy_file(const char *src, const char *dst, altar_error_t *err, const char *what) {
  char tmp[ALTAR_PATH_BUF + 16];
  snprintf(tmp, sizeof tmp, "%s.altar-tmp", dst);
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_ESTORAGE, "%s: cannot read '%s': %s", what,
                           src, strerror(errno));
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    int e = errno;
    close(in);
    return altar_error_set(err, ALTAR_ESTORAGE, "%s: cannot write '%s': %s", what, tmp, strerror(e));
  }
  char buf[1 << 16];
  int rc = 0;
  for (;;) {
    ssize_t r = read(in, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: read '%s': %s", what, src, strerror(errno));
      break;
    }
    if (r == 0) break;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = write(out, buf + off, (size_t)(r - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: write '%s': %s", what, tmp, strerror(errno));
        break;
      }
      off += w;
    }
    if (rc) break;
  }
  close(in);
  if (close(out) < 0 && !rc)
    rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: write '%s': %s", what, tmp, strerror(errno));
  if (!rc && rename(tmp, dst) < 0)
    rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: rename to '%s': %s", what, dst, strerror(errno));
  if (rc) unlink(tmp);
  return rc;
}

static void remove_bad_copy(const char *path) {
  unlink(path);
  char *rec = altar_verification_record_path(path);
  if (rec) unlink(rec);
  free(rec);
}

static int stage_one(altar_backend_t *be, const altar_transfer_t *t, size_t i, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  char what[160];
  snprintf(what, sizeof what, "inputs[%zu] (%.120s)", i, t->logical_path ? t->logical_path : "");
  if (!t->uri || !t->logical_path)
    return altar_error_set(err, ALTAR_EINVAL, "%s: uri and logical_path are required", what);
  char *dst = NULL;
  int rc = altar_backend_resolve_path(be, t->logical_path, &dst, err);
  if (rc < 0) return altar_error_prefix(err, "%s", what), rc;
  /* Already here and recorded under the same digest: trust it. */
  if (t->digest && altar_digest_is_valid(t->digest) && altar_has_verification_record(dst, t->digest)) {
    free(dst);
    return 0;
  }
  altar_storage_t *s = NULL;
  altar_local_file_t lf = {0};
  rc = open_storage(p, t->uri, &s, err);
  if (rc < 0) {
    altar_error_prefix(err, "%s", what);
    goto out;
  }
  rc = altar_storage_as_local_file(s, t->uri, &lf, err);
  if (rc < 0) {
    altar_error_prefix(err, "%s", what);
    goto out;
  }
  if (mkdir_parents(dst) < 0) {
    rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: cannot create the parent of '%s': %s", what, dst, strerror(errno));
    goto out;
  }
  /* A digest covers one file: a directory, as the source or where the copy
   * would go, fails as a mismatch does, and is left as it is. */
  if (t->digest &&
      ((rc = altar_digest_refuse_directory(lf.path, err)) < 0 || (rc = altar_digest_refuse_directory(dst, err)) < 0)) {
    altar_error_prefix(err, "%s", what);
    goto out;
  }
  struct stat a, b;
  bool same = stat(lf.path, &a) == 0 && stat(dst, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  if (!same) {
    rc = copy_file(lf.path, dst, err, what);
    if (rc < 0) goto out;
  }
  /* Verify the bytes the task will read, after the copy. A source that is
   * the destination itself is not ours to delete or record. */
  rc = altar_verify_transfer_digest(t, dst, !same, err);
  if (rc < 0) {
    if (rc == ALTAR_EINTEGRITY && !same) remove_bad_copy(dst);
    altar_error_prefix(err, "%s", what);
  }
out:
  altar_local_file_release(&lf);
  altar_storage_close(s);
  free(dst);
  return rc;
}

int altar__proc_stage_inputs(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    int rc = stage_one(be, &ts[i], i, err);
    if (rc < 0) return rc;
  }
  return 0;
}

int altar__proc_collect_outputs(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &ts[i];
    char what[160];
    snprintf(what, sizeof what, "outputs[%zu] (%.120s)", i, t->logical_path ? t->logical_path : "");
    if (!t->uri || !t->logical_path)
      return altar_error_set(err, ALTAR_EINVAL, "%s: uri and logical_path are required", what);
    char *src = NULL;
    int rc = altar_backend_resolve_path(be, t->logical_path, &src, err);
    if (rc < 0) return altar_error_prefix(err, "%s", what), rc;
    struct stat st;
    if (stat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
      rc = altar_error_set(err, ALTAR_ENOTFOUND, "%s: the task did not write a file at '%s'", what, src);
      free(src);
      return rc;
    }
    altar_storage_t *s = NULL;
    rc = open_storage(p, t->uri, &s, err);
    if (rc == 0) rc = altar_storage_copy_from_local(s, src, t->uri, err);
    if (rc < 0) altar_error_prefix(err, "%s", what);
    altar_storage_close(s);
    free(src);
    if (rc < 0) return rc;
  }
  return 0;
}
