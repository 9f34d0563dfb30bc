#!/bin/sh
# The README's examples run as written (#29 item 5). Blocks are found by the
# `<!-- readme-test: NAME -->` line before them:
#   - quickstart-config and quickstart-run: the 3 models x 5 folds walk-through
#     is run by sh -e in an empty directory with the built altar first on PATH:
#     every command succeeds, --wait ends on its summary, status counts 15
#     succeeded shards and 3 fired groups, the reconciler and both workers
#     served metrics from the one file (each on its own port), and all three
#     exit after the block's kill;
#   - spec: the spec example is a valid spec (`altar spec id`);
#   - reference-config: a reconciler and two workers start from the reference
#     altar.yaml and serve metrics side by side;
#   - pipeline-config and pipeline-run: the 3-stage pipeline (folds ->
#     ensembles -> report) runs as written: --wait follows all three stages,
#     status shows them, and the report holds the 15 fold lines.
# The only edit: the metrics ports (9464, 9470-9479) become ports the kernel
# just gave us, since other runs share this machine; paths stay relative.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin readme python3 curl setsid
README="${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/README.md"
BIN_DIR="$(cd "$(dirname "$ALTAR_BIN")" && pwd)"

# block NAME: the fenced block after the marker line, without its fences.
block() {
  python3 - "$README" "$1" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
mark = "<!-- readme-test: %s -->" % sys.argv[2]
i = lines.index(mark) + 1
assert lines[i].startswith("```"), "no fenced block after " + mark
j = i + 1
while not lines[j].startswith("```"):
    j += 1
print("\n".join(lines[i + 1:j]))
PY
}
rport="$(free_port)"
wport="$(free_port)"
ports() { sed -e "s/127\.0\.0\.1:9464/127.0.0.1:$rport/g" -e "s/127\.0\.0\.1:9470-9479/127.0.0.1:$wport-$((wport + 9))/g"; }
group=""
on_cleanup() { [ -n "$group" ] && kill -9 -- "-$group" 2>/dev/null; }

# ---- the spec example ---------------------------------------------------------
block spec >"$T/spec.json" || fail "README: no spec block"
"$ALTAR_BIN" spec id "$T/spec.json" >"$T/o" 2>"$T/e"
check '[ $? = 0 ] && [ -s "$T/o" ]' "the README's spec example is refused: $(cat "$T/e")"

# ---- the quick start, as written ---------------------------------------------
mkdir -p "$T/qs"
block quickstart-config | ports >"$T/qs/altar.yaml" || fail "README: no quickstart-config block"
block quickstart-run >"$T/qs/walk.sh" || fail "README: no quickstart-run block"
grep -q "127.0.0.1:$rport" "$T/qs/altar.yaml" && grep -q "127.0.0.1:$wport-" "$T/qs/altar.yaml" ||
  fail "the quick-start config has no metrics addresses to run with: $(cat "$T/qs/altar.yaml")"
# Its own session, so whatever it leaves running is found (and killed at cleanup) by group.
(cd "$T/qs" && PATH="$BIN_DIR:$PATH" exec setsid sh -e walk.sh >"$T/qs.out" 2>"$T/qs.err") &
group=$!
i=0
while kill -0 "$group" 2>/dev/null && [ $i -lt 3000 ]; do i=$((i + 1)); sleep 0.1; done
if kill -0 "$group" 2>/dev/null; then
  fail "the walk-through did not finish in 300 s: $(tail -5 "$T/qs.err")"
else
  wait "$group"
  rc=$?
  check '[ $rc = 0 ]' "the walk-through exited $rc: $(tail -8 "$T/qs.err")"
fi
check 'grep -q "altar submit --wait: job j-.* done: 15 of 15 shards finished (15 succeeded, 0 failed); 3 of 3 groups fired" "$T/qs.err"' \
  "no summary line of a job done: $(grep 'submit' "$T/qs.err" | tail -3)"
check 'grep -q "15 succeeded" "$T/qs.out" && grep -q "groups: 3 fired" "$T/qs.out"' "status after the walk-through: $(cat "$T/qs.out")"
check 'grep -q "altar reconciler: serving metrics on http://127.0.0.1:$rport/metrics" "$T/qs.err"' \
  "the reconciler served no metrics: $(grep -i metrics "$T/qs.err")"
served="$(sed -n 's|^altar worker: serving metrics on http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$T/qs.err" | sort -u | wc -l)"
check '[ "$served" = 2 ]' "two workers from one file did not serve metrics on two ports: $(grep -i metrics "$T/qs.err")"
check '! grep -qi "cannot listen\|address already in use" "$T/qs.err"' "a metrics address clashed: $(grep -i listen "$T/qs.err")"
# The block's last line stops the daemons: none of its processes is left.
i=0
while kill -0 -- "-$group" 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
check '! kill -0 -- "-$group" 2>/dev/null' "processes of the walk-through still run after its kill line"
group=""

# ---- the reference config: a reconciler and two workers from one file --------
mkdir -p "$T/ref"
block reference-config | ports >"$T/ref/altar.yaml" || fail "README: no reference-config block"
cd "$T/ref" || exit 1
"$ALTAR_BIN" reconciler --config altar.yaml >"$T/ref-r.log" 2>&1 &
rpid=$!
"$ALTAR_BIN" worker --config altar.yaml --id w1 >"$T/ref-w1.log" 2>&1 &
w1=$!
"$ALTAR_BIN" worker --config altar.yaml --id w2 >"$T/ref-w2.log" 2>&1 &
w2=$!
pids="$pids $rpid $w1 $w2"
# answers PORT: GET /metrics there succeeds.
answers() { curl -sf --noproxy '*' -o /dev/null "http://127.0.0.1:$1/metrics"; }
port_of() { sed -n 's|^altar worker: serving metrics on http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$1" | head -1; }
i=0
while [ $i -lt 600 ]; do
  p1="$(port_of "$T/ref-w1.log")"
  p2="$(port_of "$T/ref-w2.log")"
  if [ -n "$p1" ] && [ -n "$p2" ] && answers "$rport" && answers "$p1" && answers "$p2"; then break; fi
  i=$((i + 1))
  sleep 0.1
done
check '[ -n "$p1" ] && [ -n "$p2" ] && [ "$p1" != "$p2" ] && answers "$rport" && answers "$p1" && answers "$p2"' \
  "reference config: reconciler on $rport, workers on '$p1' and '$p2' do not all answer: $(cat "$T/ref-r.log" "$T/ref-w1.log" "$T/ref-w2.log" | head -20)"
check 'kill -0 $rpid && kill -0 $w1 && kill -0 $w2' "reference config: a daemon exited: $(cat "$T/ref-r.log" "$T/ref-w1.log" "$T/ref-w2.log" | tail -10)"
kill "$rpid" "$w1" "$w2" 2>/dev/null
wait "$rpid" "$w1" "$w2" 2>/dev/null
cd "$T" || exit 1

# ---- the pipeline example, as written -------------------------------------------
mkdir -p "$T/pipe"
block pipeline-config >"$T/pipe/altar.yaml" || fail "README: no pipeline-config block"
block pipeline-run >"$T/pipe/run.sh" || fail "README: no pipeline-run block"
(cd "$T/pipe" && PATH="$BIN_DIR:$PATH" exec setsid sh -e run.sh >"$T/pipe.out" 2>"$T/pipe.err") &
group=$!
i=0
while kill -0 "$group" 2>/dev/null && [ $i -lt 3000 ]; do i=$((i + 1)); sleep 0.1; done
if kill -0 "$group" 2>/dev/null; then
  fail "the pipeline example did not finish in 300 s: $(tail -5 "$T/pipe.err")"
else
  wait "$group"
  rc=$?
  check '[ $rc = 0 ]' "the pipeline example exited $rc: $(tail -8 "$T/pipe.err")"
fi
group=""
check 'grep -q "stage 3: 1 follow-up task of kind report" "$T/pipe.err"' "--wait did not reach the report: $(grep submit "$T/pipe.err" | tail -4)"
check 'grep -q "stage 1: fold: 3 fired" "$T/pipe.out" && grep -q "stage 3: report: 1 fired" "$T/pipe.out"' \
  "status shows no stages: $(cat "$T/pipe.out")"
check '[ "$(grep -c "^model-[123] fold [0-4]$" "$T/pipe.out")" = 15 ]' "the report does not hold the 15 fold lines: $(tail -15 "$T/pipe.out")"

altar_test_end readme
