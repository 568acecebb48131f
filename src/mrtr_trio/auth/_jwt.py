"""[JWTVerifier][mrtr_trio.auth.JWTVerifier]: JWT access tokens (RFC 9068) checked against
their issuer's published keys, with PyJWT and its JWKS client.

What a token must be: a JWT whose header says `typ: at+jwt` and an `alg` from the allow-list
(never `none`, never HMAC: PyJWT also refuses an `alg` that differs from the key's own), whose
`kid` names a key of the JWKS of the issuer its `iss` claim names (one key set per configured
issuer, chosen by `iss`; an unknown issuer is refused before any fetch), with a valid
signature, `exp` in the future and `nbf`/`iat` not in the future (within *leeway*), an `aud`
that is this server's resource URL, and a `client_id` (or `azp`).

Keys: a key seen in the JWKS is used without a fetch for *key_lifespan* seconds; after that,
or for a `kid` never seen, PyJWT's client is asked in a worker thread (its fetch is blocking
`urllib`), which refetches the set when it has expired, or once per *cooldown* seconds for an
unknown `kid` (so a rotated-in key is found, and random `kid`s cost at most one fetch per
window). A failed fetch refuses the token (fail closed). Verified tokens are remembered by
their exact string (see `_cache`) until `exp`, and at most *key_lifespan* seconds, so a key
withdrawn from the JWKS stops being honoured within that time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
import trio
from mcp.server.auth.provider import AccessToken

from ._cache import TokenCache
from ._settings import canonical_resource

__all__ = ["JWTVerifier", "audience_matches", "scopes_of"]

log = logging.getLogger("mrtr_trio.auth")

_TYPES = frozenset({"at+jwt", "application/at+jwt"})
_SAFE_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def audience_matches(audience: Any, resource: str) -> bool:
    """Whether the `aud` claim *audience* (a string or a list of them) names *resource* (a
    canonical resource URL), comparing canonical forms (so an upper-case host matches)."""
    candidates = [audience] if isinstance(audience, str) else audience
    if not isinstance(candidates, list):
        return False
    for candidate in candidates:
        if candidate == resource:
            return True
        try:
            if isinstance(candidate, str) and canonical_resource(candidate) == resource:
                return True
        except ValueError:
            continue
    return False


def scopes_of(claims: Mapping[str, Any]) -> list[str]:
    """The scopes a token's claims grant: `scope` (space-separated) or `scp` (a list or a
    space-separated string)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [s for s in value if isinstance(s, str)]
    return []


class _KeySet:
    """One issuer's signing keys: known keys inline, lookups that may fetch in a thread."""

    def __init__(self, url: str, *, lifespan: float, cooldown: float, timeout: float) -> None:
        self.url = url
        self._client = jwt.PyJWKClient(
            url,
            cache_keys=False,  # its LRU never forgets a key the JWKS withdrew
            cache_jwk_set=True,
            lifespan=max(lifespan, 1.0),
            timeout=timeout,
            cooldown_duration=cooldown,
        )
        self._lifespan = lifespan
        self._known: dict[str, tuple[jwt.PyJWK, float]] = {}  # kid -> (key, good until)

    async def key(self, kid: str) -> jwt.PyJWK | None:
        known = self._known.get(kid)
        now = time.monotonic()
        if known is not None and known[1] > now:
            return known[0]
        try:
            key = await trio.to_thread.run_sync(self._client.get_signing_key, kid)
        except jwt.PyJWKClientError as error:
            self._known.pop(kid, None)
            log.info("refused a token: no key %r in %s (%s)", kid, self.url, error)
            return None
        self._known[kid] = (key, now + self._lifespan)
        return key


class JWTVerifier:
    """Verifies JWT access tokens against an issuer's JWKS (see the module docstring).

    - *jwks_url*: the issuer's key set (its metadata's `jwks_uri`);
    - *issuer*: the `iss` tokens must carry, compared as an exact string;
    - *audience*: this server's resource URL (the `resource` of [Auth][mrtr_trio.auth.Auth]);
    - *algorithms*: the signature algorithms accepted (asymmetric ones only);
    - *leeway*: seconds of clock skew allowed on `exp`, `nbf` and `iat` (the `expires_at`
      it reports includes it);
    - *key_lifespan*: seconds a fetched key set (and a verified token) is used before it is
      looked up again; *cooldown*: the least seconds between two fetches for unknown `kid`s;
      *timeout*: seconds a JWKS fetch may take; *max_cached_tokens*: verified tokens kept.

    Several authorization servers: [for_issuers][mrtr_trio.auth.JWTVerifier.for_issuers].
    """

    def __init__(
        self,
        jwks_url: str,
        *,
        issuer: str,
        audience: str,
        algorithms: Sequence[str] = ("RS256", "ES256"),
        leeway: float = 30.0,
        key_lifespan: float = 300.0,
        cooldown: float = 30.0,
        timeout: float = 10.0,
        max_cached_tokens: int = 10_000,
    ) -> None:
        if not jwt.algorithms.has_crypto:  # PyJWT without `cryptography`: no RS256 or ES256
            raise ImportError("JWTVerifier needs the auth extra: pip install 'mrtr_trio[auth]'")
        algorithms = tuple(algorithms)
        unsafe = [a for a in algorithms if a not in _SAFE_ALGORITHMS]
        if not algorithms or unsafe:
            raise ValueError(
                f"algorithms must be asymmetric signature algorithms, got {unsafe or 'none'}"
            )
        if leeway < 0 or key_lifespan <= 0 or cooldown < 0 or timeout <= 0:
            raise ValueError("leeway and cooldown must be >= 0; key_lifespan, timeout > 0")
        self.audience = canonical_resource(audience)
        self.algorithms = algorithms
        self.leeway = float(leeway)
        self._lifespan = float(key_lifespan)
        self._cooldown = float(cooldown)
        self._timeout = float(timeout)
        self._issuers: dict[str, _KeySet] = {}
        self._cache = TokenCache(max_cached_tokens)
        self._add_issuer(issuer, jwks_url)

    @classmethod
    def for_issuers(
        cls, jwks_urls: Mapping[str, str], *, audience: str, **options: Any
    ) -> JWTVerifier:
        """A verifier trusting several authorization servers, *jwks_urls* mapping each issuer
        to its JWKS URL; a token's `iss` chooses the key set it is checked against."""
        if not jwks_urls:
            raise ValueError("for_issuers needs at least one issuer")
        (issuer, url), *others = jwks_urls.items()
        verifier = cls(url, issuer=issuer, audience=audience, **options)
        for other, other_url in others:
            verifier._add_issuer(other, other_url)
        return verifier

    def _add_issuer(self, issuer: str, jwks_url: str) -> None:
        if not isinstance(issuer, str) or not issuer:
            raise ValueError("issuer must be the authorization server's issuer URL")
        if not isinstance(jwks_url, str) or not jwks_url.startswith(("https://", "http://")):
            raise ValueError(f"jwks_url must be an http(s) URL, got {jwks_url!r}")
        self._issuers[issuer] = _KeySet(
            jwks_url, lifespan=self._lifespan, cooldown=self._cooldown, timeout=self._timeout
        )

    @property
    def issuers(self) -> tuple[str, ...]:
        """The issuers this verifier trusts."""
        return tuple(self._issuers)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The verified token's `AccessToken` (with `iss` in its claims and `resource` the
        audience), or `None` when it must be refused (the reason is logged, never the token)."""
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.InvalidTokenError as error:
            return _refused(f"not a JWT ({error})")
        typ = header.get("typ")
        if not isinstance(typ, str) or typ.lower() not in _TYPES:
            return _refused(f"typ {typ!r} is not at+jwt")
        if header.get("alg") not in self.algorithms:
            return _refused(f"alg {header.get('alg')!r} is not one of {self.algorithms}")
        kid = header.get("kid")
        if not isinstance(kid, str):
            return _refused("no kid in the header")
        issuer = unverified.get("iss")
        keys = self._issuers.get(issuer) if isinstance(issuer, str) else None
        if keys is None:
            return _refused(f"issuer {issuer!r} is not trusted")
        key = await keys.key(kid)
        if key is None:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                issuer=issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            )
        except jwt.InvalidTokenError as error:
            return _refused(f"{type(error).__name__}: {error}")
        if not audience_matches(claims.get("aud"), self.audience):
            return _refused(f"audience {claims.get('aud')!r} is not {self.audience}")
        client_id = claims.get("client_id", claims.get("azp"))
        if not isinstance(client_id, str) or not client_id:
            return _refused("no client_id (or azp) claim")
        subject = claims.get("sub")
        expires = float(claims["exp"]) + self.leeway
        verified = AccessToken(
            token=token,
            client_id=client_id,
            scopes=scopes_of(claims),
            expires_at=int(expires),
            resource=self.audience,
            subject=subject if isinstance(subject, str) else None,
            claims=claims,
        )
        self._cache.put(token, verified, min(expires, time.time() + self._lifespan))
        return verified


def _refused(reason: str) -> AccessToken | None:
    """Log why a token was refused (never the token); `None`, the refusal."""
    log.info("refused a token: %s", reason)
    return None
