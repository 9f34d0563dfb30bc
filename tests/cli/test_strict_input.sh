#!/bin/sh
# Strict input where a person typed it: unknown keys in spec files (submit,
# run, spec id) and in altar.yaml are refused naming the file, the line and
# the closest known key; JSON syntax errors name their real line (a trailing
# comma on line 3 of a pretty-printed spec is reported at line 3); submit and
# the daemons refuse to start with no config and no --log-dir/--brokers
# instead of using ./var/log. Nothing is published by a refused submit.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin strict
ALTAR="$ALTAR_BIN"
cd "$T" || exit 1

# refused WHAT WANT_TEXT CMD... : exit 2 and stderr contains WANT_TEXT.
refused() {
  what="$1" want="$2"
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" = 2 ] && grep -qF -- "$want" "$T/err"; then ok "$what"; else fail "$what: exit $rc, stderr: $(cat "$T/err") (want: $want)"; fi
}

# ---- spec typos --------------------------------------------------------------
cat >typo.json <<'JSON'
{
  "kind": "score",
  "image": "none",
  "command": ["/bin/true"],
  "timeout": 1
}
JSON
refused "submit: a spec typo names file, line, suggestion" \
  'typo.json:5: spec: unknown key "timeout" (did you mean "timeout_s"?)' "$ALTAR" submit --log-dir "$T/log" typo.json
refused "run: the same typo" 'typo.json:5: spec: unknown key "timeout" (did you mean "timeout_s"?)' \
  "$ALTAR" run typo.json --data-root "$T/data" --quiet
"$ALTAR" spec id typo.json >/dev/null 2>"$T/err" && fail "spec id accepted a typo" ||
  { grep -qF 'typo.json:5: spec: unknown key "timeout"' "$T/err" && ok "spec id: the same typo" || fail "spec id: $(cat "$T/err")"; }

cat >nested.json <<'JSON'
{"kind": "score", "image": "none", "command": ["/bin/true"],
 "outputs": [{"uri": "file:///tmp/x", "logical_path": "x"},
             {"uri": "file:///tmp/y", "logical_pth": "y"}]}
JSON
refused "a transfer typo names its place" \
  'nested.json:3: spec outputs[1]: unknown key "logical_pth" (did you mean "logical_path"?)' \
  "$ALTAR" submit --log-dir "$T/log" nested.json

printf '%s\n' '{"kind":"score","image":"none","command":["/bin/true"]}' \
  '{"kind":"score","image":"none","command":["/bin/true"],"output":[]}' >lines.jsonl
refused "JSON Lines: the line of the entry" 'lines.jsonl:2: spec: unknown key "output" (did you mean "outputs"?)' \
  "$ALTAR" submit --log-dir "$T/log" lines.jsonl
[ ! -d "$T/log/altar.jobs" ] || [ -z "$(find "$T/log/altar.jobs" -type f -size +0c -name '*.log' 2>/dev/null)" ] &&
  ok "a refused submit published nothing" || fail "a refused submit left records in $T/log"

# ---- JSON syntax: the real line --------------------------------------------
cat >comma.json <<'JSON'
{
  "kind": "score",
  "image": "none",
}
JSON
refused "trailing comma: submit names line 3" 'comma.json:3: invalid JSON at line 3' \
  "$ALTAR" submit --log-dir "$T/log" comma.json
refused "trailing comma: run names line 3" 'invalid JSON at line 3 column' \
  "$ALTAR" run comma.json --data-root "$T/data" --quiet

# ---- config typos ------------------------------------------------------------
printf '%s\n' '{"kind":"score","image":"none","command":["/bin/true"]}' >typo-free.json
printf 'transport:\n  name: local\n  dri: %s/log\n' "$T" >dri.yaml
refused "altar.yaml: a transport key typo" 'dri.yaml:3: transport.dri: unknown key for the local transport (did you mean "dir"?)' \
  "$ALTAR" submit --config dri.yaml lines.jsonl
printf 'transport: {name: local, dir: %s/log}\ntopics:\n  job: x\n' "$T" >topics.yaml
refused "altar.yaml: a topics key typo" 'topics.yaml:3: topics.job: unknown key (did you mean "jobs"?)' \
  "$ALTAR" worker --config topics.yaml
printf 'transport: {name: local, dir: %s/log}\nbakend: {name: process}\n' "$T" >top.yaml
refused "altar.yaml: a top-level typo" 'top.yaml:2: bakend: unknown key (did you mean "backend"?)' \
  "$ALTAR" reconciler --config top.yaml
# Backend keys: each backend's own list, the line of the key, a suggestion.
printf 'transport: {name: local, dir: %s/log}\nbackend:\n  name: process\n  data_root: %s/data\n  slotz: 2\n' "$T" "$T" >process.yaml
refused "altar.yaml: a process backend key typo" 'process.yaml:5: backend.slotz: unknown key for the process backend (did you mean "slots"?)' \
  "$ALTAR" worker --config process.yaml
printf 'transport: {name: local, dir: %s/log}\nbackend:\n  name: docker\n  comand_timeout_s: 30\n' "$T" >docker.yaml
refused "altar.yaml: a docker backend key typo" 'docker.yaml:4: backend.comand_timeout_s: unknown key for the docker backend (did you mean "command_timeout_s"?)' \
  "$ALTAR" worker --config docker.yaml
printf 'transport: {name: local, dir: %s/log}\nbackend:\n  name: kubernetes\n  namespace: batch\n  pvc_nam: data\n' "$T" >k8s.yaml
refused "altar.yaml: a kubernetes backend key typo" 'k8s.yaml:5: backend.pvc_nam: unknown key for the kubernetes backend (did you mean "pvc_name"?)' \
  "$ALTAR" worker --config k8s.yaml
printf 'transport: {name: local, dir: %s/log}\nbackend: {name: modal,\n  app_nam: altar}\n' "$T" >modal.yaml
refused "altar.yaml: a modal backend key typo" 'modal.yaml:3: backend.app_nam: unknown key for the modal backend (did you mean "app_name"?)' \
  "$ALTAR" run --config modal.yaml typo-free.json
printf 'transport: {name: local, dir: %s/log}\nbackend: {slotz: 2, name: process}\n' "$T" >late-name.yaml
refused "altar.yaml: backend keys checked against a name given after them" 'late-name.yaml:2: backend.slotz: unknown key for the process backend (did you mean "slots"?)' \
  "$ALTAR" worker --config late-name.yaml
# A flag has no file or line; the backend refuses it when it is made (exit 1).
"$ALTAR" worker --log-dir "$T/log" --data-root "$T/data" --set backend.slotz=2 >/dev/null 2>"$T/err" &&
  fail "a backend key typo in a flag was accepted" ||
  { grep -qF 'backend.slotz: unknown key for the process backend (did you mean "slots"?)' "$T/err" &&
    ok "a backend key typo in a flag" || fail "a backend key typo in a flag: $(cat "$T/err")"; }
"$ALTAR" worker --log-dir "$T/log" --backend docker --set backend.slotz=2 >/dev/null 2>"$T/err" &&
  fail "a docker backend key typo in a flag was accepted" ||
  { grep -qF 'backend.slotz: unknown key for the docker backend (did you mean "slots"?)' "$T/err" &&
    ok "a docker backend key typo in a flag" || fail "a docker backend key typo in a flag: $(cat "$T/err")"; }

printf '%s\n' '{"kind":"score","image":"none","command":["/bin/true"]}' >typo-free.jsonl
printf 'transport: {name: local, dir: %s/log}\ngroups:\n  score:\n    group_by: [job_id]\n    ready_when: single\n    on_faild: retry\n' "$T" >groups.yaml
refused "altar.yaml: a groups typo" "groups.yaml:6: groups.score: unknown key 'on_faild' (did you mean \"on_failed\"?)" \
  "$ALTAR" submit --config groups.yaml typo-free.jsonl

# ---- labels a kind's readiness rule reads ----------------------------------
# A shard without them would hold its group in the reconciler: submit refuses
# the spec, naming the label and the kind, and publishes nothing.
cat >folds.yaml <<YAML
transport: {name: local, dir: $T/flog}
groups:
  train:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
  train_dflt:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds, default: 1}}
  pair:
    group_by: [job_id]
    ready_when: {all_folds: 2}
  allele:
    group_by: [job_id]
    ready_when: {all_label_values: {label: allele, values: [ref, alt]}}
YAML
printf '%s\n' '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"fold":"0"}}' >nocount.json
refused "submit: all_expected_folds without its count label" \
  "specs[0] (kind 'train'): labels.num_folds: missing; all_expected_folds reads the fold count" \
  "$ALTAR" submit --config folds.yaml nocount.json
printf '%s\n' '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"num_folds":"2"}}' >nofold.json
refused "submit: all_expected_folds without its fold label" \
  "specs[0] (kind 'train'): labels.fold: missing; all_expected_folds" "$ALTAR" submit --config folds.yaml nofold.json
printf '%s\n' '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"fold":"0","num_folds":"two"}}' >badcount.json
refused "submit: all_expected_folds with a count that is not one" \
  "specs[0] (kind 'train'): labels.num_folds: not a fold count" "$ALTAR" submit --config folds.yaml badcount.json
printf '%s\n' '{"kind":"pair","image":"none","command":["/bin/true"],"labels":{"fold":"0"}}' \
  '{"kind":"pair","image":"none","command":["/bin/true"]}' >pair.jsonl
refused "submit: all_folds without fold (the second spec)" "specs[1] (kind 'pair'): labels.fold: missing; all_folds(2)" \
  "$ALTAR" submit --config folds.yaml pair.jsonl
printf '%s\n' '{"kind":"allele","image":"none","command":["/bin/true"]}' >allele.json
refused "submit: all_label_values without its label" "specs[0] (kind 'allele'): labels.allele: missing; all_label_values" \
  "$ALTAR" submit --config folds.yaml allele.json
[ -z "$(find "$T/flog" -path '*altar.jobs*' -type f -size +0c -name '*.log' 2>/dev/null)" ] &&
  ok "refused label checks published nothing" || fail "a refused submit left job records in $T/flog"
# A default count stands in for the label; a full spec goes through.
printf '%s\n' '{"kind":"train_dflt","image":"none","command":["/bin/true"],"labels":{"fold":"0"}}' >dflt.json
"$ALTAR" submit --config folds.yaml dflt.json >/dev/null 2>"$T/err" && ok "submit: a default count needs no label" ||
  fail "submit with a default count: $(cat "$T/err")"
printf '%s\n' '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"fold":"0","num_folds":"1"}}' >full.json
"$ALTAR" submit --config folds.yaml full.json >/dev/null 2>"$T/err" && ok "submit: a labelled fold goes through" ||
  fail "submit of a labelled fold: $(cat "$T/err")"

# ---- no config: refused, nothing invented ------------------------------------
mkdir empty && cd empty || exit 1
good='{"kind":"score","image":"none","command":["/bin/true"]}'
printf '%s\n' "$good" >one.json
refused "submit without a config" "no configuration" "$ALTAR" submit one.json
refused "worker without a config" "no configuration" "$ALTAR" worker --drain 1
refused "reconciler without a config" "no configuration" "$ALTAR" reconciler
refused "dashboard without a config" "no configuration" "$ALTAR" dashboard --addr 127.0.0.1:1
[ ! -e var ] && ok "nothing created under ./var" || fail "./var was created: $(find var | head)"
# An explicit --log-dir passes the check (the kind then has no group, which
# submit reports on its own).
"$ALTAR" submit --log-dir "$T/explicit" one.json >/dev/null 2>"$T/err"
! grep -q "no configuration:" "$T/err" && grep -q "no kind has a group" "$T/err" &&
  ok "submit with an explicit --log-dir gets past the check" || fail "submit --log-dir: $(cat "$T/err")"
[ ! -e var ] && ok "still nothing under ./var" || fail "./var was created by --log-dir"
cd "$T" || exit 1
# A daemon's integer flag out of range names the flag, the range and the value.
refused "reconciler --batch 0" "altar reconciler: --batch: expected an integer in [1, 1000000], got '0'" \
  "$ALTAR" reconciler --log-dir "$T/explicit" --batch 0
refused "worker --drain -1" "altar worker: --drain: expected an integer in [0, 86400], got '-1'" \
  "$ALTAR" worker --log-dir "$T/explicit" --drain -1

[ "$fails" = 0 ] || { echo "$fails check(s) failed" >&2; exit 1; }
echo "all strict-input checks passed"
