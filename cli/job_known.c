/* Whether a job id is one this fleet knows: a record of it in the ledger or
 * a job message of it on the jobs topic or a pool's jobs topic. `altar
 * cancel` asks, so a mistyped id is an error rather than a cancel sent to
 * every partition for nothing. */
#include "job_known.h"

#include "altar/codec.h"
#include "altar/ledger.h"
#include "altar/pools.h"
#include "fleet_common.h"
#include "producer/job_queue.h"

#include <stdlib.h>
#include <string.h>

#define JOB_KNOWN_POLL_MS 1000   /* one consume's wait */
#define JOB_KNOWN_IDLE_POLLS 5   /* empty consumes in a row that end a topic's scan */
#define JOB_KNOWN_ERRORS_MAX 100 /* unreadable records in a row before giving up */

typedef struct scan {
  const char *job;
  bool found;
} scan_t;

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  scan_t *s = ctx;
  const char *jid = altar_strmap_get(&e->rec.handle.labels, ALTAR_JOB_ID_LABEL);
  if (jid && !strcmp(jid, s->job)) {
    s->found = true;
    return 1; /* stop */
  }
  return 0;
}

/* Reads one topic from its beginning to its end as of now. */
static int scan_topic(const altar_config_t *cfg, const altar_topic_info_t *ti, const char *job, bool *pfound,
                      altar_error_t *err) {
  altar_tp_t *tps = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *tps);
  int64_t *ends = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *ends);
  if (!tps || !ends) {
    free(tps);
    free(ends);
    return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  }
  size_t ntp = 0;
  for (size_t p = 0; p < ti->n_partitions; p++) {
    if (ti->partitions[p].beginning >= ti->partitions[p].end) continue;
    ends[ntp] = ti->partitions[p].end;
    tps[ntp++] = (altar_tp_t){ti->name, ti->partitions[p].partition, ALTAR_OFFSET_BEGINNING};
  }
  int rc = ALTAR_OK;
  size_t left = ntp, jl = strlen(job);
  altar_transport_t *r = left ? altar_cli_open_transport(cfg, NULL) : NULL;
  if (left && !r) rc = altar_error_set(err, ALTAR_EIO, "cannot open the log");
  else if (left && (rc = altar_transport_assign(r, tps, ntp, err))) left = 0;
  int idle = 0, errors = 0;
  while (left && !*pfound) {
    altar_msg_t *m = NULL;
    altar_error_t ce = {0};
    int crc = altar_transport_consume(r, JOB_KNOWN_POLL_MS, &m, &ce);
    if (crc) { /* a corrupt record is skipped; many in a row are an error */
      if (++errors <= JOB_KNOWN_ERRORS_MAX) continue;
      rc = crc;
      *err = ce;
      break;
    }
    /* An end never reached (its last record skipped) must not hang a cancel. */
    if (!m) {
      if (++idle >= JOB_KNOWN_IDLE_POLLS) break;
      continue;
    }
    idle = errors = 0;
    /* The id's bytes must be in the message before it is worth decoding. */
    if (m->value && m->value_len >= jl && memmem(m->value, m->value_len, job, jl)) {
      altar_job_msg_t jm = {0};
      altar_error_t de = {0};
      if (altar_decode_job(m->value, m->value_len, &jm, &de) == ALTAR_OK) {
        const char *jid = altar_strmap_get(&jm.spec.labels, ALTAR_JOB_ID_LABEL);
        *pfound = (jid && !strcmp(jid, job)) || (jm.job_id && !strcmp(jm.job_id, job));
      }
      altar_job_msg_clear(&jm);
    }
    for (size_t k = 0; k < ntp; k++)
      if (tps[k].partition == m->partition && m->offset + 1 >= ends[k]) left--;
    altar_msg_free(m);
  }
  altar_transport_close(r);
  free(tps);
  free(ends);
  return rc;
}

int altar_cli_job_known(const altar_config_t *cfg, const char *job, bool *pknown, altar_error_t *err) {
  scan_t s = {.job = job};
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_error_t le = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(cfg->ledger_path, &ro, &le);
  if (l) altar_ledger_foreach(l, visit, &s, &le);
  altar_ledger_close(l);
  if (s.found) {
    *pknown = true;
    return ALTAR_OK;
  }
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return altar_error_set(err, ALTAR_EIO, "cannot open the log");
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, NULL, 10000, &tl, err);
  altar_transport_close(t);
  for (size_t i = 0; !rc && !s.found && i < tl->n_topics; i++) {
    const char *pool;
    if (altar_pool_of_topic(cfg->topics.jobs, tl->topics[i].name, &pool))
      rc = scan_topic(cfg, &tl->topics[i], job, &s.found, err);
  }
  altar_topic_list_free(tl);
  *pknown = s.found;
  return rc;
}
