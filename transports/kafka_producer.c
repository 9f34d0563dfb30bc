/* kafka transport: the idempotent producer and its delivery reports. */
#include "transports/kafka_int.h"
#include "core/unconst.h"

#include <stdio.h>
#include <string.h>

/* Runs on the thread serving the producer (poll, flush, close): hands each
 * report to the caller with the opaque it gave to produce. */
static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  altar__kafka_t *k = opaque;
  const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
  char errstr[ALTAR_ERRMSG_MAX] = "";
  altar_delivery_t dr = {
      .topic = topic,
      .partition = m->partition,
      .offset = m->err ? -1 : m->offset,
      .err = 0,
      .errstr = NULL,
      .opaque = m->_private,
  };
  if (m->err) {
    altar_error_t e = {0};
    dr.err = altar__kafka_err(k, &e, m->err, "produce to %s [%d]", topic, (int)m->partition);
    snprintf(errstr, sizeof errstr, "%s", e.msg);
    dr.errstr = errstr;
  }
  k->dr_served++;
  altar_transport_deliver(k->t, &dr);
}

void altar__kafka_producer_conf(rd_kafka_conf_t *conf) { rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb); }

int altar__kafka_produce(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  if (!rec) return altar_error_set(err, ALTAR_EINVAL, "produce: record is NULL");
  int rc = altar_transport_check_name("topic", rec->topic, err);
  if (rc) return rc;
  if (rec->partition < ALTAR_PARTITION_ANY)
    return altar_error_set(err, ALTAR_EINVAL, "produce: partition %d is invalid", (int)rec->partition);
  if (rec->n_headers > ALTAR_HEADERS_MAX)
    return altar_error_set(err, ALTAR_ETOOBIG, "produce: %zu headers (at most %d)", rec->n_headers, ALTAR_HEADERS_MAX);
  if ((rec->key_len && !rec->key) || (rec->value_len && !rec->value))
    return altar_error_set(err, ALTAR_EINVAL, "produce: key or value length without data");
  rd_kafka_headers_t *hdrs = NULL;
  if (rec->n_headers) {
    hdrs = rd_kafka_headers_new(rec->n_headers);
    for (size_t i = 0; i < rec->n_headers; i++) {
      const altar_header_t *h = &rec->headers[i];
      if (!h->name || !*h->name || strlen(h->name) > ALTAR_HEADER_NAME_MAX) {
        rd_kafka_headers_destroy(hdrs);
        return altar_error_set(err, ALTAR_EINVAL, "produce: header %zu: name empty or longer than %d", i,
                               ALTAR_HEADER_NAME_MAX);
      }
      rd_kafka_header_add(hdrs, h->name, -1, h->value_len ? h->value : NULL, (ssize_t)h->value_len);
    }
  }
  rd_kafka_vu_t vu[8];
  size_t n = 0;
  vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_TOPIC, .u.cstr = rec->topic};
  vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_PARTITION, .u.i32 = rec->partition};
  vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_MSGFLAGS, .u.i = RD_KAFKA_MSG_F_COPY};
  vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_VALUE,
                            .u.mem = {ALTAR__UNCONST(rec->value), rec->value ? rec->value_len : 0}};
  if (rec->key)
    vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_KEY, .u.mem = {ALTAR__UNCONST(rec->key), rec->key_len}};
  if (rec->timestamp_ms) vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_TIMESTAMP, .u.i64 = rec->timestamp_ms};
  vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_OPAQUE, .u.ptr = rec->opaque};
  if (hdrs) vu[n++] = (rd_kafka_vu_t){.vtype = RD_KAFKA_VTYPE_HEADERS, .u.headers = hdrs};
  rd_kafka_error_t *e = rd_kafka_produceva(k->prod, vu, n);
  if (!e) return ALTAR_OK; /* the headers now belong to the message */
  if (hdrs) rd_kafka_headers_destroy(hdrs);
  rd_kafka_resp_err_t code = rd_kafka_error_code(e);
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char fatal[256];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(k->prod, fatal, sizeof fatal);
    rd_kafka_error_destroy(e);
    return altar__kafka_err(k, err, orig, "produce to %s: the producer failed for good: %s", rec->topic, fatal);
  }
  rd_kafka_error_destroy(e);
  return altar__kafka_err(k, err, code, "produce to %s [%d]", rec->topic, (int)rec->partition);
}

int altar__kafka_poll(altar_transport_t *t, int timeout_ms) {
  altar__kafka_t *k = altar__kafka(t);
  uint64_t before = k->dr_served;
  rd_kafka_poll(k->prod, timeout_ms < 0 ? -1 : timeout_ms);
  return (int)(k->dr_served - before);
}

int altar__kafka_flush(altar_transport_t *t, int timeout_ms, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  rd_kafka_resp_err_t code = rd_kafka_flush(k->prod, timeout_ms < 0 ? -1 : timeout_ms);
  /* rd_kafka_flush may leave reports queued when it returns on time. */
  rd_kafka_poll(k->prod, 0);
  if (code == RD_KAFKA_RESP_ERR_NO_ERROR) return ALTAR_OK;
  return altar__kafka_err(k, err, code, "flush: %d records still awaiting delivery after %d ms",
                          rd_kafka_outq_len(k->prod), timeout_ms);
}

void altar__kafka_producer_close(altar__kafka_t *k) {
  if (!k->prod) return;
  if (rd_kafka_flush(k->prod, k->close_timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    altar__kafka_warn(k, "close: %d records not acknowledged after %d ms; failing them", rd_kafka_outq_len(k->prod),
                      k->close_timeout_ms);
    rd_kafka_purge(k->prod, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    /* Purged records come back as failed reports; serve them (bounded). */
    for (int i = 0; i < 50 && rd_kafka_outq_len(k->prod) > 0; i++) rd_kafka_poll(k->prod, 100);
  }
  rd_kafka_poll(k->prod, 0);
  rd_kafka_destroy(k->prod);
  k->prod = NULL;
}
