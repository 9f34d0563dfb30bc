/* The RocksDB ledger's status partitions in keys (layout 3): every family
 * (o:, r:, c:, x:) puts the partition, 4 hex digits, right after its prefix,
 * so a partition's state is one range per family. Readers that want the
 * keys as if they carried none merge one iterator per partition present. */
#include "ledger/ledger_rocksdb_int.h"

#include <stdlib.h>
#include <string.h>

static const char hexd[] = "0123456789abcdef";

void altar__rl_part_hex(int32_t p, char out[ALTAR__RL_PART_LEN]) {
  uint32_t v = p < 0 || p > ALTAR_LEDGER_SCOPE_MAX ? 0xffffu : (uint32_t)p;
  out[0] = hexd[v >> 12 & 15];
  out[1] = hexd[v >> 8 & 15];
  out[2] = hexd[v >> 4 & 15];
  out[3] = hexd[v & 15];
}

static int hexv(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

bool altar__rl_part_parse(const char *h, int32_t *pp) {
  uint32_t v = 0;
  for (int i = 0; i < ALTAR__RL_PART_LEN; i++) {
    int d = hexv(h[i]);
    if (d < 0) return false;
    v = v << 4 | (uint32_t)d;
  }
  *pp = v == 0xffffu ? ALTAR_LEDGER_SCOPE_NONE : (int32_t)v;
  return true;
}

int altar__rl_parts(rl_t *r, const char *fam, int32_t **pv, size_t *pn, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  int rc = altar__rl_settle(r, err);
  if (rc) return rc;
  int32_t *v = NULL;
  size_t n = 0, cap = 0;
  rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ropts);
  char seek[2 + ALTAR__RL_PART_LEN];
  memcpy(seek, fam, 2);
  rocksdb_iter_seek(it, fam, 2);
  while (!rc && rocksdb_iter_valid(it)) {
    size_t klen;
    const char *k = rocksdb_iter_key(it, &klen);
    int32_t p;
    if (klen < 2 || memcmp(k, fam, 2)) break;
    if (klen < 2 + ALTAR__RL_PART_LEN || !altar__rl_part_parse(k + 2, &p)) {
      char shown[160];
      altar__rl_show_key(shown, sizeof shown, k, klen);
      rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: key %s carries no status partition", r->dir, shown);
      break;
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      int32_t *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
        break;
      }
      v = nv;
      cap = nc;
    }
    v[n++] = p;
    if (p == ALTAR_LEDGER_SCOPE_NONE) break; /* ffff: the last there is */
    altar__rl_part_hex(p + 1, seek + 2);
    rocksdb_iter_seek(it, seek, sizeof seek);
  }
  rc = altar__rl_iter_end(it, rc, "ledger", err);
  if (rc) {
    free(v);
    return rc;
  }
  *pv = v;
  *pn = n;
  return ALTAR_OK;
}

int altar__rl_find_parted(rl_t *r, altar_error_t *err) {
  static const char *const fams[] = {"o:", "r:", "c:", "x:"};
  r->parted = false;
  for (size_t f = 0; f < sizeof fams / sizeof *fams && !r->parted; f++) {
    int32_t *pv;
    size_t pn;
    int rc = altar__rl_parts(r, fams[f], &pv, &pn, err);
    if (rc) return rc;
    r->parted = pn > 1 || (pn == 1 && pv[0] != ALTAR_LEDGER_SCOPE_NONE);
    free(pv);
  }
  return ALTAR_OK;
}

void altar__rl_merge_free(altar__rl_merge_t *m) {
  for (size_t i = 0; i < m->n; i++)
    if (m->it[i]) rocksdb_iter_destroy(m->it[i]);
  free(m->it);
  free(m->part);
  free(m->fam);
  free(m->pfx);
  memset(m, 0, sizeof *m);
}

int altar__rl_merge_open(rl_t *r, const char *const *fams, size_t nfam, const char *sub, size_t sublen,
                         altar__rl_merge_t *m, altar_error_t *err) {
  memset(m, 0, sizeof *m);
  m->plen = 2 + ALTAR__RL_PART_LEN + sublen;
  for (size_t f = 0; f < nfam; f++) {
    int32_t *pv;
    size_t pn;
    int rc = altar__rl_parts(r, fams[f], &pv, &pn, err);
    if (rc) {
      altar__rl_merge_free(m);
      return rc;
    }
    size_t n = m->n + pn;
    rocksdb_iterator_t **it = realloc(m->it, (n ? n : 1) * sizeof *it);
    if (it) m->it = it;
    int32_t *part = it ? realloc(m->part, (n ? n : 1) * sizeof *part) : NULL;
    if (part) m->part = part;
    size_t *fam = part ? realloc(m->fam, (n ? n : 1) * sizeof *fam) : NULL;
    if (fam) m->fam = fam;
    char *pfx = fam ? realloc(m->pfx, (n ? n : 1) * m->plen) : NULL;
    if (pfx) m->pfx = pfx;
    if (!pfx) {
      free(pv);
      altar__rl_merge_free(m);
      return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
    }
    for (size_t i = 0; i < pn; i++) {
      size_t k = m->n++;
      char *p = m->pfx + k * m->plen;
      memcpy(p, fams[f], 2);
      altar__rl_part_hex(pv[i], p + 2);
      if (sublen) memcpy(p + 2 + ALTAR__RL_PART_LEN, sub, sublen);
      m->part[k] = pv[i];
      m->fam[k] = f;
      m->it[k] = rocksdb_create_iterator(r->db, r->ropts);
      rocksdb_iter_seek(m->it[k], p, m->plen);
    }
    free(pv);
  }
  return ALTAR_OK;
}

/* The key of iterator i after its family and partition, or NULL when it has
 * left its prefix. */
static const char *suffix(const altar__rl_merge_t *m, size_t i, size_t *plen) {
  if (!m->it[i] || !rocksdb_iter_valid(m->it[i])) return NULL;
  size_t klen;
  const char *k = rocksdb_iter_key(m->it[i], &klen);
  if (klen < m->plen || memcmp(k, m->pfx + i * m->plen, m->plen)) return NULL;
  *plen = klen - 2 - ALTAR__RL_PART_LEN;
  return k + 2 + ALTAR__RL_PART_LEN;
}

static int key_cmp(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}

size_t altar__rl_merge_next(altar__rl_merge_t *m, int (*cmp)(const char *, size_t, const char *, size_t)) {
  size_t best = SIZE_MAX, bl = 0;
  const char *bk = NULL;
  if (!cmp) cmp = key_cmp;
  for (size_t i = 0; i < m->n; i++) {
    size_t l;
    const char *k = suffix(m, i, &l);
    if (k && (!bk || cmp(k, l, bk, bl) < 0)) {
      best = i;
      bk = k;
      bl = l;
    }
  }
  return best;
}

bool altar__rl_merge_same(const altar__rl_merge_t *m, size_t i, size_t j,
                          int (*cmp)(const char *, size_t, const char *, size_t)) {
  size_t il, jl;
  const char *ik = suffix(m, i, &il), *jk = suffix(m, j, &jl);
  if (!cmp) cmp = key_cmp;
  return ik && jk && !cmp(ik, il, jk, jl);
}

int altar__rl_merge_end(altar__rl_merge_t *m, int rc, const char *what, altar_error_t *err) {
  for (size_t i = 0; i < m->n; i++) {
    rc = altar__rl_iter_end(m->it[i], rc, what, err);
    m->it[i] = NULL;
  }
  altar__rl_merge_free(m);
  return rc;
}
