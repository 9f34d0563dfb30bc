/* The worker's table of live peers (peers.h). Few peers: a linear search
 * is the cheapest lookup. */
#include "worker/peers.h"

#include "altar/grow.h"
#include "altar/transport.h"
#include "heartbeat.h"
#include "core/unconst.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct peer {
  char id[256];
  int64_t seen_ms;
  json_t *free; /* {pool: free slots}, validated; decremented by picks */
  json_t *owns; /* {topic: [partition, ...]}, validated */
  size_t turn;  /* rotates over its partitions */
} peer_t;

struct altar__peers {
  char *self;
  peer_t *peers;
  size_t n, cap;
};

altar__peers_t *altar__peers_new(const char *self_id) {
  altar__peers_t *ps = calloc(1, sizeof *ps);
  if (!ps || !(ps->self = strdup(self_id ? self_id : ""))) {
    free(ps);
    return NULL;
  }
  return ps;
}

static void peer_clear(peer_t *p) {
  json_decref(p->free);
  json_decref(p->owns);
}

void altar__peers_free(altar__peers_t *ps) {
  if (!ps) return;
  for (size_t i = 0; i < ps->n; i++) peer_clear(&ps->peers[i]);
  free(ps->peers);
  free(ps->self);
  free(ps);
}

static bool live(const peer_t *p, int64_t now_ms) { return now_ms - p->seen_ms <= ALTAR_HEARTBEAT_STALE_S * 1000; }

static peer_t *find(altar__peers_t *ps, const char *id) {
  for (size_t i = 0; i < ps->n; i++)
    if (!strcmp(ps->peers[i].id, id)) return &ps->peers[i];
  return NULL;
}

static void drop(altar__peers_t *ps, peer_t *p) {
  peer_clear(p);
  *p = ps->peers[--ps->n];
}

/* {pool: int in [0, FREE_MAX]}, at most POOLS_MAX pools with short names. */
static bool valid_free(const json_t *f) {
  if (!json_is_object(f) || json_object_size(f) > ALTAR_PEER_POOLS_MAX) return false;
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)ALTAR__UNCONST(f), k, v) {
    size_t kl = strlen(k);
    if (!kl || kl > ALTAR_PEER_POOL_NAME_MAX || !json_is_integer(v)) return false;
    json_int_t n = json_integer_value(v);
    if (n < 0 || n > ALTAR_PEER_FREE_MAX) return false;
  }
  return true;
}

/* {topic: [partition, ...]} with legal topic names, partitions in
 * [0, PARTS_MAX), at most PARTS_MAX in all. */
static bool valid_owns(const json_t *o) {
  if (!json_is_object(o) || json_object_size(o) > ALTAR_PEER_POOLS_MAX) return false;
  size_t total = 0;
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)ALTAR__UNCONST(o), k, v) {
    altar_error_t e = {0};
    if (altar_transport_check_name("topic", k, &e) || !json_is_array(v)) return false;
    total += json_array_size(v);
    if (total > ALTAR_PEER_PARTS_MAX) return false;
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) {
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= ALTAR_PEER_PARTS_MAX)
        return false;
    }
  }
  return true;
}

int altar__peers_apply(altar__peers_t *ps, const void *value, size_t len, int64_t now_ms, double now_s,
                       altar_error_t *err) {
  if (!value || !len || len > ALTAR_PEER_HEARTBEAT_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "heartbeat of %zu bytes (at most %u)", len, ALTAR_PEER_HEARTBEAT_MAX);
  json_error_t je;
  json_t *o = json_loadb(value, len, JSON_REJECT_DUPLICATES, &je);
  int rc = ALTAR_OK;
  const char *type = json_string_value(json_object_get(o, "type"));
  const char *event = json_string_value(json_object_get(o, "event"));
  const char *id = json_string_value(json_object_get(o, "worker"));
  const json_t *ts = json_object_get(o, "ts");
  json_t *fr = json_object_get(o, "free"), *ow = json_object_get(o, "owns");
  if (!json_is_object(o) || !type || strcmp(type, "worker") || !event || !id) {
    rc = altar_error_set(err, ALTAR_EINVAL, "not a worker heartbeat");
  } else if (!*id || strlen(id) >= sizeof ps->peers[0].id) {
    rc = altar_error_set(err, ALTAR_EINVAL, "worker id of %zu bytes (1..255)", strlen(id));
  } else if (!strcmp(id, ps->self)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "our own heartbeat");
  } else if (!json_is_number(ts) || !isfinite(json_number_value(ts)) ||
             fabs(json_number_value(ts) - now_s) > ALTAR_HEARTBEAT_STALE_S) {
    rc = altar_error_set(err, ALTAR_EINVAL, "heartbeat of %s: its time is not within %d s of ours", id,
                         ALTAR_HEARTBEAT_STALE_S);
  } else if (!strcmp(event, "goodbye")) {
    peer_t *p = find(ps, id);
    if (p) drop(ps, p);
  } else if (strcmp(event, "heartbeat")) {
    rc = altar_error_set(err, ALTAR_EINVAL, "heartbeat of %s: unknown event", id);
  } else if ((fr && !valid_free(fr)) || (ow && !valid_owns(ow))) {
    rc = altar_error_set(err, ALTAR_EINVAL, "heartbeat of %s: free slots or owned partitions out of bounds", id);
  } else {
    peer_t *p = find(ps, id);
    if (!p) {
      for (size_t i = 0; i < ps->n && ps->n >= ALTAR_PEERS_MAX;) { /* room: forget the dead first */
        if (!live(&ps->peers[i], now_ms)) drop(ps, &ps->peers[i]);
        else i++;
      }
      if (ps->n >= ALTAR_PEERS_MAX) {
        rc = altar_error_set(err, ALTAR_EINVAL, "heartbeat of %s: %d live peers known already", id, ALTAR_PEERS_MAX);
      } else if (ALTAR_GROW(ps->peers, ps->cap, ps->n + 1)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "peers: out of memory");
      } else {
        p = &ps->peers[ps->n++];
        *p = (peer_t){0};
        snprintf(p->id, sizeof p->id, "%s", id);
      }
    }
    if (p) {
      json_t *nf = fr ? json_deep_copy(fr) : json_object(), *no = ow ? json_deep_copy(ow) : json_object();
      if (!nf || !no) {
        json_decref(nf);
        json_decref(no);
        rc = altar_error_set(err, ALTAR_ENOMEM, "peers: out of memory");
      } else {
        json_decref(p->free);
        json_decref(p->owns);
        p->free = nf;
        p->owns = no;
        p->seen_ms = now_ms;
      }
    }
  }
  if (!o) rc = altar_error_set(err, ALTAR_EINVAL, "heartbeat is no JSON: %s", je.text);
  json_decref(o);
  return rc;
}

static int64_t peer_free(const peer_t *p, const char *pool) {
  const json_t *v = p->free ? json_object_get(p->free, pool) : NULL;
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

const char *altar__peers_pick(altar__peers_t *ps, const char *pool, const char *topic, int64_t now_ms,
                              altar__peers_mine_fn mine, void *mine_ctx, int32_t *ppartition) {
  peer_t *best = NULL;
  int32_t best_part = -1;
  for (size_t i = 0; i < ps->n; i++) {
    peer_t *p = &ps->peers[i];
    int64_t f = peer_free(p, pool);
    if (!live(p, now_ms) || f <= 0 || (best && f <= peer_free(best, pool))) continue;
    const json_t *parts = json_object_get(p->owns, topic);
    size_t n = json_array_size(parts);
    for (size_t k = 0; k < n; k++) {
      int32_t part = (int32_t)json_integer_value(json_array_get(parts, (p->turn + k) % n));
      if (mine && mine(mine_ctx, topic, part)) continue;
      best = p;
      best_part = part;
      break;
    }
  }
  if (!best) return NULL;
  best->turn++;
  json_object_set_new(best->free, pool, json_integer(peer_free(best, pool) - 1));
  *ppartition = best_part;
  return best->id;
}

int64_t altar__peers_free_slots(const altar__peers_t *ps, const char *pool, int64_t now_ms) {
  int64_t sum = 0;
  for (size_t i = 0; i < ps->n; i++)
    if (live(&ps->peers[i], now_ms)) sum += peer_free(&ps->peers[i], pool);
  return sum;
}

size_t altar__peers_live(const altar__peers_t *ps, int64_t now_ms) {
  size_t k = 0;
  for (size_t i = 0; i < ps->n; i++) k += live(&ps->peers[i], now_ms);
  return k;
}
