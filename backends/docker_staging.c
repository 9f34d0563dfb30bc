/* docker backend: staging. Inputs are copied through the Storage adapter of
 * their uri into <data_root>/<logical_path> (which containers see under
 * /mnt/volume), one at a time, and verified after the copy: the check covers
 * the bytes a container will read. Outputs go back the same way. */
#include "backends/docker_int.h"

#include "altar/digest.h"
#include "altar/paths.h"
#include "altar/storage.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_storage(altar_docker_t *dk, const char *uri, altar_storage_t **ps,
                        altar_error_t *err) {
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

/* Copies uri into dest: the bytes land in a temp file beside dest, renamed
 * into place so no task ever reads a half-written input. */
static int copy_in(altar_docker_t *dk, const char *uri, const char *dest, altar_error_t *err) {
  altar_storage_t *src = NULL, *dst = NULL;
  altar_local_file_t lf = {0};
  char tmp[PATH_MAX];
  int rc;
  if (snprintf(tmp, sizeof tmp, "%s.altar-staging.%ld", dest, (long)getpid()) >= (int)sizeof tmp)
    return altar_error_set(err, ALTAR_ETOOBIG, "%.64s...: path too long", dest);
  if ((rc = make_parent(dest, err)) < 0) return rc;
  if ((rc = open_storage(dk, uri, &src, err)) < 0) goto out;
  if ((rc = altar_storage_as_local_file(src, uri, &lf, err)) < 0) goto out;
  if ((rc = altar_storage_open("local", NULL, &dst, err)) < 0) goto out;
  if ((rc = altar_storage_copy_from_local(dst, lf.path, tmp, err)) < 0) goto out;
  if (rename(tmp, dest) != 0) {
    rc = altar_error_set(err, ALTAR_EIO, "rename into %s: %s", dest, strerror(errno));
    goto out;
  }
out:
  if (rc < 0) unlink(tmp);
  altar_local_file_release(&lf);
  altar_storage_close(src);
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

int altar__docker_stage_inputs(altar_backend_t *be, const altar_transfer_t *inputs, size_t n,
                               altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &inputs[i];
    const char *lp = t->logical_path ? t->logical_path : "";
    char *dest = NULL;
    char field[40];
    snprintf(field, sizeof field, "inputs[%zu].digest", i);
    int rc;
    if (!t->uri || !t->uri[0])
      return altar_error_set(err, ALTAR_EINVAL, "inputs[%zu] (%.200s): uri is empty", i, lp);
    if (t->digest && (rc = altar_digest_check(field, t->digest, err)) < 0) return rc;
    if ((rc = altar_path_resolve(dk->data_root, lp, &dest, err)) < 0)
      return altar_error_prefix(err, "inputs[%zu].logical_path", i);

    /* Already staged, unchanged since its bytes were checked: no copy, no hash. */
    if (t->digest && dk->trust_records && altar_has_verification_record(dest, t->digest)) {
      free(dest);
      continue;
    }
    if ((rc = copy_in(dk, t->uri, dest, err)) < 0) {
      free(dest);
      return altar_error_prefix(err, "inputs[%zu] (%.200s): staging %.200s", i, lp, t->uri);
    }
    if (t->digest) {
      rc = altar_verify_transfer_digest(t, dest, true, err);
      if (rc < 0) {
        remove_copy(dest);
        free(dest);
        if (rc == ALTAR_EINTEGRITY)
          return altar_error_prefix(err, "inputs[%zu] (%.200s): staged copy deleted", i, lp);
        return altar_error_prefix(err, "inputs[%zu] (%.200s)", i, lp);
      }
    }
    free(dest);
  }
  return 0;
}

int altar__docker_collect_outputs(altar_backend_t *be, const altar_transfer_t *outputs, size_t n,
                                  altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &outputs[i];
    const char *lp = t->logical_path ? t->logical_path : "";
    char *src = NULL;
    int rc;
    if (!t->uri || !t->uri[0])
      return altar_error_set(err, ALTAR_EINVAL, "outputs[%zu] (%.200s): uri is empty", i, lp);
    if ((rc = altar_path_resolve(dk->data_root, lp, &src, err)) < 0)
      return altar_error_prefix(err, "outputs[%zu].logical_path", i);
    struct stat st;
    if (stat(src, &st) != 0 || !S_ISREG(st.st_mode)) {
      rc = altar_error_set(err, ALTAR_ENOTFOUND,
                           "outputs[%zu] (%.200s): the task left no regular file at %.200s", i, lp,
                           src);
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
