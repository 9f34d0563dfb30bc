/* The stored form of settled groups, and the older one it replaced. */
#include "reconciler/settled_record.h"
#include "altar/grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void altar__settled_key(uint64_t seq, char out[ALTAR__SETTLED_KEY_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  memcpy(out, ALTAR__SETTLED_PREFIX, 2);
  for (int i = 0; i < 16; i++) out[2 + i] = hex[(seq >> (60 - 4 * i)) & 15];
  out[ALTAR__SETTLED_KEY_LEN] = 0;
}

bool altar__settled_key_seq(const void *key, size_t klen, uint64_t *pseq) {
  const char *k = key;
  if (klen != ALTAR__SETTLED_KEY_LEN || memcmp(k, ALTAR__SETTLED_PREFIX, 2) != 0) return false;
  uint64_t seq = 0;
  for (size_t i = 2; i < klen; i++) {
    char c = k[i];
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
    if (d > 15) return false;
    seq = seq << 4 | d;
  }
  *pseq = seq;
  return true;
}

static void ts_put(char *p, double ts) {
  uint64_t u;
  memcpy(&u, &ts, sizeof u);
  for (int i = ALTAR__SETTLED_TS_LEN - 1; i >= 0; i--, u >>= 8) p[i] = (char)(u & 0xff);
}

/* A ts it cannot use (not finite) never expires, as the older loader read
 * an unreadable one; a stored +inf must not become the newest event time. */
static double ts_get(const char *p) {
  uint64_t u = 0;
  for (int i = 0; i < ALTAR__SETTLED_TS_LEN; i++) u = u << 8 | (unsigned char)p[i];
  double ts;
  memcpy(&ts, &u, sizeof ts);
  return isfinite(ts) ? ts : -INFINITY;
}

int altar__settled_member_next(const char *val, size_t vlen, size_t *pos, altar__settled_member_t *m) {
  if (vlen < ALTAR__SETTLED_TS_LEN) return -1;
  size_t p = *pos ? *pos : ALTAR__SETTLED_TS_LEN;
  if (p >= vlen) return p == vlen ? 0 : -1;
  const char *k = val + p, *end = val + vlen;
  const char *kz = memchr(k, 0, (size_t)(end - k));
  if (!kz) return -1;
  const char *r = kz + 1;
  const char *rz = r < end ? memchr(r, 0, (size_t)(end - r)) : NULL;
  if (!rz) return -1;
  *m = (altar__settled_member_t){k, r, (size_t)(kz - k), (size_t)(rz - r)};
  *pos = (size_t)(rz + 1 - val);
  return 1;
}

bool altar__settled_rec_next(const altar__settled_rec_t *r, size_t *pos, altar__settled_member_t *m) {
  return altar__settled_member_next(r->data, r->len, pos, m) > 0;
}

/* A record of len value bytes, its ts already written. */
static altar__settled_rec_t *rec_new(uint64_t seq, double ts, size_t len) {
  altar__settled_rec_t *r = malloc(sizeof *r + len);
  if (!r) return NULL;
  r->seq = seq;
  r->ts = ts;
  r->len = len;
  ts_put(r->data, ts);
  return r;
}

/* Writes one member; the run is run, or run "\x1f" id when id is given. */
static char *put_member(char *p, const char *tk, size_t kl, const char *run, size_t rl, const char *id, size_t il) {
  memcpy(p, tk, kl);
  p += kl;
  *p++ = 0;
  memcpy(p, run, rl);
  p += rl;
  if (id) {
    *p++ = '\x1f';
    memcpy(p, id, il);
    p += il;
  }
  *p++ = 0;
  return p;
}

static bool is_member(const altar_handle_t *h, const char *tk) { return h->backend && h->external_id && tk; }

altar__settled_rec_t *altar__settled_rec_of_group(uint64_t seq, const altar_group_event_t *g, char *const *task_keys) {
  /* Sized from the strings: ids come from the log, their length is theirs. */
  size_t len = ALTAR__SETTLED_TS_LEN;
  for (size_t i = 0; i < g->n_shards; i++)
    if (is_member(&g->shards[i], task_keys[i]))
      len += strlen(task_keys[i]) + strlen(g->shards[i].backend) + strlen(g->shards[i].external_id) + 3;
  altar__settled_rec_t *r = rec_new(seq, g->ts, len);
  if (!r) return NULL;
  char *p = r->data + ALTAR__SETTLED_TS_LEN;
  for (size_t i = 0; i < g->n_shards; i++) {
    const altar_handle_t *h = &g->shards[i];
    if (is_member(h, task_keys[i]))
      p = put_member(p, task_keys[i], strlen(task_keys[i]), h->backend, strlen(h->backend), h->external_id,
                     strlen(h->external_id));
  }
  return r;
}

altar__settled_rec_t *altar__settled_rec_parse(uint64_t seq, const void *val, size_t vlen, const char **pwhy) {
  *pwhy = NULL;
  size_t pos = 0;
  altar__settled_member_t m;
  int more;
  while ((more = altar__settled_member_next(val, vlen, &pos, &m)) > 0) {}
  if (more < 0) {
    *pwhy = vlen < ALTAR__SETTLED_TS_LEN ? "too short for its ts" : "a field without its NUL";
    return NULL;
  }
  altar__settled_rec_t *r = rec_new(seq, ts_get(val), vlen);
  if (r) memcpy(r->data, val, vlen);
  return r;
}

/* ---- the older layout ---- */

/* Stored value of "t/<task key>": the run, a NUL, the ts as text. */
static double old_ts(const char *v, size_t vlen, size_t *prlen) {
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

typedef struct olds_ctx {
  altar__settled_olds_t *o;
  int rc;
} olds_ctx_t;

/* Ends a scan out of memory. */
static int stop_nomem(olds_ctx_t *c) {
  c->rc = ALTAR_ENOMEM;
  return 1;
}

static int visit_old(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  olds_ctx_t *c = ctx;
  altar__settled_olds_t *o = c->o;
  if (ALTAR_GROW(o->v, o->cap, o->n + 1)) return stop_nomem(c);
  size_t rlen;
  double ts = old_ts(val, vlen, &rlen);
  char *b = malloc(klen + rlen + 2);
  if (!b) return stop_nomem(c);
  memcpy(b, key, klen);
  b[klen] = 0;
  memcpy(b + klen + 1, val, rlen);
  b[klen + 1 + rlen] = 0;
  o->v[o->n++] = (altar__settled_old_t){b, klen, ts};
  return 0;
}

int altar__settled_olds_read(altar_ledger_t *l, altar__settled_olds_t *out, altar_error_t *err) {
  olds_ctx_t c = {.o = out};
  int rc = altar_ledger_aux_scan(l, ALTAR__SETTLED_OLD_PREFIX, 2, visit_old, &c, err);
  if (!rc && c.rc) rc = altar_error_set(err, c.rc, "settled tasks: out of memory");
  return rc;
}

void altar__settled_olds_free(altar__settled_olds_t *o) {
  for (size_t i = 0; i < o->n; i++) free(o->v[i].key);
  free(o->v);
  memset(o, 0, sizeof *o);
}

const char *altar__settled_old_task_key(const altar__settled_old_t *o, size_t *plen) {
  *plen = strnlen(o->key + 2, o->klen - 2);
  return o->key + 2;
}

static const char *old_run(const altar__settled_old_t *o) { return o->key + o->klen + 1; }

altar__settled_rec_t *altar__settled_rec_of_olds(uint64_t seq, double ts, altar__settled_old_t *const *v, size_t n) {
  size_t len = ALTAR__SETTLED_TS_LEN, kl;
  for (size_t i = 0; i < n; i++) {
    altar__settled_old_task_key(v[i], &kl);
    len += kl + strlen(old_run(v[i])) + 2;
  }
  altar__settled_rec_t *r = rec_new(seq, ts, len);
  if (!r) return NULL;
  char *p = r->data + ALTAR__SETTLED_TS_LEN;
  for (size_t i = 0; i < n; i++) {
    const char *tk = altar__settled_old_task_key(v[i], &kl);
    p = put_member(p, tk, kl, old_run(v[i]), strlen(old_run(v[i])), NULL, 0);
  }
  return r;
}

void altar__settled_u64_put(char out[8], uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) out[i] = (char)(v & 0xff);
}

uint64_t altar__settled_u64_get(const void *p) {
  const unsigned char *b = p;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | b[i];
  return v;
}

int altar__settled_index_key(altar_buf_t *b, const char *key, size_t klen) {
  altar_buf_reset(b);
  return altar_buf_append(b, ALTAR__SETTLED_INDEX_PREFIX, ALTAR__SETTLED_INDEX_PREFIX_LEN) ||
                 altar_buf_append(b, key, klen)
             ? ALTAR_ENOMEM
             : ALTAR_OK;
}

int altar__settled_index_value(altar_buf_t *b, uint64_t seq, double ts, const char *run, size_t rlen) {
  char head[ALTAR__SETTLED_INDEX_HEAD];
  altar__settled_u64_put(head, seq);
  ts_put(head + 8, ts);
  altar_buf_reset(b);
  return altar_buf_append(b, head, sizeof head) || altar_buf_append(b, run, rlen) ? ALTAR_ENOMEM : ALTAR_OK;
}

bool altar__settled_index_parse(const void *v, size_t vlen, uint64_t *pseq, double *pts, const char **prun,
                                size_t *prlen) {
  if (vlen < ALTAR__SETTLED_INDEX_HEAD) return false;
  const char *p = v;
  *pseq = altar__settled_u64_get(p);
  *pts = ts_get(p + 8);
  *prun = p + ALTAR__SETTLED_INDEX_HEAD;
  *prlen = vlen - ALTAR__SETTLED_INDEX_HEAD;
  return true;
}
