# Shared body of the why-a-shard-waits tests (sourced; TRANSPORT=local, the
# default, or kafka: tests/cli/test_shard_why.sh,
# tests/integration/test_shard_why_kafka.sh).
# Why a shard is not running (issue 29, item 2), with a real reconciler, a
# real `process` worker and `altar dashboard`: one shard
# in each situation, its reason asserted in `altar status --json` and in the
# dashboard's /api/job (and /api/why), on recorded facts only (each wait
# below polls for a fact, bounded; no duration is asserted):
#   backoff       a failed shard retried under retry_backoff {initial: 600}:
#                 "until" equals the due time the ledger records;
#   no_free_slot  the second shard of a job on a worker with one slot;
#   behind        a later job's shard queued behind it (jobs_ahead 1);
#   no_worker     a shard for pool h100, which no worker serves (and
#                 `submit --wait` says so when it times out);
#   cancelled     a waiting shard of a cancelled job;
#   lease         the running shard of a worker killed with -9, once its
#                 heartbeats stopped (it holds the shard until its lease ends);
#   group_held    a finished shard whose group's rule errors (config; a
#                 fleet of its own on the embedded log).
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "shard-why-${TRANSPORT:-local}" python3 curl
dash=""
on_cleanup() { [ -n "$dash" ] && kill "$dash" 2>/dev/null && wait "$dash" 2>/dev/null; }

# One partition per topic: the shards of later jobs queue behind earlier ones.
prefix="why-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 1}" "partitions: 1, fleet: $prefix.fleet"
  cat <<EOC
groups:
  long:
    group_by: [job_id, n]
    ready_when: single
    on_failed: dead_letter
  flaky:
    group_by: [job_id]
    ready_when: single
    on_failed: retry
    max_restarts: 2
    retry_backoff: {initial: 600, factor: 1, max: 600, jitter: 0}
EOC
} >"$T/altar.yaml"
cfg="--config $T/altar.yaml"
spec() { # KIND N COMMAND [POOL]
  pool=""
  [ -n "${4:-}" ] && pool=", \"resources\": {\"gpu\": \"$4\", \"count\": 1}"
  printf '{"kind":"%s","image":"x","command":%s,"labels":{"n":"%s"}%s}\n' "$1" "$3" "$2" "$pool"
}
submit() { # FILE: prints the job id
  "$ALTAR_BIN" submit $cfg "$1" 2>>"$T/submit.log" || fatal "submit $1"
}
# why JOB: status --json of JOB into $T/s.json; reasons REASON...: each
# listed shard's reason, sorted, equals the list
why() { "$ALTAR_BIN" status $cfg "$1" --json >"$T/s.json" 2>"$T/s.err"; }
reasons() {
  python3 - "$T/s.json" "$@" <<'EOP'
import json, sys
s = json.load(open(sys.argv[1]))
got = sorted(sh["why"]["reason"] for sh in s["why"]["shards"])
sys.exit(0 if got == sorted(sys.argv[2:]) else 1)
EOP
}
# wait_for COMMAND: up to 60 s for COMMAND to succeed
wait_for() {
  i=0
  while [ $i -lt 300 ]; do
    eval "$1" && return 0
    i=$((i + 1)); sleep 0.2
  done
  return 1
}
port="$(free_port)"
base="http://127.0.0.1:$port"
api() { curl -s --noproxy '*' -o "$T/api.json" -w '%{http_code}' "$base/api/$1"; }

"$ALTAR_BIN" reconciler $cfg >"$T/reconciler.log" 2>&1 &
pids="$pids $!"
"$ALTAR_BIN" worker $cfg --id w1 --poll-ms 50 >"$T/worker.log" 2>&1 &
wpid=$!
pids="$pids $wpid"
"$ALTAR_BIN" dashboard $cfg --addr "127.0.0.1:$port" >"$T/dash.log" 2>&1 &
dash=$!
wait_for '[ "$(curl -s --noproxy "*" -o /dev/null -w "%{http_code}" "$base/metrics")" = 200 ]' || fatal "no dashboard on $base"

# backoff: times out after 1 s; its retry is due 600 s after the failure.
printf '{"kind":"flaky","image":"x","command":["sleep","30"],"labels":{"n":"1"},"timeout_s":1}\n' >"$T/flaky.json"
jf="$(submit "$T/flaky.json")"
wait_for 'why "$jf" && reasons backoff' || fatal "backoff: $(cat "$T/s.json" "$T/s.err")"
"$ALTAR_BIN" ledger retries --ledger "$T/ledger" >"$T/retries" 2>"$T/err" || fail "ledger retries: $(cat "$T/err")"
python3 - "$T/s.json" "$T/retries" <<'EOP' && ok "backoff: until is the recorded due time" || fail "backoff: $(cat "$T/s.json" "$T/retries")"
import json, sys
s = json.load(open(sys.argv[1]))
due = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
w = s["why"]["shards"][0]["why"]
assert len(due) == 1 and abs(w["until"] - due[0]["due"]) < 1e-3, (w, due)
assert s["why"]["counts"] == {"backoff": 1}, s["why"]
EOP

# no_free_slot and behind: one slot, busy with the first shard of j1.
spec long 1 '["sleep","40"]' >"$T/j1.json"
spec long 2 '["sleep","40"]' >>"$T/j1.json"
j1="$(submit "$T/j1.json")"
spec long 1 '["sleep","40"]' | sed 's/"n":"1"/"n":"3"/' >"$T/j2.json"
j2="$(submit "$T/j2.json")"
wait_for 'why "$j1" && reasons no_free_slot' || fail "no_free_slot: $(cat "$T/s.json" "$T/s.err")"
cp "$T/s.json" "$T/j1.status"
wait_for 'why "$j2" && reasons behind' || fail "behind: $(cat "$T/s.json" "$T/s.err")"
python3 - "$T/s.json" <<'EOP' && ok "behind: one job, one shard ahead" || fail "behind details: $(cat "$T/s.json")"
import json, sys
w = json.load(open(sys.argv[1]))["why"]["shards"][0]["why"]
assert w["jobs_ahead"] == 1 and w["shards_ahead"] == 1 and w["pool"] == "normal", w
EOP
cp "$T/s.json" "$T/j2.status"

# no_worker: nobody serves h100.
spec long 1 '["true"]' h100 >"$T/j3.json"
j3="$(submit "$T/j3.json")"
why "$j3" && reasons no_worker && ok "no_worker" || fail "no_worker: $(cat "$T/s.json" "$T/s.err")"
cp "$T/s.json" "$T/j3.status"
# submit --wait that times out says why its shards wait.
spec long 5 '["true"]' h100 >"$T/j5.json"
"$ALTAR_BIN" submit $cfg --wait --timeout 1 "$T/j5.json" >"$T/j5.out" 2>"$T/j5.err"
rc=$?
[ "$rc" = 3 ] && grep -q "1 shard not running: 1 no_worker" "$T/j5.err" && grep -q "no_worker: no worker serves pool h100" "$T/j5.err" &&
  ok "submit --wait: the timeout says why" || fail "submit --wait (exit $rc): $(cat "$T/j5.err")"

# cancelled: a waiting shard of a cancelled job.
spec long 1 '["true"]' h100 | sed 's/"n":"1"/"n":"4"/' >"$T/j4.json"
j4="$(submit "$T/j4.json")"
"$ALTAR_BIN" cancel $cfg "$j4" >"$T/cancel.out" 2>&1 || fail "cancel: $(cat "$T/cancel.out")"
why "$j4" && reasons cancelled && ok "cancelled" || fail "cancelled: $(cat "$T/s.json" "$T/s.err")"
cp "$T/s.json" "$T/j4.status"

# The dashboard's /api/job and /api/why say the same.
for j in "$jf:backoff" "$j1:no_free_slot" "$j2:behind" "$j3:no_worker" "$j4:cancelled"; do
  id="${j%%:*}"
  want="${j#*:}"
  wait_for '[ "$(api "job?id=$id")" = 200 ] && python3 - "$T/api.json" "$want" <<"EOP"
import json, sys
o = json.load(open(sys.argv[1]))
ws = [m["why"] for g in o["group_list"] for m in g["members"] if m.get("why")]
ws += [m["why"] for m in o["waiting_list"] if m.get("why")]
assert [w["reason"] for w in ws] == [sys.argv[2]], ws
assert o["why_counts"] == {sys.argv[2]: 1}, o["why_counts"]
EOP' && ok "/api/job $want" || fail "/api/job $want: $(cat "$T/api.json")"
  [ "$(api "why?id=$id")" = 200 ] && python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [s["why"]["reason"] for s in o["shards"]] == [sys.argv[2]], o' "$T/api.json" "$want" &&
    ok "/api/why $want" || fail "/api/why $want: $(cat "$T/api.json")"
done
[ "$(api "why?id=nope")" = 404 ] || fail "/api/why of an unknown job is not 404"
[ "$(api "why")" = 400 ] || fail "/api/why without id is not 400"

# The text of status says it too.
"$ALTAR_BIN" status $cfg "$j2" >"$T/j2.txt" 2>&1
grep -q "why: .* (waiting) behind: 1 earlier job (1 shard) ahead in its partition of pool normal" "$T/j2.txt" &&
  ok "status text: behind" || fail "status text: $(cat "$T/j2.txt")"

# lease: the worker dies with j1's first shard running; once its heartbeats
# are stale the shard is held by its lease.
kill -9 "$wpid"
wait_for 'why "$j1" && python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
r = {sh[\"why\"][\"reason\"]: sh[\"why\"] for sh in s[\"why\"][\"shards\"]}
sys.exit(0 if r.get(\"lease\", {}).get(\"worker\") == \"w1\" else 1)" "$T/s.json"' &&
  ok "lease: held by w1" || fail "lease: $(cat "$T/s.json" "$T/s.err")"
[ "$(api "job?id=$j1")" = 200 ] && python3 - "$T/api.json" <<'EOP' && ok "/api/job lease" || fail "/api/job lease: $(cat "$T/api.json")"
import json, sys
o = json.load(open(sys.argv[1]))
ws = [m["why"] for g in o["group_list"] for m in g["members"] if m.get("why")]
assert any(w["reason"] == "lease" and w["worker"] == "w1" for w in ws), ws
EOP

# group_held: a fleet of its own whose kind's rule cannot decide.
mkdir -p "$T/h"
for v in fixed broken; do
  dflt=", default: 1"
  [ "$v" = broken ] && dflt=""
  cat >"$T/h/$v.yaml" <<YAML
transport: {name: local, dir: $T/h/log}
backend: {name: process, data_root: $T/h/data, slots: 1}
ledger: {path: $T/h/ledger}
groups:
  train:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds$dflt}}
    on_failed: dead_letter
YAML
done
echo '{"kind":"train","image":"none","command":["/bin/true"],"labels":{"fold":"0"}}' >"$T/h/spec.json"
jh="$("$ALTAR_BIN" submit --config "$T/h/fixed.yaml" "$T/h/spec.json" 2>>"$T/submit.log")" || fatal "submit held"
"$ALTAR_BIN" worker --config "$T/h/fixed.yaml" --exit-when-idle --quiet >"$T/hworker.log" 2>&1 || fatal "held worker"
"$ALTAR_BIN" reconciler --config "$T/h/broken.yaml" --exit-when-idle >"$T/hrec.log" 2>&1 || fatal "held reconciler"
"$ALTAR_BIN" status --config "$T/h/broken.yaml" "$jh" --json >"$T/s.json" 2>"$T/s.err"
python3 - "$T/s.json" "$jh" <<'EOP' && ok "group_held" || fail "group_held: $(cat "$T/s.json" "$T/s.err")"
import json, sys
s = json.load(open(sys.argv[1]))
[sh] = s["why"]["shards"]
assert sh["state"] == "succeeded" and sh["why"]["reason"] == "group_held", sh
assert sh["why"]["group"] == "train:" + sys.argv[2] and "num_folds" in sh["why"]["error"], sh
EOP
hport="$(free_port)"
"$ALTAR_BIN" dashboard --config "$T/h/broken.yaml" --addr "127.0.0.1:$hport" >"$T/hdash.log" 2>&1 &
hdash=$!
pids="$pids $hdash"
wait_for '[ "$(curl -s --noproxy "*" -o "$T/api.json" -w "%{http_code}" "http://127.0.0.1:$hport/api/why?id=$jh")" = 200 ]' &&
  python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert [s["why"]["reason"] for s in o["shards"]] == ["group_held"], o' "$T/api.json" && ok "/api/why group_held" ||
  fail "/api/why group_held: $(cat "$T/api.json")"

if [ "$fails" -ne 0 ]; then
  echo "--- reconciler"; tail -20 "$T/reconciler.log"; echo "--- worker"; tail -20 "$T/worker.log"
fi
altar_test_end "shard-why-${TRANSPORT:-local}"
