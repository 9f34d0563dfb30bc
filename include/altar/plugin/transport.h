/* altar — implementing a log transport: what a plug-in needs beyond the user's
 * altar/transport.h: the ops table, the handle (so the accessors stay
 * inline), the registry, the built-in tables and the helpers an
 * implementation calls.
 *
 * Every operation takes the handle; an implementation keeps its state with
 * altar_transport_set_impl (in open) and reads it back with
 * altar_transport_impl. Optional operations (NULL in the table) get their
 * default once, when the handle is opened (core/transport.c): leave, assign,
 * assignment, caught_up, topic_members and retention_due answer ALTAR_ENOTSUP, lag is built
 * from list_topics and committed, end_offsets from list_topics. A table lacking a required operation is
 * refused at open and at registration (ALTAR_EINVAL naming it). */
#ifndef ALTAR_PLUGIN_TRANSPORT_H
#define ALTAR_PLUGIN_TRANSPORT_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/plugin_keys.h"
#include "altar/transport.h"

/* Declared capabilities (ops->caps). */
#define ALTAR_TRANSPORT_CAP_MULTI_HOST 0x1u    /* members may sit on several machines */
#define ALTAR_TRANSPORT_CAP_MULTI_PROCESS 0x2u /* several processes may share it */

struct altar_transport_ops {
  const char *name; /* registry key: "kafka", "local" */
  unsigned caps;    /* ALTAR_TRANSPORT_CAP_* */
  /* The keys this transport reads directly under `transport:` in
   * altar.yaml, ended by ALTAR_PLUGIN_KEYS_END, so the config reader and
   * --set refuse a typo with the file, the line and a suggestion
   * (altar/plugin_keys.h). NULL = not checked (kafka: any librdkafka
   * property, under transport.kafka). */
  const altar_plugin_key_t *config_keys;

  /* Builds the private state from config and stores it with
   * altar_transport_set_impl(t, impl) (NULL = no keys; for kafka every librdkafka
   * property passes through; local reports keys it does not know through
   * the log and ignores them, since the config file keeps both transports'
   * keys in one map; the config reader refuses typos there through
   * config_keys). 0 or a negative code with err set. Required. */
  int (*open)(altar_transport_t *t, const altar_strmap_t *config, altar_error_t *err);
  /* Leaves the group (REVOKE callback for what is owned), waits up to a
   * short bounded time for outstanding deliveries (firing their reports),
   * frees altar_transport_impl(t). Required. */
  void (*close)(altar_transport_t *t);
  /* Leaves the subscribed group now, keeping the handle open: within the
   * call every owned partition is revoked through the rebalance callback
   * (commits still work there), then the group is told this member is
   * gone, so the other members take the partitions over at once rather
   * than after a session timeout. Afterwards produce, poll and flush work
   * as before; consume returns no records (0, *pmsg NULL, after waiting
   * its timeout); commit, seek, pause and resume are ALTAR_ESTATE; a
   * second leave is a no-op. A handle that never subscribed: no-op.
   * Optional (default ALTAR_ENOTSUP: close the handle to leave). */
  int (*leave)(altar_transport_t *t, altar_error_t *err);

  /* --- producing ------------------------------------------------------- */
  /* Enqueues rec (copied) and returns; its delivery report comes later from
   * poll or flush. Returns 0, ALTAR_EAGAIN (queue full: poll, then retry),
   * or an error with no report to follow (e.g. ALTAR_ENOTFOUND for an
   * unknown topic/partition, ALTAR_ETOOBIG). Required. */
  int (*produce)(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err);
  /* Serves delivery reports, waiting up to timeout_ms (0 = don't wait) for
   * one. Returns the number of reports served (>= 0). Required. */
  int (*poll)(altar_transport_t *t, int timeout_ms);
  /* Waits until every produced record has its report (served here), at
   * most timeout_ms (-1 = no limit). 0 or ALTAR_ETIMEOUT. Required. */
  int (*flush)(altar_transport_t *t, int timeout_ms, altar_error_t *err);

  /* --- topics ---------------------------------------------------------- */
  /* Creates topic with partitions (>= 1) and returns once it can be
   * produced to and listed. ALTAR_EEXIST when it exists (callers that only
   * need it to exist treat that as success). Required. */
  int (*create_topic)(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err);
  /* Lists every topic (topic NULL) or just one (ALTAR_ENOTFOUND if absent)
   * with beginning and end offsets per partition. *plist is malloc'd; the
   * caller frees it with altar_topic_list_free. Required. */
  int (*list_topics)(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                     altar_error_t *err);

  /* --- consuming ------------------------------------------------------- */
  /* Joins group for topics; assignments arrive through cb during consume.
   * One subscription per handle (a second call is ALTAR_ESTATE). Members
   * of one group may subscribe different topics: each topic's partitions
   * are shared among the members that subscribe it. Required. */
  int (*subscribe)(altar_transport_t *t, const char *group, const char *const *topics, size_t n_topics,
                   altar_rebalance_cb cb, void *cb_ctx, altar_error_t *err);
  /* Reads the given partitions without a group (no commits, no rebalance):
   * each from parts[i].offset (an offset, ALTAR_OFFSET_BEGINNING or _END).
   * Exclusive with subscribe. Optional (default ALTAR_ENOTSUP). */
  int (*assign)(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
  /* Waits up to timeout_ms for the next record of the assignment. 0 with
   * *pmsg set (caller frees with altar_msg_free) or NULL when none came;
   * else an error (e.g. ALTAR_EINTEGRITY for a corrupt record, which is
   * then skipped; the next call goes on). Serves rebalance callbacks.
   * Records of one partition come in offset order. Required. */
  int (*consume)(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err);
  /* For a caller that waits on several sources at once (the worker: the log
   * and its tasks): a descriptor, owned by the transport, that polls
   * readable when consume may have news (a write to an assigned partition);
   * the caller then consumes with timeout 0. Meaningful only after a
   * consume that returned no record; -1 when there is none (the caller
   * waits inside consume). Optional (default -1). */
  int (*wait_fd)(altar_transport_t *t);
  /* Stop / restart fetching from owned partitions; position is kept.
   * Required. */
  int (*pause)(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
  int (*resume)(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
  /* Moves an owned partition's position to offset (or BEGINNING/END); the
   * next record consumed from it is at that offset. Required. */
  int (*seek)(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, altar_error_t *err);
  /* Commits offset (next to consume) and metadata (NULL = empty, at most
   * ALTAR_COMMIT_METADATA_MAX bytes) for an owned partition of the
   * subscribed group; returns once durable. ALTAR_ESTATE if the partition
   * is not owned (anymore). Required. */
  int (*commit)(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, const char *metadata,
                altar_error_t *err);
  /* Committed offset and metadata of any group (not only the subscribed
   * one): *poffset ALTAR_OFFSET_INVALID and *pmetadata NULL when none; else
   * *pmetadata is malloc'd (caller frees). Required. */
  int (*committed)(altar_transport_t *t, const char *group, const char *topic, int32_t partition, int timeout_ms,
                   int64_t *poffset, char **pmetadata, altar_error_t *err);
  /* The current assignment: *pparts malloc'd array (topic strings point into
   * the transport, valid until the next consume/close; free only the array),
   * offset = current position. Optional (default ALTAR_ENOTSUP). */
  int (*assignment)(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err);
  /* *pdone = true when there is an assignment and every assigned partition
   * has been consumed up to its end offset as of now (for `--exit`).
   * Optional (default ALTAR_ENOTSUP). */
  int (*caught_up)(altar_transport_t *t, bool *pdone, altar_error_t *err);
  /* Per-partition end, committed and lag of group on topic (NULL = every
   * topic the group has committed on, or every topic). Optional: the
   * default builds it from list_topics and committed. */
  int (*lag)(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, altar_lag_list_t **plist,
             altar_error_t *err);
  /* *pn = the live members of group that consume topic (local: that
   * subscribe to it; kafka: that hold one of its partitions), for telling
   * a job that waits for a pool nobody serves. Optional (default
   * ALTAR_ENOTSUP: unknown). */
  int (*topic_members)(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                       altar_error_t *err);
  /* Deletes topic/partition's records before offset `before`, as retention
   * would (kafka: DeleteRecords; local: the whole segments below it, the
   * newest segment always kept). *pbeginning = the oldest offset kept
   * afterwards. Optional (default ALTAR_ENOTSUP). */
  int (*delete_records)(altar_transport_t *t, const char *topic, int32_t partition, int64_t before, int64_t *pbeginning,
                        altar_error_t *err);
  /* create_topic with topic settings (e.g. retention.ms, cleanup.policy).
   * Optional: without it the settings are not per topic and create_topic
   * is called. The local log keeps retention.ms and retention.bytes per
   * topic (over its transport-wide ones) and refuses anything else. */
  int (*create_topic_config)(altar_transport_t *t, const char *topic, int32_t partitions, const altar_strmap_t *config,
                             altar_error_t *err);
  /* *pms = how long topic keeps records (-1 = forever). Optional (default
   * ALTAR_ENOTSUP). */
  int (*topic_retention_ms)(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err);
  /* pends[i] = the end offset of topic's partition parts[i], as cheaply as
   * the transport knows it (kafka: the high watermark of the last fetch
   * response for a partition this handle reads, else one broker query;
   * local: the partition's end, reading only what was appended since the
   * last call on this handle); ALTAR_OFFSET_INVALID for a partition the
   * topic lacks. For gauges polled every few seconds, not per record.
   * Optional: the default reads list_topics. */
  int (*end_offsets)(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                     int64_t *pends, altar_error_t *err);
  /* *pdue (zeroed by core) = the segments and allocated bytes the
   * transport's own retention would delete if it ran now, decided exactly
   * as that pass decides, from file names and metadata (never record
   * contents). Called from any thread, beside the handle's other calls:
   * read only what open fixed and the disk. Optional (default
   * ALTAR_ENOTSUP: no log of its own; kafka's retention is the broker's). */
  int (*retention_due)(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err);
};

/* A transport instance. Made by altar_transport_open (or _open_ops); freed
 * by altar_transport_close. Implementers read opts (through
 * altar_transport_log and altar_transport_deliver); nobody outside
 * core/transport.c writes its fields: callers change the delivery callback
 * through altar_transport_set_delivery, the subscriber's rebalance callback
 * is set by altar_transport_subscribe (implementations get
 * altar__transport_rebalance instead) so that altar_transport_detach can
 * drop it. */
struct altar_transport {
  altar_transport_ops_t ops;          /* the table with every optional operation
                                         filled with its default, once, at open */
  const altar_transport_ops_t *table; /* the table as given (identity, registry) */
  void *impl;
  altar_transport_opts_t opts;
  altar_rebalance_cb rebalance_cb;
  void *rebalance_ctx;
};

/* The implementation's private state (NULL before open stores it). */
static inline void *altar_transport_impl(const altar_transport_t *t) { return t->impl; }
static inline void altar_transport_set_impl(altar_transport_t *t, void *impl) { t->impl = impl; }

/* ---- registry (cli/plugins.c registers the built-ins) ------------------- */

/* Registers ops under ops->name. The same ops again is a no-op; other ops
 * under a taken name is ALTAR_EEXIST; a table without a name or lacking a
 * required operation is ALTAR_EINVAL. Not thread-safe: call at start-up. */
int altar_transport_register(const altar_transport_ops_t *ops);
const altar_transport_ops_t *altar_transport_lookup(const char *name); /* or NULL */

/* The built-in local transport's ops (transports/local_*.c). */
extern const altar_transport_ops_t altar_transport_local_ops;

/* ---- helpers for implementers ------------------------------------------- */

/* Logs through t's opts.on_log, or to stderr for level <= 4. */
void altar_transport_log(altar_transport_t *t, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fires t's opts.on_delivery (if set, and not detached) with dr. */
void altar_transport_deliver(altar_transport_t *t, const altar_delivery_t *dr);
/* What altar_transport_subscribe hands the implementation as the rebalance
 * callback (ctx unused): calls the subscriber's callback unless detached. */
void altar__transport_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                void *ctx);

ALTAR_API_END

#endif
