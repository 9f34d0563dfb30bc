#!/bin/sh
# Elastic scaling on one machine (embedded log, process backend):
#  1. join: a worker joins a fleet with a backlog; time from its start to the
#     first task it started (its first "submitted" status event), per join;
#  2. churn: shards/s of a job while a worker leaves (SIGTERM) and a new one
#     joins every few seconds, against the same job on a steady fleet of the
#     same size, measured in the same run (ratio printed).
# usage: bench/bench_scale.sh [BUILD_DIR] [SHARDS] [SHARD_SECONDS]
set -eu
B="${1:-build}"
N="${2:-600}"
S="${3:-0.2}"
ALTAR="$(cd "$B" && pwd)/altar"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-scale-XXXXXX")"
# Every process started goes into one file: run_job runs in a command
# substitution (a subshell), where a shell variable would not reach the trap.
pidfile="$dir/pids"
: > "$pidfile"
started() { echo "$1" >> "$pidfile"; }
stop_all() { # stop_all SIGNAL: every process started so far
  for p in $(cat "$pidfile"); do kill "-$1" "$p" 2>/dev/null || true; done
}
trap 'stop_all 9; wait 2>/dev/null; rm -rf "$dir" 2>/dev/null || { sleep 1; rm -rf "$dir"; } || true' EXIT

fleet() { # fleet NAME: a config of its own (own log, ledger, data)
  mkdir -p "$dir/$1"
  cat > "$dir/$1/altar.yaml" <<YAML
transport: {name: local, dir: $dir/$1/log}
backend: {name: process, data_root: $dir/$1/data, slots: 4}
ledger: {path: $dir/$1/ledger}
groups:
  one: {group_by: [job_id, shard], ready_when: single, on_failed: dead_letter}
YAML
}
specs() {
  python3 -c "
import json
for i in range($1):
    print(json.dumps({'kind':'one','image':'none','command':['/bin/sleep','$S'],'labels':{'shard':str(i)}}))
"
}
worker() { # worker FLEET ID
  "$ALTAR" worker --config "$dir/$1/altar.yaml" --id "$2" --poll-ms 20 --drain 60 >>"$dir/$1/$2.log" 2>&1 &
  last=$!
  started "$last"
}
now() { date +%s.%N; }

# ---- 2. steady vs churn ----------------------------------------------------
run_job() { # run_job FLEET CHURN(0|1): prints shards/s
  f=$1
  fleet "$f"
  cfg="--config $dir/$f/altar.yaml"
  "$ALTAR" reconciler $cfg --quiet >"$dir/$f/rec.log" 2>&1 & started $!
  ws=""
  for i in 1 2 3; do worker "$f" "w$i"; ws="$ws $last"; done
  specs "$N" > "$dir/$f/specs.jsonl"
  sleep 1
  t0=$(now)
  "$ALTAR" submit $cfg --wait "$dir/$f/specs.jsonl" >/dev/null 2>"$dir/$f/submit.log" & sub=$!
  if [ "$2" = 1 ]; then
    k=3
    while kill -0 "$sub" 2>/dev/null; do
      sleep 3
      kill -0 "$sub" 2>/dev/null || break
      set -- $ws
      kill -TERM "$1" 2>/dev/null || true # the oldest leaves (its tasks finish as handed over)
      shift
      k=$((k + 1))
      worker "$f" "w$k"
      ws="$* $last"
    done
    echo "$((k - 3))" > "$dir/$f/churns"
  fi
  wait "$sub"
  t1=$(now)
  # This fleet is done: stop it so it costs the next measurement no CPU.
  stop_all TERM
  python3 -c "print($N/($t1-$t0))"
}
steady=$(run_job steady 0)
churn=$(run_job churn 1)
churns=$(cat "$dir/churn/churns")
runs=$(grep -h "released [1-9]" "$dir"/churn/w*.log | wc -l)

# ---- 1. join latency --------------------------------------------------------
fleet join
cfg="--config $dir/join/altar.yaml"
worker join w0
specs 2000 > "$dir/join/specs.jsonl"
sleep 1
"$ALTAR" submit $cfg "$dir/join/specs.jsonl" >/dev/null 2>&1
: > "$dir/join/joins"
for j in 1 2 3 4 5; do
  sleep 2
  echo "j$j $(now)" >> "$dir/join/joins"
  worker join "j$j"
done
sleep 3
"$ALTAR" log consume $cfg --topic altar.status --from-beginning --exit > "$dir/join/status.jsonl" 2>/dev/null

python3 - "$dir" "$steady" "$churn" "$churns" "$runs" "$N" "$S" <<'PY'
import json, sys
d, steady, churn, churns, released, n, s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
joined = {}
for line in open(f"{d}/join/joins"):
    w, t = line.split()
    joined[w] = float(t)
first = {}
for line in open(f"{d}/join/status.jsonl"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    w = e.get("worker")
    if e.get("event") == "submitted" and w in joined and w not in first:
        first[w] = e["ts"]
lat = sorted(first[w] - joined[w] for w in first)
print(f"join: first task started {', '.join(f'{x:.2f}' for x in lat)} s after the worker's start "
      f"({len(lat)} of {len(joined)} joins; median {lat[len(lat)//2]:.2f} s)" if lat else "join: no joining worker started a task")
print(f"steady fleet (3 workers x 4 slots): {steady:.1f} shards/s ({n} shards of sleep {s})")
print(f"churning fleet (a worker left and one joined every 3 s, {churns} times): {churn:.1f} shards/s "
      f"({released} worker(s) released tasks)")
print(f"ratio churn / steady: {churn / steady:.2f}")
PY
