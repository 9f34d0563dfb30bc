/* The ledger checksum: SHA-256 over the logical content (every record in
 * key order, with spec and metadata), never over storage files, so equal
 * ledgers agree whatever their write or compaction history. */
#include "altar/attempts.h"
#include "altar/codec.h"
#include "altar/ledger.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

typedef struct sum_ctx {
  EVP_MD_CTX *md;
  altar_buf_t buf;
  altar_error_t *err;
} sum_ctx_t;

static void put_field(EVP_MD_CTX *md, const void *p, size_t len, bool present) {
  /* Length-prefixed so field boundaries are unambiguous; absent ≠ empty. */
  uint32_t n = present ? (uint32_t)len : 0xffffffffu;
  unsigned char b[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n};
  EVP_DigestUpdate(md, b, 4);
  if (present && len) EVP_DigestUpdate(md, p, len);
}

static int sum_visit(void *vctx, const altar_ledger_entry_t *e) {
  sum_ctx_t *c = vctx;
  altar_buf_reset(&c->buf);
  int rc = altar_encode_record(&e->rec, &c->buf, c->err);
  if (rc) return rc;
  put_field(c->md, e->rec.handle.backend, strlen(e->rec.handle.backend), true);
  put_field(c->md, e->rec.handle.external_id, strlen(e->rec.handle.external_id), true);
  put_field(c->md, c->buf.data, c->buf.len, true);
  put_field(c->md, e->task_key, e->task_key ? strlen(e->task_key) : 0, e->task_key != NULL);
  put_field(c->md, e->group_key, e->group_key ? strlen(e->group_key) : 0, e->group_key != NULL);
  return ALTAR_OK;
}

/* A shard's attempts are part of what the ledger says happened (a rebuild
 * must reproduce them), unlike the other side keys (outbox, offsets). */
static int sum_attempt(void *vctx, const void *key, size_t klen, const void *val, size_t vlen) {
  sum_ctx_t *c = vctx;
  put_field(c->md, key, klen, true);
  put_field(c->md, val, vlen, true);
  return ALTAR_OK;
}

int altar_ledger_checksum(altar_ledger_t *l, char out[ALTAR_LEDGER_CHECKSUM_LEN + 1], altar_error_t *err) {
  sum_ctx_t c = {.md = EVP_MD_CTX_new(), .err = err};
  if (!c.md || EVP_DigestInit_ex(c.md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(c.md);
    return altar_error_set(err, ALTAR_ENOMEM, "ledger checksum: cannot start SHA-256");
  }
  put_field(c.md, "altar-ledger-v1", 15, true);
  int rc = altar_ledger_foreach(l, sum_visit, &c, err);
  if (!rc) {
    /* Nothing is added when no attempt was filed, so such ledgers keep
     * the digest they had before attempts were kept. */
    altar_error_t e = {0};
    rc = altar_ledger_aux_scan(l, ALTAR_ATTEMPTS_PREFIX, strlen(ALTAR_ATTEMPTS_PREFIX), sum_attempt, &c, &e);
    if (!rc)
      rc = altar_ledger_aux_scan(l, ALTAR_ATTEMPTS_INDEX_PREFIX, strlen(ALTAR_ATTEMPTS_INDEX_PREFIX), sum_attempt, &c,
                                 &e);
    if (rc == ALTAR_ENOTSUP) rc = ALTAR_OK;
    else if (rc && err) *err = e;
  }
  unsigned char dig[32];
  unsigned int dl = 0;
  if (!rc && EVP_DigestFinal_ex(c.md, dig, &dl) != 1)
    rc = altar_error_set(err, ALTAR_EIO, "ledger checksum: SHA-256 failed");
  EVP_MD_CTX_free(c.md);
  altar_buf_free(&c.buf);
  if (rc) return rc;
  memcpy(out, "sha256:", 7);
  for (unsigned i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", dig[i]);
  return ALTAR_OK;
}

static int stats_visit(void *vctx, const altar_ledger_entry_t *e) {
  altar_ledger_stats_t *s = vctx;
  s->records++;
  if (e->rec.consumed) {
    s->consumed++;
    return ALTAR_OK;
  }
  if ((unsigned)e->rec.state < 4) s->by_state[e->rec.state]++;
  if (!altar_state_terminal(e->rec.state)) s->open++;
  return ALTAR_OK;
}

int altar_ledger_stats(altar_ledger_t *l, altar_ledger_stats_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return altar_ledger_foreach(l, stats_visit, pout, err);
}
