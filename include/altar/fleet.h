/* altar — names the fleet's processes agree on: consumer groups and the
 * dead-letter headers. */
#ifndef ALTAR_FLEET_H
#define ALTAR_FLEET_H

#include "altar/export.h"
ALTAR_API_BEGIN

/* The version workers announce in their heartbeats (as `altar --version`). */
#define ALTAR_VERSION "0.1.0"

#define ALTAR_WORKER_GROUP "altar.workers"
#define ALTAR_RECONCILER_GROUP "altar.reconcilers"

/* The label every shard of one submitted job carries (its run handle id). */
#define ALTAR_JOB_ID_LABEL "job_id"

/* A message set aside in the DLQ carries its original bytes (truncated to
 * ALTAR_DLQ_MAX_VALUE) and these headers. */
#define ALTAR_DLQ_REASON_HEADER "altar.dlq.reason"
#define ALTAR_DLQ_SOURCE_HEADER "altar.dlq.source" /* "topic/partition/offset" */
#define ALTAR_DLQ_SIZE_HEADER "altar.dlq.original_size"
/* On a job a worker forwarded to a peer with a free slot (docs/forwarding.md):
 * "worker/topic/partition/offset" of the original, and the number of forwards. */
#define ALTAR_FORWARD_FROM_HEADER "altar.forwarded.from"
#define ALTAR_FORWARD_HOPS_HEADER "altar.forwarded.hops"
/* Fleet topic (JSON): {"v":1,"type":"worker","event":"heartbeat"|"goodbye",
 * "worker","host","pid","backend","pools","slots","running","version",
 * "started_at","ts","free","owns"}, keyed by worker id (schemas/README.md);
 * workers read "free" (free slots per pool) and "owns" (jobs partitions)
 * to forward jobs waiting for a slot (docs/forwarding.md). */
#define ALTAR_DLQ_MAX_VALUE (256u * 1024u)

ALTAR_API_END

#endif
