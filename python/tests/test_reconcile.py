"""TaskLedger, predicates, group_by and reconcile_once through Python, on libaltar's
ledgers and reconcile tick, and the contract's own loop on the process backend."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import altar.execution as ax
from altar.execution import (
    ContainerTaskSpec,
    ExecutionBackend,
    GroupSpec,
    InMemoryTaskLedger,
    NativeTaskLedger,
    ReconcileStalled,
    RocksDBTaskLedger,
    TaskFailure,
    TaskHandle,
    TaskLedger,
    TaskRecord,
    TaskState,
    TaskStatus,
    all_expected_folds,
    all_folds,
    all_label_values,
    count_at_least,
    group_by,
    reconcile_once,
    run_reconcile_loop,
    single,
    spec_to_dict,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class DictTaskLedger(TaskLedger):
    """A user's own ledger, written from the contract's text alone: reconcile_once
    reaches it through libaltar's bridge (every call back on the event loop)."""

    def __init__(self) -> None:
        self.recs: dict[tuple[str, str], TaskRecord] = {}
        self.calls: list[str] = []

    async def record(self, handle: TaskHandle, kind: str, spec: dict[str, Any] | None = None) -> None:
        self.calls.append("record")
        key = (handle.backend, handle.external_id)
        old = self.recs.get(key)
        if old is not None and not old.consumed:
            return
        self.recs[key] = TaskRecord(handle, kind, TaskState.PENDING, 0, spec, False, None)

    async def open_handles(self) -> list[TaskHandle]:
        self.calls.append("open_handles")
        return [r.handle for r in self.recs.values() if not r.consumed and not r.state.terminal]

    async def set_state(self, handle: TaskHandle, state: TaskState, failure: TaskFailure | None = None) -> None:
        self.calls.append("set_state")
        key = (handle.backend, handle.external_id)
        r = self.recs[key]
        self.recs[key] = dataclasses.replace(r, state=state, failure=failure if state == TaskState.FAILED else None)

    async def active_succeeded(self) -> list[TaskRecord]:
        self.calls.append("active_succeeded")
        return [r for r in self.recs.values() if not r.consumed and r.state == TaskState.SUCCEEDED]

    async def active_failed(self) -> list[TaskRecord]:
        self.calls.append("active_failed")
        return [r for r in self.recs.values() if not r.consumed and r.state == TaskState.FAILED]

    async def consume(self, handles: list[TaskHandle]) -> None:
        self.calls.append("consume")
        for h in handles:
            key = (h.backend, h.external_id)
            if key in self.recs:
                self.recs[key] = dataclasses.replace(self.recs[key], consumed=True)

    def close(self) -> None:
        pass


@pytest.fixture(params=["memory", "rocksdb", "python"])
def ledger(request: Any, tmp_path: Path) -> Iterator[Any]:
    led: Any
    if request.param == "memory":
        led = InMemoryTaskLedger()
    elif request.param == "rocksdb":
        led = RocksDBTaskLedger(tmp_path / "l")
    else:
        led = DictTaskLedger()
    yield led
    led.close()


def h(i: int, **labels: str) -> TaskHandle:
    return TaskHandle("fake", f"t{i}", dict(labels))


def spec(i: int, **labels: str) -> dict[str, Any]:
    return spec_to_dict(ContainerTaskSpec("train", "img", ["run", str(i)], labels=dict(labels)))


class FakeBackend(ExecutionBackend):
    """poll answers what the test set in `states` (PENDING for anything else)."""

    name = "fake"

    def __init__(self) -> None:
        self.states: dict[str, TaskStatus] = {}
        self.polls = 0

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        raise NotImplementedError

    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        self.polls += 1
        return [self.states.get(x.external_id, TaskStatus(x, TaskState.PENDING)) for x in handles]

    def set(self, handle: TaskHandle, state: TaskState, reason: str | None = None) -> None:
        self.states[handle.external_id] = TaskStatus(handle, state, TaskFailure(reason) if reason else None)


# ---- the ledger ---------------------------------------------------------------------


def test_ledger_record_is_idempotent_while_open_and_reopens_consumed(ledger: TaskLedger) -> None:
    async def go() -> None:
        a = h(1, fold="0")
        await ledger.record(a, "train", spec(1, fold="0"))
        await ledger.set_state(a, TaskState.RUNNING)
        await ledger.record(a, "train", spec(99))  # a retried record of an open task changes nothing
        assert await ledger.open_handles() == [a]
        await ledger.set_state(a, TaskState.FAILED, TaskFailure("exit_3", "boom", True, 3))
        assert await ledger.open_handles() == []
        (rec,) = await ledger.active_failed()
        assert rec.handle == a and rec.kind == "train" and rec.state == TaskState.FAILED
        assert rec.failure == TaskFailure("exit_3", "boom", True, 3)
        assert rec.spec == spec(1, fold="0")
        assert await ledger.active_succeeded() == []
        await ledger.consume([a])
        assert await ledger.active_failed() == []
        # The same handle submitted again after it was settled: re-opened, fresh.
        await ledger.record(a, "train", spec(2, fold="0"))
        assert await ledger.open_handles() == [a]
        await ledger.set_state(a, TaskState.SUCCEEDED)
        (rec,) = await ledger.active_succeeded()
        assert rec.consumed is False and rec.failure is None and rec.restart_count == 0
        assert rec.spec == spec(2, fold="0")
    run(go())


def test_both_ledgers_agree_on_the_same_history(tmp_path: Path) -> None:
    async def history(led: NativeTaskLedger) -> str:
        for i in range(5):
            await led.record(h(i, fold=str(i)), "train", spec(i, fold=str(i)))
        await led.set_state(h(0), TaskState.SUCCEEDED)
        await led.set_state(h(1), TaskState.FAILED, TaskFailure("timeout"))
        await led.consume([h(0)])
        return await led.checksum()

    async def go() -> None:
        mem, rdb = InMemoryTaskLedger(), RocksDBTaskLedger(tmp_path / "r")
        try:
            a, b = await history(mem), await history(rdb)
            assert a == b and a.startswith("sha256:")
            await mem.set_state(h(2), TaskState.RUNNING)
            assert await mem.checksum() != b
        finally:
            mem.close()
            rdb.close()
    run(go())


def test_a_closed_ledger_refuses_calls() -> None:
    led = InMemoryTaskLedger()
    led.close()
    with pytest.raises(ax.AltarError) as e:
        run(led.open_handles())
    assert e.value.name == "ESTATE"


# ---- predicates and group_by ---------------------------------------------------------------


def test_predicates() -> None:
    folds = [h(i, fold=str(i)) for i in range(3)]
    assert all_folds(3)(folds) and not all_folds(4)(folds)
    assert count_at_least(3)(folds) and not count_at_least(4)(folds)
    assert single()(folds[:1]) and not single()([])
    assert all_label_values("fold", {"0", "2"})(folds)
    assert not all_label_values("fold", ["0", "5"])(folds)
    assert all_label_values("allele", ["ref", "alt"])([h(1, allele="ref"), h(2, allele="alt")])
    with pytest.raises(ax.AltarError):
        all_folds(0)([])
    # all_expected_folds: N from the shards' count label, the largest valid one.
    labelled = [h(i, fold=str(i), num_folds="3") for i in range(3)]
    assert all_expected_folds()(labelled)
    assert not all_expected_folds()(labelled[:2])
    mixed = [h(0, fold="0", num_folds="1"), h(1, fold="1", num_folds="2")]
    assert all_expected_folds()(mixed)
    assert not all_expected_folds()(mixed + [h(2, fold="2", num_folds="4")])
    assert all_expected_folds(default=3)(folds)
    with pytest.raises(ax.PredicateError) as e:
        all_expected_folds()(folds)  # no label, no default: an error, never pending
    assert isinstance(e.value, ValueError) and "num_folds" in str(e.value)


def test_group_by() -> None:
    key = group_by("job_id", "model_id")
    assert key(h(1, job_id="j1", model_id="m42")) == "j1:m42"
    assert key(h(1, job_id="j1")) == "j1:"
    assert group_by("job_id")(h(1)) == ""


# ---- reconcile_once --------------------------------------------------------------------------


def test_a_ready_group_fires_once_and_is_consumed(ledger: TaskLedger) -> None:
    async def go() -> None:
        be = FakeBackend()
        fired: list[tuple[str, list[str]]] = []

        async def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            fired.append((gk, sorted(s.labels["fold"] for s in shards)))
            # A next stage recorded from the callback, in the ledger the tick holds.
            await ledger.record(TaskHandle("fake", f"next-{gk}", {"job_id": "j"}), "score", None)

        specs = {"train": GroupSpec("train", group_by("job_id", "model"), all_folds(3), on_ready)}
        hs = [h(i, job_id="j", model="m", fold=str(i)) for i in range(3)]
        for i, x in enumerate(hs):
            await ledger.record(x, "train", spec(i, job_id="j", model="m", fold=str(i)))
        be.set(hs[0], TaskState.SUCCEEDED)
        be.set(hs[1], TaskState.SUCCEEDED)
        r = await reconcile_once(be, ledger, specs)
        assert r.polled == 3 and r.succeeded == 2 and r.fired_groups == [] and fired == []
        be.set(hs[2], TaskState.SUCCEEDED)
        r = await reconcile_once(be, ledger, specs)
        assert r.fired_groups == ["train:j:m"]
        assert fired == [("j:m", ["0", "1", "2"])]
        r = await reconcile_once(be, ledger, list(specs.values()))
        assert r.fired_groups == [] and len(fired) == 1        # never twice
        assert await ledger.active_succeeded() == []
        assert [x.external_id for x in await ledger.open_handles()] == ["next-j:m"]
    run(go())


def test_blocked_groups_dead_lettered_deferred_or_stalled(ledger: TaskLedger) -> None:
    async def go() -> None:
        be = FakeBackend()
        decisions = {"dl": True, "df": False}
        seen: list[tuple[str, list[str]]] = []

        def on_failed(gk: str, failed: list[TaskHandle]) -> bool:  # a plain function works too
            seen.append((gk, [f.external_id for f in failed]))
            return decisions[gk]

        async def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            raise AssertionError("nothing is ready")

        specs = [GroupSpec("train", group_by("job_id"), count_at_least(2), on_ready, on_failed),
                 GroupSpec("score", group_by("job_id"), count_at_least(2), on_ready)]
        for i, (kind, job) in enumerate([("train", "dl"), ("train", "dl"), ("train", "df"), ("score", "st"),
                                         ("score", "st")]):
            x = h(i, job_id=job)
            await ledger.record(x, kind, spec(i, job_id=job))
            be.set(x, TaskState.FAILED if i in (0, 2, 3) else TaskState.SUCCEEDED, "exit_1")
        r = await reconcile_once(be, ledger, specs)
        assert r.dead_lettered_groups == ["train:dl"]
        assert r.deferred_groups == ["train:df"]
        assert r.stalled_groups == ["score:st"]
        assert sorted(seen) == [("df", ["t2"]), ("dl", ["t0"])]
        # The dead-lettered group is consumed, succeeded sibling included; the others stay.
        left = sorted(x.handle.external_id for x in await ledger.active_failed() + await ledger.active_succeeded())
        assert left == ["t2", "t3", "t4"]
        with pytest.raises(ReconcileStalled) as e:
            await run_reconcile_loop(be, ledger, specs, interval_s=0.01, max_ticks=3)
        assert e.value.groups == ["score:st"]
        assert isinstance(e.value, RuntimeError)
    run(go())


def test_predicates_are_evaluated_before_any_callback(ledger: TaskLedger) -> None:
    async def go() -> None:
        be = FakeBackend()
        called: list[str] = []

        async def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            called.append(gk)

        # "a" sorts first and is ready; "b" has no fold count and no default.
        specs = [GroupSpec("a", group_by("job_id"), single(), on_ready),
                 GroupSpec("b", group_by("job_id"), all_expected_folds(), on_ready)]
        x, y = h(1, job_id="j"), h(2, job_id="j", fold="0")
        await ledger.record(x, "a", spec(1))
        await ledger.record(y, "b", spec(2))
        be.set(x, TaskState.SUCCEEDED)
        be.set(y, TaskState.SUCCEEDED)
        with pytest.raises(ax.PredicateError):
            await reconcile_once(be, ledger, specs)
        assert called == []
        # The polled states were written; nothing was consumed.
        assert sorted(r.handle.external_id for r in await ledger.active_succeeded()) == ["t1", "t2"]
        # Fixed (a default), the next tick fires both.
        specs[1] = GroupSpec("b", group_by("job_id"), all_expected_folds(default=1), on_ready)
        r = await reconcile_once(be, ledger, specs)
        assert sorted(r.fired_groups) == ["a:j", "b:j"] and sorted(called) == ["j", "j"]
    run(go())


def test_a_python_predicate_and_a_raising_on_ready(ledger: TaskLedger) -> None:
    async def go() -> None:
        be = FakeBackend()
        fail = [True]

        def ready(shards: list[TaskHandle]) -> bool:
            return {s.labels.get("fold") for s in shards} >= {"0", "1"}

        def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            if fail[0]:
                raise KeyError("downstream not ready")

        specs = [GroupSpec("train", group_by("job_id"), ready, on_ready)]
        for i in range(2):
            x = h(i, job_id="j", fold=str(i))
            await ledger.record(x, "train", spec(i))
            be.set(x, TaskState.SUCCEEDED)
        with pytest.raises(KeyError):
            await reconcile_once(be, ledger, specs)
        fail[0] = False
        r = await reconcile_once(be, ledger, specs)                     # fires on a later tick
        assert r.fired_groups == ["train:j"]
    run(go())


def test_the_contracts_loop_on_the_process_backend_and_rocksdb(tmp_path: Path) -> None:
    async def go() -> list[str]:
        backend = ax.get_execution_backend_registry()["process"](data_root=str(tmp_path / "data"), slots=4)
        ledger = RocksDBTaskLedger(tmp_path / "ledger")
        fired: list[str] = []

        async def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            fired.append(gk)

        try:
            for fold in range(3):
                s = ContainerTaskSpec("train", "none", ["sh", "-c", f"echo fold {fold}"],
                                      labels={"job_id": "j1", "fold": str(fold)})
                handle = await backend.submit(s)
                await ledger.record(handle, s.kind, spec_to_dict(s))
            results = await run_reconcile_loop(backend, ledger, [GroupSpec("train", group_by("job_id"),
                                                                           all_folds(3), on_ready)],
                                               interval_s=0.05, max_ticks=2400)
            assert sum(len(r.fired_groups) for r in results) == 1
            assert await ledger.open_handles() == []
            return fired
        finally:
            backend.close()
            ledger.close()
    assert run(go()) == ["j1"]


def test_a_users_ledger_that_raises_or_answers_garbage() -> None:
    """Whatever a TaskLedger subclass does wrong comes back to the caller as its own
    exception (or a TypeError naming the method), and no group fires."""
    class Broken(DictTaskLedger):
        mode = "raise"

        async def active_succeeded(self) -> list[TaskRecord]:
            if self.mode == "raise":
                raise ConnectionError("ledger database unreachable")
            return "not a list"  # type: ignore[return-value]

    async def go() -> None:
        be = FakeBackend()
        fired: list[str] = []

        async def on_ready(gk: str, shards: list[TaskHandle]) -> None:
            fired.append(gk)

        led = Broken()
        x = h(1, job_id="j")
        await led.record(x, "train", spec(1, job_id="j"))
        be.set(x, TaskState.SUCCEEDED)
        specs = [GroupSpec("train", group_by("job_id"), single(), on_ready)]
        with pytest.raises(ConnectionError, match="unreachable"):
            await reconcile_once(be, led, specs)
        led.mode = "garbage"
        with pytest.raises(TypeError, match="active_succeeded must return a list"):
            await reconcile_once(be, led, specs)
        assert fired == [] and led.recs[("fake", "t1")].state == TaskState.SUCCEEDED
        led.mode = "fixed"
        Broken.active_succeeded = DictTaskLedger.active_succeeded  # type: ignore[method-assign]
        r = await reconcile_once(be, led, specs)
        assert r.fired_groups == ["train:j"] and fired == ["j"]
    run(go())
