# Shared body of the retention tests (sourced; needs TRANSPORT=local|kafka).
# The ledger outlives the status topic's history (docs/state.md):
#   8 models x 5 folds, grouped by model, ready when all 5 folds succeeded.
#   - folds 0-3 run; reconciler A (checkpoints every second) applies them and
#     its checkpoint covers every status event; then A is killed -9;
#   - every status record so far is deleted (`altar log delete-records`:
#     Kafka's DeleteRecords, the local log's segment deletion: what a week
#     of retention does), and the test checks that history is really gone;
#   - a control reconciler with an empty ledger and no checkpoints reports
#     the gap and fires none of the 8 (the bug this guards against);
#   - reconciler B with an empty ledger restores A's checkpoint; the fifth
#     folds run; exactly 8 group events reach the ready topic, each once;
#   - B's ledger has the checksum of a reference reconciler that read the
#     whole history live (its own group, ledger and output topics);
#   - the ready and dead topics' records are deleted too; `--rebuild`
#     restores from the checkpoint, says so, matches, and publishes nothing
#     (published-ness comes from the ledger, not those topics); a takeover
#     by an empty ledger publishes nothing either; without a checkpoint
#     `--rebuild` refuses, naming offsets;
#   - a kill -9 after 16 more groups fired past the newest checkpoint: an
#     empty ledger restores it, its tail decides the 16 again, and it finds
#     them on the ready topic from the ends the checkpoint recorded:
#     published once each, checksum equal to the dead owner's.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/takeover.sh"
altar_test_begin "retention-$TRANSPORT" python3
prefix="ret-$(date +%s)-$$"
cp_dir="$T/checkpoints"
takeover_config "$T/a.yaml" "$T/ledgerA" "$prefix.ready" "$prefix.dead" "$cp_dir"
takeover_config "$T/b.yaml" "$T/ledgerB" "$prefix.ready" "$prefix.dead" "$cp_dir"
takeover_config "$T/ref.yaml" "$T/ledgerRef" "$prefix.ready-ref" "$prefix.dead-ref" ""
takeover_config "$T/ctl.yaml" "$T/ledgerCtl" "$prefix.ready-ctl" "$prefix.dead-ctl" ""
mkdir -p "$T/data"
fold_jobs "0 1 2 3 4 5 6 7" "0 1 2 3" >"$T/first.jsonl"
fold_jobs "0 1 2 3 4 5 6 7" 4 >"$T/last.jsonl"

die() { fail "$*"; for f in "$T"/*.log; do echo "--- $f" >&2; tail -25 "$f" >&2; done; altar_test_end "retention-$TRANSPORT"; exit 1; }

bg "$T/worker.log" "$ALTAR_BIN" worker --config "$T/a.yaml" --id w1 --poll-ms 50
bg "$T/ref.log" "$ALTAR_BIN" reconciler --config "$T/ref.yaml" --group "$prefix.ref" --no-dashboard
recRef=$last
bg "$T/recA.log" "$ALTAR_BIN" reconciler --config "$T/a.yaml" --no-dashboard
recA=$last
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/first.jsonl" >"$T/submit1.log" 2>&1 || die "submit of the first folds"

# Every first fold's events (submitted + succeeded) on the log, and A's
# checkpoint covering all of them.
ends=0
for _ in $(seq 1 600); do
  set -- $(status_ends)
  ends="${1:-0}"
  [ "$ends" -ge 64 ] && [ "$(covered)" -eq "$ends" ] && break
  sleep 0.1
done
[ "$ends" -ge 64 ] || die "the first folds' status events never reached the log ($ends)"
[ "$(covered)" -eq "$ends" ] || die "A's checkpoint never covered the $ends status events (covers $(covered))"
ok "A's checkpoint covers all $ends status events"
# The reference must have read every record before they go (on Kafka it
# joins its group a few seconds late): its ledger's offsets, read-only.
ref_read() { ledger_read "$T/ref.yaml" "$T/ledgerRef"; }
for _ in $(seq 1 600); do
  [ "$(ref_read)" -ge "$ends" ] && break
  sleep 0.1
done
[ "$(ref_read)" -ge "$ends" ] || die "the reference never read the $ends status events (read $(ref_read))"
kill -9 "$recA"

# A week of retention.
"$ALTAR_BIN" log delete-records --config "$T/a.yaml" --topic "$prefix.status" --before end >"$T/delete.log" 2>&1 ||
  die "delete-records: $(cat "$T/delete.log")"
set -- $(status_ends)
gone="${2:-0}"
[ "$gone" -ge $((ends / 2)) ] || die "delete-records left too much history (beginnings sum to $gone of $ends)"
ok "history deleted: $gone of $ends status records gone"

# Control: an empty ledger and no checkpoint cannot see the first folds.
"$ALTAR_BIN" reconciler --config "$T/ctl.yaml" --group "$prefix.ctl" --no-dashboard --exit-when-idle >"$T/ctl.log" 2>&1 ||
  die "the control reconciler failed"
grep -q "no longer on the log" "$T/ctl.log" || fail "the control reconciler did not report the gap in its history"
grep -q "altar reconciler: applied .* 0 fired" "$T/ctl.log" || fail "the control reconciler fired groups without their history"

# Takeover: B starts from the checkpoint, then the fifth folds run.
bg "$T/recB.log" "$ALTAR_BIN" reconciler --config "$T/b.yaml" --no-dashboard
recB=$last
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/last.jsonl" >"$T/submit2.log" 2>&1 || die "submit of the fifth folds"
n=0
for _ in $(seq 1 600); do
  set -- $(count_ready "$prefix.ready")
  n="${1:-0}"
  [ "$n" -ge 8 ] && break
  sleep 0.1
done
grep -q "restored $T/ledgerB from checkpoint" "$T/recB.log" || fail "B did not say it restored from the checkpoint"
grep -q "no longer on the log" "$T/recB.log" && fail "B reported a gap although its checkpoint covers the deleted records"
grep -q "no longer on the log" "$T/ref.log" && fail "the reference reported a gap although it read every record"
[ "$n" -eq 8 ] || die "expected 8 group events on the ready topic after the takeover, saw $n"
set -- $(count_ready "$prefix.ready-ref")
[ "${1:-0}" -eq 8 ] || fail "the reference reconciler fired ${1:-0} groups, expected 8"
# Settle: the worker's last commits and both reconcilers stopped cleanly.
kill -TERM "$recB"
wait "$recB" 2>/dev/null
set -- $(count_ready "$prefix.ready")
[ "$1" -eq 8 ] && [ "$2" -eq 8 ] || fail "ready topic: $1 group events, $2 distinct (expected 8 and 8)"
ok "every group fired exactly once after retention and a takeover"
kill -TERM "$recRef"
wait "$recRef" 2>/dev/null
bsum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerB" 2>&1)"
refsum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerRef" 2>&1)"
[ -n "$bsum" ] && [ "$bsum" = "$refsum" ] || fail "B's ledger ($bsum) differs from the reference's ($refsum)"
ok "checksum equal to the reference that read the whole history"

# The ready and dead topics' retention: which group events are out is
# decided from the ledger, never from what those topics still hold.
for t in "$prefix.ready" "$prefix.dead"; do
  "$ALTAR_BIN" log delete-records --config "$T/a.yaml" --topic "$t" --before end >>"$T/delete-out.log" 2>&1 ||
    die "delete-records on $t: $(cat "$T/delete-out.log")"
done
set -- $(count_ready "$prefix.ready")
left="${1:-0}"
[ "$left" -lt 8 ] || fail "delete-records left all 8 group events on the ready topic"
ok "ready topic's retention: $((8 - left)) of 8 group events deleted"
# Rebuild: from the checkpoint (it exists: B shipped one at its stop).
"$ALTAR_BIN" reconciler --config "$T/b.yaml" --rebuild >"$T/rebuild.log" 2>&1 || die "--rebuild from the checkpoint"
grep -q "^restored checkpoint" "$T/rebuild.log" || fail "--rebuild did not say what it restored"
grep -q " 0 missing events published" "$T/rebuild.log" || fail "--rebuild republished group events"
grep -q "^replaced $bsum" "$T/rebuild.log" && grep -q "^checksum $bsum" "$T/rebuild.log" ||
  fail "--rebuild changed the checksum: $(cat "$T/rebuild.log")"
set -- $(count_ready "$prefix.ready")
[ "${1:-0}" -eq "$left" ] && [ "${2:-0}" -eq "$left" ] || fail "--rebuild published to the ready topic: $1 events, $2 distinct (left: $left)"
# A takeover with the ready records gone: C, an empty ledger, restores the
# checkpoint B shipped at its stop and publishes nothing again.
takeover_config "$T/c.yaml" "$T/ledgerC" "$prefix.ready" "$prefix.dead" "$cp_dir"
"$ALTAR_BIN" reconciler --config "$T/c.yaml" --no-dashboard --exit-when-idle >"$T/recC.log" 2>&1 || die "takeover by C"
grep -q "restored $T/ledgerC from checkpoint" "$T/recC.log" || fail "C did not restore from the checkpoint"
set -- $(count_ready "$prefix.ready")
[ "${1:-0}" -eq "$left" ] && [ "${2:-0}" -eq "$left" ] || fail "the takeover published to the ready topic: $1 events, $2 distinct (left: $left)"
csum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerC" 2>&1)"
[ "$csum" = "$bsum" ] || fail "C's ledger ($csum) differs from B's ($bsum)"
ok "after the ready topic's retention, --rebuild and a takeover published no group event again"
# A kill -9 with group events published after the newest checkpoint: E
# (C's ledger, checkpointing hourly now) fires 16 more models and dies; F,
# an empty ledger, restores the checkpoint C shipped at its stop, reads
# the ready and dead topics from the ends that checkpoint recorded, and
# publishes none of E's 16 again though its tail decides them again.
sed "s#checkpoint_interval_s: 1#checkpoint_interval_s: 3600#" "$T/c.yaml" >"$T/e.yaml"
fold_jobs "$(seq 10 25)" "0 1 2 3 4" >"$T/mid.jsonl"
cp_before="$(covered)"
bg "$T/recE.log" "$ALTAR_BIN" reconciler --config "$T/e.yaml" --no-dashboard
recE=$last
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/mid.jsonl" >"$T/submit-mid.log" 2>&1 || die "submit of the 16 models"
e_read() { ledger_read "$T/e.yaml" "$T/ledgerC"; }
for _ in $(seq 1 900); do
  set -- $(count_ready "$prefix.ready")
  n="${1:-0}"
  [ "$n" -ge $((left + 16)) ] && [ "$(e_read)" -ge "$(status_ends | cut -d' ' -f1)" ] && break
  sleep 0.1
done
[ "$n" -eq $((left + 16)) ] || die "E did not fire the 16 models ($n group events on the ready topic, $left before)"
[ "$(covered)" -eq "$cp_before" ] || fail "E checkpointed ($(covered) covered, $cp_before before): its group events are not after the newest checkpoint"
kill -9 "$recE"
wait "$recE" 2>/dev/null
esum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerC" 2>&1)"
takeover_config "$T/f.yaml" "$T/ledgerF" "$prefix.ready" "$prefix.dead" "$cp_dir"
"$ALTAR_BIN" reconciler --config "$T/f.yaml" --no-dashboard --exit-when-idle >"$T/recF.log" 2>&1 || die "takeover by F"
grep -q "restored $T/ledgerF from checkpoint" "$T/recF.log" || fail "F did not restore from the checkpoint"
grep -q "16 group event(s) published since checkpoint" "$T/recF.log" ||
  fail "F did not find E's 16 group events after the checkpoint: $(grep 'published since\|records no ready' "$T/recF.log")"
grep -q "altar reconciler: applied .* 16 fired" "$T/recF.log" || fail "F's tail did not decide the 16 groups again: $(tail -1 "$T/recF.log")"
set -- $(count_ready "$prefix.ready")
[ "${1:-0}" -eq $((left + 16)) ] && [ "${2:-0}" -eq $((left + 16)) ] ||
  fail "after F's takeover the ready topic holds $1 group events, $2 distinct (expected $((left + 16)) and $((left + 16)))"
fsum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerF" 2>&1)"
[ -n "$fsum" ] && [ "$fsum" = "$esum" ] || fail "F's ledger ($fsum) differs from E's ($esum)"
ok "restore-then-tail after kill -9: E's 16 group events after the checkpoint not published again, checksum equal"
# Without checkpoints the same rebuild refuses, naming the lost offsets.
if "$ALTAR_BIN" reconciler --config "$T/ctl.yaml" --rebuild >"$T/rebuild-ctl.log" 2>&1; then
  fail "--rebuild without a checkpoint succeeded on a log missing its beginning"
fi
grep -q "no longer holds events this rebuild needs (partition" "$T/rebuild-ctl.log" ||
  fail "--rebuild without a checkpoint did not name the missing offsets: $(cat "$T/rebuild-ctl.log")"
# Topic lifetimes on the broker: the fleet creates its status topic with the
# retention it is told, and a reconciler without checkpoints refuses a status
# topic that does not keep everything (the broker reports its retention.ms).
if [ "$TRANSPORT" = kafka ]; then
  p2="$prefix-life"
  altar_test_fleet_config "$p2" "{name: process, data_root: $T/data}" "status_retention_ms: 3600000" >"$T/life.yaml"
  "$ALTAR_BIN" reconciler --config "$T/life.yaml" --exit-when-idle >"$T/life1.log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "keeps records for 3600000 ms (the topic's retention.ms)" "$T/life1.log" ||
    fail "an hour-long status topic without checkpoints: exit $rc: $(cat "$T/life1.log")"
  "$ALTAR_BIN" reconciler --config "$T/life.yaml" --checkpoints "$T/cp-life" --exit-when-idle --quiet >"$T/life2.log" 2>&1 ||
    fail "an hour-long status topic with 60 s checkpoints was refused: $(cat "$T/life2.log")"
  ok "the broker keeps the status topic as configured; recovery's needs are checked against it"
fi
altar_test_end "retention-$TRANSPORT"
