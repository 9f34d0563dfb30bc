#!/bin/sh
# A fleet on the embedded log whose worker runs the example Python backend
# (examples/python_backend, adapter "subprocess") through the python
# backend's bridge: a 3 x 5 job (three models, five folds each), the bridge
# killed with -9 twice while the shards run. Every group fires exactly once,
# nothing is dead-lettered, and the same worker process is still up at the
# end, with a new bridge. Needs ALTAR_TEST_PYTHON (with-venv.sh) and
# ALTAR_LIBRARY (ctest).
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}" "${ALTAR_TEST_PYTHON:?run through tests/python_backends/with-venv.sh}"
: "${ALTAR_LIBRARY:?the bridge imports altar, which loads libaltar}"
. "$ALTAR_SOURCE_DIR/tests/lib/common.sh"
altar_test_begin "fleet-python" python3 ps
mkdir -p "$T/data"
prefix="pyfleet-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: python, adapter: subprocess, python: $ALTAR_TEST_PYTHON, options: {data_root: \"$T/data\", slots: null}, restart_backoff_ms: 100, slots: 16}"
  echo "groups:"
  echo "  train:"
  echo "    group_by: [job_id, model]"
  echo "    ready_when: {all_folds: 5}"
  echo "    on_failed: retry"
  echo "    max_restarts: 3"
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"

# Each shard waits for the test's go file (bounded), so every shard is still
# running when the bridge is killed, whatever the machine's speed.
python3 - "$T" > "$T/specs.jsonl" <<'PY'
import json, sys
d = sys.argv[1]
script = 'i=0; while [ ! -e "$1/go" ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done; echo "$0" >> "$1/runs.log"'
for m in ("m1", "m2", "m3"):
    for f in range(5):
        print(json.dumps({"kind": "train", "image": "none",
                          "command": ["/bin/sh", "-c", script, f"{m}/{f}", d],
                          "labels": {"model": m, "fold": str(f)}, "timeout_s": 300}))
PY

"$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 &
rec=$!
pids="$pids $rec"
"$ALTAR_BIN" worker $cfg --id pyw1 >>"$T/worker.log" 2>&1 &
w=$!
pids="$pids $w"
job="$("$ALTAR_BIN" submit $cfg "$T/specs.jsonl")"
echo "submitted $job: 15 shards in 3 groups"

# The worker's bridge: its child running altar's adapter host.
bridge_pid() { ps -o pid=,args= --ppid "$w" | awk '/altar\.execution\.bridge/ {print $1; exit}'; }
# Waits (bounded) until cond holds; fails the test with what when it never does.
wait_for() {
  _deadline=$(( $(date +%s) + $2 ))
  until eval "$1"; do
    if [ "$(date +%s)" -ge "$_deadline" ]; then echo "FAIL: timed out waiting for $3"; for _f in "$T"/*.log; do echo "== $_f"; tail -n 30 "$_f"; done; exit 1; fi
    sleep 0.2
  done
}
started() { [ "$(ls "$T/data/tasks" 2>/dev/null | wc -l)" -ge "$1" ]; }
count() {
  "$ALTAR_BIN" log consume $cfg --topic "$1" --from-beginning --exit 2>/dev/null | grep -o '"event_id": *"[^"]*"' |
    sort -u | wc -l
}

wait_for 'started 15' 120 "15 shards started"
for round in 1 2; do
  wait_for '[ -n "$(bridge_pid)" ]' 60 "the worker's bridge"
  b="$(bridge_pid)"
  kill -9 "$b"
  echo "killed bridge $b (round $round)"
  wait_for '[ -n "$(bridge_pid)" ] && [ "$(bridge_pid)" != "$b" ]' 60 "a new bridge"
  check "[ \"\$(count $prefix.ready)\" -eq 0 ]" "a group fired before the shards were let go"
done
touch "$T/go"

wait_for "[ \"\$(count $prefix.ready)\" -ge 3 ]" 300 "three fired groups"
"$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit > "$T/ready.jsonl"
"$ALTAR_BIN" log consume $cfg --topic "$prefix.dead" --from-beginning --exit > "$T/dead.jsonl" 2>/dev/null || true
check 'kill -0 "$w" 2>/dev/null' "the worker exited"
check '[ -n "$(bridge_pid)" ]' "the worker has no bridge at the end"
kill -TERM "$w" "$rec" 2>/dev/null || true
wait "$w" "$rec" 2>/dev/null || true

# Every group fired once: three groups, one event id each, nothing dead.
python3 - "$T" <<'PY' || fail "group events"
import json, sys
d = sys.argv[1]
ids = {}
for line in open(f"{d}/ready.jsonl"):
    if line.strip():
        e = json.loads(line)
        ids.setdefault(e["group_key"], set()).add(e["event_id"])
        assert len(e["shards"]) == 5, f"{e['group_key']}: {len(e['shards'])} shards"
        assert sorted(s["labels"]["fold"] for s in e["shards"]) == ["0", "1", "2", "3", "4"], e["group_key"]
assert len(ids) == 3, f"fired groups: {sorted(ids)}"
assert all(len(v) == 1 for v in ids.values()), f"a group fired with two ids: {ids}"
dead = [l for l in open(f"{d}/dead.jsonl") if l.strip()]
assert not dead, f"dead-lettered: {dead}"
print("ok: 3 groups fired once each:", ", ".join(sorted(ids)))
PY
checks=$((checks + 1))
altar_test_end "fleet-python"
