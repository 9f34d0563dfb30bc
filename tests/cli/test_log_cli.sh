#!/bin/sh
# `altar log` on the local transport: produce with keys, topics, consume from
# the beginning and as a group (commits, resume), offsets and lag, altar
# messages decoded to JSON, --config with a YAML file, --help and bad usage.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin log-cli
SRC="${ALTAR_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
D="$T/log"
check() { # description, then a command that must succeed
  d="$1"
  shift
  if "$@"; then ok; else fail "$d"; fi
}

# ---- produce with keys ----
printf 'k1:one\nk2:two\nk1:three\nk3:four\n' >"$T/in"
if "$ALTAR_BIN" log produce --topic t1 --dir "$D" --key-delimiter : <"$T/in" 2>"$T/err"; then ok; else fail "produce: $(cat "$T/err")"; fi
check "produce reports acknowledgements" grep -q "4 acknowledged, 0 failed" "$T/err"

# ---- topics ----
"$ALTAR_BIN" log topics --dir "$D" --json >"$T/topics" 2>"$T/err" || fail "topics: $(cat "$T/err")"
total=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print(sum(p["end"]-p["beginning"] for x in t if x["topic"]=="t1" for p in x["partitions"]))' "$T/topics" 2>/dev/null)
[ "$total" = 4 ] && ok || fail "topics: expected 4 records in t1, got '$total'"
"$ALTAR_BIN" log topics --dir "$D" | grep -q '^t1 ' && ok || fail "topics table lacks t1"

# ---- consume everything, keys kept ----
"$ALTAR_BIN" log consume --topic t1 --dir "$D" --from-beginning --exit --key-delimiter = >"$T/all" 2>"$T/err" || fail "consume: $(cat "$T/err")"
sort "$T/all" >"$T/all.s"
printf 'k1=one\nk1=three\nk2=two\nk3=four\n' >"$T/want"
cmp -s "$T/all.s" "$T/want" && ok || fail "consume --from-beginning: got $(cat "$T/all")"
# Same key, same partition, in order: one before three.
grep -n '^k1=' "$T/all" | tr '\n' ' ' | grep -q 'one.*three' && ok || fail "k1 records out of order"

# ---- a group: reads all, commits, and a second run resumes after them ----
"$ALTAR_BIN" log consume --topic t1 --dir "$D" --group g1 --exit >"$T/g1" 2>"$T/err" || fail "group consume: $(cat "$T/err")"
[ "$(wc -l <"$T/g1")" -eq 4 ] && ok || fail "group consume: expected 4 lines, got $(wc -l <"$T/g1")"
printf 'k4:five\n' | "$ALTAR_BIN" log produce --topic t1 --dir "$D" --key-delimiter : 2>/dev/null || fail "produce five"
"$ALTAR_BIN" log consume --topic t1 --dir "$D" --group g1 --exit >"$T/g1b" 2>"$T/err" || fail "group resume: $(cat "$T/err")"
[ "$(cat "$T/g1b")" = "five" ] && ok || fail "group resume: expected only 'five', got '$(cat "$T/g1b")'"

# ---- offsets: committed everywhere, no lag ----
"$ALTAR_BIN" log offsets --dir "$D" --group g1 --json >"$T/off" 2>"$T/err" || fail "offsets: $(cat "$T/err")"
lag=$(python3 -c 'import json,sys; print(sum(e["lag"] for e in json.load(open(sys.argv[1]))))' "$T/off" 2>/dev/null)
[ "$lag" = 0 ] && ok || fail "offsets: expected lag 0, got '$lag' ($(cat "$T/off"))"
"$ALTAR_BIN" log offsets --dir "$D" --group never-consumed --topic t1 --json >"$T/off2" 2>/dev/null || fail "offsets of an unknown group"
lag=$(python3 -c 'import json,sys; print(sum(e["lag"] for e in json.load(open(sys.argv[1]))))' "$T/off2" 2>/dev/null)
[ "$lag" = 5 ] && ok || fail "offsets of a new group: expected lag 5, got '$lag'"
"$ALTAR_BIN" log offsets --dir "$D" --group g1 | grep -q 'COMMITTED' && ok || fail "offsets table header"

# ---- altar messages print decoded, others as text ----
for v in "$SRC"/schemas/vectors/job/*.json; do
  tr -d '\n' <"$v"
  echo
done >"$T/jobs.jsonl"
"$ALTAR_BIN" log produce --topic jobs --dir "$D" --encode job --partition 0 <"$T/jobs.jsonl" 2>"$T/err" || fail "produce --encode job: $(cat "$T/err")"
echo "not an altar message" | "$ALTAR_BIN" log produce --topic jobs --dir "$D" --partition 0 2>/dev/null
"$ALTAR_BIN" log consume --topic jobs --dir "$D" --from-beginning --exit >"$T/jobs.out" 2>"$T/err" || fail "consume jobs: $(cat "$T/err")"
njobs=$(grep -c '"type":"job"' "$T/jobs.out")
[ "$njobs" -eq "$(wc -l <"$T/jobs.jsonl")" ] && ok || fail "decoded jobs: expected $(wc -l <"$T/jobs.jsonl"), got $njobs: $(cat "$T/jobs.out")"
tail -1 "$T/jobs.out" | grep -qx "not an altar message" && ok || fail "plain text record not printed as text"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]' "$T/jobs.out" && ok || fail "decoded lines are not JSON"

# ---- --config with a YAML file ----
cat >"$T/altar.yaml" <<YAML
transport:
  name: local
  dir: $D
  fsync: always
YAML
"$ALTAR_BIN" log topics --config "$T/altar.yaml" | grep -q '^jobs ' && ok || fail "--config: topics lacks jobs"

# ---- bad input: clear errors, right exit codes ----
echo '{"type":"job","spec":42}' | "$ALTAR_BIN" log produce --topic jobs --dir "$D" --encode job 2>"$T/err"
[ $? -eq 1 ] && ok || fail "bad JSON for --encode should exit 1"
grep -q "stdin line 1" "$T/err" && ok || fail "bad --encode error should name the line: $(cat "$T/err")"
"$ALTAR_BIN" log produce --topic '../x' --dir "$D" </dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q topic "$T/err" && ok || fail "illegal topic name accepted: $(cat "$T/err")"
"$ALTAR_BIN" log consume --dir "$D" 2>/dev/null
[ $? -eq 2 ] && ok || fail "consume without --topic should exit 2"
"$ALTAR_BIN" log produce --topic t1 --dir "$D" --bogus 2>/dev/null
[ $? -eq 2 ] && ok || fail "unknown option should exit 2"
"$ALTAR_BIN" log frobnicate 2>/dev/null
[ $? -eq 2 ] && ok || fail "unknown subcommand should exit 2"
"$ALTAR_BIN" log consume --topic nope --dir "$D" --exit 2>"$T/err"
[ $? -eq 1 ] && grep -q nope "$T/err" && ok || fail "consume of a missing topic: $(cat "$T/err")"
for c in produce consume topics offsets; do
  "$ALTAR_BIN" log $c --help | grep -q "usage: altar log" && ok || fail "log $c --help"
done

altar_test_end test_log_cli
