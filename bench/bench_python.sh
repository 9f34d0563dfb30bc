#!/bin/sh
# Specs submitted per second from Python (altar.execution's LocalJobQueue)
# against `altar submit` of the same specs, both to a fresh embedded log, in
# the same run; prints both rates and their ratio (the aim is >= 0.8). Each
# side's time covers reading its input as it is given (JSON Lines for the
# binary, ContainerTaskSpec objects for Python), checking every spec and
# publishing them as one acknowledged job.
#   bench/bench_python.sh [BUILD_DIR]     (N specs: ALTAR_BENCH_SPECS, default 20000)
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
B="$(cd "${1:-$SRC/build}" && pwd)"
N="${ALTAR_BENCH_SPECS:-20000}"
PY="$("$SRC/scripts/python-env.sh")"
T="$(mktemp -d "${TMPDIR:-/tmp}/altar-bench-python.XXXXXX")"
trap 'rm -rf "$T"' EXIT
export ALTAR_LIBRARY="$B/libaltar.so"
for side in cli py; do
  printf 'transport: {name: local, dir: %s/log-%s}\ntopics: {partitions: 8}\ngroups:\n  bench: {group_by: [job_id, model], ready_when: {all_folds: 5}}\n' \
    "$T" "$side" >"$T/$side.yaml"
done
"$PY" - "$N" "$T/specs.jsonl" <<'PY'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"kind": "bench", "image": "registry.example.org/bench:1",
                            "command": ["python", "-m", "bench", "--shard", str(i)],
                            "labels": {"model": f"m{i // 5}", "fold": str(i % 5)},
                            "inputs": [{"uri": f"gs://bucket/in/{i}.bed", "logical_path": f"jobs/in/{i}.bed",
                                        "digest": "sha256:" + "ab" * 32}],
                            "resources": {"memory_mb": 2048}, "timeout_s": 3600}) + "\n")
PY
"$PY" - "$B/altar" "$T" "$N" <<'PY'
import asyncio, json, subprocess, sys, time
from altar.execution import LocalJobQueue, spec_from_dict
altar, t, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
subprocess.run([altar, "submit", "--config", f"{t}/cli.yaml", f"{t}/specs.jsonl"], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
cli = time.perf_counter() - t0
specs = [spec_from_dict(json.loads(line)) for line in open(f"{t}/specs.jsonl")]
async def submit() -> float:
    async with LocalJobQueue(f"{t}/py.yaml") as q:
        t0 = time.perf_counter()
        await q.submit_specs(specs, kind="bench")
        return time.perf_counter() - t0
py = asyncio.run(submit())
print(f"altar submit:      {n} specs in {cli:.3f} s = {n / cli:,.0f} specs/s (baseline)")
print(f"Python submit:     {n} specs in {py:.3f} s = {n / py:,.0f} specs/s")
print(f"ratio Python/CLI:  {cli / py:.2f} (aim >= 0.8)")
PY
