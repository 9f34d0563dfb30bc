#!/bin/sh
# Builds with AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit tests.
set -eu
cd "$(dirname "$0")/.."
B="${1:-build-asan}"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug -DALTAR_SANITIZE=ON >/dev/null
cmake --build "$B" -j"$(nproc 2>/dev/null || echo 2)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$B" && ctest --output-on-failure -L unit
