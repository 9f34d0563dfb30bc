/* Worker heartbeats on the fleet topic (JSON, keyed by worker id). */
#include "heartbeat.h"

#include "altar/clock.h"
#include "altar/fleet.h"
#include "altar/footprint.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* At most this many running keys go into one heartbeat (a bounded message);
 * "running_total" says how many there were. */
#define HEARTBEAT_KEYS_MAX 256

struct altar__heartbeat {
  altar_transport_t *transport;
  const char *topic;
  char *worker_id;
  char host[256];
  const char *backend;
  altar_backend_t *be; /* asked what it keeps of task output, on the worker's thread */
  int64_t slots;
  json_t *pools; /* the backend's pools, read once at start */
  double started_at;
  int64_t next_ms, last_ms;
  bool dirty; /* the load changed since the last beat */
};

/* "free" and "owns" of a beat (heartbeat.h); NULL when out of memory. */
static json_t *load_json(const altar__heartbeat_load_t *load, json_t **powns) {
  json_t *free_ = json_object(), *owns = json_object();
  for (size_t i = 0; free_ && i < load->n_pools; i++)
    json_object_set_new(free_, load->pools[i], json_integer(load->free[i] > 0 ? load->free[i] : 0));
  for (size_t i = 0; owns && i < load->n_parts && i < ALTAR_HEARTBEAT_PARTS_MAX; i++) {
    const char *topic = NULL;
    int32_t part = -1;
    load->part(load->ctx, i, &topic, &part);
    if (!topic || part < 0) continue;
    json_t *a = json_object_get(owns, topic);
    if (!a) json_object_set_new(owns, topic, a = json_array());
    if (a) json_array_append_new(a, json_integer(part));
  }
  if (!free_ || !owns) {
    json_decref(free_);
    json_decref(owns);
    return NULL;
  }
  *powns = owns;
  return free_;
}

static void send_event(altar__heartbeat_t *hb, const char *event, size_t n, altar__heartbeat_key_fn key, void *ctx,
                       const altar__heartbeat_load_t *load) {
  json_t *running = json_array();
  for (size_t i = 0; running && i < n && i < HEARTBEAT_KEYS_MAX; i++) {
    const char *k = key(ctx, i);
    if (k) json_array_append_new(running, json_string(k));
  }
  json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:s, s:O, s:I, s:o, s:I, s:s, s:f, s:f}", "v", 1, "type",
                        "worker", "event", event, "worker", hb->worker_id, "host", hb->host, "pid",
                        (json_int_t)getpid(), "backend", hb->backend, "pools", hb->pools, "slots",
                        (json_int_t)hb->slots, "running", running ? running : json_array(), "running_total",
                        (json_int_t)n, "version", ALTAR_VERSION, "started_at", hb->started_at, "ts", altar_wall_s());
  /* What the worker costs, for the dashboard's workers page. */
  if (o) json_object_set_new(o, "rss_bytes", json_integer((json_int_t)altar_footprint_rss_bytes()));
  altar_kept_logs_t kept; /* from the backend's index: no directory read */
  if (o && altar_backend_kept_logs(hb->be, &kept) == ALTAR_OK)
    json_object_set_new(o, "kept_logs",
                        json_pack("{s:I, s:I, s:I, s:I}", "dirs", (json_int_t)kept.dirs, "bytes",
                                  (json_int_t)kept.bytes, "prune_next_dirs", (json_int_t)kept.prune_next_dirs,
                                  "prune_next_bytes", (json_int_t)kept.prune_next_bytes));
  json_t *owns = NULL, *free_ = o && load ? load_json(load, &owns) : NULL;
  if (free_) {
    json_object_set_new(o, "free", free_);
    json_object_set_new(o, "owns", owns);
  }
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (text) {
    altar_produce_rec_t rec = {.topic = hb->topic,
                               .partition = ALTAR_PARTITION_ANY,
                               .key = hb->worker_id,
                               .key_len = strlen(hb->worker_id),
                               .value = text,
                               .value_len = strlen(text)};
    altar_error_t e = {0};
    (void)altar_transport_produce(hb->transport, &rec, &e); /* the next beat tries again */
  }
  free(text);
  json_decref(o);
}

static const char *no_key(void *ctx, size_t i) {
  (void)ctx;
  (void)i;
  return NULL;
}

altar__heartbeat_t *altar__heartbeat_start(const altar_worker_opts_t *o, const char *worker_id) {
  if (!o->topics->fleet || !*o->topics->fleet) return NULL;
  altar__heartbeat_t *hb = calloc(1, sizeof *hb);
  if (!hb) return NULL;
  hb->transport = o->transport;
  hb->topic = o->topics->fleet;
  hb->worker_id = strdup(worker_id);
  hb->backend = altar_backend_name(o->backend) ? altar_backend_name(o->backend) : "";
  hb->be = o->backend;
  hb->slots = o->slots;
  hb->pools = json_object();
  if (!hb->worker_id || !hb->pools) {
    altar__heartbeat_stop(hb);
    return NULL;
  }
  if (gethostname(hb->host, sizeof hb->host - 1) != 0) snprintf(hb->host, sizeof hb->host, "localhost");
  altar_capacity_t cap;
  altar_error_t e = {0};
  if (altar_backend_capacity(o->backend, &cap, &e) == ALTAR_OK)
    for (size_t i = 0; i < cap.n; i++)
      json_object_set_new(hb->pools, cap.pools[i],
                          /* null: the backend sets no bound on the pool */
                          cap.free_slots[i] == INT64_MAX ? json_null() : json_integer(cap.free_slots[i]));
  altar_capacity_clear(&cap);
  hb->started_at = altar_wall_s();
  send_event(hb, "heartbeat", 0, no_key, NULL, NULL);
  hb->last_ms = altar_mono_ms();
  hb->next_ms = hb->last_ms + ALTAR_HEARTBEAT_INTERVAL_S * 1000;
  hb->dirty = true; /* the first load goes out at the first tick */
  return hb;
}

void altar__heartbeat_tick(altar__heartbeat_t *hb, int64_t now_ms, size_t n, altar__heartbeat_key_fn key, void *ctx,
                           const altar__heartbeat_load_t *load, bool changed) {
  if (!hb) return;
  hb->dirty |= changed;
  if (now_ms < hb->next_ms && !(hb->dirty && now_ms - hb->last_ms >= ALTAR_HEARTBEAT_MIN_GAP_MS)) return;
  send_event(hb, "heartbeat", n, key, ctx, load);
  hb->dirty = false;
  hb->last_ms = now_ms;
  hb->next_ms = now_ms + ALTAR_HEARTBEAT_INTERVAL_S * 1000;
}

void altar__heartbeat_stop(altar__heartbeat_t *hb) {
  if (!hb) return;
  if (hb->worker_id && hb->pools) send_event(hb, "goodbye", 0, no_key, NULL, NULL);
  json_decref(hb->pools);
  free(hb->worker_id);
  free(hb);
}
