/* The entry point libFuzzer calls, declared once for every fuzz target (the
 * build warns about an extern defined without a prior declaration). */
#ifndef ALTAR_FUZZ_TARGET_H
#define ALTAR_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
