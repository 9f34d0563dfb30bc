"""The host that runs a Python ExecutionBackend for altar's C workers.

The fleet's `python` backend (backends/python_*.c) starts this module as
`python -m altar.execution.bridge` in the environment its `python:` key
names, and speaks JSON Lines with it: one request per line on stdin, one
reply per line, in order. The host's own stdout and stdin are moved out of
the adapter's way first, so anything the adapter prints (or a subprocess it
starts reads) cannot touch the protocol: prints land on stderr.

Greeting: {"ok": true, "ready": true, "protocol": 1}.
Requests ("op") and their replies:
    open      {adapter, options}  -> {name, verification, mount_root, custom_resolve, await_completion}
              (the adapter is looked up in the altar.execution_backends
              registry and built as cls(**options))
    submit    {spec}              -> {handle}
    poll      {handles}           -> {statuses: [{handle, state, failure}]}
    await_completion {handles}    -> {statuses}  (sent only when open said the adapter overrides it)
    cancel    {handle}            -> {}
    capacity  {}                  -> {pools: {pool: free}}
    stage_inputs / collect_outputs {transfers} -> {}
    resolve   {logical_path}      -> {physical_path}
    recover   {failures, banned}  -> {handles}
    ping      {}                  -> {}
Storage adapters (the fleet's storage.python.schemes, backends/python_storage.c):
    st_open   {scheme, adapter, options} -> {name}
              (looked up in the altar.storage registry, built as cls(**options);
              one bridge may hold an adapter per scheme besides a backend)
    st_exists {scheme, path}      -> {exists}
    st_read   {scheme, path, dest} -> {size}   read_bytes, written to the local file dest
    st_fetch  {scheme, path, dest} -> {size}   as_local_file, copied to dest
    st_write  {scheme, path, src} -> {}       write_bytes with the local file src's bytes
    st_upload {scheme, path, src} -> {}       upload(src, path)
    st_mkdirs {scheme, path}      -> {}
  Bytes never travel on the protocol: dest and src are files the caller made.
  A FileNotFoundError from the adapter is reported with code ENOTFOUND.
Failures: {"ok": false, "kind": K, "error": text, "type": exception class,
"code": altar error name or null, "trace": the traceback's last lines}, K
one of "raised" (the adapter raised), "config" (open failed), "invalid" (a
malformed request or a reply of the wrong type), "cancelled" (SIGINT
cancelled the request in flight after the caller's deadline). SIGINT between
requests is ignored. The host exits when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import signal
import socket
import stat
import traceback
from collections.abc import Mapping
from typing import Any

from ._backends import Capacity, ExecutionBackend, get_execution_backend_registry
from ._errors import AltarError, NotFound
from ._model import PluginRunIdentity, TaskFailure, TaskHandle, TaskState, TaskStatus, Transfer
from ._paths import PathResolver
from ._specs import spec_from_dict
from ._storage import Storage, get_storage_registry

PROTOCOL = 1
# A request line may hold many handles; bounded all the same.
MAX_REQUEST_BYTES = 64 << 20
TRACE_FRAMES = 3
MAX_TEXT = 1000


class Invalid(Exception):
    """A request the host cannot read, or a value of the wrong type from the adapter."""


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise Invalid(f"{key}: missing or of the wrong type")
    return value


def _strmap(v: Any, what: str) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise Invalid(f"{what}: want a mapping of strings")
    return dict(v)


def _handle_in(d: Any, backend: str) -> TaskHandle:
    if not isinstance(d, Mapping):
        raise Invalid("handle: want an object")
    pid = d.get("plugin_identity")
    return TaskHandle(backend=backend, external_id=_need(d, "external_id", str),
                      labels=_strmap(d.get("labels"), "handle.labels"),
                      plugin_identity=None if pid is None else PluginRunIdentity(_strmap(pid, "plugin_identity")))


def _handle_out(h: Any, what: str) -> dict[str, Any]:
    if not isinstance(h, TaskHandle):
        raise Invalid(f"{what} returned {type(h).__name__}, not a TaskHandle")
    if not isinstance(h.external_id, str) or not h.external_id:
        raise Invalid(f"{what}: the handle's external_id must be a non-empty string")
    return {"backend": str(h.backend), "external_id": h.external_id,
            "labels": _strmap(h.labels, f"{what}: handle.labels"),
            "plugin_identity": None if h.plugin_identity is None else _strmap(h.plugin_identity, "plugin_identity")}


def _failure_out(f: Any) -> dict[str, Any] | None:
    if f is None:
        return None
    if not isinstance(f, TaskFailure) or not isinstance(f.reason, str) or not f.reason:
        raise Invalid("poll: a status's failure must be a TaskFailure with a reason")
    if f.exit_code is not None and not isinstance(f.exit_code, int):
        raise Invalid("poll: failure.exit_code must be an int or None")
    return {"reason": f.reason, "detail": None if f.detail is None else str(f.detail),
            "deterministic": bool(f.deterministic), "exit_code": f.exit_code}


def _status_out(s: Any) -> dict[str, Any]:
    if not isinstance(s, TaskStatus):
        raise Invalid(f"poll returned {type(s).__name__} in its list, not a TaskStatus")
    try:
        state = TaskState(s.state)
    except ValueError:
        raise Invalid(f"poll: unknown state {s.state!r}") from None
    return {"handle": _handle_out(s.handle, "poll"), "state": state.value,
            "failure": _failure_out(s.failure) if state is TaskState.FAILED else None}


def _transfers_in(v: Any) -> list[Transfer]:
    if not isinstance(v, list):
        raise Invalid("transfers: want a list")
    out = []
    for t in v:
        if not isinstance(t, Mapping):
            raise Invalid("transfers: want objects")
        out.append(Transfer(uri=_need(t, "uri", str), logical_path=_need(t, "logical_path", str),
                            locality_key=t.get("locality_key"), digest=t.get("digest")))
    return out


def _failure_in(d: Any) -> TaskFailure | None:
    if d is None:
        return None
    if not isinstance(d, Mapping):
        raise Invalid("failure: want an object")
    return TaskFailure(reason=_need(d, "reason", str), detail=d.get("detail"),
                       deterministic=bool(d.get("deterministic")), exit_code=d.get("exit_code"))


def _trace(exc: BaseException) -> str:
    """The last few frames of the traceback, one line each: where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)[-TRACE_FRAMES:]
    lines = [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames]
    return "\n".join(lines)[-MAX_TEXT:]


def _failure_reply(kind: str, exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "type": type(exc).__name__, "error": str(exc)[:MAX_TEXT],
            "code": exc.name if isinstance(exc, AltarError) else None, "trace": _trace(exc)}


def _copy_into(src: str, dest: str) -> int:
    """Copies the file src over the existing file dest (the kernel's copy
    where it can: dest keeps its inode and mode); its size."""
    shutil.copyfile(src, dest)
    return os.stat(dest).st_size


def _write_into(data: bytes, dest: str) -> int:
    with open(dest, "r+b") as fout:
        fout.truncate(0)
        fout.write(data)
        return fout.tell()


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class Host:
    def __init__(self) -> None:
        self.backend: ExecutionBackend | None = None
        self.name = ""
        self.storages: dict[str, Storage] = {}

    def adapter(self) -> ExecutionBackend:
        if self.backend is None:
            raise Invalid("no adapter open (send open first)")
        return self.backend

    async def op_open(self, req: Mapping[str, Any]) -> dict[str, Any]:
        name = _need(req, "adapter", str)
        options = req.get("options") or {}
        if not isinstance(options, Mapping):
            raise Invalid("options: want an object")
        try:
            cls = get_execution_backend_registry()[name]
            if not (isinstance(cls, type) and issubclass(cls, ExecutionBackend)):
                raise TypeError(f"{name!r} is registered as {cls!r}, not an ExecutionBackend subclass")
            backend = cls(**options)
            resolver = backend.path_resolver()
            if not isinstance(resolver, PathResolver):
                raise TypeError("path_resolver() must return a PathResolver")
        except Exception as exc:  # the adapter's own failure to start: a configuration error
            return _failure_reply("config", exc)
        self.backend = backend
        self.name = str(getattr(backend, "name", "") or name)
        v = getattr(backend, "input_digest_verification", None)
        return {"name": self.name, "verification": v if v in ("staging", "task") else None,
                "mount_root": str(resolver.mount_root or ""),
                "custom_resolve": type(resolver).resolve is not PathResolver.resolve,
                "await_completion": type(backend).await_completion is not ExecutionBackend.await_completion}

    async def op_ping(self, req: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    async def op_submit(self, req: Mapping[str, Any]) -> dict[str, Any]:
        spec = spec_from_dict(_need(req, "spec", dict))
        return {"handle": _handle_out(await self.adapter().submit(spec), "submit")}

    async def op_poll(self, req: Mapping[str, Any]) -> dict[str, Any]:
        handles = [_handle_in(h, self.name) for h in _need(req, "handles", list)]
        statuses = await self.adapter().poll(handles)
        if not isinstance(statuses, list):
            raise Invalid(f"poll returned {type(statuses).__name__}, not a list")
        return {"statuses": [_status_out(s) for s in statuses]}

    async def op_await_completion(self, req: Mapping[str, Any]) -> dict[str, Any]:
        handles = [_handle_in(h, self.name) for h in _need(req, "handles", list)]
        statuses = await self.adapter().await_completion(handles)
        if not isinstance(statuses, list):
            raise Invalid(f"await_completion returned {type(statuses).__name__}, not a list")
        return {"statuses": [_status_out(s) for s in statuses]}

    async def op_cancel(self, req: Mapping[str, Any]) -> dict[str, Any]:
        await self.adapter().cancel(_handle_in(_need(req, "handle", dict), self.name))
        return {}

    async def op_capacity(self, req: Mapping[str, Any]) -> dict[str, Any]:
        cap = await self.adapter().capacity()
        pools = cap.pools if isinstance(cap, Capacity) else None
        if not isinstance(pools, Mapping) or not all(
                isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) for k, n in pools.items()):
            raise Invalid("capacity() must return a Capacity whose pools map names to ints")
        return {"pools": dict(pools)}

    async def op_stage_inputs(self, req: Mapping[str, Any]) -> dict[str, Any]:
        await self.adapter().stage_inputs(_transfers_in(req.get("transfers")))
        return {}

    async def op_collect_outputs(self, req: Mapping[str, Any]) -> dict[str, Any]:
        await self.adapter().collect_outputs(_transfers_in(req.get("transfers")))
        return {}

    async def op_resolve(self, req: Mapping[str, Any]) -> dict[str, Any]:
        path = self.adapter().path_resolver().resolve(_need(req, "logical_path", str))
        if not isinstance(path, str):
            raise Invalid("path_resolver().resolve must return a str")
        return {"physical_path": path}

    async def op_recover(self, req: Mapping[str, Any]) -> dict[str, Any]:
        failures = []
        for s in _need(req, "failures", list):
            if not isinstance(s, Mapping):
                raise Invalid("failures: want objects")
            failures.append(TaskStatus(handle=_handle_in(s.get("handle"), self.name),
                                       state=TaskState(_need(s, "state", str)), failure=_failure_in(s.get("failure"))))
        banned = {b for b in _need(req, "banned", list) if isinstance(b, str)}
        handles = await self.adapter().recover(failures, banned=banned)
        if not isinstance(handles, list):
            raise Invalid(f"recover returned {type(handles).__name__}, not a list")
        return {"handles": [_handle_out(h, "recover") for h in handles]}

    # ---- storage adapters, by scheme ----

    async def op_st_open(self, req: Mapping[str, Any]) -> dict[str, Any]:
        scheme = _need(req, "scheme", str)
        name = _need(req, "adapter", str)
        options = req.get("options") or {}
        if not isinstance(options, Mapping):
            raise Invalid("options: want an object")
        try:
            cls = get_storage_registry()[name]
            if not (isinstance(cls, type) and issubclass(cls, Storage)):
                raise TypeError(f"{name!r} is registered as {cls!r}, not a Storage subclass")
            self.storages[scheme] = cls(**options)
        except Exception as exc:  # the adapter's own failure to start: a configuration error
            return _failure_reply("config", exc)
        return {"name": name}

    def _storage(self, req: Mapping[str, Any]) -> tuple[Storage, str]:
        scheme = _need(req, "scheme", str)
        st = self.storages.get(scheme)
        if st is None:
            raise Invalid(f"no storage adapter open for scheme {scheme!r} (send st_open first)")
        return st, _need(req, "path", str)

    async def _storage_call(self, what: str, coro: Any) -> Any:
        """Awaits one of the adapter's coroutines: a missing file is altar's ENOTFOUND."""
        if not asyncio.iscoroutine(coro) and not isinstance(coro, asyncio.Future):
            raise Invalid(f"{what} is not a coroutine function (Storage methods are async)")
        try:
            return await coro
        except FileNotFoundError as exc:
            raise NotFound(-4, "ENOTFOUND", f"{what}: {exc}") from exc

    async def op_st_exists(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        v = await self._storage_call("exists", st.exists(path))
        if not isinstance(v, bool):
            raise Invalid(f"exists() returned {type(v).__name__}, not a bool")
        return {"exists": v}

    async def op_st_read(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        dest = _need(req, "dest", str)
        data = await self._storage_call("read_bytes", st.read_bytes(path))
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise Invalid(f"read_bytes() returned {type(data).__name__}, not bytes")
        return {"size": await asyncio.to_thread(_write_into, bytes(data), dest)}

    async def op_st_fetch(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        dest = _need(req, "dest", str)
        cm = st.as_local_file(path)
        if not (hasattr(cm, "__aenter__") and hasattr(cm, "__aexit__")):
            raise Invalid(f"as_local_file() returned {type(cm).__name__}, not an async context manager")
        try:
            async with cm as local:
                if not isinstance(local, (str, os.PathLike)):
                    raise Invalid(f"as_local_file() yielded {type(local).__name__}, not a path")
                return {"size": await asyncio.to_thread(_copy_into, os.fspath(local), dest)}
        except FileNotFoundError as exc:
            raise NotFound(-4, "ENOTFOUND", f"as_local_file: {exc}") from exc

    async def op_st_write(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        data = await asyncio.to_thread(_read_file, _need(req, "src", str))
        await self._storage_call("write_bytes", st.write_bytes(path, data))
        return {}

    async def op_st_upload(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        await self._storage_call("upload", st.upload(_need(req, "src", str), path))
        return {}

    async def op_st_mkdirs(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st, path = self._storage(req)
        await self._storage_call("mkdirs", st.mkdirs(path))
        return {}

    async def serve_one(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise Invalid("a request must be a JSON object")
            fn = getattr(self, "op_" + str(req.get("op")), None)
            if fn is None:
                raise Invalid(f"unknown op {req.get('op')!r}")
        except (ValueError, Invalid) as exc:
            return _failure_reply("invalid", exc)
        try:
            result: dict[str, Any] = await fn(req)
        except Invalid as exc:
            return _failure_reply("invalid", exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the adapter's exception is a reply, never the host's end
            return _failure_reply("raised", exc)
        if result.get("ok") is False:
            return result
        return {"ok": True, **result}


def _writer(fd: int) -> Any:
    def write(obj: dict[str, Any]) -> None:
        try:
            data = (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        except (TypeError, ValueError) as exc:
            data = (json.dumps(_failure_reply("invalid", exc)) + "\n").encode()
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                # The descriptor shares its non-blocking flag with the reading
                # side asyncio owns: wait until the peer has read some.
                select.select([], [fd], [])
                continue
            view = view[n:]
    return write


async def _reader(fd: int) -> asyncio.StreamReader:
    """Requests from fd: altar's socketpair, or a pipe when run by hand."""
    if stat.S_ISSOCK(os.fstat(fd).st_mode):
        reader, _ = await asyncio.open_connection(sock=socket.socket(fileno=fd), limit=MAX_REQUEST_BYTES)
        return reader
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_REQUEST_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))
    return reader


async def _serve(in_fd: int, write: Any) -> None:
    loop = asyncio.get_running_loop()
    host = Host()
    current: list[asyncio.Task[dict[str, Any]]] = []

    def interrupt() -> None:
        # Only a request in flight is cancelled; between requests SIGINT is ignored.
        for task in current:
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, interrupt)
    reader = await _reader(in_fd)
    write({"ok": True, "ready": True, "protocol": PROTOCOL})
    while True:
        try:
            line = await reader.readline()
        except (ValueError, asyncio.LimitOverrunError):
            write({"ok": False, "kind": "invalid", "error": "request too long", "type": "ValueError",
                   "code": None, "trace": ""})
            return
        if not line:
            return
        task = asyncio.ensure_future(host.serve_one(line))
        current.append(task)
        try:
            reply = await task
        except asyncio.CancelledError:
            reply = {"ok": False, "kind": "cancelled", "error": "cancelled after the caller's deadline",
                     "type": "CancelledError", "code": None, "trace": ""}
        finally:
            current.clear()
        write(reply)


def main() -> None:
    # The protocol moves to private descriptors; fd 0 reads /dev/null and
    # fd 1 is stderr, so neither the adapter's prints nor its children can
    # reach it.
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        asyncio.run(_serve(in_fd, _writer(out_fd)))
    except (BrokenPipeError, ConnectionResetError):
        pass


if __name__ == "__main__":
    main()
