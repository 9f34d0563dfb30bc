"""Shared fixtures. A skipped test fails the run: a missing dependency is a failure, never a pass."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

_skipped: list[str] = []


def source_dir() -> Path:
    d = os.environ.get("ALTAR_SOURCE_DIR")
    if not d:
        raise RuntimeError("ALTAR_SOURCE_DIR is not set (run through ctest or scripts/python-test.sh)")
    return Path(d)


@pytest.fixture
def vectors() -> Path:
    return source_dir() / "schemas" / "vectors"


@pytest.fixture
def altar_bin() -> str:
    b = os.environ.get("ALTAR_BIN")
    if not b or not os.access(b, os.X_OK):
        raise RuntimeError("ALTAR_BIN does not name the altar binary")
    return b


def pytest_runtest_logreport(report: Any) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _skipped and session.exitstatus == 0:
        print("\nskipped tests count as failures here: " + ", ".join(_skipped))
        session.exitstatus = 1
