/* `altar cancel` in the reconciler (cancel.h). */
#include "reconciler/cancel.h"

#include "altar/codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_LABEL "job_id"

int altar__status_msg_decode(const altar_msg_t *m, int32_t n_partitions, altar_status_event_t *ev, altar_error_t *err) {
  altar_error_t se = {0};
  int rc = altar_decode_status(m->value, m->value_len, ev, &se);
  if (rc == ALTAR_OK) {
    ev->log_partition = m->partition;
    ev->log_partitions = n_partitions;
    return ALTAR_OK;
  }
  char type[16];
  if (altar_peek_type(m->value, m->value_len, type, sizeof type) != ALTAR_OK || strcmp(type, "control")) {
    if (err) *err = se;
    return rc;
  }
  altar_status_event_clear(ev);
  altar_control_msg_t *c = calloc(1, sizeof *c);
  if (!c) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  rc = altar_decode_control(m->value, m->value_len, c, err);
  if (!rc && c->event != ALTAR_CTL_CANCEL)
    rc = altar_error_set(err, ALTAR_EDECODE, "control message '%s' on the status topic: only cancel belongs here",
                         c->event_name ? c->event_name : "?");
  if (rc) {
    altar_control_msg_clear(c);
    free(c);
    return rc;
  }
  ev->v = c->v;
  ev->ts = c->ts;
  ev->cancel = c;
  ev->log_partition = m->partition;
  ev->log_partitions = n_partitions;
  return ALTAR_OK;
}

static int fact_key(char *out, size_t size, int32_t p, const char *job, const char *gk) {
  return gk ? snprintf(out, size, "c/%" PRId32 "/%s\x1f%s", p, job, gk)
            : snprintf(out, size, "c/%" PRId32 "/%s", p, job);
}

static bool fact_exists(altar_ledger_t *l, int32_t p, const char *job, const char *gk) {
  char k[6000];
  int kl = fact_key(k, sizeof k, p, job, gk);
  if (kl < 0 || (size_t)kl >= sizeof k) return false;
  altar_buf_t b = {0};
  altar_error_t e = {0};
  bool yes = altar_ledger_aux_get(l, k, (size_t)kl, &b, &e) == ALTAR_OK;
  altar_buf_free(&b);
  return yes;
}

/* The status partition a group's events travel on (workers key them by group key). */
static bool on_partition(const char *gk, const altar_status_event_t *ev) {
  if (ev->log_partitions <= 1) return true;
  return altar_partition_for_key(gk, strlen(gk), ev->log_partitions) == ev->log_partition;
}

typedef struct group_ref {
  const altar_group_spec_t *gs;
  char *gk;
} group_ref_t;

static bool listed(const altar_strlist_t *jobs, const char *job) {
  for (size_t i = 0; i < jobs->n; i++)
    if (!strcmp(jobs->v[i], job)) return true;
  return false;
}

static int visit_job(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)val;
  (void)vlen;
  altar_strlist_t *jobs = ctx;
  const char *k = key, *end = k + klen;
  const char *p = klen > 2 ? memchr(k + 2, '/', klen - 2) : NULL; /* after "c/<partition>" */
  if (!p) return 0;
  p++;
  const char *sep = memchr(p, '\x1f', (size_t)(end - p));
  char job[1100];
  size_t jl = (size_t)((sep ? sep : end) - p);
  if (jl >= sizeof job) return 0;
  memcpy(job, p, jl);
  job[jl] = 0;
  if (!listed(jobs, job) && altar_strlist_push(jobs, job)) return ALTAR_ENOMEM;
  return 0;
}

int altar__cancel_jobs_load(altar_ledger_t *l, altar_strlist_t *jobs, altar_error_t *err) {
  int rc = altar_ledger_aux_scan(l, "c/", 2, visit_job, jobs, err);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK;
  if (rc == ALTAR_ENOMEM) return altar_error_set(err, rc, "cancel: out of memory");
  return rc;
}

int altar__cancel_apply(altar_ledger_t *l, const altar_group_specs_t *groups, altar_strlist_t *jobs,
                        const altar_status_event_t *ev, altar_apply_result_t *res, altar_error_t *err) {
  const altar_control_msg_t *c = ev->cancel;
  if (!listed(jobs, c->job_id) && altar_strlist_push(jobs, c->job_id))
    return altar_error_set(err, ALTAR_ENOMEM, "cancel: out of memory");
  char k[6000], v[64];
  int kl = fact_key(k, sizeof k, ev->log_partition, c->job_id, c->group_key);
  if (kl < 0 || (size_t)kl >= sizeof k)
    return altar_error_set(err, ALTAR_ETOOBIG, "cancel: job id or group key too long");
  int vl = snprintf(v, sizeof v, "%.6f", ev->ts);
  int rc = altar_ledger_aux_put(l, k, (size_t)kl, v, (size_t)vl, err);
  if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK; /* the in-memory ledger: this batch's groups only */
  if (rc) return rc;
  /* The job's open groups on this partition, found from its open records. */
  altar_handle_t *hs = NULL;
  size_t n = 0;
  if ((rc = altar_ledger_open_handles(l, &hs, &n, err))) return rc;
  group_ref_t *refs = calloc(n ? n : 1, sizeof *refs);
  size_t nr = 0;
  if (!refs) rc = altar_error_set(err, ALTAR_ENOMEM, "cancel: out of memory");
  for (size_t i = 0; !rc && i < n; i++) {
    const char *job = altar_strmap_get(&hs[i].labels, JOB_LABEL);
    if (!job || strcmp(job, c->job_id)) continue;
    const altar_ledger_entry_t *e = altar_ledger_peek_open(l, hs[i].backend, hs[i].external_id);
    if (!e || !e->group_key || !e->rec.kind) continue;
    if ((c->group_key && strcmp(c->group_key, e->group_key)) || !on_partition(e->group_key, ev)) continue;
    const altar_group_spec_t *gs = altar_group_specs_find(groups, e->rec.kind);
    if (!gs) continue;
    bool dup = false;
    for (size_t j = 0; j < nr && !dup; j++) dup = refs[j].gs == gs && !strcmp(refs[j].gk, e->group_key);
    if (dup) continue;
    if (!(refs[nr].gk = strdup(e->group_key))) rc = altar_error_set(err, ALTAR_ENOMEM, "cancel: out of memory");
    else refs[nr++].gs = gs;
  }
  altar_handles_free(hs, n);
  /* A fixed order (kind, then group key), so a replay emits the same sequence. */
  for (size_t i = 1; i < nr; i++)
    for (size_t j = i; j > 0; j--) {
      int d = strcmp(refs[j - 1].gs->kind, refs[j].gs->kind);
      if (d < 0 || (d == 0 && strcmp(refs[j - 1].gk, refs[j].gk) <= 0)) break;
      group_ref_t t = refs[j - 1];
      refs[j - 1] = refs[j];
      refs[j] = t;
    }
  for (size_t i = 0; !rc && i < nr; i++) rc = altar__apply_cancel_group(l, refs[i].gs, refs[i].gk, ev->ts, res, err);
  for (size_t i = 0; i < nr; i++) free(refs[i].gk);
  free(refs);
  return rc;
}

/* The group key of the event's task under its kind's group_by; NULL without
 * a group (malloc'd). */
static char *event_group(const altar_group_specs_t *groups, const altar_status_event_t *ev,
                         const altar_group_spec_t **pgs) {
  *pgs = ev->kind ? altar_group_specs_find(groups, ev->kind) : NULL;
  return *pgs ? altar_group_by_key(&(*pgs)->group_by, &ev->handle) : NULL;
}

bool altar__cancel_covers(altar_ledger_t *l, const altar_group_specs_t *groups, const altar_strlist_t *jobs,
                          const altar_status_event_t *ev) {
  if (ev->cancel || ev->event == ALTAR_EV_RELEASED) return false;
  const char *job = altar_strmap_get(&ev->handle.labels, JOB_LABEL);
  if (!job || !listed(jobs, job)) return false;
  const altar_group_spec_t *gs;
  char *gk = event_group(groups, ev, &gs);
  if (!gk) return false;
  bool yes = fact_exists(l, ev->log_partition, job, NULL) || fact_exists(l, ev->log_partition, job, gk);
  free(gk);
  return yes;
}

int altar__cancel_event(altar_ledger_t *l, const altar_group_specs_t *groups, const altar_status_event_t *ev,
                        altar_apply_result_t *res, altar_error_t *err) {
  const altar_group_spec_t *gs;
  char *gk = event_group(groups, ev, &gs);
  if (!gk) return altar_error_set(err, ALTAR_ENOMEM, "cancel: out of memory");
  int rc;
  if (ev->event == ALTAR_EV_SUBMITTED) {
    rc = altar_apply_events(l, groups, ev, 1, -1, res, err); /* a submitted decides nothing */
  } else {
    /* Its state as reported, never a decision: the group settles below. A
     * record settled already keeps it for operators. */
    altar_error_t e2 = {0};
    rc = altar_ledger_set_state(l, &ev->handle, ev->state, ev->failure, &e2);
    if (rc == ALTAR_ENOTFOUND) { /* its "submitted" never came: record it from this event */
      altar_status_event_t sub = *ev;
      sub.event = ALTAR_EV_SUBMITTED;
      sub.spec = NULL;
      sub.spec_enc = (altar_spec_enc_t){0};
      sub.record_fixed = (altar_record_fixed_t){0};
      rc = altar_apply_events(l, groups, &sub, 1, -1, res, err);
      if (!rc) rc = altar_ledger_set_state(l, &ev->handle, ev->state, ev->failure, err);
    } else if (rc && err) {
      *err = e2;
    }
  }
  if (!rc) rc = altar__apply_cancel_group(l, gs, gk, ev->ts, res, err);
  free(gk);
  return rc;
}
