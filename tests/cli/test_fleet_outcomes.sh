#!/bin/sh
# Every acknowledged job has an outcome (issue 15), on the local transport
# with a real reconciler and two `process` workers: one CPU-only, one that
# advertises pool a100 (--pools a100).
#   - CPU and a100 jobs run on the right worker; a job for pool h100 waits and
#     is shown as waiting (submit --wait, status); a100 work whose worker
#     stops mid-run is released, shown as waiting, and runs when one returns;
#   - refusals (invalid spec, a kind the worker has no group for, a pool on
#     the wrong topic, a 3 MiB hand-made job) become failed records with
#     their reason and dead-letter their group; --wait names the reason;
#   - submit refuses an unknown kind (listing the configured ones), a typo in
#     groups: (file and line), and a spec over the derived size bound (naming
#     the field and both sizes), and runs one just under it;
#   - shards finishing after their group fired are reported as late, a late
#     failure fails --wait, and status counts them.
# Every wait is bounded by a deadline and checks recorded facts.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin outcomes python3

groups='groups:
  work: {group_by: [job_id, fold], ready_when: single, on_failed: dead_letter}
  late: {group_by: [job_id], ready_when: single, on_failed: dead_letter}'
common="transport: {name: local, dir: $T/log}
ledger: {path: $T/ledger}"
# The reconciler and submit know kind orphan; the workers do not.
printf '%s\nbackend: {name: process, data_root: %s/data-r, slots: 4}\n%s\n  orphan: {group_by: [job_id], ready_when: single, on_failed: dead_letter}\n' \
  "$common" "$T" "$groups" >"$T/full.yaml"
printf '%s\nbackend: {name: process, data_root: %s/data-cpu, slots: 4}\n%s\n' "$common" "$T" "$groups" >"$T/cpu.yaml"
printf '%s\nbackend: {name: process, data_root: %s/data-gpu, slots: 4}\n%s\n' "$common" "$T" "$groups" >"$T/gpu.yaml"
full="--config $T/full.yaml"

"$ALTAR_BIN" reconciler $full >"$T/reconciler.log" 2>&1 &
pids="$pids $!"
rpid=$!
"$ALTAR_BIN" worker --config "$T/cpu.yaml" --id cpu --poll-ms 50 >"$T/cpu.log" 2>&1 &
cpid=$!
pids="$pids $cpid"
start_gpu() {
  "$ALTAR_BIN" worker --config "$T/gpu.yaml" --id gpu --pools a100 --poll-ms 50 --drain 1 >>"$T/gpu.log" 2>&1 &
  gpid=$!
  pids="$pids $gpid"
}
start_gpu

spec() { # kind job fold command-json [extra]
  printf '{"kind":"%s","image":"none","command":%s,"labels":{"job_id":"%s","fold":"%s"}%s}\n' "$1" "$4" "$2" "$3" "${5:-}"
}
# The status topic as JSON lines, and what python reads of it.
status_py() {
  "$ALTAR_BIN" log consume $full --topic altar.status --from-beginning --exit 2>/dev/null >"$T/status.jsonl"
  python3 - "$T/status.jsonl" "$@" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
job, what = sys.argv[2], sys.argv[3]
mine = [e for e in evs if e.get("handle", {}).get("labels", {}).get("job_id") == job]
if what == "workers":
    print(",".join(sorted({e["worker"] for e in mine if e["event"] == "submitted"})))
elif what == "reasons":
    print(",".join(sorted({e["failure"]["reason"] for e in mine if e.get("failure")})))
PY
}
# Waits (bounded) until `eval $1` holds.
wait_for() {
  i=0
  while [ $i -lt 600 ]; do
    if eval "$1"; then return 0; fi
    i=$((i + 1))
    sleep 0.1
  done
  return 1
}
status_json() { "$ALTAR_BIN" status $full "$1" --json 2>/dev/null; }
# One field of JSON on stdin by its dotted path (groups.fired).
jfield() {
  python3 -c 'import json,sys
d = json.load(sys.stdin)
for k in sys.argv[1].split("."): d = d[k]
print(d)' "$1" 2>/dev/null
}

# ---- routing by pool --------------------------------------------------------
{ spec work jcpu 0 '["/bin/true"]'; spec work jcpu 1 '["/bin/true"]'; } >"$T/cpu.jsonl"
spec work jgpu 0 '["/bin/true"]' ',"resources":{"gpu":"a100","count":1}' >"$T/gpu.json"
"$ALTAR_BIN" submit $full --wait --timeout 120 "$T/cpu.jsonl" >/dev/null 2>"$T/e1" && ok || fail "cpu job: $(cat "$T/e1")"
"$ALTAR_BIN" submit $full --wait --timeout 120 "$T/gpu.json" >/dev/null 2>"$T/e2" && ok || fail "a100 job: $(cat "$T/e2")"
check '[ "$(status_py jcpu workers)" = cpu ]' "CPU shards ran on: $(status_py jcpu workers)"
check '[ "$(status_py jgpu workers)" = gpu ]' "a100 shard ran on: $(status_py jgpu workers)"

# ---- a pool nobody serves: waits, and says so --------------------------------
spec work jh100 0 '["/bin/true"]' ',"resources":{"gpu":"h100","count":1}' >"$T/h100.json"
"$ALTAR_BIN" submit $full --wait --timeout 4 "$T/h100.json" >/dev/null 2>"$T/e3"
check '[ $? -eq 3 ]' "h100 --wait did not time out"
check 'grep -q "1 shard waiting for pool h100; no worker serves it" "$T/e3"' "h100 --wait: $(cat "$T/e3")"
"$ALTAR_BIN" status $full jh100 >"$T/s3" 2>&1
check 'grep -q "1 shard waiting for pool h100; no worker serves it" "$T/s3"' "h100 status: $(cat "$T/s3")"

# ---- a100 work whose worker stops mid-run: released, waits, then runs --------
spec work jmid 0 "[\"/bin/sh\",\"-c\",\"while [ ! -f $T/go-mid ]; do sleep 0.05; done\"]" \
  ',"resources":{"gpu":"a100","count":1}' >"$T/mid.json"
"$ALTAR_BIN" submit $full --wait --timeout 180 "$T/mid.json" >/dev/null 2>"$T/e4" &
wmid=$!
check 'wait_for "[ \"\$(status_py jmid workers)\" = gpu ]"' "jmid never started on the a100 worker"
kill -TERM "$gpid"
wait "$gpid" 2>/dev/null
check 'wait_for "\"$ALTAR_BIN\" status $full jmid 2>/dev/null | grep -q \"waiting for pool a100; no worker serves it\""' \
  "jmid not shown waiting after its worker stopped: $("$ALTAR_BIN" status $full jmid 2>&1)"
touch "$T/go-mid"
start_gpu
wait "$wmid"
check '[ $? -eq 0 ]' "jmid --wait after the a100 worker came back: $(cat "$T/e4")"

# ---- refusals get outcomes ---------------------------------------------------
"$ALTAR_BIN" submit $full --wait --timeout 120 "$(spec orphan jorph 0 '["/bin/true"]' >"$T/orph.json"; echo "$T/orph.json")" \
  >/dev/null 2>"$T/e5"
check '[ $? -eq 1 ]' "orphan --wait did not fail: $(cat "$T/e5")"
check 'grep -q "failed: no_group" "$T/e5"' "orphan --wait names no reason: $(cat "$T/e5")"
job() { # job_id kind labels-json resources-json inputs-json
  printf '{"v":1,"type":"job","job_id":"%s","attempt":0,"avoid_hosts":[],"submitted_at":0,"spec":{"kind":"%s","image":"x","command":["true"],"labels":%s,"inputs":%s,"outputs":[],"resources":%s,"timeout_s":null,"plugin_identity":null}}\n' \
    "$1" "$2" "$3" "$5" "$4"
}
cpu_res='{"gpu":null,"count":1,"memory_mb":null}'
job jinv work '{"job_id":"jinv","fold":"0"}' "$cpu_res" \
  '[{"uri":"file:///etc/passwd","logical_path":"../../etc/passwd","locality_key":null,"digest":null}]' |
  "$ALTAR_BIN" log produce $full --topic altar.jobs --encode job >/dev/null
job jwrong work '{"job_id":"jwrong","fold":"0"}' '{"gpu":"a100","count":1,"memory_mb":null}' '[]' |
  "$ALTAR_BIN" log produce $full --topic altar.jobs --encode job >/dev/null
python3 -c '
import json
labels = {"job_id": "jbig", "fold": "0"}
labels.update({"l%d" % i: "x" * 60000 for i in range(52)})
print(json.dumps({"v":1,"type":"job","job_id":"jbig","attempt":0,"avoid_hosts":[],"submitted_at":0,"spec":{"kind":"work","image":"x","command":["true"],"labels":labels,"inputs":[],"outputs":[],"resources":{"gpu":None,"count":1,"memory_mb":None},"timeout_s":None,"plugin_identity":None}}))' |
  "$ALTAR_BIN" log produce $full --topic altar.jobs --encode job >/dev/null
for j in jinv:invalid_spec jwrong:unservable_pool jbig:spec_too_large; do
  id=${j%%:*}
  reason=${j#*:}
  check 'wait_for "[ \"\$(status_json $id | jfield groups.dead_lettered)\" = 1 ]"' \
    "$id: its group was not dead-lettered: $(status_json "$id")"
  check '[ "$(status_json "$id" | jfield shards.failed)" = 1 ]' "$id: no failed record: $(status_json "$id")"
  check '[ "$(status_py "$id" reasons)" = "$reason" ]' "$id: reason $(status_py "$id" reasons), want $reason"
done
check 'kill -0 "$cpid" 2>/dev/null' "the CPU worker exited on a message's content: $(tail -5 "$T/cpu.log")"
check 'grep -q "refused.*invalid_spec" "$T/cpu.log"' "no refusal logged"

# ---- submit checks kinds, config and sizes ------------------------------------
spec nokind jx 0 '["/bin/true"]' >"$T/nokind.json"
"$ALTAR_BIN" submit $full "$T/nokind.json" >/dev/null 2>"$T/e6"
check '[ $? -eq 2 ] && grep -q "configured kinds: " "$T/e6"' "unknown kind: $(cat "$T/e6")"
sed 's/group_by: \[job_id\], ready_when: single/gruop_by: [job_id], ready_when: single/' "$T/full.yaml" >"$T/typo.yaml"
"$ALTAR_BIN" submit --config "$T/typo.yaml" "$T/cpu.jsonl" >/dev/null 2>"$T/e7"
check '[ $? -eq 2 ] && grep -q "typo.yaml:[0-9]*" "$T/e7" && grep -q gruop_by "$T/e7"' "config typo: $(cat "$T/e7")"
big_spec() { # job n_labels
  python3 -c '
import json, sys
labels = {"job_id": sys.argv[1], "fold": "0"}
labels.update({"l%d" % i: "y" * 64000 for i in range(int(sys.argv[2]))})
print(json.dumps({"kind": "work", "image": "none", "command": ["/bin/true"], "labels": labels}))' "$1" "$2"
}
big_spec junder 31 >"$T/under.json" # about 1.98 MB of labels: under the derived bound
big_spec jover 34 >"$T/over.json"   # about 2.18 MB: its status event would exceed 4 MiB
"$ALTAR_BIN" submit $full --wait --timeout 120 "$T/under.json" >/dev/null 2>"$T/e8" && ok || fail "spec under the bound: $(cat "$T/e8")"
"$ALTAR_BIN" submit $full "$T/over.json" >/dev/null 2>"$T/e9"
check '[ $? -eq 2 ] && grep -q "labels: about" "$T/e9" && grep -q "4194304" "$T/e9"' "spec over the bound: $(cat "$T/e9")"
# Nothing of the refused job reached the log: status knows no such job (exit 4).
"$ALTAR_BIN" status $full jover --json >/dev/null 2>&1
check '[ $? -eq 4 ]' "the refused spec was published"

# ---- late shards -------------------------------------------------------------
{
  spec late jlate 0 '["/bin/true"]'
  spec late jlate 1 "[\"/bin/sh\",\"-c\",\"while [ ! -f $T/go-late ]; do sleep 0.05; done; exit 7\"]"
  spec late jlate 2 "[\"/bin/sh\",\"-c\",\"while [ ! -f $T/go-late ]; do sleep 0.05; done\"]"
} >"$T/late.jsonl"
"$ALTAR_BIN" submit $full --wait --timeout 180 "$T/late.jsonl" >/dev/null 2>"$T/e10" &
wlate=$!
check 'wait_for "[ \"\$(status_json jlate | jfield groups.fired)\" = 1 ]"' "jlate's group never fired"
touch "$T/go-late"
wait "$wlate"
check '[ $? -eq 1 ]' "a late failure did not fail --wait: $(cat "$T/e10")"
check 'grep -q "2 late shards after group settled (1 failed)" "$T/e10"' "late shards not reported: $(cat "$T/e10")"
"$ALTAR_BIN" status $full jlate >"$T/s10" 2>&1
check 'grep -q "late: 2 late shards after group settled" "$T/s10" && grep -q "failed exit_7" "$T/s10"' \
  "status shows no late shards: $(cat "$T/s10")"

# The reconciler records them as late, and publishes no second event for the group.
check 'wait_for "[ \$(grep -c \"late shard after its group settled: late:jlate\" \"$T/reconciler.log\") -eq 2 ]"' \
  "the reconciler did not log 2 late shards: $(grep late "$T/reconciler.log")"
check '[ "$(status_json jlate | jfield groups.fired)" = 1 ] && [ "$(status_json jlate | jfield groups.dead_lettered)" = 0 ]' \
  "late shards made another group event: $(status_json jlate)"

kill -TERM "$cpid" "$gpid" "$rpid" 2>/dev/null
wait "$cpid" "$gpid" "$rpid" 2>/dev/null
altar_test_end test_fleet_outcomes
