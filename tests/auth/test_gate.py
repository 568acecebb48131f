"""An App behind bearer tokens from a real authorization server, over loopback HTTP: the
metadata, the 401 and 403 challenges, every kind of bad token refused before any handler runs,
per-handler scopes in lists and calls on both wires, scope hierarchies, and the official
client finding its way from a 401 to a token (and stepping up on a 403) by itself."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx2
import jwt
import mcp_types as types
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError

from mrtr_trio.auth import Auth, JWTVerifier

from .authserver import AuthServer, new_key, public
from .secured import (
    CALLS,
    Legacy,
    build,
    call,
    challenge,
    modern,
    new_resource,
    serve,
    sse_json,
)

MODES = ["legacy", "2026-07-28"]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


async def test_metadata_is_served_at_the_path_aware_and_the_root_url_without_a_token(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    url = await serve(nursery, build(new_resource(), idp))
    origin = url.removesuffix("/mcp")
    async with httpx2.AsyncClient(timeout=10) as http:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            response = await http.get(origin + path)
            assert response.status_code == 200, path
            assert response.json() == {
                "resource": url,
                "authorization_servers": [idp.issuer],
                "scopes_supported": ["mcp:tools", "mcp:admin", "mcp:read"],
                "bearer_methods_supported": ["header"],
                "resource_name": "secure",
            }
        assert (
            await http.post(origin + "/.well-known/oauth-protected-resource")
        ).status_code == 405
        preflight = await http.options(
            origin + "/.well-known/oauth-protected-resource/mcp",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "*"
        assert (await http.get(origin + "/elsewhere")).status_code == 404


async def test_no_token_gets_401_with_a_challenge_that_leads_to_the_metadata(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    url = await serve(nursery, build(new_resource(), idp))
    response = await call(url, "confirm", None, {"item": "tea"})
    assert response.status_code == 401
    assert challenge(response) == {
        "scope": "mcp:tools",
        "resource_metadata": url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
        "error_description": "authorization needed",
    }
    # The challenge names the handler's scopes when the request names the handler.
    response = await call(url, "admin_op", None, {"item": "x"})
    assert challenge(response)["scope"] == "mcp:tools mcp:admin"
    async with httpx2.AsyncClient(timeout=10) as http:
        for method in ("GET", "DELETE"):  # the legacy stream and the session's end too
            response = await http.request(method, url, headers={"Accept": "text/event-stream"})
            assert response.status_code == 401, method
    assert CALLS == []


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "mcp:tools mcp:admin mcp:read"
    claims["client_id"] = claims["sub"] = "mallory"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


async def test_bad_tokens_get_401_invalid_token_and_never_reach_a_handler(
    nursery: trio.Nursery, idp: AuthServer, other_idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    real = await idp.token("beta", resource, "mcp:tools")
    now = int(time.time())
    public_key = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(public(idp.keys[0])))
    public_pem = public_key.public_bytes(  # type: ignore[union-attr]
        encoding=serialization.Encoding.PEM,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )
    bad = {
        "expired": idp.forge({"aud": resource, "exp": now - 120, "iat": now - 600}),
        "not yet valid": idp.forge({"aud": resource, "nbf": now + 600}),
        "issued in the future": idp.forge({"aud": resource, "iat": now + 600}),
        "wrong issuer": other_idp.forge({"aud": resource}),
        "wrong issuer, our key": idp.forge({"aud": resource, "iss": other_idp.issuer}),
        "wrong audience": await idp.token("beta", "http://127.0.0.1:9/mcp", "mcp:tools"),
        "no audience": await idp.token("beta", None, "mcp:tools"),
        "alg none": jwt.encode(
            {"iss": idp.issuer, "aud": resource, "client_id": "beta", "exp": now + 300},
            None,
            algorithm="none",
            headers={"typ": "at+jwt", "kid": idp.keys[0]["kid"]},
        ),
        "HS256 keyed with the public key": _hs256(public_pem, idp, resource),
        "unknown kid": idp.forge({"aud": resource}, key=new_key()),
        "tampered": _tamper(real),
        "an ID token (typ JWT)": idp.forge({"aud": resource}, header={"typ": "JWT"}),
        "no client_id": idp.forge({"aud": resource, "client_id": None}),
        "garbage": "not-a-token",
    }
    for case, token in bad.items():
        response = await call(url, "confirm", token, {"item": "tea"})
        assert response.status_code == 401, case
        assert challenge(response)["error"] == "invalid_token", case
        assert challenge(response)["scope"] == "mcp:tools", case
    assert CALLS == []
    # The real one passes.
    assert (await call(url, "confirm", real, {"item": "tea"})).status_code == 200
    assert CALLS == ["confirm"]


def _hs256(secret: bytes, idp: AuthServer, resource: str) -> str:
    """A token MAC'd with HS256 keyed by the RSA public key (the algorithm-confusion attack).
    PyJWT refuses to do this itself, so the token is assembled by hand."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = {"alg": "HS256", "typ": "at+jwt", "kid": idp.keys[0]["kid"]}
    claims = {
        "iss": idp.issuer,
        "aud": resource,
        "client_id": "beta",
        "exp": int(time.time()) + 300,
    }
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


async def test_malformed_authorization_gets_400_invalid_request(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    token = await idp.token("beta", resource, "mcp:tools")
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx2.AsyncClient(timeout=10) as http:
        twice = await http.post(
            url,
            json=body,
            headers=[
                ("Authorization", f"Bearer {token}"),
                ("Authorization", f"Bearer {token}"),
                ("Accept", "application/json, text/event-stream"),
            ],
        )
        in_url = await http.post(f"{url}?access_token={token}", json=body)
    for response in (twice, in_url):
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_request"


async def test_a_token_lacking_a_handlers_scope_gets_403_naming_every_scope_needed(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    beta = await idp.token("beta", resource, "mcp:tools mcp:read")
    metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    refusals = [
        await call(url, "admin_op", beta, {"item": "x"}),
        await modern(url, "prompts/get", {"name": "secret_prompt"}, beta),
        await modern(url, "resources/read", {"uri": "test://secret"}, beta),
    ]
    legacy = Legacy(url, beta)
    assert (await legacy.open()).status_code == 200
    refusals.append(
        await legacy.request("tools/call", {"name": "admin_op", "arguments": {"item": "x"}})
    )
    refusals.append(await legacy.request("prompts/get", {"name": "secret_prompt"}))
    refusals.append(await legacy.request("resources/read", {"uri": "test://secret"}))
    for response in refusals:
        assert response.status_code == 403
        assert challenge(response) == {
            "error": "insufficient_scope",
            "scope": "mcp:tools mcp:admin",
            "resource_metadata": metadata,
            "error_description": "this operation needs the scopes mcp:admin, which the token lacks",
        }
    assert CALLS == []
    # What the token allows still works, on both wires.
    assert (await call(url, "read_op", beta)).status_code == 200
    assert (
        sse_json(await legacy.request("tools/call", {"name": "read_op", "arguments": {}}))[
            "result"
        ]["content"][0]["text"]
        == "read"
    )
    # Without mcp:tools (every call's scope) nothing passes, not even a ping.
    bare = await idp.token("beta", resource, "mcp:read")
    response = await modern(url, "ping", {}, bare)
    assert response.status_code == 403 and challenge(response)["scope"] == "mcp:tools"


def _names(result: dict[str, Any], key: str, field: str = "name") -> list[str]:
    return [item[field] for item in result[key]]


async def test_lists_show_each_caller_only_what_it_may_use_and_are_private(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    alpha = await idp.token("alpha", resource, "mcp:tools mcp:admin mcp:read")
    beta = await idp.token("beta", resource, "mcp:tools")
    seen = {}
    for who, token in (("alpha", alpha), ("beta", beta)):
        tools = (await modern(url, "tools/list", {}, token)).json()["result"]
        prompts = (await modern(url, "prompts/list", {}, token)).json()["result"]
        resources = (await modern(url, "resources/list", {}, token)).json()["result"]
        for result in (tools, prompts, resources):
            assert result["cacheScope"] == "private"
        legacy = Legacy(url, token)
        await legacy.open()
        legacy_tools = sse_json(await legacy.request("tools/list", {}))["result"]
        assert _names(legacy_tools, "tools") == _names(tools, "tools")
        seen[who] = (
            _names(tools, "tools"),
            _names(prompts, "prompts"),
            _names(resources, "resources", "uri"),
        )
    assert seen["alpha"] == (
        ["confirm", "confirm_too", "admin_op", "read_op", "long_job", "admin_job"],
        ["confirm", "secret_prompt"],
        ["test://secret"],
    )
    assert seen["beta"] == (["confirm", "confirm_too", "long_job"], ["confirm"], [])


async def test_a_broader_scope_satisfies_the_narrower_ones_it_implies(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    app = build(resource, idp, implies={"mcp:admin": ["mcp:read"]})
    url = await serve(nursery, app)
    admin = await idp.token("alpha", resource, "mcp:tools mcp:admin")
    assert (await call(url, "read_op", admin)).status_code == 200
    assert "read_op" in _names(
        (await modern(url, "tools/list", {}, admin)).json()["result"], "tools"
    )
    # Not the other way round.
    reader = await idp.token("alpha", resource, "mcp:tools mcp:read")
    assert (await call(url, "admin_op", reader, {"item": "x"})).status_code == 403


class _Storage:
    """Token storage for the official client's OAuth provider (in memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.mark.parametrize("mode", MODES)
async def test_the_official_client_discovers_the_server_and_steps_up_by_itself(
    nursery: trio.Nursery, idp: AuthServer, mode: str
) -> None:
    url = await serve(nursery, build(new_resource(), idp))
    storage = _Storage()
    oauth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=storage,
        client_id="alpha",
        client_secret=idp.clients["alpha"].secret,
        issuer=idp.issuer,
    )

    async def yes(ctx: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"confirm": True})

    with trio.fail_after(30):
        async with (
            httpx2.AsyncClient(auth=oauth, timeout=10) as http,
            Client(
                streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=yes
            ) as client,
        ):
            first = await client.call_tool("confirm", {"item": "tea"})
            assert first.content[0].text == "tea: True"  # type: ignore[union-attr]
            assert storage.tokens is not None
            assert storage.tokens.scope == "mcp:tools"  # what the 401 asked for
            stepped = await client.call_tool("admin_op", {"item": "db"})  # a 403, then a new token
            assert stepped.content[0].text == "administered db: True"  # type: ignore[union-attr]
            assert set((storage.tokens.scope or "").split()) == {"mcp:tools", "mcp:admin"}
    # Each handler ran only with a token that allowed it (a modern round replays it: twice).
    rounds = 1 if mode == "legacy" else 2
    assert ["confirm"] * rounds + ["admin_op"] * rounds == CALLS


async def test_stdio_and_in_process_clients_need_no_token(idp: AuthServer) -> None:
    app = build(new_resource(), idp)

    async def yes(ctx: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(app.server, elicitation_callback=yes) as client:
        tools = await client.list_tools()
        assert "admin_op" in [t.name for t in tools.tools]  # a local process is trusted
        result = await client.call_tool("admin_op", {"item": "x"})
        assert result.content[0].text == "administered x: True"  # type: ignore[union-attr]


async def test_a_token_stops_working_when_it_expires_or_its_key_is_withdrawn(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    """What the server remembers of an admitted token never outlives the verifier's word."""
    resource = new_resource()
    verifier = JWTVerifier(
        idp.jwks_url, issuer=idp.issuer, audience=resource, leeway=0, key_lifespan=1, cooldown=0
    )
    url = await serve(nursery, build(resource, idp, verifier=verifier))
    short = idp.forge({"aud": resource, "exp": int(time.time()) + 2})
    lasting = idp.forge({"aud": resource})
    for token in (short, lasting):
        assert (await call(url, "read_op", token)).status_code == 200
    await trio.sleep(2.5)
    assert (await call(url, "read_op", short)).status_code == 401  # expired meanwhile
    assert (await call(url, "read_op", lasting)).status_code == 200
    original = list(idp.keys)
    try:
        await idp.rotate([new_key()])  # the key that signed `lasting` is withdrawn
        await trio.sleep(1.2)  # the verifier's key lifespan
        assert (await call(url, "read_op", lasting)).status_code == 401
    finally:
        await idp.rotate(original)


def test_principal_of_reads_the_user_the_gate_sets() -> None:
    from mrtr_trio.mcp._gate import principal_of

    token = AccessToken(
        token="t", client_id="alpha", scopes=[], subject="ada", claims={"iss": "https://as"}
    )
    assert principal_of({"type": "http", "user": AuthenticatedUser(token)}) == (
        "alpha",
        "https://as",
        "ada",
    )
    assert principal_of({"type": "http"}) is None


def test_auth_settings_are_checked(idp: AuthServer) -> None:
    verifier = JWTVerifier(idp.jwks_url, issuer=idp.issuer, audience="http://127.0.0.1:9/mcp")
    auth = Auth("HTTP://127.0.0.1:9/mcp/", idp.issuer, verifier, implies={"a": ["b"], "b": ["c"]})
    assert auth.resource == "http://127.0.0.1:9/mcp"  # canonical
    assert auth.authorization_servers == (idp.issuer,)
    assert auth.granted(["a"]) == {"a", "b", "c"}  # transitively
    assert auth.missing(["b"], ["a", "c"]) == ("a",)
    with pytest.raises(ValueError, match="offline_access"):
        Auth("http://127.0.0.1:9/mcp", idp.issuer, verifier, scopes=["offline_access"])
    with pytest.raises(TypeError, match="TokenVerifier"):
        Auth("http://127.0.0.1:9/mcp", idp.issuer, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fragment"):
        Auth("http://127.0.0.1:9/mcp#x", idp.issuer, verifier)
    with pytest.raises(TypeError, match="list of scope strings"):
        Auth("http://127.0.0.1:9/mcp", idp.issuer, verifier, scopes="mcp:tools")  # type: ignore[arg-type]


async def test_behind_the_gate_the_handlers_refuse_a_token_lacking_their_scopes_too(
    idp: AuthServer,
) -> None:
    """Defence in depth: should a request reach the App with a token (the SDK's auth context)
    lacking a handler's scopes, the handler is neither listed nor run."""
    app = build(new_resource(), idp)
    narrow = AccessToken(
        token="t", client_id="beta", scopes=["mcp:tools"], claims={"iss": idp.issuer}
    )
    reset = auth_context_var.set(AuthenticatedUser(narrow))
    try:
        async with Client(app.server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "admin_op" not in names and "confirm" in names
            with pytest.raises(MCPError, match="needs the scopes mcp:admin"):
                await client.call_tool("admin_op", {"item": "x"})
    finally:
        auth_context_var.reset(reset)
    assert CALLS == []
