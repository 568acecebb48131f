"""The two verifiers against a real authorization server: what a verified token carries, the
cache, key rotation by `kid`, several issuers, a JWKS fetched in a worker thread (never on the
event loop), and introspection (RFC 7662) with its short positive cache."""

from __future__ import annotations

import json
import time
from functools import partial

import jwt
import pytest
import trio

from mrtr_trio.auth import IntrospectionVerifier, JWTVerifier

from ..services import free_port
from .authserver import AuthServer, new_key, public
from .secured import build, call, new_resource, serve

RESOURCE = "http://127.0.0.1:9/mcp"


def _verifier(idp: AuthServer, **options: float) -> JWTVerifier:
    return JWTVerifier(idp.jwks_url, issuer=idp.issuer, audience=RESOURCE, cooldown=0, **options)


async def test_a_verified_jwt_names_its_principal_scopes_and_resource(idp: AuthServer) -> None:
    verifier = _verifier(idp)
    token = await idp.token("alpha", RESOURCE, "mcp:tools mcp:admin")
    verified = await verifier.verify_token(token)
    assert verified is not None
    assert (verified.client_id, verified.subject, verified.resource) == ("alpha", "alpha", RESOURCE)
    assert verified.scopes == ["mcp:tools", "mcp:admin"]
    assert verified.claims is not None and verified.claims["iss"] == idp.issuer
    assert verified.expires_at == int(verified.claims["exp"] + verifier.leeway)
    # Remembered: the same token is not checked again.
    assert await verifier.verify_token(token) is verified
    # The audience is compared in canonical form (an upper-case host is the same resource).
    upper = JWTVerifier(idp.jwks_url, issuer=idp.issuer, audience="HTTP://127.0.0.1:9/mcp/")
    assert await upper.verify_token(token) is not None


async def test_several_issuers_each_with_its_own_key_set(
    idp: AuthServer, other_idp: AuthServer
) -> None:
    verifier = JWTVerifier.for_issuers(
        {idp.issuer: idp.jwks_url, other_idp.issuer: other_idp.jwks_url}, audience=RESOURCE
    )
    assert verifier.issuers == (idp.issuer, other_idp.issuer)
    for server in (idp, other_idp):
        verified = await verifier.verify_token(await server.token("alpha", RESOURCE, "mcp:tools"))
        assert verified is not None and verified.claims["iss"] == server.issuer  # type: ignore[index]
    # The issuer chooses the key set: one issuer's key cannot vouch for the other.
    crossed = idp.forge({"aud": RESOURCE, "iss": other_idp.issuer})
    assert await verifier.verify_token(crossed) is None
    assert await verifier.verify_token(idp.forge({"aud": RESOURCE, "iss": "https://else"})) is None


async def test_keys_rotate_by_kid_and_a_withdrawn_key_stops_being_honoured(
    idp: AuthServer,
) -> None:
    original = list(idp.keys)
    verifier = _verifier(idp, key_lifespan=1.0)
    old = idp.forge({"aud": RESOURCE})
    assert await verifier.verify_token(old) is not None
    try:
        fresh = new_key()
        await idp.rotate([fresh, *original])  # a new signing key, the old one still published
        new = await idp.token("alpha", RESOURCE, "mcp:tools")
        assert jwt.get_unverified_header(new)["kid"] == fresh["kid"]
        assert await verifier.verify_token(new) is not None  # unknown kid: fetched again
        await idp.rotate([fresh])  # the old key withdrawn
        await trio.sleep(1.2)  # the verifier's key lifespan
        assert await verifier.verify_token(idp.forge({"aud": RESOURCE}, key=original[0])) is None
        assert await verifier.verify_token(old) is None  # not even the one it had verified
        assert await verifier.verify_token(idp.forge({"aud": RESOURCE}, key=fresh)) is not None
    finally:
        await idp.rotate(original)


async def test_the_jwks_is_fetched_in_a_worker_thread_and_only_when_needed(
    nursery: trio.Nursery,
) -> None:
    """The key set is served by this test's own event loop: a fetch on the loop would block
    it, the server could not answer, and the token would be refused."""
    key = new_key()
    fetches = []

    async def jwks(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        fetches.append(1)
        body = json.dumps({"keys": [public(key)]}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        await stream.send_all(head.encode() + body)
        await stream.aclose()

    port = free_port()
    await nursery.start(partial(trio.serve_tcp, jwks, port, host="127.0.0.1"))
    issuer = "https://issuer.test"
    verifier = JWTVerifier(
        f"http://127.0.0.1:{port}/jwks", issuer=issuer, audience=RESOURCE, timeout=2
    )
    server = AuthServer(issuer, {}, {}, [key])
    with trio.fail_after(10):
        assert await verifier.verify_token(server.forge({"aud": RESOURCE})) is not None
        assert await verifier.verify_token(server.forge({"aud": RESOURCE})) is not None
    assert len(fetches) == 1  # the second token's key was known


async def test_introspection_accepts_active_tokens_for_this_resource_only(
    idp: AuthServer,
) -> None:
    resource = f"http://127.0.0.1:{free_port()}/opaque"
    rs = idp.clients["mcp-rs"]
    verifier = IntrospectionVerifier(
        idp.introspection_endpoint,
        client_id=rs.client_id,
        client_secret=rs.secret,
        audience=resource,
        issuer=idp.issuer,
    )
    token = await idp.token("alpha", resource, "mcp:tools mcp:read")
    verified = await verifier.verify_token(token)
    assert verified is not None
    assert (verified.client_id, verified.subject, verified.resource) == ("alpha", None, resource)
    assert verified.scopes == ["mcp:tools", "mcp:read"]
    assert verified.expires_at is not None and verified.expires_at > time.time()
    assert await verifier.verify_token(token) is verified  # the short positive cache
    elsewhere = await idp.token("alpha", "http://127.0.0.1:9/opaque", "mcp:tools")
    assert await verifier.verify_token(elsewhere) is None  # another audience
    assert await verifier.verify_token("no-such-token") is None  # not active
    impostor = IntrospectionVerifier(
        idp.introspection_endpoint, client_id=rs.client_id, client_secret="wrong", audience=resource
    )
    assert await impostor.verify_token(token) is None  # the server refuses to answer
    assert "wrong" not in repr(impostor)


async def test_an_app_behind_introspection(nursery: trio.Nursery, idp: AuthServer) -> None:
    resource = new_resource().replace("/mcp", "/opaque")
    rs = idp.clients["mcp-rs"]
    verifier = IntrospectionVerifier(
        idp.introspection_endpoint,
        client_id=rs.client_id,
        client_secret=rs.secret,
        audience=resource,
    )
    url = await serve(nursery, build(resource, idp, verifier=verifier), path="/opaque")
    beta = await idp.token("beta", resource, "mcp:tools")
    assert (await call(url, "confirm", beta, {"item": "tea"})).status_code == 200
    assert (await call(url, "admin_op", beta, {"item": "x"})).status_code == 403
    assert (await call(url, "confirm", "no-such-token", {"item": "tea"})).status_code == 401


def test_verifiers_refuse_unsafe_settings() -> None:
    with pytest.raises(ValueError, match="asymmetric"):
        JWTVerifier("https://as/jwks", issuer="https://as", audience=RESOURCE, algorithms=["HS256"])
    with pytest.raises(ValueError, match="asymmetric"):
        JWTVerifier("https://as/jwks", issuer="https://as", audience=RESOURCE, algorithms=["none"])
    with pytest.raises(ValueError, match="http"):
        JWTVerifier("file:///etc/jwks", issuer="https://as", audience=RESOURCE)
    with pytest.raises(ValueError, match="resource"):
        JWTVerifier("https://as/jwks", issuer="https://as", audience="mcp-server")
