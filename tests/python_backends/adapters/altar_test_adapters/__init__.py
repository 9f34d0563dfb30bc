"""Adapters for the python backend's tests: one that completes every task at
once (the benchmark's no-op), and one that misbehaves in submit as its
`mode` option says, while its other operations behave. And a storage
adapter that misbehaves in every operation as its `mode` says."""

from __future__ import annotations

import asyncio
import os
import stat
import time

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from altar.execution import (Capacity, ContainerTaskSpec, ExecutionBackend, Storage, TaskHandle, TaskState,
                             TaskStatus)


class NoopBackend(ExecutionBackend):
    """Every task has succeeded by the time it is polled: what is left is the bridge's cost."""

    name = "noop"
    input_digest_verification = "task"

    def __init__(self) -> None:
        self.n = 0

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        self.n += 1
        return TaskHandle(self.name, f"noop-{self.n}", dict(spec.labels), spec.plugin_identity)

    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        return [TaskStatus(h, TaskState.SUCCEEDED) for h in handles]


def _protocol_fds() -> list[int]:
    """The host's private descriptors: sockets other than 0, 1 and 2."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                fds.append(fd)
        except OSError:
            pass
    return fds


class FaultyBackend(NoopBackend):
    """submit misbehaves by mode: raise, hang (async), block (sync), garbage
    (bytes on the protocol), huge (a reply past the bound), wrongtype,
    exit (the process dies), print (chatter on stdout; then works)."""

    name = "faulty"

    def __init__(self, mode: str = "raise") -> None:
        super().__init__()
        self.mode = mode

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        mode = self.mode
        if mode == "raise":
            secret = os.environ.get("ALTAR_TEST_API_KEY", "")
            raise RuntimeError(f"the cluster refused us (key {secret})")
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "block":
            time.sleep(3600)
        if mode == "garbage":
            for fd in _protocol_fds():
                os.write(fd, b"\x00\xffnot json at all\n")
            await asyncio.sleep(3600)
        if mode == "huge":
            return TaskHandle(self.name, "x" * (4 << 20), dict(spec.labels))
        if mode == "wrongtype":
            return 42  # type: ignore[return-value]
        if mode == "exit":
            os._exit(3)
        if mode == "print":
            print("chatter that is not a reply", flush=True)
            os.write(1, b"{\"ok\": true, \"handle\": \"forged\"}\n")
        return await super().submit(spec)

    async def capacity(self) -> Capacity:
        return Capacity({"normal": 7})


class HangingAwaitBackend(NoopBackend):
    """Offers await_completion, and never returns from it."""

    name = "await-hang"

    async def await_completion(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        await asyncio.sleep(3600)
        return []


class UnverifiedBackend(NoopBackend):
    """Declares no digest verification: altar refuses it at open."""

    name = "no-verification"
    input_digest_verification = None  # type: ignore[assignment]


class BrokenInitBackend(NoopBackend):
    """Its constructor raises: a configuration error at open."""

    name = "broken-init"

    def __init__(self, **options: object) -> None:
        raise ValueError(f"unexpected options {sorted(options)}")


class FaultyStorage(Storage):
    """Every operation misbehaves by mode: raise (with a secret in the
    message), hang (async), block (sync), garbage (bytes on the protocol),
    wrongtype (returns what the contract does not allow), exit."""

    name = "faulty-storage"

    def __init__(self, mode: str = "raise") -> None:
        self.mode = mode

    async def _misbehave(self, path: str) -> Any:
        mode = self.mode
        if mode == "raise":
            secret = os.environ.get("ALTAR_TEST_API_KEY", "")
            raise RuntimeError(f"the object store refused {path} (key {secret})")
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "block":
            time.sleep(3600)
        if mode == "garbage":
            for fd in _protocol_fds():
                os.write(fd, b"\x00\xffnot json at all\n")
            await asyncio.sleep(3600)
        if mode == "exit":
            os._exit(3)
        return 42  # wrongtype: neither bytes, nor a bool, nor a path

    async def read_bytes(self, path: str) -> bytes:
        return await self._misbehave(path)  # type: ignore[no-any-return]

    async def read_text(self, path: str) -> str:
        return await self._misbehave(path)  # type: ignore[no-any-return]

    async def write_bytes(self, path: str, data: bytes) -> None:
        await self._misbehave(path)

    async def write_text(self, path: str, text: str) -> None:
        await self._misbehave(path)

    async def exists(self, path: str) -> bool:
        return await self._misbehave(path)  # type: ignore[no-any-return]

    async def mkdirs(self, path: str) -> None:
        await self._misbehave(path)

    async def upload(self, local_path: str, dest_path: str) -> None:
        await self._misbehave(dest_path)

    @asynccontextmanager
    async def as_local_file(self, path: str) -> AsyncIterator[str]:
        yield await self._misbehave(path)


class BrokenInitStorage(FaultyStorage):
    """Its constructor raises: a configuration error when the bridge starts."""

    name = "broken-storage"

    def __init__(self, **options: object) -> None:
        raise ValueError(f"cannot reach the object store with {sorted(options)}")
