/* Why a shard is not running: one reason of a small closed set, with its
 * details, decided from facts the fleet keeps anyway (the ledger record,
 * the reconciler's side keys, the shard's place on its jobs topic, the
 * workers' heartbeats), so no page or command reads the log per shard to
 * say it.
 *
 * The reason names are stable strings (README "Why a shard waits"):
 *   cancelled     its job or group was cancelled (`altar cancel`)
 *   group_held    finished, but its group's rule errors (config): "group", "error"
 *   lease         its run is held by a worker that went silent: "worker";
 *                 another takes it over after the lease timeout
 *   starting      submitted to the backend by "worker", not running yet
 *   backoff       a retry waiting for its due time: "until" (Unix s)
 *   forwarded     a busy worker forwarded its job to a peer with a free slot: "by"
 *   no_worker     no live worker serves its pool: "pool"
 *   behind        queued behind earlier jobs in its partition: "jobs_ahead",
 *                 "shards_ahead"
 *   no_free_slot  first in line, every worker of its pool busy: "pool"
 *   queued        on its jobs topic, a worker of its pool has room: "pool"
 * Pure functions: no I/O, any thread. Internal to dashboard/ and cli/. */
#ifndef ALTAR_DASHBOARD_SHARD_WHY_H
#define ALTAR_DASHBOARD_SHARD_WHY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum altar_why_reason {
  ALTAR_WHY_NONE = 0, /* running, or finished: nothing to explain */
  ALTAR_WHY_CANCELLED,
  ALTAR_WHY_GROUP_HELD,
  ALTAR_WHY_LEASE,
  ALTAR_WHY_STARTING,
  ALTAR_WHY_BACKOFF,
  ALTAR_WHY_FORWARDED,
  ALTAR_WHY_NO_WORKER,
  ALTAR_WHY_BEHIND,
  ALTAR_WHY_NO_FREE_SLOT,
  ALTAR_WHY_QUEUED,
  ALTAR_WHY_COUNT
} altar_why_reason_t;

/* What is known of one shard and its pool. Strings are borrowed. */
typedef struct altar_why_facts {
  double now;                 /* Unix seconds */
  int state;                  /* altar_state_t of its record; -1: no record yet (only on a jobs topic) */
  bool consumed;              /* its record was consumed by a group outcome */
  const char *failure_reason; /* of a failed record */
  bool group_cancelled;       /* its group has a cancelled event */
  const char *group;          /* "kind:group_key", for group_held */
  const char *held_error;     /* its group is held: the rule's error; NULL when not held */
  double retry_due;           /* due time of the retry its record waits for; 0: none */
  const char *run_worker;     /* the worker whose latest heartbeat lists it running; NULL: none */
  bool run_worker_live;       /* that heartbeat is fresh and not a goodbye */
  const char *forwarded_by;   /* its job message is a copy forwarded by this worker */
  const char *pool;           /* its pool (ALTAR_POOL_CPU for CPU work) */
  int64_t pool_workers;       /* workers reading its pool's jobs topic; < 0 unknown */
  int64_t pool_free;          /* free slots of the pool the live workers announce; < 0 unknown */
  int64_t shards_ahead;       /* waiting job messages of other jobs before it in its partition; < 0 unknown */
  int64_t jobs_ahead;         /* how many distinct jobs those belong to */
} altar_why_facts_t;

/* The reason for f (ALTAR_WHY_NONE when the shard runs or is done). */
altar_why_reason_t altar__why_decide(const altar_why_facts_t *f);
/* The stable name of r ("cancelled", ...); "none" for ALTAR_WHY_NONE. */
const char *altar__why_name(altar_why_reason_t r);
/* {"reason": name, details...} of the reason f decides, or JSON null for
 * ALTAR_WHY_NONE; NULL when out of memory. Caller owns it. */
json_t *altar__why_json(const altar_why_facts_t *f);
/* The reason and details of j (altar__why_json's shape) in one line for a
 * person: "backoff: retry due at 2026-12-05 16:03:10 UTC". */
void altar__why_text(const json_t *j, char *out, size_t outsz);

/* A job message whose shard has no record yet (strings borrowed; topic is
 * any name that stands for its jobs topic, such as its pool's). */
typedef struct altar_why_waiting {
  const char *topic, *job, *task_key;
  int32_t partition;
  int64_t offset;
  int64_t shards_ahead, jobs_ahead; /* set by altar__why_ahead for job's own; -1 for others */
} altar_why_waiting_t;

/* Sorts v[0..n) by partition, topic and offset, and gives each message of
 * job the waiting messages of other jobs before it in its topic partition
 * (shards_ahead) and how many jobs those are (jobs_ahead: runs of one
 * job's consecutive messages, as submit writes them). O(n log n). */
void altar__why_ahead(altar_why_waiting_t *v, size_t n, const char *job);
/* The message at (topic, partition, offset) in v as altar__why_ahead sorted
 * it, or NULL (topic NULL: NULL). */
const altar_why_waiting_t *altar__why_waiting_find(const altar_why_waiting_t *v, size_t n, const char *topic,
                                                   int32_t partition, int64_t offset);

#endif
