#!/bin/sh
# `altar run` on the process backend, end to end: a verified input staged, the
# task reading and writing the logical layout, an output collected; failures,
# bad input (exit 2, message naming the field) and Ctrl-C (exit 130, task
# cancelled).
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin run-cli
ALTAR="$ALTAR_BIN"

mkdir -p "$T/store" "$T/results" "$T/data"
printf 'hello altar\n' > "$T/store/input.txt"
DIGEST="sha256:$(sha256sum "$T/store/input.txt" | cut -d' ' -f1)"
BAD="sha256:$(printf 'something else' | sha256sum | cut -d' ' -f1)"

# spec NAME COMMAND_JSON [EXTRA_JSON_FIELDS]
spec() {
  printf '{"kind":"cli-test","image":"debian:12","command":%s,"labels":{"job_id":"j1","fold":"0"}%s}\n' "$2" "${3:-}" > "$T/$1.json"
}
run() { # run NAME -> sets RC, OUT, ERR files
  "$ALTAR" run "$T/$1.json" --data-root "$T/data" --quiet > "$T/$1.out" 2> "$T/$1.err"
  RC=$?
}

# 1. verified input in, output collected back.
COPY='["sh","-c","tr a-z A-Z < \"$ALTAR_DATA_ROOT/jobs/j1/in.txt\" > \"$ALTAR_DATA_ROOT/jobs/j1/out.txt\""]'
spec e2e "$COPY" ",\"inputs\":[{\"uri\":\"file://$T/store/input.txt\",\"logical_path\":\"jobs/j1/in.txt\",\"digest\":\"$DIGEST\"}],\"outputs\":[{\"uri\":\"file://$T/results/out.txt\",\"logical_path\":\"jobs/j1/out.txt\"}]"
run e2e
[ "$RC" -eq 0 ] && ok "e2e exits 0" || { fail "e2e exit $RC"; cat "$T/e2e.err" >&2; }
grep -q '"state": *"succeeded"' "$T/e2e.out" && ok "e2e prints succeeded" || fail "e2e output: $(cat "$T/e2e.out")"
grep -q '"job_id": *"j1"' "$T/e2e.out" && ok "status carries labels" || fail "labels missing: $(cat "$T/e2e.out")"
[ "$(cat "$T/results/out.txt" 2>/dev/null)" = "HELLO ALTAR" ] && ok "output collected" || fail "output not collected"
[ -f "$T/data/jobs/j1/in.txt" ] && ok "input staged at <data_root>/<logical>" || fail "input not staged"

# 2. a digest mismatch fails before anything runs, and the bad copy is gone.
spec mismatch '["sh","-c","exit 0"]' ",\"inputs\":[{\"uri\":\"file://$T/store/input.txt\",\"logical_path\":\"jobs/j2/in.txt\",\"digest\":\"$BAD\"}]"
run mismatch
[ "$RC" -eq 1 ] && ok "mismatch exits 1" || fail "mismatch exit $RC"
grep -q 'inputs\[0\]' "$T/mismatch.err" && ok "mismatch names the input" || fail "mismatch message: $(cat "$T/mismatch.err")"
[ ! -e "$T/data/jobs/j2/in.txt" ] && ok "bad copy deleted" || fail "bad copy left behind"

# 3. a failing command: exit 1 and the status says why.
spec exit3 '["sh","-c","exit 3"]'
run exit3
[ "$RC" -eq 1 ] && ok "exit 3 -> exit 1" || fail "exit3 exit $RC"
grep -q '"reason": *"exit_3"' "$T/exit3.out" && ok "reason exit_3" || fail "exit3 output: $(cat "$T/exit3.out")"
grep -q '"exit_code": *3' "$T/exit3.out" && ok "exit_code 3" || fail "exit_code missing"

spec slow '["sleep","30"]' ',"timeout_s":1'
run slow
[ "$RC" -eq 1 ] && grep -q '"reason": *"timeout"' "$T/slow.out" && ok "timeout" || fail "timeout: rc $RC $(cat "$T/slow.out")"

# 4. bad input: exit 2 before anything runs, the message names the field.
bad() { # bad NAME FIELD_PATTERN
  run "$1"
  if [ "$RC" -eq 2 ] && grep -q "$2" "$T/$1.err"; then ok "bad input $1"; else fail "bad input $1: rc $RC: $(cat "$T/$1.err")"; fi
}
spec escape '["true"]' ",\"inputs\":[{\"uri\":\"file://$T/store/input.txt\",\"logical_path\":\"../outside.txt\"}]"
bad escape logical_path
spec baddigest '["true"]' ",\"inputs\":[{\"uri\":\"file://$T/store/input.txt\",\"logical_path\":\"a.txt\",\"digest\":\"sha256:abc\"}]"
bad baddigest digest
spec emptycmd '[]'
bad emptycmd command
spec negtimeout '["true"]' ',"timeout_s":-5'
bad negtimeout timeout_s
spec gpu '["true"]' ',"resources":{"gpu":"a100","count":1}'
bad gpu 'resources.gpu'
printf '{"kind": "x", "image": ' > "$T/broken.json"
bad broken .
"$ALTAR" run --no-such-flag > /dev/null 2>&1; [ $? -eq 2 ] && ok "unknown flag exits 2" || fail "unknown flag"
"$ALTAR" run "$T/e2e.json" --backend no-such-backend > /dev/null 2> "$T/nob.err"
[ $? -eq 2 ] && grep -q 'no-such-backend' "$T/nob.err" && ok "unknown backend exits 2" || fail "unknown backend: $(cat "$T/nob.err")"
[ ! -d "$T/data/tasks" ] || [ "$(ls "$T/data/tasks" | wc -l)" -eq 3 ] && ok "bad input ran nothing" || fail "bad input started tasks: $(ls "$T/data/tasks")"

# 5. Ctrl-C cancels the task and exits 130.
spec long '["sleep","300"]'
"$ALTAR" run "$T/long.json" --data-root "$T/data2" --quiet > "$T/long.out" 2> "$T/long.err" &
PID=$!
i=0
while [ $i -lt 200 ] && [ -z "$(ls "$T/data2/tasks" 2>/dev/null)" ]; do sleep 0.05; i=$((i + 1)); done
TASK="$(ls "$T/data2/tasks" 2>/dev/null | head -n1)"
[ -n "$TASK" ] || fail "long task never started"
# Wait for the supervisor to publish the command's pid, then interrupt.
i=0
while [ $i -lt 200 ] && ! grep -q '^pgid=' "$T/data2/tasks/$TASK/task" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
kill -INT "$PID"
wait "$PID"
RC=$?
[ "$RC" -eq 130 ] && ok "Ctrl-C exits 130" || fail "Ctrl-C exit $RC: $(cat "$T/long.err")"
i=0
while [ $i -lt 200 ] && ! grep -q '^\[status\]' "$T/data2/tasks/$TASK/task" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
grep -q '^reason=canceled' "$T/data2/tasks/$TASK/task" 2>/dev/null && ok "task cancelled" || fail "task not cancelled"
PGID="$(sed -n 's/^pgid=//p' "$T/data2/tasks/$TASK/task" 2>/dev/null)"
if [ -n "$PGID" ] && kill -0 "$PGID" 2>/dev/null; then fail "sleep still running"; else ok "no process left"; fi

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)" >&2; exit 1; fi
echo "all ok"
