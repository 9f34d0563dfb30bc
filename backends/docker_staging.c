/* docker backend: staging. Inputs are copied through the Storage adapter of
 * their uri into <data_root>/<logical_path> (which containers see under
 * /mnt/volume), one at a time, and verified after the copy: the check covers
 * the bytes a container will read. Outputs go back the same way. */
#include "backends/docker_int.h"

#include "altar/digest.h"
#include "altar/paths.h"
#include "altar/storage.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_storage(altar_docker_t *dk, const char *uri, altar_storage_t **ps, altar_error_t *err) {
  if (dk->storage_name) return altar_storage_open(dk->storage_name, NULL, ps, err);
  return altar_storage_open_for_uri(uri, NULL, ps, err);
}

/* mkdir -p of path's parent directory. */
static int make_parent(const char *path, altar_error_t *err) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n >= sizeof buf) return altar_error_set(err, ALTAR_ETOOBIG, "path too long: %.64s...", path);
  memcpy(buf, path, n + 1);
  char *slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = '\0';
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return altar_error_set(err, ALTAR_EIO, "mkdir %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    return altar_error_set(err, ALTAR_EIO, "mkdir %s: %s", buf, strerror(errno));
  return 0;
}

/* Copies the local file src into dest: the bytes land in a temp file beside
 * dest, renamed into place so no task ever reads a half-written input. */
static int copy_in(const char *src, const char *dest, altar_error_t *err) {
  altar_storage_t *dst = NULL;
  char tmp[PATH_MAX];
  int rc;
  if (snprintf(tmp, sizeof tmp, "%s.altar-staging.%ld", dest, (long)getpid()) >= (int)sizeof tmp)
    return altar_error_set(err, ALTAR_ETOOBIG, "%.64s...: path too long", dest);
  if ((rc = make_parent(dest, err)) < 0) return rc;
  if ((rc = altar_storage_open("local", NULL, &dst, err)) < 0) goto out;
  if ((rc = altar_storage_copy_from_local(dst, src, tmp, err)) < 0) goto out;
  if (rename(tmp, dest) != 0) {
    rc = altar_error_set(err, ALTAR_EIO, "rename into %s: %s", dest, strerror(errno));
    goto out;
  }
out:
  if (rc < 0) unlink(tmp);
  altar_storage_close(dst);
  return rc;
}

/* Removes a copy that failed its check, and any record beside it, so no later
 * task can read it. */
static void remove_copy(const char *dest) {
  unlink(dest);
  char *rec = altar_verification_record_path(dest);
  if (rec) unlink(rec);
  free(rec);
}

/* Whether a and b name one file (symlinks followed). */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int stage_one(altar_docker_t *dk, const altar_transfer_t *t, size_t i, const char *dest, altar_error_t *err) {
  const char *lp = t->logical_path ? t->logical_path : "";
  altar_storage_t *src = NULL;
  altar_local_file_t lf = {0};
  int rc = open_storage(dk, t->uri, &src, err);
  if (!rc) rc = altar_storage_as_local_file(src, t->uri, &lf, err);
  /* A digest covers one file: a directory, as the source or where the copy
   * would go, fails as a mismatch does, and is left as it is. */
  if (!rc && t->digest &&
      ((rc = altar_digest_refuse_directory(lf.path, err)) < 0 || (rc = altar_digest_refuse_directory(dest, err)) < 0)) {
    altar_error_prefix(err, "inputs[%zu] (%.200s)", i, lp);
    goto out;
  }
  /* Storage and the data root may be one directory: a source that already
   * is the destination is the caller's file, not a copy of ours, so it is
   * neither copied over, deleted, nor given a record beside it. */
  bool same = !rc && same_file(lf.path, dest);
  if (!rc && !same) rc = copy_in(lf.path, dest, err);
  if (rc < 0) {
    altar_error_prefix(err, "inputs[%zu] (%.200s): staging %.200s", i, lp, t->uri);
    goto out;
  }
  if (t->digest) {
    rc = altar_verify_transfer_digest(t, dest, !same, err);
    if (rc < 0 && !same) remove_copy(dest);
    if (rc == ALTAR_EINTEGRITY)
      altar_error_prefix(err,
                         same ? "inputs[%zu] (%.200s): the source itself (left as it is)"
                              : "inputs[%zu] (%.200s): staged copy deleted",
                         i, lp);
    else if (rc < 0) altar_error_prefix(err, "inputs[%zu] (%.200s)", i, lp);
  }
out:
  altar_local_file_release(&lf);
  altar_storage_close(src);
  return rc;
}

int altar__docker_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n, altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &inputs[i];
    const char *lp = t->logical_path ? t->logical_path : "";
    char *dest = NULL;
    char field[40];
    snprintf(field, sizeof field, "inputs[%zu].digest", i);
    int rc;
    if (!t->uri || !t->uri[0]) return altar_error_set(err, ALTAR_EINVAL, "inputs[%zu] (%.200s): uri is empty", i, lp);
    if (t->digest && (rc = altar_digest_check(field, t->digest, err)) < 0) return rc;
    if ((rc = altar_path_resolve(dk->data_root, lp, &dest, err)) < 0)
      return altar_error_prefix(err, "inputs[%zu].logical_path", i);

    /* Already staged, unchanged since its bytes were checked: no copy, no hash. */
    if (t->digest && dk->trust_records && altar_has_verification_record(dest, t->digest)) {
      free(dest);
      continue;
    }
    rc = stage_one(dk, t, i, dest, err);
    free(dest);
    if (rc < 0) return rc;
  }
  return 0;
}

int altar__docker_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n, altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &outputs[i];
    const char *lp = t->logical_path ? t->logical_path : "";
    char *src = NULL;
    int rc;
    if (!t->uri || !t->uri[0]) return altar_error_set(err, ALTAR_EINVAL, "outputs[%zu] (%.200s): uri is empty", i, lp);
    if ((rc = altar_path_resolve(dk->data_root, lp, &src, err)) < 0)
      return altar_error_prefix(err, "outputs[%zu].logical_path", i);
    struct stat st;
    if (stat(src, &st) != 0 || !S_ISREG(st.st_mode)) {
      rc = altar_error_set(err, ALTAR_ENOTFOUND, "outputs[%zu] (%.200s): the task left no regular file at %.200s", i,
                           lp, src);
      free(src);
      return rc;
    }
    altar_storage_t *dst = NULL;
    rc = open_storage(dk, t->uri, &dst, err);
    if (rc == 0) rc = altar_storage_copy_from_local(dst, src, t->uri, err);
    altar_storage_close(dst);
    free(src);
    if (rc < 0) return altar_error_prefix(err, "outputs[%zu] (%.200s) to %.200s", i, lp, t->uri);
  }
  return 0;
}
