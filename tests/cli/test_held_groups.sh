#!/bin/sh
# A kind whose readiness rule cannot decide (all_expected_folds, shards
# without the count label, no default) in a running fleet: the reconciler
# holds the group (logged, counted, listed by `altar status`), sends nothing
# to the DLQ and fires nothing of it; restarted with the kind fixed, it fires
# the group once.
set -eu
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin held-groups
BIN="$ALTAR_BIN"
# Here the first failure ends the test, with the daemons' logs.

mkdir -p "$T/data"
# The configuration the shards were submitted under had a default count; the
# one the reconciler first runs with has lost it.
for v in fixed broken; do
  dflt=", default: 1"
  [ "$v" = broken ] && dflt=""
  cat >"$T/$v.yaml" <<YAML
transport: {name: local, dir: $T/log}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/ledger}
groups:
  train:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds$dflt}}
    on_failed: dead_letter
YAML
done
echo '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"fold":"0"}}' >"$T/spec.json"
job="$("$BIN" submit --config "$T/fixed.yaml" "$T/spec.json" 2>"$T/submit.log")" || fatal "submit"
"$BIN" worker --config "$T/fixed.yaml" --exit-when-idle --quiet >"$T/worker.log" 2>&1 || fatal "worker"

"$BIN" reconciler --config "$T/broken.yaml" --exit-when-idle >"$T/rec1.log" 2>&1 || fatal "reconciler (broken config) stopped"
grep -q "group train:$job held" "$T/rec1.log" && grep -q "num_folds" "$T/rec1.log" && grep -q "; 1 group held" "$T/rec1.log" && ok "the hold is logged with the rule's error" ||
  fatal "no hold logged"
"$BIN" status --config "$T/broken.yaml" "$job" --json >"$T/status.json" 2>"$T/status.log" || true
python3 - "$T/status.json" "$job" <<'PY' && ok "altar status lists the held group" || fatal "status: $(cat "$T/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
held = s["held"]
assert len(held) == 1 and held[0]["group"] == "train:" + sys.argv[2], held
assert "num_folds" in held[0]["reason"], held
assert s["groups"]["fired"] == 0 and s["groups"]["dead_lettered"] == 0, s["groups"]
assert s["shards"]["succeeded"] == 1 and s["shards"]["consumed"] == 0, s["shards"]
PY
"$BIN" log consume --config "$T/broken.yaml" --topic altar.dlq --from-beginning --exit >"$T/dlq.out" 2>/dev/null || true
[ ! -s "$T/dlq.out" ] && ok "nothing went to the DLQ" || fatal "DLQ: $(cat "$T/dlq.out")"

"$BIN" reconciler --config "$T/fixed.yaml" --exit-when-idle >"$T/rec2.log" 2>&1 || fatal "reconciler (fixed config)"
grep -q "held group train:$job decided again: fired" "$T/rec2.log" && ok "the fixed kind fires the held group" ||
  fatal "held group not fired"
"$BIN" reconciler --config "$T/fixed.yaml" --exit-when-idle >"$T/rec3.log" 2>&1 || fatal "reconciler (again)"
"$BIN" status --config "$T/fixed.yaml" "$job" --json >"$T/status2.json" 2>"$T/status.log" || true
python3 - "$T/status2.json" <<'PY' && ok "fired once, held no more" || fatal "status: $(cat "$T/status2.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["held"] == [], s["held"]
assert s["groups"]["fired"] == 1, s["groups"]
assert s["shards"]["consumed"] == 1, s["shards"]
PY
[ "$fails" = 0 ] || { echo "$fails check(s) failed" >&2; exit 1; }
echo "all held-group checks passed"
