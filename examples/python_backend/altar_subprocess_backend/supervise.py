"""One task's supervisor: runs its command and writes how it ended.

SubprocessBackend starts one per task, in a session of its own, so the task
outlives the bridge that started it (a worker restart, a crashed bridge).
It enforces the task's wall-clock limit and memory limit and writes
result.json atomically when the command ends; poll reads that file. SIGTERM
(cancel) stops the command and records "cancelled".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

# How often the command is checked; the limits are enforced at this grain.
CHECK_INTERVAL_S = 0.05


def _write_result(task_dir: str, result: dict[str, Any]) -> None:
    tmp = os.path.join(task_dir, "result.json.tmp")
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, os.path.join(task_dir, "result.json"))


def _group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in the command's group."""
    total_kb = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total_kb / 1024


def main(task_dir: str) -> int:
    with open(os.path.join(task_dir, "task.json")) as f:
        task = json.load(f)
    stop = {"cancelled": False}

    def on_term(signum: int, frame: Any) -> None:
        stop["cancelled"] = True

    signal.signal(signal.SIGTERM, on_term)
    try:
        with open(os.path.join(task_dir, "stdout"), "wb") as out, open(os.path.join(task_dir, "stderr"), "wb") as err:
            child = subprocess.Popen(task["command"], cwd=task["cwd"], stdout=out, stderr=err,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        _write_result(task_dir, {"exit_code": 127, "detail": f"cannot start {task['command'][0]!r}: {exc}"})
        return 0
    with open(os.path.join(task_dir, "child"), "w") as f:
        f.write(str(child.pid))  # for an operator (or a test) who needs the command itself
    deadline = time.monotonic() + task["timeout_s"] if task.get("timeout_s") else None
    memory_mb = task.get("memory_mb")
    reason = None
    while child.poll() is None:
        if stop["cancelled"]:
            reason = "cancelled"
        elif deadline is not None and time.monotonic() >= deadline:
            reason = "timeout"
        elif memory_mb and _group_rss_mb(child.pid) > memory_mb:
            reason = "oom_killed"
        if reason:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
            break
        time.sleep(CHECK_INTERVAL_S)
    _write_result(task_dir, {"reason": reason} if reason else {"exit_code": child.returncode})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
