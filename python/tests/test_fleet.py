"""End to end: a Python program drives a running fleet (a reconciler and a
`process` worker, the real altar binary) through altar's JobQueue, on the
embedded log and on Kafka (the broker at ALTAR_KAFKA_BROKERS, which
scripts/services/kafka.sh starts; missing, the Kafka cases fail): a 3 x 5
job yields exactly 3 group events, a cancelled job settles as cancelled,
refusals raise naming the spec and field, and docs/python.md's programs run
as written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import altar.execution as ax
from altar.execution import ContainerTaskSpec, FleetJobQueue, GroupEvent, KafkaJobQueue, LocalJobQueue

# Bounds on waiting for a running fleet; generous, never asserted as durations.
EVENT_TIMEOUT_S = 240.0


def transport_yaml(transport: str, tmp_path: Path) -> str:
    if transport == "local":
        return f"transport: {{name: local, dir: {tmp_path}/log}}\ntopics: {{partitions: 4}}\n"
    brokers = os.environ.get("ALTAR_KAFKA_BROKERS")
    if not brokers:
        raise RuntimeError("ALTAR_KAFKA_BROKERS is not set: start the broker with scripts/services/kafka.sh start")
    p = f"py-{uuid.uuid4().hex[:12]}"  # topics of this test alone on a shared broker
    return (f"transport: {{name: kafka, kafka: {{bootstrap.servers: \"{brokers}\"}}}}\n"
            f"topics: {{jobs: {p}.jobs, status: {p}.status, ready: {p}.ready, dead: {p}.dead, dlq: {p}.dlq,"
            " partitions: 4}\n")


def queue_for(transport: str, cfg: Path) -> FleetJobQueue:
    return LocalJobQueue(cfg) if transport == "local" else KafkaJobQueue(cfg)


@pytest.fixture(params=["local", "kafka"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path, altar_bin: str) -> Iterator[tuple[str, Path]]:
    """A reconciler and a worker on the given transport; yields (transport, config file)."""
    transport = str(request.param)
    cfg = tmp_path / "altar.yaml"
    cfg.write_text(
        transport_yaml(transport, tmp_path) +
        f"backend: {{name: process, data_root: {tmp_path}/data, slots: 4}}\n"
        f"ledger: {{path: {tmp_path}/ledger}}\n"
        "groups:\n"
        "  train: {group_by: [job_id, model], ready_when: {all_folds: 5}, on_failed: dead_letter}\n"
        "  slow: {group_by: [job_id], ready_when: single, on_failed: dead_letter}\n"
    )
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    for args, name in (([altar_bin, "reconciler", "--config", str(cfg)], "reconciler"),
                       ([altar_bin, "worker", "--config", str(cfg), "--id", "w1", "--poll-ms", "50", "--drain", "1"],
                        "worker")):
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))
    try:
        yield transport, cfg
    finally:
        # A fleet process that ended by itself is the likely cause of a failure: show its log.
        for p, name in zip(procs, ("reconciler", "worker")):
            if p.poll() is not None:
                print(f"{name} exited with {p.returncode} during the test:\n"
                      f"{(tmp_path / f'{name}.log').read_text(errors='replace')}", file=sys.stderr)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def shard(model: str, fold: int, command: list[str] | None = None, out: Path | None = None) -> ContainerTaskSpec:
    """A train shard; with out, it writes jobs/<model>/<fold>.txt under its data root, an output saved to out."""
    outputs = []
    if out is not None:
        outputs = [ax.Transfer((out / f"{model}-{fold}.txt").as_uri(), f"jobs/{model}/{fold}.txt")]
    return ContainerTaskSpec(kind="train", image="none",
                             command=["sh", "-c", f"echo model {model} fold {fold}"] if command is None else command,
                             labels={"model": model, "fold": str(fold)}, outputs=outputs)


async def collect(queue: FleetJobQueue, job_id: str, n: int) -> list[GroupEvent]:
    out: list[GroupEvent] = []
    async for ev in queue.group_events(job_id, timeout_s=EVENT_TIMEOUT_S):
        out.append(ev)
        if len(out) == n:
            break
    return out


def test_a_3x5_job_fires_exactly_3_groups(fleet: tuple[str, Path], altar_bin: str) -> None:
    transport, cfg = fleet
    data, out = cfg.parent / "data", cfg.parent / "out"

    def write(m: str, f: int) -> list[str]:
        return ["sh", "-c", f"mkdir -p {data}/jobs/{m} && echo result {m} {f} > {data}/jobs/{m}/{f}.txt"]

    async def go() -> tuple[str, list[GroupEvent], list[GroupEvent]]:
        async with queue_for(transport, cfg) as queue:
            specs = [shard(m, f, write(m, f), out) for m in ("m1", "m2", "m3") for f in range(5)]
            job_id = await queue.submit("train", {"specs": specs})
            events = await collect(queue, job_id, 3)
            # Read again from the beginning once the fleet says the job is settled:
            # still exactly these 3, nothing more.
            status = json.loads(subprocess.run([altar_bin, "status", "--config", str(cfg), job_id, "--json"],
                                               capture_output=True, text=True, check=True).stdout)
            again: list[GroupEvent] = []
            with pytest.raises(TimeoutError):
                async for ev in queue.group_events(job_id, timeout_s=3):
                    again.append(ev)
            assert status["groups"]["fired"] == 3, status
            # The same from Python: 15 succeeded shards, 3 fired groups, 15 outputs saved.
            st = await queue.status(job_id)
            assert st.by_state[ax.TaskState.SUCCEEDED] == 15 and len(st.shards) == 15
            assert sorted(g.event_id for g in st.groups) == sorted(e.event_id for e in events)
            assert len(st.outputs) == 15
            for t in st.outputs:
                m, f = Path(t.logical_path).parent.name, Path(t.logical_path).stem
                assert (out / f"{m}-{f}.txt").read_text() == f"result {m} {f}\n"
            assert (await queue.status("no-such-job")).records == []
            return job_id, events, again

    job_id, events, again = asyncio.run(go())
    assert len(events) == 3
    assert all(ev.event == "fired" and ev.fired for ev in events)
    assert sorted(ev.group_key for ev in events) == [f"{job_id}:m1", f"{job_id}:m2", f"{job_id}:m3"]
    for ev in events:
        assert ev.kind == "train"
        assert len(ev.shards) == 5
        assert sorted(h.labels["fold"] for h in ev.shards) == ["0", "1", "2", "3", "4"]
        assert all(h.labels["job_id"] == job_id and h.backend == "process" for h in ev.shards)
        assert len(ev.event_id) == 64
    assert sorted(e.event_id for e in again) == sorted(e.event_id for e in events)


def test_cancel_from_python_settles_the_job(fleet: tuple[str, Path]) -> None:
    transport, cfg = fleet

    async def go() -> list[GroupEvent]:
        async with queue_for(transport, cfg) as queue:
            spec = ContainerTaskSpec(kind="slow", image="none", command=["sleep", "300"])
            job_id = await queue.submit_specs([spec], kind="slow")
            # Cancel once the task runs or before: either way the group settles as cancelled.
            await queue.cancel(job_id)
            await queue.cancel(job_id)  # again: changes nothing
            return await collect(queue, job_id, 1)

    (ev,) = asyncio.run(go())
    assert ev.event == "cancelled" and not ev.fired


@pytest.mark.parametrize("fleet", ["local"], indirect=True)
def test_refusals_name_the_spec_and_field_and_publish_nothing(fleet: tuple[str, Path], tmp_path: Path) -> None:
    _, cfg = fleet

    async def go() -> None:
        async with LocalJobQueue(cfg) as queue:
            with pytest.raises(ax.InvalidArgument) as e:
                await queue.submit("train", {"specs": [shard("m1", 0), shard("m1", 1, command=[])]})
            assert "command" in str(e.value)
            with pytest.raises(ax.InvalidArgument) as e:
                await queue.submit("train", {"specs": [ContainerTaskSpec("nokind", "none", ["true"])]})
            assert "nokind" in str(e.value)
            with pytest.raises(ax.InvalidArgument):
                await queue.submit("train", {"specs": []})
            with pytest.raises(ax.InvalidArgument) as e:
                await queue.submit("train", {"specs": [{"kind": "train", "image": "none", "command": ["a", 1]}]})
            assert "command[1]" in str(e.value)
    asyncio.run(go())
    with pytest.raises(ax.AltarError) as e:
        LocalJobQueue(cfg, overrides={"nonsense.key": "1"})
    assert "nonsense" in str(e.value)
    bad = tmp_path / "typo.yaml"
    bad.write_text(f"transport: {{name: local, dir: {tmp_path}/log}}\ngroups:\n  t: {{group_by: [a], ready_wen: single}}\n")
    with pytest.raises(ax.AltarError) as e:
        LocalJobQueue(bad)
    assert "typo.yaml:3" in str(e.value)
    assert os.path.exists(cfg)


def test_the_job_queue_registry() -> None:
    reg = ax.get_job_queue_registry()
    assert reg["local"] is LocalJobQueue and reg["kafka"] is ax.KafkaJobQueue
    assert issubclass(reg["kafka"], ax.JobQueue)
    assert "JobQueue" in ax.__provisional__ and "get_job_queue_registry" in ax.__provisional__


def doc_blocks(lang: str) -> list[str]:
    """The ```lang blocks of docs/python.md, in order."""
    from conftest import source_dir
    text = (source_dir() / "docs" / "python.md").read_text()
    out, inside, cur = [], False, []
    for line in text.splitlines():
        if not inside and line.strip() == f"```{lang}":
            inside, cur = True, []
        elif inside and line.strip() == "```":
            inside = False
            out.append("\n".join(cur) + "\n")
        elif inside:
            cur.append(line)
    return out


def test_the_docs_pipeline_runs_as_written(tmp_path: Path, altar_bin: str) -> None:
    import sys
    (yaml,) = doc_blocks("yaml")
    programs = doc_blocks("python")
    pipeline = next(p for p in programs if "LocalJobQueue(config)" in p)
    (tmp_path / "altar.yaml").write_text(yaml)
    (tmp_path / "pipeline.py").write_text(pipeline)
    procs = [subprocess.Popen([altar_bin, cmd, "--config", "altar.yaml"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for cmd in ("reconciler", "worker")]
    try:
        r = subprocess.run([sys.executable, "pipeline.py", "altar.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=900)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("submitted job ") and lines[0].endswith(" with 15 shards")
    fired = [x for x in lines if x.startswith("fired ")]
    assert len(fired) == 3 and all(x.endswith("with 5 shards") for x in fired)
    assert sorted(x for x in lines if x.startswith("score ")) == ["score fired m1", "score fired m2",
                                                                   "score fired m3"]


def test_the_docs_in_process_loop_runs_as_written(tmp_path: Path) -> None:
    import sys
    program = next(p for p in doc_blocks("python") if "run_reconcile_loop(backend" in p)
    (tmp_path / "loop.py").write_text(program)
    r = subprocess.run([sys.executable, "loop.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["group j1 fired with 5 shards"]
