#!/bin/sh
# End to end on one machine: the process backend running /bin/true in 4 slots,
# shards/s from submit to the last group fired, against `xargs -P 4` running
# the same commands in the same run (once before the fleet, once after); and the added latency from a shard's exit
# to its group event (p50, p99).
#
# usage: bench/bench_fleet.sh [BUILD_DIR] [SHARDS]
# environment:
#   ALTAR_BENCH_WIDTH N        shards per group (default 1: one-shard groups;
#                              N > 1: {all_folds: N} groups, SHARDS rounded down)
#   ALTAR_BENCH_TRANSPORT T    local (default) or kafka (the broker at
#                              ALTAR_KAFKA_BROKERS; fresh topics and groups per run)
#   ALTAR_BENCH_PARTITIONS N   topics.partitions (default: the fleet's default)
#   ALTAR_BENCH_LAT_SAMPLES F  append each latency sample (ms, exit -> group event) to
#                              file F, a line each (bench/ab.sh pools them across rounds)
#   ALTAR_BENCH_WORKER_ARGS A  extra flags for `altar worker` (e.g. --commit-ms 60000)
#   ALTAR_BENCH_LAT N          shards in the latency pass (default 1000: with 200,
#                              p99 was the second-largest sample, 4.9-10.6 ms in
#                              four runs of one build; with 1000 it is the tenth)
# The last line is machine-readable (bench/ab.sh reads it):
#   result rate=<shards/s> xargs=<commands/s, both runs> xargs_before= xargs_after=
#          ratio=<rate/xargs> p50_ms=<> p99_ms=<>
#          seen_p50_ms= seen_p99_ms=<exit -> the group event read from the ready topic>
#          worker_cpu_ms= rec_cpu_ms= idle_cpu_pct= fleet_cpu_ms=<all of the fleet's
#          CPU per shard, tasks included> cpu_bound=<xargs's CPU per command / fleet_cpu_ms>
set -eu
B="${1:-build}"
N="${2:-3000}"
W="${ALTAR_BENCH_WIDTH:-1}"
T="${ALTAR_BENCH_TRANSPORT:-local}"
M="${ALTAR_BENCH_LAT:-1000}"
N=$((N / W * W))
ALTAR="$(cd "$B" && pwd)/altar"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-fleet-XXXXXX")"
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null || true; done; rm -rf "$dir"' EXIT

case "$T" in
  local) transport="{name: local, dir: $dir/log}" ;;
  kafka)
    : "${ALTAR_KAFKA_BROKERS:?kafka needs ALTAR_KAFKA_BROKERS (scripts/services/kafka.sh start)}"
    transport="{name: kafka, kafka: {bootstrap.servers: \"$ALTAR_KAFKA_BROKERS\"}}" ;;
  *) echo "bench_fleet: ALTAR_BENCH_TRANSPORT must be local or kafka, not '$T'" >&2; exit 2 ;;
esac
# The local log is fresh per run; on Kafka, fresh topic and group names per
# run keep an earlier run's records and members away. (Only the keys needed
# are written, so older builds read the same file: bench/ab.sh.)
p=altar
topics=""
groups=""
if [ "$T" = kafka ]; then
  p="bf$(date +%s)$$"
  topics="jobs: $p.jobs, status: $p.status, ready: $p.ready, dead: $p.dead, dlq: $p.dlq, fleet: $p.fleet"
fi
if [ -n "${ALTAR_BENCH_PARTITIONS:-}" ]; then
  topics="${topics:+$topics, }partitions: $ALTAR_BENCH_PARTITIONS"
fi
if [ "$W" -gt 1 ]; then
  rule="{all_folds: $W}"
else
  rule="single"
fi
topics_line=""
[ -n "$topics" ] && topics_line="topics: {$topics}"
cat > "$dir/altar.yaml" <<YAML
transport: $transport
$topics_line
backend: {name: process, data_root: $dir/data, slots: 4}
ledger: {path: $dir/ledger}
groups:
  one: {group_by: [job_id, g], ready_when: $rule, on_failed: dead_letter}
  lat: {group_by: [job_id, g], ready_when: single, on_failed: dead_letter}
YAML
cfg="--config $dir/altar.yaml"

# Baseline: xargs -P 4 running /bin/true N times; its CPU (xargs and every
# command it ran) per command too. Run once before the fleet and once right
# after it, and counted together: on this machine xargs alone went from
# 1,140 to 1,470 commands/s between runs minutes apart, which a single run
# put wholly on the ratio.
xargs_run() { # xargs_run NAME: seconds taken; CPU in $dir/NAME.cpu
  x0=$(date +%s.%N)
  /usr/bin/time -o "$dir/$1.cpu" -f "%U %S" sh -c "seq $N | xargs -P 4 -n 1 sh -c 'exec /bin/true'" >/dev/null
  x1=$(date +%s.%N)
  python3 -c "print($x1 - $x0)"
}
xargs_s1=$(xargs_run xargs1)

# The fleet: a reconciler and one worker with 4 slots; time from submit until every group fired.
python3 -c "
import json
for i in range($N):
    print(json.dumps({'kind':'one','image':'none','command':['/bin/true'],
                      'labels':{'g':str(i // $W),'fold':str(i % $W)}}))
" > "$dir/specs.jsonl"
[ "$T" = kafka ] && groups=1
"$ALTAR" reconciler $cfg ${groups:+--group $p.rec} --quiet >"$dir/rec.log" 2>&1 & rpid=$!
"$ALTAR" worker $cfg ${groups:+--group $p.w} --quiet --poll-ms 5 ${ALTAR_BENCH_WORKER_ARGS:-} >"$dir/w.log" 2>&1 & wpid=$!
pids="$rpid $wpid"
# CPU time (user + system, clock ticks) a daemon has used so far: the cost
# per shard, which a loaded machine changes far less than the rate.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The same with its reaped children: for the worker, every task's supervisor
# and, reaped by it, the task itself.
ticks_all() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
# ticks_all of the worker and of every descendant not yet reaped: a
# long-lived parent of supervisors (backends/process_zygote.c) reaps them
# itself, and a supervisor it keeps for one task after another reaps its
# tasks, so their CPU reaches the worker only when they exit.
ticks_tree() {
  [ -r "/proc/$1/task/$1/children" ] ||
    echo "bench_fleet: no /proc/$1/task/$1/children here: CPU of the worker's unreaped children is not counted" >&2
  t=$(ticks_all "$1")
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    t=$((t + $(ticks_tree "$c" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# Started means: both have their partitions (a warm-up group fired end to end).
echo '{"kind":"lat","image":"none","command":["/bin/true"],"labels":{"g":"warm"}}' > "$dir/warm.jsonl"
"$ALTAR" submit $cfg --wait "$dir/warm.jsonl" >/dev/null 2>"$dir/warm.log" || {
  echo "bench_fleet: the warm-up job did not finish" >&2; cat "$dir/warm.log" "$dir/rec.log" "$dir/w.log" >&2; exit 1; }
w0=$(ticks $wpid) r0=$(ticks $rpid) a0=$(ticks_tree $wpid)
t0=$(date +%s.%N)
/usr/bin/time -o "$dir/submit.cpu" -f "%U %S" "$ALTAR" submit $cfg --wait "$dir/specs.jsonl" >/dev/null 2>"$dir/submit.log"
t1=$(date +%s.%N)
w1=$(ticks $wpid) r1=$(ticks $rpid) a1=$(ticks_tree $wpid)
xargs_s2=$(xargs_run xargs2)
xargs_rate=$(python3 -c "print(2 * $N / ($xargs_s1 + $xargs_s2))")
xargs_each=$(python3 -c "print('%.1f %.1f' % ($N / $xargs_s1, $N / $xargs_s2))")
hz=$(getconf CLK_TCK)
fleet_rate=$(python3 -c "print($N/($t1-$t0))")
cpu=$(python3 -c "print('%.4f %.4f' % (($w1-$w0)*1000/$hz/$N, ($r1-$r0)*1000/$hz/$N))")
# Whole-fleet CPU per shard (worker with its tasks, reconciler, the submit
# client) against xargs's per command: on a machine whose cores are all
# busy, their ratio bounds the rate ratio.
cpu_all=$(python3 -c "
su, ss = open('$dir/submit.cpu').read().split()[-2:]
x = sum(float(v) for f in ('xargs1', 'xargs2') for v in open('$dir/%s.cpu' % f).read().split()[-2:])
print('%.4f %.4f' % ((($a1-$a0) + ($r1-$r0)) * 1000 / $hz / $N + (float(su) + float(ss)) * 1000 / $N,
                     x * 1000 / (2 * $N)))")

# Latency: shards that record their exit time; group event ts minus that
# (the event's ts is its last member's status event's, so this hop ends at
# the worker), and the time a consumer following the ready topic read the
# group event minus that (the whole path: worker, log, reconciler, log).
# The follower reads the groups already fired first and says when it has.
python3 -u - "$ALTAR" "$dir/altar.yaml" "$p.ready" $((N / W + 1)) "$M" "$dir/seen.ready" > "$dir/ready-seen.tsv" 2>/dev/null <<'PY' &
import subprocess, sys, time
altar, cfg, topic, prior, m, flag = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
p = subprocess.Popen([altar, "log", "consume", "--config", cfg, "--topic", topic, "--from-beginning"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
seen = lat = 0
for line in p.stdout:
    now = time.time()
    seen += 1
    if seen == prior:
        open(flag, "w").close()
    if seen > prior and '"kind":"lat"' in line:
        print("%.6f\t%s" % (now, line), end="")
        lat += 1
        if lat >= m:
            break
p.terminate()
p.wait()
PY
follower=$!
pids="$pids $follower"
i=0
while [ ! -e "$dir/seen.ready" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$dir/seen.ready" ] || { echo "bench_fleet: the ready-topic follower did not catch up" >&2; exit 1; }
python3 -c "
import json
for i in range($M):
    print(json.dumps({'kind':'lat','image':'none','command':['/bin/sh','-c','date +%s.%N > \"\$0\"', '$dir/exit-%d' % i],'labels':{'g':str(i)}}))
" > "$dir/lat.jsonl"
"$ALTAR" submit $cfg --wait "$dir/lat.jsonl" >"$dir/lat.job" 2>/dev/null
i=0
while kill -0 "$follower" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"$ALTAR" log consume $cfg --topic "$p.ready" --from-beginning --exit > "$dir/ready.jsonl" 2>/dev/null
# Idle cost: CPU of both daemons over 5 s with nothing to do (many idle
# partitions must cost nothing).
iw0=$(ticks $wpid) ir0=$(ticks $rpid)
sleep 5
iw1=$(ticks $wpid) ir1=$(ticks $rpid)
cpu="$cpu $(python3 -c "print('%.3f' % ((($iw1-$iw0)+($ir1-$ir0))*100/$hz/5))")"
python3 - "$dir" "$M" "$N" "$fleet_rate" "$xargs_rate" "$W" "$T" $cpu $cpu_all $xargs_each <<'PY'
import json, os, sys
d, m, n, fleet, xargs, w, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
wcpu, rcpu, idle = float(sys.argv[8]), float(sys.argv[9]), float(sys.argv[10])
all_cpu, xargs_cpu = float(sys.argv[11]), float(sys.argv[12])
xargs_before, xargs_after = float(sys.argv[13]), float(sys.argv[14])
lat = []
for line in open(f"{d}/ready.jsonl"):
    e = json.loads(line)
    if e.get("kind") != "lat":
        continue
    shard = e["shards"][0]["labels"]["g"]
    if not os.path.exists(f"{d}/exit-{shard}"):
        continue
    with open(f"{d}/exit-{shard}") as f:
        lat.append(e["ts"] - float(f.read()))
if len(lat) != m:
    sys.exit(f"bench_fleet: {len(lat)} of {m} latency groups fired")
lat.sort()
if os.environ.get("ALTAR_BENCH_LAT_SAMPLES"):
    with open(os.environ["ALTAR_BENCH_LAT_SAMPLES"], "a") as f:
        f.write("".join("%.3f\n" % (x * 1000) for x in lat))
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
seen = []
for line in open(f"{d}/ready-seen.tsv"):
    at, _, js = line.partition("\t")
    e = json.loads(js)
    shard = e["shards"][0]["labels"]["g"]
    with open(f"{d}/exit-{shard}") as f:
        seen.append(float(at) - float(f.read()))
if len(seen) != m:
    sys.exit(f"bench_fleet: the follower read {len(seen)} of {m} latency groups")
seen.sort()
ps = lambda q: seen[min(len(seen) - 1, int(q * len(seen)))] * 1000
print(f"shards: {n} in groups of {w}, /bin/true, 4 slots, {t} log")
print(f"xargs -P 4:           {xargs:8.1f} commands/s (before the fleet {xargs_before:.1f}, after it {xargs_after:.1f})")
print(f"altar submit->fired:  {fleet:8.1f} shards/s")
print(f"ratio altar/xargs:    {fleet / xargs:8.2f}")
print(f"exit -> group event latency over {len(lat)} shards: p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms")
print(f"exit -> group event read by a consumer of the ready topic: p50 {ps(0.5):.1f} ms, p99 {ps(0.99):.1f} ms")
print(f"CPU per shard:        worker {wcpu:.3f} ms, reconciler {rcpu:.3f} ms")
print(f"CPU when idle:        {idle:.2f}% of a core (worker + reconciler)")
print(f"CPU per shard, all:   {all_cpu:.3f} ms (worker and its tasks, reconciler, submit) vs xargs {xargs_cpu:.3f} ms"
      f" per command: the rate ratio is at most {xargs_cpu / all_cpu:.2f} on busy cores")
print(f"result rate={fleet:.1f} xargs={xargs:.1f} xargs_before={xargs_before:.1f} xargs_after={xargs_after:.1f}"
      f" ratio={fleet / xargs:.3f} p50_ms={p(0.5):.2f} p99_ms={p(0.99):.2f}"
      f" seen_p50_ms={ps(0.5):.2f} seen_p99_ms={ps(0.99):.2f}"
      f" worker_cpu_ms={wcpu:.4f} rec_cpu_ms={rcpu:.4f} idle_cpu_pct={idle:.3f}"
      f" fleet_cpu_ms={all_cpu:.4f} cpu_bound={xargs_cpu / all_cpu:.3f}")
PY
