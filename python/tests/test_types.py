"""The package's type hints hold: mypy --strict over its sources finds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import source_dir


def test_the_package_is_clean_under_mypy_strict(tmp_path: Path) -> None:
    pkg = source_dir() / "python" / "altar"
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(pkg)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout
