/* kafka transport: open and close, the ops table, error mapping, and the
 * log wiring that keeps librdkafka's lines on the caller's thread and free
 * of secrets. */
#include "transports/kafka_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

bool altar__kafka_retriable(rd_kafka_resp_err_t code) {
  switch (code) {
  case RD_KAFKA_RESP_ERR__TRANSPORT:
  case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
  case RD_KAFKA_RESP_ERR__TIMED_OUT:
  case RD_KAFKA_RESP_ERR__QUEUE_FULL:
  case RD_KAFKA_RESP_ERR__WAIT_COORD:
  case RD_KAFKA_RESP_ERR__IN_PROGRESS:
  case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
  case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
  case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
  case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
  case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
  case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
  case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
  case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
  case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
  case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
  case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
  case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
  case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART: /* right after creation, metadata lags */ return true;
  default:
    /* librdkafka 2.0.2 can hand back an undefined code after a timed-out
     * coordinator lookup; nothing says the next try would fail too. */
    return strchr(rd_kafka_err2name(code), '?') != NULL;
  }
}

static int map_code(rd_kafka_resp_err_t code) {
  switch (code) {
  case RD_KAFKA_RESP_ERR__TIMED_OUT:
  case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
  case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
  case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT: return ALTAR_ETIMEOUT;
  case RD_KAFKA_RESP_ERR__QUEUE_FULL: return ALTAR_EAGAIN;
  case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
  case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
  case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
  case RD_KAFKA_RESP_ERR__UNKNOWN_GROUP:
  case RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND: return ALTAR_ENOTFOUND;
  case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
  case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
  case RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE: return ALTAR_ETOOBIG;
  case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS: return ALTAR_EEXIST;
  case RD_KAFKA_RESP_ERR__STATE:
  case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
  case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
  case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
  case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
  case RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST: return ALTAR_ESTATE;
  case RD_KAFKA_RESP_ERR__INVALID_ARG:
  case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
  case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
  case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR: return ALTAR_EINVAL;
  case RD_KAFKA_RESP_ERR__DESTROY: return ALTAR_ECANCELED;
  default: return ALTAR_ETRANSPORT;
  }
}

int altar__kafka_err(altar__kafka_t *k, altar_error_t *err, rd_kafka_resp_err_t code, const char *fmt, ...) {
  int rc = map_code(code);
  if (!err) return rc;
  char ctx[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  char msg[ALTAR_ERRMSG_MAX];
  char last[256] = "";
  /* For connection-level failures the broker's own complaint says why. */
  if (k && (code == RD_KAFKA_RESP_ERR__TIMED_OUT || code == RD_KAFKA_RESP_ERR__TRANSPORT ||
            code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || code == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT))
    altar__kafka_last_error(k, last, sizeof last);
  const char *sep = *last ? "; last broker error: " : "";
  /* A size refusal names the settings that bound it. */
  if (code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || code == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE) {
    snprintf(last, sizeof last,
             "larger than the producer's transport.kafka.message.max.bytes or the topic's max.message.bytes "
             "(altar creates its topics with %s; an existing topic keeps its own)",
             ALTAR__KAFKA_MESSAGE_MAX_BYTES);
    sep = ": ";
  }
  snprintf(msg, sizeof msg, "%s: %s (%s)%s%s", ctx, rd_kafka_err2str(code), rd_kafka_err2name(code), sep, last);
  altar__kafka_redact(k ? &k->sec : NULL, msg, sizeof msg);
  if (altar__kafka_retriable(code)) return altar_error_set_retriable(err, rc, "%s", msg);
  return altar_error_set(err, rc, "%s", msg);
}

void altar__kafka_last_error(altar__kafka_t *k, char *buf, size_t cap) {
  pthread_mutex_lock(&k->lock);
  snprintf(buf, cap, "%s", k->last_error);
  pthread_mutex_unlock(&k->lock);
}

__attribute__((format(printf, 3, 0))) static void vlog(altar__kafka_t *k, int level, const char *fmt, va_list ap) {
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  altar__kafka_redact(&k->sec, line, sizeof line);
  altar_transport_log(k->t, level, "%s", line);
}

void altar__kafka_warn(altar__kafka_t *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(k, 4, fmt, ap);
  va_end(ap);
}

static void klog(altar__kafka_t *k, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void klog(altar__kafka_t *k, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(k, level, fmt, ap);
  va_end(ap);
}

/* ---- log wiring --------------------------------------------------------- */

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  altar__kafka_t *k = rd_kafka_opaque(rk);
  if (!k) return;
  /* Shared properties are set on every handle; librdkafka's note that a
   * consumer property is ignored by a producer is only noise. */
  if (strcmp(fac, "CONFWARN") == 0 && strstr(buf, "will be ignored by this")) return;
  klog(k, level, "%s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque) {
  altar__kafka_t *k = opaque;
  if (!k) return;
  char line[512];
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char fatal[256];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, fatal, sizeof fatal);
    snprintf(line, sizeof line, "fatal: %s: %s", rd_kafka_err2name(orig), fatal);
  } else {
    snprintf(line, sizeof line, "%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)code), reason);
  }
  altar__kafka_redact(&k->sec, line, sizeof line);
  pthread_mutex_lock(&k->lock);
  snprintf(k->last_error, sizeof k->last_error, "%s", line);
  pthread_mutex_unlock(&k->lock);
  klog(k, code == RD_KAFKA_RESP_ERR__FATAL ? 3 : 4, "%s", line);
}

void altar__kafka_conf_wire(altar__kafka_t *k, rd_kafka_conf_t *conf) {
  char errstr[128];
  rd_kafka_conf_set(conf, "log.queue", "true", errstr, sizeof errstr);
  rd_kafka_conf_set_log_cb(conf, log_cb);
  rd_kafka_conf_set_error_cb(conf, error_cb);
  rd_kafka_conf_set_opaque(conf, k);
}

void altar__kafka_handle_wire(altar__kafka_t *k, rd_kafka_t *rk) {
  (void)k;
  rd_kafka_set_log_queue(rk, NULL);
}

/* ---- open / close -------------------------------------------------------- */

static int int_setting(const altar_strmap_t *cfg, const char *key, long def, long min, long max, int *pval,
                       altar_error_t *err) {
  const char *v = cfg ? altar_strmap_get(cfg, key) : NULL;
  if (!v) {
    *pval = (int)def;
    return ALTAR_OK;
  }
  char *end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || n < min || n > max)
    return altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: must be an integer in [%ld, %ld], got \"%s\"", key,
                           min, max, v);
  *pval = (int)n;
  return ALTAR_OK;
}

static void kafka_free(altar__kafka_t *k) {
  if (!k) return;
  altar__kafka_pos_clear(k);
  if (k->assignment_store) rd_kafka_topic_partition_list_destroy(k->assignment_store);
  free(k->group);
  altar_strmap_clear(&k->props);
  altar__kafka_secrets_clear(&k->sec);
  pthread_mutex_destroy(&k->lock);
  pthread_mutex_destroy(&k->peek_lock);
  free(k);
}

static int kafka_open(altar_transport_t *t, const altar_strmap_t *config, altar_error_t *err) {
  altar__kafka_t *k = calloc(1, sizeof *k);
  if (!k) return altar_error_set(err, ALTAR_ENOMEM, "transport kafka: out of memory");
  pthread_mutex_init(&k->lock, NULL);
  pthread_mutex_init(&k->peek_lock, NULL);
  k->t = t;
  int rc = int_setting(config, "altar.timeout.ms", 30000, 100, 3600000, &k->timeout_ms, err);
  if (!rc) rc = int_setting(config, "altar.close.timeout.ms", 10000, 0, 3600000, &k->close_timeout_ms, err);
  if (!rc) rc = int_setting(config, "altar.replication.factor", -1, -1, 32767, &k->replication_factor, err);
  if (!rc && config)
    for (size_t i = 0; i < config->n && !rc; i++)
      if (!strncmp(config->keys[i], "altar.", 6) && strcmp(config->keys[i], "altar.timeout.ms") &&
          strcmp(config->keys[i], "altar.close.timeout.ms") && strcmp(config->keys[i], "altar.replication.factor"))
        rc = altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: unknown altar setting", config->keys[i]);
  if (!rc &&
      !(config && (altar_strmap_get(config, "bootstrap.servers") || altar_strmap_get(config, "metadata.broker.list") ||
                   altar_strmap_get(config, "test.mock.num.brokers"))))
    rc = altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.bootstrap.servers: required (host:port[,host:port...])");
  if (!rc && config && altar_strmap_copy(&k->props, config))
    rc = altar_error_set(err, ALTAR_ENOMEM, "transport kafka: out of memory");
  if (rc) {
    kafka_free(k);
    return rc;
  }
  rd_kafka_conf_t *conf = altar__kafka_conf_build(config, ALTAR__KAFKA_PRODUCER, NULL, &k->sec, err);
  if (!conf) {
    kafka_free(k);
    return err ? err->code : ALTAR_ECONFIG;
  }
  altar__kafka_conf_wire(k, conf);
  altar__kafka_producer_conf(conf);
  char errstr[512];
  k->prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!k->prod) {
    rd_kafka_conf_destroy(conf);
    altar__kafka_redact(&k->sec, errstr, sizeof errstr);
    altar_error_set(err, ALTAR_ECONFIG, "transport kafka: cannot create the producer: %s", errstr);
    kafka_free(k);
    return ALTAR_ECONFIG;
  }
  altar__kafka_handle_wire(k, k->prod);
  altar_transport_set_impl(t, k);
  return ALTAR_OK;
}

static void kafka_close(altar_transport_t *t) {
  altar__kafka_t *k = altar__kafka(t);
  if (!k) return;
  altar__kafka_spares_close(k);
  altar__kafka_consumer_close(k);
  altar__kafka_producer_close(k);
  kafka_free(k);
  altar_transport_set_impl(t, NULL);
}

const altar_transport_ops_t altar_transport_kafka_ops = {
    .name = "kafka",
    .caps = ALTAR_TRANSPORT_CAP_MULTI_HOST | ALTAR_TRANSPORT_CAP_MULTI_PROCESS,
    .open = kafka_open,
    .close = kafka_close,
    .produce = altar__kafka_produce,
    .poll = altar__kafka_poll,
    .flush = altar__kafka_flush,
    .create_topic = altar__kafka_create_topic,
    .delete_records = altar__kafka_delete_records,
    .create_topic_config = altar__kafka_create_topic_config,
    .topic_retention_ms = altar__kafka_topic_retention_ms,
    .list_topics = altar__kafka_list_topics,
    .subscribe = altar__kafka_subscribe,
    .assign = altar__kafka_assign,
    .consume = altar__kafka_consume,
    .wait_fd = altar__kafka_wait_fd,
    .pause = altar__kafka_pause,
    .resume = altar__kafka_resume,
    .seek = altar__kafka_seek,
    .commit = altar__kafka_commit,
    .committed = altar__kafka_committed,
    .assignment = altar__kafka_assignment,
    .caught_up = altar__kafka_caught_up,
    .topic_members = altar__kafka_topic_members,
    .leave = altar__kafka_leave,
    .end_offsets = altar__kafka_end_offsets,
};
