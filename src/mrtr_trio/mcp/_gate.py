"""The door of an App served over HTTP with [Auth][mrtr_trio.auth.Auth]: an ASGI layer in front
of the Streamable HTTP endpoint, built from the official SDK's auth parts.

Per request, in order:

1. the Protected Resource Metadata (RFC 9728; the SDK's `create_protected_resource_routes`)
   at the path-aware well-known URL of the resource (`/.well-known/oauth-protected-resource/mcp`)
   and at the root one, to anyone, without a token;
2. on the MCP endpoint, every request (POST, the legacy GET stream, DELETE) is authenticated by
   the SDK's `BearerAuthBackend` with the App's verifier, which also refuses a token issued for
   another resource. Two `Authorization` headers or a token in the query string get `400
   invalid_request`; no token or a refused one gets `401` with `WWW-Authenticate: Bearer
   resource_metadata="...", scope="..."` (and `error="invalid_token"` when a token was sent):
   the SDK's own middleware sends no `scope`, so the challenges are written here;
3. the scopes the request needs: those of every call, plus the handler's (`@app.tool(scopes=...)`)
   when the request names one. On 2026-07-28 the method and the name come from the `Mcp-Method`
   and `Mcp-Name` headers (the SDK refuses a body that disagrees with them); on earlier
   revisions there are no such headers, so a POST's body is read (within the body limit) and
   replayed. A token lacking any gets `403` with `error="insufficient_scope"` and a `scope`
   naming every scope the operation needs, in one challenge (scope hierarchies applied);
4. the request goes on with `scope["user"]` and `scope["auth"]` set as Starlette's
   authentication middleware sets them (the SDK's session manager binds a legacy session to
   `scope["user"]`), through the SDK's `AuthContextMiddleware` (handlers, `requestState` binding
   and task ownership read the principal from it).

[principal_of][mrtr_trio.mcp._gate.principal_of] reads the authenticated principal from an ASGI
scope, for layers behind this one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit

import pydantic_core
from mcp.server.auth.provider import AccessToken
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth import Auth
from ._budget import read_body
from ._sdk import (
    NAME_BEARING_METHODS,
    AuthContextMiddleware,
    AuthenticatedUser,
    BearerAuthBackend,
    create_protected_resource_routes,
    decode_header_value,
    principal_components,
)

__all__ = ["AuthGate", "WELL_KNOWN", "principal_of"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
#: Tokens whose admission is remembered (all are forgotten past it).
_MAX_ADMITTED = 10_000

#: What a request needs besides the App's own scopes: `(method, name)` → the handler's scopes.
Needs = Callable[[str, str | None], Sequence[str]]


def principal_of(scope: Scope) -> tuple[str, str | None, str | None] | None:
    """The principal `(client_id, issuer, subject)` that authenticated the request of this ASGI
    *scope*, or `None` when it is unauthenticated (no [Auth][mrtr_trio.auth.Auth], or not yet
    past the gate)."""
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    return principal_components(user.access_token)


class AuthGate:
    """The ASGI layer described in the module docstring, in front of *app* (the endpoint at
    *path*).

    - *needs*: the extra scopes a `(method, name)` needs (a handler's);
    - *scoped*: whether any handler has scopes (else a legacy body is never read here);
    - *scopes_supported*: what the metadata advertises;
    - *max_body_size*: the most bytes of a legacy body read to find its method;
    - *name*: the metadata's `resource_name` unless the Auth gives one.
    """

    def __init__(
        self,
        app: ASGIApp,
        auth: Auth,
        *,
        path: str,
        needs: Needs,
        scoped: Callable[[], bool],
        scopes_supported: Sequence[str],
        max_body_size: int,
        name: str | None = None,
    ) -> None:
        self._raw = app
        self._app = AuthContextMiddleware(app)
        self._auth = auth
        self._path = path.rstrip("/") or "/"
        self._needs = needs
        self._scoped = scoped
        self._max_body_size = max_body_size
        # A plain string to the SDK: an AnyHttpUrl built beforehand gains a trailing "/" on a
        # path-less URL, which the SDK's client then refuses as an issuer mismatch.
        self._backend = BearerAuthBackend(
            auth.verifier, resource_server_url=AnyHttpUrl(auth.resource)
        )
        self._admitted: dict[str, tuple[AccessToken, AuthCredentials, AuthenticatedUser]] = {}
        parts = urlsplit(auth.resource)
        self.metadata_url = f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path}"
        routes = create_protected_resource_routes(
            auth.resource,  # type: ignore[arg-type]  # see above
            list(auth.authorization_servers),  # type: ignore[arg-type]
            scopes_supported=[s for s in scopes_supported if s != "offline_access"] or None,
            resource_name=auth.resource_name or name,
            resource_documentation=auth.resource_documentation,  # type: ignore[arg-type]
        )
        (metadata,) = routes
        self._metadata: dict[str, Route] = {
            p: Route(p, endpoint=metadata.app, methods=["GET", "OPTIONS"])
            for p in (metadata.path, WELL_KNOWN + self._path.rstrip("/"), WELL_KNOWN)
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._raw(scope, receive, send)  # the lifespan
            return
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        path = path.rstrip("/") or "/"
        metadata = self._metadata.get(path)
        if metadata is not None:
            await metadata.handle(scope, receive, send)
            return
        if path != self._path:
            await self._raw(scope, receive, send)  # the endpoint answers 404
            return
        admitted = await self._admit(scope, receive, send)
        if admitted is not None:
            # Awaited here, not in _admit: every resumption of the request's task passes
            # through each coroutine frame left in its await chain (docs/benchmarks.md).
            await self._app(admitted[0], admitted[1], send)

    async def _admit(
        self, scope: Scope, receive: Receive, send: Send
    ) -> tuple[Scope, Receive] | None:
        """The request's scope with the user and its credentials, and its `receive` (a replay
        when the body was read); `None` when the request was refused (answered here)."""
        authorizations = 0
        version = method = name = None
        bearer = b""
        for key, value in scope["headers"]:
            if key == b"authorization":
                authorizations += 1
                bearer = value
            elif key == b"mcp-protocol-version":
                version = value.decode("latin-1")
            elif key == b"mcp-method":
                method = value.decode("latin-1")
            elif key == b"mcp-name":
                name = value.decode("latin-1")
        if authorizations > 1 or b"access_token=" in scope.get("query_string", b""):
            await _refuse(
                send,
                400,
                "invalid_request",
                "send one access token, in one Authorization header (never in the URL)",
            )
            return None
        authenticated = await self._authenticate(scope, bearer)
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        if modern and method is not None:
            targets = [(method, decode_header_value(name) if name is not None else None)]
        else:
            targets = []
        if authenticated is None:
            needed = self._needed(targets)
            error = "invalid_token" if authorizations else None
            what = "the access token was refused" if authorizations else "authorization needed"
            await self._challenge(send, 401, error, what, needed)
            return None
        credentials, user = authenticated
        if not modern and self._scoped() and scope["method"] == "POST":
            body, receive = await read_body(receive, self._max_body_size)
            targets = _targets(body)
        needed = self._needed(targets)
        missing = self._auth.missing(credentials.scopes, needed)
        if missing:
            what = f"this operation needs the scopes {' '.join(missing)}, which the token lacks"
            await self._challenge(send, 403, "insufficient_scope", what, needed)
            return None
        return dict(scope, auth=credentials, user=user), receive

    async def _authenticate(
        self, scope: Scope, bearer: bytes
    ) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        """The SDK's bearer backend's answer for the request. When the verifier answers a
        token with the very `AccessToken` it answered the last time (its cache), the backend's
        answer of that time is reused, its expiry checked again: fewer objects per request
        (docs/benchmarks.md)."""
        token = bearer[7:].decode("latin-1") if bearer[:7].lower() == b"bearer " else ""
        known = self._admitted.get(token) if token else None
        if known is not None:
            verified = await self._auth.verifier.verify_token(token)
            expires = None if verified is None else verified.expires_at
            if verified is known[0] and (expires is None or expires >= int(time.time())):
                return known[1], known[2]
        authenticated: (
            tuple[AuthCredentials, AuthenticatedUser] | None
        ) = await self._backend.authenticate(HTTPConnection(scope))
        if authenticated is not None and token:
            if len(self._admitted) >= _MAX_ADMITTED:
                self._admitted.clear()
            credentials, user = authenticated
            self._admitted[token] = (user.access_token, credentials, user)
        return authenticated

    def _needed(self, targets: Iterable[tuple[str, str | None]]) -> tuple[str, ...]:
        """Every scope the request needs: the App's, then the handlers' (no repeats)."""
        needed = dict.fromkeys(self._auth.scopes)
        for method, name in targets:
            needed.update(dict.fromkeys(self._needs(method, name)))
        return tuple(needed)

    async def _challenge(
        self, send: Send, status: int, error: str | None, description: str, scopes: Sequence[str]
    ) -> None:
        parts = [] if error is None else [f'error="{error}"']
        if scopes:
            parts.append(f'scope="{" ".join(scopes)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        parts.append(f'error_description="{description}"')
        challenge = "Bearer " + ", ".join(parts)
        await _refuse(send, status, error or "unauthorized", description, challenge)


async def _refuse(
    send: Send, status: int, error: str, description: str, challenge: str | None = None
) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _targets(body: bytes | None) -> list[tuple[str, str | None]]:
    """The `(method, name)` of each JSON-RPC request in a legacy POST *body* (none when it is
    not JSON: the SDK refuses it)."""
    if body is None:
        return []
    try:
        parsed = pydantic_core.from_json(body)
    except ValueError:
        return []
    targets = []
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            continue
        method = message["method"]
        params = message.get("params")
        key = NAME_BEARING_METHODS.get(method)
        name = params.get(key) if key is not None and isinstance(params, dict) else None
        targets.append((method, name if isinstance(name, str) else None))
    return targets
