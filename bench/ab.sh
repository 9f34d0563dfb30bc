#!/bin/sh
# A/B: builds two commits side by side (Release) and runs the same benchmarks
# on both, alternating A B A B ..., then prints each figure's median per side
# and the ratio B/A. Use it before calling a change to the worker,
# reconciler, ledger, codec or transports done, and quote its table.
#
# usage: bench/ab.sh BASE [HEAD] [ROUNDS]
#   BASE, HEAD   commits (HEAD defaults to the working tree, uncommitted
#                changes included: "WORK")
#   ROUNDS       alternations (default 3)
# environment:
#   ALTAR_AB_SUITE   space-separated: fleet fleet5 fleet_p4 fleet_kafka ledger rebuild
#                    (default "fleet fleet5 ledger rebuild"; fleet_kafka needs
#                    ALTAR_KAFKA_BROKERS, e.g. from scripts/services/kafka.sh start)
#   ALTAR_AB_SHARDS  shards per fleet run (default 3000)
#   ALTAR_AB_DIR     where builds are kept (default ~/.cache/altar/ab)
# Every benchmark is the working tree's own script or program source, run
# against each side's binaries, so both sides are measured the same way.
# The fleet benchmarks need only the `altar` binary; ledger and rebuild are
# each side's own bench programs (their output lines must still parse).
set -eu
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
BASE="${1:?usage: bench/ab.sh BASE [HEAD] [ROUNDS]}"
HEAD="${2:-WORK}"
ROUNDS="${3:-3}"
SUITE="${ALTAR_AB_SUITE:-fleet fleet5 ledger rebuild}"
SHARDS="${ALTAR_AB_SHARDS:-3000}"
ABDIR="${ALTAR_AB_DIR:-${ALTAR_CACHE:-$HOME/.cache/altar}/ab}"
JOBS="$(nproc 2>/dev/null || echo 2)"
mkdir -p "$ABDIR"

# build SIDE REF: prints the build directory. A commit is built once and kept
# (keyed by its hash); the working tree is copied and rebuilt each time.
build() {
  ref="$1"
  if [ "$ref" = WORK ]; then
    src="$ABDIR/src-work"
    rm -rf "$src"
    mkdir -p "$src"
    git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf - | tar xf - -C "$src"
    key=work
  else
    sha="$(git rev-parse --verify "$ref^{commit}")"
    key="$(echo "$sha" | cut -c1-12)"
    src="$ABDIR/src-$key"
    if [ ! -d "$src" ]; then
      mkdir -p "$src"
      git archive "$sha" | tar xf - -C "$src"
    fi
  fi
  out="$ABDIR/build-$key"
  if [ "$key" = work ] || [ ! -x "$out/altar" ]; then
    cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DALTAR_WERROR=OFF >/dev/null
    cmake --build "$out" -j"$JOBS" --target altar bench_ledger bench_rebuild >"$out.log" 2>&1 || {
      echo "ab: building $ref failed; see $out.log" >&2; tail -20 "$out.log" >&2; exit 1; }
  fi
  echo "$out"
}

echo "ab: building A=$BASE" >&2
A="$(build "$BASE")"
echo "ab: building B=$HEAD" >&2
B="$(build "$HEAD")"
label() { if [ "$1" = WORK ]; then echo "working tree"; else git log -1 --format='%h %cs' "$1"; fi; }
LA="$(label "$BASE")"
LB="$(label "$HEAD")"

results="$(mktemp "${TMPDIR:-/tmp}/altar-ab-XXXXXX")"
trap 'rm -f "$results"' EXIT

# run SIDE BUILD BENCH: appends "side bench metric value" lines to $results.
run() {
  side="$1" b="$2" what="$3"
  log="$ABDIR/last-$side-$what.log"
  case "$what" in
    fleet) sh bench/bench_fleet.sh "$b" "$SHARDS" >"$log" 2>&1 ;;
    fleet5) ALTAR_BENCH_WIDTH=5 sh bench/bench_fleet.sh "$b" "$SHARDS" >"$log" 2>&1 ;;
    fleet_p4) ALTAR_BENCH_PARTITIONS=4 sh bench/bench_fleet.sh "$b" "$SHARDS" >"$log" 2>&1 ;;
    fleet_kafka) ALTAR_BENCH_TRANSPORT=kafka sh bench/bench_fleet.sh "$b" "$SHARDS" >"$log" 2>&1 ;;
    ledger) "$b/bench/bench_ledger" >"$log" 2>&1 ;;
    rebuild) "$b/bench/bench_rebuild" >"$log" 2>&1 ;;
    *) echo "ab: unknown benchmark '$what'" >&2; exit 2 ;;
  esac || { echo "ab: $what on side $side failed; its output:" >&2; tail -20 "$log" >&2; exit 1; }
  case "$what" in
    fleet*)
      sed -n 's/^result //p' "$log" | tr ' ' '\n' | sed -n 's/^\(rate\|ratio\|p50_ms\|p99_ms\|seen_p50_ms\|seen_p99_ms\|worker_cpu_ms\|rec_cpu_ms\|idle_cpu_pct\|fleet_cpu_ms\|cpu_bound\)=/\1 /p' |
        while read -r k v; do echo "$side $what $k $v"; done >>"$results" ;;
    ledger)
      awk -v s="$side" '/^ledger apply with grouping/ {print s, "ledger", "events_s", $5}
                        /^same, by CPU time/ {print s, "ledger", "events_cpu_s", $10}' "$log" >>"$results" ;;
    rebuild)
      awk -v s="$side" '/rebuild into RocksDB/ {print s, "rebuild", "events_s", $7}' "$log" | head -1 >>"$results" ;;
  esac
}

i=1
while [ "$i" -le "$ROUNDS" ]; do
  for what in $SUITE; do
    # Alternate which side goes first, so drift in the machine's state
    # (page cache, a neighbour's load) falls on both.
    if [ $((i % 2)) -eq 1 ]; then
      run A "$A" "$what"; run B "$B" "$what"
    else
      run B "$B" "$what"; run A "$A" "$what"
    fi
    echo "ab: round $i/$ROUNDS: $what done" >&2
  done
  i=$((i + 1))
done

# Higher is better for rates and ratios, lower for latencies.
python3 - "$results" "$LA" "$LB" "$ROUNDS" <<'PY'
import statistics, sys
from collections import defaultdict
path, la, lb, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
v = defaultdict(list)
order = []
for line in open(path):
    side, bench, metric, value = line.split()
    key = (bench, metric)
    if key not in order:
        order.append(key)
    v[(side,) + key].append(float(value))
print(f"A = {la}\nB = {lb}\nmedian of {rounds} alternating runs per side; B/A > 1 is better unless marked (lower is better)")
print(f"{'benchmark':<12} {'figure':<14} {'A':>12} {'B':>12} {'B/A':>7}  spread A / B")
for bench, metric in order:
    a, b = v[("A", bench, metric)], v[("B", bench, metric)]
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    lower = metric.endswith("_ms") or metric.endswith("_pct")  # latencies and CPU
    ratio = mb / ma if ma else float("nan")
    spread = lambda xs: f"{min(xs):.4g}-{max(xs):.4g}"
    print(f"{bench:<12} {metric:<14} {ma:12.4g} {mb:12.4g} {ratio:7.3f}{' (lower is better)' if lower else ''}  {spread(a)} / {spread(b)}")
PY
