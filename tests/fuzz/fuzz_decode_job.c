/* libFuzzer target: the decoders of the jobs topic (altar_decode_job and
 * altar_decode_control: a worker reads both there) on arbitrary bytes (see
 * fuzz_decode_common.h). */
#include "fuzz_target.h"
#include "fuzz_decode_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_decode_one(ALTAR_MSG_JOB, data, size);
  return fuzz_decode_one(ALTAR_MSG_CONTROL, data, size);
}
