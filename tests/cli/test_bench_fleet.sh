#!/bin/sh
# bench/bench_fleet.sh (which bench/ab.sh runs on two builds) still works on
# this build: a small run in one-shard and five-shard groups ends with its
# machine-readable result line, every latency group fired. No timing is
# asserted; the figures belong to bench/ab.sh.
set -eu
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(dirname "$ALTAR_BIN")"
out="$(mktemp "${TMPDIR:-/tmp}/altar-bench-smoke-XXXXXX")"
trap 'rm -f "$out"' EXIT
for width in 1 5; do
  ALTAR_BENCH_WIDTH=$width ALTAR_BENCH_LAT=10 sh "$here/bench/bench_fleet.sh" "$build" 40 >"$out" 2>&1 || {
    cat "$out"; echo "FAIL: bench_fleet.sh (groups of $width) exited non-zero"; exit 1; }
  grep -q "^shards: 40 in groups of $width," "$out" || { cat "$out"; echo "FAIL: no summary for groups of $width"; exit 1; }
  line="$(grep '^result ' "$out")" || { cat "$out"; echo "FAIL: no result line"; exit 1; }
  for key in rate xargs xargs_before xargs_after ratio p50_ms p99_ms worker_cpu_ms rec_cpu_ms idle_cpu_pct fleet_cpu_ms cpu_bound; do
    echo "$line" | grep -Eq " $key=[0-9]+(\.[0-9]+)?( |\$)" || { echo "$line"; echo "FAIL: result has no $key"; exit 1; }
  done
  echo "groups of $width: $line"
done
echo "bench_fleet smoke: ok"
