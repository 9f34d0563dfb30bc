/* Classifying a job message: run it, refuse it with a reason, or DLQ it. */
#include "worker/intake.h"

#include "altar/pools.h"
#include "altar/fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void refuse(altar__intake_t *in, const char *reason, const char *what, const char *msg) {
  in->verdict = ALTAR__INTAKE_REFUSE;
  in->reason = reason;
  snprintf(in->detail, sizeof in->detail, "%s%s", what, msg);
}

/* The configured kinds, for the no_group detail. */
static void kinds_list(const altar_group_specs_t *g, char *out, size_t size) {
  size_t at = 0;
  out[0] = 0;
  for (size_t i = 0; i < g->n && at + 1 < size; i++) {
    int n = snprintf(out + at, size - at, "%s%s", i ? ", " : "", g->v[i].kind);
    if (n < 0) break;
    at += (size_t)n;
  }
  if (!g->n) snprintf(out, size, "(none)");
}

void altar__intake_classify(const altar__intake_ctx_t *c, const altar_msg_t *m, altar__intake_t *in) {
  memset(in, 0, sizeof *in);
  altar_error_t e = {0};
  if (!m->value || !m->value_len) {
    in->verdict = ALTAR__INTAKE_DLQ;
    snprintf(in->detail, sizeof in->detail, "undecodable job: empty value");
    return;
  }
  if (altar_decode_job(m->value, m->value_len, &in->job, &e) != ALTAR_OK) {
    altar_job_msg_clear(&in->job);
    in->verdict = ALTAR__INTAKE_DLQ;
    snprintf(in->detail, sizeof in->detail, "undecodable job: %s", e.msg);
    return;
  }
  const altar_spec_t *s = &in->job.spec;
  /* No kind, or no computable identity: nothing could record it. The
   * spec's encoding gives both its identity and its events' bound. */
  altar_buf_t enc = {0};
  bool identified = s->kind && s->kind[0] && altar_encode_spec(s, &enc, &e) == ALTAR_OK &&
                    altar_spec_identity_of_encoding(enc.data, enc.len, in->task_key, &e) == ALTAR_OK;
  size_t spec_bytes = enc.len;
  altar_buf_free(&enc);
  if (!identified) {
    altar_job_msg_clear(&in->job);
    in->verdict = ALTAR__INTAKE_DLQ;
    snprintf(in->detail, sizeof in->detail, "job without a readable identity: %s",
             s->kind && s->kind[0] ? e.msg : "spec.kind: required");
    return;
  }
  if (altar_spec_validate(s, &e) != ALTAR_OK) return refuse(in, ALTAR_REASON_INVALID_SPEC, "invalid spec: ", e.msg);
  if (altar_spec_check_carriable_encoded(s, spec_bytes, &e) != ALTAR_OK)
    return refuse(in, ALTAR_REASON_SPEC_TOO_LARGE, "spec too large for its events: ", e.msg);
  if (c->groups && !altar_group_specs_find(c->groups, s->kind)) {
    char kinds[1024];
    kinds_list(c->groups, kinds, sizeof kinds);
    char d[sizeof in->detail];
    snprintf(d, sizeof d, "kind '%.256s' has no group config in this worker's configuration (configured: %s)", s->kind,
             kinds);
    return refuse(in, ALTAR_REASON_NO_GROUP, "", d);
  }
  /* A job for another pool than its topic's (an older producer, or a hand-
   * made message): the workers that read this topic may not serve it. */
  char want[512];
  if (c->jobs_topic && m->topic) {
    if (altar_pool_topic(c->jobs_topic, s->resources.gpu, want, sizeof want, &e) != ALTAR_OK)
      return refuse(in, ALTAR_REASON_UNSERVABLE_POOL, "", e.msg);
    const char *pool;
    if (altar_pool_of_topic(c->jobs_topic, m->topic, &pool) && strcmp(want, m->topic)) {
      char d[sizeof in->detail];
      snprintf(d, sizeof d,
               "a job for pool '%.64s' arrived on %.255s, the topic of pool '%.64s' (it belongs on %.255s)",
               s->resources.gpu ? s->resources.gpu : ALTAR_POOL_CPU, m->topic, pool ? pool : ALTAR_POOL_CPU, want);
      return refuse(in, ALTAR_REASON_UNSERVABLE_POOL, "", d);
    }
  }
  if (altar_backend_check_resources(c->backend, &s->resources, &e) != ALTAR_OK)
    return refuse(in, ALTAR_REASON_UNSERVABLE_POOL, "this worker's backend cannot serve it: ", e.msg);
  in->verdict = ALTAR__INTAKE_RUN;
}

void altar__intake_clear(altar__intake_t *in) {
  if (!in) return;
  altar_job_msg_clear(&in->job);
  memset(in, 0, sizeof *in);
}

static int put_cut(altar_strmap_t *out, const char *k, const char *v, size_t max_value) {
  size_t n = strlen(v);
  if (n <= max_value) return altar_strmap_set(out, k, v);
  /* Cut on a UTF-8 character boundary: a cut string must still encode. */
  while (n > max_value || (n && ((unsigned char)v[n] & 0xC0) == 0x80)) n--;
  char *cut = strndup(v, n);
  if (!cut) return ALTAR_ENOMEM;
  int rc = altar_strmap_set(out, k, cut);
  free(cut);
  return rc;
}

int altar__intake_reduced_labels(const altar_group_specs_t *groups, const char *kind, const altar_strmap_t *labels,
                                 size_t max_value, altar_strmap_t *out) {
  memset(out, 0, sizeof *out);
  const char *jid = altar_strmap_get(labels, ALTAR_JOB_ID_LABEL);
  if (jid && put_cut(out, ALTAR_JOB_ID_LABEL, jid, max_value)) return ALTAR_ENOMEM;
  const altar_group_spec_t *g = groups && kind ? altar_group_specs_find(groups, kind) : NULL;
  for (size_t i = 0; g && i < g->group_by.n; i++) {
    const char *v = altar_strmap_get(labels, g->group_by.labels[i]);
    if (v && put_cut(out, g->group_by.labels[i], v, max_value)) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

int altar__intake_encode_status(const altar_group_specs_t *groups, const altar_status_event_t *full, altar_buf_t *out,
                                bool *preduced, altar_error_t *err) {
  *preduced = false;
  altar_buf_reset(out);
  int rc = altar_encode_status(full, out, err);
  static const size_t cuts[] = {ALTAR_MAX_STRING, 1024, 0};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0] && rc == ALTAR_ETOOBIG; i++) {
    altar_status_event_t ev = *full;
    ev.spec = NULL;
    altar_strmap_t labels;
    if (altar__intake_reduced_labels(groups, full->kind, &full->handle.labels, cuts[i], &labels)) {
      altar_strmap_clear(&labels);
      return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    }
    ev.handle.labels = labels;
    ev.handle.plugin_identity = NULL;
    altar_buf_reset(out);
    rc = altar_encode_status(&ev, out, err);
    altar_strmap_clear(&labels);
    *preduced = rc == ALTAR_OK;
  }
  return rc;
}
