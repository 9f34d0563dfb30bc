/* reconcile_once: one non-blocking tick over a ledger, in the contract's
 * order of effects (poll, write back, evaluate every predicate, fire, then
 * handle blocked groups). */
#include "altar/reconcile.h"
#include "core/hmap.h"
#include "altar/grow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One group derived this tick. Handles are shallow views into the records
 * fetched for the tick; they are never freed through a bucket. */
typedef struct bucket {
  const altar_group_spec_t *spec;
  char *key; /* kind '\0' group_key (map key) */
  size_t key_len;
  const char *gk; /* points into key */
  char *name;     /* "kind:group_key" for results and messages */
  altar_handle_t *succ;
  const altar_handle_t **psucc;
  size_t ns, cap_s;
  altar_handle_t *fail;
  size_t nf, cap_f;
  bool ready;
  int cb_rc;
  altar_error_t cb_err;
} bucket_t;

typedef struct tick {
  altar__hmap_t map;
  bucket_t **v;
  size_t n, cap;
} tick_t;

static void tick_free(tick_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    bucket_t *b = t->v[i];
    free(b->key);
    free(b->name);
    free(b->succ);
    free(b->psucc);
    free(b->fail);
    free(b);
  }
  free(t->v);
  altar__hmap_free(&t->map);
}

static bucket_t *bucket_for(tick_t *t, const altar_group_spec_t *spec, const char *gk) {
  size_t kl = strlen(spec->kind), gl = strlen(gk);
  char *key = malloc(kl + gl + 2);
  if (!key) return NULL;
  memcpy(key, spec->kind, kl);
  key[kl] = '\0';
  memcpy(key + kl + 1, gk, gl + 1);
  bucket_t *b = altar__hmap_get(&t->map, key, kl + 1 + gl);
  if (b) {
    free(key);
    return b;
  }
  if (ALTAR_GROW(t->v, t->cap, t->n + 1)) goto oom;
  if (!(b = calloc(1, sizeof *b)) || !(b->name = malloc(kl + gl + 2))) goto oom;
  memcpy(b->name, key, kl + gl + 2);
  b->name[kl] = ':';
  b->spec = spec;
  b->key = key;
  b->key_len = kl + 1 + gl;
  b->gk = key + kl + 1;
  if (altar__hmap_put(&t->map, b->key, b->key_len, b)) goto oom;
  t->v[t->n++] = b;
  return b;
oom:
  if (b) free(b->name);
  free(b);
  free(key);
  return NULL;
}

static int push_handle(altar_handle_t **pv, size_t *pn, size_t *pcap, const altar_handle_t *h) {
  if (ALTAR_GROW(*pv, *pcap, *pn + 1)) return ALTAR_ENOMEM;
  (*pv)[(*pn)++] = *h; /* shallow view */
  return ALTAR_OK;
}

/* Buckets records by kind and group_by; kinds without a spec are skipped. */
static int bucket_records(tick_t *t, const altar_group_specs_t *specs, const altar_record_t *recs, size_t n,
                          bool succeeded, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    const altar_group_spec_t *spec = altar_group_specs_find(specs, recs[i].kind);
    if (!spec) continue;
    char *gk = altar_group_by_key(&spec->group_by, &recs[i].handle);
    bucket_t *b = gk ? bucket_for(t, spec, gk) : NULL;
    free(gk);
    if (!b || (succeeded ? push_handle(&b->succ, &b->ns, &b->cap_s, &recs[i].handle)
                         : push_handle(&b->fail, &b->nf, &b->cap_f, &recs[i].handle)))
      return altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory grouping shards");
  }
  return ALTAR_OK;
}

static int bucket_cmp(const void *pa, const void *pb) {
  const bucket_t *a = *(bucket_t *const *)pa, *b = *(bucket_t *const *)pb;
  size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
  int c = memcmp(a->key, b->key, n);
  return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

/* Consumes a group's succeeded and failed shards together. */
static int consume_bucket(altar_ledger_t *ledger, const bucket_t *b, altar_error_t *err) {
  size_t n = b->ns + b->nf;
  altar_handle_t *all = malloc((n ? n : 1) * sizeof *all);
  if (!all) return altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
  if (b->ns) memcpy(all, b->succ, b->ns * sizeof *all);
  if (b->nf) memcpy(all + b->ns, b->fail, b->nf * sizeof *all);
  int rc = altar_ledger_consume(ledger, all, n, err);
  free(all);
  if (rc) altar_error_prefix(err, "%s", b->name);
  return rc;
}

static int call_on_ready(bucket_t *b) {
  altar_error_clear(&b->cb_err);
  if (!b->spec->on_ready) return b->cb_rc = ALTAR_OK;
  b->cb_rc = b->spec->on_ready(b->spec->on_ready_ctx, b->spec->kind, b->gk, b->succ, b->ns, &b->cb_err);
  if (b->cb_rc && !b->cb_err.code) altar_error_set(&b->cb_err, b->cb_rc, "on_ready failed");
  return b->cb_rc;
}

typedef struct pool {
  bucket_t **ready;
  size_t n, next;
  pthread_mutex_t mu;
} pool_t;

static void *pool_worker(void *arg) {
  pool_t *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    size_t i = p->next < p->n ? p->next++ : SIZE_MAX;
    pthread_mutex_unlock(&p->mu);
    if (i == SIZE_MAX) return NULL;
    call_on_ready(p->ready[i]);
  }
}

/* Runs on_ready for every ready group on at most `limit` threads. Each
 * bucket's cb_rc tells how its callback went. */
static int run_concurrent(bucket_t **ready, size_t n, size_t limit, altar_error_t *err) {
  pool_t p = {.ready = ready, .n = n};
  pthread_mutex_init(&p.mu, NULL);
  if (limit > n) limit = n;
  pthread_t *th = calloc(limit ? limit : 1, sizeof *th);
  if (!th) {
    pthread_mutex_destroy(&p.mu);
    return altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
  }
  size_t started = 0;
  for (; started < limit; started++)
    if (pthread_create(&th[started], NULL, pool_worker, &p)) break;
  if (!started) pool_worker(&p); /* no thread could start: run them here */
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  pthread_mutex_destroy(&p.mu);
  return ALTAR_OK;
}

int altar_reconcile_once(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                         const altar_reconcile_opts_t *opts, altar_reconcile_result_t *pres, altar_error_t *err) {
  altar_handle_t *open = NULL;
  altar_status_t *sts = NULL;
  altar_record_t *succ = NULL, *fail = NULL;
  size_t n_open = 0, n_sts = 0, n_succ = 0, n_fail = 0;
  tick_t t = {0};
  bucket_t **ready = NULL;
  int rc;

  /* 1. Poll every open handle in one bulk call. */
  if ((rc = altar_ledger_open_handles(ledger, &open, &n_open, err))) goto out;
  pres->polled = n_open;
  if (n_open) {
    if ((rc = poller->poll(poller->ctx, open, n_open, &sts, &n_sts, err))) {
      altar_error_prefix(err, "reconcile: poll");
      goto out;
    }
  }
  /* 2. Write each observed state back. */
  for (size_t i = 0; i < n_sts; i++) {
    altar_status_t *st = &sts[i];
    if (st->state == ALTAR_STATE_SUCCEEDED) pres->succeeded++;
    if (st->state == ALTAR_STATE_FAILED) pres->failed++;
    rc = altar_ledger_set_state(ledger, &st->handle, st->state, st->failure, err);
    if (rc == ALTAR_ENOTFOUND) { /* a backend answered for a handle we never asked about */
      altar_error_clear(err);
      rc = ALTAR_OK;
      continue;
    }
    if (rc) goto out;
  }
  /* 3. Re-derive groups from the ledger's succeeded and failed shards. */
  if ((rc = altar_ledger_active_succeeded(ledger, &succ, &n_succ, err)) ||
      (rc = altar_ledger_active_failed(ledger, &fail, &n_fail, err)) ||
      (rc = bucket_records(&t, specs, succ, n_succ, true, err)) ||
      (rc = bucket_records(&t, specs, fail, n_fail, false, err)))
    goto out;
  if (t.n) qsort(t.v, t.n, sizeof *t.v, bucket_cmp);

  /* 4. Every predicate is evaluated before any callback: a failing one
   * fires and consumes nothing. */
  size_t n_ready = 0;
  for (size_t i = 0; i < t.n; i++) {
    bucket_t *b = t.v[i];
    if (!b->ns) continue;
    if (!(b->psucc = malloc(b->ns * sizeof *b->psucc))) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
      goto out;
    }
    for (size_t j = 0; j < b->ns; j++) b->psucc[j] = &b->succ[j];
    if ((rc = altar_predicate_eval(&b->spec->ready_when, b->psucc, b->ns, &b->ready, err))) {
      altar_error_prefix(err, "group %s: ready_when", b->name);
      goto out;
    }
    n_ready += b->ready;
  }

  /* 5. Fire each ready group once and consume its shards. */
  if (n_ready && !(ready = malloc(n_ready * sizeof *ready))) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
    goto out;
  }
  n_ready = 0;
  for (size_t i = 0; i < t.n; i++)
    if (t.v[i]->ready) ready[n_ready++] = t.v[i];
  size_t limit = opts ? opts->max_concurrent_callbacks : 0;
  if (limit > 1 && n_ready > 1) {
    if ((rc = run_concurrent(ready, n_ready, limit, err))) goto out;
  } else {
    /* Sequential: the first failing callback stops the rest (cb_rc 1 = not run). */
    for (size_t i = 0; i < n_ready; i++) ready[i]->cb_rc = 1;
    for (size_t i = 0; i < n_ready; i++)
      if (call_on_ready(ready[i])) break;
  }
  int first_fail = -1;
  for (size_t i = 0; i < n_ready; i++) {
    bucket_t *b = ready[i];
    if (b->cb_rc) {
      if (first_fail < 0 && b->cb_rc < 0) first_fail = (int)i;
      continue;
    }
    if ((rc = consume_bucket(ledger, b, err))) goto out;
    if (altar_strlist_push(&pres->fired_groups, b->name)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
      goto out;
    }
  }
  if (first_fail >= 0) {
    bucket_t *b = ready[first_fail];
    rc = altar_error_set(err, b->cb_rc, "group %s: on_ready: %s", b->name, b->cb_err.msg);
    goto out;
  }

  /* 6. Groups blocked by a failed shard: dead-letter, defer or report stalled. */
  for (size_t i = 0; i < t.n; i++) {
    bucket_t *b = t.v[i];
    if (!b->nf || b->ready) continue;
    altar_strlist_t *dst;
    if (!b->spec->on_failed) {
      dst = &pres->stalled_groups;
    } else {
      bool dead = false;
      altar_error_t cerr = {0};
      rc = b->spec->on_failed(b->spec->on_failed_ctx, b->spec->kind, b->gk, b->fail, b->nf, &dead, &cerr);
      if (rc) {
        rc = altar_error_set(err, rc, "group %s: on_failed: %s", b->name, cerr.msg);
        goto out;
      }
      if (dead && (rc = consume_bucket(ledger, b, err))) goto out;
      dst = dead ? &pres->dead_lettered_groups : &pres->deferred_groups;
    }
    if (altar_strlist_push(dst, b->name)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "reconcile: out of memory");
      goto out;
    }
  }
  rc = ALTAR_OK;
out:
  free(ready);
  tick_free(&t);
  altar_records_free(succ, n_succ);
  altar_records_free(fail, n_fail);
  altar_statuses_free(sts, n_sts);
  altar_handles_free(open, n_open);
  return rc;
}
