#!/bin/sh
# altar reconciler --rebuild: refuses while a reconciler still runs on the
# ledger (the swap would move the live ledger away under it), and once it
# is stopped rebuilds a ledger with the same checksum, publishing nothing
# the replaced ledger had decided; after the ready topic's records are
# deleted (retention), a rebuild still republishes none of them, and
# publishes, once, the group that completed while no reconciler ran.
set -eu
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin rebuild-cli
BIN="$ALTAR_BIN"
rec=""
on_cleanup() { [ -n "$rec" ] && kill -9 "$rec" 2>/dev/null || true; }
# Here the first failure ends the test, with the daemons' logs.

mkdir -p "$T/data"
cat >"$T/altar.yaml" <<YAML
transport: {name: local, dir: $T/log, segment.bytes: 1024}
topics: {partitions: 1}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/ledger}
groups:
  shard:
    group_by: [job_id, group]
    ready_when: {all_folds: 2}
    on_failed: dead_letter
YAML
cfg="--config $T/altar.yaml"

for g in a b c; do
  for f in 0 1; do
    echo "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"/bin/true\",\"$g$f\"],\"labels\":{\"group\":\"$g\",\"fold\":\"$f\"}}"
  done
done >"$T/specs.jsonl"
"$BIN" submit $cfg "$T/specs.jsonl" >"$T/submit.log" 2>&1 || fatal "submit"
"$BIN" worker $cfg --exit-when-idle --quiet >"$T/worker.log" 2>&1 || fatal "worker"
"$BIN" reconciler $cfg --exit-when-idle >"$T/reconciler1.log" 2>&1 || fatal "reconciler"
grep -q "3 fired" "$T/reconciler1.log" || fatal "expected 3 groups fired"

# A reconciler running on the ledger: wait until it holds the database's LOCK.
"$BIN" reconciler $cfg >"$T/reconciler2.log" 2>&1 &
rec=$!
i=0
until ls -l "/proc/$rec/fd" 2>/dev/null | grep -q "ledger/LOCK"; do
  i=$((i + 1))
  [ "$i" -lt 300 ] || fatal "the reconciler never opened its ledger"
  kill -0 "$rec" 2>/dev/null || fatal "the reconciler exited"
  sleep 0.1
done
if "$BIN" reconciler $cfg --rebuild >"$T/rebuild1.log" 2>&1; then
  fatal "--rebuild succeeded while a reconciler was running on the ledger"
fi
grep -q "still running" "$T/rebuild1.log" || fatal "--rebuild did not say why it refused"
ls "$T" | grep -q "ledger.replaced" && fatal "--rebuild swapped the live ledger away"
kill -0 "$rec" 2>/dev/null || fatal "the running reconciler died"

kill -TERM "$rec"
wait "$rec" || fatal "the reconciler did not stop cleanly on SIGTERM"
rec=""
"$BIN" reconciler $cfg --rebuild >"$T/rebuild2.log" 2>&1 || fatal "--rebuild after the stop"
grep -q " 0 missing events published" "$T/rebuild2.log" || fatal "--rebuild republished group events"
new="$(sed -n 's/^checksum //p' "$T/rebuild2.log")"
old="$(sed -n 's/^replaced \([^ ]*\) .*/\1/p' "$T/rebuild2.log")"
[ -n "$new" ] && [ "$new" = "$old" ] || fatal "checksums differ: new '$new', replaced '$old'"
echo "ok: rebuild refuses a live ledger, then matches ($new)"

ready_ids() { # event ids on the ready topic, one a line
  "$BIN" log consume $cfg --topic altar.ready --from-beginning --exit 2>/dev/null |
    python3 -c 'import json,sys; [print(json.loads(l)["event_id"]) for l in sys.stdin if l.strip()]'
}
ready_ids >"$T/ids-before"
[ "$(wc -l <"$T/ids-before")" -eq 3 ] || fatal "expected 3 group events on the ready topic: $(cat "$T/ids-before")"
# Group d completes while no reconciler runs, then retention takes the
# ready topic's records: which events are out is the ledger's to say.
for f in 0 1; do
  echo "{\"kind\":\"shard\",\"image\":\"none\",\"command\":[\"/bin/true\",\"d$f\"],\"labels\":{\"group\":\"d\",\"fold\":\"$f\"}}"
done >"$T/specs-d.jsonl"
"$BIN" submit $cfg "$T/specs-d.jsonl" >"$T/submit-d.log" 2>&1 || fatal "submit of group d"
"$BIN" worker $cfg --exit-when-idle --quiet >"$T/worker-d.log" 2>&1 || fatal "worker for group d"
"$BIN" log delete-records $cfg --topic altar.ready --before end >"$T/delete.log" 2>&1 || fatal "delete-records: $(cat "$T/delete.log")"
ready_ids >"$T/ids-left"
left=$(wc -l <"$T/ids-left")
[ "$left" -lt 3 ] || fatal "delete-records left every group event on the ready topic"
# The replaced ledger never applied group d's events, so the checksums
# differ (said, exit 1); the rebuilt ledger is swapped in all the same.
"$BIN" reconciler $cfg --rebuild >"$T/rebuild3.log" 2>&1 && fatal "--rebuild did not say the ledgers differ"
grep -q "differs from the one it replaced" "$T/rebuild3.log" || fatal "--rebuild after the ready records were deleted: $(cat "$T/rebuild3.log")"
grep -q "4 groups fired, 0 dead-lettered, 1 missing event published" "$T/rebuild3.log" ||
  fatal "--rebuild should publish group d only: $(cat "$T/rebuild3.log")"
ready_ids >"$T/ids-after"
[ "$(sort "$T/ids-after" | uniq -d | wc -l)" -eq 0 ] || fatal "a group event is on the ready topic twice: $(cat "$T/ids-after")"
[ "$(wc -l <"$T/ids-after")" -eq $((left + 1)) ] || fatal "expected $((left + 1)) group events after the rebuild: $(cat "$T/ids-after")"
grep -qvxF -f "$T/ids-before" "$T/ids-after" || fatal "group d's event is not on the ready topic"
# The rebuilt ledger covers group d: a reconciler on it publishes nothing.
"$BIN" reconciler $cfg --exit-when-idle >"$T/reconciler3.log" 2>&1 || fatal "reconciler after the rebuild"
grep -q " 0 fired" "$T/reconciler3.log" || fatal "the reconciler fired again after the rebuild: $(cat "$T/reconciler3.log")"
[ "$(ready_ids | wc -l)" -eq $((left + 1)) ] || fatal "the reconciler published group events again"
echo "ok: after the ready topic's retention, rebuild publishes only what no ledger decided ($left of 3 old events left, 1 new)"
