/* A running fleet from a program (altar/fleet_client.h): the settings file,
 * the job queue, cancel, and a reader of one job's group events. */
#include "altar/fleet_client.h"

#include "altar/codec.h"
#include "altar/config.h"
#include "altar/fleet.h"
#include "altar/fleet_topics.h"
#include "altar/groups.h"
#include "altar/transport.h"
#include "producer/job_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(ALTAR_JOB_ID_BUFSZ == ALTAR_RUN_ID_MAX + 1, "a job id buffer holds a run id");

/* Overrides "KEY=VALUE" are at most this long. */
#define FLEET_OVERRIDE_MAX 8192

struct altar_fleet_client {
  altar_config_t cfg;
  altar_group_specs_t groups;
  altar_transport_t *t;
};

struct altar_group_reader {
  altar_transport_t *t;
  char *job_id; /* NULL: every job */
};

static int apply_override(altar_config_t *cfg, const char *kv, altar_error_t *err) {
  const char *eq = kv ? strchr(kv, '=') : NULL;
  if (!eq || eq == kv) return altar_error_set(err, ALTAR_EINVAL, "override '%s': expected KEY=VALUE", kv ? kv : "");
  size_t klen = (size_t)(eq - kv);
  if (klen >= FLEET_OVERRIDE_MAX) return altar_error_set(err, ALTAR_ETOOBIG, "override: key too long");
  char key[FLEET_OVERRIDE_MAX];
  memcpy(key, kv, klen);
  key[klen] = 0;
  int rc = altar_config_set(cfg, key, eq + 1, err);
  if (rc) altar_error_prefix(err, "override %s", key);
  return rc;
}

altar_fleet_client_t *altar_fleet_client_open(const char *config_path, const char *const *overrides, size_t n,
                                              altar_error_t *err) {
  altar_fleet_client_t *c = calloc(1, sizeof *c);
  if (!c) {
    altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return NULL;
  }
  int rc = altar_config_load(config_path, &c->cfg, err);
  for (size_t i = 0; !rc && i < n; i++) rc = apply_override(&c->cfg, overrides[i], err);
  if (!rc && c->cfg.path) rc = altar_group_specs_load_file(c->cfg.path, &c->groups, err);
  if (!rc) {
    c->t = altar_transport_open(c->cfg.transport_name, &c->cfg.transport_props, NULL, err);
    if (!c->t) rc = altar_error_prefix(err, "transport %s", c->cfg.transport_name);
  }
  if (!rc) rc = altar_fleet_topics_ensure(c->t, &c->cfg, err);
  if (rc) {
    altar_fleet_client_close(c);
    return NULL;
  }
  return c;
}

void altar_fleet_client_close(altar_fleet_client_t *c) {
  if (!c) return;
  altar_transport_close(c->t);
  altar_group_specs_clear(&c->groups);
  altar_config_clear(&c->cfg);
  free(c);
}

int altar_fleet_client_submit_json(altar_fleet_client_t *c, const char *kind, const char *text, size_t len,
                                   char job_id[ALTAR_JOB_ID_BUFSZ], altar_error_t *err) {
  job_id[0] = 0;
  altar_spec_t *specs = NULL;
  size_t n = 0;
  int rc = altar__specs_parse(text, len, "specs", &specs, &n, err);
  if (rc) return rc;
  altar_job_queue_t q = {
      .transport = c->t, .topics = &c->cfg.topics, .partitions = c->cfg.topic_partitions, .groups = &c->groups};
  rc = altar__job_queue_submit(&q, kind, specs, n, job_id, err);
  for (size_t i = 0; i < n; i++) altar_spec_clear(&specs[i]);
  free(specs);
  return rc;
}

typedef struct cancel_acks {
  size_t failed;
  char why[256];
} cancel_acks_t;

static void on_cancel_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  cancel_acks_t *a = ctx;
  if (!dr->err) return;
  a->failed++;
  snprintf(a->why, sizeof a->why, "%s", dr->errstr ? dr->errstr : "delivery failed");
}

int altar_fleet_client_cancel(altar_fleet_client_t *c, const char *job_id, const char *group_key, altar_error_t *err) {
  char who[300], host[128] = "localhost";
  gethostname(host, sizeof host - 1);
  snprintf(who, sizeof who, "altar-library@%s", host);
  cancel_acks_t acks = {0};
  altar_delivery_cb prev = NULL;
  void *prev_ctx = NULL;
  altar_transport_set_delivery(c->t, on_cancel_delivery, &acks, &prev, &prev_ctx);
  int rc = altar__job_cancel_send(c->t, &c->cfg.topics, job_id, group_key, who, NULL, NULL, err);
  altar_transport_set_delivery(c->t, prev, prev_ctx, NULL, NULL);
  if (!rc && acks.failed) rc = altar_error_set(err, ALTAR_ETRANSPORT, "cancel not delivered: %s", acks.why);
  return rc;
}

const char *altar_fleet_client_ledger_path(const altar_fleet_client_t *c) { return c->cfg.ledger_path; }

/* Every partition of the ready and dead topics, from their beginning. */
static int assign_group_topics(altar_transport_t *t, const altar_config_t *cfg, altar_error_t *err) {
  const char *topics[] = {cfg->topics.ready, cfg->topics.dead};
  altar_tp_t *tps = NULL;
  size_t ntp = 0;
  int rc = 0;
  for (size_t k = 0; !rc && k < 2; k++) {
    altar_topic_list_t *tl = NULL;
    rc = altar_transport_list_topics(t, topics[k], 10000, &tl, err);
    if (!rc && !tl->n_topics) rc = altar_error_set(err, ALTAR_ENOTFOUND, "topic %s: not on this log", topics[k]);
    if (!rc) {
      size_t np = tl->topics[0].n_partitions;
      altar_tp_t *nt = realloc(tps, (ntp + np + 1) * sizeof *tps);
      if (!nt) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      else tps = nt;
      for (size_t p = 0; !rc && p < np; p++)
        tps[ntp++] = (altar_tp_t){topics[k], tl->topics[0].partitions[p].partition, ALTAR_OFFSET_BEGINNING};
    }
    altar_topic_list_free(tl);
  }
  if (!rc) rc = altar_transport_assign(t, tps, ntp, err);
  free(tps);
  return rc;
}

altar_group_reader_t *altar_group_reader_open(altar_fleet_client_t *c, const char *job_id, altar_error_t *err) {
  altar_group_reader_t *r = calloc(1, sizeof *r);
  if (!r || (job_id && !(r->job_id = strdup(job_id)))) {
    free(r);
    altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return NULL;
  }
  r->t = altar_transport_open(c->cfg.transport_name, &c->cfg.transport_props, NULL, err);
  if (!r->t || assign_group_topics(r->t, &c->cfg, err)) {
    altar_group_reader_close(r);
    return NULL;
  }
  return r;
}

void altar_group_reader_close(altar_group_reader_t *r) {
  if (!r) return;
  altar_transport_close(r->t);
  free(r->job_id);
  free(r);
}

/* Whether a shard of g carries the job id label job_id. */
static bool of_job(const altar_group_event_t *g, const char *job_id) {
  for (size_t i = 0; i < g->n_shards; i++) {
    const char *v = altar_strmap_get(&g->shards[i].labels, ALTAR_JOB_ID_LABEL);
    if (v && !strcmp(v, job_id)) return true;
  }
  return false;
}

int altar_group_reader_next(altar_group_reader_t *r, int timeout_ms, char **pjson, altar_error_t *err) {
  *pjson = NULL;
  for (;;) {
    altar_msg_t *m = NULL;
    int rc = altar_transport_consume(r->t, timeout_ms, &m, err);
    if (rc) return rc;
    if (!m) return 0;
    altar_group_event_t g = {0};
    altar_error_t de = {0};
    int found = 0;
    if (m->value && altar_decode_group(m->value, m->value_len, &g, &de) == ALTAR_OK &&
        (!r->job_id || of_job(&g, r->job_id))) {
      *pjson = altar_group_to_json(&g, err);
      found = *pjson ? 1 : err->code ? err->code : ALTAR_ENOMEM;
    }
    altar_group_event_clear(&g);
    altar_msg_free(m);
    if (found) return found;
  }
}

int altar_group_reader_caught_up(altar_group_reader_t *r, bool *pdone, altar_error_t *err) {
  *pdone = false;
  return altar_transport_caught_up(r->t, pdone, err);
}
