/* libFuzzer target: altar_decode_group on arbitrary bytes (see fuzz_decode_common.h). */
#include "fuzz_target.h"
#include "fuzz_decode_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_decode_one(ALTAR_MSG_GROUP, data, size); }
