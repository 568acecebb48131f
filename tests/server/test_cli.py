"""The command line: `mrtr-trio demo` end to end, `serve` and its errors, `app.run()`."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mrtr_trio import _cli
from mrtr_trio._cli import main
from mrtr_trio._keys import generate_key, parse_keys

KEY = generate_key()


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
    assert "== deploy ==\n  yield style" in out and "== wipe ==\n  return style" in out


def test_serve_needs_an_app_and_a_host_and_port(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def accepted(level: str) -> None:  # and keeps this process's logging as pytest set it
        raise AssertionError("the command line was accepted")

    monkeypatch.setattr(_cli, "configure_logging", accepted)
    with pytest.raises(SystemExit):
        main(["serve"])
    assert "the following arguments are required: FILE[:APP]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "x.py:app", "--http", "nonsense"])
    assert "expected HOST:PORT, got 'nonsense'" in capsys.readouterr().err


def test_serve_stdio_stops_promptly_on_interrupt() -> None:
    app_file = Path(__file__).with_name("apps.py")
    server = subprocess.Popen(
        [sys.executable, "-m", "mrtr_trio._cli", "serve", f"{app_file}:app"],
        stdin=subprocess.PIPE,  # open and silent: the reader must not hold up shutdown
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until_serving(server, stdio=True)
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


def wait_until_serving(
    server: subprocess.Popen[bytes], *, stdio: bool, timeout: float = 30
) -> None:
    """Return once *server* serves, however long a loaded machine takes to start it: over
    stdio, it has answered `initialize`; over HTTP, it has a listening TCP socket."""
    deadline = time.monotonic() + timeout
    if stdio:
        assert server.stdin is not None and server.stdout is not None
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
        server.stdin.write(json.dumps(initialize).encode() + b"\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], timeout)
        assert ready, "no answer to initialize"
        assert b'"id":0' in server.stdout.readline().replace(b" ", b"")
        return
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        if _listening(server.pid):
            return
        time.sleep(0.05)
    raise AssertionError("the server did not listen in time")


def _listening(pid: int) -> bool:
    """Whether process *pid* holds a TCP socket in the LISTEN state (Linux /proc)."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            sockets.add(target[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in sockets:  # 0A: LISTEN
                return True
    return False


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mrtr_trio._cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


SERVES_ON_IMPORT = """\
from mrtr_trio.mcp import App

app = App("eager")
app.run("http", port=8000)
"""


@pytest.mark.parametrize("transport", [[], ["--http", "127.0.0.1:0"]])
def test_serve_refuses_a_file_that_starts_a_server_when_imported(
    tmp_path: Path, transport: list[str]
) -> None:
    (tmp_path / "eager.py").write_text(SERVES_ON_IMPORT)
    run = run_cli("serve", "eager.py", *transport, cwd=tmp_path, env={"MRTR_TRIO_KEYS": KEY})
    assert run.returncode == 1
    assert run.stderr == (
        'mrtr-trio: importing eager.py started a server (line 4: app.run("http", port=8000)). '
        "`mrtr-trio serve` serves the app itself: put that call under "
        '`if __name__ == "__main__":`.\n'
    )


def test_serve_refuses_serve_stdio_started_with_trio_run_on_import(tmp_path: Path) -> None:
    (tmp_path / "eager.py").write_text(
        "import trio\nfrom mrtr_trio.mcp import App\n\napp = App('eager')\ntrio.run(app.serve_stdio)\n"
    )
    run = run_cli("serve", "eager.py", cwd=tmp_path, env={"MRTR_TRIO_KEYS": KEY})
    assert run.returncode == 1
    assert "importing eager.py started a server (line 5: trio.run(app.serve_stdio))" in run.stderr


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (
            "from mrtr_trio.mcp import App\nserver = App('s')\n",
            "f.py",
            "mrtr-trio: f.py has no attribute 'app' (it has f.py:server)\n",
        ),
        ("x = 1\n", "f.py", "mrtr-trio: f.py has no attribute 'app'\n"),
        (
            "app = None\n",
            "f.py:app",
            "mrtr-trio: f.py:app is not a mrtr_trio.mcp.App (its type is NoneType)\n",
        ),
        ("", "missing.py", "mrtr-trio: no such file: missing.py\n"),
    ],
)
def test_serve_says_what_is_wrong_with_the_target(
    tmp_path: Path, source: str, target: str, message: str
) -> None:
    (tmp_path / "f.py").write_text(source)
    run = run_cli("serve", target, cwd=tmp_path, env={"MRTR_TRIO_KEYS": KEY})
    assert (run.returncode, run.stderr) == (1, message)


def test_serve_refuses_malformed_keys_naming_the_position(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("from mrtr_trio.mcp import App\napp = App('s')\n")
    run = run_cli("serve", "f.py", cwd=tmp_path, env={"MRTR_TRIO_KEYS": f"{KEY},c2VjcmV0"})
    assert run.returncode == 1
    assert run.stderr == (
        "mrtr-trio: MRTR_TRIO_KEYS: key 2 of 2 is 6 bytes; keys must be at least 32 bytes "
        "(make one with `mrtr-trio keygen`)\n"
    )


def test_help_texts_read_as_plain_text() -> None:
    wide = {"COLUMNS": "200"}  # one help line per option
    top = run_cli("--help", cwd=Path.cwd(), env=wide).stdout
    serve = run_cli("serve", "--help", cwd=Path.cwd(), env=wide).stdout
    assert "``" not in top + serve
    assert "keygen" in top and "demo" in top and "serve" in top
    assert "(default: app)" in serve
    assert "http://HOST:PORT/mcp" in serve
    assert "--log-level" in serve and "MRTR_TRIO_KEYS" in serve


RUNS_ITSELF = """\
from mrtr_trio.mcp import App

app = App("self-served")

if __name__ == "__main__":
    app.run({arguments})
"""


@pytest.mark.parametrize("arguments", ["", '"http", port=0'])
def test_ctrl_c_on_app_run_exits_quietly(tmp_path: Path, arguments: str) -> None:
    script = tmp_path / "server.py"
    script.write_text(RUNS_ITSELF.format(arguments=arguments))
    server = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MRTR_TRIO_KEYS": KEY},
    )
    try:
        wait_until_serving(server, stdio=not arguments)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 0
        assert server.stderr is not None and server.stderr.read() == b""
    finally:
        server.kill()
        server.wait()
        for stream in (server.stdin, server.stdout, server.stderr):
            if stream is not None:
                stream.close()


def test_python_dash_m_mrtr_trio_is_the_command() -> None:
    """`python -m mrtr_trio` runs the same command line as the `mrtr-trio` script."""
    keygen = subprocess.run(
        [sys.executable, "-m", "mrtr_trio", "keygen"], capture_output=True, text=True, timeout=60
    )
    assert keygen.returncode == 0, keygen.stderr
    assert len(parse_keys(keygen.stdout.strip())) == 1
    usage = subprocess.run(
        [sys.executable, "-m", "mrtr_trio", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "usage: mrtr-trio" in usage.stdout and "serve" in usage.stdout


def test_serve_on_stdio_from_a_terminal_says_what_it_is_doing() -> None:
    """With a terminal as stdin, `serve` says on stderr that it waits for a client's JSON-RPC
    and how to serve HTTP instead; with a pipe (a client), it says nothing of the kind."""
    import pty

    app_file = Path(__file__).with_name("apps.py")
    terminal, its_end = pty.openpty()
    said = b""
    server = subprocess.Popen(
        [sys.executable, "-m", "mrtr_trio", "serve", f"{app_file}:app"],
        stdin=its_end,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert server.stderr is not None
        deadline = time.monotonic() + 30
        while b"Ctrl-C stops it." not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([server.stderr], [], [], 1)
            if ready:
                said += os.read(server.stderr.fileno(), 4096)
        text = said.decode()
        assert "mrtr-trio: serving 'interop' over stdio" in text, text
        assert "--http 127.0.0.1:8000" in text
        time.sleep(0.5)
        assert server.poll() is None  # still serving, waiting for a client
    finally:
        server.kill()
        server.wait()
        os.close(terminal)
        os.close(its_end)
        for stream in (server.stdout, server.stderr):
            assert stream is not None
            stream.close()
    piped = subprocess.run(
        [sys.executable, "-m", "mrtr_trio", "serve", f"{app_file}:app"],
        stdin=subprocess.DEVNULL,  # not a terminal: ends at once (end of input)
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "over stdio" not in piped.stderr, piped.stderr
