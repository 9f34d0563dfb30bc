#!/bin/sh
# End to end on one machine: the process backend running /bin/true in 4 slots,
# shards/s from submit to the last group fired, against `xargs -P 4` running
# the same commands in the same run; and the added latency from a shard's exit
# to its group event (p50, p99).
# usage: bench/bench_fleet.sh [BUILD_DIR] [SHARDS]
set -eu
B="${1:-build}"
N="${2:-3000}"
ALTAR="$(cd "$B" && pwd)/altar"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-fleet-XXXXXX")"
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null || true; done; rm -rf "$dir"' EXIT

cat > "$dir/altar.yaml" <<YAML
transport: {name: local, dir: $dir/log}
backend: {name: process, data_root: $dir/data, slots: 4}
ledger: {path: $dir/ledger}
groups:
  one: {group_by: [job_id, shard], ready_when: single, on_failed: dead_letter}
  lat: {group_by: [job_id, shard], ready_when: single, on_failed: dead_letter}
YAML
cfg="--config $dir/altar.yaml"

# Baseline: xargs -P 4 running /bin/true N times.
t0=$(date +%s.%N)
seq "$N" | xargs -P 4 -n 1 sh -c 'exec /bin/true' >/dev/null
t1=$(date +%s.%N)
xargs_rate=$(python3 -c "print($N/($t1-$t0))")

# The fleet: a reconciler and one worker with 4 slots; time from submit until every group fired.
python3 -c "
import json
for i in range($N):
    print(json.dumps({'kind':'one','image':'none','command':['/bin/true'],'labels':{'shard':str(i)}}))
" > "$dir/specs.jsonl"
"$ALTAR" reconciler $cfg --quiet >"$dir/rec.log" 2>&1 & pids="$pids $!"
"$ALTAR" worker $cfg --quiet --poll-ms 5 >"$dir/w.log" 2>&1 & pids="$pids $!"
sleep 1
t0=$(date +%s.%N)
"$ALTAR" submit $cfg --wait "$dir/specs.jsonl" >/dev/null 2>"$dir/submit.log"
t1=$(date +%s.%N)
fleet_rate=$(python3 -c "print($N/($t1-$t0))")

# Latency: shards that record their exit time; group event ts minus that.
M=200
python3 -c "
import json
for i in range($M):
    print(json.dumps({'kind':'lat','image':'none','command':['/bin/sh','-c','date +%s.%N > \"\$0\"', '$dir/exit-%d' % i],'labels':{'shard':str(i)}}))
" > "$dir/lat.jsonl"
"$ALTAR" submit $cfg --wait "$dir/lat.jsonl" >"$dir/lat.job" 2>/dev/null
"$ALTAR" log consume $cfg --topic altar.ready --from-beginning --exit > "$dir/ready.jsonl" 2>/dev/null
python3 - "$dir" "$M" "$N" "$fleet_rate" "$xargs_rate" <<'PY'
import json, sys
d, m, n, fleet, xargs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lat = []
for line in open(f"{d}/ready.jsonl"):
    e = json.loads(line)
    if e.get("kind") != "lat":
        continue
    shard = e["shards"][0]["labels"]["shard"]
    with open(f"{d}/exit-{shard}") as f:
        lat.append(e["ts"] - float(f.read()))
lat.sort()
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
print(f"shards: {n}, /bin/true, 4 slots")
print(f"xargs -P 4:           {xargs:8.1f} commands/s")
print(f"altar submit->fired:  {fleet:8.1f} shards/s")
print(f"ratio altar/xargs:    {fleet / xargs:8.2f}")
print(f"exit -> group event latency over {len(lat)} shards: p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms")
PY
