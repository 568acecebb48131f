"""A real authorization server for the auth tests: `authserver.mjs` (oidc-provider on the
test dependencies' Node), started and stopped by the tests, and what the tests do with it:
client-credentials tokens for a resource, key rotation, and tokens forged with its own signing
key (expired, not yet valid, wrong audience...) for the cases a real server never issues.

Without oidc-provider (npm could not install it) the tests that need it skip, or fail under
`MRTR_TRIO_REQUIRE_SERVICES=1`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from ..node import installed_oidc_provider, node_paths
from ..services import REQUIRED

SCRIPT = Path(__file__).with_name("authserver.mjs")
SCOPES = ("mcp:tools", "mcp:admin", "mcp:read")


def new_key() -> dict[str, Any]:
    """A fresh RSA private JWK with a random `kid`, for RS256 signatures."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private))
    jwk.update(kid=secrets.token_hex(8), alg="RS256", use="sig")
    return jwk


def public(jwk: dict[str, Any]) -> dict[str, Any]:
    """The public half of a private RSA JWK."""
    return {k: v for k, v in jwk.items() if k in ("kty", "n", "e", "kid", "alg", "use")}


@attrs.frozen
class Client:
    client_id: str
    secret: str


@attrs.define
class AuthServer:
    """A running authorization server: its issuer, its metadata, its clients (`alpha` may
    have every scope, `beta` all but `mcp:admin`, `mcp-rs` is the resource server's own
    client for introspection), and its current signing keys (the first signs)."""

    issuer: str
    metadata: dict[str, Any]
    clients: dict[str, Client]
    keys: list[dict[str, Any]]

    @property
    def jwks_url(self) -> str:
        return str(self.metadata["jwks_uri"])

    @property
    def introspection_endpoint(self) -> str:
        return str(self.metadata["introspection_endpoint"])

    async def token(self, client: str, resource: str | None, scope: str | None = None) -> str:
        """A client-credentials access token for *client*, for *resource* (none: an opaque,
        audience-less one), with *scope* (none: no scope claim)."""
        form = {"grant_type": "client_credentials"}
        if resource is not None:
            form["resource"] = resource
        if scope is not None:
            form["scope"] = scope
        credentials = self.clients[client]
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(
                self.metadata["token_endpoint"],
                data=form,
                auth=(credentials.client_id, credentials.secret),
            )
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    async def rotate(self, keys: list[dict[str, Any]]) -> None:
        """Serve *keys* (private JWKs, the first signing) from now on, at the same issuer."""
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(f"{self.issuer}/_keys", content=json.dumps(keys))
        assert response.status_code == 204
        self.keys = keys

    def forge(
        self,
        claims: dict[str, Any],
        *,
        key: dict[str, Any] | None = None,
        header: dict[str, Any] | None = None,
    ) -> str:
        """A token signed RS256 with *key* (default: this server's signing key), claims
        defaulted to a valid token's (`alpha`, 5 minutes), header `typ: at+jwt`."""
        key = key or self.keys[0]
        now = int(time.time())
        payload = {
            "iss": self.issuer,
            "client_id": "alpha",
            "sub": "alpha",
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_hex(8),
            "scope": " ".join(SCOPES),
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        headers = {"typ": "at+jwt", "kid": key["kid"], **(header or {})}
        signing_key = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(key))
        return jwt.encode(payload, signing_key, algorithm="RS256", headers=headers)  # type: ignore[arg-type]


def _provider() -> Path:
    try:
        return installed_oidc_provider()
    except (subprocess.SubprocessError, OSError) as error:
        reason = f"oidc-provider could not be installed with npm ({error})"
        if REQUIRED:
            pytest.fail(f"{reason}, and MRTR_TRIO_REQUIRE_SERVICES=1", pytrace=False)
        pytest.skip(reason)


@contextlib.contextmanager
def auth_server() -> Iterator[AuthServer]:
    """Start an authorization server, wait for its metadata, and stop it on exit."""
    provider = _provider()
    node, _ = node_paths()
    clients = {
        name: Client(name, secrets.token_urlsafe(24)) for name in ("alpha", "beta", "mcp-rs")
    }
    grants = {"grant_types": ["client_credentials"], "redirect_uris": [], "response_types": []}
    metadata = [
        {"client_id": "alpha", "scope": " ".join(SCOPES), **grants},
        {"client_id": "beta", "scope": "mcp:tools mcp:read", **grants},
        {"client_id": "mcp-rs", "grant_types": [], "redirect_uris": [], "response_types": []},
    ]
    for entry in metadata:
        entry["client_secret"] = clients[str(entry["client_id"])].secret
    keys = [new_key()]
    process = subprocess.Popen(
        [str(node), str(SCRIPT)],
        env={
            **os.environ,
            "OIDC_PROVIDER": str(provider),
            "AUTH_KEYS": json.dumps(keys),
            "AUTH_CLIENTS": json.dumps(metadata),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the authorization server did not start: {process.stderr.read()}")  # type: ignore[union-attr]
        issuer = json.loads(line)["issuer"]
        found = httpx2.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=10)
        assert found.status_code == 200, found.text
        yield AuthServer(issuer, found.json(), clients, keys)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
