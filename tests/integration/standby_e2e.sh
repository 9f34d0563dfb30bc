# Shared body of the standby tests (sourced; needs TRANSPORT=local|kafka).
# A hot standby reconciler (docs/state.md, "Standbys"):
#   8 models x 5 folds, grouped by model, ready when all 5 folds succeeded,
#   and 16 more models whose 5 folds all run while A owns the topic.
#   - reconciler A owns the status topic and checkpoints every second;
#     folds 0-3 of the 8 run and A's checkpoint covers every status event;
#     A stops cleanly and comes back with an interval of an hour: no
#     checkpoint after that one;
#   - S starts with --standby: it restores A's checkpoint beside its ledger
#     path, applies the status topic itself, says it is caught up (log, and
#     altar_reconciler_standby_caught_up 1 on /metrics) and joins no group;
#   - the 16 models run: A fires them (after its newest checkpoint); S
#     applies their status events into its copy and finds A's 16 group
#     events on the ready topic (its held entries for them go);
#   - every status record so far is deleted (retention), then A is killed -9;
#   - S takes over with its copy, whose offsets are past the newest
#     checkpoint's (its log says both), restores nothing, reports no gap;
#     the fifth folds run: every one of the 24 group events is on the ready
#     topic exactly once (by event id), none on the dead topic, and S's
#     ledger has the checksum of a reference that read everything live.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/takeover.sh"
altar_test_begin "standby-$TRANSPORT" python3 curl
prefix="sb-$(date +%s)-$$"
cp_dir="$T/checkpoints"
takeover_config "$T/a.yaml" "$T/ledgerA" "$prefix.ready" "$prefix.dead" "$cp_dir" "standby_poll_ms: 100"
sed "s#checkpoint_interval_s: 1,#checkpoint_interval_s: 3600,#" "$T/a.yaml" >"$T/a-hour.yaml"
takeover_config "$T/s.yaml" "$T/ledgerS" "$prefix.ready" "$prefix.dead" "$cp_dir" "standby_poll_ms: 100"
takeover_config "$T/ref.yaml" "$T/ledgerRef" "$prefix.ready-ref" "$prefix.dead-ref" ""
mkdir -p "$T/data"
fold_jobs "0 1 2 3 4 5 6 7" "0 1 2 3" >"$T/first.jsonl"
fold_jobs "0 1 2 3 4 5 6 7" 4 >"$T/last.jsonl"
fold_jobs "$(seq 10 25)" "0 1 2 3 4" >"$T/mid.jsonl"

die() { fail "$*"; for f in "$T"/*.log; do echo "--- $f" >&2; tail -25 "$f" >&2; done; altar_test_end "standby-$TRANSPORT"; exit 1; }

bg "$T/worker.log" "$ALTAR_BIN" worker --config "$T/a.yaml" --id w1 --poll-ms 50
bg "$T/ref.log" "$ALTAR_BIN" reconciler --config "$T/ref.yaml" --group "$prefix.ref" --no-dashboard
recRef=$last
bg "$T/recA.log" "$ALTAR_BIN" reconciler --config "$T/a.yaml" --no-dashboard
recA=$last
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/first.jsonl" >"$T/submit1.log" 2>&1 || die "submit of the first folds"
ends=0
for _ in $(seq 1 600); do
  set -- $(status_ends)
  ends="${1:-0}"
  [ "$ends" -ge 64 ] && [ "$(covered)" -eq "$ends" ] && break
  sleep 0.1
done
[ "$(covered)" -eq "$ends" ] && [ "$ends" -ge 64 ] || die "A's checkpoint never covered the $ends status events (covers $(covered))"
ok "A's checkpoint covers all $ends status events"
# A stops cleanly (its last checkpoint) and comes back checkpointing hourly.
kill -TERM "$recA"
wait "$recA" 2>/dev/null
bg "$T/recA.log" "$ALTAR_BIN" reconciler --config "$T/a-hour.yaml" --no-dashboard
recA=$last
cp_sum="$(covered)"

port="$(free_port)"
bg "$T/recS.log" "$ALTAR_BIN" reconciler --config "$T/s.yaml" --standby --metrics "127.0.0.1:$port" --no-dashboard
recS=$last
for _ in $(seq 1 600); do
  grep -q "standby: caught up" "$T/recS.log" && break
  sleep 0.1
done
grep -q "standby: caught up" "$T/recS.log" || die "the standby never said it caught up"
grep -q "standby: restored checkpoint" "$T/recS.log" || fail "the standby did not say what it restored"
[ -d "$T/ledgerS.standby" ] && [ ! -e "$T/ledgerS" ] || fail "the copy is not beside the standby's ledger path"
metric() { curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | sed -n "s/^$1 //p"; }
for _ in $(seq 1 100); do [ "$(metric altar_reconciler_standby_caught_up)" = 1 ] && break; sleep 0.1; done
[ "$(metric altar_reconciler_standby_caught_up)" = 1 ] || fail "altar_reconciler_standby_caught_up is not 1: $(metric altar_reconciler_standby_caught_up)"
ok "the standby keeps its copy current and says it is caught up (log and metric)"

# 16 groups fire under A, after its newest checkpoint; S applies their
# events into its copy and finds A's group events on the ready topic.
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/mid.jsonl" >"$T/submit-mid.log" 2>&1 || die "submit of the 16 models"
[ "$(wait_ready "$prefix.ready" 16)" -eq 16 ] || die "A did not fire the 16 models"
for _ in $(seq 1 900); do
  [ "$(metric altar_reconciler_standby_published_seen_total)" = 16 ] && [ "$(metric altar_reconciler_standby_tail_events)" = 0 ] && break
  sleep 0.1
done
[ "$(metric altar_reconciler_standby_published_seen_total)" = 16 ] ||
  fail "the standby matched $(metric altar_reconciler_standby_published_seen_total) of A's 16 group events (expected 16)"
[ "$(metric altar_reconciler_standby_held_entries)" = 0 ] ||
  fail "the standby holds $(metric altar_reconciler_standby_held_entries) group events not seen published"
[ "$(metric altar_reconciler_standby_tail_events)" = 0 ] ||
  fail "the standby's copy lags $(metric altar_reconciler_standby_tail_events) status events behind"
[ "$(covered)" -eq "$cp_sum" ] || fail "A checkpointed again ($(covered) covered, $cp_sum before): the tail is not after its newest checkpoint"
ok "the standby applied A's tail and found A's 16 group events published"
grep -q "altar reconciler: applied" "$T/recS.log" && fail "the standby ran as an owner while A owned the topic"

# A week of retention, then the owner's host dies.
"$ALTAR_BIN" log delete-records --config "$T/a.yaml" --topic "$prefix.status" --before end >"$T/delete.log" 2>&1 ||
  die "delete-records: $(cat "$T/delete.log")"
# The reference must have read every record first (its ledger's offsets).
ref_read() { ledger_read "$T/ref.yaml" "$T/ledgerRef"; }
kill -9 "$recA"
for _ in $(seq 1 900); do
  grep -q "standby: no reconciler consumes" "$T/recS.log" && break
  sleep 0.1
done
grep -q "taking over with the copy at status offsets .* (caught up)" "$T/recS.log" || die "the standby did not take over caught up"
# The copy's offsets when it took over, against the newest checkpoint's.
set -- $(sed -n 's/.*taking over with the copy at status offsets [^ ]* (\([0-9]*\) events; the newest checkpoint [^ ]* covers \([0-9]*\):.*/\1 \2/p' "$T/recS.log")
applied="${1:-0}" cpcov="${2:--1}"
[ "$cpcov" -eq "$cp_sum" ] && [ "$applied" -gt "$cpcov" ] ||
  fail "the standby's copy stood at $applied status events, the newest checkpoint at $cpcov (expected more than $cp_sum)"
ok "the standby's copy was $((applied - cpcov)) status events past the newest checkpoint when it took over"
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/last.jsonl" >"$T/submit2.log" 2>&1 || die "submit of the fifth folds"
n="$(wait_ready "$prefix.ready" 24)"
[ "$n" -eq 24 ] || die "expected 24 group events on the ready topic after the standby's takeover, saw $n"
grep -q "restored $T/ledgerS from checkpoint" "$T/recS.log" && fail "the standby restored again at takeover instead of only tailing"
grep -q "no longer on the log" "$T/recS.log" && fail "the standby reported a gap although its warm copy covers the deleted records"
kill -TERM "$recS"
wait "$recS" 2>/dev/null
set -- $(count_ready "$prefix.ready")
[ "$1" -eq 24 ] && [ "$2" -eq 24 ] || fail "ready topic: $1 group events, $2 distinct (expected 24 and 24)"
set -- $(count_ready "$prefix.dead")
[ "${1:-0}" -eq 0 ] || fail "dead topic: ${1:-0} group events (expected none)"
ok "the standby took over with its copy: every group event exactly once (A's 16 not published again)"
for _ in $(seq 1 600); do
  [ "$(ref_read)" -ge "$applied" ] && [ "$(ref_read)" -ge $((ends + 16)) ] && break
  sleep 0.1
done
kill -TERM "$recRef"
wait "$recRef" 2>/dev/null
set -- $(count_ready "$prefix.ready-ref")
[ "${1:-0}" -eq 24 ] || fail "the reference reconciler fired ${1:-0} groups, expected 24"
ssum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerS" 2>&1)"
refsum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerRef" 2>&1)"
[ -n "$ssum" ] && [ "$ssum" = "$refsum" ] || fail "S's ledger ($ssum) differs from the reference's ($refsum)"
ok "checksum equal to the reference that read the whole history"
# A standby refuses a ledger of its own, naming the setting.
"$ALTAR_BIN" reconciler --config "$T/s.yaml" --standby --no-dashboard >"$T/refuse.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "ledger.standby: ledger.path .* exists" "$T/refuse.log" ||
  fail "--standby with an existing ledger: exit $rc: $(cat "$T/refuse.log")"
altar_test_end "standby-$TRANSPORT"
