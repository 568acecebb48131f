"""`mrtr-trio serve` checks the runtime's step store once at start: a line in the log when it
answers, a warning when it is a Redis that keeps nothing across a restart, and a refusal to
start when it cannot be reached (unless `--no-store-check`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mrtr_trio import MemoryStepStore
from mrtr_trio._cli import check_step_store
from mrtr_trio.redis import RedisStepStore

from ..services import RedisServer, free_port
from .test_exactly_once import SERVING

APP = textwrap.dedent(
    """
    import os
    from mrtr_trio import Runtime
    from mrtr_trio.mcp import App
    from mrtr_trio.redis import RedisStepStore

    store = RedisStepStore(os.environ["STORE_URL"], timeout=1)
    app = App("checked", runtime=Runtime([b"k" * 32], step_store=store))
    """
)


def serve(tmp_path: Path, url: str, *flags: str) -> subprocess.Popen[str]:
    app = tmp_path / "server.py"
    app.write_text(APP)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mrtr_trio._cli",
            "serve",
            str(app),
            "--http",
            "127.0.0.1:0",
            *flags,
        ],
        env={**os.environ, "STORE_URL": url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_refuses_to_start_when_the_step_store_cannot_be_reached(tmp_path: Path) -> None:
    server = serve(tmp_path, f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    _, err = server.communicate(timeout=60)
    assert server.returncode == 1
    assert "cannot be reached" in err and "Connection" in err
    assert "--no-store-check" in err and "Traceback" not in err


def test_serve_starts_anyway_with_no_store_check(tmp_path: Path) -> None:
    server = serve(tmp_path, f"redis://127.0.0.1:{free_port()}/0", "--no-store-check")
    assert server.stderr is not None
    try:
        lines = []
        for line in server.stderr:
            lines.append(line)
            if SERVING.search(line):
                break
        text = "".join(lines)
        assert "serving anyway (--no-store-check)" in text
        assert SERVING.search(text)
    finally:
        server.kill()
        server.communicate()


async def test_a_reachable_store_is_logged_and_a_redis_without_persistence_warned_of(
    redis_db: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The tests' redis-server runs with neither appendonly nor snapshots.
    store = RedisStepStore(redis_db.unix_url)
    with caplog.at_level(logging.INFO, logger="mrtr_trio"):
        await check_step_store(store)
    messages = [r.getMessage() for r in caplog.records]
    assert any("answers" in m for m in messages)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "no persistence" in warning and "may run again" in warning
    store.close()


async def test_a_redis_with_an_append_only_file_is_not_warned_of(
    redis_db: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStepStore(redis_db.unix_url)
    with redis_db.client() as client:
        client.config_set("appendonly", "yes")
        try:
            with caplog.at_level(logging.INFO, logger="mrtr_trio"):
                await check_step_store(store)
        finally:
            client.config_set("appendonly", "no")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    store.close()


async def test_a_memory_store_answers(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStepStore()
    with caplog.at_level(logging.INFO, logger="mrtr_trio"):
        await check_step_store(store)
    assert any("answers" in r.getMessage() for r in caplog.records)
