/* altar — kafka transport internals shared by transports/kafka_*.c. */
#ifndef ALTAR_TRANSPORTS_KAFKA_INT_H
#define ALTAR_TRANSPORTS_KAFKA_INT_H

#include "altar/plugin/transport_kafka.h"
#include "transports/kafka_config.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A position the transport knows for a partition it reads: set by seek,
 * manual assign and every consumed record (librdkafka reports no position
 * before the first record, which caught_up needs). */
typedef struct altar__kafka_pos {
  char *topic;
  int32_t partition;
  int64_t offset; /* next offset to read; may be ALTAR_OFFSET_BEGINNING/END */
} altar__kafka_pos_t;

/* A consumer handle of some group, never subscribed: reads that group's
 * committed offsets, or commits to it (the offsets group). */
typedef struct altar__kafka_spare {
  rd_kafka_t *rk;
  char *group;
  uint64_t used;
} altar__kafka_spare_t;
#define ALTAR__KAFKA_SPARES 4
/* Suffix of the group that holds a consumer group's offsets (kafka_admin.c). */
#define ALTAR__KAFKA_OFFSETS_SUFFIX ".offsets"

typedef struct altar__kafka {
  altar__kafka_secrets_t sec; /* secret values, scrubbed from every message */
  altar_transport_t *t;
  altar_strmap_t props;   /* the config, kept to build the consumer later */
  int timeout_ms;         /* altar.timeout.ms */
  int close_timeout_ms;   /* altar.close.timeout.ms */
  int replication_factor; /* altar.replication.factor */
  rd_kafka_t *prod;       /* producer; also serves admin and metadata calls */
  rd_kafka_t *cons;       /* consumer, made by subscribe or assign */
  bool subscribed;
  bool left; /* leave() ran: the group is left, consume reads nothing */
  /* The consumer queue's IO event pipe (wait_fd): librdkafka writes to
   * wake_w when the queue gets an element after being empty. */
  bool wake_on;
  int wake_r, wake_w;
  /* While the user's ASSIGN callback runs, before librdkafka is given the
   * partitions: their start offsets (seek sets them) and pauses to apply. */
  rd_kafka_topic_partition_list_t *assigning;
  bool *assigning_paused;
  char *group; /* the subscribed group, NULL otherwise */
  altar_rebalance_cb rb_cb;
  void *rb_ctx;
  uint64_t dr_served;                                /* delivery reports fired so far */
  rd_kafka_topic_partition_list_t *assignment_store; /* backs assignment()'s topic strings */
  altar__kafka_pos_t *pos;
  size_t n_pos;
  altar__kafka_spare_t spares[ALTAR__KAFKA_SPARES]; /* consumers of other groups (committed, offsets group) */
  uint64_t spare_clock;
  pthread_mutex_t peek_lock; /* guards spares */
  pthread_mutex_t lock;      /* guards last_error (set from either serving thread) */
  char last_error[512];      /* last broker-level error, scrubbed; "" if none */
} altar__kafka_t;

static inline altar__kafka_t *altar__kafka(altar_transport_t *t) { return altar_transport_impl(t); }

/* The handle to ask end offsets on: the producer's connection when there is
 * one. On the consumer's, the broker answers a ListOffsets only after the
 * fetch long-poll ahead of it (fetch.wait.max.ms, 500 ms): 32 partitions
 * took 16 s. */
static inline rd_kafka_t *altar__kafka_offsets_handle(const altar__kafka_t *k) { return k->prod ? k->prod : k->cons; }

/* Sets err from a librdkafka error code: maps it to an ALTAR_E… code (an
 * unknown topic is ENOTFOUND, a timeout ETIMEOUT, a full queue EAGAIN, a
 * lost generation ESTATE, else ETRANSPORT), marks it retriable when
 * repeating may help, and writes "<context>: <librdkafka text> (<NAME>)"
 * with secrets scrubbed. Returns the ALTAR_E… code. */
int altar__kafka_err(altar__kafka_t *k, altar_error_t *err, rd_kafka_resp_err_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether a failed call with this code may succeed when repeated. */
bool altar__kafka_retriable(rd_kafka_resp_err_t code);
/* Copies the last broker-level error (e.g. "connection refused") into buf,
 * "" when none was seen. */
void altar__kafka_last_error(altar__kafka_t *k, char *buf, size_t cap);
/* Logs a warning through the transport's log sink, secrets scrubbed. */
void altar__kafka_warn(altar__kafka_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Installs the log, error and opaque wiring on conf (log lines are queued
 * and served by poll/consume, never fired from librdkafka's threads). */
void altar__kafka_conf_wire(altar__kafka_t *k, rd_kafka_conf_t *conf);
/* After rd_kafka_new: routes queued log lines to the handle's main queue. */
void altar__kafka_handle_wire(altar__kafka_t *k, rd_kafka_t *rk);

/* kafka_producer.c: installs the delivery report callback on conf. */
void altar__kafka_producer_conf(rd_kafka_conf_t *conf);
/* kafka_producer.c: waits for outstanding deliveries up to close_timeout_ms,
 * fails the rest with reports, destroys the producer. */
void altar__kafka_producer_close(altar__kafka_t *k);
/* kafka_consumer.c: leaves the group (REVOKE callback) and destroys the consumer. */
void altar__kafka_consumer_close(altar__kafka_t *k);
/* kafka_consumer.c: forgets the known positions. */
void altar__kafka_pos_clear(altar__kafka_t *k);

/* kafka_admin.c: "<group>.offsets" into out, ALTAR_EINVAL when too long. */
int altar__kafka_offsets_group(const char *group, char *out, size_t cap);
/* kafka_admin.c: commits l (offsets, metadata) to the subscribed group's
 * offsets group, synchronously. Fencing is the caller's. */
rd_kafka_resp_err_t altar__kafka_store_commit(altar__kafka_t *k, rd_kafka_topic_partition_list_t *l,
                                              altar_error_t *err);
/* kafka_admin.c: l's committed offsets of group: the higher of the offsets
 * group's and the group's own, per partition. */
rd_kafka_resp_err_t altar__kafka_committed_list(altar__kafka_t *k, const char *group,
                                                rd_kafka_topic_partition_list_t *l, int timeout_ms, altar_error_t *err);
/* kafka_admin.c: destroys the spare handles. */
void altar__kafka_spares_close(altar__kafka_t *k);

/* The operations, one file per concern. */
int altar__kafka_produce(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err);
int altar__kafka_poll(altar_transport_t *t, int timeout_ms);
int altar__kafka_flush(altar_transport_t *t, int timeout_ms, altar_error_t *err);

int altar__kafka_create_topic(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err);
int altar__kafka_create_topic_config(altar_transport_t *t, const char *topic, int32_t partitions,
                                     const altar_strmap_t *config, altar_error_t *err);
int altar__kafka_topic_retention_ms(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err);
int altar__kafka_delete_records(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                int64_t *pbeginning, altar_error_t *err);
int altar__kafka_list_topics(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                             altar_error_t *err);
int altar__kafka_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                           int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err);

int altar__kafka_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n_topics,
                           altar_rebalance_cb cb, void *cb_ctx, altar_error_t *err);
int altar__kafka_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__kafka_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err);
int altar__kafka_wait_fd(altar_transport_t *t);
int altar__kafka_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__kafka_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err);
int altar__kafka_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, altar_error_t *err);
int altar__kafka_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                        const char *metadata, altar_error_t *err);
int altar__kafka_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err);
int altar__kafka_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err);
int altar__kafka_leave(altar_transport_t *t, altar_error_t *err);

/* transport op end_offsets (kafka_end_offsets.c). */
int altar__kafka_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                             int64_t *pends, altar_error_t *err);

/* transport op topic_members (kafka_members.c). */
int altar__kafka_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                               altar_error_t *err);

#endif
