#!/bin/sh
# Jobs go to free slots (#34), measured on 3 workers of 4 slots each (the
# process backend, one data root, `sleep` tasks), on the local log or Kafka:
#
# 1. Start latency behind a full worker: w1 runs 4 long tasks (all its
#    slots); w2 and w3 join, idle; then rounds of quick shards are submitted
#    (about a third of them land on w1's partitions and must be forwarded).
#    Printed: p50/p99 of start - submitted_at over all quick shards and over
#    the forwarded ones.
# 2. A mixed stream of long and short tasks, submitted in waves, on the same
#    3 workers, with forwarding (the default) and then without
#    (`--forward-ms 0`). The baseline is an ideal central queue with the
#    same 12 slots: the same tasks, in submission order, each started at
#    max(its submission, the earliest free slot) and running for the
#    duration it actually ran in this run. Printed: ideal makespan / actual
#    makespan (1.00 = as good as the central queue; the aim is >= 0.90).
#
# usage: bench/bench_forward.sh [BUILD_DIR]
# environment:
#   ALTAR_BENCH_TRANSPORT  local (default) or kafka (ALTAR_KAFKA_BROKERS)
#   ALTAR_BENCH_SEED       the mixed stream's order (default 1)
# The last line is machine-readable:
#   result p50_ms= p99_ms= fwd_p50_ms= fwd_p99_ms= mixed=<ideal/actual> mixed_off=<same, no forwarding>
set -eu
B="${1:-build}"
T="${ALTAR_BENCH_TRANSPORT:-local}"
SEED="${ALTAR_BENCH_SEED:-1}"
ALTAR="$(cd "$B" && pwd)/altar"
HERE="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-forward-XXXXXX")"
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null || true; done; rm -rf "$dir"' EXIT
LONG_S=30       # the long tasks that fill w1 in part 1
ROUNDS=12       # part 1: rounds of quick shards, one a second
ROUND_N=6
MIX_WAVES=6     # part 2: waves of the mixed stream, one every 2 s
MIX_LONG=6      # per wave: long tasks (3 s) and short ones (0.3 s)
MIX_SHORT=24

case "$T" in
  local) transport="{name: local, dir: $dir/log}" ;;
  kafka)
    : "${ALTAR_KAFKA_BROKERS:?kafka needs ALTAR_KAFKA_BROKERS (scripts/services/kafka.sh start)}"
    transport="{name: kafka, kafka: {bootstrap.servers: \"$ALTAR_KAFKA_BROKERS\"}}" ;;
  *) echo "bench_forward: ALTAR_BENCH_TRANSPORT must be local or kafka, not '$T'" >&2; exit 2 ;;
esac
p="bfw$(date +%s)$$"
mkdir -p "$dir/data"
cat > "$dir/altar.yaml" <<YAML
transport: $transport
topics: {jobs: $p.jobs, status: $p.status, ready: $p.ready, dead: $p.dead, dlq: $p.dlq, fleet: $p.fleet}
backend: {name: process, data_root: $dir/data, slots: 4}
ledger: {path: $dir/ledger}
groups:
  shard: {group_by: [job_id, name], ready_when: single, on_failed: dead_letter}
YAML
cfg="--config $dir/altar.yaml"
groups=""
[ "$T" = kafka ] && groups="--group $p.w"

# A shard appends "start NAME TIME" and "end NAME TIME" to runs.log.
specs() { # specs PREFIX N SECONDS [PREFIX N SECONDS ...] on stdout, shuffled by SEED
  python3 - "$dir/data" "$SEED" "$@" <<'PY'
import json, random, sys
d, seed, args = sys.argv[1], sys.argv[2], sys.argv[3:]
script = 'echo "start $0 $(date +%s.%N)" >> "$1/runs.log"; sleep "$2"; echo "end $0 $(date +%s.%N)" >> "$1/runs.log"'
out = []
for i in range(0, len(args), 3):
    prefix, n, secs = args[i], int(args[i + 1]), args[i + 2]
    out += [{"kind": "shard", "image": "none", "command": ["/bin/sh", "-c", script, f"{prefix}-{k}", d, secs],
             "labels": {"name": f"{prefix}-{k}"}, "timeout_s": 600} for k in range(n)]
random.Random(f"{seed}/{args[0]}").shuffle(out)
for s in out:
    print(json.dumps(s))
PY
}
count() { if [ -f "$dir/data/runs.log" ]; then grep -c "^$1 $2" "$dir/data/runs.log" || true; else echo 0; fi; }
wait_until() { # wait_until SECONDS COMMAND...: until COMMAND succeeds
  s="$1"; shift
  deadline=$(( $(date +%s) + s ))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "bench_forward: timed out: $*" >&2; tail -n 5 "$dir"/*.log >&2; exit 1; }
    sleep 0.2
  done
}
at_least() { [ "$(count "$1" "$2")" -ge "$3" ]; }
settled() { [ "$(python3 "$HERE/util/owned_partitions.py" --settled 32 "$dir" "$p.jobs" w1 w2 w3)" = 1 ]; }
start_worker() { # start_worker ID [ARGS]
  id="$1"; shift
  "$ALTAR" worker $cfg $groups --id "$id" --drain 60 "$@" >>"$dir/worker-$id.log" 2>&1 &
  pids="$pids $!"
  eval "pid_$id=\$!"
}
stop_workers() {
  kill -TERM $pid_w1 $pid_w2 $pid_w3 2>/dev/null || true
  wait $pid_w1 $pid_w2 $pid_w3 2>/dev/null || true
}

"$ALTAR" reconciler $cfg ${groups:+--group $p.rec} --quiet >"$dir/rec.log" 2>&1 & pids="$pids $!"

# ---- 1. quick shards behind a full worker ----
start_worker w1
specs long 4 "$LONG_S" > "$dir/long.jsonl"
"$ALTAR" submit $cfg "$dir/long.jsonl" >/dev/null 2>&1
wait_until 60 at_least start long 4
start_worker w2
start_worker w3
wait_until 90 settled
r=0
while [ $r -lt $ROUNDS ]; do
  specs "quick$r" $ROUND_N 0.3 > "$dir/quick.jsonl"
  "$ALTAR" submit $cfg "$dir/quick.jsonl" >/dev/null 2>&1
  sleep 1
  r=$((r + 1))
done
wait_until 60 at_least end quick $((ROUNDS * ROUND_N))
[ "$(count end long)" -eq 0 ] || echo "bench_forward: note: a long task ended before the last quick shard; w1 was not full throughout" >&2
wait_until $((LONG_S + 60)) at_least end long 4

# ---- 2. the mixed stream, with forwarding and without ----
mixed() { # mixed TAG
  w=0
  while [ $w -lt $MIX_WAVES ]; do
    specs "$1-w$w-long" $MIX_LONG 3 "$1-w$w-short" $MIX_SHORT 0.3 > "$dir/mix.jsonl"
    "$ALTAR" submit $cfg "$dir/mix.jsonl" >/dev/null 2>&1
    sleep 2
    w=$((w + 1))
  done
  wait_until 120 at_least end "$1-" $((MIX_WAVES * (MIX_LONG + MIX_SHORT)))
}
mixed fwd
stop_workers
for w in w1 w2 w3; do echo "--- restarted without forwarding" >> "$dir/worker-$w.log"; done
# Partition ownership is read from the logs: start them afresh.
for w in w1 w2 w3; do mv "$dir/worker-$w.log" "$dir/worker-$w.log.1"; done
start_worker w1 --forward-ms 0
start_worker w2 --forward-ms 0
start_worker w3 --forward-ms 0
wait_until 90 settled
mixed off
stop_workers

"$ALTAR" log consume $cfg --topic "$p.jobs" --from-beginning --exit --headers > "$dir/jobs.txt" 2>/dev/null
python3 - "$dir" "$T" <<'PY'
import json, sys
d, transport = sys.argv[1], sys.argv[2]
start, end = {}, {}
for line in open(f"{d}/data/runs.log"):
    kind, name, t = line.split()
    (start if kind == "start" else end).setdefault(name, float(t))
sub, forwarded = {}, set()
for line in open(f"{d}/jobs.txt"):
    hdr, tab, body = line.rstrip("\n").partition("\t")
    try:
        j = json.loads(body) if tab else json.loads(hdr)
        h = json.loads(hdr) if tab else {}
    except ValueError:
        continue
    if j.get("type") != "job":
        continue
    name = j["spec"]["labels"]["name"]
    if "altar.forwarded.from" in h:
        forwarded.add(name)
    else:
        sub[name] = (j["submitted_at"], len(sub))
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")
quick = [n for n in sub if n.startswith("quick")]
lat = [start[n] - sub[n][0] for n in quick]
flat = [start[n] - sub[n][0] for n in quick if n in forwarded]
def ratio(tag):
    names = sorted((n for n in sub if n.startswith(tag + "-")), key=lambda n: sub[n])
    t0 = min(sub[n][0] for n in names)
    free = [t0] * 12
    for n in names:  # FIFO on 12 slots, each task as long as it really ran
        k = min(range(12), key=free.__getitem__)
        free[k] = max(free[k], sub[n][0]) + (end[n] - start[n])
    ideal = max(free) - t0
    actual = max(end[n] for n in names) - t0
    return ideal, actual, sum(1 for n in names if n in forwarded)
i1, a1, f1 = ratio("fwd")
i0, a0, f0 = ratio("off")
print(f"3 workers x 4 slots, process backend, {transport} log")
print(f"quick shards behind a full worker: {len(lat)} shards, start after submission p50 {pct(lat, .5):.0f} ms, "
      f"p99 {pct(lat, .99):.0f} ms; the {len(flat)} forwarded: p50 {pct(flat, .5):.0f} ms, p99 {pct(flat, .99):.0f} ms")
print(f"mixed stream, forwarding on:  actual {a1:.2f} s, ideal central queue {i1:.2f} s, ratio {i1 / a1:.3f} ({f1} forwarded)")
print(f"mixed stream, forwarding off: actual {a0:.2f} s, ideal central queue {i0:.2f} s, ratio {i0 / a0:.3f}")
print(f"result p50_ms={pct(lat, .5):.1f} p99_ms={pct(lat, .99):.1f} fwd_p50_ms={pct(flat, .5):.1f} "
      f"fwd_p99_ms={pct(flat, .99):.1f} mixed={i1 / a1:.3f} mixed_off={i0 / a0:.3f}")
PY
