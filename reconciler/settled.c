/* Settled task keys: skip late reruns of tasks whose group already settled. */
#include "reconciler/settled.h"
#include "reconciler/cancel.h"
#include "altar/grow.h"

#include "reconciler/settled_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nomem(altar_error_t *err) { return altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory"); }

static int recs_reserve(altar__settled_recs_t *v, size_t n) { return ALTAR_GROW(v->v, v->cap, n); }

static void recs_clear(altar__settled_recs_t *v) {
  for (size_t i = 0; i < v->n; i++) free(v->v[i]);
  v->n = 0;
}

static void recs_free(altar__settled_recs_t *v) {
  recs_clear(v);
  free(v->v);
  memset(v, 0, sizeof *v);
}

/* True when an event at ev_ts no longer sees a settlement made at ts. An
 * expiry that counted from "now" would let the daemon and a replay decide
 * differently; this depends on the two events' own times only. */
static bool expired(double settled_ts, double ev_ts) {
  return isfinite(settled_ts) && ev_ts - settled_ts > ALTAR_SETTLED_HORIZON_S;
}

/* Files every member of r under its task key in m; an entry a member
 * replaces stays in its own record. The older loader dropped an empty task
 * key (its key had nothing after the prefix), so a load still does. */
static int file_members(altar__hmap_t *m, altar__settled_rec_t *r, bool skip_empty) {
  size_t pos = 0;
  altar__settled_member_t mb;
  while (altar__settled_rec_next(r, &pos, &mb)) {
    if (skip_empty && !mb.klen) continue;
    if (altar__hmap_put_h(m, mb.task_key, mb.klen, altar__hash(mb.task_key, mb.klen), r, NULL)) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

void altar__settled_free(altar__settled_t *s) {
  altar__hmap_free(&s->done);
  altar__hmap_free(&s->pend);
  recs_free(&s->recs);
  recs_free(&s->pend_recs);
  recs_free(&s->gone);
  altar_strlist_clear(&s->cancelled_jobs);
}

void altar__settled_commit(altar__settled_t *s) {
  for (size_t i = 0; i < s->pend.cap; i++) {
    altar__hslot_t *sl = &s->pend.slots[i];
    /* out of memory: forget it (a rerun may then apply) */
    if (sl->key) (void)altar__hmap_put_h(&s->done, sl->key, sl->len, sl->hash, sl->val, NULL);
  }
  altar__hmap_clear(&s->pend);
  /* room reserved by note_group */
  if (s->pend_recs.n) memcpy(s->recs.v + s->recs.n, s->pend_recs.v, s->pend_recs.n * sizeof *s->recs.v);
  s->recs.n += s->pend_recs.n;
  s->pend_recs.n = 0;
  recs_clear(&s->gone); /* their keys are deleted now */
}

void altar__settled_abort(altar__settled_t *s) {
  altar__hmap_clear(&s->pend);
  recs_clear(&s->pend_recs);
}

/* True when ev belongs to another run of a task whose group settled. */
static bool superseded(const altar__settled_t *s, const altar_status_event_t *ev) {
  if (!ev->task_key || !ev->handle.backend || !ev->handle.external_id) return false;
  size_t klen = strlen(ev->task_key);
  uint64_t h = altar__hash(ev->task_key, klen);
  const altar__hslot_t *sl = s->pend.n ? altar__hmap_slot_h(&s->pend, ev->task_key, klen, h) : NULL;
  if (!sl) sl = altar__hmap_slot_h(&s->done, ev->task_key, klen, h);
  if (!sl || expired(((const altar__settled_rec_t *)sl->val)->ts, ev->ts)) return false;
  const char *run = sl->key + sl->len + 1; /* the member's run follows its task key */
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

/* The settled group a terminal event's open record belongs to, when its
 * group settled (and has not expired for this event): its name
 * "kind:group_key" into name. */
static bool late_for_settled(const altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                             const altar_status_event_t *ev, char *name, size_t size) {
  if (ev->event != ALTAR_EV_STATE || !altar_state_terminal(ev->state) || !ev->kind || !ev->task_key ||
      !ev->handle.backend || !ev->handle.external_id)
    return false;
  const altar_group_spec_t *gs = altar_group_specs_find(groups, ev->kind);
  if (!gs || !altar_ledger_peek_open(l, ev->handle.backend, ev->handle.external_id))
    return false;
  char gk[1024];
  size_t gl = altar_group_by_key_into(&gs->group_by, &ev->handle, gk, sizeof gk);
  if (gl >= sizeof gk) return false; /* a key this long is not worth a late check */
  char key[1100];
  int kl = snprintf(key, sizeof key, "#%s\x1f%s", ev->kind, gk);
  if (kl < 0 || (size_t)kl >= sizeof key) return false;
  uint64_t h = altar__hash(key, (size_t)kl);
  const altar__hslot_t *sl = s->pend.n ? altar__hmap_slot_h(&s->pend, key, (size_t)kl, h) : NULL;
  if (!sl) sl = altar__hmap_slot_h(&s->done, key, (size_t)kl, h);
  if (!sl || expired(((const altar__settled_rec_t *)sl->val)->ts, ev->ts)) return false;
  snprintf(name, size, "%s:%s", ev->kind, gk);
  return true;
}

/* Notes members as settled at g's ts, in memory and, as one record, in the
 * open batch, with g's own entry when marker is set (a group that settled;
 * not for one late shard). Another run of any of them is then skipped, not
 * a second outcome. */
static int note_members(altar__settled_t *s, altar_ledger_t *l, const altar_group_event_t *g,
                        const altar_settled_members_t *members, bool marker, altar_error_t *err) {
  if (!members->n) return ALTAR_OK;
  /* The room commit needs too, so that it cannot fail. */
  if (recs_reserve(&s->pend_recs, s->pend_recs.n + 1) || recs_reserve(&s->recs, s->recs.n + s->pend_recs.n + 1))
    return nomem(err);
  altar_group_event_t all = *g;
  all.shards = members->shards;
  all.n_shards = members->n;
  altar__settled_rec_t *r = altar__settled_rec_of_group(s->next_seq, &all, members->task_keys);
  if (marker) r = with_marker(r, g);
  if (!r) return nomem(err);
  if (r->len == ALTAR__SETTLED_TS_LEN) { /* no member to note */
    free(r);
    return ALTAR_OK;
  }
  s->pend_recs.v[s->pend_recs.n++] = r;
  s->next_seq++; /* not taken back on abort: a gap keeps the order */
  if (file_members(&s->pend, r, false)) return nomem(err);
  char key[ALTAR__SETTLED_KEY_LEN + 1];
  altar__settled_key(r->seq, key);
  int rc = altar_ledger_aux_put(l, key, ALTAR__SETTLED_KEY_LEN, r->data, r->len, err);
  return rc == ALTAR_ENOTSUP ? ALTAR_OK : rc;
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

/* Drops from memory the entries r still holds (not those a newer record
 * took over). */
static void drop_entries(altar__settled_t *s, const altar__settled_rec_t *r) {
  size_t pos = 0;
  altar__settled_member_t m;
  while (altar__settled_rec_next(r, &pos, &m)) {
    const altar__hslot_t *sl = altar__hmap_slot_h(&s->done, m.task_key, m.klen, altar__hash(m.task_key, m.klen));
    if (sl && sl->val == r) {
      altar__hmap_del(&s->done, m.task_key, m.klen);
      s->pruned++;
    }
  }
}

/* Forgets settlements far past the horizon, in memory and (with the open
 * batch) on disk, once per horizon of event time. Only records older than
 * twice the horizon go, so a partition lagging less than a horizon behind
 * the newest event still sees every settlement it would have seen. A record
 * goes by its own ts, whether or not newer records took its tasks over. */
static int prune(altar__settled_t *s, const altar_status_event_t *events, size_t n, altar_error_t *err) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(events[i].ts) && events[i].ts > s->max_ts) s->max_ts = events[i].ts;
  if (!isfinite(s->max_ts) || s->max_ts < s->next_prune) return ALTAR_OK;
  double cut = s->max_ts - 2 * ALTAR_SETTLED_HORIZON_S;
  s->next_prune = s->max_ts + ALTAR_SETTLED_HORIZON_S;
  if (recs_reserve(&s->gone, s->gone.n + s->recs.n)) return nomem(err);
  size_t keep = 0;
  for (size_t i = 0; i < s->recs.n; i++) {
    altar__settled_rec_t *r = s->recs.v[i];
    if (!isfinite(r->ts) || r->ts >= cut) {
      s->recs.v[keep++] = r;
      continue;
    }
    drop_entries(s, r);
    s->gone.v[s->gone.n++] = r;
  }
  s->recs.n = keep;
  return ALTAR_OK;
}

/* Deletes the keys of pruned records in the open batch. */
static int delete_gone(altar__settled_t *s, altar_ledger_t *l, altar_error_t *err) {
  for (size_t i = 0; i < s->gone.n; i++) {
    char key[ALTAR__SETTLED_KEY_LEN + 1];
    altar__settled_key(s->gone.v[i]->seq, key);
    int rc = altar_ledger_aux_del(l, key, ALTAR__SETTLED_KEY_LEN, err);
    if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* nothing was stored */
    if (rc) return rc;
  }
  return ALTAR_OK;
}

int altar__settled_apply(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                         const altar_status_event_t *events, size_t n, altar_apply_result_t *pres,
                         size_t *pskipped, altar_error_t *err) {
  size_t skipped = 0;
  int rc = prune(s, events, n, err);
  if (!rc) rc = delete_gone(s, l, err);
  for (size_t i = 0; !rc && i < n; i++) {
    if (events[i].cancel) { /* `altar cancel`, in this partition's order */
      size_t before = pres->n_events;
      rc = altar__cancel_apply(l, groups, &s->cancelled_jobs, &events[i], pres, err);
      for (size_t k = before; !rc && k < pres->n_events; k++)
        rc = note_group(s, l, &pres->events[k], &pres->settled[k], err);
      if (!rc) pres->applied++;
      continue;
    }
    if (superseded(s, &events[i])) {
      skipped++;
      continue;
    }
    char name[1200];
    if (late_for_settled(s, l, groups, &events[i], name, sizeof name)) {
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

typedef struct key_copy {
  char *k;
  size_t len;
} key_copy_t;

typedef struct load_ctx {
  altar__settled_t *s;
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
  altar__settled_t *s = c->s;
  uint64_t seq;
  const char *why = "not a record key";
  altar__settled_rec_t *r = NULL;
  if (altar__settled_key_seq(key, klen, &seq)) {
    if (seq == UINT64_MAX) why = "sequence number out of range"; /* no next one */
    else if (!(r = altar__settled_rec_parse(seq, val, vlen, &why)) && !why) return stop_nomem(c);
  }
  if (!r) return note_damage(c, key, klen, why);
  if (recs_reserve(&s->recs, s->recs.n + 1)) {
    free(r);
    return stop_nomem(c);
  }
  s->recs.v[s->recs.n++] = r;
  if (seq >= s->next_seq) s->next_seq = seq + 1;
  if (file_members(&s->done, r, true)) return stop_nomem(c);
  return 0;
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
 * older than any record) as records of their ts, in memory and in the open
 * batch. */
static int carry_olds(altar__settled_t *s, altar_ledger_t *l, const altar__settled_olds_t *olds, altar_error_t *err) {
  altar__settled_old_t **live = malloc((olds->n ? olds->n : 1) * sizeof *live);
  if (!live) return nomem(err);
  size_t n = 0, kl;
  for (size_t i = 0; i < olds->n; i++) {
    const char *tk = altar__settled_old_task_key(&olds->v[i], &kl);
    if (kl && !altar__hmap_get(&s->done, tk, kl)) live[n++] = &olds->v[i];
  }
  qsort(live, n, sizeof *live, cmp_old_ts);
  int rc = ALTAR_OK;
  for (size_t i = 0, j; !rc && i < n; i = j) {
    for (j = i + 1; j < n && j - i < OLD_PER_RECORD && live[j]->ts == live[i]->ts; j++) {
    }
    altar__settled_rec_t *r = NULL;
    if (recs_reserve(&s->recs, s->recs.n + 1) ||
        !(r = altar__settled_rec_of_olds(s->next_seq, live[i]->ts, live + i, j - i))) {
      rc = nomem(err);
      break;
    }
    s->recs.v[s->recs.n++] = r;
    s->next_seq++;
    if (file_members(&s->done, r, true)) {
      rc = nomem(err);
      break;
    }
    char key[ALTAR__SETTLED_KEY_LEN + 1];
    altar__settled_key(r->seq, key);
    rc = altar_ledger_aux_put(l, key, ALTAR__SETTLED_KEY_LEN, r->data, r->len, err);
  }
  free(live);
  return rc;
}

/* One write: the older layout's keys become records, and they and damaged
 * records are deleted. */
static int rewrite(altar__settled_t *s, altar_ledger_t *l, const altar__settled_olds_t *olds, const load_ctx_t *c,
                   altar_error_t *err) {
  if (!olds->n && !c->n_bad) return ALTAR_OK;
  int rc = altar_ledger_begin(l, err);
  if (rc) return rc;
  rc = carry_olds(s, l, olds, err);
  for (size_t i = 0; !rc && i < olds->n; i++) rc = altar_ledger_aux_del(l, olds->v[i].key, olds->v[i].klen, err);
  for (size_t i = 0; !rc && i < c->n_bad; i++) rc = altar_ledger_aux_del(l, c->bad[i].k, c->bad[i].len, err);
  if (!rc) return altar_ledger_commit(l, err);
  altar_error_t ignored = {0};
  altar_ledger_abort(l, &ignored);
  return rc;
}

int altar__settled_load(altar__settled_t *s, altar_ledger_t *l, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  altar__settled_olds_t olds = {0};
  load_ctx_t c = {.s = s};
  int rc = altar__settled_olds_read(l, &olds, err);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* no aux storage: nothing was kept */
  if (!rc) rc = altar__cancel_jobs_load(l, &s->cancelled_jobs, err);
  if (!rc) rc = altar_ledger_aux_scan(l, ALTAR__SETTLED_PREFIX, 2, visit_load, &c, err);
  if (!rc && c.rc) rc = nomem(err);
  if (!rc) rc = rewrite(s, l, &olds, &c, err);
  if (!rc && c.n_bad) {
    s->damaged = c.n_bad;
    altar_error_set(&s->damage, ALTAR_ELEDGER,
                    "settled tasks: %zu damaged record(s) skipped and deleted, the first %s: %s", c.n_bad,
                    c.first_bad, c.first_why);
  }
  /* The newest event time the entries show, as the older loader found it. */
  for (size_t i = 0; !rc && i < s->done.cap; i++)
    if (s->done.slots[i].key) {
      double ts = ((const altar__settled_rec_t *)s->done.slots[i].val)->ts;
      if (ts > s->max_ts) s->max_ts = ts;
    }
  for (size_t i = 0; i < c.n_bad; i++) free(c.bad[i].k);
  free(c.bad);
  altar__settled_olds_free(&olds);
  return rc;
}
