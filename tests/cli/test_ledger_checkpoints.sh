#!/bin/sh
# Ledger checkpoints and the status topic's lifetime on the embedded log:
#   - a reconciler refuses to start, naming the setting, when the status
#     topic keeps less than its recovery needs (exit 2), and starts when it
#     keeps enough;
#   - checkpoint storage that fails (a path under a regular file) costs
#     nothing acknowledged: every group still fires, the reconciler says
#     the checkpoint failed and keeps going;
#   - bad checkpoint settings are refused naming the key.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin ledger-checkpoints
BIN="$ALTAR_BIN"

printf 'transport: {name: local, dir: %s/log, retention.ms: 1000}\nledger: {path: %s/ledger}\n' "$T" "$T" >"$T/short.yaml"
"$BIN" reconciler --config "$T/short.yaml" --exit-when-idle >"$T/r1.log" 2>&1
rc=$?
check '[ "$rc" -eq 2 ]' "a 1 s status retention without checkpoints: exit $rc, expected 2"
check 'grep -q "transport.retention.ms" "$T/r1.log" && grep -q "ledger.checkpoints" "$T/r1.log"' \
  "the refusal did not name the settings: $(cat "$T/r1.log")"
"$BIN" reconciler --config "$T/short.yaml" --checkpoints "$T/cp" --exit-when-idle >"$T/r2.log" 2>&1
rc=$?
check '[ "$rc" -eq 2 ]' "a 1 s status retention with 60 s checkpoints: exit $rc, expected 2"
check 'grep -q "240000 ms (3 x ledger.checkpoint_interval_s + 60 s)" "$T/r2.log"' "no need stated: $(cat "$T/r2.log")"
printf 'transport: {name: local, dir: %s/log, retention.ms: 3600000}\nledger: {path: %s/ledger}\n' "$T" "$T" >"$T/hour.yaml"
"$BIN" reconciler --config "$T/hour.yaml" --checkpoints "$T/cp" --exit-when-idle --quiet >"$T/r3.log" 2>&1
rc=$?
check '[ "$rc" -eq 0 ]' "an hour of status retention with 60 s checkpoints was refused: $(cat "$T/r3.log")"

"$BIN" reconciler --config "$T/hour.yaml" --checkpoint-interval 0 >"$T/r4.log" 2>&1
rc=$?
check '[ "$rc" -eq 2 ] && grep -q "ledger.checkpoint_interval_s: must be an integer in \[1, 86400\]" "$T/r4.log"' \
  "--checkpoint-interval 0: exit $rc: $(cat "$T/r4.log")"
printf 'ledger: {path: %s/l2, checkpoint_intervl_s: 5}\n' "$T" >"$T/typo.yaml"
"$BIN" reconciler --config "$T/typo.yaml" >"$T/r5.log" 2>&1
rc=$?
check '[ "$rc" -eq 2 ] && grep -q "typo.yaml:1" "$T/r5.log" && grep -q "checkpoint_interval_s" "$T/r5.log"' \
  "a ledger key typo: exit $rc: $(cat "$T/r5.log")"

for bad in 0 -1 10001 three; do
  printf 'ledger: {path: %s/l3, checkpoints_keep: %s}\n' "$T" "$bad" >"$T/keep.yaml"
  "$BIN" reconciler --config "$T/keep.yaml" >"$T/r6.log" 2>&1
  rc=$?
  check '[ "$rc" -eq 2 ] && grep -q "ledger.checkpoints_keep: must be an integer in \[1, 10000\]" "$T/r6.log"' \
    "checkpoints_keep: $bad: exit $rc: $(cat "$T/r6.log")"
done

# Checkpoint storage that cannot be written: nothing acknowledged is lost.
: >"$T/not-a-dir"
mkdir -p "$T/data"
cat >"$T/fleet.yaml" <<YAML
transport: {name: local, dir: $T/flog}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/fledger, checkpoints: $T/not-a-dir/cp, checkpoint_interval_s: 1}
groups:
  shard: {group_by: [model], ready_when: {all_folds: 2}, on_failed: dead_letter}
YAML
for m in a b c; do
  for f in 0 1; do
    echo "{\"kind\":\"shard\",\"image\":\"x\",\"command\":[\"/bin/true\",\"$m$f\"],\"labels\":{\"model\":\"$m\",\"fold\":\"$f\"}}"
  done
done >"$T/specs.jsonl"
"$BIN" submit --config "$T/fleet.yaml" "$T/specs.jsonl" >/dev/null 2>&1 || fail "submit"
"$BIN" worker --config "$T/fleet.yaml" --exit-when-idle --quiet >"$T/worker.log" 2>&1 || fail "worker"
"$BIN" reconciler --config "$T/fleet.yaml" --exit-when-idle >"$T/rec.log" 2>&1
rc=$?
check '[ "$rc" -eq 0 ]' "the reconciler with failing checkpoint storage exited $rc: $(tail -5 "$T/rec.log")"
check 'grep -q "3 fired" "$T/rec.log"' "groups were lost while checkpoints failed: $(tail -3 "$T/rec.log")"
check 'grep -q "checkpoint failed, applying goes on" "$T/rec.log"' "the failed checkpoint was not reported"
n=$("$BIN" log consume --config "$T/fleet.yaml" --topic altar.ready --from-beginning --exit 2>/dev/null | grep -c event_id)
check '[ "$n" -eq 3 ]' "ready topic: $n group events, expected 3"
# Old checkpoints are collected: with checkpoints_keep 1, after three runs
# that each ship at their clean stop, one checkpoint is left in storage,
# the reconciler says what it deleted and its metrics count it.
mkdir -p "$T/gdata"
cat >"$T/gc.yaml" <<YAML
transport: {name: local, dir: $T/glog}
backend: {name: process, data_root: $T/gdata, slots: 2}
ledger: {path: $T/gledger, checkpoints: $T/gcp, checkpoint_interval_s: 1, checkpoints_keep: 1}
groups:
  shard: {group_by: [model], ready_when: single, on_failed: dead_letter}
YAML
for run in 1 2 3; do
  echo "{\"kind\":\"shard\",\"image\":\"x\",\"command\":[\"/bin/true\",\"$run\"],\"labels\":{\"model\":\"m$run\"}}" >"$T/g$run.jsonl"
  "$BIN" submit --config "$T/gc.yaml" "$T/g$run.jsonl" >/dev/null 2>&1 || fail "submit $run"
  "$BIN" worker --config "$T/gc.yaml" --exit-when-idle --quiet >"$T/gworker$run.log" 2>&1 || fail "worker $run"
  "$BIN" reconciler --config "$T/gc.yaml" --exit-when-idle >"$T/grec$run.log" 2>&1 || fail "reconciler $run"
done
shipped=$(cat "$T"/grec*.log | grep -c "shipped")
kept=$(ls "$T/gcp/cp" | grep -c '\.json$')
check '[ "$shipped" -ge 3 ] && [ "$kept" -eq 1 ]' "$shipped checkpoints shipped, $kept manifests left (expected 1)"
check 'grep -q "checkpoint storage: .* deleted, 1 checkpoints kept" "$T/grec3.log"' \
  "the last run did not say what it collected: $(grep checkpoint "$T/grec3.log")"
check 'python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m[\"id\"])" "$T/gcp/latest.json" | \
  xargs -I{} test -f "$T/gcp/cp/{}.json"' "latest.json names a checkpoint that was deleted"

altar_test_end ledger-checkpoints
