/* The worker's view of its live peers, read from their heartbeats on the
 * fleet topic (heartbeat.h): per peer, the free slots of each pool it
 * serves and the jobs partitions it owns. The worker forwards jobs that
 * wait here for a slot to a partition a peer with free slots owns
 * (docs/forwarding.md).
 *
 * Heartbeats come from anyone who can write the fleet topic, so every one
 * is bounded and validated before it counts: at most
 * ALTAR_PEER_HEARTBEAT_MAX bytes of JSON, a worker id of 1..255 bytes, at
 * most ALTAR_PEER_POOLS_MAX pools with a free count in
 * [0, ALTAR_PEER_FREE_MAX], at most ALTAR_PEER_PARTS_MAX owned partitions
 * on topics with legal names, and a time `ts` within
 * ALTAR_HEARTBEAT_STALE_S of ours. Anything else is ignored whole. The
 * table keeps at most ALTAR_PEERS_MAX peers; a peer silent for
 * ALTAR_HEARTBEAT_STALE_S is dead and never chosen.
 *
 * Not thread-safe: the worker's loop owns it. Internal to worker/. */
#ifndef ALTAR_WORKER_PEERS_H
#define ALTAR_WORKER_PEERS_H

#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALTAR_PEER_HEARTBEAT_MAX (64u * 1024u)
#define ALTAR_PEER_POOLS_MAX 64
#define ALTAR_PEER_POOL_NAME_MAX 64
#define ALTAR_PEER_FREE_MAX 100000
#define ALTAR_PEER_PARTS_MAX 4096
#define ALTAR_PEERS_MAX 1024

typedef struct altar__peers altar__peers_t;

/* Whether topic/partition is owned by the caller itself (never a target). */
typedef bool (*altar__peers_mine_fn)(void *ctx, const char *topic, int32_t partition);

/* A table that ignores the heartbeats of self_id (copied). NULL when out
 * of memory. Free with altar__peers_free. */
altar__peers_t *altar__peers_new(const char *self_id);
void altar__peers_free(altar__peers_t *ps);

/* Takes one fleet-topic record in: a heartbeat updates its worker's entry,
 * a goodbye removes it. now_ms is the caller's monotonic clock, now_s the
 * wall clock (Unix seconds) the record's ts is checked against. 0 when it
 * counted; ALTAR_EINVAL with err saying why when it was ignored (bad,
 * stale, or our own); ALTAR_ENOMEM. */
int altar__peers_apply(altar__peers_t *ps, const void *value, size_t len, int64_t now_ms, double now_s,
                       altar_error_t *err);

/* Picks a live peer reporting a free slot of pool and owning a partition
 * of topic that mine does not claim (mine may be NULL): the one with the
 * most free slots, its partitions taken in turn. Counts the slot as taken
 * (until the peer's next heartbeat says otherwise), writes the partition
 * to *ppartition and returns the peer's id (valid until the next call of
 * any function here), or NULL when there is none. */
const char *altar__peers_pick(altar__peers_t *ps, const char *pool, const char *topic, int64_t now_ms,
                              altar__peers_mine_fn mine, void *mine_ctx, int32_t *ppartition);

/* Free slots of pool over every live peer (for tests and logs). */
int64_t altar__peers_free_slots(const altar__peers_t *ps, const char *pool, int64_t now_ms);
/* Live peers now. */
size_t altar__peers_live(const altar__peers_t *ps, int64_t now_ms);

#endif
