/* A shard's attempts as ledger side keys (altar/attempts.h): filing a run
 * (the status-event applier, reconciler/attempts_note.h) and reading them
 * back (altar logs, ledger show, status, the dashboard). Values are compact
 * JSON with sorted keys, so both ledgers and a replay store the same bytes. */
#include "reconciler/attempts_note.h"

#include "altar/pools.h"
#include "altar/spec.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Task keys altar makes are hex; anything else could collide with another
 * key's attempts, so it is not filed. */
static bool key_safe(const char *tk) {
  size_t n = tk ? strlen(tk) : 0;
  return n && n <= ALTAR_TASK_KEY_LEN &&
         strspn(tk, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") == n;
}

static size_t index_key(const char *tk, char *out, size_t cap) {
  return (size_t)snprintf(out, cap, ALTAR_ATTEMPTS_INDEX_PREFIX "%s", tk);
}

static size_t attempt_key(const char *tk, int64_t n, char *out, size_t cap) {
  return (size_t)snprintf(out, cap, ALTAR_ATTEMPTS_PREFIX "%s/%06" PRId64, tk, n);
}

/* "backend\x1f external_id \x1f restart count": what names one run. */
static char *run_id(const char *backend, const char *eid, int64_t rc) {
  size_t n = strlen(backend) + strlen(eid) + 32;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s\x1f%s\x1f%" PRId64, backend, eid, rc);
  return s;
}

/* The length of s cut to at most max bytes, never inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n <= max) return n;
  while (max && ((unsigned char)s[max] & 0xC0) == 0x80) max--;
  return max;
}

static json_t *get_json(altar_ledger_t *l, const char *k, size_t kl, int *prc, altar_error_t *err) {
  altar_buf_t b = {0};
  altar_error_t e = {0};
  *prc = altar_ledger_aux_get(l, k, kl, &b, &e);
  if (*prc) {
    if (*prc != ALTAR_ENOTFOUND && *prc != ALTAR_ENOTSUP && err) *err = e;
    altar_buf_free(&b);
    return NULL;
  }
  json_t *j = json_loadb((const char *)b.data, b.len, 0, NULL);
  altar_buf_free(&b);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    *prc = altar_error_set(err, ALTAR_ELEDGER, "ledger: side key %.*s is not an attempt record", (int)kl, k);
  }
  return j;
}

static int put_json(altar_ledger_t *l, const char *k, size_t kl, json_t *j, altar_error_t *err) {
  char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "attempts: out of memory");
  int rc = altar_ledger_aux_put(l, k, kl, s, strlen(s), err);
  free(s);
  return rc;
}

/* A string the codec let through is UTF-8; anything else (a caller of the C
 * API) is kept as null rather than failing the event's write. */
static json_t *str_or_null(const char *s) {
  json_t *j = s ? json_string(s) : NULL;
  return j ? j : json_null();
}
static json_t *time_or_null(double t) { return t >= 0 ? json_real(t) : json_null(); }

int altar__attempt_note(altar_ledger_t *l, int64_t keep, const altar__run_note_t *r, altar_error_t *err) {
  if (!key_safe(r->task_key)) return ALTAR_OK;
  if (keep <= 0) keep = ALTAR_ATTEMPTS_KEEP_DEFAULT;
  char ik[ALTAR_TASK_KEY_LEN + 16], ak[ALTAR_TASK_KEY_LEN + 32];
  size_t ikl = index_key(r->task_key, ik, sizeof ik);
  int rc;
  json_t *ix = get_json(l, ik, ikl, &rc, err);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* a ledger without side keys files nothing */
  if (rc && rc != ALTAR_ENOTFOUND) return rc;
  int64_t first = 1, next = 1;
  const char *last = NULL;
  if (ix) {
    first = json_integer_value(json_object_get(ix, "first"));
    next = json_integer_value(json_object_get(ix, "next"));
    last = json_string_value(json_object_get(ix, "last_run"));
    if (first < 1 || next < first) {
      json_decref(ix);
      return altar_error_set(err, ALTAR_ELEDGER, "ledger: attempts index of %s is damaged", r->task_key);
    }
  }
  const altar_handle_t *h = r->handle;
  char *id = run_id(h->backend, h->external_id, r->restart_count);
  char *prev = r->restart_count > 0 ? run_id(h->backend, h->external_id, r->restart_count - 1) : NULL;
  if (!id || (r->restart_count > 0 && !prev)) rc = altar_error_set(err, ALTAR_ENOMEM, "attempts: out of memory");
  else rc = ALTAR_OK;
  bool same = !rc && last && !strcmp(last, id);
  bool skip = !rc && r->unless_restart_placeholder && prev && last && !strcmp(last, prev);
  json_t *a = NULL;
  if (!rc && !skip) {
    int64_t n = same ? next - 1 : next;
    size_t akl = attempt_key(r->task_key, n, ak, sizeof ak);
    if (same) {
      a = get_json(l, ak, akl, &rc, err);
      if (rc == ALTAR_ENOTFOUND) rc = ALTAR_OK; /* dropped already: filed afresh */
    }
    if (!a && !rc) {
      a = json_object();
      if (!a || json_object_set_new(a, "attempt", json_integer(n)) ||
          json_object_set_new(a, "backend", str_or_null(h->backend)) ||
          json_object_set_new(a, "external_id", str_or_null(h->external_id)) ||
          json_object_set_new(a, "restart_count", json_integer(r->restart_count)) ||
          json_object_set_new(a, "worker", json_null()) || json_object_set_new(a, "started_at", json_null()) ||
          json_object_set_new(a, "ended_at", json_null()))
        rc = altar_error_set(err, ALTAR_ENOMEM, "attempts: out of memory");
    }
    const altar_failure_t *f = r->state == ALTAR_STATE_FAILED ? r->failure : NULL;
    char *detail = f && f->detail ? strndup(f->detail, utf8_cut(f->detail, ALTAR_BOUND_DETAIL)) : NULL;
    if (!rc &&
        ((f && f->detail && !detail) || json_object_set_new(a, "state", json_string(altar_state_name(r->state))) ||
         json_object_set_new(a, "reason", str_or_null(f ? f->reason : NULL)) ||
         json_object_set_new(a, "detail", str_or_null(detail)) ||
         json_object_set_new(a, "deterministic", json_boolean(f && f->deterministic)) ||
         json_object_set_new(a, "exit_code", f && f->exit_code.set ? json_integer(f->exit_code.v) : json_null()) ||
         (r->worker && json_object_set_new(a, "worker", str_or_null(r->worker))) ||
         (r->started_at >= 0 && json_object_set_new(a, "started_at", time_or_null(r->started_at))) ||
         (r->ended_at >= 0 && json_object_set_new(a, "ended_at", time_or_null(r->ended_at)))))
      rc = altar_error_set(err, ALTAR_ENOMEM, "attempts: out of memory");
    free(detail);
    if (!rc) rc = put_json(l, ak, akl, a, err);
    if (!same) next++;
    /* Bounded: the oldest go, and the index says how many went. */
    for (; !rc && next - first > keep; first++) {
      size_t dkl = attempt_key(r->task_key, first, ak, sizeof ak);
      rc = altar_ledger_aux_del(l, ak, dkl, err);
    }
    if (!rc) {
      json_t *nix =
          json_pack("{sIsIso}", "first", (json_int_t)first, "next", (json_int_t)next, "last_run", str_or_null(id));
      rc = nix ? put_json(l, ik, ikl, nix, err) : altar_error_set(err, ALTAR_ENOMEM, "attempts: out of memory");
      json_decref(nix);
    }
  }
  json_decref(a);
  json_decref(ix);
  free(id);
  free(prev);
  return rc;
}

/* ---- reading --------------------------------------------------------------- */

void altar_attempts_clear(altar_attempts_t *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n; i++) {
    free(a->v[i].backend);
    free(a->v[i].external_id);
    free(a->v[i].worker);
    altar_failure_free(a->v[i].failure);
  }
  free(a->v);
  memset(a, 0, sizeof *a);
}

static altar_attempt_t *push(altar_attempts_t *a) {
  altar_attempt_t *v = realloc(a->v, (a->n + 1) * sizeof *v);
  if (!v) return NULL;
  a->v = v;
  memset(&v[a->n], 0, sizeof *v);
  v[a->n].started_at = v[a->n].ended_at = -1;
  return &v[a->n++];
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static double time_of(json_t *j) { return json_is_number(j) ? json_number_value(j) : -1; }

typedef struct scan_ctx {
  altar_attempts_t *out;
  int rc;
} scan_ctx_t;

static int visit(void *vctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)key;
  (void)klen;
  scan_ctx_t *c = vctx;
  json_t *j = json_loadb(val, vlen, 0, NULL);
  const char *st = json_string_value(json_object_get(j, "state"));
  const char *b = json_string_value(json_object_get(j, "backend"));
  const char *id = json_string_value(json_object_get(j, "external_id"));
  altar_state_t state;
  if (!j || !st || !b || !id || altar_state_parse(st, &state)) {
    json_decref(j);
    return 0; /* not an attempt this reader knows: skipped, never fatal */
  }
  altar_attempt_t *a = push(c->out);
  if (!a) {
    json_decref(j);
    return c->rc = ALTAR_ENOMEM;
  }
  a->n = json_integer_value(json_object_get(j, "attempt"));
  a->backend = strdup(b);
  a->external_id = strdup(id);
  a->worker = dup_or_null(json_string_value(json_object_get(j, "worker")));
  a->restart_count = json_integer_value(json_object_get(j, "restart_count"));
  a->state = state;
  a->started_at = time_of(json_object_get(j, "started_at"));
  a->ended_at = time_of(json_object_get(j, "ended_at"));
  const char *reason = json_string_value(json_object_get(j, "reason"));
  if (state == ALTAR_STATE_FAILED) {
    a->failure =
        altar_failure_new(reason ? reason : ALTAR_REASON_JOB_FAILED, json_string_value(json_object_get(j, "detail")),
                          json_is_true(json_object_get(j, "deterministic")));
    json_t *x = json_object_get(j, "exit_code");
    if (a->failure && json_is_integer(x))
      a->failure->exit_code = (altar_opt_i64_t){.set = true, .v = json_integer_value(x)};
    if (!a->failure) c->rc = ALTAR_ENOMEM;
  }
  json_decref(j);
  if (!a->backend || !a->external_id) c->rc = ALTAR_ENOMEM;
  return c->rc;
}

static bool replaced(const altar_record_t *rec) {
  const char *why = rec->state == ALTAR_STATE_FAILED && rec->failure ? rec->failure->reason : NULL;
  return why && (!strcmp(why, ALTAR_REASON_SUPERSEDED) || !strcmp(why, ALTAR_REASON_RELEASED));
}

int altar_attempts_of(altar_ledger_t *l, const altar_ledger_entry_t *e, altar_attempts_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  const altar_record_t *rec = &e->rec;
  int rc = ALTAR_OK;
  if (key_safe(e->task_key)) {
    char k[ALTAR_TASK_KEY_LEN + 16];
    size_t kl = (size_t)snprintf(k, sizeof k, ALTAR_ATTEMPTS_PREFIX "%s/", e->task_key);
    scan_ctx_t c = {.out = out};
    altar_error_t e2 = {0};
    rc = altar_ledger_aux_scan(l, k, kl, visit, &c, &e2);
    if (c.rc) rc = altar_error_set(err, c.rc, "attempts: out of memory");
    else if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
    else if (rc && err) *err = e2;
    if (!rc) {
      char ik[ALTAR_TASK_KEY_LEN + 16];
      json_t *ix = get_json(l, ik, index_key(e->task_key, ik, sizeof ik), &rc, err);
      if (rc == ALTAR_ENOTFOUND || rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
      if (ix) out->dropped = json_integer_value(json_object_get(ix, "first")) - 1;
      json_decref(ix);
    }
  }
  if (rc) {
    altar_attempts_clear(out);
    return rc;
  }
  /* The record is the authority on its own run's present state. */
  altar_attempt_t *last = out->n ? &out->v[out->n - 1] : NULL;
  bool mine = last && !strcmp(last->backend, rec->handle.backend) &&
              !strcmp(last->external_id, rec->handle.external_id) && last->restart_count == rec->restart_count;
  if (replaced(rec) && (out->n || mine)) return ALTAR_OK; /* filed when it was replaced */
  if (mine) {
    last->state = rec->state;
    altar_failure_free(last->failure);
    last->failure = rec->state == ALTAR_STATE_FAILED ? altar_failure_dup(rec->failure) : NULL;
    if (rec->state == ALTAR_STATE_FAILED && rec->failure && !last->failure) rc = ALTAR_ENOMEM;
  } else {
    /* Numbered before push: growing the array moves what last points at. */
    int64_t n = last ? last->n + 1 : out->dropped + 1;
    altar_attempt_t *a = push(out);
    if (!a) rc = ALTAR_ENOMEM;
    else {
      a->n = n;
      a->backend = strdup(rec->handle.backend);
      a->external_id = strdup(rec->handle.external_id);
      a->restart_count = rec->restart_count;
      a->state = rec->state;
      a->failure = rec->state == ALTAR_STATE_FAILED ? altar_failure_dup(rec->failure) : NULL;
      if (!a->backend || !a->external_id || (rec->state == ALTAR_STATE_FAILED && rec->failure && !a->failure))
        rc = ALTAR_ENOMEM;
    }
  }
  if (rc) {
    altar_attempts_clear(out);
    return altar_error_set(err, rc, "attempts: out of memory");
  }
  return ALTAR_OK;
}

typedef struct keys_ctx {
  char **v;
  size_t n, cap;
  int rc;
} keys_ctx_t;

static int visit_key(void *vctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)val;
  (void)vlen;
  keys_ctx_t *c = vctx;
  size_t pl = strlen(ALTAR_ATTEMPTS_INDEX_PREFIX);
  if (klen <= pl) return 0;
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 64;
    char **v = realloc(c->v, cap * sizeof *v);
    if (!v) return c->rc = ALTAR_ENOMEM;
    c->v = v;
    c->cap = cap;
  }
  if (!(c->v[c->n] = strndup((const char *)key + pl, klen - pl))) return c->rc = ALTAR_ENOMEM;
  c->n++;
  return 0;
}

int altar_attempts_keys(altar_ledger_t *l, char ***pkeys, size_t *pn, altar_error_t *err) {
  keys_ctx_t c = {0};
  altar_error_t e = {0};
  int rc =
      altar_ledger_aux_scan(l, ALTAR_ATTEMPTS_INDEX_PREFIX, strlen(ALTAR_ATTEMPTS_INDEX_PREFIX), visit_key, &c, &e);
  if (c.rc) rc = altar_error_set(err, c.rc, "attempts: out of memory");
  else if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
  else if (rc && err) *err = e;
  if (rc) {
    altar_attempts_keys_free(c.v, c.n);
    c.v = NULL;
    c.n = 0;
  }
  /* Index keys come in key order, and "ai/<k>" sorts as <k> does. */
  *pkeys = c.v;
  *pn = c.n;
  return rc;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool altar_attempts_keys_has(char *const *keys, size_t n, const char *key) {
  return key && n && bsearch(&key, keys, n, sizeof *keys, str_cmp) != NULL;
}

void altar_attempts_keys_free(char **keys, size_t n) {
  for (size_t i = 0; i < n; i++) free(keys[i]);
  free(keys);
}
