# What the takeover tests (retention_e2e.sh, standby_e2e.sh,
# partition_takeover_e2e.sh) share; POSIX sh, sourced after common.sh. They
# read the caller's $T, $prefix (topics $prefix.status, …), $cp_dir (the
# checkpoint storage) and $T/a.yaml (a config of the fleet, for the log
# commands).
#   takeover_config FILE LEDGER READY DEAD CHECKPOINTS [LEDGER_EXTRA]
#                         a fleet config: groups of 5 folds by model, 4 status
#                         partitions kept for ever, checkpoints every second to
#                         CHECKPOINTS (none when empty), small local segments
#   fold_jobs "MODELS" "FOLDS"   fold jobs (JSON lines) of those models and folds
#   bg LOG CMD...         runs CMD in the background, output to LOG; pid in $last (and $pids)
#   status_ends           the sum of the status topic's end offsets, and of its beginnings
#   status_ends_by_part   "partition end" lines of the status topic
#   covered               the status events latest.json's checkpoint covers (a sum)
#   covered_by_part       "partition next" lines: per partition, the furthest
#                         any checkpoint in $cp_dir/cp/ covers
#   count_ready TOPIC     group events on TOPIC, and their distinct event ids
#   wait_ready TOPIC N    waits (bounded) for N group events on TOPIC; echoes the count seen
#   ledger_read CONFIG LEDGER   the status events a reconciler's ledger applied (a sum; read-only)

takeover_config() {
  {
    # Forever, stated: reconcilers without checkpoints refuse a status topic
    # that keeps less (with checkpoints the default is topics.retention_ms).
    altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 4}" "partitions: 4, status_retention_ms: -1"
    echo "groups:"
    echo "  fold: {group_by: [model], ready_when: {all_folds: 5}, on_failed: dead_letter}"
  } | sed -e "s#ledger: {path: $T/ledger}#ledger: {path: $2${5:+, checkpoints: $5, checkpoint_interval_s: 1${6:+, $6}}}#" \
          -e "s#ready: $prefix.ready, dead: $prefix.dead#ready: $3, dead: $4#" >"$1"
  # Small segments on the local log: deleting records drops whole segments.
  if [ "$TRANSPORT" = local ]; then sed -i "s#^  dir: $T/log\$#  dir: $T/log\n  segment.bytes: 1024#" "$1"; fi
}

fold_jobs() {
  for m in $1; do
    for f in $2; do
      printf '{"kind":"fold","image":"x","command":["true","%s-%s"],"labels":{"model":"%s-m%s","fold":"%s"}}\n' \
        "$m" "$f" "$prefix" "$m" "$f"
    done
  done
}

bg() {
  log="$1"
  shift
  "$@" >>"$log" 2>&1 &
  last=$!
  pids="$pids $last"
}

status_ends() {
  "$ALTAR_BIN" log topics --config "$T/a.yaml" --topic "$prefix.status" --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); ps=[p for t in (d if isinstance(d,list) else d.get("topics",[])) for p in t["partitions"]]; print(sum(p["end"] for p in ps), sum(p["beginning"] for p in ps))'
}

status_ends_by_part() {
  "$ALTAR_BIN" log topics --config "$T/a.yaml" --topic "$prefix.status" --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); ps=[p for t in (d if isinstance(d,list) else d.get("topics",[])) for p in t["partitions"]]; [print(p["partition"], p["end"]) for p in ps]'
}

covered() { python3 -c 'import json,sys; print(sum(o["next"] for o in json.load(open(sys.argv[1]))["offsets"]))' "$cp_dir/latest.json" 2>/dev/null || echo 0; }

covered_by_part() {
  python3 - "$cp_dir/cp" <<'EOF' 2>/dev/null
import glob, json, os, sys
best = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    try:
        offs = json.load(open(f))["offsets"]
    except (OSError, ValueError, KeyError):
        continue
    for o in offs:
        best[o["partition"]] = max(best.get(o["partition"], -1), o["next"])
for p in sorted(best):
    print(p, best[p])
EOF
}

count_ready() {
  "$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$1" --from-beginning --exit 2>/dev/null |
    python3 -c 'import json,sys; ids=[json.loads(l)["event_id"] for l in sys.stdin if l.strip()]; print(len(ids), len(set(ids)))'
}

wait_ready() {
  c=0
  for _ in $(seq 1 900); do
    set -- "$1" "$2" $(count_ready "$1")
    c="${3:-0}"
    [ "$c" -ge "$2" ] && break
    sleep 0.1
  done
  echo "$c"
}

ledger_read() {
  "$ALTAR_BIN" log offsets --config "$1" --group altar.reconcilers --ledger "$2" \
    --topic "$prefix.status" --json 2>/dev/null |
    python3 -c 'import json,sys; print(sum(e["committed"] or 0 for e in json.load(sys.stdin)))' 2>/dev/null || echo 0
}
