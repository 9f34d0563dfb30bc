/* submit: create the spec's Job, or adopt or replace the Job already holding
 * its name. The name comes from the spec, so a Job of that name is the same
 * work: adopted while active with the same manifest, replaced once finished
 * (its inputs may have changed since), refused when active with another
 * manifest. submit_start does the same with creates in flight: the create
 * is queued and its answer read later (a conflict is then settled in turn,
 * the same way, by the call that reads it). */
#include "k8s_int.h"

#include "altar/grow.h"

#include <stdio.h>
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

/* The name and digest submit works with; NULL when extend_manifest removed them. */
static int name_digest(const json_t *manifest, const char **pname, const char **pdigest, altar_error_t *err) {
  const json_t *meta = json_object_get(manifest, "metadata");
  *pname = json_string_value(json_object_get(meta, "name"));
  *pdigest =
      json_string_value(json_object_get(json_object_get(meta, "annotations"), ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION));
  if (!*pname || !*pdigest)
    return altar_error_set(err, ALTAR_EINVAL, "manifest: metadata.name or the digest annotation was removed");
  return ALTAR_OK;
}

/* Creates manifest's Job, settling a conflict over its name: an active Job
 * of the same digest is adopted, one of another digest refused, a finished
 * one deleted (uid precondition) and created again. create_first false: a
 * create already met the conflict, so start by reading the Job. *pname gets
 * the Job's name (malloc'd), puid its uid when known ("" otherwise);
 * *pfresh (pfresh may be NULL) whether the first request created it. */
static int create_settled(altar_k8s_t *k, const json_t *manifest, const char *name, const char *digest,
                          bool create_first, char **pname, char puid[40], bool *pfresh, altar_error_t *err) {
  *pname = NULL;
  if (pfresh) *pfresh = false;
  puid[0] = '\0';
  double deadline = altar__k8s_now(k) + k->settle_timeout_s, delay = SETTLE_DELAY_FIRST_S;
  const char *last = "no answer yet";
  int rc = ALTAR_OK;
  for (int round = 0;; round++) {
    if (round > 0) {
      double now = altar__k8s_now(k);
      if (now >= deadline) {
        rc = altar_error_set(err, ALTAR_EJOBEXISTS,
                             "job %s in namespace %s: name conflict did not settle within %.0f s (%s)", name, k->ns,
                             k->settle_timeout_s, last);
        break;
      }
      altar__k8s_sleep(k, delay < deadline - now ? delay : deadline - now);
      delay = delay * 2 < SETTLE_DELAY_MAX_S ? delay * 2 : SETTLE_DELAY_MAX_S;
    }
    if (round > 0 || create_first) {
      char *created = NULL, *uid = NULL;
      altar_error_t cerr = {0};
      rc = altar__k8s_runtime_create_job(k->rt, manifest, k->ns, &created, &uid, &cerr);
      if (rc == ALTAR_OK) {
        if (pfresh) *pfresh = round == 0; /* not a replacement made after waiting */
        *pname = created ? created : strdup(name);
        if (uid && strlen(uid) < 40) memcpy(puid, uid, strlen(uid) + 1);
        free(uid);
        if (!*pname) rc = altar_error_set(err, ALTAR_ENOMEM, "job %s: out of memory", name);
        break;
      }
      free(created);
      if (rc != ALTAR_EJOBEXISTS) {
        if (err) *err = cerr;
        break;
      }
    }
    altar_k8s_job_info_t *job = NULL;
    rc = altar__k8s_runtime_read_job(k->rt, name, k->ns, &job, err);
    if (rc) break;
    if (!job) {
      /* Being deleted (or gone between the two calls): create again. */
      last = "the existing job is being deleted";
      continue;
    }
    if (job->state == ALTAR_STATE_PENDING || job->state == ALTAR_STATE_RUNNING) {
      const char *theirs = altar_strmap_get(&job->annotations, ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION);
      if (theirs && !strcmp(theirs, digest)) {
        /* adopt: the same work is already running */
        if (job->uid && strlen(job->uid) < 40) memcpy(puid, job->uid, strlen(job->uid) + 1);
        *pname = strdup(job->name);
        if (!*pname) rc = altar_error_set(err, ALTAR_ENOMEM, "job %s: out of memory", name);
      } else {
        rc = altar_error_set(err, ALTAR_EJOBEXISTS,
                             "job %s in namespace %s: an active job of that name was rendered from a "
                             "different manifest (%s, want %s)",
                             name, k->ns, theirs ? theirs : "no digest annotation", digest);
      }
      altar__k8s_job_info_free(job);
      break;
    }
    /* Finished, succeeded or failed: never taken as this run's result. The
     * uid precondition keeps a newer Job of the same name safe. */
    rc = altar__k8s_runtime_delete_job(k->rt, name, k->ns, job->uid, err);
    altar__k8s_job_info_free(job);
    if (rc) break;
    last = "replacing a finished job";
  }
  return rc;
}

/* The altar.dev/pool label of a rendered manifest, or NULL. */
static const char *pool_label(const json_t *manifest) {
  return json_string_value(
      json_object_get(json_object_get(json_object_get(manifest, "metadata"), "labels"), ALTAR_K8S_POOL_LABEL));
}

/* Tells the watch about a Job this process made or adopted. */
static void note(altar_k8s_t *k, const char *name, const char *uid, const json_t *manifest) {
  if (k->watch && uid && *uid) altar__k8s_watch_note(k->watch, name, uid, pool_label(manifest), ALTAR_STATE_PENDING);
}

/* altar__k8s_submit; *pfresh: the Job was created by this call's first
 * request (not adopted, nor a replacement). */
static int submit_one(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, bool *pfresh, altar_error_t *err) {
  if (pfresh) *pfresh = false;
  memset(ph, 0, sizeof *ph);
  int rc = altar_spec_validate(spec, err);
  if (rc) return rc;
  json_t *manifest = NULL;
  rc = altar__k8s_render(k, spec, &manifest, err);
  if (rc) return rc;
  const char *name, *digest;
  char *got = NULL, uid[40];
  rc = name_digest(manifest, &name, &digest, err);
  if (!rc) rc = create_settled(k, manifest, name, digest, true, &got, uid, pfresh, err);
  if (!rc) {
    note(k, got, uid, manifest);
    rc = handle_for(spec, got, ph, err);
  }
  free(got);
  json_decref(manifest);
  if (rc) altar_handle_clear(ph);
  return rc;
}

int altar__k8s_submit(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  return submit_one(k, spec, ph, NULL, err);
}

/* ---- creates in flight ---- */

struct altar__k8s_inflight {
  uint64_t id;
  json_t *manifest;
  char *name;
  char digest[72];
};

void altar__k8s_inflight_clear(altar_k8s_t *k) {
  for (size_t i = 0; i < k->n_inflight; i++) {
    json_decref(k->inflight[i].manifest);
    free(k->inflight[i].name);
  }
  free(k->inflight);
  k->inflight = NULL;
  k->n_inflight = k->cap_inflight = 0;
}

size_t altar__k8s_submits_in_flight(const altar_k8s_t *k) { return k->n_inflight; }

size_t altar__k8s_submit_backlog(altar_k8s_t *k) { return altar__k8s_pace_backlog(k); }

uint64_t altar__k8s_pace_holds(const altar_k8s_t *k) { return k->pace_holds; }

int64_t altar__k8s_active_in_pool(altar_k8s_t *k, altar_k8s_watch_t *w, const char *pool) {
  /* The creates in flight are at most the submit window (a submit waits for
   * room), so they fit on the stack: no allocation per capacity read. */
  const char *names[ALTAR_K8S_MAX_SUBMIT_WINDOW] = {0}; /* zeroed: gcc -O3 cannot see that only [0, n) is read */
  altar_k8s_watch_view_t views[ALTAR_K8S_MAX_SUBMIT_WINDOW];
  size_t n = 0;
  for (size_t i = 0; i < k->n_inflight && n < ALTAR_K8S_MAX_SUBMIT_WINDOW; i++) {
    const char *p = pool_label(k->inflight[i].manifest);
    if (p && !strcmp(p, pool)) names[n++] = k->inflight[i].name;
  }
  int64_t active = w ? altar__k8s_watch_active_lookup(w, pool, names, n, views) : 0;
  /* Its watch event may come before its answer: then the watch counts it. */
  for (size_t i = 0; i < n; i++)
    active += !(w && views[i].seen == ALTAR_K8S_SEEN_LIVE &&
                (views[i].state == ALTAR_STATE_PENDING || views[i].state == ALTAR_STATE_RUNNING));
  return active;
}

/* Remembers a refused create for poll to report. */
static void refused(altar_k8s_t *k, const char *name, int rc, const char *msg) {
  char text[ALTAR_ERRMSG_MAX + 16];
  snprintf(text, sizeof text, "%d %s", rc, msg ? msg : "");
  altar_strmap_set(&k->outcome, name, text);
}

/* One finished create: done, or a conflict to settle, or refused. */
static void absorb(altar_k8s_t *k, altar_k8s_create_done_t *d) {
  size_t i = 0;
  while (i < k->n_inflight && k->inflight[i].id != d->id) i++;
  if (i == k->n_inflight) {
    free(d->name);
    return;
  }
  struct altar__k8s_inflight *f = &k->inflight[i];
  if (d->rc == ALTAR_OK) {
    note(k, d->name, d->uid, f->manifest);
    altar_strmap_remove(&k->outcome, f->name);
  } else if (d->rc == ALTAR_EJOBEXISTS) {
    altar__k8s_pace_forget(k, f->name);
    char *got = NULL, uid[40];
    altar_error_t e = {0};
    int rc = create_settled(k, f->manifest, f->name, f->digest, false, &got, uid, NULL, &e);
    if (rc) refused(k, f->name, rc, e.msg);
    else {
      note(k, got, uid, f->manifest);
      altar_strmap_remove(&k->outcome, f->name);
    }
    free(got);
  } else {
    refused(k, f->name, d->rc, d->err.msg);
  }
  free(d->name);
  json_decref(f->manifest);
  free(f->name);
  k->inflight[i] = k->inflight[--k->n_inflight];
}

int altar__k8s_submit_drive(altar_k8s_t *k, int timeout_ms) {
  if (!k->n_inflight) return 0;
  altar_k8s_create_done_t done[64];
  int n = altar__k8s_runtime_create_reap(k->rt, timeout_ms, done, sizeof done / sizeof *done);
  for (int i = 0; i < n; i++) absorb(k, &done[i]);
  return n > 0;
}

/* One create at a time, counted in the backlog like the pipelined ones
 * (a Job it found there already is not: altar__k8s_pace_forget). */
static int submit_paced(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  altar__k8s_watch_get(k);
  bool fresh;
  int rc = submit_one(k, spec, ph, &fresh, err);
  if (!rc && fresh) altar__k8s_pace_add(k, ph->external_id);
  return rc;
}

int altar__k8s_submit_start(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  if (k->submit_window <= 1 || k->multi_unavailable) return submit_paced(k, spec, ph, err);
  memset(ph, 0, sizeof *ph);
  int rc = altar_spec_validate(spec, err);
  if (rc) return rc;
  json_t *manifest = NULL;
  rc = altar__k8s_render(k, spec, &manifest, err);
  if (rc) return rc;
  const char *name, *digest;
  rc = name_digest(manifest, &name, &digest, err);
  if (rc) {
    json_decref(manifest);
    return rc;
  }
  altar__k8s_watch_get(k); /* listing while we create */
  const char *was = altar_strmap_get(&k->outcome, name);
  if (was && !*was) { /* the same Job's create is on its way already */
    rc = handle_for(spec, name, ph, err);
    json_decref(manifest);
    return rc;
  }
  while (k->n_inflight >= (size_t)k->submit_window) altar__k8s_submit_drive(k, 100);
  if (ALTAR_GROW(k->inflight, k->cap_inflight, k->n_inflight + 1) || altar_strmap_set(&k->outcome, name, "")) {
    json_decref(manifest);
    return altar_error_set(err, ALTAR_ENOMEM, "job %s: out of memory", name);
  }
  uint64_t id = ++k->next_id;
  rc = altar__k8s_runtime_create_start(k->rt, manifest, k->ns, id, err);
  if (rc == ALTAR_ENOTSUP) {
    k->multi_unavailable = true;
    altar_strmap_remove(&k->outcome, name);
    json_decref(manifest);
    return submit_paced(k, spec, ph, err);
  }
  if (rc) {
    altar_strmap_remove(&k->outcome, name);
    json_decref(manifest);
    return rc;
  }
  struct altar__k8s_inflight *f = &k->inflight[k->n_inflight];
  memset(f, 0, sizeof *f);
  f->id = id;
  f->manifest = manifest;
  snprintf(f->digest, sizeof f->digest, "%s", digest);
  f->name = strdup(name);
  if (!f->name) {
    /* The create is on its way; without its entry its answer is dropped
     * and the watch reports the Job. */
    json_decref(manifest);
    altar_strmap_remove(&k->outcome, name);
    return handle_for(spec, name, ph, err);
  }
  k->n_inflight++;
  altar__k8s_pace_add(k, name);
  rc = handle_for(spec, name, ph, err);
  if (rc) altar_handle_clear(ph);
  return rc;
}
