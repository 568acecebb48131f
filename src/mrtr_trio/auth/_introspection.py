"""[IntrospectionVerifier][mrtr_trio.auth.IntrospectionVerifier]: opaque (or any) access tokens
checked by asking the authorization server (OAuth 2.0 Token Introspection, RFC 7662).

The server authenticates to the introspection endpoint as its own client (HTTP Basic with its
client id and secret) and POSTs the token. Only `active: true` is accepted, and then the
answer is checked as a JWT's claims would be: `aud` names this server's resource, `exp` is in
the future, `iss` is the expected issuer (when one is given), and a `client_id` is present.
A positive answer is remembered for *cache_seconds* (never past `exp`): that is how long a
revoked token may still be honoured, so keep it short. Failures (the server unreachable, a
non-200 answer, garbage) refuse the token.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx2
from mcp.server.auth.provider import AccessToken

from ._cache import TokenCache
from ._jwt import audience_matches, scopes_of
from ._settings import canonical_resource

__all__ = ["IntrospectionVerifier"]

log = logging.getLogger("mrtr_trio.auth")


class IntrospectionVerifier:
    """Verifies tokens by RFC 7662 introspection (see the module docstring).

    - *endpoint*: the authorization server's `introspection_endpoint`;
    - *client_id*, *client_secret*: this server's own credentials at the authorization server;
    - *audience*: this server's resource URL (the `resource` of [Auth][mrtr_trio.auth.Auth]);
    - *issuer*: when given, the `iss` the answer must carry (also put in the principal when
      the answer has none);
    - *cache_seconds*: how long a positive answer is reused; *timeout*: seconds a request
      may take; *max_cached_tokens*: answers kept.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str,
        issuer: str | None = None,
        cache_seconds: float = 30.0,
        timeout: float = 10.0,
        max_cached_tokens: int = 10_000,
    ) -> None:
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise ValueError(f"endpoint must be an http(s) URL, got {endpoint!r}")
        if not client_id or not client_secret:
            raise ValueError("introspection needs this server's client_id and client_secret")
        if cache_seconds < 0 or timeout <= 0:
            raise ValueError("cache_seconds must be >= 0 and timeout > 0")
        self.endpoint = endpoint
        self.audience = canonical_resource(audience)
        self.issuer = issuer
        self._credentials = (client_id, client_secret)
        self._cache_seconds = float(cache_seconds)
        self._timeout = float(timeout)
        self._cache = TokenCache(max_cached_tokens)

    def __repr__(self) -> str:  # never the secret
        return f"IntrospectionVerifier({self.endpoint!r}, audience={self.audience!r})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's `AccessToken` when the authorization server says it is active and it
        was issued for this server; `None` otherwise (the reason is logged, never the token)."""
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        answer = await self._introspect(token)
        if answer is None:
            return None
        if answer.get("active") is not True:
            return _refused("the authorization server says it is not active")
        if not audience_matches(answer.get("aud"), self.audience):
            return _refused(f"audience {answer.get('aud')!r} is not {self.audience}")
        expires = answer.get("exp")
        now = time.time()
        if not isinstance(expires, int | float) or isinstance(expires, bool) or expires <= now:
            return _refused(f"exp {expires!r} is missing or past")
        issuer = answer.get("iss", self.issuer)
        if self.issuer is not None and issuer != self.issuer:
            return _refused(f"issuer {issuer!r} is not {self.issuer!r}")
        client_id = answer.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            return _refused("no client_id in the introspection answer")
        subject = answer.get("sub")
        claims = dict(answer)
        if issuer is not None:
            claims["iss"] = issuer
        verified = AccessToken(
            token=token,
            client_id=client_id,
            scopes=scopes_of(answer),
            expires_at=int(expires),
            resource=self.audience,
            subject=subject if isinstance(subject, str) else None,
            claims=claims,
        )
        self._cache.put(token, verified, min(float(expires), now + self._cache_seconds))
        return verified

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        try:
            async with httpx2.AsyncClient(timeout=self._timeout) as http:
                response = await http.post(
                    self.endpoint,
                    data={"token": token, "token_type_hint": "access_token"},
                    auth=self._credentials,
                    headers={"Accept": "application/json"},
                )
        except httpx2.HTTPError as error:
            log.warning("token introspection at %s failed: %r", self.endpoint, error)
            return None
        if response.status_code != 200:
            log.warning(
                "token introspection at %s answered %d", self.endpoint, response.status_code
            )
            return None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            log.warning("token introspection at %s answered something not JSON", self.endpoint)
            return None
        return answer


def _refused(reason: str) -> AccessToken | None:
    """Log why a token was refused (never the token); `None`, the refusal."""
    log.info("refused a token: %s", reason)
    return None
