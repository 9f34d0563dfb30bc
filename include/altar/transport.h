/* altar — log transports: the small log interface the fleet moves every
 * message over (jobs, status events, group events, the DLQ).
 *
 * A transport is an opaque handle made from one const vtable registered by
 * name (altar/plugin/transport.h says how to write one). Built-ins: "kafka"
 * (librdkafka) and "local" (an embedded file log for one machine). Callers
 * go through the functions at the end of this header; optional operations
 * a transport lacks answer with their default (see each).
 *
 * Threading: a transport handle is used by one thread at a time, except
 * that altar_transport_produce, _poll and _flush may run on one thread while
 * another thread consumes. Callbacks (delivery reports, rebalances, logs)
 * run on the thread that calls the serving function, never elsewhere.
 *
 * Offsets follow Kafka: a partition's records have consecutive offsets from
 * its beginning offset; its end offset is the offset the next record will
 * get; a committed offset is the offset of the next record to consume (last
 * processed + 1).
 *
 * Partitioning: a keyed record produced with ALTAR_PARTITION_ANY goes to
 * altar_partition_for_key() (murmur2, Kafka's Java default; the kafka
 * transport sets librdkafka's partitioner=murmur2_random so both agree);
 * a record without key goes to a random partition. */
#ifndef ALTAR_TRANSPORT_H
#define ALTAR_TRANSPORT_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "altar/error.h"
#include "altar/strmap.h"

/* Partition argument of produce: choose by key hash (random when no key). */
#define ALTAR_PARTITION_ANY ((int32_t)-1)
/* Special offsets (same values as librdkafka's). */
#define ALTAR_OFFSET_END ((int64_t)-1)
#define ALTAR_OFFSET_BEGINNING ((int64_t)-2)
#define ALTAR_OFFSET_INVALID ((int64_t)-1001) /* "none": no committed offset */

/* Bounds every transport enforces on what it is given or reads back. */
#define ALTAR_TOPIC_NAME_MAX 249 /* Kafka's limit; chars [A-Za-z0-9._-] */
#define ALTAR_GROUP_NAME_MAX 249
#define ALTAR_COMMIT_METADATA_MAX 4096 /* Kafka's offset.metadata.max.bytes default */
#define ALTAR_HEADERS_MAX 64
#define ALTAR_HEADER_NAME_MAX 255

typedef struct altar_transport altar_transport_t;
typedef struct altar_transport_ops altar_transport_ops_t;

/* One record header. name is NUL-terminated; value may be NULL (len 0). */
typedef struct altar_header {
  const char *name;
  const void *value;
  size_t value_len;
} altar_header_t;

/* What to produce. Every pointer is only read during the call: the
 * transport copies what it keeps. key NULL = no key; value NULL = a null
 * (tombstone) value. */
typedef struct altar_produce_rec {
  const char *topic;
  int32_t partition; /* ALTAR_PARTITION_ANY or an explicit partition */
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
  const altar_header_t *headers;
  size_t n_headers;
  int64_t timestamp_ms; /* 0 = now */
  void *opaque;         /* handed back in the delivery report */
} altar_produce_rec_t;

/* A delivery report: the record is acknowledged (err == 0: offset is where
 * it landed; for local with fsync always|group it is on disk, for kafka
 * acks=all) or failed for good (err < 0, errstr says why, offset -1).
 * Pointers are valid during the callback only. */
typedef struct altar_delivery {
  const char *topic;
  int32_t partition;
  int64_t offset;
  int err;
  const char *errstr;
  void *opaque;
} altar_delivery_t;

typedef void (*altar_delivery_cb)(altar_transport_t *t, const altar_delivery_t *dr, void *ctx);

/* A consumed record. Owned by the caller, freed with altar_msg_free (which
 * frees every pointer below). key NULL = no key; value NULL = null value. */
typedef struct altar_msg {
  const char *topic;
  int32_t partition;
  int64_t offset;
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
  const altar_header_t *headers;
  size_t n_headers;
  int64_t timestamp_ms;
  /* private to the transport that made the message */
  void (*destroy_)(struct altar_msg *m);
  void *priv_;
} altar_msg_t;

/* Frees m (NULL is fine). */
void altar_msg_free(altar_msg_t *m);
/* The last header called name: 0 with *pvalue and *plen pointing into m, or
 * ALTAR_ENOTFOUND. */
int altar_msg_header(const altar_msg_t *m, const char *name, const void **pvalue, size_t *plen);

/* A topic partition, optionally with an offset (seek, assign). */
typedef struct altar_tp {
  const char *topic;
  int32_t partition;
  int64_t offset; /* ALTAR_OFFSET_INVALID where unused */
} altar_tp_t;

typedef enum altar_rebalance_kind {
  ALTAR_REBALANCE_ASSIGN = 0, /* these partitions are now yours */
  ALTAR_REBALANCE_REVOKE = 1, /* these are being taken away: commit now */
} altar_rebalance_kind_t;

/* Rebalance callback, incremental: ASSIGN adds partitions to the current
 * assignment, REVOKE removes them. During REVOKE the partitions are still
 * owned, so commit works; after it returns they are gone. During ASSIGN the
 * consumer starts each partition at its committed offset (else at
 * auto.offset.reset); the callback may seek or pause the partitions just
 * assigned, and a seek there sets where the partition starts (kafka passes
 * it as the start offset of the assignment, so reading never begins at the
 * committed offset first). Runs inside altar_transport_consume,
 * altar_transport_leave or altar_transport_close. */
typedef void (*altar_rebalance_cb)(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                   void *ctx);

/* Log sink for warnings the transport can recover from (a truncated torn
 * tail, a stray file, a broker reconnect). level: 3 error, 4 warning,
 * 6 info, 7 debug (syslog numbers). Default: stderr for level <= 4.
 * Secrets (passwords, keys) never appear in these lines. */
typedef void (*altar_transport_log_cb)(altar_transport_t *t, int level, const char *msg, void *ctx);

/* Callbacks and context given at creation (all optional). */
typedef struct altar_transport_opts {
  altar_delivery_cb on_delivery;
  void *delivery_ctx;
  altar_transport_log_cb on_log;
  void *log_ctx;
} altar_transport_opts_t;

/* One partition of a topic listing. */
typedef struct altar_partition_info {
  int32_t partition;
  int64_t beginning; /* oldest offset still kept */
  int64_t end;       /* next offset to be written */
} altar_partition_info_t;

typedef struct altar_topic_info {
  char *name;
  altar_partition_info_t *partitions; /* sorted by partition */
  size_t n_partitions;
} altar_topic_info_t;

typedef struct altar_topic_list {
  altar_topic_info_t *topics; /* sorted by name */
  size_t n_topics;
} altar_topic_list_t;
void altar_topic_list_free(altar_topic_list_t *l); /* NULL is fine */

/* A group's position on one partition. */
typedef struct altar_lag_entry {
  char *topic;
  int32_t partition;
  int64_t end;       /* end offset */
  int64_t committed; /* ALTAR_OFFSET_INVALID when none */
  int64_t lag;       /* end - committed, or end - beginning when none */
  char *metadata;    /* committed metadata, NULL when none */
} altar_lag_entry_t;

typedef struct altar_lag_list {
  altar_lag_entry_t *entries; /* sorted by topic, partition */
  size_t n;
} altar_lag_list_t;
void altar_lag_list_free(altar_lag_list_t *l); /* NULL is fine */

/* ---- lifecycle ---------------------------------------------------------- */

/* Opens the transport registered as name from config (NULL = none) and
 * opts (NULL = none; copied). NULL with err set on failure (an unknown name
 * lists the registered ones). Free with altar_transport_close. */
altar_transport_t *altar_transport_open(const char *name, const altar_strmap_t *config,
                                        const altar_transport_opts_t *opts, altar_error_t *err);
/* Same from an ops table (not necessarily registered; one lacking a
 * required operation is ALTAR_EINVAL naming it). */
altar_transport_t *altar_transport_open_ops(const altar_transport_ops_t *ops, const altar_strmap_t *config,
                                            const altar_transport_opts_t *opts, altar_error_t *err);
/* Leaves the group (REVOKE callback for what is owned), waits a short
 * bounded time for outstanding deliveries (firing their reports), then
 * frees t. NULL is fine. */
void altar_transport_close(altar_transport_t *t);

/* Sets who hears t's delivery reports (cb NULL: nobody) and returns the
 * previous callback and context through pprev / pprev_ctx (either may be
 * NULL), so a caller that borrows a handle can put them back. The only way
 * to change them after open. */
void altar_transport_set_delivery(altar_transport_t *t, altar_delivery_cb cb, void *ctx, altar_delivery_cb *pprev,
                                  void **pprev_ctx);

/* After it returns no rebalance callback (the one given to subscribe) and no
 * delivery report callback fires for t: not from consume, poll, flush, leave
 * or close. The handle stays usable otherwise; the log sink is kept (it
 * belongs to whoever opened the handle). For a caller whose callbacks point
 * into a frame that is about to go (a daemon's run) while t lives on. Call
 * it from the thread that drives t; NULL is fine. */
void altar_transport_detach(altar_transport_t *t);

/* ---- helpers ------------------------------------------------------------ */

/* Kafka's murmur2 (seed 0x9747b28c) of key, as a signed 32-bit value. */
int32_t altar_murmur2(const void *key, size_t len);
/* The partition a key maps to among n: (murmur2(key) & 0x7fffffff) % n,
 * identical to Kafka's Java default and librdkafka's murmur2 partitioner. */
int32_t altar_partition_for_key(const void *key, size_t len, int32_t n_partitions);
/* 0 when name is a legal topic name (1..249 chars of [A-Za-z0-9._-], not
 * "." or ".."), else ALTAR_EINVAL with err naming `what` (e.g. "topic"). */
int altar_transport_check_name(const char *what, const char *name, altar_error_t *err);

/* ---- operations --------------------------------------------------------- */

/* The name t's transport is registered under ("kafka", "local"). */
const char *altar_transport_name(const altar_transport_t *t);

/* --- producing --- */
/* Enqueues rec (copied) and returns; its delivery report comes later from
 * poll or flush. Returns 0, ALTAR_EAGAIN (queue full: poll, then retry),
 * or an error with no report to follow (e.g. ALTAR_ENOTFOUND for an
 * unknown topic/partition, ALTAR_ETOOBIG). */
int altar_transport_produce(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err);
/* Serves delivery reports, waiting up to timeout_ms (0 = don't wait) for
 * one. Returns the number of reports served (>= 0). */
int altar_transport_poll(altar_transport_t *t, int timeout_ms);
/* Waits until every produced record has its report (served here), at most
 * timeout_ms (-1 = no limit). 0 or ALTAR_ETIMEOUT. */
int altar_transport_flush(altar_transport_t *t, int timeout_ms, altar_error_t *err);

/* --- topics --- */
/* Creates topic with partitions (>= 1) and returns once it can be produced
 * to and listed. ALTAR_EEXIST when it exists. */
int altar_transport_create_topic(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err);
/* Lists every topic (topic NULL) or just one (ALTAR_ENOTFOUND if absent)
 * with beginning and end offsets per partition. *plist is malloc'd; free it
 * with altar_topic_list_free. */
int altar_transport_list_topics(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                                altar_error_t *err);
/* create_topic with per-topic settings (see the ops' create_topic_config);
 * a transport without them creates the topic with its own. */
int altar_transport_create_topic_config(altar_transport_t *t, const char *topic, int32_t partitions,
                                        const altar_strmap_t *config, altar_error_t *err);
/* How long topic keeps records, -1 = forever (ALTAR_ENOTSUP: not known). */
int altar_transport_topic_retention_ms(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err);
/* What the transport's next retention pass deletes of the log it keeps
 * itself (the embedded log; a broker's retention is the broker's). */
typedef struct altar_retention_due {
  uint64_t segments; /* whole segments, across every topic and partition */
  uint64_t bytes;    /* their allocated bytes */
} altar_retention_due_t;
/* *pdue (zeroed first) = what retention would delete if it ran now, decided
 * as it decides (see the ops' retention_due). Any thread, beside the
 * handle's other calls: for a sampler thread, not a daemon's loop (it lists
 * the log's directories). ALTAR_ENOTSUP: the transport keeps no log of its
 * own. */
int altar_transport_retention_due(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err);
/* Deletes a partition's records before offset `before` (see the ops' delete_records). */
int altar_transport_delete_records(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                   int64_t *pbeginning, altar_error_t *err);

/* --- consuming --- */
/* Joins group for topics; assignments arrive through cb (NULL = none)
 * during consume, leave or close. One subscription per handle (a second
 * call is ALTAR_ESTATE and keeps the callback already there). */
int altar_transport_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n_topics,
                              altar_rebalance_cb cb, void *cb_ctx, altar_error_t *err);
/* Reads the given partitions without a group (no commits, no rebalance),
 * each from parts[i].offset. Exclusive with subscribe. ALTAR_ENOTSUP when
 * the transport cannot. */
int altar_transport_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
/* Waits up to timeout_ms for the next record: 0 with *pmsg set (free with
 * altar_msg_free) or NULL when none came; else an error (e.g.
 * ALTAR_EINTEGRITY for a corrupt record, which is then skipped). *pmsg is
 * NULL unless a record is returned. Serves rebalance callbacks. */
int altar_transport_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err);
/* A descriptor to poll beside one's own that turns readable when consume
 * may have news, valid after a consume that returned no record; -1 when
 * the transport has none (wait inside consume instead). */
int altar_transport_wait_fd(altar_transport_t *t);
/* Stop / restart fetching from owned partitions; position is kept. */
int altar_transport_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar_transport_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
/* Moves an owned partition's position to offset (or BEGINNING/END). */
int altar_transport_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                         altar_error_t *err);
/* Commits offset (next to consume) and metadata (NULL = empty, at most
 * ALTAR_COMMIT_METADATA_MAX bytes) for an owned partition of the subscribed
 * group; returns once durable. ALTAR_ESTATE if the partition is not owned. */
int altar_transport_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                           const char *metadata, altar_error_t *err);
/* Committed offset and metadata of any group: *poffset ALTAR_OFFSET_INVALID
 * and *pmetadata NULL when none (set so before the call); else *pmetadata
 * is malloc'd (caller frees). */
int altar_transport_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                              int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err);
/* The current assignment: *pparts a malloc'd array (topic strings point
 * into the transport, valid until the next consume/close; free only the
 * array), offset = current position. *pparts NULL, *pn 0 first.
 * ALTAR_ENOTSUP when the transport cannot tell. */
int altar_transport_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err);
/* *pdone (false first) = true when there is an assignment and every
 * assigned partition has been consumed up to its end offset as of now.
 * ALTAR_ENOTSUP when the transport cannot tell. */
int altar_transport_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err);
/* *pn (0 first) = the live members of group that consume topic.
 * ALTAR_ENOTSUP when the transport cannot tell. */
int altar_transport_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                                  size_t *pn, altar_error_t *err);
/* Leaves the consumer group now, keeping the producer side: owned
 * partitions are revoked through the rebalance callback within the call.
 * ALTAR_ENOTSUP when the transport cannot (close the handle to leave). */
int altar_transport_leave(altar_transport_t *t, altar_error_t *err);
/* Per-partition end, committed and lag of group on topic (NULL = every
 * topic the group has committed on). *plist (NULL first) is malloc'd; free
 * it with altar_lag_list_free. */
int altar_transport_lag(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                        altar_lag_list_t **plist, altar_error_t *err);

/* pends[i] (n entries, caller's array) = the end offset of topic's partition
 * parts[i], or ALTAR_OFFSET_INVALID when the topic has no such partition;
 * cheap enough to poll every few seconds (kafka answers from the last fetch
 * response of a partition t reads), not meant for every record. 0 or a
 * negative code (ALTAR_ENOTFOUND: no such topic). */
int altar_transport_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                                int64_t *pends, altar_error_t *err);

ALTAR_API_END

#endif
