#!/bin/sh
# Runs every benchmark; each prints its own baseline and ratio.
set -eu
cd "$(dirname "$0")/.."
B="${1:-build}"
for b in "$B"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
for s in bench/bench_*.sh; do
  [ -x "$s" ] || continue
  echo "== $(basename "$s")"
  "$s" "$B"
done
