/* The reconciler's last hour in memory (reconciler/history.h). */
#include "reconciler/history.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OTHER ALTAR_HISTORY_REASONS_MAX /* the failures slot of reasons beyond the table */

typedef struct bucket {
  int64_t index; /* floor(time / ALTAR_HISTORY_BUCKET_S); -1 = never written */
  uint32_t finished, fired, dead;
  uint32_t failures[ALTAR_HISTORY_REASONS_MAX + 1];
  int64_t lag; /* -1 = not seen in this bucket */
} bucket_t;

struct altar_history {
  pthread_mutex_t mu;
  uint64_t version; /* changes recorded */
  bucket_t b[ALTAR_HISTORY_BUCKETS];
  char reasons[ALTAR_HISTORY_REASONS_MAX][ALTAR_HISTORY_REASON_LEN];
};

altar_history_t *altar_history_new(void) {
  altar_history_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  pthread_mutex_init(&h->mu, NULL);
  for (size_t i = 0; i < ALTAR_HISTORY_BUCKETS; i++) h->b[i] = (bucket_t){.index = -1, .lag = -1};
  return h;
}

void altar_history_free(altar_history_t *h) {
  if (!h) return;
  pthread_mutex_destroy(&h->mu);
  free(h);
}

static int64_t index_of(double now) { return (int64_t)floor(now / ALTAR_HISTORY_BUCKET_S); }

static bool live(const bucket_t *b, int64_t now_index) {
  return b->index >= 0 && b->index > now_index - ALTAR_HISTORY_BUCKETS && b->index <= now_index;
}

/* The bucket of now, emptied first when it still holds an older span. */
static bucket_t *bucket_at(altar_history_t *h, double now) {
  int64_t idx = index_of(now);
  if (idx < 0) idx = 0;
  bucket_t *b = &h->b[idx % ALTAR_HISTORY_BUCKETS];
  if (b->index != idx) *b = (bucket_t){.index = idx, .lag = -1};
  return b;
}

void altar_history_add(altar_history_t *h, double now, uint64_t finished, uint64_t fired, uint64_t dead) {
  if (!h || (!finished && !fired && !dead)) return;
  pthread_mutex_lock(&h->mu);
  bucket_t *b = bucket_at(h, now);
  b->finished += (uint32_t)finished;
  b->fired += (uint32_t)fired;
  b->dead += (uint32_t)dead;
  h->version++;
  pthread_mutex_unlock(&h->mu);
}

/* The table slot of reason: its own, a free one, one no live bucket counts
 * any more, or OTHER. */
static size_t reason_slot(altar_history_t *h, const char *reason, int64_t now_index) {
  size_t free_slot = OTHER;
  for (size_t i = 0; i < ALTAR_HISTORY_REASONS_MAX; i++) {
    if (!h->reasons[i][0]) {
      if (free_slot == OTHER) free_slot = i;
      continue;
    }
    if (!strncmp(h->reasons[i], reason, ALTAR_HISTORY_REASON_LEN - 1)) return i;
  }
  for (size_t i = 0; free_slot == OTHER && i < ALTAR_HISTORY_REASONS_MAX; i++) {
    bool used = false;
    for (size_t k = 0; k < ALTAR_HISTORY_BUCKETS && !used; k++) used = live(&h->b[k], now_index) && h->b[k].failures[i];
    if (used) continue;
    free_slot = i;
    for (size_t k = 0; k < ALTAR_HISTORY_BUCKETS; k++) h->b[k].failures[i] = 0; /* counts of the hour before */
  }
  if (free_slot != OTHER) {
    snprintf(h->reasons[free_slot], sizeof h->reasons[free_slot], "%s", reason);
  }
  return free_slot;
}

void altar_history_failure(altar_history_t *h, double now, const char *reason) {
  if (!h) return;
  if (!reason || !*reason) reason = "unknown";
  pthread_mutex_lock(&h->mu);
  bucket_t *b = bucket_at(h, now);
  b->failures[reason_slot(h, reason, b->index)]++;
  h->version++;
  pthread_mutex_unlock(&h->mu);
}

void altar_history_lag(altar_history_t *h, double now, int64_t lag) {
  if (!h) return;
  pthread_mutex_lock(&h->mu);
  bucket_at(h, now)->lag = lag < 0 ? 0 : lag;
  h->version++;
  pthread_mutex_unlock(&h->mu);
}

json_t *altar_history_json(altar_history_t *h, double now) {
  if (!h) return NULL;
  int64_t last = index_of(now), first = last - ALTAR_HISTORY_BUCKETS + 1;
  json_t *finished = json_array(), *fired = json_array(), *dead = json_array(), *lag = json_array();
  json_t *fail = json_object(), *fail_tot = json_object();
  json_int_t tf = 0, tfi = 0, td = 0;
  pthread_mutex_lock(&h->mu);
  json_t *per[ALTAR_HISTORY_REASONS_MAX + 1] = {0};
  json_int_t per_tot[ALTAR_HISTORY_REASONS_MAX + 1] = {0};
  for (size_t r = 0; r <= ALTAR_HISTORY_REASONS_MAX; r++) {
    bool any = false;
    for (size_t k = 0; k < ALTAR_HISTORY_BUCKETS && !any; k++) any = live(&h->b[k], last) && h->b[k].failures[r];
    if (any) per[r] = json_array();
  }
  for (int64_t idx = first; idx <= last; idx++) {
    const bucket_t *b = &h->b[(idx < 0 ? 0 : idx) % ALTAR_HISTORY_BUCKETS];
    bool here = idx >= 0 && b->index == idx;
    json_array_append_new(finished, json_integer(here ? b->finished : 0));
    json_array_append_new(fired, json_integer(here ? b->fired : 0));
    json_array_append_new(dead, json_integer(here ? b->dead : 0));
    json_array_append_new(lag, here && b->lag >= 0 ? json_integer(b->lag) : json_null());
    if (here) tf += b->finished, tfi += b->fired, td += b->dead;
    for (size_t r = 0; r <= ALTAR_HISTORY_REASONS_MAX; r++) {
      if (!per[r]) continue;
      json_array_append_new(per[r], json_integer(here ? b->failures[r] : 0));
      if (here) per_tot[r] += b->failures[r];
    }
  }
  for (size_t r = 0; r <= ALTAR_HISTORY_REASONS_MAX; r++) {
    if (!per[r]) continue;
    const char *name = r == OTHER ? "other" : h->reasons[r];
    json_object_set_new(fail, name, per[r]);
    json_object_set_new(fail_tot, name, json_integer(per_tot[r]));
  }
  pthread_mutex_unlock(&h->mu);
  return json_pack("{s:i, s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:o}}", "bucket_s",
                   ALTAR_HISTORY_BUCKET_S, "buckets", ALTAR_HISTORY_BUCKETS, "start",
                   (json_int_t)(first * ALTAR_HISTORY_BUCKET_S), "finished", finished, "fired", fired, "dead_lettered",
                   dead, "lag", lag, "failures", fail, "totals", "finished", tf, "fired", tfi, "dead_lettered", td,
                   "failures", fail_tot);
}

uint64_t altar__history_version(altar_history_t *h) {
  if (!h) return 0;
  pthread_mutex_lock(&h->mu);
  uint64_t v = h->version;
  pthread_mutex_unlock(&h->mu);
  return v;
}

bool altar__history_bucket_get(altar_history_t *h, int64_t index, altar_history_bucket_t *out) {
  memset(out, 0, sizeof *out);
  if (!h || index < 0) return false;
  pthread_mutex_lock(&h->mu);
  const bucket_t *b = &h->b[index % ALTAR_HISTORY_BUCKETS];
  bool here = b->index == index;
  if (here) {
    *out = (altar_history_bucket_t){
        .index = index, .finished = b->finished, .fired = b->fired, .dead = b->dead, .lag = b->lag};
    for (size_t r = 0; r <= ALTAR_HISTORY_REASONS_MAX; r++) {
      if (!b->failures[r]) continue;
      snprintf(out->failures[out->n_failures].reason, ALTAR_HISTORY_REASON_LEN, "%s",
               r == OTHER ? "other" : h->reasons[r]);
      out->failures[out->n_failures++].n = b->failures[r];
    }
  }
  pthread_mutex_unlock(&h->mu);
  return here;
}

void altar__history_bucket_put(altar_history_t *h, const altar_history_bucket_t *in, double now) {
  int64_t now_index = index_of(now);
  if (!h || in->index < 0 || in->index > now_index || in->index <= now_index - ALTAR_HISTORY_BUCKETS) return;
  pthread_mutex_lock(&h->mu);
  bucket_t *b = &h->b[in->index % ALTAR_HISTORY_BUCKETS];
  if (b->index > in->index) {
    pthread_mutex_unlock(&h->mu);
    return;
  }
  int64_t own_lag = b->index == in->index ? b->lag : -1;
  *b = (bucket_t){.index = in->index,
                  .finished = in->finished,
                  .fired = in->fired,
                  .dead = in->dead,
                  .lag = in->lag >= 0 ? in->lag : own_lag};
  for (size_t i = 0; i < in->n_failures && i <= ALTAR_HISTORY_REASONS_MAX; i++) {
    const char *reason = in->failures[i].reason[0] ? in->failures[i].reason : "unknown";
    size_t slot = strcmp(reason, "other") ? reason_slot(h, reason, in->index) : OTHER;
    b->failures[slot] += in->failures[i].n;
  }
  h->version++;
  pthread_mutex_unlock(&h->mu);
}
