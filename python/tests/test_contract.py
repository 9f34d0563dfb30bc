"""The contract's behaviours through Python, on libaltar's own code: capacity, digests,
paths, the process backend, the registries, and the base class's defaults."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import altar.execution as ax
from altar.execution import (
    Capacity,
    CapabilityNotSupported,
    ContainerTaskSpec,
    ExecutionBackend,
    GpuPool,
    ResourceRequest,
    TaskHandle,
    TaskState,
    TaskStatus,
    Transfer,
    TransferIntegrityError,
)

DEADLINE_POLLS = 1200  # x 50 ms: a generous bound, never an assertion about time


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ---- Capacity.free_for --------------------------------------------------------


def test_free_for_maps_cpu_to_normal_and_gpu_pools_by_name() -> None:
    cap = Capacity({"normal": 87, "gpu": 3, "a100": 4})
    assert cap.free_for(ResourceRequest()) == 87
    assert cap.free_for(ResourceRequest(gpu=GpuPool.NORMAL_GPU)) == 3
    assert cap.free_for(ResourceRequest(gpu=GpuPool.A100, count=2)) == 4
    assert cap.free_for(ResourceRequest(gpu="h100")) == 0
    assert Capacity({"a100": 4}).free_for(ResourceRequest()) == 0
    assert Capacity().free_for(ResourceRequest(gpu="gpu")) == 0


# ---- digests and verification records ---------------------------------------------


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_verify_file_digest_hashes_once_then_trusts_the_record(tmp_path: Path) -> None:
    f = tmp_path / "model.tar"
    f.write_bytes(b"weights" * 1000)
    d = sha(f.read_bytes())
    assert ax.file_digest(f) == d
    assert not ax.has_verification_record(f, d)
    assert ax.verify_file_digest(f, d) is True          # hashed, record written
    assert ax.has_verification_record(f, d)
    assert Path(ax.verification_record_path(str(f))).exists()
    assert ax.verify_file_digest(f, d) is False         # the record accepted it
    assert ax.verify_file_digest(f, d, trust_record=False) is True
    # Through a symlink too.
    link = tmp_path / "link"
    link.symlink_to(f)
    assert ax.verify_file_digest(link, d, trust_record=False, record=False) is True
    # A changed file no longer has a current record and fails the check.
    f.write_bytes(b"other bytes")
    assert not ax.has_verification_record(f, d)
    with pytest.raises(TransferIntegrityError):
        ax.verify_file_digest(f, d)


def test_digest_failures_raise_the_contracts_errors(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_bytes(b"abc")
    wrong = sha(b"abd")
    with pytest.raises(TransferIntegrityError) as e:
        ax.verify_file_digest(f, wrong)
    assert isinstance(e.value, ax.DigestMismatchError) and isinstance(e.value, ValueError)
    assert e.value.name == "EINTEGRITY"
    with pytest.raises(TransferIntegrityError):
        ax.verify_file_digest(tmp_path, sha(b""))       # a directory is never covered
    with pytest.raises(TransferIntegrityError):
        ax.verify_file_digest(tmp_path / "missing", sha(b""))
    for bad in ("sha256:ABC", "md5:" + "0" * 32, "sha256:" + "A" * 64, ""):
        with pytest.raises(ValueError):
            ax.verify_file_digest(f, bad)
    assert ax.is_valid_digest(sha(b"x")) and not ax.is_valid_digest("sha256:" + "A" * 64)


def test_verify_transfer_digest(tmp_path: Path) -> None:
    f = tmp_path / "peaks.bed"
    f.write_bytes(b"chr1\t1\t2\n")
    t = Transfer("file:///src/peaks.bed", "data/peaks.bed", digest=sha(f.read_bytes()))
    ax.verify_transfer_digest(t, str(f))
    assert not ax.has_verification_record(f, t.digest or "")
    ax.verify_transfer_digest(t, str(f), record=True)
    assert ax.has_verification_record(f, t.digest or "")
    ax.verify_transfer_digest(Transfer("file:///a", "a"), str(tmp_path / "nothing"))  # no digest, no check
    with pytest.raises(TransferIntegrityError) as e:
        ax.verify_transfer_digest(Transfer("file:///src/peaks.bed", "p", digest=sha(b"no")), str(f))
    assert "file:///src/peaks.bed" in str(e.value)
    with pytest.raises(TransferIntegrityError):
        ax.verify_transfer_digest(Transfer("u", "p", digest=sha(b"")), str(tmp_path))


def test_the_verifier_program_agrees_with_verify_file_digest(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_bytes(b"good")
    bad = tmp_path / "bad"
    bad.write_bytes(b"bad")
    prog = ax.digest_verifier_program(trust_records=True)
    line = f"{hashlib.sha256(b'good').hexdigest()}  {good}"
    r = subprocess.run(["sh", "-c", prog, "verify", line], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # It wrote the same record the library reads.
    assert ax.has_verification_record(good, sha(b"good"))
    r = subprocess.run(["sh", "-c", prog, "verify", line, f"{hashlib.sha256(b'good').hexdigest()}  {bad}"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "FAILED" in r.stdout


# ---- paths --------------------------------------------------------------------------


def test_path_resolver() -> None:
    r = ax.PathResolver("/mnt/volume")
    assert r.resolve("jobs/1/x") == "/mnt/volume/jobs/1/x"
    assert r.resolve("./jobs//1/./x") == "/mnt/volume/jobs/1/x"
    assert r.resolve("jobs/a/../b") == "/mnt/volume/jobs/b"
    assert ax.PathResolver("").resolve("gs://bucket/x") == "gs://bucket/x"
    for bad in ("../x", "jobs/../../x", "/etc/passwd"):
        with pytest.raises(ax.PathEscapeError) as e:
            r.resolve(bad)
        assert e.value.name == "EPATH"
    with pytest.raises(ax.PathEscapeError):
        ax.check_logical_path("../up")


# ---- the base class's defaults ----------------------------------------------------------


class OnlyRequired(ExecutionBackend):
    name = "only-required"

    def __init__(self) -> None:
        self.n = 0

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        self.n += 1
        return TaskHandle(self.name, f"t{self.n}", dict(spec.labels))

    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        return [TaskStatus(h, TaskState.SUCCEEDED) for h in handles]


def test_a_backend_needs_only_submit_and_poll() -> None:
    with pytest.raises(TypeError):
        ExecutionBackend()  # type: ignore[abstract]

    async def go() -> None:
        be = OnlyRequired()
        assert be.input_digest_verification is None
        assert await be.capacity() == Capacity()
        assert (await be.capacity()).free_for(ResourceRequest()) == 0
        assert be.path_resolver().resolve("jobs/x") == "jobs/x"
        await be.stage_inputs([Transfer("file:///a", "a")])
        await be.collect_outputs([Transfer("file:///a", "a")])
        h = await be.submit(ContainerTaskSpec("k", "i", ["a"], labels={"fold": "0"}))
        assert h.labels == {"fold": "0"}
        await be.cancel(h)
        assert await be.recover([TaskStatus(h, TaskState.FAILED)], banned={"node-1"}) == []
        with pytest.raises(CapabilityNotSupported) as e:
            await be.await_completion([h])
        assert isinstance(e.value, NotImplementedError)
    run(go())


# ---- the registries and the process backend --------------------------------------------------


def test_the_registry_holds_altars_backends() -> None:
    reg = ax.get_execution_backend_registry()
    assert reg is ax.get_execution_backend_registry()
    for name in ("process", "local", "kubernetes", "modal"):
        assert name in reg
        assert issubclass(reg[name], ExecutionBackend)
        assert reg[name].name in ("process", "local", "kubernetes", "modal")
    assert reg["docker"] is reg["local"]
    assert set(ax.native_backend_names()) >= {"process", "local", "docker", "kubernetes", "modal"}
    with pytest.raises(ax.NotFound) as e:
        reg["nomad"]
    assert "process" in str(e.value) and e.value.name == "ENOTFOUND"


def test_bad_backend_configuration_is_named(tmp_path: Path) -> None:
    with pytest.raises(ax.AltarError) as e:
        ax.ProcessExecutionBackend(data_rot=str(tmp_path))
    assert e.value.name == "ECONFIG"
    assert "data_rot" in e.value.message and "data_root" in e.value.message
    with pytest.raises(ax.AltarError) as e:
        ax.ProcessExecutionBackend(data_root=str(tmp_path), slots="many")
    assert "slots" in e.value.message


async def until_terminal(be: ExecutionBackend, handles: list[TaskHandle]) -> list[TaskStatus]:
    for _ in range(DEADLINE_POLLS):
        sts = await be.poll(handles)
        if all(s.state.terminal for s in sts):
            return sts
        await asyncio.sleep(0.05)
    raise AssertionError(f"not terminal within the bound: {sts}")


def test_process_backend_runs_tasks_and_reports_the_contracts_outcomes(tmp_path: Path) -> None:
    async def go() -> None:
        async with ax.ProcessExecutionBackend(data_root=str(tmp_path / "data"), slots=3) as be:
            assert be.name == "process"
            assert be.input_digest_verification == "staging"
            cap = await be.capacity()
            assert cap.free_for(ResourceRequest()) == 3
            assert be.path_resolver().resolve("jobs/x") == str(tmp_path / "data" / "jobs" / "x")
            ok = ContainerTaskSpec("score", "none", ["sh", "-c", "echo hi"], labels={"job_id": "j", "fold": "0"},
                                   plugin_identity=ax.PluginRunIdentity(plugin="p"))
            bad = ContainerTaskSpec("score", "none", ["sh", "-c", "exit 7"], labels={"job_id": "j", "fold": "1"})
            h1 = await be.submit(ok)
            assert h1.backend == "process" and h1.labels == ok.labels and h1.plugin_identity == {"plugin": "p"}
            h1again = await be.submit(ok)             # a resubmission never raises
            assert h1again.backend == "process"
            h2 = await be.submit(bad)
            sts = await until_terminal(be, [h1, h2])
            assert [s.state for s in sts] == [TaskState.SUCCEEDED, TaskState.FAILED]
            assert sts[0].failure is None
            f = sts[1].failure
            assert f is not None and f.reason == "exit_7" and f.exit_code == 7 and f.deterministic is True
            assert sts[1].handle == h2
            with pytest.raises(CapabilityNotSupported) as e:
                await be.await_completion([h1])
            assert e.value.message == "backend 'process' cannot await completion (await_completion); poll instead"
            with pytest.raises(CapabilityNotSupported):  # declared, so refused before any handle is looked at
                await be.await_completion([])
            assert be.capabilities == {"capacity", "cancel", "wait_change", "adopt", "logs"}
            assert await be.recover(sts[1:], banned=set()) == []
    run(go())


def test_process_backend_timeout_and_idempotent_cancel(tmp_path: Path) -> None:
    async def go() -> None:
        async with ax.ProcessExecutionBackend(data_root=str(tmp_path / "data"), slots=2) as be:
            slow = ContainerTaskSpec("score", "none", ["sleep", "60"], labels={"n": "1"}, timeout_s=1)
            h = await be.submit(slow)
            (st,) = await until_terminal(be, [h])
            assert st.state == TaskState.FAILED and st.failure is not None
            assert st.failure.reason == "timeout" and st.failure.deterministic is False
            h2 = await be.submit(ContainerTaskSpec("score", "none", ["sleep", "60"], labels={"n": "2"}))
            await be.cancel(h2)
            await be.cancel(h2)                              # again: no error
            await be.cancel(TaskHandle("process", "no-such-task"))  # never existed: no error
            (st2,) = await until_terminal(be, [h2])
            assert st2.state == TaskState.FAILED
    run(go())


def test_process_backend_stages_with_digests_and_collects_outputs(tmp_path: Path) -> None:
    async def go() -> None:
        src = tmp_path / "src.bin"
        src.write_bytes(b"model bytes")
        async with ax.ProcessExecutionBackend(data_root=str(tmp_path / "data")) as be:
            good = Transfer(src.as_uri(), "models/m1/model.bin", digest=sha(b"model bytes"))
            await be.stage_inputs([good])
            staged = Path(be.path_resolver().resolve(good.logical_path))
            assert staged.read_bytes() == b"model bytes"
            wrong = Transfer(src.as_uri(), "models/m2/model.bin", digest=sha(b"other"))
            with pytest.raises(TransferIntegrityError) as e:
                await be.stage_inputs([wrong])
            assert "models/m2/model.bin" in str(e.value)
            assert not Path(be.path_resolver().resolve(wrong.logical_path)).exists()
            out = Path(be.path_resolver().resolve("jobs/j/out.txt"))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("result")
            dest = tmp_path / "collected" / "out.txt"
            await be.collect_outputs([Transfer(dest.as_uri(), "jobs/j/out.txt")])
            assert dest.read_text() == "result"
            with pytest.raises(ax.InvalidArgument) as e2:
                await be.submit(ContainerTaskSpec("k", "i", ["true"], inputs=[Transfer("file:///x", "../x")]))
            assert "inputs[0].logical_path" in str(e2.value)
    run(go())


def test_a_closed_backend_refuses_calls(tmp_path: Path) -> None:
    be = ax.ProcessExecutionBackend(data_root=str(tmp_path))
    be.close()
    be.close()
    with pytest.raises(ax.AltarError) as e:
        run(be.poll([TaskHandle("process", "x")]))
    assert e.value.name == "ESTATE"


def test_errors_carry_altars_names_and_messages() -> None:
    try:
        ax.spec_from_dict({"kind": "k", "image": "i", "command": "not a list"})
    except ax.AltarError as e:
        assert e.name == "EDECODE" and e.code == -6
        assert e.message.startswith("spec.command")
        assert str(e) == f"EDECODE: {e.message}"
    else:
        raise AssertionError("no error")
    assert os.environ["ALTAR_LIBRARY"]


def test_every_native_backend_is_libaltars_and_checks_its_keys() -> None:
    # Each wrapper opens the C backend of its name: the C backend's own key check answers.
    for cls, name in ((ax.LocalDockerExecutionBackend, "local"), (ax.KubernetesExecutionBackend, "kubernetes"),
                      (ax.ModalExecutionBackend, "modal"), (ax.ProcessExecutionBackend, "process")):
        with pytest.raises(ax.ConfigError) as e:
            cls(nonsense_key="1")
        assert e.value.message.startswith(f"backend.nonsense_key: unknown key for the {name} backend (known: ")
    with pytest.raises(TypeError):
        ax.ProcessExecutionBackend(slots=[1, 2])
