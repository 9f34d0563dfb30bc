/* The worker: consumes the jobs topic in a consumer group, runs each job on
 * an execution backend, and emits status events for every change.
 *
 * Guarantees (DESIGN.md, fleet invariants):
 * - A job counts as done only once its terminal status event is
 *   acknowledged by the log (or, for a poison message, once the DLQ copy is).
 * - Offsets are committed up to the lowest unfinished job per partition; the
 *   finished offsets above it ride in the commit metadata (offset_tracker.h),
 *   so a restart or rebalance re-runs only jobs that were really unfinished.
 * - It reads the jobs topic of every pool its backend serves (pools.h;
 *   the pools of its capacity report). Slots gate intake per pool: a pool
 *   with no free slot (or a worker with every slot busy) starts nothing; its
 *   records go to the look-ahead (lookahead.h), where control messages are
 *   obeyed at once, and only a full look-ahead pauses its topic, while
 *   consume keeps being called so the group never expels it.
 * - Every job whose identity it can read ends with a terminal status event:
 *   one it will not run is refused with a reason (intake.h), never dropped;
 *   an event too large in full is sent reduced. No message's content stops
 *   it.
 * - A revoked partition is handed over, never drained: its commit point and
 *   held bound are committed at once (offset_tracker.h), and its running
 *   tasks keep running here (held), counted in the slots and polled as
 *   before. When a held task's terminal event is acknowledged the worker
 *   writes a "done" control message to the job's own partition; while it
 *   holds tasks it renews a "lease" on them every lease_interval_ms.
 * - A job the partition's metadata lists as held is not started: the worker
 *   waits (no slot) for its holder's "done" (the offset is finished), a
 *   "release" (start it now), or a lease timeout (the holder is dead: start
 *   it under the same task key, which a backend that can reach the old run
 *   adopts). A held job it holds itself (the partition came back) is
 *   re-attached to its running task.
 * - Only a stop request cancels: it leaves the group at once (the
 *   partitions move now), gives held tasks `drain_ms` to finish, then
 *   cancels the rest and emits `released` plus a "release" control message
 *   for each, so the waiting owner starts them at once.
 *
 * - A job that waits here for a slot longer than forward_after_ms while a
 *   live peer of its pool reports a free slot (the fleet topic's
 *   heartbeats, peers.h) is forwarded: the same key and bytes are produced
 *   to a jobs partition that peer owns, with ALTAR_FORWARD_FROM_HEADER and
 *   ALTAR_FORWARD_HOPS_HEADER, and only once the log acknowledges the copy
 *   is the original's offset finished (and committed promptly). The copy
 *   is an ordinary job where it lands (docs/forwarding.md).
 *
 * Single-threaded: everything runs on the caller's thread. */
#ifndef ALTAR_WORKER_H
#define ALTAR_WORKER_H

#include "altar/backend.h"
#include "altar/config.h"
#include "altar/fleet.h"
#include "altar/groups.h"
#include "altar/metrics.h"
#include "altar/transport.h"

#include <signal.h>
#include <stdint.h>

/* Headers of a forwarded job: "<worker>/<topic>/<partition>/<offset>" of
 * the original, and how many times it was forwarded (a job forwarded
 * ALTAR_FORWARD_HOPS_MAX times waits where it is). */
#define ALTAR_FORWARD_HOPS_MAX 4
/* forward_after_ms when 0. */
#define ALTAR_FORWARD_AFTER_MS_DEFAULT 200

/* The defaults of the options below that say "<= 0 = default". */
#define ALTAR_WORKER_POLL_MS_DEFAULT 200            /* poll_interval_ms */
#define ALTAR_WORKER_COMMIT_MS_DEFAULT 1000         /* commit_interval_ms */
#define ALTAR_WORKER_DRAIN_MS_DEFAULT 30000         /* drain_ms */
#define ALTAR_WORKER_LEASE_INTERVAL_MS_DEFAULT 3000 /* lease_interval_ms */
#define ALTAR_WORKER_LEASE_TIMEOUT_MS_MIN 10000     /* lease_timeout_ms: max(3 x interval, this) */

typedef struct altar_worker_opts {
  altar_transport_t *transport;      /* borrowed; the worker subscribes it */
  altar_backend_t *backend;          /* borrowed */
  const altar_group_specs_t *groups; /* borrowed, may be NULL: status key = task key */
  const altar_topics_t *topics;      /* borrowed */
  const char *group;                 /* consumer group; NULL = ALTAR_WORKER_GROUP */
  const char *worker_id;             /* NULL = "<hostname>:<pid>" */
  int64_t slots;                     /* jobs in flight at most (>= 1) */
  int topic_partitions;              /* partitions of a pool's jobs topic it creates (0 = the default) */
  int poll_interval_ms;              /* backend poll cadence; 0 = ALTAR_WORKER_POLL_MS_DEFAULT */
  int commit_interval_ms;            /* periodic offset commits; <= 0 = 1000 (a revoke, a stop and a
                                   drain commit at once, whatever this says) */
  int drain_ms;                      /* drain time on stop; < 0 = 30000 */
  int lease_interval_ms;             /* held tasks' lease renewal; <= 0 = 3000 */
  int lease_timeout_ms;              /* a waited job's holder is dead after this long without news;
                                   <= 0 = max(3 x lease interval, 10000) */
  int64_t max_jobs;                  /* stop (draining) after this many jobs finished; 0 = never */
  bool exit_when_idle;               /* stop once caught up with nothing in flight (tests, demo) */
  /* Set to 1 to drain and stop, 2 (a second signal) to stop at once. */
  volatile sig_atomic_t *stop;
  bool quiet;      /* no progress lines on stderr */
  bool task_lines; /* one stderr line per task start and end (the CLI sets it on a
                                   terminal); ignored when quiet */
  /* Borrowed, may be NULL: the run registers the altar_worker_* metrics here
   * and keeps them current (docs/metrics.md). */
  altar_metrics_t *metrics;
  /* Borrowed, may be NULL (no forwarding): a second handle on the same log
   * that the worker assigns to the fleet topic (no group), from a few
   * records before its end, to learn its peers' free slots and partitions. */
  altar_transport_t *fleet_transport;
  int forward_after_ms; /* a job waiting for a slot this long is forwarded to a peer with a
                                   free one; 0 = ALTAR_FORWARD_AFTER_MS_DEFAULT, < 0 = never */
} altar_worker_opts_t;

typedef struct altar_worker_stats {
  uint64_t consumed;  /* job messages read */
  uint64_t submitted; /* tasks started */
  uint64_t succeeded;
  uint64_t failed;
  uint64_t released;       /* cancelled and handed back at a stop's drain deadline */
  uint64_t skipped;        /* finished in an earlier life (commit metadata) */
  uint64_t dead_lettered;  /* messages copied to the DLQ (refused ones included) */
  uint64_t refused;        /* jobs refused with a failed status event (worker/intake.h) */
  uint64_t reduced_events; /* status events sent without spec (too large in full) */
  uint64_t status_events;  /* status events acknowledged */
  uint64_t held;           /* tasks kept running across a revoke (handed over) */
  uint64_t reattached;     /* held tasks whose partition came back to this worker */
  uint64_t waited;         /* jobs another worker held: waited for, not started */
  uint64_t handed_done;    /* waited jobs finished by their holder ("done") */
  uint64_t taken_over;     /* waited jobs started here (released, or lease timed out) */
  uint64_t controls;       /* control messages read */
  uint64_t forwarded;      /* waiting jobs forwarded to a peer (copy acknowledged) */
  uint64_t forwarded_in;   /* jobs read here that a peer had forwarded */
} altar_worker_stats_t;

/* Runs until a stop request, max_jobs or idleness (exit_when_idle). Returns
 * 0, or an error that made it stop (err says which). *pstats may be NULL. */
int altar__worker_run(const altar_worker_opts_t *opts, altar_worker_stats_t *pstats, altar_error_t *err);

#endif
