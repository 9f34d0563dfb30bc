# Shared body of the scaling tests (sourced; needs TRANSPORT=local|kafka).
# One worker runs 8 long shards; two more workers join, then the first one
# is stopped with SIGTERM while quick shards keep arriving. Checks, from
# recorded facts only: no task was killed by a rebalance (no `released`
# event), every shard ran exactly once (each run appends a line), the long
# tasks were handed over (the first worker's stats) and waited for instead
# of re-run, the ledger ends with one terminal record per shard and nothing
# open, and (local log) every quick shard started within 1 s of its
# submission (its job message's submitted_at against the start time the
# shard itself wrote).
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
LONG_N=8
LONG_S="${SCALE_LONG_S:-20}"
QUICK_N="${SCALE_QUICK_N:-24}"

. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "scale-$TRANSPORT" python3
mkdir -p "$T/data"
prefix="scale-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 12}"
  echo "groups:"
  echo "  shard:"
  echo "    group_by: [job_id, name]"
  echo "    ready_when: single"
  echo "    on_failed: dead_letter"
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"

start_worker() { "$ALTAR_BIN" worker $cfg --id "w$1" --drain 120 >>"$T/worker$1.log" 2>&1 & eval "w$1=\$!"; pids="$pids $!"; }
# A shard appends "start <name> <unix time>" when it starts, "end <name>" when it ends.
spec() {
  python3 - "$T/data" "$1" "$2" <<'PY'
import json, sys
d, name, secs = sys.argv[1], sys.argv[2], sys.argv[3]
script = 'echo "start $0 $(date +%s.%N)" >> "$1/runs.log"; sleep "$2"; echo "end $0" >> "$1/runs.log"'
print(json.dumps({"kind": "shard", "image": "none", "command": ["/bin/sh", "-c", script, name, d, secs],
                  "labels": {"name": name}, "timeout_s": 600}))
PY
}
started() { if [ -f "$T/data/runs.log" ]; then grep -c "^start " "$T/data/runs.log" || true; else echo 0; fi; }
ended() { if [ -f "$T/data/runs.log" ]; then grep -c "^end " "$T/data/runs.log" || true; else echo 0; fi; }
wait_for() { # wait_for WHAT N SECONDS: until WHAT prints >= N
  deadline=$(( $(date +%s) + $3 ))
  until [ "$($1)" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $1 >= $2"; tail -5 "$T"/*.log; exit 1; }
    sleep 0.2
  done
}

"$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"
start_worker 1
for i in $(seq 1 $LONG_N); do spec "long$i" "$LONG_S"; done > "$T/long.jsonl"
"$ALTAR_BIN" submit $cfg "$T/long.jsonl" >/dev/null 2>>"$T/submit.log"
wait_for started $LONG_N 60
echo "8 long shards running on w1; two workers join"
start_worker 2
start_worker 3
for i in $(seq 1 "$QUICK_N"); do
  spec "quick$i" 0.2 | "$ALTAR_BIN" submit $cfg - >/dev/null 2>>"$T/submit.log"
  [ "$i" -eq 8 ] && { echo "w1 leaves (SIGTERM)"; kill -TERM "$w1"; }
  sleep 0.3
done
wait_for ended $((LONG_N + QUICK_N)) $((LONG_S * 3 + 60))
count() { "$ALTAR_BIN" log consume $cfg --topic "$1" --from-beginning --exit 2>/dev/null | grep -c '"event_id"' || true; }
ready_n() { count "$prefix.ready"; }
wait_for ready_n $((LONG_N + QUICK_N)) 60
wait "$w1" || { echo "FAIL: w1 did not stop cleanly"; tail -20 "$T/worker1.log"; exit 1; }
kill -TERM "$w2" "$w3" "$rec" 2>/dev/null || true
wait "$w2" "$w3" "$rec" 2>/dev/null || true

"$ALTAR_BIN" log consume $cfg --topic "$prefix.status" --from-beginning --exit > "$T/status.jsonl"
"$ALTAR_BIN" log consume $cfg --topic "$prefix.jobs" --from-beginning --exit > "$T/jobs.jsonl"
"$ALTAR_BIN" ledger dump $cfg > "$T/ledger.jsonl"
grep -h "altar worker [^ ]*: consumed" "$T"/worker*.log | sed 's/^/  /'
python3 - "$T" "$TRANSPORT" "$LONG_N" "$QUICK_N" <<'PY'
import collections, json, re, sys
d, transport, long_n, quick_n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
problems = []
names = [f"long{i}" for i in range(1, long_n + 1)] + [f"quick{i}" for i in range(1, quick_n + 1)]
starts = collections.defaultdict(list)
for line in open(f"{d}/data/runs.log"):
    f = line.split()
    if f[0] == "start":
        starts[f[1]].append(float(f[2]))
for n in names:
    if len(starts[n]) != 1:
        problems.append(f"{n} ran {len(starts[n])} times")
status = [json.loads(l) for l in open(f"{d}/status.jsonl") if l.strip()]
released = [e for e in status if e.get("event") == "released"]
if released:
    problems.append(f"{len(released)} task(s) released (killed) by a rebalance")
# The first worker held its long tasks across the rebalance and they were waited for.
w1 = open(f"{d}/worker1.log").read()
m = re.search(r"handed over (\d+),", w1)
if not m or int(m.group(1)) < 1:
    problems.append("w1 handed no running task over (no rebalance moved one?)")
waited = sum(int(x) for x in re.findall(r"waited (\d+),", open(f"{d}/worker2.log").read() + open(f"{d}/worker3.log").read()))
if waited < 1:
    problems.append("no joining worker waited for a held task")
# Ledger: nothing open, one terminal record per shard (runs replaced are marked so).
shard_recs = collections.Counter()
for l in open(f"{d}/ledger.jsonl"):
    if not l.strip():
        continue
    r = json.loads(l)
    rec = r.get("record", r)
    st, fail = rec.get("state"), rec.get("failure") or {}
    if st in ("pending", "running"):
        problems.append(f"record {rec['handle']['external_id']} left {st}{', consumed' if rec.get('consumed') else ''}")
    if fail.get("reason") in ("superseded", "released"):
        continue
    shard_recs[rec["handle"]["labels"].get("name")] += 1
for n in names:
    if shard_recs[n] != 1:
        problems.append(f"{n} has {shard_recs[n]} terminal record(s) in the ledger")
# Start latency of the quick shards, from recorded times (local log: <= 1 s).
sub = {}
for l in open(f"{d}/jobs.jsonl"):
    try:
        j = json.loads(l)
    except ValueError:
        continue
    if j.get("type") == "job":
        sub[j["spec"]["labels"]["name"]] = j["submitted_at"]
lat = sorted(starts[n][0] - sub[n] for n in names if n.startswith("quick") and starts[n] and n in sub)
if len(lat) != quick_n:
    problems.append(f"start latency known for {len(lat)} of {quick_n} quick shards")
elif transport == "local" and lat[-1] > 1.0:
    problems.append(f"a quick shard started {lat[-1]:.2f} s after its submission (want <= 1 s)")
if lat:
    print(f"quick shards: start after submission min {lat[0]:.3f} s, median {lat[len(lat)//2]:.3f} s, max {lat[-1]:.3f} s")
print(f"scale check on {transport}: {len(names)} shards, {sum(len(v) for v in starts.values())} runs, "
      f"{len(released)} released, {waited} waited for")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
echo "scale e2e on $TRANSPORT: ok"
