/* Applying status events to the ledger, one at a time in log order, and
 * deciding after each one the group it touched (fleet invariant 3: batch
 * sizes never change which shards a group fires with). */
#include "altar/reconcile.h"
#include "reconciler/attempts_note.h"
#include "reconciler/group_outputs.h"
#include "reconciler/retry_backoff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frees what r holds; the event and retry arrays and the arena's chunks
 * stay for the next batch. */
void altar_apply_result_reset(altar_apply_result_t *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_retries; i++) {
    altar_retry_request_t *q = &r->retries[i];
    free(q->kind);
    free(q->task_key);
    altar_handle_clear(&q->handle);
    altar_spec_free(q->spec);
  }
  altar_strlist_clear(&r->deferred_groups);
  altar_strlist_clear(&r->stalled_groups);
  altar_strlist_clear(&r->late_shards);
  altar_strlist_clear(&r->held_groups);
  altar_strlist_clear(&r->held_reasons);
  altar_arena_reset(&r->mem); /* the events' strings, shards and task keys */
  r->n_events = r->n_retries = r->applied = r->ignored = 0;
}

void altar_apply_result_clear(altar_apply_result_t *r) {
  if (!r) return;
  altar_apply_result_reset(r);
  free(r->events);
  free(r->settled);
  free(r->event_part);
  free(r->retries);
  altar_arena_free(&r->mem);
  memset(r, 0, sizeof *r);
}

/* Copies of what a decision needs, taken before the ledger changes (the
 * borrowed member views die with the first change). They lie in the
 * result's arena: an event made of them keeps them until the result is
 * reset, and one not made costs nothing to free. */
typedef struct picked {
  altar_handle_t *hs;
  const char **keys; /* what the event id is made of: the task key, or "backend:external_id" */
  char **tkeys;      /* the record's task key, or NULL: what the settled set notes */
  size_t n;
} picked_t;

static int pick(picked_t *p, altar_arena_t *a, const altar_ledger_entry_t *const *m, size_t n, altar_state_t state) {
  size_t cnt = 0;
  for (size_t i = 0; i < n; i++) cnt += m[i]->rec.state == state;
  memset(p, 0, sizeof *p);
  if (!cnt) return ALTAR_OK;
  /* The three arrays in one piece (every element pointer-aligned). */
  p->hs = altar_arena_alloc(a, cnt * (sizeof *p->hs + sizeof *p->keys + sizeof *p->tkeys));
  if (!p->hs) return ALTAR_ENOMEM;
  p->keys = (const char **)(void *)(p->hs + cnt);
  p->tkeys = (char **)(void *)(p->keys + cnt);
  for (size_t i = 0; i < n; i++) {
    const altar_ledger_entry_t *e = m[i];
    if (e->rec.state != state) continue;
    /* The handle and its member key in one piece. */
    const altar_handle_t *h = &e->rec.handle;
    size_t kl = e->task_key ? strlen(e->task_key) : strlen(h->backend) + 1 + strlen(h->external_id);
    char *mem = altar_arena_alloc(a, altar_handle_packed_size(h) + kl + 1);
    if (!mem) return ALTAR_ENOMEM;
    char *k = altar_handle_pack(&p->hs[p->n], h, mem);
    if (e->task_key) memcpy(k, e->task_key, kl + 1);
    else snprintf(k, kl + 1, "%s:%s", h->backend, h->external_id);
    p->keys[p->n] = k;
    p->tkeys[p->n++] = e->task_key ? k : NULL;
  }
  return ALTAR_OK;
}

/* The length of s cut to at most max bytes, never inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max) return n;
  while (max && ((unsigned char)s[max] & 0xC0) == 0x80) max--;
  return max;
}

/* The failed members' reasons for a dead-lettered group's event, copied
 * into the arena before the ledger changes: at most
 * ALTAR_GROUP_MAX_FAILURES, in member order, reason and detail cut. */
static int pick_failures(altar_arena_t *a, const altar_ledger_entry_t *const *m, size_t n, altar_group_failure_t **pv,
                         size_t *pn) {
  size_t cnt = 0;
  for (size_t i = 0; i < n; i++) cnt += m[i]->rec.state == ALTAR_STATE_FAILED && m[i]->rec.failure;
  if (cnt > ALTAR_GROUP_MAX_FAILURES) cnt = ALTAR_GROUP_MAX_FAILURES;
  *pv = NULL;
  *pn = 0;
  if (!cnt) return ALTAR_OK;
  altar_group_failure_t *v = altar_arena_alloc(a, cnt * sizeof *v);
  altar_failure_t *fs = altar_arena_alloc(a, cnt * sizeof *fs);
  if (!v || !fs) return ALTAR_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < n && k < cnt; i++) {
    const altar_record_t *rec = &m[i]->rec;
    if (rec->state != ALTAR_STATE_FAILED || !rec->failure) continue;
    const altar_failure_t *f = rec->failure;
    const char *reason = f->reason ? f->reason : "";
    fs[k] = (altar_failure_t){.deterministic = f->deterministic, .exit_code = f->exit_code};
    fs[k].reason = altar_arena_strndup(a, reason, utf8_cut(reason, 128));
    fs[k].detail =
        f->detail ? altar_arena_strndup(a, f->detail, utf8_cut(f->detail, ALTAR_GROUP_FAILURE_DETAIL)) : NULL;
    v[k].external_id = altar_arena_strndup(a, rec->handle.external_id, strlen(rec->handle.external_id));
    v[k].failure = &fs[k];
    if (!fs[k].reason || (f->detail && !fs[k].detail) || !v[k].external_id) return ALTAR_ENOMEM;
    k++;
  }
  *pv = v;
  *pn = k;
  return ALTAR_OK;
}

/* Appends the event of p's shards, noting also (may be NULL) as settled
 * with them; gk lies in res->mem already. */
static int push_event(altar_ledger_t *l, altar_apply_result_t *res, altar_group_event_kind_t kind, const char *k,
                      char *gk, const picked_t *p, const picked_t *also, double ts, altar_error_t *err) {
  if (res->n_events == res->cap_events) {
    size_t cap = res->cap_events ? res->cap_events * 2 : 8;
    altar_group_event_t *v = realloc(res->events, cap * sizeof *v);
    if (!v) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    res->events = v;
    altar_settled_members_t *sm = realloc(res->settled, cap * sizeof *sm);
    if (!sm) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    res->settled = sm;
    int32_t *ep = realloc(res->event_part, cap * sizeof *ep);
    if (!ep) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    res->event_part = ep;
    res->cap_events = cap;
  }
  char id[ALTAR_TASK_KEY_LEN + 1];
  int rc = altar_group_event_id(k, gk, p->keys, p->n, id);
  if (rc) return altar_error_set(err, rc, "apply: group %s:%s: cannot compute event id", k, gk);
  altar_settled_members_t set = {.shards = p->hs, .task_keys = p->tkeys, .n = p->n};
  if (also && also->n) {
    size_t n = p->n + also->n;
    set.shards = altar_arena_alloc(&res->mem, n * (sizeof *set.shards + sizeof *set.task_keys));
    if (!set.shards) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    set.task_keys = (char **)(void *)(set.shards + n);
    for (size_t i = 0; i < p->n; i++) {
      set.shards[i] = p->hs[i];
      set.task_keys[i] = p->tkeys[i];
    }
    for (size_t i = 0; i < also->n; i++) {
      set.shards[p->n + i] = also->hs[i];
      set.task_keys[p->n + i] = also->tkeys[i];
    }
    set.n = n;
  }
  altar_group_event_t *ev = &res->events[res->n_events];
  /* Every member, however many: the daemon and a rebuild split a wide
   * group's event into its messages (altar_encode_group_messages). */
  *ev = (altar_group_event_t){.v = ALTAR_SCHEMA_VERSION,
                              .event = kind,
                              .ts = ts,
                              .group_key = gk,
                              .shards = p->hs,
                              .n_shards = p->n,
                              .members_total = p->n};
  if (!(ev->event_id = altar_arena_strndup(&res->mem, id, ALTAR_TASK_KEY_LEN)) ||
      !(ev->kind = altar_arena_strndup(&res->mem, k, strlen(k))))
    return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  res->event_part[res->n_events] = altar_ledger_scope_get(l); /* the partition of the event deciding it */
  res->settled[res->n_events++] = set;
  return ALTAR_OK;
}

static int push_name(altar_strlist_t *l, const char *k, const char *gk, altar_error_t *err) {
  size_t n = strlen(k) + strlen(gk) + 2;
  char *s = malloc(n);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  snprintf(s, n, "%s:%s", k, gk);
  int rc = altar_strlist_push(l, s);
  free(s);
  return rc ? altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory") : ALTAR_OK;
}

static int consume_both(altar_ledger_t *l, const picked_t *a, const picked_t *b, altar_error_t *err) {
  int rc = a->n ? altar_ledger_consume(l, a->hs, a->n, err) : ALTAR_OK;
  if (!rc && b->n) rc = altar_ledger_consume(l, b->hs, b->n, err);
  return rc;
}

/* Asks for another run of each failed shard: back to PENDING, restart
 * count raised, and a retry request carrying the spec. When one has no
 * stored spec (nothing to republish), changes nothing and sets *pno_spec:
 * the group is dead-lettered rather than left pending. */
static int retry_all(altar_ledger_t *l, const altar_group_spec_t *gs, const picked_t *f, double ts,
                     altar_apply_result_t *res, bool *pno_spec, altar_error_t *err) {
  const char *kind = gs->kind;
  *pno_spec = false;
  altar_ledger_entry_t *es = calloc(f->n ? f->n : 1, sizeof *es);
  if (!es) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  int rc = ALTAR_OK;
  size_t got = 0;
  for (; got < f->n && !rc && !*pno_spec; got++) {
    rc = altar_ledger_get(l, f->hs[got].backend, f->hs[got].external_id, &es[got], err);
    if (!rc) *pno_spec = es[got].rec.spec == NULL;
  }
  for (size_t i = 0; !rc && !*pno_spec && i < f->n; i++) {
    if ((rc = altar_ledger_restart(l, &f->hs[i], err))) break;
    if (res->n_retries == res->cap_retries) {
      size_t cap = res->cap_retries ? res->cap_retries * 2 : 8;
      altar_retry_request_t *v = realloc(res->retries, cap * sizeof *v);
      if (!v) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
        break;
      }
      res->retries = v;
      res->cap_retries = cap;
    }
    /* The request takes the record as read, with the restart just made. */
    altar_retry_request_t *q = &res->retries[res->n_retries++]; /* counted even when partial, so clear frees it */
    memset(q, 0, sizeof *q);
    q->partition = altar_ledger_scope_get(l);
    q->kind = strdup(kind);
    q->task_key = es[i].task_key;
    es[i].task_key = NULL;
    q->spec = es[i].rec.spec;
    es[i].rec.spec = NULL;
    q->restart_count = es[i].rec.restart_count + 1;
    /* The due time comes from the failure's own event time, so a replay
     * records the same one; the daemon holds the job back until then. */
    double delay = altar__retry_backoff_delay(&gs->retry_backoff, q->task_key, q->restart_count);
    q->failed_ts = ts;
    q->due_ts = ts + delay;
    if (altar_handle_copy(&q->handle, &es[i].rec.handle) || !q->kind)
      rc = altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    if (!rc && delay > 0) rc = altar__retry_due_record(l, q->task_key, q->restart_count, ts, delay, err);
  }
  for (size_t i = 0; i < got; i++) altar_ledger_entry_clear(&es[i]);
  free(es);
  return rc;
}

/* The side key of held group (kind, gk) into out; its length. */
static size_t held_key(const char *kind, const char *gk, char *out, size_t outsz) {
  size_t p = strlen(ALTAR_HELD_PREFIX), kl = strlen(kind), gl = strlen(gk);
  size_t n = p + kl + 1 + gl;
  if (n <= outsz) {
    memcpy(out, ALTAR_HELD_PREFIX, p);
    memcpy(out + p, kind, kl);
    out[p + kl] = 0;
    memcpy(out + p + kl + 1, gk, gl);
  }
  return n;
}

/* Marks (kind, gk) held with why: noted in res and in the ledger, in the
 * open batch. Nothing of the group changes. A ledger without side keys
 * only reports it. */
static int hold(altar_ledger_t *l, const char *kind, const char *gk, double ts, const char *why,
                altar_apply_result_t *res, altar_error_t *err) {
  char stack[512], *k = stack;
  size_t kl = held_key(kind, gk, stack, sizeof stack);
  if (kl > sizeof stack) {
    if (!(k = malloc(kl))) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    held_key(kind, gk, k, kl);
  }
  size_t vl = strlen(why) + 40;
  char *v = malloc(vl);
  int rc = v ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  if (!rc) {
    int n = snprintf(v, vl, "%.17g\n%s", ts, why);
    altar_error_t e = {0};
    rc = altar_ledger_aux_put(l, k, kl, v, (size_t)n, &e);
    if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
    else if (rc && err) *err = e;
  }
  free(v);
  if (k != stack) free(k);
  if (!rc) rc = push_name(&res->held_groups, kind, gk, err);
  if (!rc && altar_strlist_push(&res->held_reasons, why))
    rc = altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  return rc;
}

/* Forgets that (kind, gk) was held, if it was: its decision was made. */
static int unhold(altar_ledger_t *l, const char *kind, const char *gk, altar_error_t *err) {
  char stack[512], *k = stack;
  size_t kl = held_key(kind, gk, stack, sizeof stack);
  if (kl > sizeof stack) {
    if (!(k = malloc(kl))) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    held_key(kind, gk, k, kl);
  }
  altar_buf_t b = {0};
  altar_error_t e = {0};
  /* Looked up first: most groups were never held, and a delete of a missing
   * key would still cost a tombstone. */
  int rc = altar_ledger_aux_get(l, k, kl, &b, &e);
  if (rc == ALTAR_OK) rc = altar_ledger_aux_del(l, k, kl, &e);
  if (rc == ALTAR_ENOTFOUND || rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
  if (rc && err) *err = e;
  altar_buf_free(&b);
  if (k != stack) free(k);
  return rc;
}

/* Whether (kind, gk) may be noted as held, so that deciding or settling it
 * must look the note up to release it: the caller says the ledger may note
 * one, or this result held one (an event later in the same batch then
 * releases it as it would in a batch of its own). */
static bool may_be_held(const altar_apply_result_t *res) { return res->ledger_may_hold || res->held_groups.n; }

/* Decides one group right after an event touched it; min_succeeded is
 * what the readiness rule needs at the least (altar_predicate_min_succeeded). */
static int evaluate(altar_ledger_t *l, const altar_group_spec_t *gs, const char *gk, size_t min_succeeded, double ts,
                    altar_apply_result_t *res, altar_error_t *err) {
  int rc;
  /* Most events of a wide group find it still fanning in: tell that from
   * the counts, without walking (and sorting) every member. */
  size_t cs, cf;
  if ((rc = altar_ledger_group_counts(l, gs->kind, gk, &cs, &cf, err))) return rc;
  if (cs < min_succeeded) {
    /* A bound above one came from a member's valid count: the rule decides. */
    if (min_succeeded > 1 && may_be_held(res) && (rc = unhold(l, gs->kind, gk, err))) return rc;
    if (!cf) return ALTAR_OK;
    /* Cannot be ready and keeps a failure it leaves alone: the decision
     * is only to report it, as the walk below would. */
    if (gs->failed_policy == ALTAR_ON_FAILED_DEFER || gs->failed_policy == ALTAR_ON_FAILED_NONE)
      return push_name(gs->failed_policy == ALTAR_ON_FAILED_DEFER ? &res->deferred_groups : &res->stalled_groups,
                       gs->kind, gk, err);
  }
  const altar_ledger_entry_t *const *m;
  size_t n;
  rc = altar_ledger_group_members(l, gs->kind, gk, &m, &n, err);
  if (rc) return rc;
  /* Decide on borrowed views first; copy members only when acting. */
  size_t ns = 0, nf = 0;
  bool budget = true; /* every failed member may run again */
  const altar_handle_t *stack[16], **ps = n <= 16 ? stack : malloc(n * sizeof *ps);
  if (!ps) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  for (size_t i = 0; i < n; i++) {
    const altar_record_t *rec = &m[i]->rec;
    if (rec->state == ALTAR_STATE_SUCCEEDED) ps[ns++] = &rec->handle;
    if (rec->state != ALTAR_STATE_FAILED) continue;
    nf++;
    /* Out of restarts, or failed deterministically (it would fail again). */
    budget &= rec->restart_count < gs->max_restarts && !(rec->failure && rec->failure->deterministic);
  }
  bool ready = false;
  if (ns) rc = altar_predicate_eval(&gs->ready_when, ps, ns, &ready, err);
  if (ps != stack) free(ps);
  if (rc == ALTAR_EPREDICATE) {
    /* A rule that cannot decide (a misconfigured kind) holds the group: the
     * event stays applied, nothing fires or is consumed, and the group is
     * decided again once its configuration is fixed. */
    altar_error_prefix(err, "group %s:%s: ready_when", gs->kind, gk);
    char why[ALTAR_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", err ? err->msg : "readiness predicate failed");
    if (err) memset(err, 0, sizeof *err);
    return hold(l, gs->kind, gk, ts, why, res, err);
  }
  if (rc) return altar_error_prefix(err, "group %s:%s: ready_when", gs->kind, gk);
  /* The rule decides again (a shard with the label came): held no more. */
  if (ns && may_be_held(res) && (rc = unhold(l, gs->kind, gk, err))) return rc;
  if (!ready && !nf) return ALTAR_OK; /* still fanning in */
  /* gk may be the record's own (apply_state's), which the first change frees.
   * Copies for a decision that makes no event are given back (mark): a
   * result may see many such decisions before it is reset. */
  altar_arena_mark_t mark = altar_arena_mark(&res->mem);
  char *own = altar_arena_strndup(&res->mem, gk, strlen(gk));
  picked_t s, f;
  if (!own || pick(&s, &res->mem, m, n, ALTAR_STATE_SUCCEEDED) || pick(&f, &res->mem, m, n, ALTAR_STATE_FAILED))
    return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  if (ready) {
    /* Fire with exactly the shards that succeeded so far; the group's
     * failed shards are settled with it. */
    altar_transfer_t *outs = NULL;
    size_t n_outs = 0;
    if (altar__group_outputs_wanted(gs)) /* before anything changes */
      rc = altar__group_outputs(l, s.hs, s.n, &res->mem, &outs, &n_outs, err);
    if (!rc && may_be_held(res)) rc = unhold(l, gs->kind, own, err);
    if (!rc) rc = consume_both(l, &s, &f, err);
    if (!rc) rc = push_event(l, res, ALTAR_GROUP_FIRED, gs->kind, own, &s, &f, ts, err);
    if (!rc) {
      res->events[res->n_events - 1].outputs = outs;
      res->events[res->n_events - 1].n_outputs = n_outs;
    }
    return rc;
  }
  if (!f.n) { /* still fanning in */
    altar_arena_rewind(&res->mem, mark);
    return ALTAR_OK;
  }
  bool dead = gs->failed_policy == ALTAR_ON_FAILED_DEAD_LETTER;
  if (gs->failed_policy == ALTAR_ON_FAILED_RETRY) {
    /* Without budget the group can never complete. */
    if (budget) {
      bool no_spec;
      rc = retry_all(l, gs, &f, ts, res, &no_spec, err); /* requests hold copies of their own */
      if (rc || !no_spec) {
        altar_arena_rewind(&res->mem, mark);
        return rc;
      }
    }
    dead = true;
  }
  if (!dead) {
    rc = push_name(gs->failed_policy == ALTAR_ON_FAILED_DEFER ? &res->deferred_groups : &res->stalled_groups, gs->kind,
                   own, err);
    altar_arena_rewind(&res->mem, mark);
    return rc;
  }
  altar_group_failure_t *why = NULL;
  size_t n_why = 0;
  if (pick_failures(&res->mem, m, n, &why, &n_why)) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  if (may_be_held(res)) rc = unhold(l, gs->kind, own, err);
  if (!rc) rc = consume_both(l, &f, &s, err);
  if (!rc) rc = push_event(l, res, ALTAR_GROUP_DEAD_LETTERED, gs->kind, own, &f, &s, ts, err);
  if (!rc) {
    res->events[res->n_events - 1].failures = why;
    res->events[res->n_events - 1].n_failures = n_why;
  }
  return rc;
}

typedef struct held_list {
  char **kinds, **gks; /* the key's two halves, malloc'd */
  double *ts;
  int32_t *part; /* the status partition each is noted under */
  altar_ledger_t *l;
  size_t n, cap;
  int rc;
} held_list_t;

static int visit_held(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  held_list_t *h = ctx;
  size_t pl = strlen(ALTAR_HELD_PREFIX);
  const char *k = (const char *)key + pl, *nul = memchr(k, 0, klen - pl);
  if (!nul) return 0; /* not ours: left alone */
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 8;
    char **a = realloc(h->kinds, cap * sizeof *a), **b = a ? realloc(h->gks, cap * sizeof *b) : NULL;
    if (a) h->kinds = a;
    if (b) h->gks = b;
    double *t = b ? realloc(h->ts, cap * sizeof *t) : NULL;
    if (t) h->ts = t;
    int32_t *pp = t ? realloc(h->part, cap * sizeof *pp) : NULL;
    if (!pp) return h->rc = ALTAR_ENOMEM;
    h->part = pp;
    h->cap = cap;
  }
  char tsbuf[48];
  size_t tl = 0;
  while (tl < vlen && tl < sizeof tsbuf - 1 && ((const char *)val)[tl] != '\n') tl++;
  memcpy(tsbuf, val, tl);
  tsbuf[tl] = 0;
  h->kinds[h->n] = strndup(k, (size_t)(nul - k));
  h->gks[h->n] = strndup(nul + 1, klen - pl - (size_t)(nul - k) - 1);
  h->ts[h->n] = strtod(tsbuf, NULL);
  h->part[h->n] = altar_ledger_visit_partition(h->l);
  if (!h->kinds[h->n] || !h->gks[h->n]) {
    free(h->kinds[h->n]);
    free(h->gks[h->n]);
    return h->rc = ALTAR_ENOMEM;
  }
  h->n++;
  return 0;
}

static void held_list_free(held_list_t *h) {
  for (size_t i = 0; i < h->n; i++) {
    free(h->kinds[i]);
    free(h->gks[i]);
  }
  free(h->kinds);
  free(h->gks);
  free(h->ts);
  free(h->part);
}

/* The held groups the ledger notes, copied out (a decision changes the side
 * keys a scan walks). */
static int held_load(altar_ledger_t *l, held_list_t *h, altar_error_t *err) {
  memset(h, 0, sizeof *h);
  h->l = l;
  int rc = altar_ledger_aux_scan(l, ALTAR_HELD_PREFIX, strlen(ALTAR_HELD_PREFIX), visit_held, h, err);
  if (rc == ALTAR_ENOTSUP) {
    if (err) memset(err, 0, sizeof *err);
    return ALTAR_OK;
  }
  if (h->rc) rc = altar_error_set(err, h->rc, "held groups: out of memory");
  return rc;
}

int altar__held_count(altar_ledger_t *l, size_t *pn, altar_error_t *err) {
  held_list_t h;
  int rc = held_load(l, &h, err);
  *pn = rc ? 0 : h.n;
  held_list_free(&h);
  return rc;
}

int altar__apply_recheck_held(altar_ledger_t *l, const altar_group_specs_t *specs, altar_apply_result_t *res,
                              altar_error_t *err) {
  held_list_t h;
  int rc = held_load(l, &h, err);
  res->ledger_may_hold = true; /* it notes the groups decided here */
  for (size_t i = 0; !rc && i < h.n; i++) {
    const altar_group_spec_t *gs = altar_group_specs_find(specs, h.kinds[i]);
    if (!gs) continue; /* its kind has no group now: nothing can decide it */
    size_t held_before = res->held_groups.n;
    int32_t was = altar_ledger_scope(l, h.part[i]); /* decided where it is noted */
    rc = evaluate(l, gs, h.gks[i], 0, h.ts[i], res, err);
    /* Decided without an event (not ready yet, retried, stalled): no
     * longer held either way; a fired or dead-lettered one was un-held. */
    if (!rc && res->held_groups.n == held_before) rc = unhold(l, gs->kind, h.gks[i], err);
    altar_ledger_scope(l, was);
  }
  held_list_free(&h);
  return rc;
}

int altar__apply_cancel_group(altar_ledger_t *l, const altar_group_spec_t *gs, const char *gk, double ts,
                              altar_apply_result_t *res, altar_error_t *err) {
  const altar_ledger_entry_t *const *m;
  size_t n;
  int rc = altar_ledger_group_members(l, gs->kind, gk, &m, &n, err);
  if (rc || !n) return rc;
  /* Copies first: the borrowed views die with the first change. */
  char *own = altar_arena_strndup(&res->mem, gk, strlen(gk));
  picked_t s, f, p[2];
  if (!own || pick(&s, &res->mem, m, n, ALTAR_STATE_SUCCEEDED) || pick(&f, &res->mem, m, n, ALTAR_STATE_FAILED) ||
      pick(&p[0], &res->mem, m, n, ALTAR_STATE_PENDING) || pick(&p[1], &res->mem, m, n, ALTAR_STATE_RUNNING))
    return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  altar_failure_t *cf = altar_failure_new(ALTAR_REASON_CANCELLED, "its job was cancelled (altar cancel)", true);
  if (!cf) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  for (int k = 0; !rc && k < 2; k++)
    for (size_t i = 0; !rc && i < p[k].n; i++) rc = altar_ledger_set_state(l, &p[k].hs[i], ALTAR_STATE_FAILED, cf, err);
  altar_failure_free(cf);
  /* The event lists every member, in one sorted set as the others do. */
  picked_t all = {0};
  size_t total = s.n + f.n + p[0].n + p[1].n;
  all.hs = altar_arena_alloc(&res->mem, total * (sizeof *all.hs + sizeof *all.keys + sizeof *all.tkeys) + 1);
  if (!rc && !all.hs) rc = altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  if (!rc) {
    all.keys = (const char **)(void *)(all.hs + total);
    all.tkeys = (char **)(void *)(all.keys + total);
    const picked_t *parts[] = {&s, &f, &p[0], &p[1]};
    for (size_t k = 0; k < 4; k++)
      for (size_t i = 0; i < parts[k]->n; i++) {
        all.hs[all.n] = parts[k]->hs[i];
        all.keys[all.n] = parts[k]->keys[i];
        all.tkeys[all.n++] = parts[k]->tkeys[i];
      }
  }
  if (!rc && may_be_held(res)) rc = unhold(l, gs->kind, own, err);
  if (!rc && all.n) rc = altar_ledger_consume(l, all.hs, all.n, err);
  if (!rc) rc = push_event(l, res, ALTAR_GROUP_CANCELLED, gs->kind, own, &all, NULL, ts, err);
  return rc;
}

/* Settles a run that no longer counts: consumed, and marked failed with
 * reason (its earlier state in the detail) so no record stays "running" for
 * ever after its worker died or gave it back, and a shard's own record is
 * the one not so marked. A released run that had ended keeps its state (the
 * shard's outcome is then that record); a superseded one is marked whatever
 * its state: a newer run of the task is the shard's record. */
static int settle_run(altar_ledger_t *l, const altar_group_spec_t *gs, const altar_handle_t *h, const char *reason,
                      bool even_terminal, const altar_status_event_t *by, altar_error_t *err) {
  const altar_ledger_entry_t *cur = altar_ledger_peek_open(l, h->backend, h->external_id);
  if (cur && (even_terminal || !altar_state_terminal(cur->rec.state))) {
    char detail[128];
    if (even_terminal && cur->rec.state == ALTAR_STATE_PENDING && cur->rec.restart_count > 0)
      snprintf(detail, sizeof detail, "its retry ran as a newer record of the same task; see the shard's attempts");
    else
      snprintf(detail, sizeof detail, "%s; it was %s",
               even_terminal ? "a newer run of the same task took its place" : "its worker gave it back at shutdown",
               altar_state_name(cur->rec.state));
    altar_failure_t *f = altar_failure_new(reason, detail, false);
    if (!f) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    /* Its run is kept as an attempt with what ended it; a failed run was
     * filed with its own reason when it failed. */
    int rc = ALTAR_OK;
    if (cur->rec.state != ALTAR_STATE_FAILED) {
      bool released = !even_terminal;
      altar__run_note_t note = {.task_key = cur->task_key,
                                .handle = &cur->rec.handle,
                                .restart_count = cur->rec.restart_count,
                                .state = ALTAR_STATE_FAILED,
                                .failure = f,
                                .worker = released ? by->worker : NULL,
                                .started_at = -1,
                                .ended_at = by->ts,
                                .unless_restart_placeholder = cur->rec.state == ALTAR_STATE_PENDING};
      rc = altar__attempt_note(l, gs ? gs->attempts_keep : 0, &note, err);
    }
    if (!rc) rc = altar_ledger_set_state(l, h, ALTAR_STATE_FAILED, f, err);
    altar_failure_free(f);
    if (rc) return rc;
  }
  return altar_ledger_consume(l, h, 1, err);
}

static int apply_submitted(altar_ledger_t *l, const altar_group_spec_t *gs, const altar_status_event_t *ev,
                           altar_apply_result_t *res, altar_error_t *err) {
  const altar_handle_t *h = &ev->handle;
  const altar_ledger_entry_t *cur = altar_ledger_peek_open(l, h->backend, h->external_id);
  if (cur) {
    /* The same task submitted again after it failed is a new run of it. */
    if (cur->rec.state == ALTAR_STATE_FAILED) return altar_ledger_restart(l, h, err);
    res->ignored++; /* a duplicate */
    return ALTAR_OK;
  }
  int64_t restarts = 0;
  if (ev->task_key) {
    /* A newer run of the same task supersedes the older open record, so the
     * ledger never keeps an orphan open. */
    const altar_ledger_entry_t *old = altar_ledger_peek_task(l, ev->task_key);
    if (old) {
      restarts = old->rec.restart_count + (old->rec.state == ALTAR_STATE_FAILED);
      altar_handle_t oh;
      if (altar_handle_copy(&oh, &old->rec.handle)) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
      int rc = settle_run(l, gs, &oh, ALTAR_REASON_SUPERSEDED, true, ev, err);
      altar_handle_clear(&oh);
      if (rc) return rc;
    }
  }
  /* The record copies the key: a stack buffer holds most keys. */
  char kbuf[256], *gk = NULL;
  if (gs) {
    size_t kl = altar_group_by_key_into(&gs->group_by, h, kbuf, sizeof kbuf);
    if (!(gk = kl < sizeof kbuf ? kbuf : malloc(kl + 1)))
      return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
    if (gk != kbuf) altar_group_by_key_into(&gs->group_by, h, gk, kl + 1);
  }
  altar_record_meta_t meta = {.task_key = ev->task_key,
                              .group_key = gk,
                              .restart_count = restarts,
                              .spec_enc = &ev->spec_enc,
                              .fixed = &ev->record_fixed};
  int rc = altar_ledger_record_meta(l, h, ev->kind, ev->spec, &meta, err);
  if (gk != kbuf) free(gk);
  /* A retried shard's run is kept from its start: the backend took it then
   * (a later running event, when one comes, says when it started). */
  if (!rc && restarts > 0 && ev->event == ALTAR_EV_SUBMITTED) {
    altar__run_note_t note = {.task_key = ev->task_key,
                              .handle = h,
                              .restart_count = restarts,
                              .state = ALTAR_STATE_PENDING,
                              .worker = ev->worker,
                              .started_at = ev->ts,
                              .ended_at = -1};
    rc = altar__attempt_note(l, gs ? gs->attempts_keep : 0, &note, err);
  }
  return rc;
}

/* Keeps the run ev reported as an attempt when a later run could hide it:
 * it failed (a retry would reset the record), or it is a retried shard's
 * run (restart count above 0), whose start is kept too. A first run that
 * succeeds files nothing: its record is its one attempt. Called right
 * after ev's state was set, before its group is decided (a retry changes
 * the record). */
static bool worth_noting(const altar_ledger_entry_t *cur) {
  if (!cur || !cur->task_key) return false;
  return cur->rec.state == ALTAR_STATE_FAILED || (cur->rec.restart_count > 0 && cur->rec.state != ALTAR_STATE_PENDING);
}

static int note_run(altar_ledger_t *l, const altar_group_spec_t *gs, const altar_ledger_entry_t *cur,
                    const altar_status_event_t *ev, altar_error_t *err) {
  altar__run_note_t note = {.task_key = cur->task_key,
                            .handle = &cur->rec.handle,
                            .restart_count = cur->rec.restart_count,
                            .state = cur->rec.state,
                            .failure = cur->rec.failure,
                            .worker = ev->worker,
                            .started_at = cur->rec.state == ALTAR_STATE_RUNNING ? ev->ts : -1,
                            .ended_at = altar_state_terminal(cur->rec.state) ? ev->ts : -1};
  return altar__attempt_note(l, gs ? gs->attempts_keep : 0, &note, err);
}

/* True when h's record was settled as a run that no longer counts
 * (superseded by a newer run, or released): a late state event of that run
 * must not turn it back into the shard's outcome. */
static bool replaced_run(altar_ledger_t *l, const altar_handle_t *h) {
  altar_ledger_entry_t e = {0};
  altar_error_t err = {0};
  if (altar_ledger_get(l, h->backend, h->external_id, &e, &err)) return false;
  const char *why = e.rec.state == ALTAR_STATE_FAILED && e.rec.failure ? e.rec.failure->reason : NULL;
  bool replaced = why && (!strcmp(why, ALTAR_REASON_SUPERSEDED) || !strcmp(why, ALTAR_REASON_RELEASED));
  altar_ledger_entry_clear(&e);
  return replaced;
}

static int apply_state(altar_ledger_t *l, const altar_group_spec_t *gs, const altar_status_event_t *ev, double ts,
                       altar_apply_result_t *res, altar_error_t *err) {
  const altar_handle_t *h = &ev->handle;
  const altar_ledger_entry_t *cur = altar_ledger_peek_open(l, h->backend, h->external_id);
  if (!cur) {
    if (replaced_run(l, h)) {
      res->ignored++; /* its run no longer counts: it stays marked so */
      return ALTAR_OK;
    }
    altar_error_t e2 = {0};
    int rc = altar_ledger_set_state(l, h, ev->state, ev->failure, &e2);
    if (rc != ALTAR_ENOTFOUND) {
      /* A late event for a consumed record: kept for operators, no group. */
      if (rc) *err = e2;
      return rc;
    }
    /* Its "submitted" never reached us: record it from this event so the
     * task is not lost. */
    altar_status_event_t sub = *ev;
    sub.spec = NULL;
    sub.spec_enc = (altar_spec_enc_t){0}; /* its bytes would stand for a spec too */
    if ((rc = apply_submitted(l, gs, &sub, res, err))) return rc;
  } else if (cur->rec.state == ev->state &&
             altar_failure_equal(ev->state == ALTAR_STATE_FAILED ? ev->failure : NULL, cur->rec.failure)) {
    res->ignored++;
    return ALTAR_OK; /* nothing changes */
  }
  int rc = altar_ledger_set_state(l, h, ev->state, ev->failure, err);
  if (rc) return rc;
  if (ts < 0) ts = ev->ts; /* deterministic: a replay produces the same bytes */
  cur = altar_ledger_peek_open(l, h->backend, h->external_id);
  if (worth_noting(cur)) {
    if ((rc = note_run(l, gs, cur, ev, err))) return rc;
    cur = altar_ledger_peek_open(l, h->backend, h->external_id); /* a view does not outlive a write */
  }
  if (!gs || !cur || !cur->group_key || !altar_state_terminal(ev->state)) return ALTAR_OK;
  /* The bound may use this record's labels only when it is a succeeded
   * member of the very group decided (an event may name another kind). */
  bool member = cur->rec.state == ALTAR_STATE_SUCCEEDED && cur->rec.kind && !strcmp(cur->rec.kind, gs->kind);
  size_t min_succeeded = altar_predicate_min_succeeded(&gs->ready_when, member ? &cur->rec.handle : NULL);
  return evaluate(l, gs, cur->group_key, min_succeeded, ts, res, err);
}

int altar__apply_late(altar_ledger_t *l, const altar_status_event_t *ev, const char *group_name,
                      altar_apply_result_t *res, altar_error_t *err) {
  int rc = altar_ledger_set_state(l, &ev->handle, ev->state, ev->failure, err);
  if (!rc) rc = altar_ledger_consume(l, &ev->handle, 1, err);
  if (rc) return rc;
  const char *reason = ev->state == ALTAR_STATE_FAILED && ev->failure && ev->failure->reason ? ev->failure->reason : "";
  size_t n = strlen(group_name) + strlen(ev->task_key) + strlen(reason) + 32;
  char *s = malloc(n);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  snprintf(s, n, "%s %s %s%s%s", group_name, ev->task_key, ev->state == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed",
           *reason ? " " : "", reason);
  rc = altar_strlist_push(&res->late_shards, s);
  free(s);
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, "apply: out of memory");
  res->applied++;
  return ALTAR_OK;
}

static const char *const ev_names[] = {"submitted", "state", "released"};

int altar_apply_events(altar_ledger_t *ledger, const altar_group_specs_t *specs, const altar_status_event_t *events,
                       size_t n, double now_ts, altar_apply_result_t *pres, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    const altar_status_event_t *ev = &events[i];
    if (!ev->kind || !ev->handle.backend || !ev->handle.external_id)
      return altar_error_set(err, ALTAR_EINVAL, "event[%zu]: kind and handle are required", i);
    const altar_group_spec_t *gs = altar_group_specs_find(specs, ev->kind);
    int rc;
    switch (ev->event) {
    case ALTAR_EV_SUBMITTED: rc = apply_submitted(ledger, gs, ev, pres, err); break;
    case ALTAR_EV_STATE:
      if ((unsigned)ev->state > ALTAR_STATE_FAILED)
        return altar_error_set(err, ALTAR_EINVAL, "event[%zu].state: unknown state", i);
      rc = apply_state(ledger, gs, ev, now_ts, pres, err);
      break;
    case ALTAR_EV_RELEASED:
      /* Handed back by a draining worker: settled without firing. */
      rc = settle_run(ledger, gs, &ev->handle, ALTAR_REASON_RELEASED, false, ev, err);
      break;
    default: return altar_error_set(err, ALTAR_EINVAL, "event[%zu].event: unknown event %d", i, (int)ev->event);
    }
    if (rc) {
      altar_error_prefix(err, "event[%zu] (%s %s:%s)", i, (unsigned)ev->event < 3 ? ev_names[ev->event] : "?",
                         ev->handle.backend, ev->handle.external_id);
      return rc;
    }
    pres->applied++;
  }
  return ALTAR_OK;
}

int altar_apply_events_atomic(altar_ledger_t *ledger, const altar_group_specs_t *specs,
                              const altar_status_event_t *events, size_t n, double now_ts, altar_apply_result_t *pres,
                              altar_error_t *err) {
  int rc = altar_ledger_begin(ledger, err);
  if (rc) return rc;
  rc = altar_apply_events(ledger, specs, events, n, now_ts, pres, err);
  if (rc) {
    altar_error_t ignored = {0};
    altar_ledger_abort(ledger, &ignored);
    return rc;
  }
  return altar_ledger_commit(ledger, err);
}
