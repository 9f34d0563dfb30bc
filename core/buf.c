#include "altar/buf.h"

#include "altar/error.h"

#include <stdlib.h>
#include <string.h>

void altar_buf_init(altar_buf_t *b) { memset(b, 0, sizeof *b); }

void altar_buf_free(altar_buf_t *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

void altar_buf_reset(altar_buf_t *b) { b->len = 0; }

int altar_buf_reserve(altar_buf_t *b, size_t extra) {
  if (extra > SIZE_MAX - b->len - 1) return ALTAR_ENOMEM;
  size_t need = b->len + extra + 1; /* room for a NUL so detach never reallocates */
  if (need <= b->cap) return ALTAR_OK;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  uint8_t *d = realloc(b->data, cap);
  if (!d) return ALTAR_ENOMEM;
  b->data = d;
  b->cap = cap;
  return ALTAR_OK;
}

int altar__buf_append_slow(altar_buf_t *b, const void *data, size_t len) {
  int rc = altar_buf_reserve(b, len);
  if (rc) return rc;
  if (len) memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = 0;
  return ALTAR_OK;
}

int altar_buf_append_str(altar_buf_t *b, const char *s) { return altar_buf_append(b, s, strlen(s)); }

char *altar_buf_detach(altar_buf_t *b) {
  if (altar_buf_reserve(b, 0)) return NULL;
  b->data[b->len] = 0;
  char *s = (char *)b->data;
  memset(b, 0, sizeof *b);
  return s;
}
