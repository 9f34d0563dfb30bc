/* The reconciler's stored input offsets, read by the daemon and by
 * `altar log offsets --group altar.reconcilers`. */
#include "reconciler/input_offsets.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

size_t altar__reconciler_offset_key(const char *topic, int32_t partition, char *out, size_t outsz) {
  int n = snprintf(out, outsz, "s/%s/%" PRId32, topic, partition);
  return n < 0 ? 0 : (size_t)n < outsz ? (size_t)n : outsz - 1;
}

int altar__reconciler_input_offset(altar_ledger_t *l, const char *topic, int32_t partition, int64_t *pnext,
                                   altar_error_t *err) {
  char k[320];
  size_t kl = altar__reconciler_offset_key(topic, partition, k, sizeof k);
  altar_buf_t b = {0};
  int32_t was = altar_ledger_scope(l, partition); /* stored under its own partition */
  int rc = altar_ledger_aux_get(l, k, kl, &b, err);
  altar_ledger_scope(l, was);
  *pnext = -1;
  if (rc == ALTAR_OK) {
    /* Stored as decimal text without a terminator. */
    char v[32];
    size_t n = b.len < sizeof v - 1 ? b.len : sizeof v - 1;
    for (size_t i = 0; i < n; i++) v[i] = (char)b.data[i];
    v[n] = 0;
    *pnext = strtoll(v, NULL, 10);
  } else if (rc == ALTAR_ENOTFOUND) {
    rc = ALTAR_OK;
  }
  altar_buf_free(&b);
  return rc;
}
