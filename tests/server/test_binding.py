"""A requestState is bound to who asked and to which server (issue 9, fix 9): a token minted for
one principal is refused for another, a token minted by one App is refused by another App that
shares its key, and a replica (same name, same key) continues it."""

from __future__ import annotations

import secrets
from functools import partial
from typing import Any

import httpx2
import trio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.mcp import App
from mrtr_trio.mcp._transports import serve_http

from . import apps
from .test_transports import MODERN_HEADERS, MODERN_META

KEY = secrets.token_bytes(32)
INVALID_STATE = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


async def confirm(ctx: Context, item: str):
    ok = yield elicit(f"Take {item}?", apps.CONFIRM)
    yield done(f"{item}: {ok.content['confirm'] if ok.accepted else 'declined'}")


def _app(name: str) -> App:
    app = App(name, runtime=Runtime([KEY]))
    app.tool(name="confirm")(confirm)
    return app


class _Principal:
    """Authenticates every request as the principal its X-Test-* headers name (a stand-in
    for a bearer-token verifier), then lets the SDK's own AuthContextMiddleware publish it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = AuthContextMiddleware(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            if "x-test-client" in headers:
                token = AccessToken(
                    token="t",
                    client_id=headers["x-test-client"],
                    scopes=[],
                    subject=headers.get("x-test-subject"),
                    claims={"iss": headers.get("x-test-issuer", "https://issuer")},
                )
                scope = dict(scope, user=AuthenticatedUser(token))
        await self._app(scope, receive, send)


async def _call(
    url: str, state: str | None = None, answer: Any = None, **principal: str
) -> tuple[int, Any]:
    params: dict[str, Any] = {"name": "confirm", "arguments": {"item": "tea"}, "_meta": MODERN_META}
    if state is not None:
        params["requestState"] = state
        params["inputResponses"] = {"input-0": answer}
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "confirm"})
    headers.update({f"X-Test-{k.title()}": v for k, v in principal.items()})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=body, headers=headers)
    return response.status_code, response.json()


YES = {"action": "accept", "content": {"confirm": True}}


async def test_a_token_minted_for_one_principal_is_refused_for_another(
    nursery: trio.Nursery,
) -> None:
    app = _app("binding")
    url = await nursery.start(serve_http, _Principal(app.asgi()), "127.0.0.1", 0, "/mcp")
    alice = {"client": "c1", "subject": "alice"}
    _, first = await _call(url, **alice)
    state = first["result"]["requestState"]
    for other in (
        {"client": "c1", "subject": "bob"},  # another subject
        {"client": "c2", "subject": "alice"},  # another client
        {"client": "c1", "subject": "alice", "issuer": "https://elsewhere"},  # another issuer
        {},  # unauthenticated
    ):
        status, refused = await _call(url, state, YES, **other)
        assert (status, refused.get("error")) == (400, INVALID_STATE), other
    status, accepted = await _call(url, state, YES, **alice)
    assert status == 200 and accepted["result"]["content"][0]["text"] == "tea: True"


async def test_apps_sharing_one_key_refuse_each_others_tokens_but_replicas_continue(
    nursery: trio.Nursery,
) -> None:
    alpha, beta, alpha_replica = [
        await nursery.start(partial(app.serve_http, "127.0.0.1", 0))
        for app in (_app("alpha"), _app("beta"), _app("alpha"))
    ]
    _, first = await _call(alpha)
    state = first["result"]["requestState"]
    status, refused = await _call(beta, state, YES)
    assert (status, refused.get("error")) == (400, INVALID_STATE)
    status, continued = await _call(alpha_replica, state, YES)
    assert status == 200 and continued["result"]["content"][0]["text"] == "tea: True"


def test_bind_bytes_name_the_principal_and_the_audience() -> None:
    base = _app("alpha").bind_bytes("tools/call", "confirm", {"item": "tea"})
    assert base != _app("beta").bind_bytes("tools/call", "confirm", {"item": "tea"})
    for principal in (("c1", None, "alice"), ("c1", None, "bob"), ("c2", None, "alice")):
        assert base != _app("alpha").bind_bytes(
            "tools/call", "confirm", {"item": "tea"}, principal=principal
        )
