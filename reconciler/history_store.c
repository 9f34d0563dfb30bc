/* The reconciler's hour in its ledger's side keys (reconciler/history_store.h). */
#include "reconciler/history_store.h"

#include "altar/buf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int encode(const altar_history_bucket_t *b, altar_buf_t *out) {
  char line[160];
  int n = snprintf(line, sizeof line, "v1 %" PRId64 " %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64 "\n", b->index,
                   b->finished, b->fired, b->dead, b->lag);
  if (altar_buf_append(out, line, (size_t)n)) return ALTAR_ENOMEM;
  for (size_t i = 0; i < b->n_failures; i++) {
    char reason[ALTAR_HISTORY_REASON_LEN];
    snprintf(reason, sizeof reason, "%s", b->failures[i].reason);
    for (char *p = reason; *p; p++)
      if (*p == '\n') *p = ' '; /* one line per reason */
    n = snprintf(line, sizeof line, "%" PRIu32 " %s\n", b->failures[i].n, reason);
    if (altar_buf_append(out, line, (size_t)n)) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

int altar__history_save(altar_history_t *h, altar_ledger_t *l, double now, altar_error_t *err) {
  if (!h || !l) return ALTAR_OK;
  int64_t last = (int64_t)(now / ALTAR_HISTORY_BUCKET_S);
  altar_buf_t v = {0};
  int rc = ALTAR_OK;
  int32_t was = altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE); /* the reconciler's own, no partition's */
  for (int64_t idx = last - 1; idx <= last && !rc; idx++) {
    altar_history_bucket_t b;
    if (!altar__history_bucket_get(h, idx, &b)) continue;
    char key[32];
    int kl = snprintf(key, sizeof key, ALTAR_HISTORY_PREFIX "%03d", (int)(idx % ALTAR_HISTORY_BUCKETS));
    altar_buf_reset(&v);
    rc = encode(&b, &v) ? altar_error_set(err, ALTAR_ENOMEM, "history: out of memory")
                        : altar_ledger_aux_put(l, key, (size_t)kl, v.data, v.len, err);
  }
  altar_ledger_scope(l, was);
  altar_buf_free(&v);
  return rc;
}

bool altar__history_decode(const void *val, size_t vlen, altar_history_bucket_t *b) {
  memset(b, 0, sizeof *b);
  if (vlen > 8192) return false;
  char text[8193];
  memcpy(text, val, vlen);
  text[vlen] = 0;
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  int used = 0;
  if (!line ||
      sscanf(line, "v1 %" SCNd64 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNd64 "%n", &b->index, &b->finished,
             &b->fired, &b->dead, &b->lag, &used) != 5 ||
      line[used] || b->index < 0)
    return false;
  while ((line = strtok_r(NULL, "\n", &save)) && b->n_failures <= ALTAR_HISTORY_REASONS_MAX) {
    uint32_t n = 0;
    int at = 0;
    if (sscanf(line, "%" SCNu32 " %n", &n, &at) != 1 || !at) return false;
    snprintf(b->failures[b->n_failures].reason, ALTAR_HISTORY_REASON_LEN, "%s", line + at);
    b->failures[b->n_failures++].n = n;
  }
  return true;
}

typedef struct load {
  altar_history_t *h;
  double now;
} load_t;

static int load_one(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)key, (void)klen;
  load_t *ld = ctx;
  altar_history_bucket_t b;
  if (altar__history_decode(val, vlen, &b)) altar__history_bucket_put(ld->h, &b, ld->now);
  return 0;
}

int altar__history_load(altar_history_t *h, altar_ledger_t *l, double now, altar_error_t *err) {
  if (!h || !l) return ALTAR_OK;
  load_t ld = {h, now};
  return altar_ledger_aux_scan(l, ALTAR_HISTORY_PREFIX, strlen(ALTAR_HISTORY_PREFIX), load_one, &ld, err);
}
