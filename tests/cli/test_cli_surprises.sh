#!/bin/sh
# A CLI without surprises (#29 item 4), each asserted on what the binary
# printed, returned or left on disk:
#   - a mistyped command gets "did you mean", `altar help CMD` prints CMD's
#     --help, an unknown one exits 2;
#   - one exit-code rule: bad input exits 2 wherever it comes from: the same
#     typo as --set backend.slotz and in the file, transport.name: lcoal (with
#     FILE:LINE and a suggestion), --transport/--backend typos; every --help
#     documents the rule; errors start "altar CMD";
#   - read-only commands create no file or directory, without a config and
#     against a fleet's existing log and ledger;
#   - cancel of a job nobody knows exits 4 and sends nothing, unless --force;
#   - submit --wait ends on a summary line, on a terminal after the bar too;
#     "1 shard", never "1 shards";
#   - logs --help lists only the options logs takes, and logs refuses the rest.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin surprises python3 script
A="$ALTAR_BIN"

# ---- did you mean, altar help CMD ------------------------------------------
"$A" submti >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 2 ]' "altar submti exited $rc, not 2"
check "grep -q \"unknown command 'submti' (did you mean 'submit'?)\" '$T/e'" "altar submti: no suggestion: $(cat "$T/e")"
"$A" help submit >"$T/help1" 2>&1
rc=$?
"$A" submit --help >"$T/help2" 2>&1
check '[ $rc = 0 ] && cmp -s "$T/help1" "$T/help2" && grep -q "usage: altar submit" "$T/help1"' \
  "altar help submit (exit $rc) is not altar submit --help"
"$A" help log consume >"$T/help1" 2>&1
check 'grep -q "usage: altar log" "$T/help1"' "altar help log consume printed no log usage"
"$A" help stauts >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 2 ] && grep -q "did you mean '"'"'status'"'"'" "$T/e"' "altar help stauts: exit $rc, $(cat "$T/e")"
ok "did-you-mean and altar help CMD"

# ---- one exit-code rule for bad input ---------------------------------------
mkdir -p "$T/empty"
printf 'transport: {name: local, dir: %s/log}\nledger: {path: %s/ledger}\nbackend: {name: process, data_root: %s/data, slots: 2}\ngroups:\n  k: {group_by: [job_id, fold], ready_when: single, on_failed: dead_letter}\n' \
  "$T" "$T" "$T" >"$T/good.yaml"
printf 'transport: {name: local, dir: %s/log}\nbackend:\n  name: process\n  slotz: 2\n' "$T" >"$T/slotz.yaml"
printf 'ledger: {path: %s/ledger}\ntransport:\n  dir: %s/log\n  name: lcoal\n' "$T" "$T" >"$T/lcoal.yaml"
# expect_bad WHAT PATTERN CMD...: exit 2, stderr starts "altar CMD" and has PATTERN.
expect_bad() {
  what="$1"
  pat="$2"
  shift 2
  (cd "$T/empty" && timeout 30 "$A" "$@" </dev/null >"$T/o" 2>"$T/e")
  rc=$?
  if [ $rc != 2 ]; then fail "$what: exit $rc, not 2 ($*): $(head -3 "$T/e")"; return; fi
  if ! grep -qF -- "$pat" "$T/e"; then fail "$what: no '$pat' in: $(head -3 "$T/e")"; return; fi
  if ! head -1 "$T/e" | grep -q "^altar $1[ :]"; then fail "$what: error prefix is not 'altar $1': $(head -1 "$T/e")"; return; fi
  ok
}
for cmd in worker reconciler submit status jobs workers cancel dashboard; do
  expect_bad "$cmd --set backend.slotz" '--set backend.slotz: unknown key for the process backend (did you mean "slots"?)' \
    $cmd --config "$T/good.yaml" --set backend.slotz=2 j-1
  expect_bad "$cmd slotz: in the file" "$T/slotz.yaml:4: backend.slotz: unknown key for the process backend (did you mean \"slots\"?)" \
    $cmd --config "$T/slotz.yaml" j-1
  expect_bad "$cmd transport.name: lcoal" "$T/lcoal.yaml:4: transport.name: unknown transport \"lcoal\" (did you mean \"local\"? known: kafka, local)" \
    $cmd --config "$T/lcoal.yaml" j-1
done
for sub in list stats checksum; do
  expect_bad "ledger $sub transport.name: lcoal" "$T/lcoal.yaml:4: transport.name" ledger $sub --config "$T/lcoal.yaml"
done
expect_bad "log topics lcoal" "$T/lcoal.yaml:4: transport.name" log topics --config "$T/lcoal.yaml"
expect_bad "--transport lcoal" '--transport: transport.name: unknown transport "lcoal" (did you mean "local"? known:' \
  log topics --transport lcoal --log-dir "$T/log"
expect_bad "--backend procss" '--backend: backend.name: unknown backend "procss" (did you mean "process"? known:' \
  worker --config "$T/good.yaml" --backend procss
expect_bad "--set transport.dri" '--set transport.dri: unknown key for the local transport (did you mean "dir"?)' \
  status --config "$T/good.yaml" --set transport.dri=x j-1
expect_bad "--slots x" 'backend.slots' worker --config "$T/good.yaml" --slots x
expect_bad "--set ledger.pth" '--set ledger.pth: unknown setting (did you mean "ledger.path"?)' \
  jobs --config "$T/good.yaml" --set ledger.pth=x
expect_bad "submit --bogus" "unknown option '--bogus'" submit --config "$T/good.yaml" --bogus
for cmd in codec spec digest ledger log run submit cancel worker reconciler status logs jobs workers dashboard demo; do
  "$A" help $cmd >"$T/o" 2>&1 || fail "altar help $cmd failed"
  grep -q "2 bad input, wherever it comes from" "$T/o" || fail "altar $cmd --help does not state the exit-code rule"
done
ok "bad input exits 2 from flags and the file alike; every --help says so"
[ -z "$(ls -A "$T/empty")" ] || fail "bad input left files behind: $(ls -A "$T/empty")"

# ---- read-only commands create nothing --------------------------------------
readonly_cmds() { # the read-only commands, with $@ as extra flags
  for c in "status j-1" "status j-1 --json" "jobs" "workers" "logs 0123456789abcdef" "logs j-1 --failed" \
    "ledger list" "ledger show process:x" "ledger stats" "ledger dump" "ledger checksum" "log topics" \
    "log offsets --group altar.workers" "log consume --topic altar.status --from-beginning --exit"; do
    (cd "$T/empty" && timeout 30 "$A" $c "$@" </dev/null >"$T/ro.out" 2>"$T/ro.err")
    echo "$c => $?" >>"$T/ro.log"
  done
}
readonly_cmds
created="$(cd "$T/empty" && find . -mindepth 1)"
check '[ -z "$created" ]' "read-only commands without a config created: $created"
check 'grep -q "^status j-1 => 2" "$T/ro.log"' "status without a config: $(grep '^status j-1 ' "$T/ro.log")"
(cd "$T/empty" && "$A" status j-1 2>"$T/e")
check 'grep -q "^altar status: no configuration" "$T/e"' "status without a config says: $(cat "$T/e")"

# A real fleet: reconciler and worker on $T/log, $T/ledger.
"$A" reconciler --config "$T/good.yaml" >"$T/reconciler.log" 2>&1 &
rpid=$!
pids="$pids $rpid"
"$A" worker --config "$T/good.yaml" --id w1 --poll-ms 50 >"$T/worker.log" 2>&1 &
wpid=$!
pids="$pids $wpid"
spec() { printf '{"kind":"k","image":"none","command":["/bin/true"],"labels":{"fold":"%s"}}\n' "$1"; }
{ spec 1; spec 2; } >"$T/two.jsonl"
spec 1 >"$T/one.jsonl"
# Not a terminal: the group lines and the summary are plain lines.
timeout 120 "$A" submit --config "$T/good.yaml" --wait "$T/two.jsonl" >"$T/job1" 2>"$T/wait1.err"
rc=$?
job1="$(cat "$T/job1")"
check '[ $rc = 0 ]' "submit --wait of two shards exited $rc: $(cat "$T/wait1.err")"
check 'grep -q "(1 shard) \[" "$T/wait1.err" && ! grep -q "1 shards" "$T/wait1.err"' "plural of 1 shard: $(cat "$T/wait1.err")"
last="$(tail -1 "$T/wait1.err")"
case "$last" in
"altar submit --wait: job $job1 done: 2 of 2 shards finished (2 succeeded, 0 failed); 2 of 2 groups fired, 0 dead-lettered, 0 cancelled, 0 open;"*) ok "summary line without a terminal" ;;
*) fail "submit --wait does not end on a summary: $last" ;;
esac
# On a terminal (script(1) gives it one): the bar, then the summary on a line of its own.
SCRIPT_CMD="'$A' submit --config '$T/good.yaml' --wait '$T/one.jsonl'"
timeout 120 script -qec "$SCRIPT_CMD" /dev/null >"$T/tty.out" 2>&1 </dev/null
rc=$?
tr -d '\r' <"$T/tty.out" | sed 's/\x1b\[K//g' >"$T/tty.txt"
check '[ $rc = 0 ]' "submit --wait on a terminal exited $rc: $(tail -3 "$T/tty.txt")"
check 'grep -q "1/1 shards done" "$T/tty.txt"' "no progress bar on a terminal: $(cat "$T/tty.txt")"
check 'tail -1 "$T/tty.txt" | grep -q "^altar submit --wait: job .* done: 1 of 1 shard finished (1 succeeded, 0 failed); 1 of 1 group fired"' \
  "on a terminal the wait does not end on the summary: $(tail -2 "$T/tty.txt")"

# ---- cancel ------------------------------------------------------------------
ends() { "$A" log topics --config "$T/good.yaml" --topic altar.status --json 2>/dev/null | python3 -c '
import json, sys
print(sum(p["end"] for t in json.load(sys.stdin) for p in t["partitions"]))'; }
before="$(ends)"
"$A" cancel --config "$T/good.yaml" j-doesnotexist >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 4 ] && grep -q "^altar cancel: unknown job j-doesnotexist" "$T/e"' "cancel of an unknown job: exit $rc: $(cat "$T/e") $(cat "$T/o")"
check '[ "$(ends)" = "$before" ] && [ -n "$before" ]' "cancel of an unknown job wrote to the status topic ($before -> $(ends))"
"$A" cancel --config "$T/good.yaml" --force j-doesnotexist >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 0 ] && grep -q "cancel of job j-doesnotexist sent to" "$T/o"' "cancel --force: exit $rc: $(cat "$T/e")"
check '[ "$(ends)" -gt "$before" ]' "cancel --force sent nothing to the status topic"
"$A" cancel --config "$T/good.yaml" "$job1" >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 0 ]' "cancel of known job $job1 (in the ledger): exit $rc: $(cat "$T/e")"
# A job only on a pool's jobs topic (no worker serves h100, so no record): known too.
printf '{"kind":"k","image":"none","command":["/bin/true"],"labels":{"fold":"9"},"resources":{"gpu":"h100","count":1}}\n' >"$T/h100.jsonl"
hjob="$("$A" submit --config "$T/good.yaml" "$T/h100.jsonl" 2>/dev/null)"
"$A" ledger list --config "$T/good.yaml" --label job_id="$hjob" >"$T/o" 2>&1
check '[ ! -s "$T/o" ] || ! grep -q "$hjob" "$T/o"' "the h100 job has a ledger record: $(cat "$T/o")"
"$A" cancel --config "$T/good.yaml" "$hjob" >"$T/o" 2>"$T/e"
rc=$?
check '[ $rc = 0 ]' "cancel of job $hjob (only on altar.jobs.h100): exit $rc: $(cat "$T/e")"

# ---- read-only against the fleet's own log and ledger ------------------------
kill "$wpid" "$rpid" 2>/dev/null
wait "$wpid" "$rpid" 2>/dev/null
snapshot() { (cd "$T" && find log ledger data -printf '%p %s %T@\n' | sort); }
snapshot >"$T/before.txt"
: >"$T/ro.log"
readonly_cmds --config "$T/good.yaml"
snapshot >"$T/after.txt"
if cmp -s "$T/before.txt" "$T/after.txt"; then ok "read-only commands left the fleet's log, ledger and data as they were"
else fail "read-only commands changed files: $(diff "$T/before.txt" "$T/after.txt" | head -10)"; fi
check 'grep -q "^jobs => 0" "$T/ro.log" && grep -q "^status j-1 => 4" "$T/ro.log"' "read-only commands on a fleet: $(cat "$T/ro.log")"
created="$(cd "$T/empty" && find . -mindepth 1)"
check '[ -z "$created" ]' "read-only commands with a config created in the working directory: $created"

# ---- logs --help lists only what logs takes ---------------------------------
"$A" logs --help >"$T/o"
for flag in --transport --brokers --log-dir --backend --slots --partitions; do
  if grep -qe "^ *$flag " "$T/o"; then fail "logs --help lists $flag, which logs does not read"; fi
done
for flag in --config --data-root --ledger --set --stdout --stderr --failed; do
  grep -qE -e "^ *(--[a-z-]+, )?$flag[ ,]" "$T/o" || fail "logs --help does not list $flag"
done
expect_bad "logs --transport" "unknown option '--transport'" logs --transport local 0123456789abcdef
ok "logs --help"

altar_test_end surprises
