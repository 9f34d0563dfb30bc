#!/bin/sh
# A reconciler restarted on the real Kafka broker resumes from its ledger's
# offsets, not from the log's commits, and logs no seek error. The group's
# committed offset is moved back to 1 between the runs: a reconciler that
# resumed from it would apply every event but the first again.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
: "${ALTAR_KAFKA_BROKERS:?the Kafka broker must be running (scripts/services/kafka.sh start)}"

. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin resume
mkdir -p "$T/data"
prefix="resume-$(date +%s)-$$"
TRANSPORT=kafka
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 4}" "partitions: 1"
  echo "groups:"
  echo "  shard:"
  echo "    group_by: [job_id]"
  echo "    ready_when: single"
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"
group="$prefix.reconcilers"

for i in 1 2 3 4 5; do
  echo "{\"kind\": \"shard\", \"image\": \"none\", \"command\": [\"true\", \"$i\"], \"labels\": {\"n\": \"$i\"}}"
done > "$T/specs.jsonl"
"$ALTAR_BIN" submit $cfg "$T/specs.jsonl" >/dev/null
"$ALTAR_BIN" worker $cfg --group "$prefix.workers" --exit-when-idle >"$T/worker.log" 2>&1
events=$("$ALTAR_BIN" log consume $cfg --topic "$prefix.status" --from-beginning --exit 2>/dev/null | wc -l)
[ "$events" -ge 10 ] || { echo "FAIL: only $events status events"; cat "$T/worker.log"; exit 1; }

"$ALTAR_BIN" reconciler $cfg --group "$group" --exit-when-idle >"$T/rec1.log" 2>&1 || { cat "$T/rec1.log"; exit 1; }
grep -q "applied $events events" "$T/rec1.log" || { echo "FAIL: first run did not apply $events events"; cat "$T/rec1.log"; exit 1; }

# Move the group's committed offset back: read one record as the group.
"$ALTAR_BIN" log consume $cfg --group "$group" --topic "$prefix.status" --from-beginning --max 1 >/dev/null 2>"$T/consume.log" ||
  { echo "FAIL: reading one record as the group:"; cat "$T/consume.log"; exit 1; }
"$ALTAR_BIN" log offsets $cfg --group "$group" --topic "$prefix.status" > "$T/offsets.txt" 2>&1
grep -q " 1 " "$T/offsets.txt" || { echo "FAIL: the committed offset did not move back to 1:"; cat "$T/offsets.txt"; exit 1; }

"$ALTAR_BIN" reconciler $cfg --group "$group" --exit-when-idle >"$T/rec2.log" 2>&1 || { cat "$T/rec2.log"; exit 1; }
cat "$T/rec2.log"
if grep -q "seek\|Erroneous state" "$T/rec2.log"; then echo "FAIL: the restarted reconciler logged a seek error"; exit 1; fi
grep -q "applied 0 events" "$T/rec2.log" || { echo "FAIL: the restarted reconciler re-applied events the ledger had"; exit 1; }
echo "reconciler resumes from its ledger on kafka: ok"
