#!/bin/sh
# Pipelines on one machine: from a group's last member exit to its group
# event reaching a consumer of the ready topic, and to its follow-up task
# (then:) starting, p50 and p99, in the same run. A reconciler and one
# worker (4 slots, process backend) run GROUPS groups of WIDTH folds; each
# fold writes its exit time, each follow-up its start time; a consumer of
# the ready topic stamps each event's arrival.
#
# usage: bench/bench_pipeline.sh [BUILD_DIR] [GROUPS]
# environment: ALTAR_BENCH_WIDTH (folds per group, default 5),
#   ALTAR_BENCH_TRANSPORT local (default) or kafka (ALTAR_KAFKA_BROKERS)
# The last line is machine-readable:
#   result event_p50_ms=<> event_p99_ms=<> followup_p50_ms=<> followup_p99_ms=<>
set -eu
B="${1:-build}"
G="${2:-200}"
W="${ALTAR_BENCH_WIDTH:-5}"
T="${ALTAR_BENCH_TRANSPORT:-local}"
ALTAR="$(cd "$B" && pwd)/altar"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-pipe-XXXXXX")"
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null || true; done; rm -rf "$dir"' EXIT
case "$T" in
  local) transport="{name: local, dir: $dir/log}" ;;
  kafka)
    : "${ALTAR_KAFKA_BROKERS:?kafka needs ALTAR_KAFKA_BROKERS (scripts/services/kafka.sh start)}"
    transport="{name: kafka, kafka: {bootstrap.servers: \"$ALTAR_KAFKA_BROKERS\"}}" ;;
  *) echo "bench_pipeline: ALTAR_BENCH_TRANSPORT must be local or kafka" >&2; exit 2 ;;
esac
p="bp$(date +%s)$$"
mkdir -p "$dir/t"
cat >"$dir/altar.yaml" <<YAML
transport: $transport
topics: {jobs: $p.jobs, status: $p.status, ready: $p.ready, dead: $p.dead, dlq: $p.dlq}
backend: {name: process, data_root: $dir/data, slots: 4}
ledger: {path: $dir/ledger}
groups:
  fold:
    group_by: [job_id, g]
    ready_when: {all_folds: $W}
    on_failed: dead_letter
    then:
      kind: merge
      image: none
      command: [/bin/sh, -c, 'date +%s.%N > $dir/t/start-{{g}}']
  merge:
    group_by: [job_id, g]
    ready_when: single
YAML
cfg="--config $dir/altar.yaml"
"$ALTAR" reconciler $cfg --quiet --no-dashboard >"$dir/rec.log" 2>&1 & pids="$pids $!"
"$ALTAR" worker $cfg --quiet >"$dir/w.log" 2>&1 & pids="$pids $!"
python3 - "$dir" "$G" "$W" >"$dir/specs.jsonl" <<'PY'
import json, sys
d, g, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(g):
    for f in range(w):
        print(json.dumps({"kind": "fold", "image": "none",
                          "command": ["/bin/sh", "-c", 'date +%s.%N > "$0"', f"{d}/t/exit-{i}-{f}"],
                          "labels": {"g": str(i), "fold": str(f)}}))
PY
# The consumer stamps each fired event's arrival (its group key) as it comes.
python3 - "$ALTAR" "$dir" "$p.ready" "$G" <<'PY' &
import json, subprocess, sys, time
alt, d, topic, g = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = subprocess.Popen([alt, "log", "consume", "--config", f"{d}/altar.yaml", "--topic", topic, "--group", "bench"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
seen = 0
with open(f"{d}/arrivals", "w") as out:
    for line in c.stdout:
        now = time.time()
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("kind") == "fold":
            out.write(f"{e['group_key'].split(':')[-1]} {now:.6f}\n")
            out.flush()
            seen += 1
            if seen == g:
                break
c.kill()
PY
cons=$!
pids="$pids $cons"
sleep 1 # the consumer joins its group before anything fires (it reads from the end)
"$ALTAR" submit $cfg --wait "$dir/specs.jsonl" >/dev/null 2>"$dir/submit.log" ||
  { echo "bench_pipeline: the job did not finish" >&2; tail "$dir/submit.log" "$dir/rec.log" >&2; exit 1; }
wait "$cons" || true
python3 - "$dir" "$G" "$W" "$T" <<'PY'
import os, sys
d, g, w, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
arr = dict(l.split() for l in open(f"{d}/arrivals"))
ev, fu = [], []
for i in range(g):
    last = max(float(open(f"{d}/t/exit-{i}-{f}").read()) for f in range(w))
    if str(i) in arr:
        ev.append((float(arr[str(i)]) - last) * 1000)
    if os.path.exists(f"{d}/t/start-{i}"):
        fu.append((float(open(f"{d}/t/start-{i}").read()) - last) * 1000)
if len(ev) < g or len(fu) < g:
    sys.exit(f"bench_pipeline: {len(ev)} events and {len(fu)} follow-ups of {g} groups measured")
def p(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]
print(f"{g} groups of {w} folds, 4 slots, {t} log")
print(f"last member exit -> group event at a ready-topic consumer: p50 {p(ev, .5):.1f} ms, p99 {p(ev, .99):.1f} ms")
print(f"last member exit -> follow-up task started:            p50 {p(fu, .5):.1f} ms, p99 {p(fu, .99):.1f} ms")
print(f"result event_p50_ms={p(ev, .5):.2f} event_p99_ms={p(ev, .99):.2f} followup_p50_ms={p(fu, .5):.2f} "
      f"followup_p99_ms={p(fu, .99):.2f}")
PY
