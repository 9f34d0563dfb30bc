"""TaskLedger: the durable record of every submitted task, and libaltar's two ledgers.

InMemoryTaskLedger is altar's in-process reference ledger and
RocksDBTaskLedger its RocksDB one; both are the C ledgers the reconciler
daemon uses, so what they decide (idempotent record, re-opening a consumed
record, which records are open) is the fleet's own rule.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from . import _errors, _native
from ._codec import (
    _dumps,
    c_failure,
    c_handles,
    c_spec_from_json,
    c_spec_to_dict,
    failure_from_c,
    fill_handle,
    handle_from_c,
)
from ._model import STATE_CODES, STATE_OF_CODE, TaskFailure, TaskHandle, TaskRecord, TaskState

ffi = _native.ffi
T = TypeVar("T")

# The ledger a reconcile tick holds, as seen by the callbacks it runs
# (contextvars travel into to_thread and run_coroutine_threadsafe): they may
# use that ledger meanwhile, one call at a time, since the tick waits for them.
RECONCILING: contextvars.ContextVar[NativeTaskLedger | None] = contextvars.ContextVar("altar_reconciling",
                                                                                      default=None)


class TaskLedger(ABC):
    """Durable record of every submitted task and its latest state; reconcile_once reads and writes only this."""

    @abstractmethod
    async def record(self, handle: TaskHandle, kind: str, spec: dict[str, Any] | None = None) -> None:
        """Persist a freshly submitted task. Idempotent while its record is open; a consumed
        record under the same handle is re-opened for the new task (state, restarts, failure and spec reset)."""

    @abstractmethod
    async def open_handles(self) -> list[TaskHandle]:
        """Handles neither terminal nor consumed: the ones to poll."""

    @abstractmethod
    async def set_state(self, handle: TaskHandle, state: TaskState, failure: TaskFailure | None = None) -> None:
        """Record the latest observed state, and why a failed task failed."""

    @abstractmethod
    async def active_succeeded(self) -> list[TaskRecord]:
        """Succeeded records not yet consumed: what groups are made of."""

    @abstractmethod
    async def active_failed(self) -> list[TaskRecord]:
        """Failed records not yet consumed: what blocks a group."""

    @abstractmethod
    async def consume(self, handles: list[TaskHandle]) -> None:
        """Mark handles consumed once their group has fired (or was given up on), so it fires once."""


def record_from_c(r: Any) -> TaskRecord:
    spec = None if r.spec == ffi.NULL else c_spec_to_dict(r.spec)
    return TaskRecord(handle=handle_from_c(r.handle), kind=_native.s(r.kind) or "",
                      state=STATE_OF_CODE[int(r.state)], restart_count=int(r.restart_count), spec=spec,
                      consumed=bool(r.consumed), failure=failure_from_c(r.failure))


class NativeTaskLedger(TaskLedger):
    """A TaskLedger that is one of libaltar's ledgers (used by one call at a time)."""

    def __init__(self, ledger: Any) -> None:
        self._l = ledger
        self._lock = threading.Lock()
        self._callback_lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._l != ffi.NULL:
                _native.lib().altar_ledger_close(self._l)
                self._l = ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _open(self) -> Any:
        if self._l == ffi.NULL:
            raise _errors.AltarError(-22, "ESTATE", "ledger is closed")
        return self._l

    def with_ledger(self, fn: Callable[[Any], T]) -> T:
        """Run fn(the C ledger) holding this ledger's lock, or, from a callback of a
        reconcile tick that holds it, one callback's call at a time."""
        if RECONCILING.get() is self:
            with self._callback_lock:
                return fn(self._open())
        with self._lock:
            return fn(self._open())

    async def _call(self, fn: Callable[[Any], T]) -> T:
        return await asyncio.to_thread(self.with_ledger, fn)

    async def record(self, handle: TaskHandle, kind: str, spec: dict[str, Any] | None = None) -> None:
        def run(l: Any) -> None:
            L = _native.lib()
            h = ffi.new("altar_handle_t *")
            err = _errors.new_err()
            try:
                fill_handle(h, handle)
                if spec is None:
                    _errors.check(L.altar_ledger_record(l, h, _native.b(kind), ffi.NULL, err), err)
                else:
                    with c_spec_from_json(_dumps(dict(spec), "spec")) as p:
                        _errors.check(L.altar_ledger_record(l, h, _native.b(kind), p, err), err)
            finally:
                L.altar_handle_clear(h)
        await self._call(run)

    async def open_handles(self) -> list[TaskHandle]:
        def run(l: Any) -> list[TaskHandle]:
            L = _native.lib()
            phs = ffi.new("altar_handle_t **")
            pn = ffi.new("size_t *")
            err = _errors.new_err()
            _errors.check(L.altar_ledger_open_handles(l, phs, pn, err), err)
            try:
                return [handle_from_c(phs[0][i]) for i in range(pn[0])]
            finally:
                if phs[0] != ffi.NULL:
                    L.altar_handles_free(phs[0], pn[0])
        return await self._call(run)

    async def set_state(self, handle: TaskHandle, state: TaskState, failure: TaskFailure | None = None) -> None:
        def run(l: Any) -> None:
            L = _native.lib()
            f = c_failure(failure)
            err = _errors.new_err()
            try:
                with c_handles([handle]) as hs:
                    _errors.check(L.altar_ledger_set_state(l, hs, STATE_CODES[TaskState(state)], f, err), err)
            finally:
                if f != ffi.NULL:
                    L.altar_failure_free(f)
        await self._call(run)

    async def _records(self, failed: bool) -> list[TaskRecord]:
        def run(l: Any) -> list[TaskRecord]:
            L = _native.lib()
            precs = ffi.new("altar_record_t **")
            pn = ffi.new("size_t *")
            err = _errors.new_err()
            fn = L.altar_ledger_active_failed if failed else L.altar_ledger_active_succeeded
            _errors.check(fn(l, precs, pn, err), err)
            try:
                return [record_from_c(precs[0][i]) for i in range(pn[0])]
            finally:
                if precs[0] != ffi.NULL:
                    L.altar_records_free(precs[0], pn[0])
        return await self._call(run)

    async def active_succeeded(self) -> list[TaskRecord]:
        return await self._records(failed=False)

    async def active_failed(self) -> list[TaskRecord]:
        return await self._records(failed=True)

    async def consume(self, handles: list[TaskHandle]) -> None:
        def run(l: Any) -> None:
            if not handles:
                return
            err = _errors.new_err()
            with c_handles(list(handles)) as hs:
                _errors.check(_native.lib().altar_ledger_consume(l, hs, len(handles), err), err)
        await self._call(run)

    async def checksum(self) -> str:
        """"sha256:<hex>" over every record: equal ledgers give equal checksums whatever their history."""
        def run(l: Any) -> str:
            out = ffi.new("char[72]")
            err = _errors.new_err()
            _errors.check(_native.lib().altar_ledger_checksum(l, out, err), err)
            return str(ffi.string(out).decode())
        return await self._call(run)


class InMemoryTaskLedger(NativeTaskLedger):
    """altar's in-process reference ledger, keyed by (backend, external_id); gone when closed."""

    def __init__(self) -> None:
        err = _errors.new_err()
        l = _native.lib().altar_ledger_memory_open(err)
        if l == ffi.NULL:
            raise _errors.from_code(err.code or -2, err)
        super().__init__(l)


class RocksDBTaskLedger(NativeTaskLedger):
    """altar's RocksDB ledger in directory path, the one the reconciler keeps.

    Created when missing, unless read_only: then it is opened for reading
    alone (beside a reconciler that writes it) and must exist.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        err = _errors.new_err()
        opts = ffi.new("altar_ledger_rocksdb_opts_t *", {"read_only": read_only, "no_create": read_only})
        l = _native.lib().altar_ledger_rocksdb_open(os.fsencode(path), opts, err)
        if l == ffi.NULL:
            raise _errors.from_code(err.code or -19, err)
        super().__init__(l)


def records_where(ledger: NativeTaskLedger, keep: Callable[[TaskRecord], bool]) -> list[TaskRecord]:
    """Every record of the ledger that keep accepts, in (backend, external_id) order."""
    out: list[TaskRecord] = []
    failure: list[BaseException] = []

    def visit(ctx: Any, e: Any) -> int:
        try:
            rec = record_from_c(e.rec)
            if keep(rec):
                out.append(rec)
            return 0
        except BaseException as exc:
            failure.append(exc)
            return -1

    cb = ffi.callback("altar_ledger_visit_fn", visit)

    def run(l: Any) -> None:
        err = _errors.new_err()
        rc = _native.lib().altar_ledger_foreach(l, cb, ffi.NULL, err)
        if failure:
            raise failure[0]
        _errors.check(rc, err)
    ledger.with_ledger(run)
    return out
