#!/bin/sh
# Routine rebalances on the real Kafka broker never re-run a finished job.
# One worker starts; short shards arrive; then workers join and leave with
# SIGTERM, REBALANCES times in all (each join and each leave is one
# rebalance of the group), while the shards run. Each finished run appends
# its shard's name to runs.log. Passes when every shard ran exactly once and
# no worker was told its partitions were lost.
# Settings: REBALANCES (20), SHARDS (1200), SLOTS (4), KEEP=1 keeps the run dir.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
: "${ALTAR_KAFKA_BROKERS:?the Kafka broker must be running (scripts/services/kafka.sh start)}"
REBALANCES="${REBALANCES:-20}"
SHARDS="${SHARDS:-1200}"
SLOTS="${SLOTS:-4}"

. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin rebalance python3
mkdir -p "$T/data"
prefix="rebal-$(date +%s)-$$"
cat > "$T/altar.yaml" <<EOF
transport:
  name: kafka
  kafka: {bootstrap.servers: "$ALTAR_KAFKA_BROKERS"${KAFKA_DEBUG:+, debug: $KAFKA_DEBUG}}
topics: {jobs: $prefix.jobs, status: $prefix.status, ready: $prefix.ready, dead: $prefix.dead, dlq: $prefix.dlq}
backend: {name: process, data_root: $T/data, slots: $SLOTS}
ledger: {path: $T/ledger}
groups:
  shard:
    group_by: [job_id]
    ready_when: single
EOF
cfg="--config $T/altar.yaml"

python3 - "$T" "$SHARDS" > "$T/specs.jsonl" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
script = 'sleep 0.2; echo "$0" >> "$1/runs.log"'
for i in range(n):
    print(json.dumps({"kind": "shard", "image": "none",
                      "command": ["/bin/sh", "-c", script, f"s{i:05d}", f"{d}/data"],
                      "labels": {"shard": str(i)}, "timeout_s": 120}))
PY

n_started=0
start_worker() {
  n_started=$((n_started + 1))
  "$ALTAR_BIN" worker $cfg --group "$prefix.workers" --id "w$n_started" >>"$T/worker$n_started.log" 2>&1 &
  pids="$pids $!"
  eval "wpid$n_started=\$!"
}
runs() { [ -f "$T/data/runs.log" ] && wc -l < "$T/data/runs.log" || echo 0; }

start_worker # w1 stays for the whole run
sleep 3
"$ALTAR_BIN" submit $cfg "$T/specs.jsonl" >/dev/null
echo "submitted $SHARDS shards; $(runs) runs so far"

# Joins and leaves alternate; the leaver is the oldest extra worker, so up to
# three workers share the partitions at a time.
done_rebalances=0
oldest_extra=2
while [ "$done_rebalances" -lt "$REBALANCES" ]; do
  start_worker
  done_rebalances=$((done_rebalances + 1))
  sleep 2
  if [ "$done_rebalances" -lt "$REBALANCES" ] && [ $((n_started - oldest_extra)) -ge 1 ]; then
    eval "p=\$wpid$oldest_extra"
    kill -TERM "$p"
    oldest_extra=$((oldest_extra + 1))
    done_rebalances=$((done_rebalances + 1))
    sleep 2
  fi
done
echo "$done_rebalances rebalances done (workers joined: $((n_started - 1)), left: $((oldest_extra - 2))); $(runs) runs so far"

deadline=$(( $(date +%s) + 300 ))
while [ "$(sort -u "$T/data/runs.log" 2>/dev/null | wc -l)" -lt "$SHARDS" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: timed out with $(sort -u "$T/data/runs.log" | wc -l) of $SHARDS shards run"
    tail -n 5 "$T"/worker*.log
    exit 1
  fi
  sleep 1
done
sleep 5 # a re-run would show up now
for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
for p in $pids; do wait "$p" 2>/dev/null || true; done

reruns=$(sort "$T/data/runs.log" | uniq -d | wc -l)
total=$(wc -l < "$T/data/runs.log")
lost=$(cat "$T"/worker*.log | grep -c "were lost" || true)
illegal=$(cat "$T"/worker*.log | grep -c "ILLEGAL_GENERATION\|generation id is not valid" || true)
echo "rebalances: $done_rebalances; shards: $SHARDS; runs: $total; shards run more than once: $reruns;" \
  "lost-assignment events: $lost; commits refused for a stale generation: $illegal"
if [ "$reruns" -ne 0 ]; then
  echo "FAIL: finished shards ran again:"; sort "$T/data/runs.log" | uniq -d | head
  grep -h "were lost\|ILLEGAL\|generation" "$T"/worker*.log | head -20
  exit 1
fi
[ "$lost" -eq 0 ] || { echo "FAIL: a routine rebalance lost partitions"; grep -h "were lost" "$T"/worker*.log | head; exit 1; }
echo "kafka rebalances without re-runs: ok"
