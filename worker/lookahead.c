/* The worker's look-ahead (lookahead.h). Few partitions per worker: a
 * linear search over the queues is the cheapest lookup. */
#include "worker/lookahead.h"

#include "altar/error.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

static altar__lookahead_queue_t *find(const altar__lookahead_t *la, const char *topic, int32_t partition) {
  for (size_t i = 0; i < la->n_queues; i++)
    if (la->queues[i].partition == partition && !strcmp(la->queues[i].topic, topic)) return &la->queues[i];
  return NULL;
}

static size_t cost(const altar_msg_t *m) { return m->value_len + m->key_len + sizeof *m; }

int altar__lookahead_push(altar__lookahead_t *la, altar_msg_t *m, int64_t now_ms, bool control) {
  altar__lookahead_queue_t *q = find(la, m->topic, m->partition);
  if (!q) {
    if (ALTAR_GROW(la->queues, la->cap_queues, la->n_queues + 1)) return ALTAR_ENOMEM;
    char *topic = strdup(m->topic);
    if (!topic) return ALTAR_ENOMEM;
    q = &la->queues[la->n_queues++];
    *q = (altar__lookahead_queue_t){.topic = topic, .partition = m->partition};
  }
  if (q->head > 0 && q->n == q->cap) { /* reuse the popped front before growing */
    memmove(q->msgs, q->msgs + q->head, (q->n - q->head) * sizeof *q->msgs);
    memmove(q->since_ms, q->since_ms + q->head, (q->n - q->head) * sizeof *q->since_ms);
    memmove(q->control, q->control + q->head, (q->n - q->head) * sizeof *q->control);
    q->n -= q->head;
    q->head = 0;
  }
  if (ALTAR_GROW(q->msgs, q->cap, q->n + 1) || ALTAR_GROW(q->since_ms, q->cap_since, q->n + 1) ||
      ALTAR_GROW(q->control, q->cap_control, q->n + 1))
    return ALTAR_ENOMEM;
  q->since_ms[q->n] = now_ms;
  q->control[q->n] = control;
  q->msgs[q->n++] = m;
  la->records++;
  la->bytes += cost(m);
  return ALTAR_OK;
}

const altar_msg_t *altar__lookahead_head(const altar__lookahead_t *la, const char *topic, int32_t partition) {
  const altar__lookahead_queue_t *q = find(la, topic, partition);
  return q && q->head < q->n ? q->msgs[q->head] : NULL;
}

int64_t altar__lookahead_head_since(const altar__lookahead_t *la, const char *topic, int32_t partition) {
  const altar__lookahead_queue_t *q = find(la, topic, partition);
  return q && q->head < q->n ? q->since_ms[q->head] : -1;
}

altar_msg_t *altar__lookahead_pop(altar__lookahead_t *la, const char *topic, int32_t partition) {
  altar__lookahead_queue_t *q = find(la, topic, partition);
  if (!q || q->head == q->n) return NULL;
  altar_msg_t *m = q->msgs[q->head++];
  if (q->head == q->n) q->head = q->n = 0;
  la->records--;
  la->bytes -= cost(m);
  return m;
}

size_t altar__lookahead_len(const altar__lookahead_t *la, const char *topic, int32_t partition) {
  const altar__lookahead_queue_t *q = find(la, topic, partition);
  return q ? q->n - q->head : 0;
}

bool altar__lookahead_full(const altar__lookahead_t *la) {
  return la->records >= ALTAR_LOOKAHEAD_MAX_RECORDS || la->bytes >= ALTAR_LOOKAHEAD_MAX_BYTES;
}

static void queue_free(altar__lookahead_t *la, altar__lookahead_queue_t *q) {
  for (size_t i = q->head; i < q->n; i++) {
    la->records--;
    la->bytes -= cost(q->msgs[i]);
    altar_msg_free(q->msgs[i]);
  }
  free(q->msgs);
  free(q->since_ms);
  free(q->control);
  free(q->topic);
}

void altar__lookahead_drop(altar__lookahead_t *la, const char *topic, int32_t partition) {
  for (size_t i = 0; i < la->n_queues;) {
    altar__lookahead_queue_t *q = &la->queues[i];
    if (!strcmp(q->topic, topic) && (partition < 0 || q->partition == partition)) {
      queue_free(la, q);
      *q = la->queues[--la->n_queues];
    } else {
      i++;
    }
  }
}

void altar__lookahead_free(altar__lookahead_t *la) {
  for (size_t i = 0; i < la->n_queues; i++) queue_free(la, &la->queues[i]);
  free(la->queues);
  *la = (altar__lookahead_t){0};
}
