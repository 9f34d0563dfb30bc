# Shared body of the end-to-end fleet tests (sourced; needs TRANSPORT=local|kafka).
# Runs a reconciler and two workers as separate processes, submits many
# groups of shards plus poison messages, kill -9s workers and the reconciler
# mid-run and restarts them, then checks the fleet invariants and that a
# rebuild from the status topic gives the same ledger checksum.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
GROUPS_N="${FLEET_GROUPS:-60}"
FOLDS=5
DEAD_GROUP=g007
SLOTS=4
KILLS=0

. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "fleet-$TRANSPORT" python3
mkdir -p "$T/data"
prefix="fleet-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: $SLOTS}"
  altar_test_fold_groups
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"

start_reconciler() { "$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"; }
# FLEET_WORKER reaches each task's environment, so runs.log says which
# worker life ran it; kills.log records each kill -9 (fleet_check.py).
start_worker() {
  FLEET_WORKER="w$1-$2" "$ALTAR_BIN" worker $cfg --id "w$1-$2" --drain 2 >>"$T/worker$1.log" 2>&1 &
  eval "w$1=\$! life$1=w$1-$2"
  pids="$pids $!"
}
kill_worker() {
  eval "pid=\$w$1 life=\$life$1"
  echo "$life $(date +%s.%N)" >> "$T/kills.log"
  kill -9 "$pid" 2>/dev/null || true
  KILLS=$((KILLS + 1))
}

# The specs: GROUPS_N groups of FOLDS shards; one shard of DEAD_GROUP fails deterministically.
python3 - "$T" "$GROUPS_N" "$FOLDS" "$DEAD_GROUP" > "$T/specs.jsonl" <<'PY'
import json, sys
d, n, folds, dead = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
script = 'sleep 0.05; if [ "$2" = fail ]; then exit 3; fi; echo "$0 $FLEET_WORKER $(date +%s.%N)" >> "$1/runs.log"'
for g in range(n):
    for f in range(folds):
        name = f"g{g:03d}"
        mode = "fail" if (name == dead and f == 2) else "ok"
        print(json.dumps({"kind": "shard", "image": "none",
                          "command": ["/bin/sh", "-c", script, f"{name}/{f}", f"{d}/data", mode],
                          "labels": {"group": name, "fold": str(f), "num_folds": str(folds)},
                          "timeout_s": 120}))
PY

# On Kafka the broker (on its default limits, scripts/services/kafka.sh) and
# the topics altar creates refuse records over about 1 and 4 MiB. To reach
# the worker's own bound with the 10 MB message below, the jobs topic is made
# first as an operator who raised its limit would (create-topic gives a new
# topic the producer's message.max.bytes).
big_opts=""
if [ "$TRANSPORT" = kafka ]; then
  big_opts="--set transport.kafka.message.max.bytes=16777216"
  "$ALTAR_BIN" log create-topic $cfg $big_opts --topic "$prefix.jobs" --partitions 8
fi
start_reconciler
start_worker 1 0
start_worker 2 0
job="$("$ALTAR_BIN" submit $cfg "$T/specs.jsonl")"
echo "submitted $job: $((GROUPS_N * FOLDS)) shards in $GROUPS_N groups"

# Poison on the jobs topic: garbage bytes, a spec escaping its root (readable
# identity: refused as invalid_spec, its group dead-lettered), a 10 MB message.
printf 'garbage \001\002\003 not msgpack\n' | "$ALTAR_BIN" log produce $cfg --topic "$prefix.jobs"
head -c 10485760 /dev/zero | tr '\0' 'x' > "$T/big.txt"; echo >> "$T/big.txt"
"$ALTAR_BIN" log produce $cfg $big_opts --topic "$prefix.jobs" < "$T/big.txt"
python3 -c 'import json; print(json.dumps({"v":1,"type":"job","job_id":"poison","attempt":0,"avoid_hosts":[],"submitted_at":0,"spec":{"kind":"shard","image":"x","command":["true"],"labels":{"job_id":"poison","group":"poison"},"inputs":[{"uri":"file:///etc/passwd","logical_path":"../../etc/passwd","locality_key":None,"digest":None}],"outputs":[],"resources":{"gpu":None,"count":1,"memory_mb":None},"timeout_s":None,"plugin_identity":None}}))' \
  | "$ALTAR_BIN" log produce $cfg --topic "$prefix.jobs" --encode job

# Distinct event ids: a group event may be published more than once (at least once).
count() {
  "$ALTAR_BIN" log consume $cfg --topic "$1" --from-beginning --exit 2>/dev/null | grep -o '"event_id": *"[^"]*"' |
    sort -u | wc -l
}

# Kill -9 workers and the reconciler mid-run, then bring them back.
for round in 1 2 3; do
  sleep 2
  kill_worker 1; start_worker 1 "$round"
  sleep 1
  kill -9 "$rec" 2>/dev/null || true; start_reconciler
  sleep 1
  kill_worker 2; start_worker 2 "$round"
done

want=$((GROUPS_N + 1)) # and the refused poison job's group
deadline=$(( $(date +%s) + 600 ))
while :; do
  got=$(( $(count "$prefix.ready") + $(count "$prefix.dead") ))
  [ "$got" -ge "$want" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "timed out: $got of $want group events"; tail -20 "$T"/*.log; exit 1
  fi
  sleep 1
done
sleep 2 # let anything late arrive, so a duplicate would show
kill -TERM "$w1" "$w2" "$rec" 2>/dev/null || true
wait "$w1" "$w2" "$rec" 2>/dev/null || true
"$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit > "$T/ready.jsonl"
"$ALTAR_BIN" log consume $cfg --topic "$prefix.dead" --from-beginning --exit > "$T/dead.jsonl"
# The ledger after the kills: checked by fleet_check.py (nothing left open,
# one terminal record per shard) against what `altar status` counts.
"$ALTAR_BIN" ledger dump $cfg > "$T/ledger.jsonl"
"$ALTAR_BIN" status $cfg "$job" --json > "$T/status.json"
python3 "$ALTAR_SOURCE_DIR/tests/integration/fleet_check.py" "$T" "$GROUPS_N" "$FOLDS" "$DEAD_GROUP" "$KILLS"

# Poison landed in the DLQ with reasons, and the fleet kept going.
dlq=$("$ALTAR_BIN" log consume $cfg --topic "$prefix.dlq" --from-beginning --exit | wc -l)
grep -h "dead-lettered" "$T"/worker*.log | sed 's/^/  /' | cut -c1-160
[ "$dlq" -ge 3 ] || { echo "FAIL: $dlq message(s) in the DLQ, want at least 3"; exit 1; }
grep -q "logical_path.*climbs out" "$T"/worker*.log || { echo "FAIL: no DLQ reason names the escaping path"; exit 1; }
grep -q "too large" "$T"/worker*.log || { echo "FAIL: no DLQ reason names the 10 MB message"; exit 1; }

# Replay is exact: the rebuilt ledger has the same checksum and publishes nothing twice.
"$ALTAR_BIN" reconciler $cfg --rebuild | tee "$T/rebuild.out"
grep -q " 0 missing events published" "$T/rebuild.out" || { echo "FAIL: rebuild republished group events"; exit 1; }
echo "fleet e2e on $TRANSPORT: ok"
