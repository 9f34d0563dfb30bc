/* Cancelling a job: a "cancel" control message on every partition a shard
 * of the job can be on (the jobs topic and each pool's `<jobs>.<pool>`
 * topic), where the workers read it in order with the jobs, and on every
 * partition of the status topic, where the reconciler reads it in order
 * with each group's events (schemas/README.md, "control"). */
#include "producer/job_queue.h"

#include "altar/codec.h"
#include "altar/pools.h"
#include "core/unconst.h"

#include <string.h>
#include <time.h>

/* The topics a job's shards and status events can be on: the jobs topic,
 * every `<jobs>.<pool>` topic that exists, and the status topic. */
static bool wanted(const altar_topics_t *topics, const char *topic) {
  if (!strcmp(topic, topics->jobs) || !strcmp(topic, topics->status)) return true;
  size_t jl = strlen(topics->jobs);
  return !strncmp(topic, topics->jobs, jl) && topic[jl] == '.' &&
         altar_pool_check("pool", topic + jl + 1, NULL) == ALTAR_OK;
}

static int send_one(altar_transport_t *t, const char *topic, int32_t partition, const char *job, const char *group,
                    const char *who, altar_error_t *err) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  altar_control_msg_t c = {.v = ALTAR_SCHEMA_VERSION,
                           .event = ALTAR_CTL_CANCEL,
                           .partition = partition,
                           .job_id = ALTAR__UNCONST(job),
                           .group_key = ALTAR__UNCONST(group),
                           .worker = ALTAR__UNCONST(who),
                           .ts = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9};
  altar_buf_t b = {0};
  int rc = altar_encode_control(&c, &b, err);
  altar_produce_rec_t rec = {.topic = topic, .partition = partition, .value = b.data, .value_len = b.len};
  for (int tries = 0; !rc; tries++) {
    rc = altar_transport_produce(t, &rec, err);
    if (rc != ALTAR_EAGAIN || tries > 1000) break;
    altar_transport_poll(t, 10);
  }
  altar_buf_free(&b);
  return rc;
}

int altar__job_cancel_send(altar_transport_t *t, const altar_topics_t *topics, const char *job_id,
                           const char *group_key, const char *who, size_t *psent, size_t *ptopics, altar_error_t *err) {
  size_t sent = 0, n_topics = 0;
  if (psent) *psent = 0;
  if (ptopics) *ptopics = 0;
  if (!job_id || !*job_id || strlen(job_id) > ALTAR_CANCEL_JOB_ID_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "job_id: must be 1..%d bytes", ALTAR_CANCEL_JOB_ID_MAX);
  if (group_key && (!*group_key || strlen(group_key) > ALTAR_CANCEL_GROUP_KEY_MAX))
    return altar_error_set(err, ALTAR_EINVAL, "group_key: must be 1..%d bytes", ALTAR_CANCEL_GROUP_KEY_MAX);
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, NULL, 10000, &tl, err);
  bool status_seen = false;
  /* The status topic first: a worker that reads the cancel on a jobs topic
   * answers with a failed "cancelled" event on the status topic, and the
   * reconciler must meet the cancel there before that event, or it would
   * take the failure for an ordinary one (and dead-letter the group). */
  for (int pass = 0; pass < 2; pass++) {
    /* ... acknowledged there before any jobs topic gets it: a log keeps no
     * order across partitions of its own accord. */
    if (pass == 1 && !rc) rc = altar_transport_flush(t, 30000, err);
    for (size_t i = 0; !rc && i < tl->n_topics; i++) {
      const altar_topic_info_t *ti = &tl->topics[i];
      bool is_status = !strcmp(ti->name, topics->status);
      if (is_status != (pass == 0) || !wanted(topics, ti->name)) continue;
      status_seen |= is_status;
      n_topics++;
      for (size_t p = 0; !rc && p < ti->n_partitions; p++, sent++)
        rc = send_one(t, ti->name, ti->partitions[p].partition, job_id, group_key, who, err);
    }
  }
  altar_topic_list_free(tl);
  if (!rc && !status_seen)
    rc = altar_error_set(err, ALTAR_ENOTFOUND, "no status topic %s here: is this the fleet's config?", topics->status);
  if (!rc) rc = altar_transport_flush(t, 30000, err);
  if (psent) *psent = sent;
  if (ptopics) *ptopics = n_topics;
  return rc;
}
