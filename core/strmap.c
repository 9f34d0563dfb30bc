#include "altar/strmap.h"

#include "altar/error.h"

#include <stdlib.h>
#include <string.h>

void altar_strmap_init(altar_strmap_t *m) { memset(m, 0, sizeof *m); }

void altar_strmap_clear(altar_strmap_t *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) {
    free(m->keys[i]);
    free(m->vals[i]);
  }
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* Binary search: index of key, or where it would go (with *found false). */
static size_t strmap_find(const altar_strmap_t *m, const char *key, size_t klen, bool *found) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *k = m->keys[mid];
    size_t kl = strlen(k);
    int c = memcmp(k, key, kl < klen ? kl : klen);
    if (c == 0) c = (kl > klen) - (kl < klen);
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

int altar_strmap_setn(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen) {
  bool found;
  size_t i = strmap_find(m, key, klen, &found);
  char *v = strndup(val, vlen);
  if (!v) return ALTAR_ENOMEM;
  if (found) {
    free(m->vals[i]);
    m->vals[i] = v;
    return ALTAR_OK;
  }
  char *k = strndup(key, klen);
  if (!k) {
    free(v);
    return ALTAR_ENOMEM;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 4;
    char **nk = realloc(m->keys, cap * sizeof *nk);
    if (!nk) goto oom;
    m->keys = nk;
    char **nv = realloc(m->vals, cap * sizeof *nv);
    if (!nv) goto oom;
    m->vals = nv;
    m->cap = cap;
  }
  memmove(m->keys + i + 1, m->keys + i, (m->n - i) * sizeof *m->keys);
  memmove(m->vals + i + 1, m->vals + i, (m->n - i) * sizeof *m->vals);
  m->keys[i] = k;
  m->vals[i] = v;
  m->n++;
  return ALTAR_OK;
oom:
  free(k);
  free(v);
  return ALTAR_ENOMEM;
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
  free(m->vals[i]);
  memmove(m->keys + i, m->keys + i + 1, (m->n - i - 1) * sizeof *m->keys);
  memmove(m->vals + i, m->vals + i + 1, (m->n - i - 1) * sizeof *m->vals);
  m->n--;
  return true;
}

int altar_strmap_copy(altar_strmap_t *dst, const altar_strmap_t *src) {
  altar_strmap_init(dst);
  if (!src || src->n == 0) return ALTAR_OK;
  dst->keys = calloc(src->n, sizeof *dst->keys);
  dst->vals = calloc(src->n, sizeof *dst->vals);
  if (!dst->keys || !dst->vals) goto oom;
  dst->cap = src->n;
  for (size_t i = 0; i < src->n; i++) {
    dst->keys[i] = strdup(src->keys[i]);
    dst->vals[i] = strdup(src->vals[i]);
    dst->n = i + 1;
    if (!dst->keys[i] || !dst->vals[i]) goto oom;
  }
  return ALTAR_OK;
oom:
  if (dst->keys && dst->vals) {
    altar_strmap_clear(dst);
  } else {
    free(dst->keys);
    free(dst->vals);
    altar_strmap_init(dst);
  }
  return ALTAR_ENOMEM;
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
