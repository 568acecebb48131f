"""Real server processes for fault and scale-out tests: ``mrtr-trio serve`` of
``tests/server/apps.py`` over HTTP, signing with a key the test chooses."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from . import apps

APP_FILE = Path(apps.__file__).resolve()


@attrs.define
class Served:
    """A running server: its process, its endpoint URL and what it wrote to stderr."""

    process: subprocess.Popen[str]
    url: str
    stderr: list[str] = attrs.field(factory=list)

    @property
    def port(self) -> int:
        return int(self.url.split(":")[2].split("/")[0])


@contextmanager
def http_server(key: bytes, port: int = 0, *options: str, **env: str) -> Iterator[Served]:
    """``mrtr-trio serve tests/server/apps.py:app --http 127.0.0.1:PORT [options]`` with *key*;
    killed on exit (if still running)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mrtr_trio._cli",
            "serve",
            f"{APP_FILE}:app",
            "--http",
            f"127.0.0.1:{port}",
            *options,
        ],
        env={**os.environ, "MRTR_TEST_KEY": key.hex(), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        deadline = time.monotonic() + 30
        line = ""
        while "serving" not in line:  # log lines may come first
            ready, _, _ = select.select([process.stderr], [], [], deadline - time.monotonic())
            assert ready, "the server did not start within 30 s"
            line = process.stderr.readline()
            assert line, "the server exited before serving"
        served = Served(process, line.rsplit(" ", 1)[1].strip())
        drain = threading.Thread(target=_drain, args=(process, served.stderr), daemon=True)
        drain.start()
        yield served
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        process.stderr.close()


def _drain(process: subprocess.Popen[str], lines: list[str]) -> None:
    assert process.stderr is not None
    try:
        for line in process.stderr:
            lines.append(line)
    except ValueError:  # closed under us at exit
        pass
