"""Reconciliation: GroupSpec, the readiness predicates, group_by, reconcile_once and run_reconcile_loop.

The tick itself is libaltar's (altar_reconcile_once), the same code the
fleet's reconciler runs: poll open handles, write their states, bucket
succeeded shards into groups, evaluate every predicate before any callback,
fire ready groups once, and dead-letter, defer or report groups blocked by a
failed shard. Python supplies the backend's poll and the callbacks, which C
calls back; async callbacks run on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

from . import _errors, _native
from ._backends import ExecutionBackend
from ._codec import c_failure, fill_handle, handle_from_c
from ._ledger import RECONCILING, NativeTaskLedger, TaskLedger
from ._ledger_bridge import LedgerBridge
from ._model import STATE_CODES, TaskHandle

ffi = _native.ffi

def _str_array(items: Sequence[str], keep: list[Any]) -> Any:
    cs = [ffi.new("char[]", s.encode("utf-8")) for s in items]
    keep.extend(cs)
    arr = ffi.new("const char *[]", cs) if cs else ffi.NULL
    keep.append(arr)
    return arr


def _handles_of(ptrs: Any, n: int, indirect: bool) -> list[TaskHandle]:
    return [handle_from_c(ptrs[i][0] if indirect else ptrs[i]) for i in range(n)]


class ReadyPredicate:
    """A readiness rule over a group's succeeded shards, evaluated by libaltar.

    Call it with a list of TaskHandles to evaluate it directly. A rule that
    cannot decide (all_expected_folds over shards with no count label and no
    default) raises PredicateError, a ValueError.
    """

    def __init__(self, describe: str, build: Callable[[Any, Any], int]) -> None:
        self._describe = describe
        self._build = build

    def fill(self, p: Any) -> None:
        """Fills a zeroed altar_predicate_t (the caller clears it)."""
        err = _errors.new_err()
        _errors.check(self._build(p, err), err)

    def __call__(self, shards: Sequence[TaskHandle]) -> bool:
        L = _native.lib()
        p = ffi.new("altar_predicate_t *")
        hs = ffi.new("altar_handle_t[]", max(1, len(shards)))
        ptrs = ffi.new("altar_handle_t *[]", max(1, len(shards)))
        try:
            self.fill(p)
            for i, h in enumerate(shards):
                fill_handle(ffi.addressof(hs, i), h)
                ptrs[i] = ffi.addressof(hs, i)
            ready = ffi.new("_Bool *")
            err = _errors.new_err()
            _errors.check(L.altar_predicate_eval(p, ffi.cast("const altar_handle_t *const *", ptrs), len(shards),
                                                 ready, err), err)
            return bool(ready[0])
        finally:
            for i in range(len(shards)):
                L.altar_handle_clear(ffi.addressof(hs, i))
            L.altar_predicate_clear(p)

    def __repr__(self) -> str:
        return self._describe


def single() -> ReadyPredicate:
    """Ready when the one-shard group's shard succeeded (count_at_least(1))."""
    return ReadyPredicate("single()", lambda p, err: _native.lib().altar_predicate_single(p))


def count_at_least(n: int) -> ReadyPredicate:
    """Ready when at least n shards succeeded."""
    return ReadyPredicate(f"count_at_least({n})",
                          lambda p, err: _native.lib().altar_predicate_count_at_least(p, int(n), err))


def all_folds(n: int) -> ReadyPredicate:
    """Ready when label "fold" has every value "0".."n-1" (n is required: no default fold count)."""
    return ReadyPredicate(f"all_folds({n})", lambda p, err: _native.lib().altar_predicate_all_folds(p, int(n), err))


def all_label_values(label: str, values: Iterable[str]) -> ReadyPredicate:
    """Ready when the shards' values of label cover every one of values (strings: a fold is "3")."""
    vals = sorted(set(values))
    keep: list[Any] = []

    def build(p: Any, err: Any) -> int:
        return int(_native.lib().altar_predicate_all_label_values(p, _native.b(label), _str_array(vals, keep),
                                                                  len(vals), err))
    return ReadyPredicate(f"all_label_values({label!r}, {vals!r})", build)


def all_expected_folds(label: str = "fold", count_label: str = "num_folds",
                       default: int | None = None) -> ReadyPredicate:
    """Ready when folds 0..N-1 are present, N read from the shards' count_label (the largest valid one).

    Without a count on any shard, default is used; with no default the
    predicate raises rather than wait forever.
    """
    def build(p: Any, err: Any) -> int:
        d = ffi.NULL if default is None else ffi.new("int64_t *", int(default))
        return int(_native.lib().altar_predicate_all_expected_folds(p, _native.b(label), _native.b(count_label), d,
                                                                    err))
    return ReadyPredicate(f"all_expected_folds({label!r}, {count_label!r}, default={default!r})", build)


class GroupBy:
    """A group-key function: the values of the given labels joined by ":" (a missing label gives "")."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = tuple(labels)

    def fill(self, g: Any, keep: list[Any]) -> None:
        _errors.check(_native.lib().altar_group_by_init(g, _str_array(self.labels, keep), len(self.labels)))

    def __call__(self, handle: TaskHandle) -> str:
        L = _native.lib()
        g = ffi.new("altar_group_by_t *")
        h = ffi.new("altar_handle_t *")
        keep: list[Any] = []
        try:
            self.fill(g, keep)
            fill_handle(h, handle)
            key = _native.take_string(L.altar_group_by_key(g, h))
            if key is None:
                raise MemoryError("altar_group_by_key")
            return key
        finally:
            L.altar_handle_clear(h)
            L.altar_group_by_clear(g)

    def __repr__(self) -> str:
        return "group_by(" + ", ".join(repr(x) for x in self.labels) + ")"


def group_by(*labels: str) -> GroupBy:
    """The group key of a shard: its labels' values joined by ":", e.g. group_by("job_id", "model_id")."""
    return GroupBy(labels)


OnReady = Callable[[str, list[TaskHandle]], Union[None, Awaitable[None]]]
OnFailed = Callable[[str, list[TaskHandle]], Union[bool, Awaitable[bool]]]
Predicate = Union[ReadyPredicate, Callable[[list[TaskHandle]], bool]]


@dataclass
class GroupSpec:
    """How shards of one kind group (group_key) and when a group is complete (ready_when).

    on_ready(group_key, succeeded_handles) runs once per fired group.
    on_failed(group_key, failed_handles), for a group blocked by a failed
    shard, returns True to dead-letter it (consumed) or False to defer it;
    without it the group is reported stalled.
    """

    kind: str
    group_key: GroupBy
    ready_when: Predicate
    on_ready: OnReady
    on_failed: OnFailed | None = None


@dataclass
class ReconcileResult:
    """What one tick did."""

    polled: int = 0
    succeeded: int = 0
    failed: int = 0
    fired_groups: list[str] = field(default_factory=list)
    dead_lettered_groups: list[str] = field(default_factory=list)
    deferred_groups: list[str] = field(default_factory=list)
    stalled_groups: list[str] = field(default_factory=list)


def _strlist(sl: Any) -> list[str]:
    return [_native.s(sl.v[i]) or "" for i in range(sl.n)]


def _result_from_c(r: Any) -> ReconcileResult:
    return ReconcileResult(polled=int(r.polled), succeeded=int(r.succeeded), failed=int(r.failed),
                           fired_groups=_strlist(r.fired_groups),
                           dead_lettered_groups=_strlist(r.dead_lettered_groups),
                           deferred_groups=_strlist(r.deferred_groups), stalled_groups=_strlist(r.stalled_groups))


class _Tick:
    """The C side of one reconcile call: specs, poller and callbacks, and the first Python error raised in them."""

    def __init__(self, backend: ExecutionBackend, specs: Sequence[GroupSpec], loop: asyncio.AbstractEventLoop) -> None:
        self.backend = backend
        self.loop = loop
        self.error: BaseException | None = None
        self.error_lock = threading.Lock()
        self.keep: list[Any] = []
        L = _native.lib()
        self.specs = ffi.new("altar_group_specs_t *")
        self.poller = ffi.new("altar_poller_t *")
        self.poll_cb = ffi.callback("altar_poll_fn", self._poll)
        self.poller.poll = self.poll_cb
        self.ready_cb = ffi.callback("altar_on_ready_fn", self._on_ready)
        self.failed_cb = ffi.callback("altar_on_failed_fn", self._on_failed)
        self.pred_cb = ffi.callback("altar_ready_fn", self._predicate)
        self.by_index: list[GroupSpec] = []
        try:
            for gs in specs:
                self._add(gs)
        except BaseException:
            L.altar_group_specs_clear(self.specs)
            raise

    def _add(self, gs: GroupSpec) -> None:
        L = _native.lib()
        if not isinstance(gs, GroupSpec):
            raise TypeError(f"expected a GroupSpec, got {type(gs).__name__}")
        if not isinstance(gs.group_key, GroupBy):
            raise TypeError(f"GroupSpec {gs.kind!r}: group_key must be made by group_by() (libaltar groups by labels)")
        idx = len(self.by_index)
        self.by_index.append(gs)
        g = ffi.new("altar_group_spec_t *")
        try:
            g.kind = L.strdup(gs.kind.encode("utf-8"))
            if g.kind == ffi.NULL:
                raise MemoryError("strdup")
            gs.group_key.fill(ffi.addressof(g, "group_by"), self.keep)
            ctx = ffi.cast("void *", idx)
            if isinstance(gs.ready_when, ReadyPredicate):
                gs.ready_when.fill(ffi.addressof(g, "ready_when"))
            elif callable(gs.ready_when):
                _errors.check(L.altar_predicate_custom(ffi.addressof(g, "ready_when"), self.pred_cb, ctx))
            else:
                raise TypeError(f"GroupSpec {gs.kind!r}: ready_when must be a predicate")
            g.on_ready = self.ready_cb
            g.on_ready_ctx = ctx
            if gs.on_failed is not None:
                g.on_failed = self.failed_cb
                g.on_failed_ctx = ctx
            err = _errors.new_err()
            _errors.check(L.altar_group_specs_add(self.specs, g, err), err, context=f"GroupSpec {gs.kind!r}")
        except BaseException:
            L.free(g.kind)
            g.kind = ffi.NULL
            L.altar_group_by_clear(ffi.addressof(g, "group_by"))
            L.altar_predicate_clear(ffi.addressof(g, "ready_when"))
            raise

    def close(self) -> None:
        _native.lib().altar_group_specs_clear(self.specs)

    # -- calling Python from C (on a worker thread of the tick)

    def _fail(self, e: BaseException, err: Any, where: str) -> int:
        with self.error_lock:
            if self.error is None:
                self.error = e
        msg = f"{where}: {type(e).__name__}: {e}".encode("utf-8", "replace")[:500]
        err.code = -12
        ffi.memmove(err.msg, msg + b"\0", len(msg) + 1)
        return -12

    def _await(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            async def wrap() -> Any:
                return await value
            return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result()
        return value

    def _poll(self, ctx: Any, hs: Any, n: int, pout: Any, pn: Any, err: Any) -> int:
        L = _native.lib()
        try:
            handles = _handles_of(hs, n, indirect=False)
            statuses = self._await(self.backend.poll(handles)) if handles else []
            if len(statuses) != len(handles):
                raise ValueError(f"poll returned {len(statuses)} statuses for {len(handles)} handles")
            arr = ffi.cast("altar_status_t *", L.calloc(max(1, len(statuses)), ffi.sizeof("altar_status_t")))
            if arr == ffi.NULL:
                raise MemoryError("calloc")
            h = ffi.new("altar_handle_t *")
            for i, st in enumerate(statuses):
                try:
                    fill_handle(h, st.handle)
                    rc = L.altar_status_init(ffi.addressof(arr, i), h, STATE_CODES[st.state], c_failure(st.failure))
                finally:
                    L.altar_handle_clear(h)
                if rc < 0:
                    L.altar_statuses_free(arr, i)
                    raise MemoryError("altar_status_init")
            pout[0] = arr
            pn[0] = len(statuses)
            return 0
        except BaseException as e:
            return self._fail(e, err, "poll")

    def _on_ready(self, ctx: Any, kind: Any, gk: Any, shards: Any, n: int, err: Any) -> int:
        try:
            spec = self.by_index[int(ffi.cast("intptr_t", ctx))]
            self._await(spec.on_ready(_native.s(gk) or "", _handles_of(shards, n, indirect=False)))
            return 0
        except BaseException as e:
            return self._fail(e, err, "on_ready")

    def _on_failed(self, ctx: Any, kind: Any, gk: Any, failed: Any, n: int, pdead: Any, err: Any) -> int:
        try:
            spec = self.by_index[int(ffi.cast("intptr_t", ctx))]
            assert spec.on_failed is not None
            pdead[0] = bool(self._await(spec.on_failed(_native.s(gk) or "", _handles_of(failed, n, indirect=False))))
            return 0
        except BaseException as e:
            return self._fail(e, err, "on_failed")

    def _predicate(self, ctx: Any, shards: Any, n: int, pready: Any, err: Any) -> int:
        try:
            spec = self.by_index[int(ffi.cast("intptr_t", ctx))]
            pready[0] = bool(spec.ready_when(_handles_of(shards, n, indirect=True)))
            return 0
        except BaseException as e:
            return self._fail(e, err, "ready_when")


def _specs_list(group_specs: dict[str, GroupSpec] | list[GroupSpec]) -> list[GroupSpec]:
    return list(group_specs.values()) if isinstance(group_specs, dict) else list(group_specs)


R = TypeVar("R")


def _check_ledger(ledger: TaskLedger) -> None:
    if not isinstance(ledger, TaskLedger):
        raise TypeError(f"expected a TaskLedger, got {type(ledger).__name__}")


def _with_c_ledger(ledger: TaskLedger, tick: _Tick, fn: Callable[[Any], R]) -> R:
    """Runs fn with this call's C ledger, on the tick's thread: altar's own ledgers
    under their lock, any other TaskLedger through a LedgerBridge."""
    if isinstance(ledger, NativeTaskLedger):
        native = ledger

        def holding(l: Any) -> R:
            # Set once the tick holds the ledger: from here its callbacks may use it.
            RECONCILING.set(native)
            return fn(l)
        return native.with_ledger(holding)
    bridge = LedgerBridge(ledger, tick)
    try:
        return fn(bridge.l)
    finally:
        bridge.close()


async def reconcile_once(backend: ExecutionBackend, ledger: TaskLedger,
                         group_specs: dict[str, GroupSpec] | list[GroupSpec], *,
                         max_concurrent_callbacks: int | None = None) -> ReconcileResult:
    """One non-blocking tick (see the module docstring). Keeps no state between calls.

    A predicate that raises propagates after the polled states are written
    and before any group fires or is consumed; so does an exception from
    poll or a callback (a failing on_ready leaves its group to fire again).
    """
    _check_ledger(ledger)
    tick = _Tick(backend, _specs_list(group_specs), asyncio.get_running_loop())
    L = _native.lib()

    def run(l: Any) -> ReconcileResult:
        res = ffi.new("altar_reconcile_result_t *")
        opts = ffi.new("altar_reconcile_opts_t *", {"max_concurrent_callbacks": max_concurrent_callbacks or 0})
        err = _errors.new_err()
        try:
            rc = L.altar_reconcile_once(tick.poller, l, tick.specs, opts, res, err)
            if tick.error is not None:
                raise tick.error
            _errors.check(rc, err)
            return _result_from_c(res)
        finally:
            L.altar_reconcile_result_clear(res)

    try:
        return await asyncio.to_thread(_with_c_ledger, ledger, tick, run)
    finally:
        tick.close()


async def run_reconcile_loop(backend: ExecutionBackend, ledger: TaskLedger,
                             group_specs: dict[str, GroupSpec] | list[GroupSpec], *, interval_s: float = 5.0,
                             max_ticks: int | None = None, stop_when_idle: bool = True) -> list[ReconcileResult]:
    """Call reconcile_once every interval_s until idle (no open handle and nothing fired, with
    stop_when_idle) or max_ticks; returns every tick's result. Raises ReconcileStalled when a
    tick reports a group blocked by a failed shard that no on_failed handles."""
    _check_ledger(ledger)
    tick = _Tick(backend, _specs_list(group_specs), asyncio.get_running_loop())
    L = _native.lib()

    def run(l: Any) -> list[ReconcileResult]:
        opts = ffi.new("altar_reconcile_loop_opts_t *", {"interval_s": float(interval_s),
                                                         "max_ticks": int(max_ticks or 0),
                                                         "stop_when_idle": bool(stop_when_idle),
                                                         "max_concurrent_callbacks": 0})
        pres = ffi.new("altar_reconcile_result_t **")
        pn = ffi.new("size_t *")
        stalled = ffi.new("altar_strlist_t *")
        err = _errors.new_err()
        try:
            rc = L.altar_run_reconcile_loop(tick.poller, l, tick.specs, opts, pres, pn, stalled, err)
            if tick.error is not None:
                raise tick.error
            if rc == -11:
                raise _errors.ReconcileStalled(_strlist(stalled))
            _errors.check(rc, err)
            return [_result_from_c(pres[0][i]) for i in range(pn[0])]
        finally:
            if pres[0] != ffi.NULL:
                L.altar_reconcile_results_free(pres[0], pn[0])
            L.altar_strlist_clear(stalled)

    try:
        return await asyncio.to_thread(_with_c_ledger, ledger, tick, run)
    finally:
        tick.close()
