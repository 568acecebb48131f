"""Scale-out (issue 9's scale-out suite): two ``mrtr-trio serve --http`` processes that share one
key, behind a real nginx on loopback that sends each request to the next process in turn. The
rounds of every modern flow land on both processes, and every flow completes: any process
holding the key continues any flow.

nginx comes from the Debian packages (``.ci/run`` installs it; without it the test skips
locally and fails in CI, as ``tests/services.py`` says); the test starts it with a temporary
configuration and stops it.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client

from ..services import free_port, need
from .clients import CALLBACKS, fill, text_of
from .processes import http_server
from .test_transports import MODERN_HEADERS, MODERN_META

NGINX_CONF = """
daemon off;
master_process on;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream mrtr {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mrtr;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


@pytest.fixture
def nginx_program() -> str:
    """The nginx binary. Looked up in a sync fixture, outside trio: a skip raised inside the
    trio test would reach pytest-trio in an exception group and lose its reason."""
    return need("nginx", "nginx")


@contextmanager
def nginx(program: str, tmp: Path, upstreams: list[int]) -> Iterator[str]:
    """nginx (*program*) on a free loopback port, proxying round-robin to *upstreams*; its
    URL."""
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, servers=servers, port=port))
    process = subprocess.Popen(
        [program, "-p", str(tmp), "-c", str(conf), "-e", "stderr"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGQUIT)  # graceful stop
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params", {})
    if method == "elicitation/create":
        return {"action": "accept", "content": fill(params["requestedSchema"])}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
    return {"roots": [{"uri": "file:///work", "name": "w"}]}


async def _flow(http: httpx2.AsyncClient, url: str, service: str) -> tuple[str, list[str]]:
    """A whole deploy flow, one raw modern POST per round: its result and the upstream that
    served each round."""
    params: dict[str, Any] = {"name": "deploy", "arguments": {"service": service, "env": "prod"}}
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "deploy"})
    upstreams = []
    for round_ in range(10):
        body = {
            "jsonrpc": "2.0",
            "id": round_,
            "method": "tools/call",
            "params": {**params, "_meta": MODERN_META},
        }
        response = await http.post(url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        upstreams.append(response.headers["x-upstream"])
        result = response.json()["result"]
        if result.get("resultType") != "input_required":
            return result["content"][0]["text"], upstreams
        answers = {key: _answer(request) for key, request in result["inputRequests"].items()}
        params = {**params, "inputResponses": answers, "requestState": result["requestState"]}
    raise AssertionError("the flow did not finish in 10 rounds")


async def test_rounds_of_every_flow_land_on_both_processes_and_every_flow_completes(
    tmp_path: Path, nginx_program: str
) -> None:
    key = secrets.token_bytes(32)
    with (
        http_server(key) as first,
        http_server(key) as second,
        nginx(nginx_program, tmp_path, [first.port, second.port]) as url,
    ):
        async with httpx2.AsyncClient(timeout=30) as http:
            # One flow at a time: nginx alternates, so each flow's rounds cross processes.
            one_by_one = [await _flow(http, url, f"svc{index}") for index in range(6)]
            # Many at once: whatever process each round lands on, every flow completes.
            together: dict[str, tuple[str, list[str]]] = {}
            async with trio.open_nursery() as nursery:
                for index in range(24):

                    async def one(service: str = f"many{index}") -> None:
                        together[service] = await _flow(http, url, service)

                    nursery.start_soon(one)
        for _ in range(2):  # and the official client, through the proxy
            async with Client(url, mode="2026-07-28", **CALLBACKS) as client:
                result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
                assert text_of(result) == "Deployed api to prod (1 roots): Paris"
    both = {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
    for index, (text, upstreams) in enumerate(one_by_one):
        assert text == f"Deployed svc{index} to prod (1 roots): Paris"
        assert len(upstreams) == 3 and set(upstreams) == both, upstreams
    assert len(together) == 24
    for service, (text, _) in together.items():
        assert text == f"Deployed {service} to prod (1 roots): Paris"
    landed = [u for _, upstreams in together.values() for u in upstreams]
    assert set(landed) == both
    for served in (first, second):
        assert not [line for line in served.stderr if "Traceback" in line], served.stderr


def test_without_nginx_the_skip_says_what_to_install() -> None:
    """Run without nginx on PATH (and services not required), the scale-out test skips and
    its reason names the program and the package."""
    env = {"PATH": str(Path(sys.executable).parent), "MRTR_TRIO_REQUIRE_SERVICES": ""}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            "every_flow_completes",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert "1 skipped" in ran.stdout, ran.stdout + ran.stderr
    assert "nginx is not installed (Debian: apt-get install nginx)" in ran.stdout, ran.stdout
