"""Specs, handles and statuses across the binding.

A spec crosses as JSON text that libaltar's own codec reads (the same
reader `altar submit` uses), so defaults, unknown keys and field-named errors
are libaltar's. Handles and statuses cross as C structs built and freed
with libaltar's own constructors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import _errors, _native
from ._model import (
    STATE_CODES,
    STATE_OF_CODE,
    ContainerTaskSpec,
    PluginRunIdentity,
    ResourceRequest,
    TaskFailure,
    TaskHandle,
    TaskStatus,
    Transfer,
)

ffi = _native.ffi


def _transfer_raw(t: Transfer) -> dict[str, Any]:
    return {"uri": t.uri, "logical_path": t.logical_path, "locality_key": t.locality_key, "digest": t.digest}


def _raw(spec: ContainerTaskSpec) -> dict[str, Any]:
    """The spec's fields as a mapping, as given (libaltar checks and normalizes them)."""
    if not isinstance(spec, ContainerTaskSpec):
        raise TypeError(f"expected a ContainerTaskSpec, got {type(spec).__name__}")
    r = spec.resources
    return {
        "kind": spec.kind,
        "image": spec.image,
        "command": list(spec.command),
        "labels": dict(spec.labels),
        "inputs": [_transfer_raw(t) for t in spec.inputs],
        "outputs": [_transfer_raw(t) for t in spec.outputs],
        "resources": {"gpu": None if r.gpu is None else str(r.gpu), "count": r.count, "memory_mb": r.memory_mb},
        "timeout_s": spec.timeout_s,
        "plugin_identity": None if spec.plugin_identity is None else dict(spec.plugin_identity),
    }


def _dumps(data: Any, what: str) -> bytes:
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise _errors.InvalidArgument(-1, "EINVAL", f"{what}: not representable on the wire: {e}") from None


@contextmanager
def c_spec_from_json(text: bytes) -> Iterator[Any]:
    """A C spec decoded from JSON text by libaltar, freed on exit."""
    L = _native.lib()
    p = L.altar_spec_new(b"", b"")
    if p == ffi.NULL:
        raise MemoryError("altar_spec_new")
    L.altar_spec_clear(p)
    try:
        err = _errors.new_err()
        _errors.check(L.altar_spec_from_json(text, len(text), p, err), err)
        yield p
    finally:
        L.altar_spec_free(p)


@contextmanager
def c_spec(spec: ContainerTaskSpec) -> Iterator[Any]:
    """The C form of spec (avoid_hosts included), freed on exit."""
    L = _native.lib()
    with c_spec_from_json(_dumps(_raw(spec), "spec")) as p:
        for h in spec.avoid_hosts:
            _errors.check(L.altar_spec_add_avoid_host(p, _native.b(h)))
        yield p


def c_spec_to_dict(p: Any) -> dict[str, Any]:
    err = _errors.new_err()
    text = _native.lib().altar_spec_to_json(p, err)
    if text == ffi.NULL:
        raise _errors.from_code(err.code or -1, err)
    out = json.loads(_native.take_string(text) or "{}")
    assert isinstance(out, dict)
    return out


def _transfer_from(d: dict[str, Any]) -> Transfer:
    return Transfer(uri=d["uri"], logical_path=d["logical_path"], locality_key=d.get("locality_key"),
                    digest=d.get("digest"))


def spec_from_canonical(d: dict[str, Any], avoid_hosts: tuple[str, ...] = ()) -> ContainerTaskSpec:
    """A ContainerTaskSpec from the dict libaltar wrote (every key present)."""
    r = d["resources"]
    pid = d.get("plugin_identity")
    return ContainerTaskSpec(
        kind=d["kind"],
        image=d["image"],
        command=list(d["command"]),
        labels=dict(d["labels"]),
        inputs=[_transfer_from(t) for t in d["inputs"]],
        outputs=[_transfer_from(t) for t in d["outputs"]],
        resources=ResourceRequest(gpu=r["gpu"], count=r["count"], memory_mb=r["memory_mb"]),
        timeout_s=d["timeout_s"],
        avoid_hosts=avoid_hosts,
        plugin_identity=None if pid is None else PluginRunIdentity(pid),
    )


# ---- handles, failures, statuses ------------------------------------------


def _strmap_items(m: Any) -> dict[str, str]:
    return {_native.s(m.keys[i]) or "": _native.s(m.vals[i]) or "" for i in range(m.n)}


def handle_from_c(h: Any) -> TaskHandle:
    pid = None
    if h.plugin_identity != ffi.NULL:
        pid = PluginRunIdentity(_strmap_items(h.plugin_identity))
    return TaskHandle(backend=_native.s(h.backend) or "", external_id=_native.s(h.external_id) or "",
                      labels=_strmap_items(h.labels), plugin_identity=pid)


def fill_handle(h: Any, handle: TaskHandle) -> None:
    """Fills a zeroed altar_handle_t from handle; the caller clears it with altar_handle_clear."""
    L = _native.lib()
    if not isinstance(handle, TaskHandle):
        raise TypeError(f"expected a TaskHandle, got {type(handle).__name__}")
    _errors.check(L.altar_handle_init(h, _native.b(handle.backend), _native.b(handle.external_id)))
    for k, v in handle.labels.items():
        _errors.check(L.altar_strmap_set(ffi.addressof(h, "labels"), _native.b(k), _native.b(v)))
    if handle.plugin_identity is not None:
        m = L.altar_strmap_new()
        if m == ffi.NULL:
            raise MemoryError("altar_strmap_new")
        h.plugin_identity = m
        for k, v in handle.plugin_identity.items():
            _errors.check(L.altar_strmap_set(m, _native.b(k), _native.b(v)))


@contextmanager
def c_handles(handles: list[TaskHandle]) -> Iterator[Any]:
    """An array of C handles, cleared on exit."""
    L = _native.lib()
    arr = ffi.new("altar_handle_t[]", max(1, len(handles)))
    try:
        for i, h in enumerate(handles):
            fill_handle(ffi.addressof(arr, i), h)
        yield arr
    finally:
        for i in range(len(handles)):
            L.altar_handle_clear(ffi.addressof(arr, i))


def failure_from_c(f: Any) -> TaskFailure | None:
    if f == ffi.NULL:
        return None
    return TaskFailure(reason=_native.s(f.reason) or "", detail=_native.s(f.detail),
                       deterministic=bool(f.deterministic),
                       exit_code=int(f.exit_code.v) if f.exit_code.set else None)


def c_failure(f: TaskFailure | None) -> Any:
    """A malloc'd altar_failure_t (NULL for None); ownership passes to whoever takes it."""
    if f is None:
        return ffi.NULL
    L = _native.lib()
    p = L.altar_failure_new(_native.b(f.reason), _native.b(f.detail), bool(f.deterministic))
    if p == ffi.NULL:
        raise MemoryError("altar_failure_new")
    if f.exit_code is not None:
        p.exit_code.set = True
        p.exit_code.v = int(f.exit_code)
    return p


def status_from_c(st: Any) -> TaskStatus:
    return TaskStatus(handle=handle_from_c(st.handle), state=STATE_OF_CODE[int(st.state)],
                      failure=failure_from_c(st.failure))


@contextmanager
def c_statuses(statuses: list[TaskStatus]) -> Iterator[Any]:
    L = _native.lib()
    arr = ffi.new("altar_status_t[]", max(1, len(statuses)))
    h = ffi.new("altar_handle_t *")
    try:
        for i, st in enumerate(statuses):
            fill_handle(h, st.handle)
            try:
                _errors.check(L.altar_status_init(ffi.addressof(arr, i), h, STATE_CODES[st.state],
                                                  c_failure(st.failure)))
            finally:
                L.altar_handle_clear(h)
        yield arr
    finally:
        for i in range(len(statuses)):
            L.altar_status_clear(ffi.addressof(arr, i))
