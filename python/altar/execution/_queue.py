"""JobQueue (provisional): hand a job to a running altar fleet and follow it.

altar's own queue is the fleet's jobs topic, on the embedded log ("local")
or on Kafka ("kafka"). Submitting validates every spec and publishes them
as one job (libaltar's JobQueue, the one `altar submit` uses); the job's
group events are read back from the fleet's ready and dead topics.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from . import _errors, _native
from ._backends import PluginRegistry
from ._codec import _raw, _transfer_from
from ._ledger import RocksDBTaskLedger, records_where
from ._model import ContainerTaskSpec, PluginRunIdentity, TaskFailure, TaskHandle, TaskRecord, TaskState, Transfer

ffi = _native.ffi

# How long one blocking read of the log waits before the event loop gets a turn.
READ_SLICE_MS = 500


class JobQueue(ABC):
    """Hands a job to the compute layer and returns a run handle id once it is accepted.

    Provisional: its shape may change in a minor release.
    """

    name: ClassVar[str] = ""

    @abstractmethod
    async def submit(self, kind: str, parameters: Mapping[str, Any]) -> str:
        """Enqueue a job of kind; returns its run handle id when the queue accepted it."""


@dataclass
class GroupEvent:
    """A group that fanned in ("fired"), was given up on ("dead_lettered") or cancelled ("cancelled")."""

    event: str
    event_id: str
    kind: str
    group_key: str
    shards: list[TaskHandle] = field(default_factory=list)
    ts: float = 0.0
    failures: list[tuple[str, TaskFailure]] = field(default_factory=list)
    # fired, of a kind with a next stage (or event_outputs: true): what the members wrote
    outputs: list[Transfer] = field(default_factory=list)

    @property
    def fired(self) -> bool:
        return self.event == "fired"


# Ledger-made outcomes of runs another record of the same task replaced.
REPLACED_REASONS = ("superseded", "released")


@dataclass
class JobStatus:
    """Where a job stands: its ledger records and its group events so far."""

    job_id: str
    records: list[TaskRecord] = field(default_factory=list)
    groups: list[GroupEvent] = field(default_factory=list)

    @property
    def shards(self) -> list[TaskRecord]:
        """One record per shard: runs that a newer run of the same task replaced are left out."""
        return [r for r in self.records
                if not (r.consumed and r.state == TaskState.FAILED and r.failure is not None
                        and r.failure.reason in REPLACED_REASONS)]

    @property
    def by_state(self) -> dict[TaskState, int]:
        out = {s: 0 for s in TaskState}
        for r in self.shards:
            out[r.state] += 1
        return out

    @property
    def outputs(self) -> list[Transfer]:
        """The output transfers of every shard of the job's fired groups."""
        runs = {(r.handle.backend, r.handle.external_id): r for r in self.records}
        out: list[Transfer] = []
        for g in self.groups:
            if not g.fired:
                continue
            for h in g.shards:
                rec = runs.get((h.backend, h.external_id))
                if rec is not None and rec.spec is not None:
                    out.extend(_transfer_from(t) for t in rec.spec.get("outputs") or [])
        return out


def _handle(d: Mapping[str, Any]) -> TaskHandle:
    pid = d.get("plugin_identity")
    return TaskHandle(backend=d["backend"], external_id=d["external_id"], labels=dict(d.get("labels") or {}),
                      plugin_identity=None if pid is None else PluginRunIdentity(pid))


def _failure(d: Mapping[str, Any]) -> TaskFailure:
    return TaskFailure(reason=d["reason"], detail=d.get("detail"), deterministic=bool(d.get("deterministic")),
                       exit_code=d.get("exit_code"))


def group_event_from_json(text: str) -> GroupEvent:
    d = json.loads(text)
    return GroupEvent(event=d["event"], event_id=d["event_id"], kind=d["kind"], group_key=d["group_key"],
                      shards=[_handle(h) for h in d.get("shards") or []], ts=float(d.get("ts") or 0.0),
                      failures=[(f["external_id"], _failure(f["failure"])) for f in d.get("failures") or []],
                      outputs=[_transfer_from(t) for t in d.get("outputs") or []])


def _spec_json(item: ContainerTaskSpec | Mapping[str, Any]) -> str:
    if isinstance(item, ContainerTaskSpec):
        return json.dumps(_raw(item), ensure_ascii=False)
    if isinstance(item, Mapping):
        return json.dumps(dict(item), ensure_ascii=False)
    raise TypeError(f"a spec is a ContainerTaskSpec or a mapping, not {type(item).__name__}")


class FleetJobQueue(JobQueue):
    """The jobs topic of a running fleet, with the fleet's own settings file.

    config names the altar.yaml the fleet's daemons read (None: ./altar.yaml
    when present). overrides set single keys as `altar --set KEY=VALUE` does.
    """

    transport: ClassVar[str | None] = None

    def __init__(self, config: str | os.PathLike[str] | None = None, *,
                 overrides: Mapping[str, str] | None = None) -> None:
        L = _native.lib()
        items = dict(overrides or {})
        if self.transport is not None:
            items.setdefault("transport.name", self.transport)
        keep = [ffi.new("char[]", f"{k}={v}".encode("utf-8")) for k, v in items.items()]
        arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
        err = _errors.new_err()
        path = ffi.NULL if config is None else os.fsencode(config)
        c = L.altar_fleet_client_open(path, arr, len(keep), err)
        if c == ffi.NULL:
            raise _errors.from_code(err.code or -1, err)
        self._c: Any = c
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._c != ffi.NULL:
                _native.lib().altar_fleet_client_close(self._c)
                self._c = ffi.NULL

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    async def __aenter__(self) -> FleetJobQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _client(self) -> Any:
        if self._c == ffi.NULL:
            raise _errors.AltarError(-22, "ESTATE", "job queue is closed")
        return self._c

    async def submit(self, kind: str, parameters: Mapping[str, Any]) -> str:
        """Publish parameters["specs"] (ContainerTaskSpecs or spec mappings) as one job of kind.

        Every spec must be of kind and its kind configured in the fleet's
        groups; a refused spec raises InvalidArgument naming it and its field,
        and then nothing is published. Returns the job id (the run handle id).
        """
        specs = parameters.get("specs")
        if not isinstance(specs, Sequence) or isinstance(specs, (str, bytes)) or not specs:
            raise _errors.InvalidArgument(-1, "EINVAL", "parameters.specs: expected a non-empty list of specs")
        return await self.submit_specs(list(specs), kind=kind)

    async def submit_specs(self, specs: Sequence[ContainerTaskSpec | Mapping[str, Any]],
                           kind: str | None = None) -> str:
        """Publish specs as one job (kind None: specs of any configured kinds); returns the job id."""
        text = "\n".join(_spec_json(s) for s in specs).encode("utf-8")

        def run() -> str:
            out = ffi.new("char[65]")
            err = _errors.new_err()
            with self._lock:
                _errors.check(_native.lib().altar_fleet_client_submit_json(
                    self._client(), _native.b(kind), text, len(text), out, err), err)
            return str(ffi.string(out).decode())
        return await asyncio.to_thread(run)

    async def cancel(self, job_id: str, group_key: str | None = None) -> None:
        """Stop a job (or one group of it): its tasks end failed "cancelled" and its open
        groups settle as cancelled. Sending it again changes nothing."""
        def run() -> None:
            err = _errors.new_err()
            with self._lock:
                _errors.check(_native.lib().altar_fleet_client_cancel(
                    self._client(), _native.b(job_id), _native.b(group_key), err), err)
        await asyncio.to_thread(run)

    async def group_events(self, job_id: str | None, *, timeout_s: float | None = None) -> AsyncIterator[GroupEvent]:
        """The group events of job_id (None: of every job) from the beginning of the log, then as they come.

        The iteration does not end by itself; break out when you have what
        you wait for. With timeout_s, waiting longer than that for the next
        event raises TimeoutError.
        """
        L = _native.lib()
        err = _errors.new_err()
        with self._lock:
            r = L.altar_group_reader_open(self._client(), _native.b(job_id), err)
        if r == ffi.NULL:
            raise _errors.from_code(err.code or -1, err)
        loop = asyncio.get_running_loop()
        try:
            waited = 0.0
            while True:
                def next_one() -> str | None:
                    pjson = ffi.new("char **")
                    e = _errors.new_err()
                    rc = L.altar_group_reader_next(r, READ_SLICE_MS, pjson, e)
                    _errors.check(rc, e)
                    return _native.take_string(pjson[0]) if rc == 1 else None
                t0 = loop.time()
                text = await asyncio.to_thread(next_one)
                if text is None:
                    waited += loop.time() - t0
                    if timeout_s is not None and waited >= timeout_s:
                        raise TimeoutError(f"no group event of job {job_id} within {timeout_s} s")
                    continue
                waited = 0.0
                yield group_event_from_json(text)
        finally:
            L.altar_group_reader_close(r)


    async def status(self, job_id: str) -> JobStatus:
        """The job's records, from the fleet's ledger opened read-only (as `altar status` does), and
        every group event of it the log holds now. NotFound when no ledger is at ledger.path yet."""
        L = _native.lib()
        with self._lock:
            path = _native.s(L.altar_fleet_client_ledger_path(self._client())) or ""

        def read_records() -> list[TaskRecord]:
            led = RocksDBTaskLedger(path, read_only=True)
            try:
                return records_where(led, lambda r: r.handle.labels.get("job_id") == job_id)
            finally:
                led.close()

        def read_groups() -> list[GroupEvent]:
            err = _errors.new_err()
            with self._lock:
                r = L.altar_group_reader_open(self._client(), _native.b(job_id), err)
            if r == ffi.NULL:
                raise _errors.from_code(err.code or -1, err)
            try:
                out: list[GroupEvent] = []
                done = ffi.new("_Bool *")
                while True:
                    pjson = ffi.new("char **")
                    e = _errors.new_err()
                    rc = _errors.check(L.altar_group_reader_next(r, 200, pjson, e), e)
                    if rc == 1:
                        out.append(group_event_from_json(_native.take_string(pjson[0]) or "{}"))
                        continue
                    _errors.check(L.altar_group_reader_caught_up(r, done, e), e)
                    if done[0]:
                        return out
            finally:
                L.altar_group_reader_close(r)

        records = await asyncio.to_thread(read_records)
        groups = await asyncio.to_thread(read_groups)
        return JobStatus(job_id=job_id, records=records, groups=groups)


class LocalJobQueue(FleetJobQueue):
    """The fleet's jobs topic on the embedded log (a directory on this machine)."""

    name = "local"
    transport = "local"


class KafkaJobQueue(FleetJobQueue):
    """The fleet's jobs topic on Kafka (any librdkafka property through the settings file or overrides)."""

    name = "kafka"
    transport = "kafka"


_queue_registry: PluginRegistry[type[JobQueue]] | None = None


def get_job_queue_registry() -> PluginRegistry[type[JobQueue]]:
    """The shared altar.job_queues registry (provisional): "local" and "kafka", and plug-ins."""
    global _queue_registry
    if _queue_registry is None:
        _queue_registry = PluginRegistry("altar.job_queues", {"local": LocalJobQueue, "kafka": KafkaJobQueue})
    return _queue_registry
