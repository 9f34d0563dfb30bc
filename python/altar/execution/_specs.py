"""spec_to_dict / spec_from_dict, the task key and the wire encoding, all by libaltar."""

from __future__ import annotations


from collections.abc import Mapping
from typing import Any

from . import _errors, _native
from ._codec import _dumps, c_spec, c_spec_from_json, c_spec_to_dict, spec_from_canonical
from ._model import ContainerTaskSpec

ffi = _native.ffi


def spec_to_dict(spec: ContainerTaskSpec) -> dict[str, Any]:
    """The spec as plain JSON-able values (the wire schema's keys), for a ledger row or a file.

    avoid_hosts is placement, not identity, so it is not written.
    """
    with c_spec(spec) as p:
        return c_spec_to_dict(p)


def spec_from_dict(data: Mapping[str, Any]) -> ContainerTaskSpec:
    """Rebuild a spec from spec_to_dict's output.

    Keys this version does not know are ignored and missing ones take their
    defaults, so what an older or newer writer stored still loads. A value of
    the wrong type raises InvalidArgument naming its field ("spec.command[1]: ...").
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"spec_from_dict: expected a mapping, got {type(data).__name__}")
    with c_spec_from_json(_dumps(dict(data), "spec")) as p:
        return spec_from_canonical(c_spec_to_dict(p))


def task_key(spec: ContainerTaskSpec) -> str:
    """The task's identity: hex SHA-256 of its canonical encoding (avoid_hosts left out)."""
    out = ffi.new("char[65]")
    err = _errors.new_err()
    with c_spec(spec) as p:
        _errors.check(_native.lib().altar_spec_identity(p, out, err), err)
    return str(ffi.string(out).decode())


def job_name(spec: ContainerTaskSpec) -> str:
    """The Kubernetes Job name for spec: "<kind>-<short hash>", a DNS-1123 label."""
    out = ffi.new("char[64]")
    err = _errors.new_err()
    with c_spec(spec) as p:
        _errors.check(_native.lib().altar_spec_job_name(p, out, err), err)
    return str(ffi.string(out).decode())


def encode_spec(spec: ContainerTaskSpec) -> bytes:
    """The spec's canonical msgpack bytes (the wire form; the task key hashes these)."""
    L = _native.lib()
    buf = ffi.new("altar_buf_t *")
    err = _errors.new_err()
    try:
        with c_spec(spec) as p:
            _errors.check(L.altar_encode_spec(p, buf, err), err)
        return bytes(ffi.buffer(buf.data, buf.len))
    finally:
        L.altar_buf_free(buf)


def decode_spec(data: bytes) -> ContainerTaskSpec:
    """A spec from msgpack bytes; InvalidArgument naming the field for bad input."""
    L = _native.lib()
    p = L.altar_spec_new(b"", b"")
    if p == ffi.NULL:
        raise MemoryError("altar_spec_new")
    L.altar_spec_clear(p)
    try:
        err = _errors.new_err()
        _errors.check(L.altar_decode_spec(bytes(data), len(data), p, err), err)
        return spec_from_canonical(c_spec_to_dict(p))
    finally:
        L.altar_spec_free(p)


def validate_spec(spec: ContainerTaskSpec) -> None:
    """Check spec as a worker will before running it.

    Raises InvalidArgument (or PathEscapeError) naming the field, e.g.
    "inputs[0].logical_path: escapes the root".
    """
    err = _errors.new_err()
    with c_spec(spec) as p:
        _errors.check(_native.lib().altar_spec_validate(p, err), err)


def group_event_id(kind: str, group_key: str, task_keys: list[str]) -> str:
    """The deterministic id of a group event over its members' task keys (order and duplicates do not matter)."""
    keep = [ffi.new("char[]", k.encode("utf-8")) for k in task_keys]
    arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
    out = ffi.new("char[65]")
    _errors.check(_native.lib().altar_group_event_id(_native.b(kind), _native.b(group_key), arr, len(keep), out))
    return str(ffi.string(out).decode())


