#!/bin/sh
# The web dashboard in a real browser: a fleet on the local log with the
# process backend (a reconciler serving the dashboard, two workers), one job
# with a fired group and a dead-lettered group, a poison message in the DLQ;
# headless chromium (driven by dashboard_browser.py over DevTools) checks the
# job's row and counts, the failure's text, both workers, the dead letters
# and a second job arriving without a reload, and saves screenshots under
# the build directory (dashboard-screenshots/). Then `altar jobs`, `altar
# workers` and `altar status --outputs` are checked against the same fleet.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
if ! command -v chromium >/dev/null; then
  echo "chromium is not installed (scripts/install-deps.sh test)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 77 # counted as skipped, never as passed
fi
# Debian's python3 holds Debian's python3-websocket (a pyenv python on PATH may not).
browser_py=""
for py in /usr/bin/python3 python3; do
  if "$py" -c 'import websocket' 2>/dev/null; then browser_py="$py"; break; fi
done
[ -n "$browser_py" ] || { echo "FAIL: python3-websocket is required (scripts/install-deps.sh test)" >&2; exit 1; }
T="$(mktemp -d "${TMPDIR:-/tmp}/altar-dashboard.XXXXXX")"
shots="$PWD/dashboard-screenshots"
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$T/data" "$T/out"
cat >"$T/altar.yaml" <<CFG
transport: {name: local, dir: $T/log}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/ledger}
groups:
  shard:
    group_by: [job_id, group]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
  train:
    group_by: [job_id, model]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: retry
    max_restarts: 2
CFG
cfg="--config $T/altar.yaml"

# Group alpha: two shards that write their output; group beta: one of its
# two shards exits 3.
specs() {
  python3 - "$T" "$1" <<'PY'
import json, sys
root, tag = sys.argv[1], sys.argv[2]
script = 'if [ "$2" = fail ]; then echo "FileNotFoundError: weights.h5" >&2; exit 3; fi; mkdir -p "$(dirname "$1")"; echo done > "$1"'
for g, failing in (("alpha", None), ("beta", 1)):
    for f in range(2):
        out = f"out/{tag}{g}-{f}.txt"
        print(json.dumps({"kind": "shard", "image": "none",
                          "command": ["/bin/sh", "-c", script, "x", f"{root}/data/{out}", "fail" if f == failing else "ok"],
                          "labels": {"group": g, "fold": str(f), "num_folds": "2"},
                          "outputs": [{"uri": f"file://{root}/{out}", "logical_path": out}], "timeout_s": 120}))
PY
}
specs "" >"$T/specs.jsonl"
specs "second-" >"$T/specs2.jsonl"

"$ALTAR_BIN" reconciler $cfg --metrics "127.0.0.1:$port" >"$T/reconciler.log" 2>&1 &
pids="$pids $!"
for w in dash-w1 dash-w2; do
  "$ALTAR_BIN" worker $cfg --id "$w" >"$T/$w.log" 2>&1 &
  pids="$pids $!"
done
job="$("$ALTAR_BIN" submit $cfg --wait --timeout 120 "$T/specs.jsonl" 2>"$T/submit.log")"
rc=$?
[ "$rc" = 1 ] || fail "submit --wait: exit $rc, want 1 (a group dead-lettered): $(cat "$T/submit.log")"
grep -q "group fired" "$T/submit.log" || fail "no group fired: $(cat "$T/submit.log")"
printf 'garbage \001\002 not msgpack\n' | "$ALTAR_BIN" log produce $cfg --topic altar.jobs

# A job cancelled while its two shards run, and a job for a pool no worker serves.
printf '{"kind":"shard","image":"none","command":["sleep","120"],"labels":{"group":"c","fold":"%s","num_folds":"2"}}\n' 0 1 >"$T/cancel.jsonl"
cjob="$("$ALTAR_BIN" submit $cfg "$T/cancel.jsonl" 2>/dev/null)"
i=0
until "$ALTAR_BIN" status $cfg "$cjob" --json 2>/dev/null | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["shards"]["running"] != 2)'; do
  i=$((i + 1)); [ $i -lt 600 ] || { fail "the shards to cancel never both ran"; break; }; sleep 0.1
done
"$ALTAR_BIN" cancel $cfg "$cjob" >/dev/null || fail "cancel $cjob failed"
i=0
until "$ALTAR_BIN" status $cfg "$cjob" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(not (d["groups"]["cancelled"] == 1 and d["shards"]["failed"] == 2))'; do
  i=$((i + 1)); [ $i -lt 600 ] || { fail "job $cjob never settled as cancelled"; break; }; sleep 0.1
done
"$ALTAR_BIN" status $cfg "$cjob" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["groups"] == {"fired": 0, "dead_lettered": 0, "cancelled": 1}, d' || fail "status counts the cancelled group as dead-lettered"
"$ALTAR_BIN" status $cfg "$cjob" | grep -q "0 dead-lettered (0 shards), 1 cancelled (2 shards)" ||
  fail "status text: $("$ALTAR_BIN" status $cfg "$cjob")"
printf '{"kind":"shard","image":"none","command":["/bin/true"],"labels":{"group":"w","fold":"0","num_folds":"1"},"resources":{"gpu":"h100","count":1}}\n' >"$T/waiting.jsonl"
wjob="$("$ALTAR_BIN" submit $cfg "$T/waiting.jsonl" 2>/dev/null)"
# The waiting job in `altar jobs --json` and /api/job (no 404).
i=0
until "$ALTAR_BIN" jobs $cfg --json | python3 -c '
import json, sys
j = [x for x in json.load(sys.stdin)["jobs"] if x["job_id"] == sys.argv[1]]
sys.exit(not (j and j[0]["waiting"] == 1 and j[0]["waiting_pools"] == {"h100": 1}))' "$wjob"; do
  i=$((i + 1)); [ $i -lt 300 ] || { fail "altar jobs does not list $wjob waiting for h100"; break; }; sleep 0.1
done
code="$(curl -s --noproxy '*' -o "$T/wjob.json" -w '%{http_code}' "http://127.0.0.1:$port/api/job?id=$wjob")"
[ "$code" = 200 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["waiting"] != 1)' "$T/wjob.json" ||
  fail "/api/job?id=$wjob: $code $(cat "$T/wjob.json")"
# The reconciler's lag as `altar log offsets` reads it (the fleet is at rest:
# nothing runs, the waiting shard is on no worker's topic), while it has
# committed nothing to the log yet (it does at shutdown only).
lag_cli() {
  "$ALTAR_BIN" log offsets $cfg --group altar.reconcilers --json 2>/dev/null | python3 -c '
import json, sys
print(sum(e["lag"] for e in json.load(sys.stdin)))'
}
RECONCILER_LAG="$(lag_cli)"
ends="$("$ALTAR_BIN" log topics $cfg --topic altar.status --json | python3 -c '
import json, sys
print(sum(p["end"] for t in json.load(sys.stdin) for p in t["partitions"]))')"
[ -n "$RECONCILER_LAG" ] && [ "$ends" -gt 0 ] || fail "no reconciler lag from altar log offsets ($RECONCILER_LAG) or no status events ($ends)"
# A shard that fails once ("ERROR: first try" on stderr, then killed by
# SIGTERM: from outside, so worth a retry) and succeeds on its retry: its page must list both attempts.
python3 - "$T" >"$T/retried.jsonl" <<'PY'
import json, sys
flaky = 'if [ ! -e "$1" ]; then touch "$1"; echo "ERROR: first try" >&2; kill -TERM $$; fi; echo "second try"'
print(json.dumps({"kind": "train", "image": "none", "command": ["/bin/sh", "-c", flaky, "x", sys.argv[1] + "/failed-once"],
                  "labels": {"model": "m1", "fold": "0", "num_folds": "1"}}))
PY
rjob="$("$ALTAR_BIN" submit $cfg --wait --timeout 120 "$T/retried.jsonl" 2>"$T/retried.log")"
rc=$?
[ "$rc" = 0 ] || fail "the retried shard's job: exit $rc: $(cat "$T/retried.log")"
# Its task key from the API's kind filter, once the dashboard holds both runs.
rkey=""
i=0
until [ -n "$rkey" ]; do
  rkey="$(curl -s --noproxy '*' "http://127.0.0.1:$port/api/job?id=$rjob&kind=train" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d.get("shard_list") or [{}]
print(s[0]["task_key"] if s[0].get("state") == "succeeded" and len(s[0]["attempt_list"]) == 2 else "")' 2>/dev/null)"
  i=$((i + 1)); [ $i -lt 300 ] || { fail "the retried shard never showed two attempts in /api/job"; break; }; [ -n "$rkey" ] || sleep 0.1
done
export CANCELLED_JOB="$cjob" WAITING_JOB="$wjob" RECONCILER_LAG RETRIED_JOB="$rjob" RETRIED_KEY="$rkey"

cat >"$T/submit2.sh" <<SH
#!/bin/sh
exec "$ALTAR_BIN" submit $cfg "$T/specs2.jsonl"
SH
"$browser_py" "$ALTAR_SOURCE_DIR/tests/integration/dashboard_browser.py" "http://127.0.0.1:$port" "$job" "$shots" \
  sh "$T/submit2.sh" || fail "the browser checks failed"
for f in jobs job shard workers dead overview; do
  [ -s "$shots/$f.png" ] || fail "no screenshot $shots/$f.png"
done
[ "$(lag_cli)" = "$RECONCILER_LAG" ] || fail "the reconciler's lag moved during the browser checks ($RECONCILER_LAG -> $(lag_cli))"

# The CLI shares the pages' JSON.
"$ALTAR_BIN" jobs $cfg --json >"$T/jobs.json" || fail "altar jobs --json failed"
python3 - "$T/jobs.json" "$job" <<'PY' || fail "altar jobs --json: wrong content"
import json, sys
d = json.load(open(sys.argv[1]))
j = [x for x in d["jobs"] if x["job_id"] == sys.argv[2]]
assert j, d
j = j[0]
assert j["shards"]["succeeded"] == 3 and j["shards"]["failed"] == 1, j
assert j["groups"] == {"fired": 1, "dead_lettered": 1, "cancelled": 0, "open": 0}, j
assert j["submitted_at"] > 0, j
assert d["total"] == 5, d
PY
"$ALTAR_BIN" jobs $cfg | grep -q "^$job " || fail "altar jobs: no row for $job"
"$ALTAR_BIN" workers $cfg >"$T/workers.txt" || fail "altar workers failed"
for w in dash-w1 dash-w2; do
  grep -q "^$w  *live " "$T/workers.txt" || fail "altar workers: $w not live: $(cat "$T/workers.txt")"
done
"$ALTAR_BIN" status $cfg "$job" --outputs >"$T/outputs.txt" || fail "altar status --outputs failed"
grep -q "file://$T/out/alpha-0.txt" "$T/outputs.txt" && grep -q "file://$T/out/alpha-1.txt" "$T/outputs.txt" ||
  fail "altar status --outputs: $(cat "$T/outputs.txt")"
grep -q "beta" "$T/outputs.txt" && fail "altar status --outputs lists the dead group: $(cat "$T/outputs.txt")"

# A worker that stops says goodbye; its state turns to gone.
set -- $pids
kill -TERM "$3" && wait "$3" 2>/dev/null
"$ALTAR_BIN" workers $cfg --json | python3 -c '
import json, sys
w = {x["worker"]: x["state"] for x in json.load(sys.stdin)["workers"]}
assert w.get("dash-w2") == "gone" and w.get("dash-w1") == "live", w' || fail "a stopped worker is not marked gone"

# A worker killed with -9 sends no goodbye: once its heartbeats stop it is silent.
kill -9 "$2" 2>/dev/null
wait "$2" 2>/dev/null
silent=no
i=0
while [ $i -lt 120 ]; do
  if "$ALTAR_BIN" workers $cfg --json | python3 -c '
import json, sys
w = {x["worker"]: x for x in json.load(sys.stdin)["workers"]}
sys.exit(0 if w["dash-w1"]["state"] == "silent" and w["dash-w1"]["age_s"] > 10 else 1)'; then
    silent=yes
    break
  fi
  i=$((i + 1))
  sleep 0.5
done
[ "$silent" = yes ] || fail "a worker killed with -9 is never marked silent"
"$ALTAR_BIN" workers $cfg | grep -q "^dash-w1  *silent " || fail "altar workers does not show dash-w1 silent"

if [ "$fails" -ne 0 ]; then
  tail -n 5 "$T"/*.log >&2
  exit 1
fi
echo "dashboard in chromium: ok (screenshots in $shots)"
