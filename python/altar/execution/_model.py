"""The contract's value types: plain dataclasses and enums, no behaviour of their own.

What a value means (its canonical form, identity, validity) is decided by
libaltar; see _codec.py and the functions exported from altar.execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class GpuPool(StrEnum):
    """Agreed spellings of GPU pool names for ResourceRequest.gpu.

    The field stays an open string: a backend may serve pools of its own.
    None (no GPU) is the CPU pool, which is not NORMAL_GPU.
    """

    NORMAL_GPU = "gpu"
    A100 = "a100"


class TaskState(StrEnum):
    """A task's state, the same four values on every backend."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED)


STATE_CODES: dict[TaskState, int] = {
    TaskState.PENDING: 0,
    TaskState.RUNNING: 1,
    TaskState.SUCCEEDED: 2,
    TaskState.FAILED: 3,
}
STATE_OF_CODE: dict[int, TaskState] = {v: k for k, v in STATE_CODES.items()}


class PluginRunIdentity(dict[str, str]):
    """The exact identity of the model plug-in a task runs (a string map, e.g. plugin, version, abi).

    It travels beside the labels, never flattened into them.
    """


@dataclass
class Transfer:
    """One file moved between storage (uri) and the task's filesystem (logical_path).

    Inputs are made readable before the task starts; outputs are saved after
    it succeeds. digest ("sha256:<64 lowercase hex>") pins an input's bytes;
    locality_key is a co-scheduling hint only.
    """

    uri: str
    logical_path: str
    locality_key: str | None = None
    digest: str | None = None


@dataclass
class ResourceRequest:
    """The compute one task needs: a pool name (None = CPU only), a device count (>= 1), memory in MiB."""

    gpu: str | None = None
    count: int = 1
    memory_mb: int | None = None


@dataclass
class ContainerTaskSpec:
    """What to run, independent of any backend.

    labels carry the task's structured identity (job_id, fold, ...), which
    grouping and readiness read. avoid_hosts is placement advice, not identity:
    it is left out of spec_to_dict and of the task key.
    """

    kind: str
    image: str
    command: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    inputs: list[Transfer] = field(default_factory=list)
    outputs: list[Transfer] = field(default_factory=list)
    resources: ResourceRequest = field(default_factory=ResourceRequest)
    timeout_s: int | None = None
    avoid_hosts: tuple[str, ...] = ()
    plugin_identity: PluginRunIdentity | None = None


@dataclass
class TaskHandle:
    """A backend's reference to a submitted task (external_id, opaque) plus the spec's labels."""

    backend: str
    external_id: str
    labels: dict[str, str] = field(default_factory=dict)
    plugin_identity: PluginRunIdentity | None = None


@dataclass
class TaskFailure:
    """Why a task failed: a stable reason code to branch on, a detail for people.

    deterministic is True only for failures that would repeat on retry.
    """

    reason: str
    detail: str | None = None
    deterministic: bool = False
    exit_code: int | None = None


@dataclass
class TaskStatus:
    """One probe's answer for one handle; failure is set only when state is FAILED."""

    handle: TaskHandle
    state: TaskState
    failure: TaskFailure | None = None


@dataclass
class TaskRecord:
    """One ledger row: the handle, its kind, the latest state and what the ledger keeps beside it."""

    handle: TaskHandle
    kind: str
    state: TaskState = TaskState.PENDING
    restart_count: int = 0
    spec: dict[str, Any] | None = None
    consumed: bool = False
    failure: TaskFailure | None = None
