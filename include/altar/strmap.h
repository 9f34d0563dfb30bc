/* altar — a small string→string map kept sorted by key.
 * Labels, plugin identities and annotations use it. Sorted order makes the
 * canonical encoding (and so the identity hash) independent of insertion order. */
#ifndef ALTAR_STRMAP_H
#define ALTAR_STRMAP_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stdbool.h>
#include <stddef.h>

typedef struct altar_strmap {
  size_t n;    /* number of entries */
  size_t cap;  /* allocated entries */
  char **keys; /* sorted ascending by strcmp, unique; read-only to callers */
  char **vals; /* vals[i] belongs to keys[i]; both live in one block the map owns */
} altar_strmap_t;

/* A zeroed struct is an empty map; this is the same. */
void altar_strmap_init(altar_strmap_t *m);
/* Frees every key and value; leaves an empty map. */
void altar_strmap_clear(altar_strmap_t *m);
/* Sets key to a copy of val, replacing any old value. Returns 0 or ALTAR_ENOMEM. */
int altar_strmap_set(altar_strmap_t *m, const char *key, const char *val);
/* Same with explicit lengths (the bytes need not be NUL-terminated). */
int altar_strmap_setn(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen);
/* Same, but an existing key is left alone: ALTAR_EEXIST. */
int altar_strmap_addn(altar_strmap_t *m, const char *key, size_t klen, const char *val, size_t vlen);
/* The value for key, or NULL. The pointer is owned by the map. */
const char *altar_strmap_get(const altar_strmap_t *m, const char *key);
/* Makes room for extra more entries. 0 or ALTAR_ENOMEM. */
int altar_strmap_reserve(altar_strmap_t *m, size_t extra);
/* Removes key if present; returns whether it was. */
bool altar_strmap_remove(altar_strmap_t *m, const char *key);
/* Deep copy into dst (which is overwritten, not freed). 0 or ALTAR_ENOMEM. */
int altar_strmap_copy(altar_strmap_t *dst, const altar_strmap_t *src);
bool altar_strmap_equal(const altar_strmap_t *a, const altar_strmap_t *b);

/* A map over storage the caller owns (an arena): slots holds 2n pointers,
 * the n keys, in ascending order and distinct, then their n values. Such a
 * map is only read: never changed, cleared or freed. */
void altar_strmap_wrap(altar_strmap_t *m, char **slots, size_t n);

/* Bytes a wrapped copy of m takes (altar_strmap_pack), a multiple of the
 * size of a pointer. */
size_t altar_strmap_packed_size(const altar_strmap_t *m);
/* Copies src into mem (pointer-aligned, altar_strmap_packed_size(src)
 * bytes) as a wrapped map in *dst; returns the end of what it used. */
char *altar_strmap_pack(altar_strmap_t *dst, const altar_strmap_t *src, char *mem);

/* Heap-allocated map helpers, for optional maps (NULL = absent). */
altar_strmap_t *altar_strmap_new(void);
void altar_strmap_free(altar_strmap_t *m);
altar_strmap_t *altar_strmap_dup(const altar_strmap_t *m); /* NULL in → NULL out */

ALTAR_API_END

#endif
