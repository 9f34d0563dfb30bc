/* libFuzzer target: altar_decode_status on arbitrary bytes (see
 * fuzz_decode_common.h), and its canonical fast path against it: the fast
 * path accepts exactly the valid messages in our encoder's own form, and
 * then gives the same event and spec bytes; with ALTAR_DECODE_SPEC_BYTES it
 * accepts the same messages and gives the same event without the spec
 * struct (same spec and fixed bytes). */
#include "fuzz_target.h"
#include "fuzz_decode_common.h"
#include "core/codec_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_bytes(const void *x, size_t xlen, const void *y, size_t ylen) {
  return xlen == ylen && (!xlen || !memcmp(x, y, xlen));
}
static bool same_enc(const altar_spec_enc_t *x, const altar_spec_enc_t *y) {
  return same_bytes(altar_spec_enc_data(x), altar_spec_enc_len(x), altar_spec_enc_data(y), altar_spec_enc_len(y));
}
static bool same_fixed(const altar_record_fixed_t *x, const altar_record_fixed_t *y) {
  return same_bytes(altar_record_fixed_data(x), altar_record_fixed_len(x), altar_record_fixed_data(y),
                    altar_record_fixed_len(y));
}

/* The spec kept as bytes only, against f (the event without the flag). */
static void spec_bytes_agrees(const uint8_t *data, size_t size, bool fast, const altar_status_event_t *f) {
  altar_arena_t a = {0};
  altar_status_event_t d;
  bool dry = altar_decode_status_canonical(data, size, &a, ALTAR_DECODE_SPEC_BYTES, &d) == 0;
  if (dry != fast || d.spec) abort();
  if (dry) {
    altar_status_event_t with = d;
    with.spec = f->spec;
    if (!same_enc(&d.spec_enc, &f->spec_enc) || !same_fixed(&d.record_fixed, &f->record_fixed) ||
        (f->spec != NULL) != (altar_spec_enc_len(&d.spec_enc) > 0) || !altar_status_event_equal(&with, f))
      abort();
  }
  altar_arena_free(&a);
}

static void fast_path_agrees(const uint8_t *data, size_t size) {
  altar_arena_t a = {0};
  altar_status_event_t f, s;
  altar_error_t err = {0};
  bool fast = altar_decode_status_canonical(data, size, &a, 0, &f) == 0;
  spec_bytes_agrees(data, size, fast, &f);
  bool full = altar_decode_status(data, size, &s, &err) == 0;
  altar_buf_t enc = {0};
  bool own = full && altar_encode_status(&s, &enc, &err) == 0 && enc.len == size && !memcmp(enc.data, data, size);
  if (fast != own) abort();
  if (fast) {
    if (!altar_status_event_equal(&f, &s) || !same_enc(&f.spec_enc, &s.spec_enc)) abort();
    altar_buf_reset(&enc);
    if (altar_encode_status(&f, &enc, &err) || enc.len != size || memcmp(enc.data, data, size)) abort();
    altar_record_t rec = {.handle = f.handle, .kind = f.kind}; /* its handle and kind: a record's fixed part */
    altar_buf_reset(&enc);
    if (altar__encode_record_fixed(&rec, &enc, &err) || enc.len != altar_record_fixed_len(&f.record_fixed) ||
        memcmp(enc.data, altar_record_fixed_data(&f.record_fixed), enc.len))
      abort();
  }
  altar_buf_free(&enc);
  altar_status_event_clear(&s);
  altar_arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fast_path_agrees(data, size);
  return fuzz_decode_one(ALTAR_MSG_STATUS, data, size);
}
