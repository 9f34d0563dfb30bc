#!/bin/sh
# Builds the libFuzzer targets with clang and runs each for a short while.
set -eu
cd "$(dirname "$0")/.."
B=build-fuzz
SECS="${FUZZ_SECONDS:-20}"
CC=clang cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Debug -DALTAR_FUZZ=ON -DALTAR_SANITIZE=ON >/dev/null
targets=""
for src in tests/fuzz/fuzz_*.c; do targets="$targets --target $(basename "$src" .c)"; done
# shellcheck disable=SC2086
cmake --build "$B" -j"$(nproc 2>/dev/null || echo 2)" $targets
found=0
for t in "$B"/tests/fuzz_*; do
  [ -x "$t" ] || continue
  found=1
  name="$(basename "$t")"
  corpus="tests/fuzz/corpus/${name#fuzz_}"
  work="$B/corpus-$name"
  mkdir -p "$work"
  echo "fuzz: $name for ${SECS}s"
  if [ -d "$corpus" ]; then
    "$t" -max_total_time="$SECS" -max_len=65536 -print_final_stats=0 "$work" "$corpus" 2>"$B/$name.log" || { tail -40 "$B/$name.log"; exit 1; }
  else
    "$t" -max_total_time="$SECS" -max_len=65536 "$work" 2>"$B/$name.log" || { tail -40 "$B/$name.log"; exit 1; }
  fi
done
[ "$found" = 1 ] || echo "fuzz: no targets built"
