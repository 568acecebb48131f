"""The command line: ``mrtr-trio demo`` end to end, and ``serve`` errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mrtr_trio._cli import main


def test_demo_drives_both_eras_over_http() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mrtr_trio._cli", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = run.stdout
    assert "legacy session (2025-11-25)" in out and "modern requests (2026-07-28)" in out
    assert "round 1: input_required, requestState" in out
    assert out.count("same result in both eras: True") == 2
    assert "Deployed api to prod (1 roots)" in out


def test_serve_needs_an_app(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve"])
    assert "target" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "x.py:app", "--http", "nonsense"])
