/* libFuzzer target: job messages through the worker's intake (see fuzz_intake_body.h). */
#include "fuzz_target.h"
#include "fuzz_intake_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_intake_one(data, size); }
