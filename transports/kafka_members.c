/* kafka transport: which members of a group consume a topic, from the
 * group's description (Admin DescribeConsumerGroups): a member counts when
 * its assignment holds a partition of the topic. */
#include "transports/kafka_int.h"

#include <string.h>

int altar__kafka_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                               altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *pn = 0;
  int rc = altar_transport_check_name("group", group, err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (timeout_ms <= 0) timeout_ms = k->timeout_ms;
  char errstr[256];
  rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(k->prod, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
  rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof errstr);
  rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
  const char *groups[] = {group};
  rd_kafka_DescribeConsumerGroups(k->prod, groups, 1, opts, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
  if (!ev) {
    rc = altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__TIMED_OUT, "describe group %s", group);
  } else if (rd_kafka_event_error(ev)) {
    rc = altar__kafka_err(k, err, rd_kafka_event_error(ev), "describe group %s: %s", group,
                          rd_kafka_event_error_string(ev));
  } else {
    size_t cnt = 0;
    const rd_kafka_ConsumerGroupDescription_t **gs =
        rd_kafka_DescribeConsumerGroups_result_groups(rd_kafka_event_DescribeConsumerGroups_result(ev), &cnt);
    const rd_kafka_error_t *ge = cnt ? rd_kafka_ConsumerGroupDescription_error(gs[0]) : NULL;
    if (ge && rd_kafka_error_code(ge) != RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) {
      rc = altar__kafka_err(k, err, rd_kafka_error_code(ge), "describe group %s: %s", group, rd_kafka_error_string(ge));
    } else if (cnt && !ge) {
      size_t nm = rd_kafka_ConsumerGroupDescription_member_count(gs[0]);
      for (size_t i = 0; i < nm; i++) {
        const rd_kafka_MemberDescription_t *m = rd_kafka_ConsumerGroupDescription_member(gs[0], i);
        const rd_kafka_MemberAssignment_t *a = m ? rd_kafka_MemberDescription_assignment(m) : NULL;
        const rd_kafka_topic_partition_list_t *l = a ? rd_kafka_MemberAssignment_partitions(a) : NULL;
        bool has = false;
        for (int j = 0; l && j < l->cnt && !has; j++) has = !strcmp(l->elems[j].topic, topic);
        *pn += has;
      }
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_AdminOptions_destroy(opts);
  return rc;
}
