/* Making a group's follow-up messages (job, or failure record). */
#include "reconciler/followup_stage.h"
#include "altar/fleet.h"
#include "altar/followup.h"
#include "altar/pools.h"
#include "altar/storage.h"
#include "core/unconst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void clear_recs(altar__followup_out_t *out) {
  for (size_t i = 0; i < 2; i++) {
    free(out->recs[i].topic);
    free(out->recs[i].key);
    altar_buf_free(&out->recs[i].value);
  }
  memset(out->recs, 0, sizeof out->recs);
  out->n = 0;
}

void altar__followup_out_clear(altar__followup_out_t *out) {
  clear_recs(out);
  memset(out, 0, sizeof *out);
}

static int nomem(altar_error_t *err) { return altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory"); }

static int make_job(const altar_topics_t *topics, const altar_group_event_t *g, altar_spec_t *spec,
                    altar__followup_out_t *out, altar_error_t *err) {
  char topic[512];
  int rc = altar_pool_topic(topics->jobs, spec->resources.gpu, topic, sizeof topic, err);
  if (rc) return rc;
  if ((rc = altar_spec_identity(spec, out->task_key, err))) return rc;
  const char *jid = altar_strmap_get(&spec->labels, ALTAR_JOB_ID_LABEL);
  /* submitted_at is the group's decision time, so a replay makes the same bytes. */
  altar_job_msg_t job = {
      .v = ALTAR_SCHEMA_VERSION, .job_id = ALTAR__UNCONST(jid ? jid : ""), .spec = *spec, .submitted_at = g->ts};
  altar__followup_rec_t *r = &out->recs[0];
  if (!(r->topic = strdup(topic)) || !(r->key = strdup(out->task_key))) return nomem(err);
  if ((rc = altar_encode_job(&job, &r->value, err))) return rc;
  out->n = 1;
  return ALTAR_OK;
}

/* The follow-up as a failed task of the next stage: a "submitted" event
 * without spec and a "failed" one, under a task key derived from the event
 * id, keyed by the next stage's group key. */
static int make_failure(const altar_group_specs_t *groups, const altar_topics_t *topics, const altar_followup_t *f,
                        const altar_group_event_t *g, altar__followup_out_t *out, altar_error_t *err) {
  const altar_group_spec_t *next = altar_group_specs_find(groups, f->tmpl->kind);
  const char *id = g->event_id ? g->event_id : "";
  if (altar_group_event_id(f->tmpl->kind, "followup", &id, 1, out->task_key)) return nomem(err);
  altar_handle_t h = {.backend = "altar", .external_id = NULL};
  char ext[96];
  snprintf(ext, sizeof ext, "followup-%.64s", id);
  h.external_id = ext;
  int rc = ALTAR_OK;
  /* The labels the next stage groups by: what every listed member shared. */
  altar_strmap_t labels = {0};
  for (size_t i = 0; g->n_shards && i < g->shards[0].labels.n && !rc; i++) {
    const char *k = g->shards[0].labels.keys[i], *v = g->shards[0].labels.vals[i];
    bool same = true;
    for (size_t s = 1; s < g->n_shards && same; s++) {
      const char *o = altar_strmap_get(&g->shards[s].labels, k);
      same = o && !strcmp(o, v);
    }
    if (same && altar_strmap_set(&labels, k, v)) rc = nomem(err);
  }
  if (!rc && altar_strmap_set(&labels, ALTAR_FOLLOWUP_LABEL, id)) rc = nomem(err);
  h.labels = labels;
  char *gk = !rc && next ? altar_group_by_key(&next->group_by, &h) : NULL;
  if (!rc && !gk) rc = next ? nomem(err) : altar_error_set(err, ALTAR_EINVAL, "follow-up kind has no group spec");
  altar_failure_t fail = {.reason = ALTAR_FOLLOWUP_INVALID, .detail = out->why.msg, .deterministic = true};
  altar_status_event_t ev[2] = {
      {.v = ALTAR_SCHEMA_VERSION,
       .event = ALTAR_EV_SUBMITTED,
       .task_key = out->task_key,
       .kind = f->tmpl->kind,
       .handle = h,
       .state = ALTAR_STATE_PENDING,
       .worker = "altar-reconciler",
       .ts = g->ts},
      {.v = ALTAR_SCHEMA_VERSION,
       .event = ALTAR_EV_STATE,
       .task_key = out->task_key,
       .kind = f->tmpl->kind,
       .handle = h,
       .state = ALTAR_STATE_FAILED,
       .failure = &fail,
       .worker = "altar-reconciler",
       .ts = g->ts},
  };
  for (size_t i = 0; i < 2 && !rc; i++) {
    altar__followup_rec_t *r = &out->recs[i];
    if (!(r->topic = strdup(topics->status)) || !(r->key = strdup(gk))) rc = nomem(err);
    else rc = altar_encode_status(&ev[i], &r->value, err);
  }
  free(gk);
  altar_strmap_clear(&labels);
  if (!rc) out->n = 2;
  return rc;
}

/* Writes the manifest's bytes to its uri (its directory made first). */
static int write_manifest(const altar_followup_manifest_t *m, altar_error_t *err) {
  altar_storage_t *st = NULL;
  int rc = altar_storage_open_for_uri(m->uri, NULL, &st, err);
  const char *slash = strrchr(m->uri, '/');
  if (!rc && slash && slash > m->uri) {
    char *dir = strndup(m->uri, (size_t)(slash - m->uri));
    if (!dir) rc = nomem(err);
    else {
      altar_error_t e = {0};
      (void)altar_storage_mkdirs(st, dir, &e); /* an object store has none; the write says what fails */
      free(dir);
    }
  }
  if (!rc)
    rc = altar_storage_write_bytes(st, m->uri, m->content.data ? (const void *)m->content.data : "", m->content.len,
                                   err);
  altar_storage_close(st);
  return rc;
}

int altar__followup_make(const altar_group_specs_t *groups, const altar_topics_t *topics, const altar_group_event_t *g,
                         altar__followup_out_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  const altar_group_spec_t *gs = altar_group_specs_find(groups, g->kind);
  const altar_followup_t *f = altar_followup_for(gs, g);
  if (!f) return ALTAR_OK;
  altar_spec_t *spec = NULL;
  altar_followup_manifest_t man = {0};
  int rc = altar_followup_build_manifest(f, gs, g, &spec, &man, &out->why);
  if (rc == ALTAR_ENOMEM) return nomem(err);
  if (!rc && man.uri) {
    /* Before the follow-up can be published: written in the same turn as
     * the decision, the same bytes however often (a replay, a rebuild). */
    rc = write_manifest(&man, err);
    altar_followup_manifest_clear(&man);
    if (rc) {
      altar_spec_free(spec);
      /* The storage's outage, not the group's fault: the daemon applies the
       * batch again later (ALTAR_ESTORAGE, retriable), nothing committed. */
      altar_error_prefix(err, "follow-up %s of group %s:%s: its inputs' manifest", f->tmpl->kind, g->kind,
                         g->group_key);
      if (err) {
        err->code = ALTAR_ESTORAGE;
        err->retriable = true;
      }
      return ALTAR_ESTORAGE;
    }
  }
  if (!rc && !(rc = altar_spec_check_carriable(spec, &out->why))) {
    rc = make_job(topics, g, spec, out, err);
    altar_spec_free(spec);
    if (rc != ALTAR_EINVAL) return rc;
    /* a pool name no topic can carry: a failure of this follow-up too */
    out->why = *err;
    clear_recs(out);
  } else {
    altar_spec_free(spec);
  }
  out->failed = true;
  altar_error_prefix(&out->why, "follow-up %s of group %s:%s", f->tmpl->kind, g->kind, g->group_key);
  return make_failure(groups, topics, f, g, out, err);
}

size_t altar__followup_topics(const altar_group_specs_t *groups, const altar_topics_t *topics, char (*out)[512],
                              size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < groups->n; i++) {
    const altar_followup_t *fs[2] = {groups->v[i].then, groups->v[i].then_dead};
    for (size_t k = 0; k < 2; k++) {
      if (!fs[k]) continue;
      char t[512];
      altar_error_t e = {0};
      if (altar_pool_topic(topics->jobs, fs[k]->tmpl->resources.gpu, t, sizeof t, &e)) continue;
      bool dup = false;
      for (size_t j = 0; j < n && !dup; j++) dup = !strcmp(out[j], t);
      if (!dup && n < max) snprintf(out[n++], 512, "%s", t);
    }
  }
  return n;
}
