#!/bin/sh
# altar reconciler --rebuild: refuses while a reconciler still runs on the
# ledger (the swap would move the live ledger away under it), and once it
# is stopped rebuilds a ledger with the same checksum, publishing nothing
# that the ready topic already holds.
set -eu
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin rebuild-cli
BIN="$ALTAR_BIN"
rec=""
on_cleanup() { [ -n "$rec" ] && kill -9 "$rec" 2>/dev/null || true; }
# Here the first failure ends the test, with the daemons' logs.

mkdir -p "$T/data"
cat >"$T/altar.yaml" <<YAML
transport: {name: local, dir: $T/log}
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
