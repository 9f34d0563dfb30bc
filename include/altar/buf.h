/* altar — a growable byte buffer. */
#ifndef ALTAR_BUF_H
#define ALTAR_BUF_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct altar_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
} altar_buf_t;

/* A zeroed struct is an empty buffer. */
void altar_buf_init(altar_buf_t *b);
void altar_buf_free(altar_buf_t *b);                 /* frees data, leaves an empty buffer */
void altar_buf_reset(altar_buf_t *b);                /* len = 0, keeps the allocation */
int altar_buf_reserve(altar_buf_t *b, size_t extra); /* 0 or ALTAR_ENOMEM */
int altar__buf_append_slow(altar_buf_t *b, const void *data, size_t len);

/* Inline: encoders append many small pieces, and most fit without growing. */
static inline int altar_buf_append(altar_buf_t *b, const void *data, size_t len) {
  if (len < b->cap - b->len) { /* cap > len always holds once allocated; the NUL still fits */
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return 0;
  }
  return altar__buf_append_slow(b, data, len);
}
int altar_buf_append_str(altar_buf_t *b, const char *s);
/* Takes the bytes out (NUL-terminated, caller frees); leaves an empty buffer. */
char *altar_buf_detach(altar_buf_t *b);

ALTAR_API_END

#endif
