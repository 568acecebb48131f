"""The App the auth tests serve behind tokens, and raw 2026-07-28 / 2025-11-25 requests with a
bearer token (so every status, header and key on the wire is checked)."""

from __future__ import annotations

import itertools
import json
import re
import secrets
from functools import partial
from typing import Any

import httpx2
import trio

from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.auth import Auth, JWTVerifier
from mrtr_trio.mcp import TASKS_EXTENSION, App, background

from ..services import free_port
from .authserver import AuthServer

KEY = secrets.token_bytes(32)
CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
YES = {"action": "accept", "content": {"confirm": True}}
INVALID_STATE = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}
CAPABILITIES = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}

#: Handler names, each appended when its handler starts (a refused request never adds one).
CALLS: list[str] = []
RELEASE: dict[str, trio.Event] = {}


async def confirm(ctx: Context, item: str):
    CALLS.append("confirm")
    ok = yield elicit(f"Take {item}?", CONFIRM)
    yield done(f"{item}: {ok.content['confirm'] if ok.accepted else 'declined'}")


async def admin_op(ctx: Context, item: str):
    CALLS.append("admin_op")
    ok = yield elicit(f"Really administer {item}?", CONFIRM)
    yield done(f"administered {item}: {ok.content['confirm']}")


async def read_op(ctx: Context) -> str:
    CALLS.append("read_op")
    return "read"


async def long_job(ctx: Context, label: str):
    CALLS.append("long_job")
    yield background()
    ok = yield elicit(f"Finish {label}?", CONFIRM)
    yield done(f"{label}: {ok.content['confirm']}")


async def admin_job(ctx: Context, label: str):
    CALLS.append("admin_job")
    yield background()
    ok = yield elicit(f"Administer {label}?", CONFIRM)
    yield done(f"administered {label}: {ok.content['confirm']}")


async def secret_prompt(ctx: Context) -> str:
    CALLS.append("secret_prompt")
    return "the secret prompt"


async def secret_resource(ctx: Context) -> str:
    CALLS.append("secret_resource")
    return "the secret resource"


def build(
    resource: str,
    idp: AuthServer,
    *,
    name: str = "secure",
    scopes: tuple[str, ...] = ("mcp:tools",),
    **auth: Any,
) -> App:
    """The test App behind *idp*'s tokens for *resource*: `confirm` (every call's scopes),
    `admin_op` (also `mcp:admin`), `read_op` (also `mcp:read`), the task tools `long_job`
    and `admin_job` (also `mcp:admin`),
    the same flow as the prompt `confirm` (another method) and the tool `confirm_too`
    (another target), and a prompt and a resource that need `mcp:admin`."""
    verifier = auth.pop("verifier", None) or JWTVerifier(
        idp.jwks_url, issuer=idp.issuer, audience=resource, cooldown=0
    )
    app = App(
        name,
        runtime=Runtime([KEY]),
        task_poll_interval=0.05,
        auth=Auth(resource, [idp.issuer], verifier, scopes=scopes, **auth),
    )
    app.tool(name="confirm")(confirm)
    app.tool(name="confirm_too")(confirm)
    app.prompt(name="confirm")(confirm)
    app.tool(scopes=["mcp:admin"])(admin_op)
    app.tool(scopes=["mcp:read"])(read_op)
    app.tool(task="optional")(long_job)
    app.tool(task="optional", scopes=["mcp:admin"])(admin_job)
    app.prompt(scopes=["mcp:admin"])(secret_prompt)
    app.resource("test://secret", scopes=["mcp:admin"])(secret_resource)
    return app


def new_resource() -> str:
    """The URL an App will be served at: a free loopback port chosen now, because tokens name
    the resource before the App serves it."""
    return f"http://127.0.0.1:{free_port()}/mcp"


async def serve(nursery: trio.Nursery, app: App, **options: Any) -> str:
    """Serve *app* at its resource URL; the URL."""
    assert app.auth is not None
    port = int(app.auth.resource.rsplit(":", 1)[1].split("/")[0])
    url: str = await nursery.start(partial(app.serve_http, "127.0.0.1", port, **options))
    assert url == app.auth.resource
    return url


_ids = itertools.count(1)


async def modern(
    url: str,
    method: str,
    params: dict[str, Any],
    token: str | None,
    *,
    name: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    """One 2026-07-28 request with *token* as its bearer token; `Mcp-Name` defaults to the
    name, URI or task id in *params*."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    name = name if name is not None else params.get("name", params.get("uri", params.get("taskId")))
    if name is not None:
        sent["Mcp-Name"] = name
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
    }
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, content=json.dumps(body), headers=sent)


async def call(
    url: str,
    tool: str,
    token: str | None,
    arguments: dict[str, Any] | None = None,
    *,
    state: str | None = None,
    answer: Any = None,
) -> httpx2.Response:
    """A modern `tools/call`, continuing a flow when *state* is given (answering `input-0`)."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    if state is not None:
        params["requestState"] = state
        params["inputResponses"] = {"input-0": answer}
    return await modern(url, "tools/call", params, token)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a response's `WWW-Authenticate: Bearer ...` challenge."""
    header = response.headers["www-authenticate"]
    scheme, _, rest = header.partition(" ")
    assert scheme == "Bearer", header
    params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    assert ", ".join(f'{k}="{v}"' for k, v in params.items()) == rest, header
    return params


class Legacy:
    """A raw 2025-11-25 session over HTTP: `initialize`, then requests on its session id."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.session: str | None = None

    def headers(self, token: str | None = None) -> dict[str, str]:
        sent = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        token = token if token is not None else self.token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if self.session is not None:
            sent["Mcp-Session-Id"] = self.session
            sent["MCP-Protocol-Version"] = "2025-11-25"
        return sent

    async def post(self, body: dict[str, Any], token: str | None = None) -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.post(self.url, content=json.dumps(body), headers=self.headers(token))

    async def open(self) -> httpx2.Response:
        response = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        if response.status_code == 200:
            self.session = response.headers["mcp-session-id"]
            await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response

    async def request(
        self, method: str, params: dict[str, Any], token: str | None = None
    ) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        return await self.post(body, token)


def sse_json(response: httpx2.Response) -> Any:
    """The JSON-RPC message of a response, whether JSON or one SSE `data:` line."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    raise AssertionError(f"no message in {response.text!r}")
