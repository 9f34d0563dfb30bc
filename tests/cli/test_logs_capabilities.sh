#!/bin/sh
# altar logs asks the backend a task ran on what it can do (its declared
# ALTAR_BACKEND_CAP_LOGS, docs/plugins.md) before it searches for output:
#   - a task of a backend that keeps no output (kubernetes) with --stdout is
#     refused at once, naming the backend and what it lacks (exit 1);
#   - without --stdout its failure's detail from the ledger is printed, saying
#     the backend keeps no output here;
#   - a task of a backend that keeps output (process) and left none is still
#     looked for under the data root, as before.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin logs-capabilities
A="$ALTAR_BIN"

printf 'ledger: {path: ./unused}\ngroups: {}\n' >"$T/altar.yaml"
K8S=$(printf 'k8s-task' | sha256sum | cut -d' ' -f1)
PROC=$(printf 'process-task' | sha256sum | cut -d' ' -f1)
# ev BACKEND TASK_KEY EVENT STATE TS
ev() {
  spec=null failure=null
  [ "$3" = submitted ] && spec='{"kind":"score","image":"img:1","command":["score"],"labels":{"job_id":"j1"}}'
  [ "$4" = failed ] && failure='{"reason":"exit_3","detail":"model weights missing","deterministic":true,"exit_code":3}'
  printf '{"v":1,"type":"status","event":"%s","task_key":"%s","kind":"score","handle":{"backend":"%s","external_id":"e-%s","labels":{"job_id":"j1"},"plugin_identity":null},"state":"%s","failure":%s,"spec":%s,"worker":"w1","source":null,"ts":%s}\n' \
    "$3" "$2" "$1" "$1" "$4" "$failure" "$spec" "$5"
}
{
  ev kubernetes "$K8S" submitted pending 1
  ev kubernetes "$K8S" state failed 2
  ev process "$PROC" submitted pending 3
  ev process "$PROC" state failed 4
} >"$T/events.jsonl"
"$A" ledger apply --ledger "$T/ledger" --groups "$T/altar.yaml" "$T/events.jsonl" >/dev/null 2>"$T/apply.err" ||
  fatal "ledger apply: $(cat "$T/apply.err")"

rc=0
"$A" logs --ledger "$T/ledger" --data-root "$T/data" "$K8S" --stdout >"$T/out" 2>"$T/err" || rc=$?
check "[ $rc -eq 1 ] && [ ! -s '$T/out' ] && grep -qF 'ran on the kubernetes backend, which cannot keep task output under its data root (altar logs)' '$T/err'" \
  "logs --stdout of a kubernetes task (rc $rc): $(cat "$T/err")"
check "[ ! -e '$T/data' ]" "logs created the data root"

rc=0
"$A" logs --ledger "$T/ledger" --data-root "$T/data" "$K8S" >"$T/out" 2>"$T/err" || rc=$?
check "[ $rc -eq 0 ] && grep -qF 'the kubernetes backend keeps no output here' '$T/out' && grep -q '^model weights missing' '$T/out' && grep -qF 'failed: exit_3' '$T/out'" \
  "logs of a kubernetes task (rc $rc): $(cat "$T/out" "$T/err")"

rc=0
"$A" logs --ledger "$T/ledger" --data-root "$T/data" "$PROC" --stdout >"$T/out" 2>"$T/err" || rc=$?
check "[ $rc -eq 1 ] && grep -qF \"no stdout kept for task $PROC under $T/data/logs\" '$T/err'" \
  "logs --stdout of a process task without output (rc $rc): $(cat "$T/err")"

altar_test_end logs-capabilities
