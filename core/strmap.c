/* A sorted string map. Storage: keys and vals share one pointer array
 * (vals = keys + cap), and each entry is one block "key\0value\0" that
 * keys[i] points at and vals[i] points into. Labels are copied with every
 * handle; one allocation per entry instead of two, and one array instead of
 * two, halves the allocator traffic of a copy. */
#include "altar/strmap.h"

#include "altar/error.h"

#include <stdlib.h>
#include <string.h>

void altar_strmap_init(altar_strmap_t *m) { memset(m, 0, sizeof *m); }

void altar_strmap_clear(altar_strmap_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) free(m->keys[i]); /* the value shares the block */
  free(m->keys);
  memset(m, 0, sizeof *m);
}

void altar_strmap_wrap(altar_strmap_t *m, char **slots, size_t n) {
  m->keys = slots;
  m->vals = slots ? slots + n : NULL; /* an empty map may come without slots */
  m->n = m->cap = n;
}

/* n rounded up to a whole number of pointers. */
static size_t ptr_round(size_t n) { return (n + sizeof(char *) - 1) & ~(sizeof(char *) - 1); }

size_t altar_strmap_packed_size(const altar_strmap_t *m) {
  size_t n = 2 * m->n * sizeof(char *);
  for (size_t i = 0; i < m->n; i++) n += strlen(m->keys[i]) + strlen(m->vals[i]) + 2;
  return ptr_round(n);
}

char *altar_strmap_pack(altar_strmap_t *dst, const altar_strmap_t *src, char *mem) {
  size_t n = src->n;
  char **slots = (char **)(void *)mem;
  char *p = mem + 2 * n * sizeof(char *);
  for (size_t i = 0; i < n; i++) {
    size_t kl = strlen(src->keys[i]) + 1, vl = strlen(src->vals[i]) + 1;
    memcpy(p, src->keys[i], kl);
    memcpy(p + kl, src->vals[i], vl);
    slots[i] = p;
    slots[n + i] = p + kl;
    p += kl + vl;
  }
  altar_strmap_wrap(dst, n ? slots : NULL, n);
  return mem + ptr_round((size_t)(p - mem));
}

/* One block holding key and value, both NUL-terminated. */
static char *entry_new(const char *key, size_t klen, const char *val, size_t vlen) {
  char *b = malloc(klen + vlen + 2);
  if (!b) return NULL;
  if (klen) memcpy(b, key, klen);
  b[klen] = '\0';
  if (vlen) memcpy(b + klen + 1, val, vlen);
  b[klen + 1 + vlen] = '\0';
  return b;
}

int altar_strmap_reserve(altar_strmap_t *m, size_t extra) {
  if (extra <= m->cap - m->n) return ALTAR_OK;
  size_t cap = m->cap ? m->cap : 4;
  while (cap < m->n + extra) cap *= 2;
  char **v = malloc(2 * cap * sizeof *v);
  if (!v) return ALTAR_ENOMEM;
  if (m->n) {
    memcpy(v, m->keys, m->n * sizeof *v);
    memcpy(v + cap, m->vals, m->n * sizeof *v);
  }
  free(m->keys);
  m->keys = v;
  m->vals = v + cap;
  m->cap = cap;
  return ALTAR_OK;
}

/* Compares stored key k with key[0..klen). */
static int key_cmp(const char *k, const char *key, size_t klen) {
  size_t kl = strlen(k), n = kl < klen ? kl : klen;
  int c = n ? memcmp(k, key, n) : 0; /* key may be NULL when klen is 0 */
  return c ? c : (kl > klen) - (kl < klen);
}

/* Binary search: index of key, or where it would go (with *found false). */
static size_t strmap_find(const altar_strmap_t *m, const char *key, size_t klen, bool *found) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = key_cmp(m->keys[mid], key, klen);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

/* Inserts key, or replaces its value when `replace` (else ALTAR_EEXIST). */
static int put(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen, bool replace) {
  bool found = false;
  /* Keys mostly arrive in order (decoding, copying): append without a search. */
  size_t i = !m->n || key_cmp(m->keys[m->n - 1], key, klen) < 0 ? m->n : strmap_find(m, key, klen, &found);
  if (found && !replace) return ALTAR_EEXIST;
  char *b = entry_new(key, klen, val, vlen);
  if (!b) return ALTAR_ENOMEM;
  if (found) {
    free(m->keys[i]);
    m->keys[i] = b;
    m->vals[i] = b + klen + 1;
    return ALTAR_OK;
  }
  if (altar_strmap_reserve(m, 1)) {
    free(b);
    return ALTAR_ENOMEM;
  }
  memmove(m->keys + i + 1, m->keys + i, (m->n - i) * sizeof *m->keys);
  memmove(m->vals + i + 1, m->vals + i, (m->n - i) * sizeof *m->vals);
  m->keys[i] = b;
  m->vals[i] = b + klen + 1;
  m->n++;
  return ALTAR_OK;
}

int altar_strmap_setn(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen) {
  return put(m, key, klen, val, vlen, true);
}

int altar_strmap_addn(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen) {
  return put(m, key, klen, val, vlen, false);
}

int altar_strmap_set(altar_strmap_t *m, const char *key, const char *val) {
  return altar_strmap_setn(m, key, strlen(key), val, strlen(val));
}

const char *altar_strmap_get(const altar_strmap_t *m, const char *key) {
  if (!m) return NULL;
  bool found;
  size_t i = strmap_find(m, key, strlen(key), &found);
  return found ? m->vals[i] : NULL;
}

bool altar_strmap_remove(altar_strmap_t *m, const char *key) {
  bool found;
  size_t i = strmap_find(m, key, strlen(key), &found);
  if (!found) return false;
  free(m->keys[i]);
  memmove(m->keys + i, m->keys + i + 1, (m->n - i - 1) * sizeof *m->keys);
  memmove(m->vals + i, m->vals + i + 1, (m->n - i - 1) * sizeof *m->vals);
  m->n--;
  return true;
}

int altar_strmap_copy(altar_strmap_t *dst, const altar_strmap_t *src) {
  altar_strmap_init(dst);
  if (!src || src->n == 0) return ALTAR_OK;
  if (altar_strmap_reserve(dst, src->n)) return ALTAR_ENOMEM;
  for (size_t i = 0; i < src->n; i++) {
    size_t klen = strlen(src->keys[i]), vlen = strlen(src->vals[i]);
    char *b = entry_new(src->keys[i], klen, src->vals[i], vlen);
    if (!b) {
      altar_strmap_clear(dst);
      return ALTAR_ENOMEM;
    }
    dst->keys[i] = b;
    dst->vals[i] = b + klen + 1;
    dst->n = i + 1;
  }
  return ALTAR_OK;
}

bool altar_strmap_equal(const altar_strmap_t *a, const altar_strmap_t *b) {
  size_t an = a ? a->n : 0, bn = b ? b->n : 0;
  if (an != bn) return false;
  for (size_t i = 0; i < an; i++)
    if (strcmp(a->keys[i], b->keys[i]) != 0 || strcmp(a->vals[i], b->vals[i]) != 0) return false;
  return true;
}

altar_strmap_t *altar_strmap_new(void) { return calloc(1, sizeof(altar_strmap_t)); }

void altar_strmap_free(altar_strmap_t *m) {
  if (!m) return;
  altar_strmap_clear(m);
  free(m);
}

altar_strmap_t *altar_strmap_dup(const altar_strmap_t *m) {
  if (!m) return NULL;
  altar_strmap_t *d = malloc(sizeof *d);
  if (!d) return NULL;
  if (altar_strmap_copy(d, m) != ALTAR_OK) {
    free(d);
    return NULL;
  }
  return d;
}
