"""A TaskLedger written in Python, seen by libaltar as a ledger.

reconcile_once runs libaltar's tick, which reads and writes its ledger
through C. For altar's own ledgers that is direct; for any other
TaskLedger subclass (the contract's extension point) this module builds a
C ledger of the contract's six operations (altar_ledger_contract_open)
whose every call runs the Python method on the caller's event loop and
converts its answer with libaltar's own constructors, so the C side frees
it as it frees any ledger's.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from . import _errors, _native
from ._codec import c_failure, c_spec_from_json, c_spec_to_dict, failure_from_c, fill_handle, handle_from_c
from ._ledger import TaskLedger
from ._model import STATE_CODES, STATE_OF_CODE, TaskHandle, TaskRecord

ffi = _native.ffi


class _Caller(Protocol):
    """What a tick offers a bridge: running an awaitable on its loop, and recording a failure for C."""

    def _await(self, value: Any) -> Any: ...

    def _fail(self, e: BaseException, err: Any, where: str) -> int: ...


def _order(h: TaskHandle) -> tuple[str, str]:
    # libaltar's ledgers answer in (backend, external_id) order; so does a bridged one.
    if not isinstance(h, TaskHandle):
        raise TypeError(f"expected a TaskHandle, got {type(h).__name__}")
    return (h.backend, h.external_id)


def _handles_out(handles: list[TaskHandle], phs: Any, pn: Any) -> None:
    L = _native.lib()
    if not isinstance(handles, list):
        raise TypeError(f"open_handles must return a list of TaskHandle, got {type(handles).__name__}")
    handles = sorted(handles, key=_order)
    arr = ffi.cast("altar_handle_t *", L.calloc(max(1, len(handles)), ffi.sizeof("altar_handle_t")))
    if arr == ffi.NULL:
        raise MemoryError("calloc")
    for i, h in enumerate(handles):
        try:
            fill_handle(ffi.addressof(arr, i), h)
        except BaseException:
            L.altar_handles_free(arr, i + 1)
            raise
    phs[0] = arr
    pn[0] = len(handles)


def _fill_record(rec: Any, r: TaskRecord) -> None:
    """Fills a zeroed altar_record_t from r (altar_record_clear frees it, also after a failure)."""
    L = _native.lib()
    if not isinstance(r, TaskRecord):
        raise TypeError(f"expected a TaskRecord, got {type(r).__name__}")
    h = ffi.new("altar_handle_t *")
    try:
        fill_handle(h, r.handle)
        kind = _native.b(r.kind)
        if r.spec is None:
            rc = L.altar_record_init(rec, h, kind, ffi.NULL)
        else:
            with c_spec_from_json(json.dumps(r.spec).encode("utf-8")) as spec:
                rc = L.altar_record_init(rec, h, kind, spec)
    finally:
        L.altar_handle_clear(h)
    _errors.check(rc)
    rec.state = STATE_CODES[r.state]
    rec.restart_count = int(r.restart_count)
    rec.consumed = bool(r.consumed)
    if r.failure is not None:
        rec.failure = c_failure(r.failure)


def _records_out(records: list[TaskRecord], precs: Any, pn: Any, what: str) -> None:
    L = _native.lib()
    if not isinstance(records, list):
        raise TypeError(f"{what} must return a list of TaskRecord, got {type(records).__name__}")
    for r in records:
        if not isinstance(r, TaskRecord):
            raise TypeError(f"{what} must return a list of TaskRecord, got an item of type {type(r).__name__}")
    records = sorted(records, key=lambda r: _order(r.handle))
    arr = ffi.cast("altar_record_t *", L.calloc(max(1, len(records)), ffi.sizeof("altar_record_t")))
    if arr == ffi.NULL:
        raise MemoryError("calloc")
    for i, r in enumerate(records):
        try:
            _fill_record(ffi.addressof(arr, i), r)
        except BaseException:
            L.altar_records_free(arr, i + 1)
            raise
    precs[0] = arr
    pn[0] = len(records)


class LedgerBridge:
    """The C ledger over one Python TaskLedger, for one reconcile call (close it after)."""

    def __init__(self, ledger: TaskLedger, caller: _Caller) -> None:
        self.ledger = ledger
        self.caller = caller
        self.callbacks = [
            ffi.callback("int(void *, const altar_handle_t *, const char *, const altar_spec_t *, altar_error_t *)",
                         self._record),
            ffi.callback("int(void *, altar_handle_t **, size_t *, altar_error_t *)", self._open_handles),
            ffi.callback("int(void *, const altar_handle_t *, int, const altar_failure_t *, altar_error_t *)",
                         self._set_state),
            ffi.callback("int(void *, altar_record_t **, size_t *, altar_error_t *)", self._active_succeeded),
            ffi.callback("int(void *, altar_record_t **, size_t *, altar_error_t *)", self._active_failed),
            ffi.callback("int(void *, const altar_handle_t *, size_t, altar_error_t *)", self._consume),
        ]
        c = ffi.new("altar_contract_ledger_t *")
        (c.record, c.open_handles, c.set_state, c.active_succeeded, c.active_failed, c.consume) = self.callbacks
        err = _errors.new_err()
        self.l = _native.lib().altar_ledger_contract_open(c, err)
        if self.l == ffi.NULL:
            _errors.check(err.code or -12, err)

    def close(self) -> None:
        if self.l != ffi.NULL:
            _native.lib().altar_ledger_close(self.l)
            self.l = ffi.NULL

    # -- called by libaltar, on the tick's thread

    def _record(self, ctx: Any, h: Any, kind: Any, spec: Any, err: Any) -> int:
        try:
            d = None if spec == ffi.NULL else c_spec_to_dict(spec)
            self.caller._await(self.ledger.record(handle_from_c(h[0]), _native.s(kind) or "", d))
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.record")

    def _open_handles(self, ctx: Any, phs: Any, pn: Any, err: Any) -> int:
        try:
            _handles_out(self.caller._await(self.ledger.open_handles()), phs, pn)
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.open_handles")

    def _set_state(self, ctx: Any, h: Any, state: int, failure: Any, err: Any) -> int:
        try:
            self.caller._await(self.ledger.set_state(handle_from_c(h[0]), STATE_OF_CODE[int(state)],
                                                     failure_from_c(failure)))
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.set_state")

    def _active_succeeded(self, ctx: Any, precs: Any, pn: Any, err: Any) -> int:
        try:
            _records_out(self.caller._await(self.ledger.active_succeeded()), precs, pn, "active_succeeded")
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.active_succeeded")

    def _active_failed(self, ctx: Any, precs: Any, pn: Any, err: Any) -> int:
        try:
            _records_out(self.caller._await(self.ledger.active_failed()), precs, pn, "active_failed")
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.active_failed")

    def _consume(self, ctx: Any, hs: Any, n: int, err: Any) -> int:
        try:
            self.caller._await(self.ledger.consume([handle_from_c(hs[i]) for i in range(n)]))
            return 0
        except BaseException as e:
            return self.caller._fail(e, err, "ledger.consume")
