/* The worker's intake: what to do with one message of a jobs topic.
 *
 * A message whose identity can be read (it decodes as a job with a kind and
 * its task key can be computed) always gets an outcome: it runs, or it is
 * refused with a stable reason and becomes a failed record in the ledger.
 * Only bytes with no readable identity are set aside in the DLQ alone.
 * Pure: nothing is produced or run here (the fuzz target drives it). */
#ifndef ALTAR_WORKER_INTAKE_H
#define ALTAR_WORKER_INTAKE_H

#include "altar/backend.h"
#include "altar/codec.h"
#include "altar/groups.h"
#include "altar/transport.h"

/* Reason codes of a refused job (failure.reason; deterministic), beside
 * ALTAR_REASON_INVALID_SPEC (altar/task.h). */
#define ALTAR_REASON_NO_GROUP "no_group"
#define ALTAR_REASON_UNSERVABLE_POOL "unservable_pool"
#define ALTAR_REASON_SPEC_TOO_LARGE "spec_too_large"
#define ALTAR_REASON_EVENT_TOO_LARGE "event_too_large"

typedef enum altar__intake_verdict {
  ALTAR__INTAKE_RUN = 0,    /* run job */
  ALTAR__INTAKE_REFUSE = 1, /* record job as failed with reason and detail */
  ALTAR__INTAKE_DLQ = 2,    /* no readable identity: the DLQ only, with detail */
} altar__intake_verdict_t;

typedef struct altar__intake {
  altar__intake_verdict_t verdict;
  altar_job_msg_t job; /* RUN, REFUSE: the decoded message */
  char task_key[ALTAR_TASK_KEY_LEN + 1];
  const char *reason; /* REFUSE: one of the codes above */
  char detail[ALTAR_ERRMSG_MAX + 128];
} altar__intake_t;

typedef struct altar__intake_ctx {
  altar_backend_t *backend;          /* borrowed: check_resources */
  const altar_group_specs_t *groups; /* borrowed; NULL: kinds are not checked */
  const char *jobs_topic;            /* the configured jobs topic (pool topics derive from it) */
} altar__intake_ctx_t;

/* Decides m. *out is filled whatever the verdict; clear it with
 * altar__intake_clear. */
void altar__intake_classify(const altar__intake_ctx_t *c, const altar_msg_t *m, altar__intake_t *out);
void altar__intake_clear(altar__intake_t *in);

/* The handle labels a status event keeps when the full one cannot be
 * encoded: the job id and the labels kind's group_by reads (so the event
 * still lands in its group), each cut to max_value bytes. 0 or ENOMEM. */
int altar__intake_reduced_labels(const altar_group_specs_t *groups, const char *kind, const altar_strmap_t *labels,
                                 size_t max_value, altar_strmap_t *out);

/* Encodes a status event into out; when it is too large in full (a handle
 * the backend made long, a spec past intake's bound), sends it without its
 * spec and with the handle's labels reduced as above (*preduced), so it
 * still lands in its group and the ledger still sees the task — the record
 * then has no spec, so a retry cannot republish it and its group
 * dead-letters instead. Errors only for out of memory (or an event that
 * could not encode at all, which intake's checks rule out). */
int altar__intake_encode_status(const altar_group_specs_t *groups, const altar_status_event_t *full, altar_buf_t *out,
                                bool *preduced, altar_error_t *err);

#endif
