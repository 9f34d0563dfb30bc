# Shared body of the partition takeover tests (sourced; needs
# TRANSPORT=local|kafka). A reconciler that is already running takes a
# partition over from a checkpoint (docs/state.md, "Taking over a partition
# into a ledger that is not empty"):
#   8 models x 5 folds, grouped by model, ready when all 5 folds succeeded,
#   and 16 more models whose fifth folds run before the takeover.
#   - reconcilers A and B, one consumer group, a ledger each, both shipping
#     checkpoints every second to one storage (each through a link of its
#     own to it); each owns some of the 4 status partitions (their logs say
#     which);
#   - folds 0-3 of the 24 models run; for every partition, some checkpoint
#     covers all its status events; a reference reconciler (its own group,
#     ledger and output topics) reads them all live;
#   - every status record so far is deleted (`altar log delete-records`;
#     with KEEP_LOG=1 the log stays whole: the survivor must import all the
#     same, replaying would publish the dead owner's groups again);
#     the reconciler owning more of the status events (V) loses its
#     checkpoint storage (its link replaced by a file: its checkpoints fail
#     from then on); the 16 models' fifth folds run and fire, those of V's
#     partitions after V's newest checkpoint; then V is killed -9;
#   - the survivor (S) gains V's partitions, holding less of them than a
#     checkpoint covers (with the log deleted, less than where it begins), and
#     imports each from the checkpoint covering it furthest
#     (its log and altar_reconciler_partitions_imported_total say so; no gap
#     is counted in altar_reconciler_history_gaps_total); its tail decides
#     V's groups fired after the checkpoint again and finds them on the
#     ready topic from the ends the checkpoint recorded: not published again;
#   - the 8 models' fifth folds run: each of the 24 group events is on the
#     ready topic exactly once (by event id), none on the dead topic, and
#     S's ledger has the checksum of the reference.
# With CRASH=1 (test_partition_takeover_crash_local, _kafka) S dies by SIGKILL right
# after its last import is written, before that partition's tail is applied
# (A and B run with ALTAR_TEST_KILL_AFTER_IMPORT naming a file the test
# fills with the number of V's partitions with events once V is known) and
# is started again: it imports nothing (its ledger covers the
# checkpoints), reads the ready and dead topics again from the ends the
# import markers it finds recorded, publishes none of V's groups again, and
# drops each marker once the partition is applied up to its end at the
# import; every check above holds.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/takeover.sh"
altar_test_begin "partition-takeover-${KEEP_LOG:+whole-}${CRASH:+crash-}$TRANSPORT" python3 curl
# The fault (CRASH=1): whichever of A and B survives dies right after its
# last import, once $T/kill-after-imports says how many that is.
kill_env=""
[ "${CRASH:-0}" = 1 ] && kill_env="env ALTAR_TEST_KILL_AFTER_IMPORT=$T/kill-after-imports"
prefix="pt-$(date +%s)-$$"
cp_dir="$T/checkpoints"
mkdir -p "$cp_dir"
ln -s "$cp_dir" "$T/cpA"
ln -s "$cp_dir" "$T/cpB"
takeover_config "$T/a.yaml" "$T/ledgerA" "$prefix.ready" "$prefix.dead" "$T/cpA"
takeover_config "$T/b.yaml" "$T/ledgerB" "$prefix.ready" "$prefix.dead" "$T/cpB"
takeover_config "$T/ref.yaml" "$T/ledgerRef" "$prefix.ready-ref" "$prefix.dead-ref" ""
mkdir -p "$T/data"
fold_jobs "0 1 2 3 4 5 6 7 $(seq 10 25)" "0 1 2 3" >"$T/first.jsonl"
fold_jobs "$(seq 10 25)" 4 >"$T/mid.jsonl"
fold_jobs "0 1 2 3 4 5 6 7" 4 >"$T/last.jsonl"
die() { fail "$*"; for f in "$T"/*.log; do echo "--- $f" >&2; tail -25 "$f" >&2; done; altar_test_end "partition-takeover-$TRANSPORT"; exit 1; }
# The status partitions a reconciler owns now, by its log ("assigned T 0 3",
# "revoked T 3"), one per line.
owned() {
  sed -n "s/^altar reconciler: \(assigned\|revoked\) $prefix.status\(\( [0-9]*\)*\)\$/\1\2/p" "$1" |
    python3 -c 'import sys
s = set()
for l in sys.stdin:
    w = l.split()
    s = s | set(w[1:]) if w[0] == "assigned" else s - set(w[1:])
print("\n".join(sorted(s)))'
}
metric() { curl -fsS "http://127.0.0.1:$1/metrics" 2>/dev/null | sed -n "s/^$2 //p"; }

bg "$T/worker.log" "$ALTAR_BIN" worker --config "$T/a.yaml" --id w1 --poll-ms 50
bg "$T/ref.log" "$ALTAR_BIN" reconciler --config "$T/ref.yaml" --group "$prefix.ref" --no-dashboard
recRef=$last
portA="$(free_port)"
bg "$T/recA.log" $kill_env "$ALTAR_BIN" reconciler --config "$T/a.yaml" --metrics "127.0.0.1:$portA" --no-dashboard
recA=$last
for _ in $(seq 1 600); do
  [ "$(owned "$T/recA.log" | wc -l)" -eq 4 ] && break
  sleep 0.1
done
[ "$(owned "$T/recA.log" | wc -l)" -eq 4 ] || die "A was never assigned the 4 status partitions: $(owned "$T/recA.log")"
portB="$(free_port)"
bg "$T/recB.log" $kill_env "$ALTAR_BIN" reconciler --config "$T/b.yaml" --metrics "127.0.0.1:$portB" --no-dashboard
recB=$last
for _ in $(seq 1 900); do
  na="$(owned "$T/recA.log" | wc -l)" nb="$(owned "$T/recB.log" | wc -l)"
  [ "$na" -ge 1 ] && [ "$nb" -ge 1 ] && [ $((na + nb)) -eq 4 ] && break
  sleep 0.1
done
[ "$na" -ge 1 ] && [ "$nb" -ge 1 ] && [ $((na + nb)) -eq 4 ] ||
  die "A and B never split the 4 status partitions (A: $(owned "$T/recA.log" | tr '\n' ' '), B: $(owned "$T/recB.log" | tr '\n' ' '))"
[ -e "$cp_dir/latest.json" ] && fail "a checkpoint was shipped before any status event (B would have restored it)"
ok "A owns partitions $(owned "$T/recA.log" | tr '\n' ' ')and B $(owned "$T/recB.log" | tr '\n' ' ')"

"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/first.jsonl" >"$T/submit1.log" 2>&1 || die "submit of the first folds"
# Every first fold's events on the log, and for each partition a
# checkpoint covering all of them (A's or B's).
all_covered() { # exit 0 when every partition with events is covered to its end
  status_ends_by_part >"$T/ends.txt"
  covered_by_part >"$T/cov.txt"
  python3 - "$T/ends.txt" "$T/cov.txt" <<'EOF'
import sys
ends = dict(l.split() for l in open(sys.argv[1]) if l.strip())
cov = dict(l.split() for l in open(sys.argv[2]) if l.strip())
sys.exit(0 if ends and all(int(e) == 0 or int(cov.get(p, -1)) >= int(e) for p, e in ends.items()) else 1)
EOF
}
succeeded() { # status events saying a task succeeded
  "$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$prefix.status" --from-beginning --exit 2>/dev/null |
    python3 -c 'import json,sys
def ok(o):
    if isinstance(o, dict):
        return o.get("state") == "succeeded" or any(ok(v) for v in o.values())
    return isinstance(o, list) and any(ok(v) for v in o)
print(sum(1 for l in sys.stdin if l.strip() and ok(json.loads(l))))'
}
for _ in $(seq 1 600); do
  [ "$(succeeded)" -ge 96 ] && break
  sleep 0.1
done
[ "$(succeeded)" -eq 96 ] || die "the 96 first folds did not all succeed ($(succeeded) succeeded)"
for _ in $(seq 1 600); do
  all_covered && break
  sleep 0.1
done
ends="$(awk '{s += $2} END {print s + 0}' "$T/ends.txt")"
all_covered || die "the checkpoints never covered every partition (ends: $(tr '\n' ' ' <"$T/ends.txt"), covered: $(tr '\n' ' ' <"$T/cov.txt"))"
ok "every status partition's $ends events are covered by a checkpoint of A or B"
for _ in $(seq 1 600); do
  [ "$(ledger_read "$T/ref.yaml" "$T/ledgerRef")" -ge "$ends" ] && break
  sleep 0.1
done
[ "$(ledger_read "$T/ref.yaml" "$T/ledgerRef")" -ge "$ends" ] || die "the reference never read the $ends status events"

# The victim: whichever of A and B owns more of the status events.
events_of() { # RECLOG: status events in the partitions it owns
  owned "$1" >"$T/own.txt"
  python3 - "$T/own.txt" "$T/ends.txt" <<'EOF'
import sys
own = set(l.strip() for l in open(sys.argv[1]) if l.strip())
print(sum(int(e) for p, e in (l.split() for l in open(sys.argv[2]) if l.strip()) if p in own))
EOF
}
ea="$(events_of "$T/recA.log")" eb="$(events_of "$T/recB.log")"
if [ "$ea" -ge "$eb" ]; then
  victim=$recA vlog="$T/recA.log" vport=$portA survivor=$recB slog="$T/recB.log" sport=$portB sledger="$T/ledgerB"
  sname=B vname=A sconf="$T/b.yaml"
else
  victim=$recB vlog="$T/recB.log" vport=$portB survivor=$recA slog="$T/recA.log" sport=$portA sledger="$T/ledgerA"
  sname=A vname=B sconf="$T/a.yaml"
fi
# Its partitions that hold status events: each is imported (one without
# events begins at 0, where any ledger stands).
owned "$vlog" >"$T/own.txt"
vparts="$(python3 - "$T/own.txt" "$T/ends.txt" <<'EOF'
import sys
own = set(l.strip() for l in open(sys.argv[1]) if l.strip())
print(" ".join(p for p, e in (l.split() for l in open(sys.argv[2]) if l.strip()) if p in own and int(e) > 0))
EOF
)"
nv="$(echo $vparts | wc -w)"
# The survivor dies right after its nv-th import.
[ "${CRASH:-0}" = 1 ] && echo "$nv" >"$T/kill-after-imports"
[ "$ea" -gt 0 ] && [ "$eb" -gt 0 ] || echo "note: one reconciler's partitions got no status events (A: $ea, B: $eb)"
[ "$((ea + eb))" -eq "$ends" ] || fail "A's ($ea) and B's ($eb) partitions do not hold the $ends status events"

# A week of retention (unless KEEP_LOG=1), then the victim's host dies.
if [ "${KEEP_LOG:-0}" = 1 ]; then
  ok "the status log kept whole ($ends records)"
else
  "$ALTAR_BIN" log delete-records --config "$T/a.yaml" --topic "$prefix.status" --before end >"$T/delete.log" 2>&1 ||
    die "delete-records: $(cat "$T/delete.log")"
  set -- $(status_ends)
  gone="${2:-0}"
  [ "$gone" -ge $((ends / 2)) ] || die "delete-records left too much history (beginnings sum to $gone of $ends)"
  ok "history deleted: $gone of $ends status records gone"
fi
# V's checkpoint storage fails from now on; the 16 models fire, those of
# V's partitions after V's newest checkpoint.
rm "$T/cp$vname" && : >"$T/cp$vname"
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/mid.jsonl" >"$T/submit-mid.log" 2>&1 || die "submit of the 16 models' fifth folds"
[ "$(wait_ready "$prefix.ready" 16)" -eq 16 ] || die "the 16 models did not fire before the takeover"
for _ in $(seq 1 300); do
  [ "$(metric "$vport" altar_reconciler_checkpoint_failures_total)" -ge 1 ] 2>/dev/null && break
  sleep 0.1
done
[ "$(metric "$vport" altar_reconciler_checkpoint_failures_total)" -ge 1 ] 2>/dev/null ||
  fail "$vname's checkpoints did not fail after its storage went"
ok "the 16 models fired; $vname's checkpoints fail from now on"
kill -9 "$victim"
wait "$victim" 2>/dev/null
ok "$vname (owning $(owned "$vlog" | tr '\n' ' ')with events in $vparts: $([ $vname = A ] && echo "$ea" || echo "$eb") status events) killed -9"

# The survivor gains the victim's partitions and imports each.
for _ in $(seq 1 900); do
  [ "$(owned "$slog" | wc -l)" -eq 4 ] && [ "$(grep -c ": taken over from checkpoint" "$slog")" -ge "$nv" ] && break
  sleep 0.1
done
[ "$(owned "$slog" | wc -l)" -eq 4 ] || die "$sname never gained $vname's partitions (owns $(owned "$slog" | tr '\n' ' '))"
fails0=$fails
for p in $vparts; do
  grep -q "^altar reconciler: $prefix.status/$p: taken over from checkpoint .* key(s) imported, reading on from offset" "$slog" ||
    fail "$sname did not take partition $p over from a checkpoint"
done
if [ "${CRASH:-0}" = 1 ]; then
  # It dies right after the last import's write, that partition's tail unread.
  for _ in $(seq 1 300); do
    kill -0 "$survivor" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$survivor" 2>/dev/null && die "$sname still runs after its imports (the injected fault did not fire)"
  wait "$survivor"
  src=$?
  [ "$src" -eq 137 ] || fail "$sname exited with $src after its imports, expected 137 (SIGKILL)"
  grep -q "ALTAR_TEST_KILL_AFTER_IMPORT: killed -9 after import $nv\$" "$slog" ||
    fail "$sname did not die by the injected fault"
else
  for _ in $(seq 1 100); do [ "$(metric "$sport" altar_reconciler_partitions_imported_total)" = "$nv" ] && break; sleep 0.1; done
  [ "$(metric "$sport" altar_reconciler_partitions_imported_total)" = "$nv" ] ||
    fail "altar_reconciler_partitions_imported_total is $(metric "$sport" altar_reconciler_partitions_imported_total), expected $nv"
fi
[ "$fails" -eq "$fails0" ] || die "$sname did not take $vname's partitions $vparts over"
ok "$sname took $vname's partitions $vparts over from checkpoints"
if [ "${CRASH:-0}" = 1 ]; then
  ok "$sname killed -9 by ALTAR_TEST_KILL_AFTER_IMPORT after the imports, before their tails"
  # Started again: its ledger holds the imports (nothing to import), and
  # the import markers say where the ready and dead topics are read from.
  # A partition imported in an earlier turn may have had its tail applied
  # (and its marker dropped) before the last import: not the last one.
  dropped1="$(grep -c ": import marker dropped" "$slog")"
  slog="$T/rec${sname}2.log"
  sport="$(free_port)"
  bg "$slog" "$ALTAR_BIN" reconciler --config "$sconf" --metrics "127.0.0.1:$sport" --no-dashboard
  survivor=$last
  for _ in $(seq 1 900); do
    [ "$(owned "$slog" | wc -l)" -eq 4 ] && [ "$(grep -c "published since checkpoint" "$slog")" -ge 1 ] && break
    sleep 0.1
  done
  [ "$(owned "$slog" | wc -l)" -eq 4 ] || die "$sname, started again, does not own the 4 partitions ($(owned "$slog" | tr '\n' ' '))"
  marks="$(grep -c "^altar reconciler: $prefix.status/[0-9]* was imported from checkpoint .* not yet applied up to offset" "$slog")"
  [ "$marks" -ge 1 ] && [ "$marks" -eq $((nv - dropped1)) ] ||
    fail "$sname found $marks import markers at its start, expected $((nv - dropped1)) ($nv partitions imported, $dropped1 applied before the kill)"
  grep -q ": taken over from checkpoint" "$slog" && fail "$sname imported again although its ledger holds the imports"
  [ "$(metric "$sport" altar_reconciler_partitions_imported_total)" = 0 ] ||
    fail "$sname, started again, counts $(metric "$sport" altar_reconciler_partitions_imported_total) imports (expected 0)"
  ok "$sname started again: $marks import markers read, nothing imported again"
fi

# V's groups fired after its newest checkpoint: decided again, not published again.
seen="$(sed -n 's/^altar reconciler: \([0-9]*\) group event(s) published since checkpoint .*/\1/p' "$slog" | awk '{s += $1} END {print s + 0}')"
if [ "$seen" -ge 1 ]; then
  ok "$sname found $seen group events published after the checkpoint it imported from"
else
  fail "$sname found none of $vname's group events published after the checkpoint it imported from"
fi
"$ALTAR_BIN" submit --config "$T/a.yaml" "$T/last.jsonl" >"$T/submit2.log" 2>&1 || die "submit of the fifth folds"
n="$(wait_ready "$prefix.ready" 24)"
[ "$n" -eq 24 ] || die "expected 24 group events on the ready topic after the takeover, saw $n"
if [ "${CRASH:-0}" = 1 ]; then
  # Every imported partition's tail applied: its marker goes.
  for _ in $(seq 1 300); do
    [ "$(grep -c ": import marker dropped" "$slog")" -ge "$marks" ] && break
    sleep 0.1
  done
  dropped="$(grep -c "^altar reconciler: $prefix.status/[0-9]*: applied up to offset [0-9]*, its end at the import: import marker dropped" "$slog")"
  [ "$dropped" -eq "$marks" ] || fail "$sname dropped $dropped import markers, expected $marks"
fi
[ "$(metric "$sport" altar_reconciler_history_gaps_total)" = 0 ] ||
  fail "$sname counted $(metric "$sport" altar_reconciler_history_gaps_total) history gap(s) (expected 0)"
grep -q "no longer on the log" "$slog" && fail "$sname reported a gap although checkpoints cover the deleted records"
grep -q "no longer on the log" "$T/ref.log" && fail "the reference reported a gap although it read every record"
# Settle: the survivor stops cleanly, then the reference once it read everything.
kill -TERM "$survivor"
wait "$survivor" 2>/dev/null
set -- $(count_ready "$prefix.ready")
[ "$1" -eq 24 ] && [ "$2" -eq 24 ] || fail "ready topic: $1 group events, $2 distinct (expected 24 and 24)"
set -- $(count_ready "$prefix.dead")
[ "${1:-0}" -eq 0 ] || fail "dead topic: ${1:-0} group events (expected none)"
ok "every group fired exactly once after a partition takeover"
set -- $(status_ends)
for _ in $(seq 1 600); do
  [ "$(ledger_read "$T/ref.yaml" "$T/ledgerRef")" -ge "$1" ] && break
  sleep 0.1
done
kill -TERM "$recRef"
wait "$recRef" 2>/dev/null
set -- $(count_ready "$prefix.ready-ref")
[ "${1:-0}" -eq 24 ] || fail "the reference reconciler fired ${1:-0} groups, expected 24"
ssum="$("$ALTAR_BIN" ledger checksum --ledger "$sledger" 2>&1)"
refsum="$("$ALTAR_BIN" ledger checksum --ledger "$T/ledgerRef" 2>&1)"
[ -n "$ssum" ] && [ "$ssum" = "$refsum" ] || fail "$sname's ledger ($ssum) differs from the reference's ($refsum)"
ok "checksum equal to the reference that read the whole history"
altar_test_end "partition-takeover-$TRANSPORT"
