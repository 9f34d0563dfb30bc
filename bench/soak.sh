#!/bin/sh
# Soak: N /bin/true shards through one worker and one reconciler on the
# defaults (embedded log, process backend, 4 slots), submitted in batches.
# Every INTERVAL seconds it samples the RSS of both daemons (and the
# reconciler's ledger memory by RocksDB's accounting: memtables, block
# cache, table readers) and the disk use of the worker's data root
# (allocated blocks, directories included), of the log and of the ledger; at the end it prints the growth of each per
# 10^5 shards after warm-up (a least-squares slope over the samples taken
# after WARMUP shards), and the same over the first and the second half of
# those samples: a series that has reached its bound grows in the first
# half and not in the second. Not run in CI: 10^6 shards take most of an hour.
# usage: bench/soak.sh [BUILD_DIR] [SHARDS] [BATCH] [INTERVAL_S] [WARMUP]
#   environment: SOAK_KEEP=1 keeps the temporary directory; SOAK_DIR=DIR
#   runs in DIR (created) instead of a fresh one under $TMPDIR;
#   SOAK_SAMPLES=FILE also writes the samples there (TSV).
# Short lifetimes, so that a soak of minutes reaches the bounds that take
# days on the defaults (each unset: the default):
#   SOAK_LIFETIME_S=S       all of the below from one figure: topics keep S
#                           seconds, consumed records, settled groups and
#                           kept output S seconds, 1 MiB segments, checkpoints to a local
#                           directory every max(10, (S-60)/3) s (the status
#                           topic then keeps S too; it needs 3 intervals + 60 s)
#   SOAK_RETENTION_MS       topics.retention_ms (all topics; with checkpoints on,
#                           the status topic too)
#   SOAK_SEGMENT_BYTES      the embedded log's transport.segment.bytes (retention
#                           deletes whole segments, never the active one)
#   SOAK_CHECKPOINT_INTERVAL_S  ledger.checkpoints (DIR/checkpoints) and its interval
#   SOAK_CONSUMED_KEEP_S    ledger.consumed_keep_s
#   SOAK_LOGS_KEEP_S, SOAK_LOGS_KEEP_COUNT  backend.logs_keep_s, backend.logs_keep_count
#   SOAK_SETTLED_HORIZON_S  ledger.settled_horizon_s (settled groups' entries go
#                           at twice it; SOAK_LIFETIME_S sets S/2)
# The dashboard's and the metrics' histories are bounded by count (64 samples,
# the newest 10,000 jobs ...), not by age: nothing to shorten.
set -eu
B="${1:-build}"
N="${2:-1000000}"
BATCH="${3:-10000}"
INTERVAL="${4:-10}"
WARMUP="${5:-}"
[ -n "$WARMUP" ] || WARMUP=$((N / 10 < 20000 ? N / 10 : 20000))
ALTAR="$(cd "$B" && pwd)/altar"
if [ -n "${SOAK_DIR:-}" ]; then
  dir="$SOAK_DIR"
  mkdir -p "$dir"
else
  dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-soak-XXXXXX")"
fi
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  if [ -z "${SOAK_KEEP:-}" ] && [ -z "${SOAK_DIR:-}" ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wport=$(port)
rport=$(port)

L="${SOAK_LIFETIME_S:-}"
if [ -n "$L" ]; then
  : "${SOAK_RETENTION_MS:=$((L * 1000))}" "${SOAK_SEGMENT_BYTES:=1048576}" "${SOAK_CONSUMED_KEEP_S:=$L}"
  : "${SOAK_LOGS_KEEP_S:=$L}" "${SOAK_SETTLED_HORIZON_S:=$((L / 2 > 1 ? L / 2 : 1))}"
  : "${SOAK_CHECKPOINT_INTERVAL_S:=$(((L - 60) / 3 > 10 ? (L - 60) / 3 : 10))}"
fi
tx="" tp="" bk="" ld=""
[ -z "${SOAK_SEGMENT_BYTES:-}" ] || tx="$tx, segment.bytes: $SOAK_SEGMENT_BYTES"
[ -z "${SOAK_RETENTION_MS:-}" ] || tp="retention_ms: $SOAK_RETENTION_MS"
[ -z "${SOAK_LOGS_KEEP_S:-}" ] || bk="$bk, logs_keep_s: $SOAK_LOGS_KEEP_S"
[ -z "${SOAK_LOGS_KEEP_COUNT:-}" ] || bk="$bk, logs_keep_count: $SOAK_LOGS_KEEP_COUNT"
[ -z "${SOAK_CONSUMED_KEEP_S:-}" ] || ld="$ld, consumed_keep_s: $SOAK_CONSUMED_KEEP_S"
[ -z "${SOAK_SETTLED_HORIZON_S:-}" ] || ld="$ld, settled_horizon_s: $SOAK_SETTLED_HORIZON_S"
[ -z "${SOAK_CHECKPOINT_INTERVAL_S:-}" ] ||
  ld="$ld, checkpoints: $dir/checkpoints, checkpoint_interval_s: $SOAK_CHECKPOINT_INTERVAL_S"

topics=""
[ -z "$tp" ] || topics="topics: {$tp}"

# The defaults but for where things live and the lifetimes set above.
cat >"$dir/altar.yaml" <<YAML
transport: {name: local, dir: $dir/log$tx}
backend: {name: process, data_root: $dir/data$bk}
ledger: {path: $dir/ledger$ld}
$topics
groups:
  soak: {group_by: [job_id, shard], ready_when: single, on_failed: dead_letter}
YAML
echo "soak: config" >&2
sed 's/^/  /' "$dir/altar.yaml" >&2
cfg="--config $dir/altar.yaml"

"$ALTAR" reconciler $cfg --quiet --no-dashboard --metrics "127.0.0.1:$rport" >"$dir/rec.log" 2>&1 &
rpid=$!
pids="$pids $rpid"
"$ALTAR" worker $cfg --quiet --metrics "127.0.0.1:$wport" >"$dir/w.log" 2>&1 &
wpid=$!
pids="$pids $wpid"
sleep 1

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
du_kb() { if [ -e "$1" ]; then du -sk "$1" 2>/dev/null | awk '{print $1}'; else echo 0; fi; }
done_shards() {
  curl -s "http://127.0.0.1:$wport/metrics" 2>/dev/null |
    awk '/^altar_worker_tasks_succeeded_total / {v=$2} /^altar_worker_tasks_failed_total / {v+=$2} END {printf "%d\n", v}'
}

# The reconciler's ledger by RocksDB's accounting (KiB): memtables, block
# cache, table readers; what its RSS is made of.
ledger_mem_kb() {
  curl -s "http://127.0.0.1:$rport/metrics" 2>/dev/null | awk '
    /^altar_reconciler_ledger_memtable_bytes / {m = $2}
    /^altar_reconciler_ledger_block_cache_bytes / {c = $2}
    /^altar_reconciler_ledger_table_readers_bytes / {t = $2}
    END {printf "%d\t%d\t%d\n", m / 1024, c / 1024, t / 1024}'
}

samples="$dir/samples.tsv"
hdr='t_s\tshards\tworker_rss_kb\treconciler_rss_kb\tdata_root_kb\tlog_kb\tledger_kb\tcheckpoints_kb\tmemtables_kb\tblock_cache_kb\ttable_readers_kb\n'
printf "$hdr" >"$samples"
printf "$hdr" >&2
t0=$(date +%s)
(
  while kill -0 "$wpid" 2>/dev/null; do
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(($(date +%s) - t0))" "$(done_shards)" "$(rss_kb "$wpid")" \
      "$(rss_kb "$rpid")" "$(du_kb "$dir/data")" "$(du_kb "$dir/log")" "$(du_kb "$dir/ledger")" \
      "$(du_kb "$dir/checkpoints")" "$(ledger_mem_kb)" >>"$samples"
    tail -n 1 "$samples" >&2
    sleep "$INTERVAL"
  done
) &
spid=$!
pids="$pids $spid"

sent=0
b=0
while [ "$sent" -lt "$N" ]; do
  k=$((N - sent < BATCH ? N - sent : BATCH))
  python3 -c "
import json, sys
b, k = int(sys.argv[1]), int(sys.argv[2])
for i in range(k):
    print(json.dumps({'kind': 'soak', 'image': 'none', 'command': ['/bin/true'], 'labels': {'shard': '%d-%d' % (b, i)}}))
" "$b" "$k" >"$dir/batch.jsonl"
  if ! "$ALTAR" submit $cfg --wait "$dir/batch.jsonl" >/dev/null 2>"$dir/submit.log"; then
    echo "soak: batch $b did not settle (see $dir/submit.log)" >&2
    exit 1
  fi
  sent=$((sent + k))
  b=$((b + 1))
done
sleep "$INTERVAL" # one sample after the last batch
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
[ -z "${SOAK_SAMPLES:-}" ] || cp "$samples" "$SOAK_SAMPLES"

python3 - "$samples" "$N" "$WARMUP" <<'PY'
import sys
path, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [l.rstrip("\n").split("\t") for l in open(path)][1:]
rows = [[float(x) for x in r] for r in rows if len(r) == 11 and all(x.strip() for x in r)]
cols = ["worker RSS", "reconciler RSS", "data root", "log", "ledger", "checkpoints", " memtables", " block cache",
        " table readers"]
after = [r for r in rows if r[1] >= warm]
print(f"soak: {n} shards of /bin/true, {len(rows)} samples, warm-up {warm} shards, "
      f"{rows[-1][0]:.0f} s ({rows[-1][1] / max(rows[-1][0], 1):.0f} shards/s)" if rows else "soak: no samples")
def slope(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
# The halves split the shards done after warm-up in two. A store bounded
# by age holds what the last minutes brought, so its level follows the
# shard rate: each half's range and rate are printed beside its slope.
mid = (after[0][1] + after[-1][1]) / 2 if after else 0
first, second = [r for r in after if r[1] <= mid], [r for r in after if r[1] >= mid]
def rate(rs):
    return (rs[-1][1] - rs[0][1]) / max(rs[-1][0] - rs[0][0], 1) if len(rs) >= 2 else 0.0
if after:
    print(f"per 10^5 shards after warm-up; halves: {after[0][1]:.0f}-{mid:.0f} shards ({rate(first):.0f} shards/s) "
          f"and {mid:.0f}-{after[-1][1]:.0f} ({rate(second):.0f} shards/s)")
print(f"{'figure':15} {'at warm-up':>10} {'at end':>10} {'max':>9} {'whole':>10} {'1st half':>10} {'2nd half':>10}"
      f"  {'range, 1st half':>17}  {'range, 2nd half':>17}  (MiB)")
def per1e5(rs, c):
    return slope([r[1] for r in rs], [r[c + 2] for r in rs]) * 1e5 / 1024 if len(rs) >= 2 else float("nan")
def rng(rs, c):
    return f"{min(r[c + 2] for r in rs) / 1024:7.1f}-{max(r[c + 2] for r in rs) / 1024:7.1f}" if rs else "-"
for c, name in enumerate(cols):
    ys = [r[c + 2] for r in after]
    if len(after) < 2:
        break
    print(f"{name:15} {ys[0] / 1024:10.1f} {ys[-1] / 1024:10.1f} {max(ys) / 1024:9.1f} {per1e5(after, c):+10.2f} "
          f"{per1e5(first, c):+10.2f} {per1e5(second, c):+10.2f}  {rng(first, c):>17}  {rng(second, c):>17}")
PY
