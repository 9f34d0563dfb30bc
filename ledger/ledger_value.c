/* The RocksDB ledger's value format (see ledger_value.h). The record map is
 * the codec's own bytes, so altar_decode_record reads it back: a record
 * without a failure is written around its pre-encoded fixed part
 * (altar_encode_record_around), the rest by altar_encode_record. */
#include "ledger/ledger_value.h"

#include "altar/codec.h"

#include <stdlib.h>
#include <string.h>

#define VALUE_MAGIC 0xA2

static int put_u32(altar_buf_t *b, uint32_t v) {
  unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
  return altar_buf_append(b, x, 4);
}

static uint32_t get_u32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int put_opt_str(altar_buf_t *b, const char *s) {
  if (!s) return put_u32(b, 0xffffffffu);
  size_t n = strlen(s);
  return put_u32(b, (uint32_t)n) || altar_buf_append(b, s, n) ? ALTAR_ENOMEM : ALTAR_OK;
}

bool altar__lvalue_fast(const altar__lent_t *x) {
  return x->packed && !x->e.rec.failure && (unsigned)x->e.rec.state <= ALTAR_STATE_FAILED;
}

int altar__lvalue_encode(altar_buf_t *b, const altar__lent_t *x, altar_error_t *err) {
  const altar_ledger_entry_t *e = &x->e;
  altar_buf_reset(b);
  unsigned char hdr[2] = {VALUE_MAGIC, x->has_spec ? 1 : 0};
  if (altar_buf_append(b, hdr, 2) || put_opt_str(b, e->task_key) || put_opt_str(b, e->group_key) || put_u32(b, 0))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  size_t start = b->len;
  altar_record_t shallow = e->rec;
  shallow.spec = NULL;
  if (altar__lvalue_fast(x)) {
    if (altar_encode_record_around(&shallow, x->packed, x->packed_len, b))
      return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  } else {
    int rc = altar_encode_record(&shallow, b, err);
    if (rc) return rc;
  }
  size_t n = b->len - start;
  if (n > UINT32_MAX) return altar_error_set(err, ALTAR_EINVAL, "ledger: record too large");
  b->data[start - 4] = (uint8_t)(n >> 24);
  b->data[start - 3] = (uint8_t)(n >> 16);
  b->data[start - 2] = (uint8_t)(n >> 8);
  b->data[start - 1] = (uint8_t)n;
  if (x->has_spec && altar_buf_append(b, x->spec_enc, x->spec_len))
    return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  return ALTAR_OK;
}

static int get_opt_str(const unsigned char **p, const unsigned char *end, char **pout) {
  if (end - *p < 4) return ALTAR_EDECODE;
  uint32_t n = get_u32(*p);
  *p += 4;
  if (n == 0xffffffffu) {
    *pout = NULL;
    return ALTAR_OK;
  }
  if ((size_t)(end - *p) < n || n > ALTAR_MAX_STRING) return ALTAR_EDECODE;
  if (memchr(*p, 0, n)) return ALTAR_EDECODE;
  if (!(*pout = strndup((const char *)*p, n))) return ALTAR_ENOMEM;
  *p += n;
  return ALTAR_OK;
}

int altar__lvalue_decode(const char *data, size_t len, altar_ledger_entry_t *e, const char **pspec, size_t *pspec_len,
                         bool want_spec, altar_error_t *err) {
  memset(e, 0, sizeof *e);
  *pspec = NULL;
  *pspec_len = 0;
  const unsigned char *p = (const unsigned char *)data, *end = p + len;
  if (len < 2 || p[0] != VALUE_MAGIC || p[1] > 1)
    return altar_error_set(err, ALTAR_EDECODE, "ledger record: bad header");
  bool has_spec = p[1] == 1;
  p += 2;
  int rc = get_opt_str(&p, end, &e->task_key);
  if (!rc) rc = get_opt_str(&p, end, &e->group_key);
  if (rc) return altar_error_set(err, rc, "ledger record: bad metadata");
  if (end - p < 4) return altar_error_set(err, ALTAR_EDECODE, "ledger record: truncated");
  uint32_t n = get_u32(p);
  p += 4;
  if ((size_t)(end - p) < n) return altar_error_set(err, ALTAR_EDECODE, "ledger record: truncated");
  rc = altar_decode_record(p, n, &e->rec, err);
  if (rc) return altar_error_prefix(err, "ledger record");
  p += n;
  if (has_spec != (p < end))
    return altar_error_set(err, ALTAR_EDECODE, "ledger record: spec flag and spec bytes disagree");
  if (!has_spec) return ALTAR_OK;
  *pspec = (const char *)p;
  *pspec_len = (size_t)(end - p);
  if (!want_spec) return ALTAR_OK;
  altar_spec_t *s = calloc(1, sizeof *s);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  rc = altar_decode_spec(p, (size_t)(end - p), s, err);
  if (rc) {
    altar_spec_free(s);
    return altar_error_prefix(err, "ledger record: spec");
  }
  e->rec.spec = s;
  return ALTAR_OK;
}

bool altar__lvalue_task_key(const char *data, size_t len, const char **pkey, size_t *plen) {
  const unsigned char *v = (const unsigned char *)data;
  if (len < 6 || v[0] != VALUE_MAGIC) return false;
  uint32_t n = get_u32(v + 2);
  if (n == 0xffffffffu || n > len - 6) return false;
  *pkey = data + 6;
  *plen = n;
  return true;
}

void altar__lvalue_record_span(const char *data, size_t *pat, size_t *plen) {
  const unsigned char *v = (const unsigned char *)data;
  size_t at = 2;
  for (int i = 0; i < 2; i++) { /* task key, group key */
    uint32_t sl = get_u32(v + at);
    at += 4 + (sl == 0xffffffffu ? 0 : sl);
  }
  *plen = get_u32(v + at);
  *pat = at + 4;
}
