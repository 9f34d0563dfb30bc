/* The dead-letter queue: a bounded copy of a message the worker cannot run,
 * with its reason, source and size as headers. */
#include "worker/worker_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* finishes: the copy's ack finishes the job's offset (the DLQ is its only
 * outcome); false when a failed status event is its outcome. */
void altar__worker_dead_letter(worker_t *w, const altar_msg_t *m, const char *reason, bool finishes) {
  pending_t *p = altar__worker_pending_new(w, w->o->topics->dlq, NULL);
  if (!p) {
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "dead-lettering", NULL);
    return;
  }
  if (m->key && m->key_len) {
    p->key = strndup(m->key, m->key_len < 1024 ? m->key_len : 1024);
  }
  size_t keep = m->value_len < ALTAR_DLQ_MAX_VALUE ? m->value_len : ALTAR_DLQ_MAX_VALUE;
  char src[512], size[32];
  snprintf(src, sizeof src, "%s/%" PRId32 "/%" PRId64, m->topic, m->partition, m->offset);
  snprintf(size, sizeof size, "%zu", m->value_len);
  if ((keep && altar_buf_append(&p->value, m->value, keep)) ||
      altar__worker_pending_add_header(p, ALTAR_DLQ_REASON_HEADER, reason) ||
      altar__worker_pending_add_header(p, ALTAR_DLQ_SOURCE_HEADER, src) ||
      altar__worker_pending_add_header(p, ALTAR_DLQ_SIZE_HEADER, size)) {
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "dead-lettering", NULL);
    return;
  }
  p->finishes = finishes;
  p->src_topic = strdup(m->topic);
  p->src_partition = m->partition;
  p->src_offset = m->offset;
  if (!p->src_topic || altar__worker_pending_send(w, p)) {
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, ALTAR_ETRANSPORT, "producing to the dead-letter topic", NULL);
    return;
  }
  w->stats.dead_lettered++;
  if (finishes) altar__worker_log(w, "dead-lettered %s: %s", src, reason);
}
