/* libFuzzer: the local log's record parser over untrusted segment bytes.
 * Parses records one after another as a scan does and turns each valid one
 * into a message; ASan catches any read past the input. */
#include "fuzz_target.h"
#include "transports/local_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  /* The first byte picks a mode: odd = fix each frame's crc first, so the
   * fuzzer reaches the field parser behind the checksum. */
  bool fix_crc = data[0] & 1;
  data++;
  size--;
  /* An exact-size copy, so a read one byte too far is an ASan report. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  size_t off = 0;
  while (off < size) {
    if (fix_crc && size - off >= LREC_FRAME) {
      uint8_t *p = buf + off;
      uint32_t body = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
      if (body <= size - off - LREC_FRAME) {
        uint32_t c = (uint32_t)crc32(crc32(0L, Z_NULL, 0), p + LREC_FRAME, (uInt)body);
        p[4] = (uint8_t)(c >> 24);
        p[5] = (uint8_t)(c >> 16);
        p[6] = (uint8_t)(c >> 8);
        p[7] = (uint8_t)c;
      }
    }
    lrec_view_t v;
    const char *why = NULL;
    int r = altar__local_rec_parse(buf + off, size - off, 1u << 20, &v, &why);
    if (r != LREC_OK) {
      if (r == LREC_CORRUPT && !why) abort(); /* corrupt always says why */
      break;
    }
    if (v.total_len < LREC_FRAME + LREC_BODY_MIN || v.total_len > size - off) abort();
    altar_msg_t *m = altar__local_rec_to_msg(&v, "fuzz", 0);
    if (m) {
      if (m->key_len != v.key_len || m->value_len != v.value_len || m->n_headers != v.n_headers) abort();
      for (size_t i = 0; i < m->n_headers; i++)
        if (!m->headers[i].name) abort();
      altar_msg_free(m);
    }
    off += v.total_len;
  }
  free(buf);
  return 0;
}
