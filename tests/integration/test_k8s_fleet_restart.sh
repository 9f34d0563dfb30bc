#!/bin/sh
# A fleet on the kubernetes backend across a restart of kube-apiserver (#30),
# against the real control plane (scripts/services/k8s.sh): a reconciler and
# a worker on the local log run two jobs of groups of Jobs. The first job is
# submitted and, as soon as its first Job is on the server, the API server is
# stopped and started again over the same etcd; the second job is submitted
# while it is down. The worker's Job watch resumes or lists again, its creates
# are retried, and no completion is missed: every group of both jobs fires
# exactly once on the ready topic, and every shard succeeded once.
# Exit 77 (skipped) when the cluster is not running, 1 under CI=true.
set -eu
: "${ALTAR_BIN:?run through ctest}" "${ALTAR_SOURCE_DIR:?run through ctest}"
. "$ALTAR_SOURCE_DIR/tests/lib/common.sh"
. "$ALTAR_SOURCE_DIR/tests/lib/k8s.sh"
altar_test_begin k8s-fleet-restart python3 jq curl
GROUPS_N=8
FOLDS=5
mkdir -p "$T/data"
prefix="k8sfleet-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: kubernetes, data_root: $T/data, slots: 8, namespace: altar-test, staging_root: $T/data, kubeconfig: \"$K8S/admin.kubeconfig\"}"
  altar_test_fold_groups
} >"$T/altar.yaml"
cfg="--config $T/altar.yaml"

specs() { # TAG: GROUPS_N groups of FOLDS shards, each a Job kwok ends with 0
  python3 - "$1" "$GROUPS_N" "$FOLDS" <<'PY'
import json, sys
tag, n, folds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for g in range(n):
    for f in range(folds):
        print(json.dumps({"kind": "shard", "image": "busybox:1.36", "command": ["true"],
                          "labels": {"group": f"{tag}{g}", "fold": str(f), "num_folds": str(folds)},
                          "timeout_s": 600}))
PY
}
specs a >"$T/a.jsonl"
specs b >"$T/b.jsonl"

"$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 &
pids="$pids $!"
"$ALTAR_BIN" worker $cfg --id w1 >>"$T/worker.log" 2>&1 &
pids="$pids $!"

# submit --wait prints the job id first, then follows the job to its end.
"$ALTAR_BIN" submit $cfg --wait --timeout 300 "$T/a.jsonl" >"$T/a.out" 2>"$T/a.err" &
wait_a=$!
job_a=""
n=0
for _ in $(seq 1 600); do
  job_a="${job_a:-$(grep -o 'j-[0-9a-f]*' "$T/a.out" 2>/dev/null | head -1)}"
  if [ -n "$job_a" ]; then
    api "/apis/batch/v1/namespaces/altar-test/jobs?labelSelector=job_id%3D$job_a" >"$T/jobs-a.json" || true
    n="$(jq '.items | length' "$T/jobs-a.json" 2>/dev/null)" || n=0
    [ "${n:-0}" -gt 0 ] && break
  fi
  sleep 0.1
done
[ "${n:-0}" -gt 0 ] || fatal "no Job of job A ($job_a) reached the server"
# The Jobs on the server that had not finished when the restart began: their
# completions can reach the worker only through the watch after it.
unfinished="$(jq '[.items[] | select((.status.succeeded // 0) == 0)] | length' "$T/jobs-a.json")"
echo "restarting kube-apiserver with $n of job $job_a's Jobs on the server, $unfinished not finished"
check '[ "$unfinished" -gt 0 ]' "every Job of job A on the server had finished before the restart: nothing in flight across it"
ALTAR_K8S_DIR="$K8S" bash "$ALTAR_SOURCE_DIR/scripts/services/k8s.sh" restart-apiserver >"$T/restart.log" 2>&1 &
restart=$!
# Job B while the server stops (k8s.sh gives it 5 s, then SIGKILL) or is down.
sleep 1
"$ALTAR_BIN" submit $cfg --wait --timeout 300 "$T/b.jsonl" >"$T/b.out" 2>"$T/b.err" &
wait_b=$!
wait "$restart" || fatal "restarting kube-apiserver failed: $(cat "$T/restart.log")"
ok "kube-apiserver restarted mid-run"
job_b="$(grep -o 'j-[0-9a-f]*' "$T/b.out" | head -1)"
for side in a b; do
  eval "pid=\$wait_$side"
  if wait "$pid"; then ok "job $side: every group fired"; else fail "job $side did not complete: $(tail -5 "$T/$side.err")"; fi
done

# Each group of both jobs fired exactly once, with all its members; none dead.
"$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit >"$T/ready.jsonl" 2>/dev/null
"$ALTAR_BIN" log consume $cfg --topic "$prefix.dead" --from-beginning --exit >"$T/dead.jsonl" 2>/dev/null
check '[ ! -s "$T/dead.jsonl" ]' "events on the dead topic: $(head -c 600 "$T/dead.jsonl")"
python3 - "$T/ready.jsonl" "$job_a" "$job_b" "$GROUPS_N" "$FOLDS" <<'PY' && ok "every group of both jobs fired once" || fail "the ready topic does not hold one event per group (above)"
import collections, json, sys
path, job_a, job_b, n, folds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
events = [json.loads(line) for line in open(path) if line.startswith("{")]
per_key = collections.Counter(ev["group_key"] for ev in events)
bad = False
for job in (job_a, job_b):
    keys = [k for k in per_key if job in k]
    if len(keys) != n:
        print(f"job {job}: {len(keys)} groups fired, want {n}")
        bad = True
for key, count in per_key.items():
    if count != 1:
        print(f"group {key}: {count} events")
        bad = True
for ev in events:
    if ev["event"] != "fired" or len(ev.get("shards") or []) != folds:
        print(f"group {ev['group_key']}: {ev['event']} with {len(ev.get('shards') or [])} shards, want fired with {folds}")
        bad = True
if len(per_key) != 2 * n:
    print(f"{len(per_key)} groups in all, want {2 * n}")
    bad = True
sys.exit(1 if bad else 0)
PY
altar_test_end k8s-fleet-restart
