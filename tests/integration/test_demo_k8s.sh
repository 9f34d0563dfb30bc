#!/bin/sh
# altar demo --backend kubernetes end to end against the real control plane
# (scripts/services/k8s.sh): a reconciler and two workers, each shard a Job
# that kwok finishes; every group fires and each shard's Job is on the server.
# Exit 77 (skipped) when the cluster is not running, 1 under CI=true.
set -eu
BIN="${ALTAR_BIN:?run through ctest}"
. "${ALTAR_SOURCE_DIR:?run through ctest}/tests/lib/k8s.sh"
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-demo-k8s.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
# altar run: one spec to its end through $KUBECONFIG (namespace altar-test,
# the context's); kwok ends it with the exit code its label names.
printf '%s' '{"kind":"cli_run","image":"busybox:1.36","command":["false"],"labels":{"job_id":"cli","kwok.altar.test/exit-code":"3"},"timeout_s":120}' >"$dir/spec.json"
KUBECONFIG="$K8S/admin.kubeconfig" "$BIN" run "$dir/spec.json" --backend kubernetes --quiet >"$dir/run.json" || true
jq -e '.state == "failed" and .failure.reason == "exit_3" and .handle.backend == "kubernetes"' "$dir/run.json" >/dev/null ||
  { echo "FAIL: altar run: $(cat "$dir/run.json")" >&2; exit 1; }
echo "ok: altar run --backend kubernetes ended exit_3 on the control plane"
"$BIN" demo --backend kubernetes --kubeconfig "$K8S/admin.kubeconfig" --dir "$dir" --models 2 --folds 3 \
  >"$dir/out.txt" 2>"$dir/err.txt" || { cat "$dir/err.txt" "$dir/out.txt" >&2; exit 1; }
cat "$dir/out.txt"
grep -q '^2 groups fired, 0 dead-lettered, 6 shards' "$dir/out.txt" || { echo "FAIL: not every group fired" >&2; exit 1; }
# Every shard ran as a Job and succeeded (the workers' own counts)…
sub="$(sed -n 's/^worker-[12] *consumed [0-9]*, submitted \([0-9]*\), succeeded \([0-9]*\).*/\1 \2/p' "$dir/out.txt" |
  awk '{s += $1; t += $2} END {print s, t}')"
[ "$sub" = "6 6" ] || { echo "FAIL: want 6 Jobs submitted and 6 succeeded, got '$sub'" >&2; exit 1; }
# …and the workers reaped each finished Job once its event was acknowledged:
# none of this run's is left on the server.
run="$(sed -n 's/.*submitted job \([^:]*\):.*/\1/p' "$dir/err.txt" | head -n 1)"
[ -n "$run" ] || { echo "FAIL: no run id in the demo's output" >&2; exit 1; }
left="$(api "/apis/batch/v1/namespaces/altar-demo/jobs?labelSelector=job_id%3D$run" | jq '.items | length')"
[ "$left" = 0 ] || { echo "FAIL: $left Jobs of run $run are still on the server" >&2; exit 1; }
echo "ok: 6 Jobs ran on the control plane and were reaped, 2 groups fired"
