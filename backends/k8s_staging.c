/* Staging for the kubernetes backend, when this host sees the shared volume
 * at staging_root: inputs copied in through Storage, outputs copied back.
 * Verification stays with the pod ("task"); staging only records a match so
 * the pod's verifier can accept the file without hashing it again. */
#include "k8s_int.h"

#include "altar/digest.h"
#include "altar/paths.h"
#include "altar/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p of path's parent directory. */
static int mkparents(const char *path, altar_error_t *err) {
  char *dir = strdup(path);
  if (!dir) return altar_error_set(err, ALTAR_ENOMEM, "staging: out of memory");
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0775) != 0 && errno != EEXIST) {
      int rc = altar_error_set(err, ALTAR_EIO, "staging: mkdir %s: %s", dir, strerror(errno));
      free(dir);
      return rc;
    }
    *p = '/';
  }
  free(dir);
  return ALTAR_OK;
}

/* Through a temp file and a rename, so a reader never sees half a file. */
int altar__k8s_copy_file(const char *src, const char *dst, altar_error_t *err) {
  size_t tlen = strlen(dst) + 16;
  char *tmp = malloc(tlen);
  if (!tmp) return altar_error_set(err, ALTAR_ENOMEM, "staging: out of memory");
  snprintf(tmp, tlen, "%s.altar-tmp", dst);
  int in = open(src, O_RDONLY | O_CLOEXEC);
  int out = in >= 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664) : -1;
  int rc = ALTAR_OK;
  if (in < 0 || out < 0) {
    rc = altar_error_set(err, ALTAR_EIO, "staging: open %s: %s", in < 0 ? src : tmp, strerror(errno));
  } else {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = read(in, buf, sizeof buf);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        rc = altar_error_set(err, ALTAR_EIO, "staging: read %s: %s", src, strerror(errno));
        break;
      }
      for (ssize_t off = 0; off < n && !rc;) {
        ssize_t w = write(out, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) rc = altar_error_set(err, ALTAR_EIO, "staging: write %s: %s", tmp, strerror(errno));
        else off += w;
      }
      if (rc) break;
    }
  }
  if (out >= 0 && close(out) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "staging: close %s", tmp);
  if (in >= 0) close(in);
  if (!rc && rename(tmp, dst) != 0)
    rc = altar_error_set(err, ALTAR_EIO, "staging: rename to %s: %s", dst, strerror(errno));
  if (rc) unlink(tmp);
  free(tmp);
  return rc;
}

/* Whether a and b name one file (symlinks followed). */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int altar__k8s_stage_inputs(altar_k8s_t *k, const altar_transfer_t *inputs, size_t n, altar_error_t *err) {
  if (!k->staging_root) return ALTAR_OK;
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &inputs[i];
    char *dst = NULL;
    int rc = altar_path_resolve(k->staging_root, t->logical_path, &dst, err);
    if (rc) return altar_error_prefix(err, "inputs[%zu]", i), rc;
    /* Already staged and recorded with this digest: nothing to copy. */
    if (t->digest && altar_has_verification_record(dst, t->digest)) {
      free(dst);
      continue;
    }
    altar_storage_t *s = NULL;
    altar_local_file_t lf = {0};
    rc = mkparents(dst, err);
    if (!rc) rc = altar_storage_open_for_uri(t->uri, NULL, &s, err);
    if (!rc) rc = altar_storage_as_local_file(s, t->uri, &lf, err);
    /* A digest covers one file: a directory, as the source or where the
     * copy would go, fails as a mismatch does (input_digest_mismatch, as
     * the pod's verifier reports one), and is left as it is. */
    if (!rc && t->digest && !(rc = altar_digest_refuse_directory(lf.path, err)))
      rc = altar_digest_refuse_directory(dst, err);
    /* Storage and the staging root may be one directory: a source that
     * already is the destination is the caller's file, left as it is, with
     * no record written beside it. */
    bool same = !rc && same_file(lf.path, dst);
    if (!rc && !same) rc = altar__k8s_copy_file(lf.path, dst, err);
    altar_local_file_release(&lf);
    altar_storage_close(s);
    if (!rc && !same && t->digest) {
      /* Hash once here; a mismatch is left for the pod to report as
       * input_digest_mismatch, where this backend declares it is caught. */
      altar_error_t verr = {0};
      (void)altar_verify_file_digest(dst, t->digest, false, true, NULL, &verr);
    }
    free(dst);
    if (rc) return altar_error_prefix(err, "inputs[%zu] (%s)", i, t->logical_path), rc;
  }
  return ALTAR_OK;
}

int altar__k8s_collect_outputs(altar_k8s_t *k, const altar_transfer_t *outputs, size_t n, altar_error_t *err) {
  if (!k->staging_root) return ALTAR_OK;
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &outputs[i];
    char *src = NULL;
    altar_storage_t *s = NULL;
    int rc = altar_path_resolve(k->staging_root, t->logical_path, &src, err);
    if (!rc) rc = altar_storage_open_for_uri(t->uri, NULL, &s, err);
    if (!rc) rc = altar_storage_copy_from_local(s, src, t->uri, err);
    altar_storage_close(s);
    free(src);
    if (rc) return altar_error_prefix(err, "outputs[%zu] (%s)", i, t->logical_path), rc;
  }
  return ALTAR_OK;
}
