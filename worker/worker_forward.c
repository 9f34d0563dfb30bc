/* Forwarding to peers with free slots (docs/forwarding.md): reading the
 * fleet topic, the load the heartbeats announce, and copies of jobs that
 * waited here too long produced to a peer's partition. */
#include "worker/worker_int.h"

#include "altar/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fleet-topic records read per turn at most, and how often it is read. */
#define FLEET_READ_MAX 256
#define FLEET_READ_INTERVAL_MS 20
/* A new worker starts reading the fleet topic this many records before
 * each partition's end, so it knows its live peers at once rather than
 * after their next beat. */
#define FLEET_BOOTSTRAP_RECORDS 16
/* Forwards started per turn at most. */
#define FORWARD_BATCH_MAX 64

static bool part_mine(void *ctx, const char *topic, int32_t partition) {
  const worker_t *w = ctx;
  for (size_t i = 0; i < w->n_parts; i++)
    if (w->parts[i].partition == partition && !strcmp(w->parts[i].topic, topic)) return true;
  /* A partition the topic does not have is no target either. */
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return partition >= w->pools[i].n_partitions;
  return true;
}

/* Assigns the fleet handle (once it can) and reads what peers announced. */
void altar__worker_fleet_read(worker_t *w, int64_t now) {
  altar_transport_t *ft = w->o->fleet_transport;
  if (!ft || !w->peers || now < w->fleet_next_ms) return;
  w->fleet_next_ms = now + FLEET_READ_INTERVAL_MS;
  altar_error_t e = {0};
  if (!w->fleet_assigned) {
    w->fleet_next_ms = now + 1000; /* the topic may not exist yet: try again */
    altar_topic_list_t *tl = NULL;
    if (altar_transport_list_topics(ft, w->o->topics->fleet, 5000, &tl, &e) == ALTAR_OK && tl->n_topics) {
      const altar_topic_info_t *ti = &tl->topics[0];
      altar_tp_t *tps = calloc(ti->n_partitions ? ti->n_partitions : 1, sizeof *tps);
      for (size_t i = 0; tps && i < ti->n_partitions; i++) {
        const altar_partition_info_t *pi = &ti->partitions[i];
        int64_t from = pi->end - FLEET_BOOTSTRAP_RECORDS;
        tps[i] = (altar_tp_t){ti->name, pi->partition, from > pi->beginning ? from : pi->beginning};
      }
      if (tps && altar_transport_assign(ft, tps, ti->n_partitions, &e) == ALTAR_OK) {
        w->fleet_assigned = true;
        w->fleet_next_ms = now;
      } else {
        altar__worker_log(w, "reading the fleet topic %s: %s (no forwarding until it works)", w->o->topics->fleet,
                          e.msg);
      }
      free(tps);
    }
    altar_topic_list_free(tl);
    if (!w->fleet_assigned) return;
  }
  double wall = altar_wall_s();
  for (int i = 0; i < FLEET_READ_MAX; i++) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(ft, 0, &m, &e) != ALTAR_OK || !m) break;
    altar_error_t pe = {0};
    if (m->value && altar__peers_apply(w->peers, m->value, m->value_len, now, wall, &pe) == ALTAR_ENOMEM)
      altar__worker_set_fatal(w, ALTAR_ENOMEM, "reading peers", &pe);
    altar_msg_free(m);
  }
}

static int forward_hops(const altar_msg_t *m) {
  const void *v;
  size_t n;
  if (altar_msg_header(m, ALTAR_FORWARD_HOPS_HEADER, &v, &n) != ALTAR_OK) return 0;
  int hops = 0;
  for (size_t i = 0; i < n; i++) {
    char c = ((const char *)v)[i];
    if (c < '0' || c > '9' || i >= 3) return ALTAR_FORWARD_HOPS_MAX; /* not ours to trust: never again */
    hops = hops * 10 + (c - '0');
  }
  return hops;
}

static const char *pool_of_topic(const worker_t *w, const char *topic) {
  for (size_t i = 0; i < w->n_pools; i++)
    if (!strcmp(w->pools[i].topic, topic)) return w->pools[i].name;
  return NULL;
}

/* Whether the look-ahead head h may be forwarded: a job waiting for a slot
 * of its pool, with a key a copy can carry, forwarded fewer than
 * ALTAR_FORWARD_HOPS_MAX times. */
static bool forwardable(const worker_t *w, const altar_msg_t *h) {
  return h->value && h->value_len && h->value_len <= ALTAR_MAX_MESSAGE && altar__worker_takes_slot(w, h) &&
         !altar__worker_slot_free(w, h->topic) &&
         (!h->key || (h->key_len && h->key_len < 1024 && !memchr(h->key, 0, h->key_len))) &&
         forward_hops(h) < ALTAR_FORWARD_HOPS_MAX;
}

/* Forwards the head of topic/partition's look-ahead queue to peer's
 * partition to_part: the same key and bytes, produced there; the
 * original's offset is finished when the copy is acknowledged. */
static void forward_one(worker_t *w, const char *topic, int32_t partition, const char *peer, int32_t to_part) {
  const altar_msg_t *h = altar__lookahead_head(&w->ahead, topic, partition);
  pending_t *p = altar__worker_pending_new(w, topic, NULL);
  char from[768], hops[16];
  if (!p || !h || (h->key && !(p->key = strndup(h->key, h->key_len))) ||
      altar_buf_append(&p->value, h->value, h->value_len)) {
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "forwarding a job", NULL);
    return;
  }
  snprintf(from, sizeof from, "%s/%s/%" PRId32 "/%" PRId64, w->worker_id, h->topic, h->partition, h->offset);
  snprintf(hops, sizeof hops, "%d", forward_hops(h) + 1);
  if (altar__worker_pending_add_header(p, ALTAR_FORWARD_FROM_HEADER, from) ||
      altar__worker_pending_add_header(p, ALTAR_FORWARD_HOPS_HEADER, hops) || !(p->src_topic = strdup(h->topic))) {
    altar__worker_pending_free(p);
    altar__worker_set_fatal(w, ALTAR_ENOMEM, "forwarding a job", NULL);
    return;
  }
  p->partition = to_part;
  p->forward = true;
  p->finishes = true;
  p->src_partition = h->partition;
  p->src_offset = h->offset;
  altar_msg_t *m = altar__lookahead_pop(&w->ahead, topic, partition);
  w->stats.consumed++;
  if (altar__offset_tracker_seen(w->tracker, m->topic, m->partition, m->offset) != ALTAR_OK) {
    altar__worker_pending_free(p);
    altar_msg_free(m);
    return;
  }
  if (altar__worker_pending_send(w, p) != ALTAR_OK) {
    /* Not forwarded after all: it starts here at the first free slot. */
    altar__worker_pending_free(p);
    altar__worker_log(w, "forwarding %s/%" PRId32 "/%" PRId64 " to %s failed; it runs here", m->topic, m->partition,
                      m->offset, peer);
    if (!altar__worker_wait_add(w, m, 0)) altar_msg_free(m);
    return;
  }
  altar__worker_log(w, "%s/%" PRId32 "/%" PRId64 ": no free slot here; forwarded to %s (partition %" PRId32 ")",
                    m->topic, m->partition, m->offset, peer, to_part);
  altar_msg_free(m);
}

/* Forwards jobs that waited in the look-ahead for forward_after_ms or
 * more, oldest first, while a live peer of their pool reports a free slot. */
void altar__worker_forward_waiting(worker_t *w, int64_t now) {
  if (!w->peers || w->forward_after_ms < 0 || !w->ahead.records || !altar__peers_live(w->peers, now)) return;
  const char *no_peer[WORKER_POOLS_MAX];
  size_t n_no_peer = 0;
  for (int sent = 0; sent < FORWARD_BATCH_MAX && !w->fatal; sent++) {
    const altar_msg_t *best = NULL;
    int64_t best_since = 0;
    for (size_t i = 0; i < w->ahead.n_queues; i++) {
      const altar__lookahead_queue_t *q = &w->ahead.queues[i];
      if (q->head == q->n || now - q->since_ms[q->head] < w->forward_after_ms) continue;
      if (best && q->since_ms[q->head] >= best_since) continue;
      const altar_msg_t *h = q->msgs[q->head];
      bool skip = false;
      for (size_t k = 0; k < n_no_peer && !skip; k++) skip = !strcmp(no_peer[k], h->topic);
      if (skip || !forwardable(w, h)) continue;
      best = h;
      best_since = q->since_ms[q->head];
    }
    if (!best) return;
    const char *pool = pool_of_topic(w, best->topic);
    int32_t to = -1;
    const char *peer = pool ? altar__peers_pick(w->peers, pool, best->topic, now, part_mine, w, &to) : NULL;
    if (!peer) {
      if (n_no_peer < WORKER_POOLS_MAX) no_peer[n_no_peer++] = best->topic;
      else return;
      continue;
    }
    char topic[ALTAR_TOPIC_NAME_MAX + 1];
    snprintf(topic, sizeof topic, "%s", best->topic);
    forward_one(w, topic, best->partition, peer, to);
  }
}

/* The free slots of each pool that the heartbeats announce: the worker's
 * own free slots, bounded by the pool's, less what waits in the look-ahead
 * for it. true when they changed (or the partitions did) since the last
 * call. */
bool altar__worker_load_update(worker_t *w) {
  bool changed = w->parts_changed;
  w->parts_changed = false;
  if (!w->load_free) return changed;
  int64_t busy = (int64_t)altar__worker_in_flight(w);
  for (size_t i = 0; i < w->n_pools; i++) {
    int64_t f = w->o->slots - busy, pf = altar__worker_pool_free(w, w->pools[i].name);
    if (pf < f) f = pf;
    for (size_t k = 0; k < w->ahead.n_queues && f > 0; k++)
      if (!strcmp(w->ahead.queues[k].topic, w->pools[i].topic))
        f -= (int64_t)(w->ahead.queues[k].n - w->ahead.queues[k].head);
    if (f < 0) f = 0;
    changed |= f != w->load_free[i];
    w->load_free[i] = f;
  }
  return changed;
}

void altar__worker_load_part(void *ctx, size_t i, const char **ptopic, int32_t *ppartition) {
  const worker_t *w = ctx;
  *ptopic = w->parts[i].topic;
  *ppartition = w->parts[i].partition;
}
