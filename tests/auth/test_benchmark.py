"""`python -m benchmarks.auth` runs and reports a sane auth/plain ratio per era (its figures
are measured by hand on a quiet machine, never judged here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_auth_benchmark_runs() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.auth", "--flows", "10", "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=True,
    )
    lines = [line for line in run.stdout.splitlines() if "auth/plain" in line]
    assert [line.split(":")[0] for line in lines] == ["2025-11-25", "2026-07-28"], run.stdout
    for line in lines:
        ratio = float(line.split("auth/plain ")[1].split()[0])
        assert 0 < ratio < 100, line
