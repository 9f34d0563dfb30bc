/* Records a worker has read from its jobs partitions but not yet taken in:
 * one queue per partition, in log order, bounded in records and bytes.
 *
 * A busy worker keeps reading into this look-ahead instead of pausing at
 * once, so a cancel queued behind jobs that wait for a slot is seen the
 * moment it arrives, with no seek or re-read (a rewind on a paused Kafka
 * partition is racy). Nothing here is known to the offset tracker: what a
 * revoked partition had looked ahead is dropped and read again from its
 * commit by the next owner. Internal to worker/. */
#ifndef ALTAR_WORKER_LOOKAHEAD_H
#define ALTAR_WORKER_LOOKAHEAD_H

#include "altar/transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The look-ahead is full (intake of full pools pauses) at either bound. */
#define ALTAR_LOOKAHEAD_MAX_RECORDS 1024
#define ALTAR_LOOKAHEAD_MAX_BYTES (64u << 20)

typedef struct altar__lookahead_queue {
  char *topic;
  int32_t partition;
  altar_msg_t **msgs; /* msgs[head..n) are queued */
  int64_t *since_ms;  /* since_ms[i]: when msgs[i] was queued (the caller's monotonic clock) */
  /* control[i]: msgs[i] is a control message (takes no slot), decided once
   * at push: the heads are looked at on every turn while slots are full,
   * and decoding each one each time cost a fifth of the worker's CPU. */
  bool *control;
  size_t head, n, cap, cap_since, cap_control;
} altar__lookahead_queue_t;

typedef struct altar__lookahead {
  altar__lookahead_queue_t *queues;
  size_t n_queues, cap_queues;
  size_t records, bytes; /* totals over every queue */
} altar__lookahead_t;

/* Appends m to its partition's queue and takes it, noting now_ms as the
 * time it was queued and whether it is a control message. 0 or
 * ALTAR_ENOMEM (m then stays the caller's). */
int altar__lookahead_push(altar__lookahead_t *la, altar_msg_t *m, int64_t now_ms, bool control);
/* The oldest record queued for topic/partition, or NULL; pop removes it
 * and hands it to the caller. */
const altar_msg_t *altar__lookahead_head(const altar__lookahead_t *la, const char *topic, int32_t partition);
/* When the oldest record of topic/partition was queued, or -1 when none is. */
int64_t altar__lookahead_head_since(const altar__lookahead_t *la, const char *topic, int32_t partition);
altar_msg_t *altar__lookahead_pop(altar__lookahead_t *la, const char *topic, int32_t partition);
size_t altar__lookahead_len(const altar__lookahead_t *la, const char *topic, int32_t partition);
bool altar__lookahead_full(const altar__lookahead_t *la);
/* Frees what is queued for topic/partition (every partition of topic when
 * partition < 0). */
void altar__lookahead_drop(altar__lookahead_t *la, const char *topic, int32_t partition);
void altar__lookahead_free(altar__lookahead_t *la);

#endif
