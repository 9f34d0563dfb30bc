# Shared body of the reconciler lag gauge tests (sourced; TRANSPORT=local, the
# default, or kafka: tests/cli/test_reconciler_lag.sh,
# tests/integration/test_reconciler_lag_kafka.sh).
# The lag gauges (altar_reconciler_lag_events{partition} and
# altar_reconciler_lag_events_all_partitions, issue 29 item 6) against the
# facts on the log and in the ledger:
#   - a reconciler that applied everything says 0, as `altar log offsets` does;
#   - stopped, with N status events written after it (a worker ran a job),
#     `altar dashboard` says N per partition and in all, equal to `altar log
#     offsets --group altar.reconcilers` and to its own /api/overview;
#   - a reconciler started again catches up, and says 0 (the dashboard too).
# Every wait polls for a fact, bounded; no duration is asserted.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "reconciler-lag-${TRANSPORT:-local}" python3 curl
prefix="lag-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 2}" "partitions: 4, fleet: $prefix.fleet"
  cat <<EOC
groups:
  t:
    group_by: [job_id, n]
    ready_when: single
    on_failed: dead_letter
EOC
} >"$T/altar.yaml"
cfg="--config $T/altar.yaml"
status_topic="$prefix.status"
wait_for() { # COMMAND: up to 90 s for COMMAND to succeed
  _until=$(($(date +%s) + 90))
  while [ "$(date +%s)" -le "$_until" ]; do
    eval "$1" && return 0
    sleep 0.2
  done
  return 1
}
specs() { # TAG COUNT
  i=0
  while [ $i -lt "$2" ]; do
    printf '{"kind":"t","image":"x","command":["true"],"labels":{"n":"%s-%s"}}\n' "$1" "$i"
    i=$((i + 1))
  done
}
# A job run to its end by a worker that stops once the jobs topic is drained.
run_job() { # TAG COUNT
  specs "$1" "$2" >"$T/$1.jsonl"
  "$ALTAR_BIN" submit $cfg "$T/$1.jsonl" >"$T/$1.job" 2>>"$T/submit.log" || fatal "submit $1"
  "$ALTAR_BIN" worker $cfg --id "w-$1" --exit-when-idle --poll-ms 50 >>"$T/worker.log" 2>&1 || fatal "worker for $1"
}
ends() { # the status topic's end offsets, summed
  "$ALTAR_BIN" log topics $cfg --topic "$status_topic" --json | python3 -c '
import json, sys
print(sum(p["end"] for t in json.load(sys.stdin) for p in t["partitions"]))'
}
# `altar log offsets` of the reconcilers as "partition:lag ..." (sorted) and the sum.
offsets_view() {
  "$ALTAR_BIN" log offsets $cfg --group altar.reconcilers --json >"$T/offsets.json" 2>"$T/offsets.err" &&
    python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
print(" ".join("%d:%d" % (x["partition"], x["lag"]) for x in sorted(e, key=lambda x: x["partition"])), sum(x["lag"] for x in e))' "$T/offsets.json"
}
# The gauges scraped from URL as "partition:lag ..." (sorted) and the all-partitions value.
gauges() { # URL
  curl -s --noproxy '*' "$1/metrics" >"$T/metrics.txt" && python3 - "$T/metrics.txt" <<'EOP'
import re, sys
parts, total = {}, None
for line in open(sys.argv[1]):
    m = re.match(r'altar_reconciler_lag_events\{partition="(\d+)"\} (\S+)', line)
    if m: parts[int(m.group(1))] = int(float(m.group(2)))
    m = re.match(r'altar_reconciler_lag_events_all_partitions (\S+)', line)
    if m: total = int(float(m.group(1)))
if not parts or total is None: sys.exit(1)
print(" ".join(f"{p}:{parts[p]}" for p in sorted(parts)), total)
EOP
}

rport="$(free_port)"
"$ALTAR_BIN" reconciler $cfg --metrics "127.0.0.1:$rport" >"$T/reconciler.log" 2>&1 &
rpid=$!
pids="$pids $rpid"
run_job first 4
# The reconciler applied every event: the log says so, then its gauges.
wait_for '[ "$(offsets_view | sed "s/.* //")" = 0 ]' || fatal "the reconciler never caught up: $(offsets_view)"
want="$(offsets_view)"
wait_for '[ "$(gauges "http://127.0.0.1:$rport")" = "$want" ]' &&
  ok "caught up: the reconciler's gauges say 0 per partition, as altar log offsets ($want)" ||
  fail "caught up: gauges '$(gauges "http://127.0.0.1:$rport")', altar log offsets '$want'"

# Stopped: what a worker writes now stays unread.
kill -TERM "$rpid" && wait "$rpid" 2>/dev/null
before="$(ends)"
run_job second 3
after="$(ends)"
n=$((after - before))
[ "$n" -gt 0 ] || fatal "the second job wrote no status events ($before -> $after)"
view="$(offsets_view)"
[ "${view##* }" = "$n" ] && ok "altar log offsets: $n unread events" || fail "altar log offsets says '$view', $n were written"
dport="$(free_port)"
"$ALTAR_BIN" dashboard $cfg --addr "127.0.0.1:$dport" >"$T/dash.log" 2>&1 &
dpid=$!
pids="$pids $dpid"
wait_for '[ "$(gauges "http://127.0.0.1:$dport")" = "$view" ]' &&
  ok "stopped: the dashboard's gauges say $n, per partition as altar log offsets ($view)" ||
  fail "stopped: gauges '$(gauges "http://127.0.0.1:$dport")', altar log offsets '$view'"
curl -s --noproxy '*' "http://127.0.0.1:$dport/api/overview" >"$T/overview.json"
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["lag"]["reconciler"]["lag"] != int(sys.argv[2]))' \
  "$T/overview.json" "$n" && ok "/api/overview: reconciler lag $n" || fail "/api/overview: $(cat "$T/overview.json")"

# Started again: it catches up and says 0; so does the dashboard.
rport2="$(free_port)"
"$ALTAR_BIN" reconciler $cfg --metrics "127.0.0.1:$rport2" >>"$T/reconciler.log" 2>&1 &
pids="$pids $!"
wait_for '[ "$(offsets_view | sed "s/.* //")" = 0 ]' || fatal "the restarted reconciler never caught up: $(offsets_view)"
want="$(offsets_view)"
wait_for '[ "$(gauges "http://127.0.0.1:$rport2")" = "$want" ]' &&
  ok "restarted: the reconciler's gauges say 0, as altar log offsets ($want)" ||
  fail "restarted: gauges '$(gauges "http://127.0.0.1:$rport2")', altar log offsets '$want'"
wait_for '[ "$(gauges "http://127.0.0.1:$dport")" = "$want" ]' && ok "restarted: the dashboard's gauges say 0" ||
  fail "restarted: dashboard gauges '$(gauges "http://127.0.0.1:$dport")', altar log offsets '$want'"
altar_test_end "reconciler lag (${TRANSPORT:-local})"
