/* libFuzzer target: altar_decode_spec on arbitrary bytes (see
 * fuzz_decode_common.h), and the outputs-only fast path against it: it
 * accepts exactly the valid specs in our encoder's own form, and then gives
 * the same outputs, leaving nothing in its arena when it declines. */
#include "fuzz_target.h"
#include "fuzz_decode_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_str(const char *x, const char *y) { return x == y || (x && y && !strcmp(x, y)); }

static void outputs_agree(const uint8_t *data, size_t size) {
  altar_arena_t a = {0};
  altar_transfer_t *o;
  size_t n;
  bool fast = altar_decode_spec_outputs_canonical(data, size, &a, &o, &n) == 0;
  if (!fast && (o || n || altar_arena_mark(&a).head)) abort();
  altar_spec_t s;
  altar_error_t err = {0};
  bool full = altar_decode_spec(data, size, &s, &err) == 0;
  altar_buf_t enc = {0};
  bool own = full && altar_encode_spec(&s, &enc, &err) == 0 && enc.len == size && !memcmp(enc.data, data, size);
  if (fast != own) abort();
  if (fast) {
    if (n != s.n_outputs) abort();
    for (size_t i = 0; i < n; i++)
      if (!same_str(o[i].uri, s.outputs[i].uri) || !same_str(o[i].logical_path, s.outputs[i].logical_path) ||
          !same_str(o[i].digest, s.outputs[i].digest) || !same_str(o[i].locality_key, s.outputs[i].locality_key))
        abort();
  }
  altar_buf_free(&enc);
  altar_spec_clear(&s);
  altar_arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  outputs_agree(data, size);
  return fuzz_decode_one(ALTAR_MSG_SPEC, data, size);
}
