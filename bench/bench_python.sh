#!/bin/sh
# Specs submitted per second from Python (altar.execution's LocalJobQueue)
# against `altar submit` of the same specs, both to a fresh embedded log, in
# the same run; prints both rates and their ratio (the aim is >= 0.8). Each
# side's time covers reading its input as it is given (JSON Lines for the
# binary, ContainerTaskSpec objects for Python), checking every spec and
# publishing them as one acknowledged job.
# Then reconcile_once from Python: N shards in 5-fold groups recorded in a
# RocksDB ledger, one tick with a Python backend whose poll reports every
# shard succeeded and a Python on_ready per group; its state changes per
# second against bench_ledger's events per second (status events applied to
# the RocksDB ledger with the same grouping, in C) run in the same minute.
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
"$PY" - "$T" "$N" "$B/bench/bench_ledger" <<'PY'
import asyncio, re, subprocess, sys, time
import altar.execution as ax
t, n = sys.argv[1], int(sys.argv[2])

class Succeeds(ax.ExecutionBackend):
    name = "bench"
    async def submit(self, spec: ax.ContainerTaskSpec) -> ax.TaskHandle:
        raise NotImplementedError
    async def poll(self, handles: list[ax.TaskHandle]) -> list[ax.TaskStatus]:
        return [ax.TaskStatus(h, ax.TaskState.SUCCEEDED) for h in handles]

async def go() -> None:
    ledger = ax.RocksDBTaskLedger(f"{t}/ledger")
    fired = 0
    def on_ready(gk: str, shards: list[ax.TaskHandle]) -> None:
        nonlocal fired
        fired += 1
    for i in range(n):
        labels = {"job_id": "b", "model": f"m{i // 5}", "fold": str(i % 5)}
        spec = ax.ContainerTaskSpec("bench", "img", ["run", str(i)], labels=labels)
        await ledger.record(ax.TaskHandle("bench", f"t{i}", labels), "bench", ax.spec_to_dict(spec))
    specs = [ax.GroupSpec("bench", ax.group_by("job_id", "model"), ax.all_folds(5), on_ready)]
    t0 = time.perf_counter()
    r = await ax.reconcile_once(Succeeds(), ledger, specs)
    dt = time.perf_counter() - t0
    assert r.polled == n and fired == n // 5, (r.polled, fired)
    ledger.close()
    out = subprocess.run([sys.argv[3], str(n), str(n)], capture_output=True, text=True, check=True).stdout
    c_rate = float(re.search(r"ledger apply with grouping\s+(\d+) events/s", out).group(1))
    print(f"reconcile_once:    {n} shards, {fired} groups fired in {dt:.3f} s = {n / dt:,.0f} state changes/s")
    print(f"bench_ledger (C):  {c_rate:,.0f} events/s applied with the same grouping (baseline)")
    print(f"ratio Python/C:    {n / dt / c_rate:.2f}")
asyncio.run(go())
PY
