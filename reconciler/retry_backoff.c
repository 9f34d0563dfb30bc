/* Retry backoff: the delay of each attempt, its due fact in the ledger, and
 * the store of retry jobs that wait for their due time (retry_backoff.h). */
#include "reconciler/retry_backoff.h"
#include "altar/grow.h"

#include "altar/digest.h"
#include "altar/codec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fraction in [0, 1) from SHA-256 of "<task key>/<attempt>": the same
 * task and attempt always get the same jitter, in the daemon and in a replay. */
static double jitter_fraction(const char *task_key, int64_t attempt) {
  char in[512], dg[ALTAR_DIGEST_BUFSZ];
  int n = snprintf(in, sizeof in, "%s/%" PRId64, task_key ? task_key : "", attempt);
  if (n < 0 || altar_sha256_bytes(in, (size_t)n < sizeof in ? (size_t)n : sizeof in - 1, dg, NULL)) return 0;
  char hex[14];
  memcpy(hex, dg + strlen(ALTAR_DIGEST_PREFIX), 13); /* 52 bits: exact in a double */
  hex[13] = 0;
  return (double)strtoull(hex, NULL, 16) / 4503599627370496.0; /* 2^52 */
}

double altar__retry_backoff_delay(const altar_retry_backoff_t *b, const char *task_key, int64_t attempt) {
  if (!b || b->initial_s <= 0 || attempt < 1) return 0;
  double d = b->initial_s;
  for (int64_t k = 1; k < attempt && d < b->max_s; k++) d *= b->factor;
  if (b->max_s > 0 && d > b->max_s) d = b->max_s;
  d -= d * b->jitter * jitter_fraction(task_key, attempt);
  /* Whole microseconds: the fact's text and the arithmetic agree exactly. */
  return round(d * 1e6) / 1e6;
}

/* ---- due facts ------------------------------------------------------------ */

static int due_key(const char *task_key, int64_t attempt, char *out, size_t outsz) {
  return snprintf(out, outsz, "b/%s/%06" PRId64, task_key, attempt);
}

int altar__retry_due_record(altar_ledger_t *l, const char *task_key, int64_t attempt, double failed_ts, double delay_s,
                            altar_error_t *err) {
  /* Only keys that are safe in an aux key and a JSON line (altar's are hex). */
  if (!task_key || !*task_key ||
      strspn(task_key, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") != strlen(task_key))
    return ALTAR_OK;
  char k[ALTAR_TASK_KEY_LEN + 256], v[256];
  int kl = due_key(task_key, attempt, k, sizeof k);
  if (kl < 0 || (size_t)kl >= sizeof k) return ALTAR_OK; /* not a task key altar makes */
  int vl = snprintf(v, sizeof v, "{\"attempt\":%" PRId64 ",\"delay_s\":%.6f,\"due\":%.6f,\"failed_at\":%.6f}", attempt,
                    delay_s, failed_ts + delay_s, failed_ts);
  altar_error_t e = {0};
  int rc = altar_ledger_aux_put(l, k, (size_t)kl, v, (size_t)vl, &e);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* the in-memory reference ledger keeps no aux keys */
  if (rc && err) *err = e;
  return rc;
}

static double field(const char *json, const char *name) {
  char pat[32];
  snprintf(pat, sizeof pat, "\"%s\":", name);
  const char *p = strstr(json, pat);
  return p ? strtod(p + strlen(pat), NULL) : 0;
}

int altar__retry_due_get(altar_ledger_t *l, const char *task_key, int64_t attempt, double *pdue, altar_error_t *err) {
  *pdue = 0;
  char k[ALTAR_TASK_KEY_LEN + 256];
  int kl = task_key ? due_key(task_key, attempt, k, sizeof k) : -1;
  if (kl < 0 || (size_t)kl >= sizeof k) return ALTAR_OK;
  altar_buf_t b = {0};
  altar_error_t e = {0};
  int rc = altar_ledger_aux_get(l, k, (size_t)kl, &b, &e);
  if (rc == ALTAR_ENOTFOUND || rc == ALTAR_ENOTSUP) return ALTAR_OK;
  if (rc) {
    if (err) *err = e;
    return rc;
  }
  char text[256];
  size_t n = b.len < sizeof text - 1 ? b.len : sizeof text - 1;
  memcpy(text, b.data, n);
  text[n] = 0;
  altar_buf_free(&b);
  *pdue = field(text, "due");
  return ALTAR_OK;
}

typedef struct dues_ctx {
  altar_retry_due_t *v;
  size_t n, cap;
  int rc;
  altar_error_t *err;
} dues_ctx_t;

static int visit_due(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  dues_ctx_t *c = ctx;
  const char *k = key, *slash = klen > 2 ? memchr(k + 2, '/', klen - 2) : NULL;
  if (!slash || vlen > 255) return 0;
  char text[256];
  memcpy(text, val, vlen);
  text[vlen] = 0;
  if (ALTAR_GROW(c->v, c->cap, c->n + 1)) goto nomem;
  altar_retry_due_t *d = &c->v[c->n];
  if (!(d->task_key = strndup(k + 2, (size_t)(slash - (k + 2))))) goto nomem;
  d->attempt = (int64_t)field(text, "attempt");
  d->delay_s = field(text, "delay_s");
  d->due_ts = field(text, "due");
  d->failed_ts = field(text, "failed_at");
  c->n++;
  return 0;
nomem:
  c->rc = altar_error_set(c->err, ALTAR_ENOMEM, "retry dues: out of memory");
  return 1;
}

int altar__retry_dues_list(altar_ledger_t *l, altar_retry_due_t **pv, size_t *pn, altar_error_t *err) {
  dues_ctx_t c = {.err = err};
  int rc = altar_ledger_aux_scan(l, "b/", 2, visit_due, &c, err);
  if (rc == 1) rc = ALTAR_OK;
  if (!rc) rc = c.rc;
  if (rc) {
    altar__retry_dues_free(c.v, c.n);
    *pv = NULL;
    *pn = 0;
    return rc;
  }
  *pv = c.v;
  *pn = c.n;
  return ALTAR_OK;
}

void altar__retry_dues_free(altar_retry_due_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].task_key);
  free(v);
}

/* ---- retries waiting for their due time --------------------------------------- */

static uint64_t due_ms(double ts) { return ts <= 0 ? 0 : (uint64_t)ceil(ts * 1000.0); }

typedef struct first_ctx {
  double due;
} first_ctx_t;

static int visit_first(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)val;
  (void)vlen;
  if (klen < 18) return 0;
  char hex[17];
  memcpy(hex, (const char *)key + 2, 16);
  hex[16] = 0;
  ((first_ctx_t *)ctx)->due = (double)strtoull(hex, NULL, 16) / 1000.0;
  return 1; /* keys are ordered by due time: the first is the earliest */
}

static int load_next_due(altar__retry_wait_t *w, altar_error_t *err) {
  first_ctx_t f = {0};
  int32_t was = altar_ledger_scope(w->ledger, ALTAR_LEDGER_SCOPE_NONE); /* every partition's, merged */
  int rc = altar_ledger_aux_scan(w->ledger, "w/", 2, visit_first, &f, err);
  altar_ledger_scope(w->ledger, was);
  if (rc == ALTAR_ENOTSUP || rc == 1) rc = ALTAR_OK; /* 1: the visitor stopped the scan */
  w->next_due = f.due;
  return rc;
}

int altar__retry_wait_open(altar__retry_wait_t *w, altar_ledger_t *l, altar_error_t *err) {
  memset(w, 0, sizeof *w);
  w->ledger = l;
  return load_next_due(w, err);
}

int altar__retry_wait_stage(altar__retry_wait_t *w, double due_ts, const char *topic, const char *key,
                            const void *value, size_t vlen, altar_error_t *err) {
  char k[ALTAR_TASK_KEY_LEN + 64];
  int kl = snprintf(k, sizeof k, "w/%016" PRIx64 "/%.64s", due_ms(due_ts), key ? key : "");
  size_t tl = strlen(topic), kyl = key ? strlen(key) : 0;
  char *v = malloc(tl + kyl + 2 + vlen);
  if (!v) return altar_error_set(err, ALTAR_ENOMEM, "retry: out of memory");
  memcpy(v, topic, tl + 1);
  memcpy(v + tl + 1, key ? key : "", kyl + 1);
  memcpy(v + tl + kyl + 2, value, vlen);
  int rc = altar_ledger_aux_put(w->ledger, k, (size_t)kl, v, tl + kyl + 2 + vlen, err);
  free(v);
  if (!rc && (w->next_due == 0 || due_ms(due_ts) / 1000.0 < w->next_due)) w->next_due = due_ms(due_ts) / 1000.0;
  return rc;
}

typedef struct due_entry {
  char *k;
  size_t klen;
  int32_t part; /* the status partition it waits under */
  char *v;
  size_t vlen;
} due_entry_t;

typedef struct release_ctx {
  altar_ledger_t *l;
  uint64_t now_ms;
  due_entry_t *v;
  size_t n, cap;
  int rc;
  altar_error_t *err;
} release_ctx_t;

static int visit_release(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  release_ctx_t *c = ctx;
  if (klen < 18) return 0;
  char hex[17];
  memcpy(hex, (const char *)key + 2, 16);
  hex[16] = 0;
  if (strtoull(hex, NULL, 16) > c->now_ms) return 1; /* the rest is later still */
  if (ALTAR_GROW(c->v, c->cap, c->n + 1)) goto nomem;
  due_entry_t *e = &c->v[c->n];
  e->k = malloc(klen);
  e->v = malloc(vlen ? vlen : 1);
  if (!e->k || !e->v) {
    free(e->k);
    free(e->v);
    goto nomem;
  }
  memcpy(e->k, key, klen);
  memcpy(e->v, val, vlen);
  e->part = altar_ledger_visit_partition(c->l);
  e->klen = klen;
  e->vlen = vlen;
  c->n++;
  return 0;
nomem:
  c->rc = altar_error_set(c->err, ALTAR_ENOMEM, "retry: out of memory");
  return 1;
}

int altar__retry_wait_release(altar__retry_wait_t *w, altar__outbox_t *ob, double now_ts, size_t *pn,
                              altar_error_t *err) {
  if (pn) *pn = 0;
  if (w->next_due == 0 || now_ts < w->next_due) return ALTAR_OK;
  release_ctx_t c = {.l = w->ledger, .now_ms = (uint64_t)(now_ts * 1000.0), .err = err};
  /* Every partition's, merged by due time; each released under its own. */
  int32_t was = altar_ledger_scope(w->ledger, ALTAR_LEDGER_SCOPE_NONE);
  int rc = altar_ledger_aux_scan(w->ledger, "w/", 2, visit_release, &c, err);
  if (rc == 1) rc = ALTAR_OK; /* stopped at the first entry not yet due */
  if (!rc) rc = c.rc;
  uint64_t first_seq = ob->next_seq;
  bool begun = false;
  if (!rc && c.n) {
    rc = altar_ledger_begin(w->ledger, err);
    begun = !rc;
  }
  for (size_t i = 0; !rc && i < c.n; i++) {
    const due_entry_t *e = &c.v[i];
    altar_ledger_scope(w->ledger, e->part);
    const char *topic = e->v, *key = memchr(e->v, 0, e->vlen);
    const char *end = key ? memchr(key + 1, 0, e->vlen - (size_t)(key + 1 - e->v)) : NULL;
    if (!end) { /* not an entry this code wrote: drop it rather than stop the daemon */
      rc = altar_ledger_aux_del(w->ledger, e->k, e->klen, err);
      continue;
    }
    key++;
    size_t off = (size_t)(end + 1 - e->v);
    rc = altar__outbox_stage(ob, topic, *key ? key : NULL, e->v + off, e->vlen - off, NULL, NULL, NULL, err);
    if (!rc) rc = altar_ledger_aux_del(w->ledger, e->k, e->klen, err);
  }
  if (begun) {
    if (!rc) {
      rc = altar_ledger_commit(w->ledger, err);
    } else {
      altar_error_t ae = {0};
      altar_ledger_abort(w->ledger, &ae);
      altar__outbox_forget_from(ob, first_seq);
    }
  }
  altar_ledger_scope(w->ledger, was);
  for (size_t i = 0; i < c.n; i++) {
    free(c.v[i].k);
    free(c.v[i].v);
  }
  free(c.v);
  if (!rc && c.n) rc = altar__outbox_publish_from(ob, first_seq, err);
  if (!rc && pn) *pn = c.n;
  if (!rc) rc = load_next_due(w, err);
  return rc;
}

typedef struct carry_ctx {
  altar_ledger_t *from, *to;
  size_t n;
  int rc;
  altar_error_t *err;
} carry_ctx_t;

static int visit_carry(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  carry_ctx_t *c = ctx;
  int32_t was = altar_ledger_scope(c->to, altar_ledger_visit_partition(c->from)); /* under the same partition */
  c->rc = altar_ledger_aux_put(c->to, key, klen, val, vlen, c->err);
  altar_ledger_scope(c->to, was);
  if (c->rc) return 1;
  c->n++;
  return 0;
}

int altar__retry_wait_carry(altar_ledger_t *from, altar_ledger_t *to, size_t *pn, altar_error_t *err) {
  carry_ctx_t c = {.from = from, .to = to, .err = err};
  int rc = altar_ledger_aux_scan(from, "w/", 2, visit_carry, &c, err);
  if (rc == 1) rc = ALTAR_OK;
  if (!rc) rc = c.rc;
  if (pn) *pn = c.n;
  return rc;
}
