#!/bin/sh
# altar ledger: apply a status stream with two 5-fold groups, a 1-shard group
# and a group blocked by a failed shard; the group events printed must be
# exactly the expected ones, and replaying the stream into a fresh ledger
# (with a different batch size) must give the same events and checksum.
set -eu
BIN="${ALTAR_BIN:?ALTAR_BIN must name the altar binary}"
T="$(mktemp -d "${TMPDIR:-/tmp}/altar-ledger-cli.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$T/altar.yaml" <<'YAML'
ledger: {path: ./unused}
groups:
  train:
    group_by: [job_id, model_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
YAML

# ev EVENT EID JOB MODEL FOLD NFOLDS STATE TS
ev() {
  labels="{\"job_id\":\"$3\",\"model_id\":\"$4\",\"fold\":\"$5\",\"num_folds\":\"$6\"}"
  spec=null failure=null
  if [ "$1" = submitted ]; then
    spec="{\"kind\":\"train\",\"image\":\"img:1\",\"command\":[\"train\",\"--fold\",\"$5\"],\"labels\":$labels}"
  fi
  if [ "$7" = failed ]; then
    failure='{"reason":"exit_3","detail":"bad input","deterministic":true,"exit_code":3}'
  fi
  printf '{"v":1,"type":"status","event":"%s","task_key":"tk-%s","kind":"train","handle":{"backend":"process","external_id":"%s","labels":%s,"plugin_identity":null},"state":"%s","failure":%s,"spec":%s,"worker":"w1","source":null,"ts":%s}\n' \
    "$1" "$2" "$2" "$labels" "$7" "$failure" "$spec" "$8"
}

{
  t=0
  for m in m1 m2; do for f in 0 1 2 3 4; do t=$((t + 1)); ev submitted "$m-$f" j1 "$m" "$f" 5 pending "$t"; done; done
  t=$((t + 1)); ev submitted m3-0 j1 m3 0 1 pending "$t"
  t=$((t + 1)); ev submitted b-0 j2 mb 0 2 pending "$t"
  t=$((t + 1)); ev submitted b-1 j2 mb 1 2 pending "$t"
  # Interleave the two 5-fold groups; m1 finishes first.
  for f in 4 3 2 1 0; do
    t=$((t + 1)); ev state "m1-$f" j1 m1 "$f" 5 running "$t"
    t=$((t + 1)); ev state "m2-$f" j1 m2 "$f" 5 running "$t"
    t=$((t + 1)); ev state "m1-$f" j1 m1 "$f" 5 succeeded "$t"
  done
  t=$((t + 1)); ev state m3-0 j1 m3 0 1 succeeded "$t"
  t=$((t + 1)); ev state b-0 j2 mb 0 2 succeeded "$t"
  t=$((t + 1)); ev state b-1 j2 mb 1 2 failed "$t"
  for f in 0 1 2 3 4; do t=$((t + 1)); ev state "m2-$f" j1 m2 "$f" 5 succeeded "$t"; done
  t=$((t + 1)); ev state m1-2 j1 m1 2 5 succeeded "$t"   # late duplicate: fires nothing
} >"$T/events.jsonl"

"$BIN" ledger apply --help >/dev/null || fail "apply --help"
for c in list show stats dump checksum; do "$BIN" ledger "$c" --help >/dev/null || fail "$c --help"; done

cd "$T"
"$BIN" ledger apply --ledger "$T/l1" --groups "$T/altar.yaml" "$T/events.jsonl" >"$T/out1.jsonl" 2>"$T/err1" ||
  { cat "$T/err1" >&2; fail "apply into l1"; }
# Same stream from stdin, one event per batch, groups read from --config.
"$BIN" ledger apply --ledger "$T/l2" --config "$T/altar.yaml" --batch 1 - <"$T/events.jsonl" >"$T/out2.jsonl" 2>"$T/err2" ||
  { cat "$T/err2" >&2; fail "apply into l2"; }

# The events, reduced to what a reader checks: event, kind, group, shard ids, ts.
summary() {
  jq -c '[.event, .kind, .group_key, [.shards[].external_id], .ts, (.event_id | length), .type, .v]' "$1"
}
cat >"$T/want" <<'WANT'
["fired","train","j1:m1",["m1-0","m1-1","m1-2","m1-3","m1-4"],28,64,"group",1]
["fired","train","j1:m3",["m3-0"],29,64,"group",1]
["dead_lettered","train","j2:mb",["b-1"],31,64,"group",1]
["fired","train","j1:m2",["m2-0","m2-1","m2-2","m2-3","m2-4"],36,64,"group",1]
WANT
summary "$T/out1.jsonl" >"$T/got" || fail "output is not JSON lines"
diff -u "$T/want" "$T/got" || fail "group events differ from the expected ones"
cmp -s "$T/out1.jsonl" "$T/out2.jsonl" || { diff -u "$T/out1.jsonl" "$T/out2.jsonl" >&2; fail "batch size changed the group events"; }
# Event ids: SHA-256 over msgpack {group_key, kind, task_keys (sorted)},
# computed independently (a few lines of Python with its own msgpack writer).
cat >"$T/want_ids" <<'IDS'
0d26b751a9e68a93087315f61f2c84bfe06c50d3fc8918d67052f8552bef33a6
6e97fbe4cea5ed0827ae252d333d3c1e9ed5539240ab199c03ef9f2e6e00a0ff
b0f1f682096d5c9ac8dde40e5c1bc098264ee7040fc571a7a5f077c1a6c72627
79d6169eb76f5eb17d8c1f5d5bb939da048d123e9aac07ef491f956ea4b9c622
IDS
jq -r .event_id "$T/out1.jsonl" >"$T/got_ids"
diff -u "$T/want_ids" "$T/got_ids" || fail "event ids differ from the expected ones"
grep -q "applied" "$T/err1" || fail "no summary on stderr"

s1="$("$BIN" ledger checksum --ledger "$T/l1")"
s2="$("$BIN" ledger checksum --ledger "$T/l2")"
case "$s1" in sha256:????????????????????????????????????????????????????????????????) ;; *) fail "bad checksum '$s1'" ;; esac
[ "$s1" = "$s2" ] || fail "checksums differ: $s1 vs $s2"

# Applying the stream again re-submits every task under the same external id:
# the consumed records re-open (the contract's rule) and the groups fire
# again, never under a second id; the settled ledger has the same content.
"$BIN" ledger apply --ledger "$T/l1" --groups "$T/altar.yaml" "$T/events.jsonl" >"$T/out3.jsonl" 2>/dev/null || fail "re-apply"
cmp -s "$T/out1.jsonl" "$T/out3.jsonl" || fail "a re-run group fired with different bytes or id"
[ "$("$BIN" ledger checksum --ledger "$T/l1")" = "$s1" ] || fail "re-run changed the settled ledger"

# Inspection.
"$BIN" ledger stats --ledger "$T/l1" --json | jq -e '.records == 13 and .consumed == 13 and .open == 0' >/dev/null || fail "stats"
[ "$("$BIN" ledger dump --ledger "$T/l1" | wc -l)" -eq 13 ] || fail "dump line count"
"$BIN" ledger dump --ledger "$T/l1" | jq -c 'select(.handle.external_id == "b-1")' | jq -e '.state == "failed" and .failure.reason == "exit_3" and .task_key == "tk-b-1" and .group_key == "j2:mb"' >/dev/null || fail "dump of b-1"
[ "$("$BIN" ledger list --ledger "$T/l1" --state failed | wc -l)" -eq 1 ] || fail "list --state failed"
[ "$("$BIN" ledger list --ledger "$T/l1" --label model_id=m2 | wc -l)" -eq 5 ] || fail "list --label"
[ "$("$BIN" ledger list --ledger "$T/l1" --kind other | wc -l)" -eq 0 ] || fail "list --kind"
"$BIN" ledger show --ledger "$T/l1" process:m3-0 | jq -e '.consumed and .spec.command[2] == "0"' >/dev/null || fail "show"

# Errors: clear messages, non-zero exits.
if "$BIN" ledger show --ledger "$T/l1" process:nope 2>"$T/e"; then fail "show of a missing record succeeded"; fi
grep -q "nope" "$T/e" || fail "show error does not name the record"
if "$BIN" ledger list --ledger "$T/none" 2>"$T/e"; then fail "list of a missing ledger succeeded"; fi
grep -q "none" "$T/e" || fail "missing-ledger error does not name it"
printf '{"v":1,"type":"status","event":"state"\n' >"$T/bad.jsonl"
if "$BIN" ledger apply --ledger "$T/l3" --groups "$T/altar.yaml" "$T/bad.jsonl" 2>"$T/e"; then fail "bad JSON accepted"; fi
grep -q "bad.jsonl:1" "$T/e" || fail "bad JSON error does not name file and line"
printf 'train:\n  group_by: [job_id]\n  ready_when: {al_folds: 2}\n' >"$T/badgroups.yaml"
if "$BIN" ledger apply --ledger "$T/l3" --groups "$T/badgroups.yaml" "$T/events.jsonl" 2>"$T/e"; then fail "bad groups accepted"; fi
grep -q "badgroups.yaml:3: train.ready_when" "$T/e" || fail "bad groups error: $(cat "$T/e")"
if "$BIN" ledger list --ledger "$T/l1" --state sleeping 2>/dev/null; then fail "unknown state accepted"; fi
echo "ok: altar ledger apply/list/show/stats/dump/checksum"
