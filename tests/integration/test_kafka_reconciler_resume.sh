#!/bin/sh
# A reconciler restarted on the real Kafka broker resumes from its ledger's
# offsets, not from the log's commits, and logs no seek error. The group's
# committed offset is moved back to 1 between the runs: a reconciler that
# resumed from it would apply every event but the first again.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
: "${ALTAR_KAFKA_BROKERS:?the Kafka broker must be running (scripts/services/kafka.sh start)}"

dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-resume-XXXXXX")"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/data"
prefix="resume-$(date +%s)-$$"
cat > "$dir/altar.yaml" <<EOF
transport:
  name: kafka
  kafka: {bootstrap.servers: "$ALTAR_KAFKA_BROKERS"}
topics: {jobs: $prefix.jobs, status: $prefix.status, ready: $prefix.ready, dead: $prefix.dead, dlq: $prefix.dlq,
         partitions: 1}
backend: {name: process, data_root: $dir/data, slots: 4}
ledger: {path: $dir/ledger}
groups:
  shard:
    group_by: [job_id]
    ready_when: single
EOF
cfg="--config $dir/altar.yaml"
group="$prefix.reconcilers"

for i in 1 2 3 4 5; do
  echo "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"true\", \"$i\"], \"labels\": {\"n\": \"$i\"}}"
done > "$dir/specs.jsonl"
"$ALTAR_BIN" submit $cfg "$dir/specs.jsonl" >/dev/null
"$ALTAR_BIN" worker $cfg --group "$prefix.workers" --exit-when-idle >"$dir/worker.log" 2>&1
events=$("$ALTAR_BIN" log consume $cfg --topic "$prefix.status" --from-beginning --exit 2>/dev/null | wc -l)
[ "$events" -ge 10 ] || { echo "FAIL: only $events status events"; cat "$dir/worker.log"; exit 1; }

"$ALTAR_BIN" reconciler $cfg --group "$group" --exit-when-idle >"$dir/rec1.log" 2>&1 || { cat "$dir/rec1.log"; exit 1; }
grep -q "applied $events events" "$dir/rec1.log" || { echo "FAIL: first run did not apply $events events"; cat "$dir/rec1.log"; exit 1; }

# Move the group's committed offset back: read one record as the group.
"$ALTAR_BIN" log consume $cfg --group "$group" --topic "$prefix.status" --from-beginning --max 1 >/dev/null 2>"$dir/consume.log" ||
  { echo "FAIL: reading one record as the group:"; cat "$dir/consume.log"; exit 1; }
"$ALTAR_BIN" log offsets $cfg --group "$group" --topic "$prefix.status" > "$dir/offsets.txt" 2>&1
grep -q " 1 " "$dir/offsets.txt" || { echo "FAIL: the committed offset did not move back to 1:"; cat "$dir/offsets.txt"; exit 1; }

"$ALTAR_BIN" reconciler $cfg --group "$group" --exit-when-idle >"$dir/rec2.log" 2>&1 || { cat "$dir/rec2.log"; exit 1; }
cat "$dir/rec2.log"
if grep -q "seek\|Erroneous state" "$dir/rec2.log"; then echo "FAIL: the restarted reconciler logged a seek error"; exit 1; fi
grep -q "applied 0 events" "$dir/rec2.log" || { echo "FAIL: the restarted reconciler re-applied events the ledger had"; exit 1; }
echo "reconciler resumes from its ledger on kafka: ok"
