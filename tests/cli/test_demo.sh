#!/bin/sh
# `altar demo` (what `make run` runs): a reconciler and two workers as
# processes, one transient failure retried, every group fired, outputs there.
set -eu
dir="$(mktemp -d "${TMPDIR:-/tmp}/altar-demo-XXXXXX")"
trap 'rm -rf "$dir"' EXIT
"$ALTAR_BIN" demo --dir "$dir" --models 2 --folds 2 > "$dir/out.txt" 2> "$dir/err.txt" || {
  cat "$dir/out.txt" "$dir/err.txt"; echo "FAIL: demo exited non-zero"; exit 1; }
cat "$dir/out.txt"
grep -q "^2 groups fired, 0 dead-lettered, 4 shards" "$dir/out.txt" || { echo "FAIL: not every group fired"; exit 1; }
grep -Eq " [1-9][0-9]* retried" "$dir/out.txt" || { echo "FAIL: the flaky shard was not retried"; cat "$dir"/*.log; exit 1; }
[ "$(grep -c ' 2/2 in ' "$dir/out.txt")" = 2 ] || { echo "FAIL: outputs missing"; exit 1; }
for f in "$dir"/results/*/model-*/fold-*.txt; do
  grep -q "^fold=[01] input_sha256=[0-9a-f]\{64\}$" "$f" || { echo "FAIL: bad output $f"; exit 1; }
done
# Nothing left running.
if pgrep -f "altar (worker|reconciler) --config $dir" >/dev/null; then echo "FAIL: daemons left running"; exit 1; fi
echo "demo: ok"
