/* Settled task keys: skip late reruns of tasks whose group already settled. */
#include "reconciler/settled.h"

#include "reconciler/ledger_aux.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry is one block: "<task key>\0<backend>\x1f<external id>\0" and
 * the settling event's ts (a double, unaligned); the map's key points at its
 * start. */
static char *entry_new(const char *task_key, size_t klen, const char *run, size_t rlen, double ts) {
  char *b = malloc(klen + rlen + 2 + sizeof ts);
  if (!b) return NULL;
  memcpy(b, task_key, klen);
  b[klen] = 0;
  memcpy(b + klen + 1, run, rlen);
  b[klen + 1 + rlen] = 0;
  memcpy(b + klen + rlen + 2, &ts, sizeof ts);
  return b;
}

static const char *entry_run(const char *b) { return b + strlen(b) + 1; }

static double entry_ts(const char *b) {
  const char *run = entry_run(b);
  double ts;
  memcpy(&ts, run + strlen(run) + 1, sizeof ts);
  return ts;
}

/* Stored value of "t/<task key>": the run, a NUL, the ts as text. A value
 * without the NUL (written before settlements expired) never expires. */
static double value_ts(const char *v, size_t vlen, size_t *prlen) {
  const char *z = memchr(v, 0, vlen);
  *prlen = z ? (size_t)(z - v) : vlen;
  if (!z) return -INFINITY;
  char num[40];
  size_t n = vlen - *prlen - 1;
  if (n >= sizeof num) n = sizeof num - 1;
  memcpy(num, z + 1, n);
  num[n] = 0;
  char *end;
  double ts = strtod(num, &end);
  return end != num && isfinite(ts) ? ts : -INFINITY;
}

/* True when an event at ev_ts no longer sees a settlement made at ts. An
 * expiry that counted from "now" would let the daemon and a replay decide
 * differently; this depends on the two events' own times only. */
static bool expired(double settled_ts, double ev_ts) {
  return isfinite(settled_ts) && ev_ts - settled_ts > ALTAR_SETTLED_HORIZON_S;
}

/* Files entry b under its task key, freeing the entry it replaces. */
static int map_put_h(altar__hmap_t *m, char *b, size_t klen, uint64_t hash) {
  void *old = NULL;
  int rc = altar__hmap_put_h(m, b, klen, hash, b, &old);
  free(old);
  return rc;
}

static int map_put(altar__hmap_t *m, char *b) {
  size_t klen = strlen(b);
  return map_put_h(m, b, klen, altar__hash(b, klen));
}

static void map_free_all(altar__hmap_t *m) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key && m->slots[i].val) {
      /* Tombstones carry no value; live slots own their block. */
      if (m->slots[i].val == m->slots[i].key) free(m->slots[i].val);
    }
  altar__hmap_clear(m);
}

typedef struct load_ctx {
  altar__settled_t *s;
  int rc;
} load_ctx_t;

static int visit_load(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  load_ctx_t *c = ctx;
  if (klen <= 2) return 0;
  size_t rlen;
  double ts = value_ts(val, vlen, &rlen);
  if (ts > c->s->max_ts) c->s->max_ts = ts;
  char *b = entry_new((const char *)key + 2, klen - 2, val, rlen, ts);
  if (!b || map_put(&c->s->done, b)) {
    free(b);
    c->rc = ALTAR_ENOMEM;
    return 1;
  }
  return 0;
}

int altar__settled_load(altar__settled_t *s, altar_ledger_t *l, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  load_ctx_t c = {.s = s};
  int rc = altar__ledger_aux_scan(l, "t/", 2, visit_load, &c, err);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* no aux storage: nothing was kept */
  if (!rc && c.rc) rc = altar_error_set(err, c.rc, "settled tasks: out of memory");
  return rc;
}

void altar__settled_free(altar__settled_t *s) {
  map_free_all(&s->done);
  map_free_all(&s->pend);
  altar__hmap_free(&s->done);
  altar__hmap_free(&s->pend);
}

void altar__settled_commit(altar__settled_t *s) {
  for (size_t i = 0; i < s->pend.cap; i++) {
    altar__hslot_t *sl = &s->pend.slots[i];
    if (!sl->key || sl->val != sl->key) continue;
    /* out of memory: forget it (a rerun may then apply) */
    if (map_put_h(&s->done, sl->val, sl->len, sl->hash)) free(sl->val);
  }
  altar__hmap_clear(&s->pend);
}

void altar__settled_abort(altar__settled_t *s) { map_free_all(&s->pend); }

/* True when ev belongs to another run of a task whose group settled. */
static bool superseded(const altar__settled_t *s, const altar_status_event_t *ev) {
  if (!ev->task_key || !ev->handle.backend || !ev->handle.external_id) return false;
  size_t klen = strlen(ev->task_key);
  uint64_t h = altar__hash(ev->task_key, klen);
  const char *b = s->pend.n ? altar__hmap_get_h(&s->pend, ev->task_key, klen, h) : NULL;
  if (!b) b = altar__hmap_get_h(&s->done, ev->task_key, klen, h);
  if (!b || expired(entry_ts(b), ev->ts)) return false;
  const char *run = entry_run(b);
  size_t bl = strlen(ev->handle.backend);
  return strncmp(run, ev->handle.backend, bl) != 0 || run[bl] != '\x1f' ||
         strcmp(run + bl + 1, ev->handle.external_id) != 0;
}

/* Notes every member of a settled group, in memory and in the open batch;
 * task_keys are the apply result's, aligned with g's shards. */
static int note_group(altar__settled_t *s, altar_ledger_t *l, const altar_group_event_t *g, char *const *task_keys,
                      altar_error_t *err) {
  char ts_text[40]; /* the same for every member */
  size_t ts_len = (size_t)snprintf(ts_text, sizeof ts_text, "%.17g", g->ts);
  altar_buf_t kb = {0}, vb = {0};
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && task_keys && i < g->n_shards; i++) {
    const altar_handle_t *h = &g->shards[i];
    const char *tk = task_keys[i];
    if (!h->backend || !h->external_id || !tk) continue;
    /* Sized from the strings: ids come from the log, their length is theirs. */
    size_t bl = strlen(h->backend), el = strlen(h->external_id), klen = strlen(tk);
    /* Key "t/<task key>"; value: the run, its NUL, then the ts as text. */
    altar_buf_reset(&kb);
    altar_buf_reset(&vb);
    char *b = NULL;
    if (altar_buf_append(&kb, "t/", 2) || altar_buf_append(&kb, tk, klen) || altar_buf_append(&vb, h->backend, bl) ||
        altar_buf_append(&vb, "\x1f", 1) || altar_buf_append(&vb, h->external_id, el) ||
        altar_buf_append(&vb, "", 1) || altar_buf_append(&vb, ts_text, ts_len) ||
        !(b = entry_new(tk, klen, (const char *)vb.data, bl + 1 + el, g->ts)) || map_put(&s->pend, b)) {
      free(b);
      rc = altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory");
      break;
    }
    rc = altar__ledger_aux_put(l, kb.data, kb.len, vb.data, vb.len, err);
    if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
  }
  altar_buf_free(&kb);
  altar_buf_free(&vb);
  return rc;
}

/* Forgets settlements far past the horizon, in memory and (with the open
 * batch) on disk, once per horizon of event time. Only entries older than
 * twice the horizon go, so a partition lagging less than a horizon behind
 * the newest event still sees every settlement it would have seen. */
static int prune(altar__settled_t *s, altar_ledger_t *l, const altar_status_event_t *events, size_t n,
                 altar_error_t *err) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(events[i].ts) && events[i].ts > s->max_ts) s->max_ts = events[i].ts;
  if (!isfinite(s->max_ts) || s->max_ts < s->next_prune) return ALTAR_OK;
  double cut = s->max_ts - 2 * ALTAR_SETTLED_HORIZON_S;
  s->next_prune = s->max_ts + ALTAR_SETTLED_HORIZON_S;
  /* Collected first: a delete moves entries between slots. */
  char **old = malloc((s->done.n ? s->done.n : 1) * sizeof *old);
  if (!old) return altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory");
  size_t n_old = 0;
  for (size_t i = 0; i < s->done.cap; i++) {
    altar__hslot_t *sl = &s->done.slots[i];
    if (!sl->key || sl->val != sl->key) continue;
    double ts = entry_ts(sl->val);
    if (isfinite(ts) && ts < cut) old[n_old++] = sl->val;
  }
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < n_old; i++) {
    char *b = old[i];
    size_t klen = strlen(b);
    char *k = malloc(klen + 3);
    if (!k) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory");
      break;
    }
    memcpy(k, "t/", 2);
    memcpy(k + 2, b, klen + 1);
    rc = altar__ledger_aux_del(l, k, klen + 2, err);
    free(k);
    if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
    if (rc) break;
    altar__hmap_del(&s->done, b, klen);
    free(b);
    s->pruned++;
  }
  free(old);
  return rc;
}

int altar__settled_apply(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                         const altar_status_event_t *events, size_t n, altar_apply_result_t *pres,
                         size_t *pskipped, altar_error_t *err) {
  size_t skipped = 0;
  int rc = prune(s, l, events, n, err);
  for (size_t i = 0; !rc && i < n; i++) {
    if (superseded(s, &events[i])) {
      skipped++;
      continue;
    }
    size_t before = pres->n_events;
    rc = altar_apply_events(l, groups, &events[i], 1, -1, pres, err);
    for (size_t k = before; !rc && k < pres->n_events; k++)
      rc = note_group(s, l, &pres->events[k], pres->shard_task_keys[k], err);
  }
  if (pskipped) *pskipped = skipped;
  return rc;
}
