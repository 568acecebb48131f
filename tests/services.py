"""Real services the tests start and stop themselves (redis-server here; nginx in
``server/test_scale_out.py``), and the rule for when the program is missing (``need``).

Locally, without the program, a test that needs it skips and says how to install it. With
`MRTR_TRIO_REQUIRE_SERVICES=1` (which `.ci/run` sets after installing them) it fails instead,
so CI cannot pass without running those tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import redis

REQUIRED = os.environ.get("MRTR_TRIO_REQUIRE_SERVICES") == "1"


def need(program: str, package: str) -> str:
    """The path of *program*; skip (or, when services are required, fail) without it."""
    path = shutil.which(program)
    if path is None:
        reason = f"{program} is not installed (Debian: apt-get install {package})"
        if REQUIRED:
            pytest.fail(f"{reason}, and MRTR_TRIO_REQUIRE_SERVICES=1", pytrace=False)
        pytest.skip(reason)
    return path


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@attrs.frozen
class RedisServer:
    """A redis-server of our own, listening on a unix socket and on a loopback port."""

    socket: Path
    port: int

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def tcp_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    """Start redis-server in *directory* (no persistence), wait until it answers, and stop it
    on exit."""
    program = need("redis-server", "redis-server")
    server = RedisServer(directory / "redis.sock", free_port())
    log = directory / "redis.log"
    process = subprocess.Popen(
        [
            program,
            "--port", str(server.port),
            "--bind", "127.0.0.1",
            "--unixsocket", str(server.socket),
            "--unixsocketperm", "700",
            "--dir", str(directory),
            "--logfile", str(log),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = server.client()
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not start: {log.read_text() if log.exists() else ''}"
                    ) from None
                time.sleep(0.05)
        yield server
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
