"""What bearer tokens cost the server: the 3-question trip over HTTP, served by the same App
with and without [Auth][mrtr_trio.auth.Auth], side by side.

    python -m benchmarks.auth [--flows N] [--runs R]
    python -m benchmarks.auth serve PORT [JWKS_URL ISSUER]    (one server; used by the above)

Per era (2025-11-25 legacy session, 2026-07-28), two server processes run at once: the
benchmark App unauthenticated, and the same App behind `Auth` with a
[JWTVerifier][mrtr_trio.auth.JWTVerifier]. The benchmark itself plays the authorization
server: it serves a JWKS on loopback and signs one RS256 `at+jwt` access token for the second
server's resource, which the official ``mcp.Client`` sends on every request (so, as with a real
client, a token is verified once and then found in the verifier's cache). Flows interleave
(the order alternates), each server's CPU time is read from ``/proc`` before and after, and the
figure is *auth/plain*: the ratio of the two servers' CPU per leg, at the same journal lengths
(the trip's four legs). Each run starts fresh processes; the ratio is the median over runs.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import jwt
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from . import client
from .e2e import ERAS, LEGS, ROOT, cpu_seconds, flow
from .servers import mrtr_app

__all__ = ["auth_ratio"]

_ISSUER = "https://issuer.benchmark"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Issuer:
    """The benchmark's authorization server: one RSA key, its JWKS served on loopback."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = secrets.token_hex(8)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        self._jwks = json.dumps({"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]})
        self.url = ""

    async def serve(self, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/jwks"
        await trio.serve_tcp(self._answer, port, host="127.0.0.1", task_status=task_status)

    async def _answer(self, stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        body = self._jwks.encode()
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        await stream.send_all(head.encode() + body)
        await stream.aclose()

    def token(self, resource: str) -> str:
        now = int(time.time())
        claims = {
            "iss": _ISSUER,
            "aud": resource,
            "client_id": "benchmark",
            "sub": "benchmark",
            "iat": now,
            "exp": now + 3600,
            "scope": "mcp:tools",
        }
        headers = {"typ": "at+jwt", "kid": self.kid}
        return jwt.encode(claims, self._key, algorithm="RS256", headers=headers)


@asynccontextmanager
async def _server(*arguments: str) -> AsyncIterator[tuple[str, int]]:
    """A ``serve`` process: its URL and pid; stopped by closing its stdin."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "benchmarks.auth", "serve", *arguments],
        stdin=-1,
        stdout=-1,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise RuntimeError("the benchmark server exited before serving")
                line += chunk
        yield line.decode().strip(), process.pid
    finally:
        with trio.move_on_after(10) as cleanup:
            cleanup.shield = True
            await process.stdin.aclose()  # type: ignore[union-attr]
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _run(issuer: _Issuer, era: str, flows: int, warmup: int) -> dict[str, float]:
    """One run of one era: fresh servers; label -> server CPU in ms per leg."""
    port = _free_port()
    async with AsyncExitStack() as stack:
        plain_url, plain_pid = await stack.enter_async_context(_server(str(_free_port())))
        auth_url, auth_pid = await stack.enter_async_context(
            _server(str(port), issuer.url, _ISSUER)
        )
        headers = {"Authorization": f"Bearer {issuer.token(auth_url)}"}
        clients: dict[str, Client] = {}
        for label, url, sent in (("plain", plain_url, {}), ("auth", auth_url, headers)):
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=sent, timeout=30))
            clients[label] = await stack.enter_async_context(
                Client(
                    streamable_http_client(url, http_client=http),
                    mode=ERAS[era],
                    elicitation_callback=client.answer,
                )
            )
        pids = {"plain": plain_pid, "auth": auth_pid}
        labels = list(clients)
        for _ in range(warmup):
            for label in labels:
                await flow(clients[label])
        before = {label: cpu_seconds(pids[label]) for label in labels}
        for i in range(flows):
            for label in labels[i % 2 :] + labels[: i % 2]:
                await flow(clients[label])
        after = {label: cpu_seconds(pids[label]) for label in labels}
    return {label: (after[label] - before[label]) * 1e3 / flows / LEGS for label in labels}


async def auth_ratio(flows: int, runs: int, warmup: int = 10) -> dict[str, Any]:
    """Per era: the CPU per leg (ms) of each server and auth/plain, medians over *runs* with
    the runs' values."""
    issuer = _Issuer()
    results: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(issuer.serve)
        for era in ERAS:
            samples = [await _run(issuer, era, flows, warmup) for _ in range(runs)]
            # A run too short to read any CPU tick has no ratio.
            ratios = [s["auth"] / s["plain"] if s["plain"] else math.nan for s in samples]
            results[era] = {
                "plain_ms_per_leg": statistics.median(s["plain"] for s in samples),
                "auth_ms_per_leg": statistics.median(s["auth"] for s in samples),
                "auth/plain": statistics.median(ratios),
                "runs": ratios,
            }
        nursery.cancel_scope.cancel()
    return results


async def _serve(port: int, jwks_url: str | None, issuer: str | None) -> None:
    app = mrtr_app.build()
    if jwks_url is not None and issuer is not None:
        from mrtr_trio.auth import Auth, JWTVerifier

        resource = f"http://127.0.0.1:{port}/mcp"
        verifier = JWTVerifier(jwks_url, issuer=issuer, audience=resource)
        app.auth = Auth(resource, [issuer], verifier, scopes=["mcp:tools"])
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(app.serve_http, "127.0.0.1", port))
        print(url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        port, *auth = sys.argv[2:]
        trio.run(_serve, int(port), *(auth or (None, None)))
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.auth")
    parser.add_argument("--flows", type=int, default=300, help="timed flows per run and server")
    parser.add_argument("--runs", type=int, default=3, help="runs, each with fresh servers")
    options = parser.parse_args()
    result = trio.run(auth_ratio, options.flows, options.runs)
    print(f"server CPU per leg over HTTP, {options.flows} trips x {options.runs} runs (ms)")
    for era, row in result.items():
        runs = " ".join(f"{r:.3f}" for r in row["runs"])
        print(
            f"{era}: plain {row['plain_ms_per_leg']:.3f}  auth {row['auth_ms_per_leg']:.3f}  "
            f"auth/plain {row['auth/plain']:.3f}   runs: {runs}"
        )


if __name__ == "__main__":
    main()
