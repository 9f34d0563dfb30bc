/* modal staging: inputs pulled through Storage to a host file and uploaded
 * into the Volume at their logical path; outputs downloaded to a host temp
 * file and handed to Storage. One transfer at a time. */
#include "modal_int.h"

#include "altar/digest.h"
#include "altar/paths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The path inside the Volume: the logical path, normalized, never escaping. */
static int remote_path(const altar_transfer_t *t, const char *what, size_t i, char **pout, altar_error_t *err) {
  int rc = altar_path_resolve(".", t->logical_path, pout, err);
  if (rc) altar_error_prefix(err, "%s[%zu].logical_path", what, i);
  return rc;
}

static int open_storage(altar_modal_t *m, const char *uri, altar_storage_t **ps, altar_error_t *err) {
  if (m->storage) {
    *ps = m->storage;
    return ALTAR_OK;
  }
  return altar_storage_open_for_uri(uri, NULL, ps, err);
}

static void close_storage(altar_modal_t *m, altar_storage_t *s) {
  if (s != m->storage) altar_storage_close(s);
}

int altar_modal_stage_inputs(altar_modal_t *m, const altar_transfer_t *inputs, size_t n, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &inputs[i];
    char *remote = NULL;
    altar_storage_t *s = NULL;
    altar_local_file_t lf = {0};
    int rc = remote_path(t, "inputs", i, &remote, err);
    if (!rc) rc = open_storage(m, t->uri, &s, err);
    if (!rc) rc = altar_storage_as_local_file(s, t->uri, &lf, err);
    /* A digest covers one file: a directory source fails as a mismatch does
     * (input_digest_mismatch, as the sandbox's verifier reports one). */
    if (!rc && t->digest) rc = altar_digest_refuse_directory(lf.path, err);
    if (!rc) rc = m->rt->ops->upload(m->rt->impl, m->volume_name, lf.path, remote, err);
    altar_local_file_release(&lf);
    close_storage(m, s);
    free(remote);
    if (rc) return altar_error_prefix(err, "inputs[%zu] (%s)", i, t->logical_path), rc;
  }
  return ALTAR_OK;
}

int altar_modal_collect_outputs(altar_modal_t *m, const altar_transfer_t *outputs, size_t n, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    const altar_transfer_t *t = &outputs[i];
    char *remote = NULL;
    altar_storage_t *s = NULL;
    const char *base = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/altar-modal-out-XXXXXX", base && *base ? base : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0) return altar_error_set(err, ALTAR_EIO, "outputs[%zu]: cannot make a temp file in %s", i, tmp);
    close(fd);
    int rc = remote_path(t, "outputs", i, &remote, err);
    if (!rc) rc = m->rt->ops->download(m->rt->impl, m->volume_name, remote, tmp, err);
    if (!rc) rc = open_storage(m, t->uri, &s, err);
    if (!rc) rc = altar_storage_copy_from_local(s, tmp, t->uri, err);
    close_storage(m, s);
    unlink(tmp);
    free(remote);
    if (rc) return altar_error_prefix(err, "outputs[%zu] (%s)", i, t->logical_path), rc;
  }
  return ALTAR_OK;
}
