#!/bin/sh
# `altar worker --metrics` and `altar reconciler --metrics` on the local
# transport: GET /metrics lists every documented metric in the exposition
# format, counters move when a job runs, other paths are 404, metrics.addr
# from the config file works, a malformed address is refused naming
# metrics.addr, and SIGTERM stops the worker cleanly.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin metrics-cli curl python3

# Waits (bounded) until GET url answers 200 with the line $3 (the command
# registers its metrics once its loop starts, just after the server), keeping
# the body in $2.
wait_metrics() {
  i=0
  while [ $i -lt 300 ]; do
    if curl -sf --noproxy '*' -o "$2" "$1" 2>/dev/null && grep -qx "$3" "$2"; then return 0; fi
    i=$((i + 1))
    sleep 0.1
  done
  return 1
}
# Waits (bounded) until the metrics at $1 contain the line $2.
wait_line() {
  i=0
  while [ $i -lt 600 ]; do
    if curl -sf --noproxy '*' "$1" 2>/dev/null | grep -qx "$2"; then return 0; fi
    i=$((i + 1))
    sleep 0.1
  done
  return 1
}

cat >"$T/altar.yaml" <<EOF
transport:
  name: local
  dir: $T/log
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/ledger}
groups:
  probe: {group_by: [job_id], ready_when: single}
EOF
mkdir -p "$T/data"
cfg="--config $T/altar.yaml"

# ---- the worker ----
port="$(free_port)"
url="http://127.0.0.1:$port/metrics"
"$ALTAR_BIN" worker $cfg --id mw1 --drain 2 --metrics "127.0.0.1:$port" >"$T/worker.log" 2>&1 &
wpid=$!
pids="$pids $wpid"
if wait_metrics "$url" "$T/m1" "# TYPE altar_worker_paused gauge"; then ok; else fail "worker: no answer on $url: $(cat "$T/worker.log")"; fi
for name in altar_worker_jobs_consumed_total altar_worker_tasks_submitted_total altar_worker_tasks_succeeded_total \
  altar_worker_tasks_failed_total altar_worker_tasks_released_total altar_worker_jobs_skipped_total \
  altar_worker_dead_lettered_total altar_worker_status_events_total; do
  if grep -qx "# TYPE $name counter" "$T/m1" && grep -q "^# HELP $name " "$T/m1" && grep -qx "$name [0-9]*" "$T/m1"; then
    ok
  else
    fail "worker: counter $name missing or malformed"
  fi
done
for name in altar_worker_in_flight altar_worker_slots altar_worker_paused; do
  if grep -qx "# TYPE $name gauge" "$T/m1" && grep -qx "$name [0-9]*" "$T/m1"; then ok; else fail "worker: gauge $name missing"; fi
done
grep -qx "altar_worker_slots 2" "$T/m1" && ok || fail "worker: altar_worker_slots is not the configured 2: $(grep slots "$T/m1")"
grep -qx "altar_worker_paused 0" "$T/m1" && ok || fail "worker: paused while idle"
# What the worker costs: its RSS (non-zero) and its data root's and log's disk.
grep -Eqx "altar_process_resident_memory_bytes [1-9][0-9]*" "$T/m1" && ok || fail "worker: no RSS gauge"
for d in data_root log; do
  grep -Eq "^altar_disk_usage_bytes\{dir=\"$d\"\} [0-9]+" "$T/m1" &&
    grep -Eq "^altar_disk_usage_entries\{dir=\"$d\"\} [1-9][0-9]*" "$T/m1" && ok || fail "worker: no disk gauges for $d"
done
# What the process backend keeps of task output, against its default bounds,
# and what the next prune frees (nothing ran yet); what the embedded log's
# next retention pass deletes (fresh topics: nothing).
for line in "altar_worker_kept_logs_dirs 0" "altar_worker_kept_logs_bytes 0" "altar_worker_kept_logs_prune_next_dirs 0" \
  "altar_worker_kept_logs_prune_next_bytes 0" "altar_worker_kept_logs_dirs_limit 10000" \
  "altar_worker_kept_logs_bytes_limit 1073741824" "altar_log_retention_next_bytes 0" "altar_log_retention_next_segments 0"; do
  grep -qx "$line" "$T/m1" && ok || fail "worker: no line '$line': $(grep -E 'kept_logs|retention_next' "$T/m1")"
done
ct="$(curl -s --noproxy '*' -o /dev/null -w '%{content_type}' "$url")"
case "$ct" in text/plain\;*version=0.0.4*) ok ;; *) fail "worker: content type '$ct'" ;; esac
code="$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")"
[ "$code" = 404 ] && ok || fail "worker: GET / gave $code, want 404"
code="$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metricsx")"
[ "$code" = 404 ] && ok || fail "worker: GET /metricsx gave $code, want 404"

# One job that succeeds and one poison message move the counters.
echo '{"kind": "probe", "image": "none", "command": ["/bin/true"], "labels": {}}' >"$T/spec.json"
if "$ALTAR_BIN" submit $cfg "$T/spec.json" >"$T/submit.out" 2>"$T/submit.err"; then ok; else fail "submit: $(cat "$T/submit.err")"; fi
printf 'not a job\n' | "$ALTAR_BIN" log produce $cfg --topic altar.jobs >/dev/null 2>&1 || fail "producing a poison job"
wait_line "$url" "altar_worker_tasks_succeeded_total 1" && ok || fail "worker: succeeded never reached 1: $(curl -s "$url" | grep -v '^#')"
wait_line "$url" "altar_worker_dead_lettered_total 1" && ok || fail "worker: dead_lettered never reached 1"
curl -s --noproxy '*' "$url" >"$T/m2"
grep -qx "altar_worker_jobs_consumed_total 2" "$T/m2" && ok || fail "worker: consumed is not 2: $(grep consumed "$T/m2")"
grep -qx "altar_worker_tasks_submitted_total 1" "$T/m2" && ok || fail "worker: submitted is not 1"
grep -qx "altar_worker_status_events_total [1-9][0-9]*" "$T/m2" && ok || fail "worker: no status events counted"

# Two slow jobs fill both slots: in flight 2, intake paused; then both finish.
printf '%s\n' '{"kind": "probe", "image": "none", "command": ["/bin/sleep", "4"], "labels": {"n": "1"}}' \
  '{"kind": "probe", "image": "none", "command": ["/bin/sleep", "4"], "labels": {"n": "2"}}' >"$T/slow.jsonl"
"$ALTAR_BIN" submit $cfg "$T/slow.jsonl" >/dev/null 2>"$T/submit.err" || fail "submit slow: $(cat "$T/submit.err")"
wait_line "$url" "altar_worker_in_flight 2" && ok || fail "worker: in_flight never reached 2"
wait_line "$url" "altar_worker_paused 1" && ok || fail "worker: never paused with every slot busy"
wait_line "$url" "altar_worker_tasks_succeeded_total 3" && ok || fail "worker: the slow jobs never succeeded"
wait_line "$url" "altar_worker_in_flight 0" && ok || fail "worker: in_flight did not return to 0"
wait_line "$url" "altar_worker_paused 0" && ok || fail "worker: did not resume intake"

# Per-task series: three runs of kind probe timed (two slept 4 s each), a
# failing one counted under its folded reason, and the build info.
echo '{"kind": "probe", "image": "none", "command": ["/bin/sh", "-c", "echo weights missing >&2; exit 3"], "labels": {"n": "3"}}' >"$T/fail.json"
"$ALTAR_BIN" submit $cfg "$T/fail.json" >/dev/null 2>"$T/submit.err" || fail "submit failing: $(cat "$T/submit.err")"
wait_line "$url" 'altar_worker_task_failures_total{reason="exit_code"} 1' && ok || fail "worker: the exit 3 is not counted by reason: $(curl -s "$url" | grep failures)"
curl -s --noproxy '*' "$url" >"$T/m3"
# The only run that printed keeps its output, once reclaimed: one directory
# and its blocks, nothing due for the next prune (well within 14 days).
wait_line "$url" "altar_worker_kept_logs_dirs 1" && ok || fail "worker: the failing run's output is not counted as kept: $(curl -s "$url" | grep kept_logs)"
curl -s --noproxy '*' "$url" >"$T/m3"
grep -Eqx "altar_worker_kept_logs_bytes [1-9][0-9]*" "$T/m3" && grep -qx "altar_worker_kept_logs_prune_next_dirs 0" "$T/m3" &&
  ok || fail "worker: kept output bytes or next prune: $(grep kept_logs "$T/m3")"
grep -qx "# TYPE altar_worker_task_duration_seconds histogram" "$T/m3" && ok || fail "worker: no duration histogram"
grep -qx 'altar_worker_task_duration_seconds_count{kind="probe"} 4' "$T/m3" && ok || fail "worker: not 4 runs of probe timed: $(grep duration "$T/m3")"
grep -qx 'altar_worker_task_duration_seconds_bucket{kind="probe",le="+Inf"} 4' "$T/m3" && ok || fail "worker: +Inf bucket is not the count"
sum="$(sed -n 's/^altar_worker_task_duration_seconds_sum{kind="probe"} //p' "$T/m3")"
python3 -c "import sys; sys.exit(0 if float('$sum') >= 8 else 1)" && ok || fail "worker: durations sum to $sum s, less than the two 4 s sleeps"
grep -qx "altar_build_info{component=\"worker\",version=\"$("$ALTAR_BIN" --version | awk '{print $NF}')\"} 1" "$T/m3" && ok || fail "worker: build info: $(grep build_info "$T/m3")"

# ---- the reconciler, with metrics.addr from the config file ----
rport="$(free_port)"
rurl="http://127.0.0.1:$rport/metrics"
cp "$T/altar.yaml" "$T/rec.yaml"
printf 'metrics: {addr: "127.0.0.1:%s"}\n' "$rport" >>"$T/rec.yaml"
"$ALTAR_BIN" reconciler --config "$T/rec.yaml" >"$T/rec.log" 2>&1 &
rpid=$!
pids="$pids $rpid"
if wait_metrics "$rurl" "$T/r1" "# TYPE altar_reconciler_outbox_published_total counter"; then ok; else fail "reconciler: no answer on $rurl: $(cat "$T/rec.log")"; fi
for name in altar_reconciler_events_applied_total altar_reconciler_batches_total altar_reconciler_groups_fired_total \
  altar_reconciler_groups_dead_lettered_total altar_reconciler_jobs_retried_total altar_reconciler_poison_total \
  altar_reconciler_outbox_published_total; do
  if grep -qx "# TYPE $name counter" "$T/r1" && grep -q "^# HELP $name " "$T/r1"; then ok; else fail "reconciler: $name missing"; fi
done
grep -q '^altar_build_info{component="reconciler",' "$T/r1" && ok || fail "reconciler: no build info"
if grep -qx "# TYPE altar_reconciler_groups_held gauge" "$T/r1" && grep -qx "altar_reconciler_groups_held 0" "$T/r1"; then ok; else fail "reconciler: altar_reconciler_groups_held missing"; fi
grep -qx "# TYPE altar_reconciler_consumed_pruned_total counter" "$T/r1" && ok || fail "reconciler: altar_reconciler_consumed_pruned_total missing"
grep -qx "# TYPE altar_reconciler_settled_cached_entries gauge" "$T/r1" && ok || fail "reconciler: altar_reconciler_settled_cached_entries missing"
grep -qx "# TYPE altar_reconciler_settled_ledger_reads_total counter" "$T/r1" && ok || fail "reconciler: altar_reconciler_settled_ledger_reads_total missing"
grep -qx "# TYPE altar_reconciler_consumed_prune_next_records gauge" "$T/r1" && ok || fail "reconciler: altar_reconciler_consumed_prune_next_records missing"
grep -Eqx "altar_process_resident_memory_bytes [1-9][0-9]*" "$T/r1" && ok || fail "reconciler: no RSS gauge"
for d in ledger log; do
  grep -Eq "^altar_disk_usage_bytes\{dir=\"$d\"\} [1-9][0-9]*" "$T/r1" && ok || fail "reconciler: no disk gauge for $d"
done
grep -qx "# TYPE altar_log_retention_next_bytes gauge" "$T/r1" && grep -qx "# TYPE altar_log_retention_next_segments gauge" "$T/r1" &&
  ok || fail "reconciler: no log retention gauges"
grep -q "altar_worker_kept_logs" "$T/r1" && fail "reconciler: kept task output gauges" || ok
# Every status event the worker had acknowledged gets applied: the worker's
# count only grows to its final value, so wait until the two agree (the
# submitted and terminal events of the 3 jobs at least).
conv=""
i=0
while [ $i -lt 600 ]; do
  w="$(curl -sf --noproxy '*' "$url" | sed -n 's/^altar_worker_status_events_total //p')"
  r="$(curl -sf --noproxy '*' "$rurl" | sed -n 's/^altar_reconciler_events_applied_total //p')"
  if [ -n "$w" ] && [ "$w" -ge 6 ] && [ "$w" = "$r" ]; then conv=1; break; fi
  i=$((i + 1))
  sleep 0.1
done
[ -n "$conv" ] && ok || fail "reconciler applied '$r' events, the worker acknowledged '$w' (want equal, >= 6)"
curl -sf --noproxy '*' "$rurl" | grep -qx "altar_reconciler_batches_total [1-9][0-9]*" && ok || fail "reconciler: no batch counted"

# A second worker on the same port cannot start; it says which setting is at fault.
if "$ALTAR_BIN" worker $cfg --id mw2 --metrics "127.0.0.1:$port" >"$T/busy.log" 2>&1; then
  fail "a second worker on a taken metrics port started"
else
  grep -q "metrics.worker_addr" "$T/busy.log" && ok || fail "taken port: error does not name metrics.worker_addr: $(cat "$T/busy.log")"
fi

# SIGTERM: the worker drains and exits 0, and the endpoint goes away.
kill -TERM "$wpid"
i=0
while kill -0 "$wpid" 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
if kill -0 "$wpid" 2>/dev/null; then
  fail "worker did not stop on SIGTERM"
else
  wait "$wpid"
  st=$?
  [ "$st" = 0 ] && ok || fail "worker exited with status $st after SIGTERM: $(tail -5 "$T/worker.log")"
fi
code="$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' "$url")"
[ "$code" = 000 ] && ok || fail "metrics still served after the worker stopped ($code)"

# ---- malformed addresses are refused before anything starts ----
for bad in nonsense 127.0.0.1 127.0.0.1:70000 :9464 127.0.0.1:abc; do
  if "$ALTAR_BIN" worker $cfg --metrics "$bad" >"$T/bad.log" 2>&1; then
    fail "worker accepted --metrics '$bad'"
  else
    grep -q "metrics.worker_addr" "$T/bad.log" && ok || fail "--metrics '$bad': error does not name metrics.worker_addr: $(cat "$T/bad.log")"
  fi
done
if "$ALTAR_BIN" worker $cfg --set metrics.worker_addr=bogus >"$T/bad.log" 2>&1; then
  fail "worker accepted --set metrics.worker_addr=bogus"
else
  grep -q "metrics.worker_addr" "$T/bad.log" && ok || fail "--set metrics.worker_addr=bogus: $(cat "$T/bad.log")"
fi

kill -TERM "$rpid"
i=0
while kill -0 "$rpid" 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
if kill -0 "$rpid" 2>/dev/null; then
  fail "reconciler did not stop on SIGTERM"
else
  wait "$rpid"
  st=$?
  [ "$st" = 0 ] && ok || fail "reconciler exited with status $st after SIGTERM: $(tail -5 "$T/rec.log")"
fi

altar_test_end test_worker_metrics
