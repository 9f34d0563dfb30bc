"""ExecutionBackend, Capacity, and altar's own backends (process, local/docker, kubernetes, modal).

The base class carries the contract's defaults for the optional operations.
altar's backends are the C ones: each method is one libaltar call, run in a
worker thread so the event loop keeps turning, one call at a time per
backend object (a C backend is used by one thread at a time).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from . import _errors, _native
from ._codec import c_handles, c_spec, c_statuses, handle_from_c, status_from_c
from ._digests import c_transfer
from ._model import ContainerTaskSpec, ResourceRequest, TaskHandle, TaskStatus, Transfer
from ._paths import PathResolver

ffi = _native.ffi
T = TypeVar("T")


@dataclass
class Capacity:
    """Free slots per named pool, e.g. {"normal": 87, "a100": 4}; empty for an autoscaling backend.

    altar itself never gates on it; a submission driver may.
    """

    pools: dict[str, int] = field(default_factory=dict)

    def free_for(self, resources: ResourceRequest) -> int:
        """Free slots in the pool that would serve resources: gpu None reads "normal",
        a pool name reads that pool (GpuPool.NORMAL_GPU reads "gpu"); 0 for a pool not reported."""
        L = _native.lib()
        cap = ffi.new("altar_capacity_t *")
        L.altar_capacity_init(cap)
        try:
            for pool, n in self.pools.items():
                _errors.check(L.altar_capacity_set(cap, _native.b(pool), int(n)))
            r = ffi.new("altar_resources_t *")
            gpu = None if resources.gpu is None else ffi.new("char[]", str(resources.gpu).encode())
            r.gpu = ffi.NULL if gpu is None else gpu
            r.count = int(resources.count)
            if resources.memory_mb is not None:
                r.memory_mb.set = True
                r.memory_mb.v = int(resources.memory_mb)
            return int(L.altar_capacity_free_for(cap, r))
        finally:
            L.altar_capacity_clear(cap)


class ExecutionBackend(ABC):
    """Runs ContainerTaskSpecs and reports their state.

    Only submit and poll must be written; every other operation has the
    contract's default here. input_digest_verification says where input
    digests are checked: "staging" (stage_inputs raises
    TransferIntegrityError) or "task" (the task fails "input_digest_mismatch").
    """

    name: ClassVar[str] = ""
    input_digest_verification: str | None = None

    async def capacity(self) -> Capacity:
        """Free slots per pool; the default reports none (an autoscaling backend)."""
        return Capacity()

    async def stage_inputs(self, transfers: list[Transfer]) -> None:
        """Make inputs readable at their logical paths; the default has nothing to do."""
        return None

    async def collect_outputs(self, transfers: list[Transfer]) -> None:
        """Save outputs to their uris after success; the default has nothing to do."""
        return None

    def path_resolver(self) -> PathResolver:
        """The logical-to-physical mapping; the default is the identity."""
        return PathResolver("")

    @abstractmethod
    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        """Launch spec, returning once it is accepted. Submitting the same spec again never raises."""

    @abstractmethod
    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        """The current state of each handle, without waiting."""

    async def await_completion(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        """Wait until every handle is terminal. Not offered by default: raises CapabilityNotSupported."""
        raise _errors.CapabilityNotSupported(-9, "ENOTSUP", f"{self.name or type(self).__name__}: "
                                             "await_completion is not supported (poll on your own schedule)")

    async def cancel(self, handle: TaskHandle) -> None:
        """Best-effort stop; a task already gone counts as cancelled. The default does nothing."""
        return None

    async def recover(self, failures: list[TaskStatus], *, banned: set[str]) -> list[TaskHandle]:
        """Restart transient failures; the default restarts none."""
        return []


_VERIFICATION = {0: None, 1: "staging", 2: "task"}

# altar/backend.h's ALTAR_BACKEND_CAP_* bits by the name of what each lets a backend do.
CAPABILITY_BITS = {"capacity": 0x001, "pools": 0x002, "cancel": 0x004, "await_completion": 0x008,
                   "wait_change": 0x010, "recover": 0x020, "submit_start": 0x040, "adopt": 0x080, "logs": 0x100}


def _cfg_value(key: str, v: Any) -> bytes:
    if isinstance(v, bool):
        return b"true" if v else b"false"
    if isinstance(v, (str, int, float)):
        return str(v).encode("utf-8")
    raise TypeError(f"backend option {key!r}: expected str, int, float or bool, got {type(v).__name__}")


class NativeExecutionBackend(ExecutionBackend):
    """An ExecutionBackend that is one of libaltar's backends, opened by its registry name.

    Keyword arguments are the backend's configuration keys (as in altar.yaml's
    `backend:`); an unknown key raises InvalidArgument naming it.
    """

    def __init__(self, **config: Any) -> None:
        L = _native.lib()
        self._lock = threading.Lock()
        self._be: Any = ffi.NULL
        cfg = ffi.new("altar_strmap_t *")
        try:
            for k, v in config.items():
                _errors.check(L.altar_strmap_set(cfg, k.encode("utf-8"), _cfg_value(k, v)))
            err = _errors.new_err()
            be = L.altar_backend_open_by_name(_native.b(self.name), cfg, err)
            if be == ffi.NULL:
                raise _errors.from_code(err.code or -1, err)
            self._be = be
        finally:
            L.altar_strmap_clear(cfg)
        self.input_digest_verification = _VERIFICATION.get(int(L.altar_backend_verification(self._be)))
        caps = int(L.altar_backend_caps(self._be))
        # What the C backend declares it can do (altar/backend.h, ALTAR_BACKEND_CAP_*).
        self.capabilities = frozenset(name for name, bit in CAPABILITY_BITS.items() if caps & bit)

    # -- lifetime

    def close(self) -> None:
        """Release the C backend (running tasks keep running where the platform allows)."""
        with self._lock:
            if self._be != ffi.NULL:
                _native.lib().altar_backend_close(self._be)
                self._be = ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    async def __aenter__(self) -> NativeExecutionBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Any:
        if self._be == ffi.NULL:
            raise _errors.AltarError(-22, "ESTATE", f"{self.name}: backend is closed")
        return self._be

    async def _call(self, fn: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn()
        return await asyncio.to_thread(locked)

    # -- operations

    async def capacity(self) -> Capacity:
        def run() -> Capacity:
            L = _native.lib()
            cap = ffi.new("altar_capacity_t *")
            err = _errors.new_err()
            try:
                _errors.check(L.altar_backend_capacity(self._open(), cap, err), err)
                return Capacity({_native.s(cap.pools[i]) or "": int(cap.free_slots[i]) for i in range(cap.n)})
            finally:
                L.altar_capacity_clear(cap)
        return await self._call(run)

    async def _transfers(self, transfers: list[Transfer], outputs: bool) -> None:
        def run() -> None:
            keep: list[Any] = []
            arr = ffi.new("altar_transfer_t[]", max(1, len(transfers)))
            for i, t in enumerate(transfers):
                arr[i] = c_transfer(t, keep)[0]
            err = _errors.new_err()
            L = _native.lib()
            fn = L.altar_backend_collect_outputs if outputs else L.altar_backend_stage_inputs
            _errors.check(fn(self._open(), arr, len(transfers), err), err)
        await self._call(run)

    async def stage_inputs(self, transfers: list[Transfer]) -> None:
        await self._transfers(list(transfers), outputs=False)

    async def collect_outputs(self, transfers: list[Transfer]) -> None:
        await self._transfers(list(transfers), outputs=True)

    def path_resolver(self) -> PathResolver:
        with self._lock:
            return PathResolver(_native.s(_native.lib().altar_backend_mount_root(self._open())) or "")

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        def run() -> TaskHandle:
            L = _native.lib()
            h = ffi.new("altar_handle_t *")
            err = _errors.new_err()
            with c_spec(spec) as p:
                _errors.check(L.altar_spec_validate(p, err), err)
                try:
                    _errors.check(L.altar_backend_submit(self._open(), p, h, err), err)
                    return handle_from_c(h)
                finally:
                    L.altar_handle_clear(h)
        return await self._call(run)

    async def _probe(self, handles: list[TaskHandle], wait: bool) -> list[TaskStatus]:
        def run() -> list[TaskStatus]:
            L = _native.lib()
            n = len(handles)
            if n == 0:
                return []
            sts = ffi.new("altar_status_t[]", n)
            err = _errors.new_err()
            with c_handles(handles) as hs:
                fn = L.altar_backend_await_completion if wait else L.altar_backend_poll
                _errors.check(fn(self._open(), hs, n, sts, err), err)
                try:
                    return [status_from_c(sts[i]) for i in range(n)]
                finally:
                    for i in range(n):
                        L.altar_status_clear(ffi.addressof(sts, i))
        return await self._call(run)

    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        return await self._probe(list(handles), wait=False)

    async def await_completion(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        if "await_completion" not in self.capabilities:  # refused up front, even for no handles
            err = _errors.new_err()
            rc = _native.lib().altar_backend_require(self._open(), CAPABILITY_BITS["await_completion"], ffi.NULL, err)
            _errors.check(rc, err)
        return await self._probe(list(handles), wait=True)

    async def cancel(self, handle: TaskHandle) -> None:
        def run() -> None:
            err = _errors.new_err()
            with c_handles([handle]) as hs:
                _errors.check(_native.lib().altar_backend_cancel(self._open(), hs, err), err)
        await self._call(run)

    async def recover(self, failures: list[TaskStatus], *, banned: set[str]) -> list[TaskHandle]:
        def run() -> list[TaskHandle]:
            L = _native.lib()
            keep = [ffi.new("char[]", x.encode("utf-8")) for x in sorted(banned)]
            arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
            phs = ffi.new("altar_handle_t **")
            pn = ffi.new("size_t *")
            err = _errors.new_err()
            with c_statuses(list(failures)) as sts:
                _errors.check(L.altar_backend_recover(self._open(), sts, len(failures), arr, len(keep), phs, pn,
                                                      err), err)
            try:
                return [handle_from_c(phs[0][i]) for i in range(pn[0])]
            finally:
                if phs[0] != ffi.NULL:
                    L.altar_handles_free(phs[0], pn[0])
        return await self._call(run)


class ProcessExecutionBackend(NativeExecutionBackend):
    """altar's embedded backend: runs argv directly under data_root, supervised (keys: data_root, slots, ...)."""

    name = "process"


class LocalDockerExecutionBackend(NativeExecutionBackend):
    """Each task a detached container on the local dockerd (registered as "local", alias "docker")."""

    name = "local"


class KubernetesExecutionBackend(NativeExecutionBackend):
    """Each task a batch/v1 Job on a Kubernetes cluster."""

    name = "kubernetes"


class ModalExecutionBackend(NativeExecutionBackend):
    """Each task a Modal sandbox, through the Modal SDK's bridge."""

    name = "modal"


class PluginRegistry(Mapping[str, T]):
    """Adapters by name. altar's own are present from the start; Python packages add
    theirs through an entry-point group (altar.execution_backends, altar.storage, ...)."""

    def __init__(self, group: str, builtin: dict[str, T]) -> None:
        self.group = group
        self._items: dict[str, T] = dict(builtin)
        self._loaded = False

    def _load_entry_points(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        from importlib.metadata import entry_points
        for ep in entry_points(group=self.group):
            if ep.name not in self._items:
                self._items[ep.name] = ep.load()

    def register(self, name: str, item: T) -> None:
        """Add item under name; a name already taken by another item raises ValueError."""
        self._load_entry_points()
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.group}: {name!r} is already registered")
        self._items[name] = item

    def __getitem__(self, name: str) -> T:
        self._load_entry_points()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items))
            raise _errors.NotFound(-4, "ENOTFOUND",
                                   f"{self.group}: {name!r} is not registered (known: {known})") from None

    def __iter__(self) -> Any:
        self._load_entry_points()
        return iter(sorted(self._items))

    def __len__(self) -> int:
        self._load_entry_points()
        return len(self._items)


_backend_registry: PluginRegistry[type[ExecutionBackend]] | None = None


def get_execution_backend_registry() -> PluginRegistry[type[ExecutionBackend]]:
    """The shared altar.execution_backends registry: process, local (docker), kubernetes, modal, and plug-ins."""
    global _backend_registry
    if _backend_registry is None:
        _backend_registry = PluginRegistry("altar.execution_backends", {
            "process": ProcessExecutionBackend,
            "local": LocalDockerExecutionBackend,
            "docker": LocalDockerExecutionBackend,
            "kubernetes": KubernetesExecutionBackend,
            "modal": ModalExecutionBackend,
        })
    return _backend_registry


def native_backend_names() -> list[str]:
    """The names libaltar's backend registry holds (aliases included)."""
    L = _native.lib()
    names = ffi.new("const char *[64]")
    n = L.altar_backend_names(names, 64)
    return [_native.s(names[i]) or "" for i in range(min(n, 64))]
