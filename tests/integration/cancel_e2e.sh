# Shared body of the cancel tests (sourced; needs TRANSPORT=local|kafka).
# A reconciler and a `process` worker with 2 slots; a job of 4 shards that
# would sleep a minute: 2 run, 2 wait on the log behind them. `altar cancel`
# must settle it with no task left running, all from recorded facts:
#   - submit --wait exits 4 (cancelled); every shard's record is failed
#     "cancelled" (the 2 running stopped by the backend, the 2 queued refused);
#   - the dead topic has one "cancelled" group event per group, nothing fired;
#   - no process of the job is left (its unique command line is gone);
#   - a second cancel adds no group event (idempotent);
#   - after restarting the worker and the reconciler, a new shard of the job
#     (produced by hand, with its job_id) is refused unstarted by the worker
#     (the commit it resumed from carries the cancel) and by the ledger: its
#     group settles as cancelled, never fires;
#   - a rebuild from the status topic gives the same checksum.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "cancel-$TRANSPORT" python3
on_cleanup() { pkill_marker; }
# The tasks' command names this run's directory: find them, and only them.
marker="$T/marker"
# The task itself is the `sh -c` of its spec (the backend may wrap it).
count_tasks() { pgrep -f "^sh -c sleep 61; : $marker" 2>/dev/null | grep -c . || true; }
pkill_marker() { for p in $(pgrep -f ": $marker" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; }
prefix="cancel-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 2}" "partitions: 4"
  echo "groups:"
  echo "  work: {group_by: [job_id, fold], ready_when: single, on_failed: retry, max_restarts: 2}"
} >"$T/altar.yaml"
cfg="--config $T/altar.yaml"
for f in 0 1 2 3; do
  printf '{"kind":"work","image":"x","command":["sh","-c","sleep 61; : %s"],"labels":{"fold":"%s"}}\n' "$marker" "$f"
done >"$T/specs.jsonl"

start_reconciler() {
  "$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 &
  rpid=$!
  pids="$pids $rpid"
}
start_worker() {
  "$ALTAR_BIN" worker $cfg --id w1 --poll-ms 50 >>"$T/worker.log" 2>&1 &
  wpid=$!
  pids="$pids $wpid"
}
start_reconciler
start_worker

"$ALTAR_BIN" submit $cfg --wait --timeout 120 "$T/specs.jsonl" >"$T/submit.out" 2>"$T/submit.err" &
spid=$!
# The job id comes first; then wait (bounded) until two shards run.
job=""
for _ in $(seq 1 300); do
  job="$(grep -o 'j-[0-9a-f]*' "$T/submit.out" 2>/dev/null | head -1)"
  [ -n "$job" ] && [ "$(count_tasks)" -ge 2 ] && break
  sleep 0.1
done
[ -n "$job" ] || fail "submit printed no job id: $(cat "$T/submit.err")"
running="$(count_tasks)"
[ "$running" -eq 2 ] || fail "expected 2 running tasks before the cancel (2 slots), saw $running"

"$ALTAR_BIN" cancel $cfg "$job" >"$T/cancel.out" 2>"$T/cancel.err" || fail "cancel: $(cat "$T/cancel.err")"
wait "$spid"
src=$?
[ "$src" -eq 4 ] || fail "submit --wait: expected exit 4 (cancelled), got $src: $(tail -5 "$T/submit.err")"
left="$(count_tasks)"
[ "$left" -eq 0 ] || fail "$left task process(es) of the cancelled job still running"

dead_events() {
  "$ALTAR_BIN" log consume $cfg --topic "$prefix.dead" --from-beginning --exit 2>/dev/null |
    python3 -c 'import json,sys
ev=[json.loads(l) for l in sys.stdin if l.startswith("{")]
print(sum(1 for e in ev if e.get("event")=="cancelled"), sum(1 for e in ev if e.get("event")!="cancelled"))'
}
ready_count() {
  "$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit 2>/dev/null | grep -c '^{' || true
}
# The reconciler may still be publishing the last group event: bounded wait on the fact.
for _ in $(seq 1 100); do [ "$(dead_events)" = "4 0" ] && break; sleep 0.1; done
[ "$(dead_events)" = "4 0" ] || fail "dead topic: expected 4 cancelled group events and nothing else, got $(dead_events)"
[ "$(ready_count)" -eq 0 ] || fail "a group of the cancelled job fired"

# Idempotent: a second cancel adds nothing.
"$ALTAR_BIN" cancel $cfg "$job" >/dev/null 2>&1 || fail "second cancel failed"

# Restarts: a cancel read before them still holds after them.
kill -TERM "$wpid" "$rpid"
wait "$wpid" "$rpid" 2>/dev/null
start_reconciler
start_worker
printf '{"v":1,"type":"job","job_id":"%s","attempt":0,"avoid_hosts":[],"submitted_at":0,"spec":{"kind":"work","image":"x","command":["true"],"labels":{"job_id":"%s","fold":"9"},"inputs":[],"outputs":[],"resources":null,"timeout_s":null,"plugin_identity":null}}\n' "$job" "$job" |
  "$ALTAR_BIN" log produce $cfg --topic "$prefix.jobs" --encode job >/dev/null 2>"$T/err" || fail "produce: $(cat "$T/err")"
for _ in $(seq 1 200); do [ "$(dead_events)" = "5 0" ] && break; sleep 0.1; done
[ "$(dead_events)" = "5 0" ] || fail "the new shard after the restarts: expected its group cancelled (5 cancelled events), got $(dead_events)"
[ "$(ready_count)" -eq 0 ] || fail "a new shard of the cancelled job fired its group after the restarts"

kill -TERM "$wpid" "$rpid"
wait "$wpid" "$rpid" 2>/dev/null
"$ALTAR_BIN" ledger dump --ledger "$T/ledger" >"$T/dump" 2>"$T/err" || fail "dump: $(cat "$T/err")"
python3 - "$T/dump" "$job" "$TRANSPORT" <<'EOP' || fail "ledger records: see above"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
mine = [r for r in recs if r["handle"]["labels"].get("job_id") == sys.argv[2]]
bad = []
if len(mine) != 5:
    bad.append("expected 5 records of the job, got %d" % len(mine))
for r in mine:
    f = r.get("failure") or {}
    if r["handle"]["labels"].get("fold") == "9" and not r["handle"]["external_id"].startswith("cancelled-"):
        # The restarted worker read its partition past the cancel; the
        # commit it resumed from carried the cancel, so it refuses the new
        # shard unstarted (an external id of its own), never runs it.
        bad.append("the new shard after the restarts was started (%s)" % r["handle"]["external_id"])
    if r["state"] != "failed" or f.get("reason") != "cancelled" or not r["consumed"]:
        bad.append("record %s: state %s reason %s consumed %s" % (r["handle"]["external_id"], r["state"], f.get("reason"), r["consumed"]))
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOP
sum1="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledger")"
"$ALTAR_BIN" reconciler $cfg --rebuild >"$T/rebuild.out" 2>"$T/rebuild.err" || fail "rebuild: $(cat "$T/rebuild.err")"
sum2="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledger")"
[ "$sum1" = "$sum2" ] || fail "rebuild changed the checksum ($sum1 vs $sum2)"
[ "$(dead_events)" = "5 0" ] || fail "rebuild published group events again: $(dead_events)"

if [ "$fails" -ne 0 ]; then
  echo "--- reconciler"; tail -20 "$T/reconciler.log"; echo "--- worker"; tail -30 "$T/worker.log"
  echo "$fails check(s) failed"
  exit 1
fi
echo "ok: cancel on $TRANSPORT settled job $job with no task left running, held across restarts and a rebuild"
