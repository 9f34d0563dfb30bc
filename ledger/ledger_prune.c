/* The lifetime of consumed records in the RocksDB ledger (ledger_prune.h).
 *
 * Each consume call also writes one index key per status partition its
 * records are under, c:<partition><u64 big-endian stamp>, whose value lists
 * the record keys it consumed (u16 length, then the key,
 * each). The stamp is the wall clock in microseconds, made strictly
 * increasing within the process, so keys never collide and sort in the
 * order of consumption (partitions merged): a prune reads only the old end
 * of the index,
 * however many records are kept, and its cost per record stays the same at
 * any ledger size. One key per call rather than per record keeps what a
 * group's consumption writes nearly as it was.
 *
 * Records consumed before the index existed have no entry and are kept. A
 * record consumed twice (re-opened in between) is listed twice; the older
 * entry removes it at the older age, which only ever frees it early. */
#include "ledger/ledger_prune.h"

#include "ledger/ledger_rocksdb_int.h"
#include "ledger/ledger_value.h"

#include "altar/attempts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDX_KEY_LEN (2 + ALTAR__RL_PART_LEN + 8) /* "c:" <partition> 8 bytes of stamp */
#define RKEY_LEN_MAX 0xffffu

int64_t altar__rl_stamp_us(rl_t *r) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
  if (us <= r->last_stamp_us) us = r->last_stamp_us + 1;
  r->last_stamp_us = us;
  return us;
}

static void put_be64(uint8_t out[8], uint64_t u) {
  for (int i = 7; i >= 0; i--, u >>= 8) out[i] = (uint8_t)(u & 0xff);
}

static int64_t get_be64(const char *p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u = u << 8 | (uint8_t)p[i];
  return (int64_t)u;
}

int altar__rl_index_add(altar_buf_t *list, const char *rk, size_t rklen) {
  if (rklen > RKEY_LEN_MAX) return ALTAR_OK; /* not indexed: kept for ever rather than misread */
  uint8_t len[2] = {(uint8_t)(rklen >> 8), (uint8_t)(rklen & 0xff)};
  return altar_buf_append(list, len, 2) || altar_buf_append(list, rk, rklen) ? ALTAR_ENOMEM : ALTAR_OK;
}

int altar__rl_stage_consumed(rl_t *r, int32_t part, const altar_buf_t *list, int64_t stamp_us) {
  if (!list->len) return ALTAR_OK;
  uint8_t t[8];
  char p[2 + ALTAR__RL_PART_LEN] = {'c', ':'};
  altar__rl_part_hex(part, p + 2);
  put_be64(t, stamp_us < 0 ? 0 : (uint64_t)stamp_us);
  altar_buf_reset(&r->kb2);
  if (altar_buf_append(&r->kb2, p, sizeof p) || altar_buf_append(&r->kb2, t, 8)) return ALTAR_ENOMEM;
  return altar__rl_stage_put(r, &r->kb2, list->data, list->len);
}

/* Reads the integer after "\"name\":" in a small JSON object; -1 if absent. */
static int64_t json_int(const char *v, size_t vlen, const char *name) {
  char pat[32], buf[256];
  size_t n = vlen < sizeof buf - 1 ? vlen : sizeof buf - 1;
  memcpy(buf, v, n);
  buf[n] = 0;
  snprintf(pat, sizeof pat, "\"%s\":", name);
  const char *p = strstr(buf, pat);
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* The attempts of the task whose record r:rk goes (altar/attempts.h) go
 * with it, unless a run of that task is open again: its index key and
 * every attempt the index says is kept (at most attempts_keep). A record
 * without task key or attempts costs one read. */
static int stage_attempts(rl_t *r, int32_t part, const char *rk, size_t rklen) {
  char *val = NULL, *iv = NULL;
  size_t vlen, ilen, kl;
  const char *tk;
  altar_error_t ignored = {0};
  if (altar__rl_key(&r->kb, 'r', part, rk, rklen)) return ALTAR_ENOMEM;
  int rc = altar__rl_get_raw(r, &r->kb, &val, &vlen, &ignored);
  if (rc) return rc == ALTAR_ENOMEM ? rc : ALTAR_OK; /* gone already: nothing of it to follow */
  char key[ALTAR_TASK_KEY_LEN + 32];
  if (!altar__lvalue_task_key(val, vlen, &tk, &kl) || kl > ALTAR_TASK_KEY_LEN || !kl) goto done;
  char task[ALTAR_TASK_KEY_LEN + 1];
  memcpy(task, tk, kl);
  task[kl] = 0;
  if (altar__lindex_task(&r->ix, task)) goto done; /* run again since: its attempts still count */
  char ph[ALTAR__RL_PART_LEN];
  altar__rl_part_hex(part, ph);
  int n = snprintf(key, sizeof key, "x:%.4s" ALTAR_ATTEMPTS_INDEX_PREFIX "%s", ph, task);
  altar_buf_reset(&r->kb2);
  if (altar_buf_append(&r->kb2, key, (size_t)n)) {
    rc = ALTAR_ENOMEM;
    goto done;
  }
  rc = altar__rl_get_raw(r, &r->kb2, &iv, &ilen, &ignored);
  if (rc) {
    rc = rc == ALTAR_ENOMEM ? rc : ALTAR_OK;
    goto done;
  }
  int64_t first = json_int(iv, ilen, "first"), next = json_int(iv, ilen, "next");
  if (altar__rl_stage_del(r, &r->kb2)) rc = ALTAR_ENOMEM;
  for (int64_t a = first < 1 ? 1 : first; !rc && a < next && a - first < ALTAR_ATTEMPTS_KEEP_MAX; a++) {
    n = snprintf(key, sizeof key, "x:%.4s" ALTAR_ATTEMPTS_PREFIX "%s/%06" PRId64, ph, task, a);
    altar_buf_reset(&r->kb2);
    if (altar_buf_append(&r->kb2, key, (size_t)n) || altar__rl_stage_del(r, &r->kb2)) rc = ALTAR_ENOMEM;
  }
done:
  free(iv);
  free(val);
  return rc;
}

/* Stages the removal of every record v lists, with its attempts; *pn
 * counts them. */
static int stage_entry(rl_t *r, int32_t part, const char *v, size_t vlen, size_t *pn) {
  for (size_t at = 0; at + 2 <= vlen;) {
    size_t l = (size_t)(uint8_t)v[at] << 8 | (uint8_t)v[at + 1];
    if (at + 2 + l > vlen) break; /* a torn list: what it names fully is removed */
    if (stage_attempts(r, part, v + at + 2, l)) return ALTAR_ENOMEM;
    if (altar__rl_key(&r->kb, 'r', part, v + at + 2, l) || altar__rl_stage_del(r, &r->kb)) return ALTAR_ENOMEM;
    (*pn)++;
    at += 2 + l;
  }
  return ALTAR_OK;
}

int altar__ledger_rocksdb_prune_consumed(altar_ledger_t *l, int64_t before_ms, size_t max, size_t *ppruned,
                                         altar_error_t *err) {
  *ppruned = 0;
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  if (r->in_batch) return altar_error_set(err, ALTAR_ESTATE, "ledger prune: a batch is open");
  int rc = altar__rl_writable(r, "prune", err);
  if (!rc) rc = altar__rl_settle(r, err); /* the iterator must see every committed consumption */
  if (rc) return rc;
  static const char *const fam[] = {"c:"};
  altar__rl_merge_t m;
  if ((rc = altar__rl_merge_open(r, fam, 1, NULL, 0, &m, err))) return rc;
  size_t n = 0, i;
  int64_t before_us = before_ms > INT64_MAX / 1000 ? INT64_MAX : before_ms * 1000;
  while (!rc && n < max && (i = altar__rl_merge_next(&m, NULL)) != SIZE_MAX) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(m.it[i], &klen);
    if (klen != IDX_KEY_LEN || get_be64(k + IDX_KEY_LEN - 8) >= before_us) break;
    const char *v = rocksdb_iter_value(m.it[i], &vlen);
    /* A record open again under its key is no longer the consumed one: its
     * stale r: copy goes, the open record stays. */
    rc = stage_entry(r, m.part[i], v, vlen, &n);
    altar_buf_reset(&r->kb2);
    if (!rc && (altar_buf_append(&r->kb2, k, klen) || altar__rl_stage_del(r, &r->kb2))) rc = ALTAR_ENOMEM;
    if (rc) rc = altar_error_set(err, ALTAR_ENOMEM, "ledger prune: out of memory");
    rocksdb_iter_next(m.it[i]);
  }
  rc = altar__rl_merge_end(&m, rc, "ledger prune", err);
  if (rc) {
    altar__rl_pend_clear(r);
    return rc;
  }
  rc = altar__rl_op_end(r, ALTAR_OK, err);
  if (!rc) *ppruned = n;
  return rc;
}

/* Records an index value lists, as stage_entry would remove them. */
static size_t count_entry(const char *v, size_t vlen) {
  size_t n = 0;
  for (size_t at = 0; at + 2 <= vlen; n++) {
    size_t l = (size_t)(uint8_t)v[at] << 8 | (uint8_t)v[at + 1];
    if (at + 2 + l > vlen) break;
    at += 2 + l;
  }
  return n;
}

int altar__ledger_rocksdb_consumed_due(altar_ledger_t *l, int64_t before_ms, size_t max, size_t *pdue,
                                       altar_error_t *err) {
  *pdue = 0;
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  int rc = altar__rl_settle(r, err);
  if (rc) return rc;
  static const char *const fam[] = {"c:"};
  altar__rl_merge_t m;
  if ((rc = altar__rl_merge_open(r, fam, 1, NULL, 0, &m, err))) return rc;
  size_t n = 0, i;
  int64_t before_us = before_ms > INT64_MAX / 1000 ? INT64_MAX : before_ms * 1000;
  while (n < max && (i = altar__rl_merge_next(&m, NULL)) != SIZE_MAX) {
    size_t klen, vlen;
    const char *k = rocksdb_iter_key(m.it[i], &klen);
    if (klen != IDX_KEY_LEN || get_be64(k + IDX_KEY_LEN - 8) >= before_us) break;
    const char *v = rocksdb_iter_value(m.it[i], &vlen);
    n += count_entry(v, vlen);
    rocksdb_iter_next(m.it[i]);
  }
  rc = altar__rl_merge_end(&m, ALTAR_OK, "ledger prune", err);
  if (!rc) *pdue = n;
  return rc;
}
