#!/bin/sh
# Fan-in of one group of N members (default 10^3, 10^4, 10^5) through the real
# reconciler on the embedded log: N-1 members succeed (synthetic status
# events, produced through the log as a worker would), the reconciler applies
# them, then the last member's success is produced and timed until the group
# event's last message is on the ready topic (time to fire). Reported per N:
# the reconciler's resident memory with the group open (VmRSS once caught up),
# at its peak (VmHWM, the firing included) and once idle again (VmRSS 3 s
# after the firing: what it keeps), the time to apply the N-1 events, the
# time to fire, and each per member, next to the same run's first size; and
# the firing's cost per member above the first size's ((fire_N - fire_first)
# / (N - first): the fixed part, start-up and this script's polling, taken
# out), which stays flat when firing costs the same per member at any width.
# Usage: bench/bench_fanin.sh [BUILD_DIR] [N...]
set -eu
B="${1:-build}"; [ $# -gt 0 ] && shift
ALTAR="$(cd "$B" && pwd)/altar"
SIZES="${*:-1000 10000 100000}"
port=$((19600 + $$ % 300))
now_ms() { date +%s%3N; }
ready_end() { "$ALTAR" log topics --config "$T/a.yaml" --topic f.ready 2>/dev/null | awk 'NR > 1 {s += $4} END {print s + 0}'; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}' | head -1; }
base_rss=""; base_fire=""; base_apply=""
printf '%8s %10s %10s %10s %10s %10s %10s %10s %10s %6s %12s  %s\n' members rss_open_mb rss_peak_mb rss_idle_mb apply_s \
  fire_ms peak_kb/m apply_us/m fire_us/m pages +fire_us/m "per member vs the first size"
for N in $SIZES; do
  T="$(mktemp -d "${TMPDIR:-/tmp}/altar-fanin.XXXXXX")"
  cat >"$T/a.yaml" <<YAML
transport: {name: local, dir: $T/log}
topics: {jobs: f.jobs, status: f.status, ready: f.ready, dead: f.dead, dlq: f.dlq}
backend: {name: process, data_root: $T/data, slots: 1}
ledger: {path: $T/ledger}
metrics: {addr: "127.0.0.1:$port"}
groups:
  shard:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
    event_outputs: true
YAML
  python3 - "$N" "$T" >"$T/ev.txt" <<'PY'
import hashlib, json, sys
n, t = int(sys.argv[1]), sys.argv[2]
last = open(t + "/last.txt", "w")
for i in range(n):
    labels = {"job_id": "fanin", "fold": str(i), "num_folds": str(n)}
    h = {"backend": "process", "external_id": f"fanin-{i}", "labels": labels}
    spec = {"kind": "shard", "image": "none", "command": ["true"], "labels": labels,
            "outputs": [{"uri": f"{t}/out/{i}.txt", "logical_path": f"o/{i}.txt"}]}
    base = {"handle": h, "kind": "shard", "task_key": hashlib.sha256(f"fanin-{i}".encode()).hexdigest(),
            "type": "status", "v": 1, "worker": "bench"}
    sys.stdout.write("shard:fanin\t" + json.dumps(dict(base, event="submitted", state="pending", spec=spec, ts=1.0 + i)) + "\n")
    (last if i == n - 1 else sys.stdout).write(
        "shard:fanin\t" + json.dumps(dict(base, event="state", state="succeeded", ts=1.5 + i)) + "\n")
PY
  tab="$(printf '\t')"
  "$ALTAR" log produce --config "$T/a.yaml" --topic f.status --encode status --key-delimiter "$tab" <"$T/ev.txt" >/dev/null 2>&1
  t0=$(now_ms)
  "$ALTAR" reconciler --config "$T/a.yaml" >"$T/rec.log" 2>&1 & rec=$!
  want=$((2 * N - 1))
  until [ "$(metric altar_reconciler_events_applied_total)" = "$want" ]; do sleep 0.05; done
  t1=$(now_ms)
  rss_open=$(awk '/^VmRSS/ {print $2}' "/proc/$rec/status")
  "$ALTAR" log produce --config "$T/a.yaml" --topic f.status --encode status --key-delimiter "$tab" <"$T/last.txt" >/dev/null 2>&1
  t2=$(now_ms)
  # fired: the head is out; then every page of it (the head says how many)
  until [ "$(ready_end)" -ge 1 ]; do sleep 0.005; done
  pages=$("$ALTAR" log consume --config "$T/a.yaml" --topic f.ready --from-beginning --exit --max 1 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline()).get("pages", 0))')
  until [ "$(ready_end)" -ge $((pages + 1)) ]; do sleep 0.005; done
  t3=$(now_ms)
  rss_peak=$(awk '/^VmHWM/ {print $2}' "/proc/$rec/status")
  sleep 3
  rss_idle=$(awk '/^VmRSS/ {print $2}' "/proc/$rec/status")
  kill "$rec"; wait "$rec" 2>/dev/null || true
  apply_ms=$((t1 - t0)); fire_ms=$((t3 - t2))
  python3 - "$N" "$rss_open" "$rss_peak" "$rss_idle" "$apply_ms" "$fire_ms" <<'PY'
import os, sys
n, rss_open, rss_peak, rss_idle, apply_ms, fire_ms = (int(x) for x in sys.argv[1:7])
per = (rss_peak / n, apply_ms * 1000 / n, fire_ms * 1000 / n)
line = (f"{n:8d} {rss_open/1024:10.1f} {rss_peak/1024:10.1f} {rss_idle/1024:10.1f} {apply_ms/1000:10.2f} {fire_ms:10d}"
        f" {per[0]:10.2f} {per[1]:10.1f} {per[2]:10.2f}")
print(line, end=" ")
PY
  printf '%6s' "$pages"
  if [ -n "$base_fire" ]; then
    python3 -c "import sys; n,f,bn,bf=map(float,sys.argv[1:]); print(' %12.2f' % ((f-bf)*1000/(n-bn)), end='')" \
      "$N" "$fire_ms" "$base_n" "$base_fire"
  else printf ' %12s' -; fi
  if [ -z "$base_fire" ]; then base_rss=$rss_peak; base_fire=$fire_ms; base_apply=$apply_ms; base_n=$N; echo "  baseline"; else
    python3 -c "import sys; n,r,a,f,bn,br,ba,bf=map(float,sys.argv[1:]); print('  peak rss %.2fx apply %.2fx fire %.2fx per member' % ((r/n)/(br/bn), (a/n)/(ba/bn), (f/n)/(bf/bn)))" \
      "$N" "$rss_peak" "$apply_ms" "$fire_ms" "$base_n" "$base_rss" "$base_apply" "$base_fire"; fi
  rm -rf "$T"
done
