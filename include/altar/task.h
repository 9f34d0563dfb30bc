/* altar — a submitted task: handle, state, status, failure, capacity, ledger record. */
#ifndef ALTAR_TASK_H
#define ALTAR_TASK_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/spec.h"

/* An opaque reference to a submitted task plus its structured identity.
 * external_id is whatever the backend finds the task by; never parse it. */
typedef struct altar_handle {
  char *backend;
  char *external_id;
  altar_strmap_t labels;           /* copied from the spec on submit */
  altar_strmap_t *plugin_identity; /* NULL if absent */
  /* Set by altar_handle_copy_compact: every field above lives in this one
   * block, and the handle is read-only. NULL otherwise. */
  void *block;
} altar_handle_t;

typedef enum altar_state {
  ALTAR_STATE_PENDING = 0,
  ALTAR_STATE_RUNNING = 1,
  ALTAR_STATE_SUCCEEDED = 2,
  ALTAR_STATE_FAILED = 3,
} altar_state_t;

/* "pending" | "running" | "succeeded" | "failed". */
const char *altar_state_name(altar_state_t s);
/* Parses a state name; 0 or ALTAR_EINVAL. */
int altar_state_parse(const char *name, altar_state_t *pstate);
static inline bool altar_state_terminal(altar_state_t s) {
  return s == ALTAR_STATE_SUCCEEDED || s == ALTAR_STATE_FAILED;
}

/* Stable reason codes (a backend may add its own; exit codes are "exit_<n>"). */
#define ALTAR_REASON_TIMEOUT "timeout"
#define ALTAR_REASON_OOM_KILLED "oom_killed"
#define ALTAR_REASON_INPUT_DIGEST_MISMATCH "input_digest_mismatch"
#define ALTAR_REASON_CONTAINER_MISSING "container_missing"
#define ALTAR_REASON_JOB_FAILED "job_failed"
/* Ledger-made outcomes of a run that no longer counts: a newer run of the
 * same task key took its place, or its worker released it (shutdown). */
#define ALTAR_REASON_SUPERSEDED "superseded"
#define ALTAR_REASON_RELEASED "released"
/* `altar cancel` stopped it (or refused it after the cancel). */
#define ALTAR_REASON_CANCELLED "cancelled"
/* A worker's own codes for a job that never started: a spec it refuses
 * (escaping path, malformed digest, ...), or a submit (or staging) that
 * failed for another reason. */
#define ALTAR_REASON_INVALID_SPEC "invalid_spec"
#define ALTAR_REASON_SUBMIT_FAILED "submit_failed"

typedef struct altar_failure {
  char *reason;       /* short stable code to branch on */
  char *detail;       /* the platform's message for a human; NULL if none */
  bool deterministic; /* true: will fail again; false (the safe default): worth a retry */
  altar_opt_i64_t exit_code;
} altar_failure_t;

/* New failure with copies of reason and detail (detail may be NULL). */
altar_failure_t *altar_failure_new(const char *reason, const char *detail, bool deterministic);
/* "exit_<code>" with exit_code set; deterministic as given. */
altar_failure_t *altar_failure_exit(int64_t code, const char *detail, bool deterministic);
void altar_failure_free(altar_failure_t *f);
altar_failure_t *altar_failure_dup(const altar_failure_t *f); /* NULL in → NULL out */
bool altar_failure_equal(const altar_failure_t *a, const altar_failure_t *b);

/* One probe result. failure is non-NULL only when state is FAILED. */
typedef struct altar_status {
  altar_handle_t handle;
  altar_state_t state;
  altar_failure_t *failure;
} altar_status_t;

/* Free slots per named pool. Empty means "no fixed capacity". */
typedef struct altar_capacity {
  size_t n;
  char **pools;
  int64_t *free_slots;
} altar_capacity_t;

/* A ledger row: the durable record of a submitted task. */
typedef struct altar_record {
  altar_handle_t handle;
  char *kind;
  altar_state_t state;
  int64_t restart_count;
  altar_spec_t *spec; /* NULL if not stored */
  bool consumed;
  altar_failure_t *failure; /* NULL unless FAILED */
} altar_record_t;

/* Handles. init copies backend/external_id; labels and identity start empty. */
int altar_handle_init(altar_handle_t *h, const char *backend, const char *external_id);
/* A handle for spec's task: backend, id, and copies of spec's labels and identity. */
int altar_handle_init_for_spec(altar_handle_t *h, const char *backend, const char *external_id,
                               const altar_spec_t *spec);
void altar_handle_clear(altar_handle_t *h);
/* A read-only copy in one allocation (strings, labels, identity), with
 * external_id right after backend's NUL: a group event's shards are such
 * copies. Cleared like any handle. 0 or ENOMEM. */
int altar_handle_copy_compact(altar_handle_t *dst, const altar_handle_t *src);
/* The same copy laid into caller memory (pointer-aligned, at least
 * altar_handle_packed_size(src) bytes); returns the end of what it used.
 * Such a handle lives as long as mem and is never cleared: a ledger's
 * cached record holds its handle so, in the record's own allocation. */
size_t altar_handle_packed_size(const altar_handle_t *src);
char *altar_handle_pack(altar_handle_t *dst, const altar_handle_t *src, char *mem);
int altar_handle_copy(altar_handle_t *dst, const altar_handle_t *src);
bool altar_handle_equal(const altar_handle_t *a, const altar_handle_t *b);
/* Same task: same (backend, external_id), labels not compared. */
bool altar_handle_same_task(const altar_handle_t *a, const altar_handle_t *b);
/* Array helpers: free n handles and the array itself. */
void altar_handles_free(altar_handle_t *hs, size_t n);

/* Statuses. init copies the handle and takes ownership of failure. */
int altar_status_init(altar_status_t *st, const altar_handle_t *h, altar_state_t state, altar_failure_t *failure);
void altar_status_clear(altar_status_t *st);
int altar_status_copy(altar_status_t *dst, const altar_status_t *src);
bool altar_status_equal(const altar_status_t *a, const altar_status_t *b);
void altar_statuses_free(altar_status_t *sts, size_t n);

/* Capacity. */
void altar_capacity_init(altar_capacity_t *c);
void altar_capacity_clear(altar_capacity_t *c);
int altar_capacity_set(altar_capacity_t *c, const char *pool, int64_t free_slots);
int altar_capacity_copy(altar_capacity_t *dst, const altar_capacity_t *src);
bool altar_capacity_equal(const altar_capacity_t *a, const altar_capacity_t *b);
/* Free slots in the pool that would serve r: gpu NULL → "normal", else the
 * pool named by gpu; 0 when that pool is not reported. */
int64_t altar_capacity_free_for(const altar_capacity_t *c, const altar_resources_t *r);

/* Records. init copies handle, kind and spec (spec may be NULL); state pending. */
int altar_record_init(altar_record_t *rec, const altar_handle_t *h, const char *kind, const altar_spec_t *spec);
void altar_record_clear(altar_record_t *rec);
int altar_record_copy(altar_record_t *dst, const altar_record_t *src);
bool altar_record_equal(const altar_record_t *a, const altar_record_t *b);
void altar_records_free(altar_record_t *recs, size_t n);

ALTAR_API_END

#endif
