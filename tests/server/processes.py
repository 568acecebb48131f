"""Real server processes for the tests: ``mrtr-trio serve`` over HTTP (of
``tests/server/apps.py`` signing with a key the test chooses, or of any other file), and over
stdio with the raw line protocol to talk to it."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from . import apps
from .raw import INITIALIZE

APP_FILE = Path(apps.__file__).resolve()
#: How the command line's line with the URL begins.
_BANNER = "mrtr-trio: serving "


def port_of(url: str) -> int:
    """The port of a loopback endpoint URL (``http://127.0.0.1:PORT/mcp``)."""
    return int(url.split(":")[2].split("/")[0])


@attrs.define
class Served:
    """A running server: its process, its endpoint URL and what it wrote to stderr."""

    process: subprocess.Popen[str]
    url: str
    stderr: list[str] = attrs.field(factory=list)

    @property
    def port(self) -> int:
        return port_of(self.url)


@contextlib.contextmanager
def http_server(
    key: bytes | None = None,
    port: int = 0,
    *options: str,
    target: str = f"{APP_FILE}:app",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    open_files: int | None = None,
    **variables: str,
) -> Iterator[Served]:
    """``mrtr-trio serve TARGET --http 127.0.0.1:PORT [options]`` (*target*: apps.py's app by
    default) in *cwd*, killed on exit (if still running). The environment is *env* (default:
    this process's) plus *variables*, and ``MRTR_TEST_KEY`` (what apps.py signs with) when a
    *key* is given; *open_files* lowers its limit of open files (``ulimit -n``). Its stderr is read all along (a full pipe would stall the server) into
    ``Served.stderr``; the URL comes from its ``mrtr-trio: serving ... on URL`` line."""
    environment = dict(os.environ if env is None else env)
    if key is not None:
        environment["MRTR_TEST_KEY"] = key.hex()
    process = subprocess.Popen(
        [sys.executable, "-m", "mrtr_trio._cli", "serve", target, "--http", f"127.0.0.1:{port}",
         *options],
        cwd=cwd,
        env={**environment, **variables},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=None if open_files is None else partial(_limit_open_files, open_files),
    )  # fmt: skip
    lines: list[str] = []
    started = threading.Event()  # set on the "serving" line, or when stderr ends
    drain = threading.Thread(target=_drain, args=(process, lines, started), daemon=True)
    drain.start()
    try:
        assert started.wait(30), f"the server did not start within 30 s: {''.join(lines)}"
        banner = next((line for line in lines if line.startswith(_BANNER)), None)
        assert banner is not None, f"the server exited before serving: {''.join(lines)}"
        yield Served(process, banner.rsplit(" ", 1)[1].strip(), lines)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        drain.join(timeout=5)  # it ends at the pipe's end
        assert process.stderr is not None
        process.stderr.close()


def _limit_open_files(limit: int) -> None:
    import resource  # POSIX only, like these tests' servers

    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def _drain(process: subprocess.Popen[str], lines: list[str], started: threading.Event) -> None:
    assert process.stderr is not None
    try:
        for line in process.stderr:
            lines.append(line)
            if line.startswith(_BANNER):
                started.set()
    except ValueError:  # closed under us at exit
        pass
    finally:
        started.set()


# --------------------------------------------------------------------------------- stdio


def stdio_server() -> subprocess.Popen[bytes]:
    """``mrtr-trio serve tests/server/apps.py:app`` on stdio, every stream a pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "mrtr_trio._cli", "serve", f"{APP_FILE}:app"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(server: subprocess.Popen[bytes], message: Any) -> None:
    """Write one message (JSON, or raw bytes) as a line to the server's stdin."""
    assert server.stdin is not None
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    server.stdin.write(data + b"\n")
    server.stdin.flush()


def receive(server: subprocess.Popen[bytes], timeout: float = 15) -> Any:
    """The next message from the server, failing (not hanging) when none comes in time."""
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    assert ready, f"no message from the server within {timeout} s"
    return json.loads(server.stdout.readline())


def initialize(server: subprocess.Popen[bytes]) -> None:
    """Open a legacy session on the stdio server."""
    send(server, INITIALIZE)
    assert receive(server)["id"] == 1
    send(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})


def close(server: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Close stdin and stdout (the client is gone); the exit code and everything on stderr."""
    for stream in (server.stdin, server.stdout):
        if stream is not None and not stream.closed:
            with contextlib.suppress(BrokenPipeError):
                stream.close()
    try:
        code = server.wait(timeout=20)
    finally:
        server.kill()
    assert server.stderr is not None
    stderr = server.stderr.read().decode()
    server.stderr.close()
    return code, stderr
