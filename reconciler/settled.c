/* Settled task keys: skip late reruns of tasks whose group already settled. */
#include "reconciler/settled.h"
#include "reconciler/cancel.h"
#include "altar/config.h"
#include "altar/grow.h"

#include "reconciler/settled_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nomem(altar_error_t *err) { return altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory"); }

/* True when an event at ev_ts no longer sees a settlement made at ts. An
 * expiry that counted from "now" would let the daemon and a replay decide
 * differently; this depends on the two events' own times only. */
static bool expired(const altar__settled_t *s, double settled_ts, double ev_ts) {
  return isfinite(settled_ts) && ev_ts - settled_ts > s->horizon_s;
}

static double horizon_setting_s; /* 0: ALTAR_SETTLED_HORIZON_S */

void altar__settled_set_horizon_s(double seconds) { horizon_setting_s = seconds > 0 ? seconds : 0; }

static void pend_clear(altar__settled_t *s) {
  for (size_t i = 0; i < s->pend.cap; i++)
    if (s->pend.slots[i].key) free(s->pend.slots[i].val);
  altar__hmap_clear(&s->pend);
}

void altar__settled_free(altar__settled_t *s) {
  pend_clear(s);
  altar__hmap_free(&s->pend);
  altar__settled_cache_free(&s->cache);
  altar_buf_free(&s->kb);
  altar_buf_free(&s->vb);
  altar_strlist_clear(&s->cancelled_jobs);
}

void altar__settled_replay(altar__settled_t *s) { s->replay = !s->no_store && !s->pre_existing; }

void altar__settled_commit(altar__settled_t *s) {
  for (size_t i = 0; i < s->pend.cap; i++)
    if (s->pend.slots[i].key) altar__settled_cache_put(&s->cache, s->pend.slots[i].val);
  altar__hmap_clear(&s->pend);
}

void altar__settled_abort(altar__settled_t *s) {
  pend_clear(s);
  /* The batch's deletes of pruned records are gone with it: prune again. */
  s->next_prune = -INFINITY;
}

/* The entry of key: from the open batch, the cache, or the ledger's index
 * (then cached). 1 with *pe set (valid until the next change of the set),
 * 0 when key is not settled, or a negative code. */
static int lookup(altar__settled_t *s, altar_ledger_t *l, const char *key, size_t klen,
                  const altar__settled_entry_t **pe, altar_error_t *err) {
  uint64_t h = altar__hash(key, klen);
  const altar__settled_entry_t *e = s->pend.n ? altar__hmap_get_h(&s->pend, key, klen, h) : NULL;
  if (!e) e = altar__settled_cache_get(&s->cache, key, klen, h);
  if (e) {
    *pe = e;
    return 1;
  }
  if (s->no_store || (!s->pre_existing && !altar__settled_cache_maybe_evicted(&s->cache, h))) return 0;
  s->ledger_reads++;
  if (altar__settled_index_key(&s->kb, key, klen)) return nomem(err);
  altar_buf_reset(&s->vb);
  int rc = altar_ledger_aux_get(l, s->kb.data, s->kb.len, &s->vb, err);
  if (rc == ALTAR_ENOTFOUND) return 0;
  if (rc) return rc;
  uint64_t seq;
  double ts;
  const char *run;
  size_t rlen;
  if (!altar__settled_index_parse(s->vb.data, s->vb.len, &seq, &ts, &run, &rlen)) {
    s->damaged++; /* an entry that says nothing settles nothing */
    return 0;
  }
  altar__settled_entry_t *ne = altar__settled_entry_new(key, klen, run, rlen, seq, ts);
  if (!ne) return nomem(err);
  altar__settled_cache_put(&s->cache, ne);
  /* put may have failed (and freed ne): ask the cache, not ne */
  if (!(e = altar__settled_cache_get(&s->cache, key, klen, h))) return nomem(err);
  *pe = e;
  return 1;
}

int altar__settled_has_task(altar__settled_t *s, altar_ledger_t *l, const char *task_key, altar_error_t *err) {
  const altar__settled_entry_t *e;
  return lookup(s, l, task_key, strlen(task_key), &e, err);
}

/* 1 when ev belongs to another run of a task whose group settled, 0 when
 * not, or a negative code. */
static int superseded(altar__settled_t *s, altar_ledger_t *l, const altar_status_event_t *ev, altar_error_t *err) {
  if (!ev->task_key || !ev->handle.backend || !ev->handle.external_id) return 0;
  const altar__settled_entry_t *e;
  int rc = lookup(s, l, ev->task_key, strlen(ev->task_key), &e, err);
  if (rc <= 0 || expired(s, e->ts, ev->ts)) return rc < 0 ? rc : 0;
  const char *run = altar__settled_entry_run(e);
  size_t bl = strlen(ev->handle.backend);
  return strncmp(run, ev->handle.backend, bl) != 0 || run[bl] != '\x1f' ||
         strcmp(run + bl + 1, ev->handle.external_id) != 0;
}

/* The group itself is noted too, as a member whose task key is
 * "#<kind>\x1f<group key>" (no task key starts with '#') and whose run is
 * empty: a shard that ends after its group settled is then known as late.
 * An older reader takes it for a task nobody runs. */
static altar__settled_rec_t *with_marker(altar__settled_rec_t *r, const altar_group_event_t *g) {
  if (!r) return NULL;
  size_t kl = strlen(g->kind), gl = strlen(g->group_key), add = 1 + kl + 1 + gl + 2;
  altar__settled_rec_t *nr = realloc(r, sizeof *r + r->len + add);
  if (!nr) {
    free(r);
    return NULL;
  }
  char *p = nr->data + nr->len;
  *p++ = '#';
  memcpy(p, g->kind, kl);
  p += kl;
  *p++ = '\x1f';
  memcpy(p, g->group_key, gl);
  p += gl;
  *p++ = 0;
  *p = 0;
  nr->len += add;
  return nr;
}

/* 1 when a terminal event's open record belongs to a group that settled
 * (and has not expired for this event), its name "kind:group_key" then in
 * name; 0 when not, or a negative code. */
static int late_for_settled(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                            const altar_status_event_t *ev, char *name, size_t size, altar_error_t *err) {
  if (ev->event != ALTAR_EV_STATE || !altar_state_terminal(ev->state) || !ev->kind || !ev->task_key ||
      !ev->handle.backend || !ev->handle.external_id)
    return 0;
  const altar_group_spec_t *gs = altar_group_specs_find(groups, ev->kind);
  if (!gs || !altar_ledger_peek_open(l, ev->handle.backend, ev->handle.external_id)) return 0;
  char gk[1024];
  size_t gl = altar_group_by_key_into(&gs->group_by, &ev->handle, gk, sizeof gk);
  if (gl >= sizeof gk) return 0; /* a key this long is not worth a late check */
  char key[1100];
  int kl = snprintf(key, sizeof key, "#%s\x1f%s", ev->kind, gk);
  if (kl < 0 || (size_t)kl >= sizeof key) return 0;
  const altar__settled_entry_t *e;
  int rc = lookup(s, l, key, (size_t)kl, &e, err);
  if (rc <= 0 || expired(s, e->ts, ev->ts)) return rc < 0 ? rc : 0;
  snprintf(name, size, "%s:%s", ev->kind, gk);
  return 1;
}

/* Notes member m of r in memory until the batch ends. */
static int note_pending(altar__settled_t *s, const altar__settled_member_t *m, const altar__settled_rec_t *r,
                        altar_error_t *err) {
  altar__settled_entry_t *e = altar__settled_entry_new(m->task_key, m->klen, m->run, m->rlen, r->seq, r->ts);
  void *old = NULL;
  if (!e || altar__hmap_put_h(&s->pend, e->data, e->klen, e->hash, e, &old)) {
    free(e);
    return nomem(err);
  }
  free(old);
  return ALTAR_OK;
}

/* Stores record r and an index key per member in the open batch, and notes
 * the members in memory until the batch ends (a replay: in the filter). */
static int store_record(altar__settled_t *s, altar_ledger_t *l, const altar__settled_rec_t *r, bool skip_empty,
                        altar_error_t *err) {
  char key[ALTAR__SETTLED_KEY_LEN + 1];
  altar__settled_key(r->seq, key);
  int rc = altar_ledger_aux_put(l, key, ALTAR__SETTLED_KEY_LEN, r->data, r->len, err);
  bool stored = rc == ALTAR_OK;
  if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK; /* memory is all there is */
  size_t pos = 0;
  altar__settled_member_t m;
  while (!rc && altar__settled_rec_next(r, &pos, &m)) {
    if (skip_empty && !m.klen) continue;
    if (stored && s->replay) /* its index key, staged below, answers a look-up the filter lets through */
      altar__settled_cache_remember(&s->cache, altar__hash(m.task_key, m.klen));
    else if ((rc = note_pending(s, &m, r, err))) return rc;
    if (!stored) continue;
    if (altar__settled_index_key(&s->kb, m.task_key, m.klen) ||
        altar__settled_index_value(&s->vb, r->seq, r->ts, m.run, m.rlen))
      return nomem(err);
    rc = altar_ledger_aux_put(l, s->kb.data, s->kb.len, s->vb.data, s->vb.len, err);
  }
  if (rc || !stored) return rc;
  char next[8];
  altar__settled_u64_put(next, r->seq + 1);
  /* One counter for the ledger, whatever the partition (docs/state.md). */
  int32_t was = altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  rc = altar_ledger_aux_put(l, ALTAR__SETTLED_NEXT_KEY, strlen(ALTAR__SETTLED_NEXT_KEY), next, sizeof next, err);
  altar_ledger_scope(l, was);
  return rc;
}

/* Notes members as settled at g's ts, in memory and, as one record, in the
 * open batch, with g's own entry when marker is set (a group that settled;
 * not for one late shard). Another run of any of them is then skipped, not
 * a second outcome. */
static int note_members(altar__settled_t *s, altar_ledger_t *l, const altar_group_event_t *g,
                        const altar_settled_members_t *members, bool marker, altar_error_t *err) {
  if (!members->n) return ALTAR_OK;
  altar_group_event_t all = *g;
  all.shards = members->shards;
  all.n_shards = members->n;
  altar__settled_rec_t *r = altar__settled_rec_of_group(s->next_seq, &all, members->task_keys);
  if (marker) r = with_marker(r, g);
  if (!r) return nomem(err);
  int rc = ALTAR_OK;
  /* Room for every member in memory at once (a wide group has 10^5). */
  if (!s->replay && altar__hmap_reserve(&s->pend, members->n + 1)) rc = nomem(err);
  if (!rc && r->len > ALTAR__SETTLED_TS_LEN) { /* a member to note */
    s->next_seq++;                             /* not taken back on abort: a gap keeps the order */
    rc = store_record(s, l, r, false, err);
  }
  free(r);
  return rc;
}

/* Notes every member of a settled group: what its decision consumed,
 * listed in g or not. */
static int note_group(altar__settled_t *s, altar_ledger_t *l, const altar_group_event_t *g,
                      const altar_settled_members_t *members, altar_error_t *err) {
  return note_members(s, l, g, members, true, err);
}

/* Notes a late shard's run once it is recorded: a later run of the same
 * task (its first worker was killed after the task ended) is then skipped
 * too, rather than recorded as a second outcome. */
static int note_late(altar__settled_t *s, altar_ledger_t *l, const altar_status_event_t *ev, altar_error_t *err) {
  altar_handle_t h = ev->handle; /* borrowed for the call: the record copies */
  char *tk = ev->task_key;
  altar_group_event_t g = {.ts = ev->ts};
  altar_settled_members_t one = {.shards = &h, .task_keys = &tk, .n = 1};
  return note_members(s, l, &g, &one, false, err);
}

/* ---- pruning ---- */

/* Records one pruning pass takes at most; a pass that reaches it leaves
 * the rest to the next batch. Bounds the pass's memory and time. */
#define PRUNE_PER_PASS 4096

typedef struct prune_scan {
  double cut;
  altar_ledger_t *l;
  altar__settled_rec_t **v; /* records to drop */
  uint64_t *bad;            /* seqs of damaged records, to delete */
  int32_t *vpart, *badpart; /* the status partition each is under */
  size_t n, cap, n_bad, cap_bad, cap_vpart, cap_badpart;
  bool full; /* stopped at PRUNE_PER_PASS */
  int rc;
} prune_scan_t;

/* Visits records oldest first and stops at the first one not due: records
 * are written in event order, so what follows is (nearly always) newer. A
 * record out of order goes with a later pass. */
static int visit_prune(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  prune_scan_t *p = ctx;
  uint64_t seq;
  if (!altar__settled_key_seq(key, klen, &seq)) return 0; /* not ours to judge here */
  if (p->n + p->n_bad >= PRUNE_PER_PASS) {
    p->full = true;
    return 1;
  }
  const char *why = NULL;
  altar__settled_rec_t *r = altar__settled_rec_parse(seq, val, vlen, &why);
  if (!r && !why) {
    p->rc = ALTAR_ENOMEM;
    return 1;
  }
  if (!r) {
    if (ALTAR_GROW(p->bad, p->cap_bad, p->n_bad + 1) || ALTAR_GROW(p->badpart, p->cap_badpart, p->n_bad + 1)) {
      p->rc = ALTAR_ENOMEM;
      return 1;
    }
    p->badpart[p->n_bad] = altar_ledger_visit_partition(p->l);
    p->bad[p->n_bad++] = seq;
    return 0;
  }
  if (!isfinite(r->ts)) { /* never expires */
    free(r);
    return 0;
  }
  if (r->ts >= p->cut) {
    free(r);
    return 1;
  }
  if (ALTAR_GROW(p->v, p->cap, p->n + 1) || ALTAR_GROW(p->vpart, p->cap_vpart, p->n + 1)) {
    free(r);
    p->rc = ALTAR_ENOMEM;
    return 1;
  }
  p->vpart[p->n] = altar_ledger_visit_partition(p->l);
  p->v[p->n++] = r;
  return 0;
}

/* Deletes record r and the index keys it still holds (not those a newer
 * record took over), in the open batch; drops them from the cache. */
static int drop_record(altar__settled_t *s, altar_ledger_t *l, const altar__settled_rec_t *r, altar_error_t *err) {
  size_t pos = 0;
  altar__settled_member_t m;
  int rc = ALTAR_OK;
  while (!rc && altar__settled_rec_next(r, &pos, &m)) {
    if (altar__settled_index_key(&s->kb, m.task_key, m.klen)) return nomem(err);
    altar_buf_reset(&s->vb);
    rc = altar_ledger_aux_get(l, s->kb.data, s->kb.len, &s->vb, err);
    if (rc == ALTAR_ENOTFOUND) {
      rc = ALTAR_OK;
      continue;
    }
    uint64_t seq;
    double ts;
    const char *run;
    size_t rlen;
    if (rc || !altar__settled_index_parse(s->vb.data, s->vb.len, &seq, &ts, &run, &rlen) || seq != r->seq) continue;
    rc = altar_ledger_aux_del(l, s->kb.data, s->kb.len, err);
    if (!rc) {
      altar__settled_cache_drop(&s->cache, m.task_key, m.klen, altar__hash(m.task_key, m.klen), r->seq);
      s->pruned++;
    }
  }
  char key[ALTAR__SETTLED_KEY_LEN + 1];
  altar__settled_key(r->seq, key);
  return rc ? rc : altar_ledger_aux_del(l, key, ALTAR__SETTLED_KEY_LEN, err);
}

/* Forgets settlements far past the horizon, in the ledger (with the open
 * batch) and the cache, once per horizon of event time. Only records older
 * than twice the horizon go, so a partition lagging less than a horizon
 * behind the newest event still sees every settlement it would have seen.
 * A record goes by its own ts, whether or not newer records took its tasks
 * over. Reads the oldest records only: nothing of the set is kept for it. */
static int prune(altar__settled_t *s, altar_ledger_t *l, const altar_status_event_t *events, size_t n,
                 altar_error_t *err) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(events[i].ts) && events[i].ts > s->max_ts) s->max_ts = events[i].ts;
  if (s->no_store || !isfinite(s->max_ts) || s->max_ts < s->next_prune) return ALTAR_OK;
  if (!s->pre_existing && !s->next_seq) { /* nothing stored yet */
    s->next_prune = s->max_ts + s->horizon_s;
    return ALTAR_OK;
  }
  prune_scan_t p = {.cut = s->max_ts - 2 * s->horizon_s, .l = l};
  /* Every partition's records, merged in sequence (the ledger's one
   * counter's) order; each dropped under its own partition. */
  int32_t was = altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE);
  int rc = altar_ledger_aux_scan(l, ALTAR__SETTLED_PREFIX, 2, visit_prune, &p, err);
  if (rc > 0) rc = ALTAR_OK; /* the visitor stopped it */
  if (!rc && p.rc) rc = nomem(err);
  for (size_t i = 0; !rc && i < p.n; i++) {
    altar_ledger_scope(l, p.vpart[i]);
    rc = drop_record(s, l, p.v[i], err);
  }
  for (size_t i = 0; !rc && i < p.n_bad; i++) {
    char key[ALTAR__SETTLED_KEY_LEN + 1];
    altar__settled_key(p.bad[i], key);
    altar_ledger_scope(l, p.badpart[i]);
    rc = altar_ledger_aux_del(l, key, ALTAR__SETTLED_KEY_LEN, err);
    if (!rc) s->damaged++;
  }
  altar_ledger_scope(l, was);
  free(p.vpart);
  free(p.badpart);
  if (!rc) s->next_prune = p.full ? s->max_ts : s->max_ts + s->horizon_s;
  for (size_t i = 0; i < p.n; i++) free(p.v[i]);
  free(p.v);
  free(p.bad);
  return rc;
}

int altar__settled_apply(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                         const altar_status_event_t *events, size_t n, altar_apply_result_t *pres, size_t *pskipped,
                         altar_error_t *err) {
  size_t skipped = 0;
  int rc = prune(s, l, events, n, err);
  int32_t was = altar_ledger_scope_get(l);
  for (size_t i = 0; !rc && i < n; i++) {
    /* What the event changes goes under its status partition (docs/state.md). */
    if (events[i].log_partitions > 0) altar_ledger_scope(l, events[i].log_partition);
    if (events[i].cancel) { /* `altar cancel`, in this partition's order */
      size_t before = pres->n_events;
      rc = altar__cancel_apply(l, groups, &s->cancelled_jobs, &events[i], pres, err);
      for (size_t k = before; !rc && k < pres->n_events; k++)
        rc = note_group(s, l, &pres->events[k], &pres->settled[k], err);
      if (!rc) pres->applied++;
      continue;
    }
    if ((rc = superseded(s, l, &events[i], err)) != 0) {
      if (rc > 0) {
        rc = ALTAR_OK;
        skipped++;
      }
      continue;
    }
    char name[1200];
    if ((rc = late_for_settled(s, l, groups, &events[i], name, sizeof name, err)) != 0) {
      if (rc < 0) continue;
      rc = altar__apply_late(l, &events[i], name, pres, err);
      if (!rc) rc = note_late(s, l, &events[i], err);
      continue;
    }
    size_t before = pres->n_events;
    if (s->cancelled_jobs.n && altar__cancel_covers(l, groups, &s->cancelled_jobs, &events[i])) {
      rc = altar__cancel_event(l, groups, &events[i], pres, err); /* refused: its group settles as cancelled */
      if (!rc) pres->applied++;
    } else {
      rc = altar_apply_events(l, groups, &events[i], 1, -1, pres, err);
    }
    for (size_t k = before; !rc && k < pres->n_events; k++)
      rc = note_group(s, l, &pres->events[k], &pres->settled[k], err);
  }
  altar_ledger_scope(l, was);
  if (pskipped) *pskipped = skipped;
  return rc;
}

int altar__settled_recheck_held(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                                altar_apply_result_t *pres, altar_error_t *err) {
  size_t before = pres->n_events;
  int rc = altar__apply_recheck_held(l, groups, pres, err);
  for (size_t k = before; !rc && k < pres->n_events; k++)
    rc = note_group(s, l, &pres->events[k], &pres->settled[k], err);
  return rc;
}

/* ---- loading ---- */

/* A ledger written before the index: its records (and keys of the older
 * per-member layout) read whole, once, to write the index. */
typedef struct legacy {
  altar__hmap_t done; /* task key → the record that settled it last */
  altar__settled_rec_t **recs;
  size_t n_recs, cap_recs;
  uint64_t next_seq;
} legacy_t;

static void legacy_free(legacy_t *g) {
  altar__hmap_free(&g->done);
  for (size_t i = 0; i < g->n_recs; i++) free(g->recs[i]);
  free(g->recs);
}

/* Files every member of r under its task key; an entry a member replaces
 * stays in its own record. The older loader dropped an empty task key (its
 * key had nothing after the prefix), so this does too. */
static int legacy_add(legacy_t *g, altar__settled_rec_t *r) {
  if (ALTAR_GROW(g->recs, g->cap_recs, g->n_recs + 1)) {
    free(r);
    return ALTAR_ENOMEM;
  }
  g->recs[g->n_recs++] = r;
  size_t pos = 0;
  altar__settled_member_t mb;
  while (altar__settled_rec_next(r, &pos, &mb)) {
    if (!mb.klen) continue;
    if (altar__hmap_put_h(&g->done, mb.task_key, mb.klen, altar__hash(mb.task_key, mb.klen), r, NULL))
      return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

typedef struct key_copy {
  char *k;
  size_t len;
} key_copy_t;

typedef struct load_ctx {
  legacy_t *g;
  key_copy_t *bad; /* keys of damaged records, to delete */
  size_t n_bad, cap_bad;
  char first_bad[48]; /* the first one's key, printable */
  const char *first_why;
  int rc;
} load_ctx_t;

/* Ends a scan out of memory. */
static int stop_nomem(load_ctx_t *c) {
  c->rc = ALTAR_ENOMEM;
  return 1;
}

static int note_damage(load_ctx_t *c, const char *key, size_t klen, const char *why) {
  if (ALTAR_GROW(c->bad, c->cap_bad, c->n_bad + 1)) return stop_nomem(c);
  char *k = malloc(klen ? klen : 1);
  if (!k) return stop_nomem(c);
  memcpy(k, key, klen);
  c->bad[c->n_bad++] = (key_copy_t){k, klen};
  if (!c->first_why) {
    size_t n = klen < sizeof c->first_bad - 1 ? klen : sizeof c->first_bad - 1;
    for (size_t i = 0; i < n; i++) c->first_bad[i] = key[i] >= 0x20 && key[i] < 0x7f ? key[i] : '?';
    c->first_bad[n] = 0;
    c->first_why = why;
  }
  return 0;
}

static int visit_load(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  load_ctx_t *c = ctx;
  uint64_t seq;
  const char *why = "not a record key";
  altar__settled_rec_t *r = NULL;
  if (altar__settled_key_seq(key, klen, &seq)) {
    if (seq == UINT64_MAX) why = "sequence number out of range"; /* no next one */
    else if (!(r = altar__settled_rec_parse(seq, val, vlen, &why)) && !why) return stop_nomem(c);
  }
  if (!r) return note_damage(c, key, klen, why);
  if (seq >= c->g->next_seq) c->g->next_seq = seq + 1;
  return legacy_add(c->g, r) ? stop_nomem(c) : 0;
}

static int cmp_old_ts(const void *a, const void *b) {
  double x = (*(altar__settled_old_t *const *)a)->ts, y = (*(altar__settled_old_t *const *)b)->ts;
  return (x > y) - (x < y);
}

/* Members per record carried over from the older layout: entries of one ts
 * share a record (a group's members did), so a vast set of never-expiring
 * ones is cut into values of bounded size. */
#define OLD_PER_RECORD 1024

/* Stores the old entries that no record took over (the older layout is
 * older than any record) as records of their ts, in the open batch. */
static int carry_olds(legacy_t *g, altar_ledger_t *l, const altar__settled_olds_t *olds, altar_error_t *err) {
  altar__settled_old_t **live = malloc((olds->n ? olds->n : 1) * sizeof *live);
  if (!live) return nomem(err);
  size_t n = 0, kl;
  for (size_t i = 0; i < olds->n; i++) {
    const char *tk = altar__settled_old_task_key(&olds->v[i], &kl);
    if (kl && !altar__hmap_get(&g->done, tk, kl)) live[n++] = &olds->v[i];
  }
  qsort(live, n, sizeof *live, cmp_old_ts);
  int rc = ALTAR_OK;
  for (size_t i = 0, j; !rc && i < n; i = j) {
    for (j = i + 1; j < n && j - i < OLD_PER_RECORD && live[j]->ts == live[i]->ts; j++) {}
    altar__settled_rec_t *r = altar__settled_rec_of_olds(g->next_seq, live[i]->ts, live + i, j - i);
    if (!r || legacy_add(g, r)) {
      rc = nomem(err);
      break;
    }
    g->next_seq++;
    char key[ALTAR__SETTLED_KEY_LEN + 1];
    altar__settled_key(r->seq, key);
    rc = altar_ledger_aux_put(l, key, ALTAR__SETTLED_KEY_LEN, r->data, r->len, err);
  }
  free(live);
  return rc;
}

/* The index of every entry, and the next seq, in the open batch. */
static int write_index(altar__settled_t *s, altar_ledger_t *l, const legacy_t *g, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < g->done.cap; i++) {
    const altar__hslot_t *sl = &g->done.slots[i];
    if (!sl->key) continue;
    const altar__settled_rec_t *r = sl->val;
    const char *run = sl->key + sl->len + 1; /* the member's run follows its task key */
    if (altar__settled_index_key(&s->kb, sl->key, sl->len) ||
        altar__settled_index_value(&s->vb, r->seq, r->ts, run, strlen(run)))
      return nomem(err);
    rc = altar_ledger_aux_put(l, s->kb.data, s->kb.len, s->vb.data, s->vb.len, err);
  }
  char next[8];
  altar__settled_u64_put(next, g->next_seq);
  return rc ? rc
            : altar_ledger_aux_put(l, ALTAR__SETTLED_NEXT_KEY, strlen(ALTAR__SETTLED_NEXT_KEY), next, sizeof next, err);
}

/* One write: the older layout's keys become records, they and damaged
 * records are deleted, and every entry is indexed. */
static int rewrite(altar__settled_t *s, altar_ledger_t *l, legacy_t *g, const altar__settled_olds_t *olds,
                   const load_ctx_t *c, altar_error_t *err) {
  int rc = altar_ledger_begin(l, err);
  if (rc) return rc;
  rc = carry_olds(g, l, olds, err);
  for (size_t i = 0; !rc && i < olds->n; i++) rc = altar_ledger_aux_del(l, olds->v[i].key, olds->v[i].klen, err);
  for (size_t i = 0; !rc && i < c->n_bad; i++) rc = altar_ledger_aux_del(l, c->bad[i].k, c->bad[i].len, err);
  if (!rc) rc = write_index(s, l, g, err);
  if (!rc) return altar_ledger_commit(l, err);
  altar_error_t ignored = {0};
  altar_ledger_abort(l, &ignored);
  return rc;
}

/* Indexes a ledger written before the index, once. */
static int index_legacy(altar__settled_t *s, altar_ledger_t *l, altar_error_t *err) {
  altar__settled_olds_t olds = {0};
  legacy_t g = {0};
  load_ctx_t c = {.g = &g};
  int rc = altar__settled_olds_read(l, &olds, err);
  if (!rc) rc = altar_ledger_aux_scan(l, ALTAR__SETTLED_PREFIX, 2, visit_load, &c, err);
  if (rc > 0) rc = ALTAR_OK; /* stopped out of memory: c.rc says */
  if (!rc && c.rc) rc = nomem(err);
  if (!rc && (olds.n || g.n_recs || c.n_bad)) {
    rc = rewrite(s, l, &g, &olds, &c, err);
    if (!rc) {
      s->pre_existing = true;
      s->next_seq = g.next_seq;
    }
  }
  if (!rc && c.n_bad) {
    s->damaged = c.n_bad;
    altar_error_set(&s->damage, ALTAR_ELEDGER,
                    "settled tasks: %zu damaged record(s) skipped and deleted, the first %s: %s", c.n_bad, c.first_bad,
                    c.first_why);
  }
  for (size_t i = 0; i < c.n_bad; i++) free(c.bad[i].k);
  free(c.bad);
  legacy_free(&g);
  altar__settled_olds_free(&olds);
  return rc;
}

int altar__settled_load(altar__settled_t *s, altar_ledger_t *l, size_t cache_entries, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  s->horizon_s = horizon_setting_s > 0 ? horizon_setting_s : ALTAR_SETTLED_HORIZON_S;
  s->cache.cap = cache_entries ? cache_entries : ALTAR_DEFAULT_SETTLED_CACHE_ENTRIES;
  altar_buf_t b = {0};
  int rc = altar_ledger_aux_get(l, ALTAR__SETTLED_NEXT_KEY, strlen(ALTAR__SETTLED_NEXT_KEY), &b, err);
  if (rc == ALTAR_ENOTSUP) { /* no aux storage: memory is all there is, so it keeps all */
    s->no_store = true;
    s->cache.cap = 0;
    return ALTAR_OK;
  }
  if (rc == ALTAR_OK && b.len == 8) {
    s->pre_existing = true;
    s->next_seq = altar__settled_u64_get(b.data);
  } else if (rc == ALTAR_OK || rc == ALTAR_ENOTFOUND) {
    rc = index_legacy(s, l, err); /* or a fresh ledger: then nothing to do */
  }
  altar_buf_free(&b);
  if (!rc) rc = altar__cancel_jobs_load(l, &s->cancelled_jobs, err);
  /* With nothing stored before, a key never evicted was never settled. */
  s->cache.track_evicted = !s->pre_existing;
  return rc;
}
