#!/bin/sh
# A retried shard keeps every attempt as evidence (issue #29, item 1): fold 2
# of a 3-fold job times out printing "ERROR: ... GPU worker stalled" on
# stderr and succeeds on its retry. Both attempts, the first with its reason
# (timeout) and its stderr, must be in `altar logs`, `altar ledger show` (of
# either run's record), `altar status --json`, the dashboard's /api/job and
# its job page in headless chromium (dashboard_browser.py --attempts); and
# the same after `altar reconciler --rebuild`, whose checksum (which covers
# the attempts) must equal the live ledger's. Real reconciler, worker and
# process backend on the embedded log.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin attempts python3 curl chromium
browser_py=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import websocket' 2>/dev/null; then browser_py="$py"; break; fi
done
[ -n "$browser_py" ] || { echo "FAIL: python3-websocket is required (scripts/install-deps.sh test)" >&2; exit 1; }
shots="$PWD/attempts-screenshots"
port="$(free_port)"
mkdir -p "$T/data"
cat >"$T/altar.yaml" <<YAML
transport: {name: local, dir: $T/log}
backend: {name: process, data_root: $T/data, slots: 3}
ledger: {path: $T/ledger}
groups:
  train:
    group_by: [job_id, model]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: retry
    max_restarts: 2
    attempts_keep: 5
YAML
cfg="--config $T/altar.yaml"

# Fold 2 stalls the first time it runs (its marker file is not there yet)
# and is killed at its 2 s timeout; the retry finds the marker and succeeds.
python3 - "$T" >"$T/specs.jsonl" <<'PY'
import json, sys
root = sys.argv[1]
flaky = ('if [ ! -e "$1" ]; then touch "$1"; echo "loading weights" ; '
         'echo "ERROR: fold 2: GPU worker stalled" >&2; sleep 60; fi; echo "fold 2 trained"')
for f in range(3):
    cmd = ["/bin/sh", "-c", flaky, "x", f"{root}/stalled-once"] if f == 2 else ["/bin/echo", f"fold {f} trained"]
    print(json.dumps({"kind": "train", "image": "none", "command": cmd, "timeout_s": 2,
                      "labels": {"model": "model-1", "fold": str(f), "num_folds": "3"}}))
PY

"$ALTAR_BIN" reconciler $cfg --metrics "127.0.0.1:$port" >"$T/reconciler.log" 2>&1 &
rec=$!
"$ALTAR_BIN" worker $cfg --id att-w1 >"$T/worker.log" 2>&1 &
wrk=$!
pids="$rec $wrk"
job="$("$ALTAR_BIN" submit $cfg --wait --timeout 180 "$T/specs.jsonl" 2>"$T/submit.log")"
rc=$?
check '[ "$rc" = 0 ]' "submit --wait: exit $rc (want 0: the group fired after the retry): $(cat "$T/submit.log")"
check '[ -e "$T/stalled-once" ]' "fold 2 never ran its stalling first attempt"

# Fold 2's task key and its two records (the replaced run and the shard's own).
"$ALTAR_BIN" ledger list $cfg --label fold=2 --json >"$T/fold2.jsonl" 2>"$T/list.err"
tk="$(python3 -c 'import json,sys; print({json.loads(l)["task_key"] for l in open(sys.argv[1])}.pop())' "$T/fold2.jsonl")"
runs="$(python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(" ".join(r["handle"]["backend"] + ":" + r["handle"]["external_id"] for r in recs))' "$T/fold2.jsonl")"
check '[ "$(echo $runs | wc -w)" = 2 ]' "fold 2 should have two records (two runs): $runs"

# Every reader, checked once live and once after the rebuild.
check_readers() {
  when="$1"
  "$ALTAR_BIN" logs $cfg "$tk" >"$T/logs.$when.txt" 2>&1 || fail "$when: altar logs $tk failed: $(cat "$T/logs.$when.txt")"
  python3 - "$T/logs.$when.txt" <<'PY' || fail "$when: altar logs does not show both attempts: $(cat "$T/logs.$when.txt")"
import re, sys
t = open(sys.argv[1]).read()
assert ": 2 attempts ==" in t, t
a1 = t.index("-- attempt 1: failed timeout")
a2 = t.index("-- attempt 2: succeeded")
assert a1 < t.index("ERROR: fold 2: GPU worker stalled") < a2, t  # the first run's stderr, under it
assert "(worker att-w1" in t[a1:a2], t
assert "fold 2 trained" in t[a2:], t  # the last run's own output
assert "superseded" not in t, t
PY
  for r in $runs; do
    "$ALTAR_BIN" ledger show $cfg "$r" >"$T/show.$when.json" 2>&1 || fail "$when: ledger show $r: $(cat "$T/show.$when.json")"
    python3 - "$T/show.$when.json" <<'PY' || fail "$when: ledger show $r: $(cat "$T/show.$when.json")"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["attempts"]
assert [x["attempt"] for x in a] == [1, 2], a
assert a[0]["state"] == "failed" and a[0]["reason"] == "timeout" and not a[0]["deterministic"], a[0]
assert "ERROR: fold 2: GPU worker stalled" in a[0]["detail"], a[0]
assert a[0]["worker"] == "att-w1" and a[0]["ended_at"] > 0, a[0]
assert a[1]["state"] == "succeeded" and a[1]["reason"] is None, a[1]
assert a[1]["worker"] == "att-w1" and a[1]["restart_count"] == 1, a[1]
assert a[1]["started_at"] > 0 and a[1]["ended_at"] >= a[1]["started_at"], a[1]
assert a[1]["started_at"] >= a[0]["ended_at"], a  # in the order they ran
assert d["attempts_dropped"] == 0, d
PY
  done
  "$ALTAR_BIN" status $cfg "$job" --json >"$T/status.$when.json" 2>"$T/status.err" || fail "$when: status --json: $(cat "$T/status.err")"
  python3 - "$T/status.$when.json" "$tk" <<'PY' || fail "$when: status --json: $(cat "$T/status.$when.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["shards"]["total"] == 3 and d["shards"]["succeeded"] == 3, d["shards"]
assert d["failed"] == [], d["failed"]
r = d["retried"]
assert len(r) == 1 and r[0]["task_key"] == sys.argv[2] and r[0]["labels"]["fold"] == "2", r
a = r[0]["attempts"]
assert [(x["state"], x["reason"]) for x in a] == [("failed", "timeout"), ("succeeded", None)], a
assert "GPU worker stalled" in a[0]["detail"], a
PY
  "$ALTAR_BIN" status $cfg "$job" >"$T/status.$when.txt" 2>&1
  grep -q "retried: .*fold=2.*attempt 1 failed timeout (worker att-w1).*GPU worker stalled.*attempt 2 succeeded" \
    "$T/status.$when.txt" || fail "$when: status text: $(cat "$T/status.$when.txt")"
}
check_readers live

# The dashboard's JSON and its job page in chromium.
i=0
until curl -sf --noproxy '*' "http://127.0.0.1:$port/api/job?id=$job" >"$T/api.json" && python3 - "$T/api.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = [s for g in d["group_list"] for s in g["members"]]
sys.exit(0 if len(m) == 3 and all(s["state"] == "succeeded" for s in m) else 1)
PY
do
  i=$((i + 1)); [ $i -lt 100 ] || { fail "/api/job never showed 3 succeeded shards: $(cat "$T/api.json")"; break; }; sleep 0.2
done
python3 - "$T/api.json" <<'PY' || fail "/api/job: $(cat "$T/api.json")"
import json, sys
d = json.load(open(sys.argv[1]))
m = [s for g in d["group_list"] for s in g["members"]]
assert not any((s["failure"] or {}).get("reason") == "superseded" for s in m), m  # no replaced run as a shard
r = [s for s in m if s["attempts"] == 2]
assert len(r) == 1, m
a = r[0]["attempt_list"]
assert [(x["attempt"], x["state"], x["reason"]) for x in a] == [(1, "failed", "timeout"), (2, "succeeded", None)], a
assert "ERROR: fold 2: GPU worker stalled" in a[0]["detail"] and a[0]["worker"] == "att-w1", a
assert all(len(s["attempt_list"]) == 1 for s in m if s is not r[0]), m
PY
"$browser_py" "$ALTAR_SOURCE_DIR/tests/integration/dashboard_browser.py" --attempts "http://127.0.0.1:$port" "$job" "$shots" \
  >"$T/browser.log" 2>&1 || fail "the browser checks failed: $(cat "$T/browser.log")"

# Rebuilt from the status topic: the same attempts, and the same checksum.
kill -TERM "$rec" "$wrk"
wait "$rec" || fail "the reconciler did not stop cleanly"
wait "$wrk" 2>/dev/null
pids=""
live_sum="$("$ALTAR_BIN" ledger checksum $cfg)"
"$ALTAR_BIN" reconciler $cfg --rebuild >"$T/rebuild.log" 2>&1 || fail "--rebuild: $(cat "$T/rebuild.log")"
grep -q "^checksum $live_sum" "$T/rebuild.log" || fail "the rebuilt ledger's checksum is not the live one ($live_sum): $(cat "$T/rebuild.log")"
check_readers rebuilt
cmp -s "$T/status.live.json" "$T/status.rebuilt.json" || fail "status --json differs after the rebuild"

if [ "$fails" -ne 0 ]; then tail -n 20 "$T"/*.log >&2; fi
altar_test_end attempts
