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


def test_serve_stdio_stops_promptly_on_interrupt() -> None:
    import signal
    import time
    from pathlib import Path

    app_file = Path(__file__).with_name("apps.py")
    server = subprocess.Popen(
        [sys.executable, "-m", "mrtr_trio._cli", "serve", f"{app_file}:app"],
        stdin=subprocess.PIPE,  # open and silent: the reader must not hold up shutdown
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(1.5)  # let it import and start reading
        started = time.monotonic()
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert b"Traceback" not in server.stderr.read()
    finally:
        server.kill()
        server.wait()
        for stream in (server.stdin, server.stdout, server.stderr):
            stream.close()
