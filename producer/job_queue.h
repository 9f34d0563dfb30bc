/* altar — the JobQueue made concrete: specs in, one job message per spec on
 * the jobs topic, a run handle id out. */
#ifndef ALTAR_PRODUCER_JOB_QUEUE_H
#define ALTAR_PRODUCER_JOB_QUEUE_H

#include "altar/config.h"
#include "altar/fleet.h"
#include "altar/groups.h"
#include "altar/spec.h"
#include "altar/transport.h"

#define ALTAR_RUN_ID_MAX 64

typedef struct altar_job_queue {
  altar_transport_t *transport; /* borrowed; its delivery callback is taken over during submit */
  const altar_topics_t *topics; /* borrowed */
  int partitions;               /* partitions of a jobs topic created on first use (0 = 32) */
  /* Borrowed, may be NULL (kinds unchecked): every spec's kind must have a
   * group config here, and each of the job's groups must fit one group
   * event. */
  const altar_group_specs_t *groups;
} altar_job_queue_t;

/* Reads specs from text: one JSON object, a JSON array of objects, or JSON
 * Lines. Every spec is validated; the first bad one fails the whole batch
 * with err naming its line (or array index) and field. *pspecs is a malloc'd
 * array of *pn specs (free each with altar_spec_clear, then the array). */
int altar__specs_parse(const char *text, size_t len, const char *source, altar_spec_t **pspecs, size_t *pn,
                       altar_error_t *err);

/* Submits n specs of kind (NULL = any kinds) as one job: checks every spec
 * (valid, its kind configured when q->groups is set, small enough that every
 * event it causes fits a message: altar/pools.h) before publishing any,
 * stamps the job id label (a fresh id unless every spec already carries the
 * same one), publishes each to the jobs topic of its pool (altar_pool_topic)
 * keyed by its task key, and returns once every message is acknowledged by
 * the log. The run handle id (the job id)
 * is written to run_id. Specs are modified only by the label. */
int altar__job_queue_submit(altar_job_queue_t *q, const char *kind, altar_spec_t *specs, size_t n,
                            char run_id[ALTAR_RUN_ID_MAX + 1], altar_error_t *err);

/* Longest job id and group key a cancel names. */
#define ALTAR_CANCEL_JOB_ID_MAX 1024
#define ALTAR_CANCEL_GROUP_KEY_MAX 4096

/* Sends a "cancel" control message for job_id (group_key NULL: the whole
 * job) to every partition of the jobs topic, of each `<jobs>.<pool>` topic
 * the log has and of the status topic, then flushes (delivery reports go to
 * t's delivery callback, which the caller set). who names the sender.
 * *psent and *ptopics (may be NULL) get the partitions and topics sent to.
 * ALTAR_EINVAL for an empty or overlong id or key, ALTAR_ENOTFOUND when the
 * log has no status topic, or the transport's error. */
int altar__job_cancel_send(altar_transport_t *t, const altar_topics_t *topics, const char *job_id,
                           const char *group_key, const char *who, size_t *psent, size_t *ptopics, altar_error_t *err);

#endif
