/* kafka transport: end offsets for lag gauges. A partition this handle
 * consumes answers from the high watermark librdkafka cached from its last
 * fetch response (no request to the broker); any other partition costs one
 * ListOffsets query (on altar__kafka_offsets_handle's connection). */
#include "transports/kafka_int.h"

int altar__kafka_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                             int64_t *pends, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  for (size_t i = 0; i < n; i++) {
    int64_t lo = RD_KAFKA_OFFSET_INVALID, hi = RD_KAFKA_OFFSET_INVALID;
    /* Fetch responses refresh the cached value while the partition is read. */
    if (k->cons && rd_kafka_get_watermark_offsets(k->cons, topic, parts[i], &lo, &hi) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        hi >= 0) {
      pends[i] = hi;
      continue;
    }
    rd_kafka_resp_err_t code =
        rd_kafka_query_watermark_offsets(altar__kafka_offsets_handle(k), topic, parts[i], &lo, &hi, timeout_ms);
    if (code == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || code == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
        code == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
      /* No such partition, or no such topic (ALTAR_ENOTFOUND): the metadata says which. */
      altar_topic_list_t *tl = NULL;
      int rc = altar__kafka_list_topics(t, topic, timeout_ms, &tl, err);
      altar_topic_list_free(tl);
      if (rc) return rc;
      pends[i] = ALTAR_OFFSET_INVALID;
      continue;
    }
    if (code) return altar__kafka_err(k, err, code, "end offset of %s [%d]", topic, (int)parts[i]);
    pends[i] = hi;
  }
  return ALTAR_OK;
}
