/* libFuzzer target: the JSON bridge on arbitrary text. The first byte picks
 * the message type; the rest is the JSON. Whatever decodes must encode to
 * msgpack that the msgpack decoder accepts and that converts back to the
 * same bytes (see fuzz_decode_common.h). */
#include "fuzz_target.h"
#include "fuzz_decode_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  altar_msg_type_t t = (altar_msg_type_t)(data[0] % 5);
  altar_buf_t mp = {0};
  altar_error_t err = {0};
  int rc = altar_codec_json_to_msgpack(t, (const char *)data + 1, size - 1, &mp, &err);
  if (rc) {
    if (rc != ALTAR_EDECODE && rc != ALTAR_ETOOBIG) abort();
    if (!err.msg[0]) abort();
  } else {
    fuzz_decode_one(t, mp.data, mp.len);
    fuzz_msg_t m;
    if (fuzz_decode(t, mp.data, mp.len, &m, &err)) abort();
    fuzz_clear(t, &m);
  }
  altar_buf_free(&mp);
  return 0;
}
