"""SubprocessBackend: an altar ExecutionBackend in pure Python, each task a local process.

A starting point for your own backend. Everything it knows lives in files
under data_root, so a new instance (after the bridge or the worker restarted)
finds the tasks an earlier one started:

    <data_root>/<logical path>        staged inputs and the outputs tasks write
    <data_root>/tasks/<id>/task.json  what to run
    <data_root>/tasks/<id>/pid        its supervisor (supervise.py)
    <data_root>/tasks/<id>/result.json  how it ended, written by the supervisor

Options (keyword arguments, `options:` in altar.yaml): data_root (default
./var/pysub), slots (free slots reported for the CPU pool; default none: the
backend reports no capacity and is never gated).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from typing import Any
from urllib.parse import unquote, urlparse

from altar.execution import (
    Capacity,
    ContainerTaskSpec,
    ExecutionBackend,
    PathResolver,
    TaskFailure,
    TaskHandle,
    TaskState,
    TaskStatus,
    TransferIntegrityError,
    Transfer,
    verify_transfer_digest,
)

SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervise.py")
# How often await_completion looks again.
AWAIT_INTERVAL_S = 0.2
# How much of a failed task's stderr its failure's detail carries.
DETAIL_BYTES = 2000


def _local_path(uri: str) -> str:
    """The file a file:// URI (or a plain path) names; other schemes are not this example's."""
    u = urlparse(uri)
    if u.scheme in ("", "file"):
        return unquote(u.path) if u.scheme else uri
    raise ValueError(f"{uri}: this backend reads and writes local files only (file:// or a path)")


def _tail(path: str, n: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class SubprocessBackend(ExecutionBackend):
    name = "subprocess"
    # Inputs are copied into data_root and checked there, before any submit.
    input_digest_verification = "staging"

    def __init__(self, data_root: str = "./var/pysub", slots: int | None = None) -> None:
        self.data_root = os.path.abspath(data_root)
        self.slots = slots
        os.makedirs(os.path.join(self.data_root, "tasks"), exist_ok=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def path_resolver(self) -> PathResolver:
        return PathResolver(self.data_root)

    def _task_dir(self, external_id: str) -> str | None:
        # An id is ours only if it is a plain name: never a path into elsewhere.
        if not external_id or "/" in external_id or external_id in (".", ".."):
            return None
        return os.path.join(self.data_root, "tasks", external_id)

    # ---- files in and out ----

    async def stage_inputs(self, transfers: list[Transfer]) -> None:
        resolver = self.path_resolver()
        for i, t in enumerate(transfers):
            src = _local_path(t.uri)
            dest = resolver.resolve(t.logical_path)
            if os.path.isdir(dest):
                raise TransferIntegrityError(-8, "EINTEGRITY",
                                             f"inputs[{i}] ({t.logical_path}): {dest} is a directory, not a file")
            same = os.path.exists(dest) and os.path.exists(src) and os.path.samefile(src, dest)
            if not same:
                if os.path.isdir(src):
                    raise TransferIntegrityError(-8, "EINTEGRITY",
                                                 f"inputs[{i}] ({t.logical_path}): {src} is a directory, not a file")
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                tmp = f"{dest}.staging-{uuid.uuid4().hex}"
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
            if t.digest is None:
                continue
            try:
                # Our own copy gets a verification record; the caller's file never does.
                verify_transfer_digest(t, dest, record=not same)
            except TransferIntegrityError as exc:
                if not same:
                    os.unlink(dest)  # no later task may read bytes that did not match
                raise TransferIntegrityError(exc.code, exc.name, f"inputs[{i}] ({t.logical_path}): {exc.message}") from None

    async def collect_outputs(self, transfers: list[Transfer]) -> None:
        resolver = self.path_resolver()
        for t in transfers:
            src = resolver.resolve(t.logical_path)
            dest = _local_path(t.uri)
            if os.path.exists(dest) and os.path.samefile(src, dest):
                continue
            os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
            shutil.copyfile(src, dest)

    # ---- tasks ----

    async def submit(self, spec: ContainerTaskSpec) -> TaskHandle:
        # A fresh id per submission: a resubmitted spec simply runs again.
        external_id = f"{spec.kind}-{uuid.uuid4().hex[:16]}"
        task_dir = self._task_dir(external_id)
        assert task_dir is not None
        os.makedirs(task_dir)
        task = {"command": list(spec.command), "cwd": task_dir, "timeout_s": spec.timeout_s,
                "memory_mb": spec.resources.memory_mb}
        with open(os.path.join(task_dir, "task.json"), "w") as f:
            json.dump(task, f)
        # Run by path, not with -m: importing this package (and altar) would
        # cost every task a second interpreter start's worth of imports.
        proc = subprocess.Popen([sys.executable, "-I", SUPERVISOR, task_dir],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(task_dir, "supervisor.log"), "wb"),
                                start_new_session=True)
        with open(os.path.join(task_dir, "pid"), "w") as f:
            f.write(str(proc.pid))
        self._children[external_id] = proc
        return TaskHandle(self.name, external_id, dict(spec.labels), spec.plugin_identity)

    def _supervisor_alive(self, task_dir: str) -> int | None:
        """The supervisor's pid while it runs (checked by its command line, so a reused pid is not taken)."""
        try:
            with open(os.path.join(task_dir, "pid")) as f:
                pid = int(f.read().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if task_dir.encode() in f.read():
                    return pid
        except (OSError, ValueError):
            pass
        return None

    def _status(self, h: TaskHandle) -> TaskStatus:
        task_dir = self._task_dir(h.external_id)
        if task_dir is None or not os.path.isdir(task_dir):
            return TaskStatus(h, TaskState.FAILED, TaskFailure("container_missing", f"no task {h.external_id}"))
        # Alive first, result second: a supervisor writes its result before it
        # exits, so one found gone has left a result unless it was killed. A
        # child of this instance is asked directly (it may not have exec'd yet).
        proc = self._children.get(h.external_id)
        if proc is not None:
            alive = proc.poll() is None
            if not alive:
                del self._children[h.external_id]  # reaped
        else:
            alive = self._supervisor_alive(task_dir) is not None
        try:
            with open(os.path.join(task_dir, "result.json")) as f:
                result: dict[str, Any] = json.load(f)
        except FileNotFoundError:
            if alive:
                return TaskStatus(h, TaskState.RUNNING)
            # Its supervisor ended without a word (killed): nobody can say how it went.
            return TaskStatus(h, TaskState.FAILED,
                              TaskFailure("container_missing", f"task {h.external_id}: its supervisor is gone"))
        # The evidence: the end of stderr, or of stdout when stderr is empty.
        stderr = _tail(os.path.join(task_dir, "stderr"), DETAIL_BYTES) or _tail(os.path.join(task_dir, "stdout"),
                                                                                 DETAIL_BYTES)
        reason = result.get("reason")
        if reason:
            return TaskStatus(h, TaskState.FAILED, TaskFailure(reason, stderr or None, deterministic=False))
        code = int(result.get("exit_code", 0))
        if code < 0:
            code = 128 - code  # killed by a signal, as a shell reports it
        if code == 0:
            return TaskStatus(h, TaskState.SUCCEEDED)
        detail = result.get("detail") or stderr or None
        return TaskStatus(h, TaskState.FAILED, TaskFailure(f"exit_{code}", detail, deterministic=True, exit_code=code))

    async def poll(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        return [self._status(h) for h in handles]

    async def await_completion(self, handles: list[TaskHandle]) -> list[TaskStatus]:
        # Optional: a driver that wants to block until its tasks end calls it
        # (the fleet's workers poll on their own clock and never do). Polling
        # here is as good as the platform offers; a scheduler with a wait
        # call would use that instead.
        while True:
            statuses = [self._status(h) for h in handles]
            if all(s.state.terminal for s in statuses):
                return statuses
            await asyncio.sleep(AWAIT_INTERVAL_S)

    async def cancel(self, handle: TaskHandle) -> None:
        task_dir = self._task_dir(handle.external_id)
        # A child of this instance is signalled directly: just after submit it
        # may not have exec'd yet, and its command line would not say whose it is.
        proc = self._children.get(handle.external_id)
        if proc is not None:
            pid = proc.pid if proc.poll() is None else None
        else:
            pid = self._supervisor_alive(task_dir) if task_dir and os.path.isdir(task_dir) else None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)  # the supervisor stops the command and records "cancelled"
            except ProcessLookupError:
                pass

    async def capacity(self) -> Capacity:
        if self.slots is None:
            return Capacity()
        running = sum(1 for p in self._children.values() if p.poll() is None)
        return Capacity({"normal": max(0, self.slots - running)})
