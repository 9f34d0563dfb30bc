/* submit: create the spec's Job, or adopt or replace the Job already holding
 * its name. The name comes from the spec, so a Job of that name is the same
 * work: adopted while active with the same manifest, replaced once finished
 * (its inputs may have changed since), refused when active with another
 * manifest. */
#include "k8s_int.h"

#include <stdlib.h>
#include <string.h>

/* Wait between conflict rounds: short at first, capped, so a delete that
 * takes a few seconds settles quickly without hammering the API server. */
#define SETTLE_DELAY_FIRST_S 0.25
#define SETTLE_DELAY_MAX_S 2.0

static int handle_for(const altar_spec_t *spec, const char *name, altar_handle_t *ph, altar_error_t *err) {
  if (altar_handle_init_for_spec(ph, "kubernetes", name, spec))
    return altar_error_set(err, ALTAR_ENOMEM, "job %s: out of memory", name);
  return ALTAR_OK;
}

int altar_k8s_submit(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  memset(ph, 0, sizeof *ph);
  int rc = altar_spec_validate(spec, err);
  if (rc) return rc;
  json_t *manifest = NULL;
  rc = altar_k8s_render(k, spec, &manifest, err);
  if (rc) return rc;
  const char *name = json_string_value(json_object_get(json_object_get(manifest, "metadata"), "name"));
  const char *digest = json_string_value(json_object_get(
      json_object_get(json_object_get(manifest, "metadata"), "annotations"), ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION));
  if (!name || !digest) {
    json_decref(manifest);
    return altar_error_set(err, ALTAR_EINVAL, "manifest: metadata.name or the digest annotation was removed");
  }

  double deadline = altar__k8s_now(k) + k->settle_timeout_s, delay = SETTLE_DELAY_FIRST_S;
  const char *last = "no answer yet";
  for (int round = 0;; round++) {
    if (round > 0) {
      double now = altar__k8s_now(k);
      if (now >= deadline) {
        rc = altar_error_set(err, ALTAR_EJOBEXISTS,
                             "job %s in namespace %s: name conflict did not settle within %.0f s (%s)",
                             name, k->ns, k->settle_timeout_s, last);
        break;
      }
      altar__k8s_sleep(k, delay < deadline - now ? delay : deadline - now);
      delay = delay * 2 < SETTLE_DELAY_MAX_S ? delay * 2 : SETTLE_DELAY_MAX_S;
    }
    char *created = NULL;
    altar_error_t cerr = {0};
    rc = altar_k8s_runtime_create_job(k->rt, manifest, k->ns, &created, &cerr);
    if (rc == ALTAR_OK) {
      rc = handle_for(spec, created ? created : name, ph, err);
      free(created);
      break;
    }
    free(created);
    if (rc != ALTAR_EJOBEXISTS) {
      if (err) *err = cerr;
      break;
    }
    altar_k8s_job_info_t *job = NULL;
    rc = altar_k8s_runtime_read_job(k->rt, name, k->ns, &job, err);
    if (rc) break;
    if (!job) {
      /* Being deleted (or gone between the two calls): create again. */
      last = "the existing job is being deleted";
      continue;
    }
    if (job->state == ALTAR_STATE_PENDING || job->state == ALTAR_STATE_RUNNING) {
      const char *theirs = altar_strmap_get(&job->annotations, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION);
      if (theirs && !strcmp(theirs, digest)) {
        rc = handle_for(spec, job->name, ph, err); /* adopt: the same work is already running */
      } else {
        rc = altar_error_set(err, ALTAR_EJOBEXISTS,
                             "job %s in namespace %s: an active job of that name was rendered from a "
                             "different manifest (%s, want %s)",
                             name, k->ns, theirs ? theirs : "no digest annotation", digest);
      }
      altar_k8s_job_info_free(job);
      break;
    }
    /* Finished, succeeded or failed: never taken as this run's result. The
     * uid precondition keeps a newer Job of the same name safe. */
    rc = altar_k8s_runtime_delete_job(k->rt, name, k->ns, job->uid, err);
    altar_k8s_job_info_free(job);
    if (rc) break;
    last = "replacing a finished job";
  }
  json_decref(manifest);
  if (rc) altar_handle_clear(ph);
  return rc;
}
