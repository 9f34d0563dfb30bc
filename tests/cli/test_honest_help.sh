#!/bin/sh
# Help and output that tell the truth:
#   - run/worker --help list every registered backend and --transport every
#     registered transport (the names the "known: …" errors give);
#   - every option a command's --help lists is accepted by that command (run
#     with the option, it never says "unknown option"), and status/log do not
#     list backend flags they ignore;
#   - `altar status` of an unknown job exits 4 with a message;
#   - `log consume` says where it starts and that an --exit run from the end
#     read nothing; records on the DLQ print with their headers
#     (altar.dlq.reason), others with --headers;
#   - `log offsets --group altar.reconcilers` lists the status partitions with
#     the offsets the running reconciler stored in its ledger;
#   - a worker prints a line per task start and end (--task-lines, as on a
#     terminal) naming itself, -q silences them, its summary names it.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin help
ALTAR="$ALTAR_BIN"

# ---- plug-in names from the registries --------------------------------------
echo '{"kind":"k","image":"none","command":["/bin/true"]}' >"$T/spec.json"
backends="$("$ALTAR" run "$T/spec.json" --backend nope --data-root "$T/d" 2>&1 | sed -n 's/.*known: \([^)]*\)).*/\1/p' | tr -d ',')"
transports="$("$ALTAR" log topics --transport nope --log-dir "$T/l" 2>&1 | sed -n 's/.*known: \([^)]*\)).*/\1/p' | tr -d ',')"
[ -n "$backends" ] && [ -n "$transports" ] || fail "no known names in the errors (backends '$backends', transports '$transports')"
for cmd in run worker; do
  line="$("$ALTAR" $cmd --help | grep -e '--backend NAME ')"
  for b in $backends; do
    echo "$line" | grep -qw -- "$b" || fail "$cmd --help does not list backend $b: $line"
  done
done
for cmd in worker submit status log reconciler; do
  line="$("$ALTAR" $cmd --help | grep -e '--transport NAME')"
  for tr in $transports; do
    echo "$line" | grep -qw -- "$tr" || fail "$cmd --help does not list transport $tr: $line"
  done
done
ok "help lists backends ($backends) and transports ($transports)"

for cmd in status log jobs workers dashboard reconciler submit; do
  if "$ALTAR" $cmd --help | grep -qE -e '--(backend|data-root|slots) '; then fail "$cmd --help lists backend flags it ignores"; fi
done
ok "no backend flags where no backend runs"

# ---- every listed option is accepted ----------------------------------------
# options CMD: the --options its help lists, as "opt" or "opt=" (takes a value).
# Taken from the option lines ("  --opt VALUE  text", "  -q, --opt") and the
# usage line's "[--opt VALUE]", not from mentions in prose.
options() {
  "$ALTAR" "$@" --help >"$T/help.txt"
  {
    grep -oE -e '^ +(-[a-z], )?--[a-z][a-z-]*( [A-Z][A-Z0-9:,=_.]*)?' "$T/help.txt" | sed -E 's/^ +(-[a-z], )?//'
    grep -oE -e '\[--[a-z][a-z-]*( [A-Z][A-Z0-9:,=_.]*)?' "$T/help.txt" | sed 's/^\[//'
  } | sed -E 's/ .+/=/' | grep -v -e '^--help' | sort -u
}
# try WHAT CMD... : the options of `altar WHAT` each given to CMD... (value 1).
try() {
  what="$1"
  shift
  n=0
  for o in $(options $what); do
    # --brokers is followed by --transport local, so nothing waits for a broker.
    case "$o" in
    --brokers=) set -- "$@" --brokers 127.0.0.1:1 --transport local; n=4 ;;
    *=) set -- "$@" "${o%=}" 1; n=2 ;;
    *) set -- "$@" "$o"; n=1 ;;
    esac
    timeout 20 "$ALTAR" "$@" >"$T/o.out" 2>"$T/o.err" </dev/null
    if grep -qiE 'unknown (option|argument)|unexpected argument' "$T/o.err"; then fail "$what: $o listed in --help but refused: $(head -2 "$T/o.err")"; fi
    # Drop the option again (the last n arguments).
    args=""
    i=0
    cnt=$#
    for a in "$@"; do
      i=$((i + 1))
      [ $i -le $((cnt - n)) ] && args="$args $(printf '%s' "$a" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
    done
    eval "set -- $args"
  done
  ok "every option in '$what --help' is accepted"
}
L="--log-dir $T/log"
mkdir -p "$T/empty"
cd "$T/empty" || exit 1
try status status $L --ledger "$T/led" j-none
try jobs jobs $L --ledger "$T/led"
try workers workers $L
try "log" log topics $L
# submit: a spec with a typo stops it after the options were read.
printf '{"kind":"k","imgae":"x"}\n' >"$T/typo.json"
try submit submit $L "$T/typo.json"
# daemons: a bogus metrics address stops them after the options were read.
try worker worker $L --data-root "$T/d" --set metrics.worker_addr=bogus
try reconciler reconciler $L --ledger "$T/led" --set metrics.addr=bogus
try dashboard dashboard $L --ledger "$T/led" --addr bogus
cd "$T" || exit 1

# ---- status of an unknown job -------------------------------------------------
# On a log that exists (status reads only: it creates no log to look in).
"$ALTAR" log create-topic $L --topic altar.jobs >/dev/null 2>&1 || fail "log create-topic failed"
"$ALTAR" status $L --ledger "$T/led" j-doesnotexist >"$T/s.out" 2>"$T/s.err"
rc=$?
[ "$rc" = 4 ] && grep -q "job j-doesnotexist not found" "$T/s.err" && ok "status of an unknown job exits 4" ||
  fail "status j-doesnotexist: exit $rc: $(cat "$T/s.err")"

# ---- a small fleet: DLQ headers, reconciler offsets, worker lines ------------
cat >"$T/altar.yaml" <<YAML
transport: {name: local, dir: $T/fleet}
topics: {partitions: 2}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/ledger}
groups:
  probe: {group_by: [job_id], ready_when: single}
YAML
mkdir -p "$T/data"
cfg="--config $T/altar.yaml"
"$ALTAR" reconciler $cfg --no-dashboard --quiet >"$T/rec.log" 2>&1 &
pids="$pids $!"
echo '{"kind":"probe","image":"none","command":["/bin/true"]}' >"$T/probe.json"
job="$("$ALTAR" submit $cfg "$T/probe.json" 2>"$T/submit.err")" || fail "submit: $(cat "$T/submit.err")"
printf 'not-a-job\n' | "$ALTAR" log produce $cfg --topic altar.jobs >/dev/null 2>"$T/p.err" || fail "produce: $(cat "$T/p.err")"
"$ALTAR" worker $cfg --id w-help --exit-when-idle --task-lines --drain 5 >"$T/w.log" 2>&1 || fail "worker: $(tail -3 "$T/w.log")"
grep -q "altar worker w-help: started probe task [0-9a-f]* of job $job" "$T/w.log" && ok "a task start line" ||
  fail "no start line: $(cat "$T/w.log")"
grep -q "altar worker w-help: succeeded probe task [0-9a-f]* of job $job" "$T/w.log" && ok "a task end line" ||
  fail "no end line: $(cat "$T/w.log")"
grep -q "^altar worker w-help: consumed 2," "$T/w.log" && ok "the summary names the worker" ||
  fail "summary: $(tail -2 "$T/w.log")"

# -q: no task lines, no summary.
echo '{"kind":"probe","image":"none","command":["/bin/true","2"]}' >"$T/probe2.json"
"$ALTAR" submit $cfg "$T/probe2.json" >/dev/null 2>"$T/submit.err" || fail "submit 2: $(cat "$T/submit.err")"
"$ALTAR" worker $cfg --id w-quiet --exit-when-idle --task-lines -q --drain 5 >"$T/wq.log" 2>&1 || fail "worker -q: $(cat "$T/wq.log")"
[ ! -s "$T/wq.log" ] && ok "-q silences the worker" || fail "-q printed: $(cat "$T/wq.log")"

"$ALTAR" log consume $cfg --topic altar.dlq --from-beginning --exit >"$T/dlq.out" 2>"$T/dlq.err"
grep -q '"altar.dlq.reason":' "$T/dlq.out" && grep -q "not-a-job" "$T/dlq.out" && ok "DLQ records show their headers" ||
  fail "DLQ without headers: $(cat "$T/dlq.out" "$T/dlq.err")"
"$ALTAR" log consume $cfg --topic altar.jobs --from-beginning --exit --headers --max 1 >"$T/h.out" 2>/dev/null
[ "$(cut -c1 "$T/h.out")" = "{" ] && grep -q "	" "$T/h.out" && ok "--headers on another topic" || fail "--headers: $(cat "$T/h.out")"
"$ALTAR" log consume $cfg --topic altar.jobs --exit >"$T/end.out" 2>"$T/end.err"
grep -q "from the end" "$T/end.err" && grep -q "no records" "$T/end.err" && ok "consume says where it starts" ||
  fail "consume from the end: $(cat "$T/end.err")"
"$ALTAR" log consume $cfg --topic altar.jobs --from-beginning --exit >/dev/null 2>"$T/beg.err"
grep -q "from the beginning" "$T/beg.err" && ok "consume --from-beginning says so" || fail "$(cat "$T/beg.err")"

# The reconciler has stored the status partitions' offsets in its ledger
# (bounded wait: it applies the events as they come).
i=0
while [ $i -lt 300 ]; do
  "$ALTAR" log offsets $cfg --group altar.reconcilers --json >"$T/off.json" 2>"$T/off.err"
  if python3 - "$T/off.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
live = [r for r in rows if r["end"] > 0]
ok = rows and all(r["topic"] == "altar.status" for r in rows) and live and all(r["committed"] == r["end"] and r["lag"] == 0 for r in live)
sys.exit(0 if ok else 1)
PY
  then break; fi
  i=$((i + 1))
  sleep 0.1
done
[ $i -lt 300 ] && ok "log offsets --group altar.reconcilers shows the ledger's offsets" ||
  fail "reconciler offsets: $(cat "$T/off.json" "$T/off.err")"
grep -q "offsets as stored in the ledger" "$T/off.err" && ok "offsets say where they come from" || fail "$(cat "$T/off.err")"

[ "$fails" = 0 ] || { echo "$fails check(s) failed" >&2; exit 1; }
echo "all honest-help checks passed"
