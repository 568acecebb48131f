"""What an HTTP App's authorization is: [Auth][mrtr_trio.auth.Auth], the resource server's
settings (its canonical URL, the authorization servers, the verifier, the scopes every call
needs and which scopes imply others), and the scope arithmetic the gate and the lists share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
from mcp.server.auth.provider import TokenVerifier

__all__ = ["Auth", "canonical_resource"]


def canonical_resource(url: str) -> str:
    """*url* as a canonical resource identifier (RFC 8707 §2, MCP "Canonical Server URI"):
    lower-case scheme and host, no fragment, no trailing slash on a path other than `/`;
    `ValueError` for anything but an absolute http(s) URL without a query or fragment."""
    if not isinstance(url, str):
        raise TypeError(f"a resource URL must be a str, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a resource must be an absolute http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"a resource URL has no query or fragment, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a resource URL has no user information, got {url!r}")
    host = parts.hostname
    netloc = f"[{host}]" if ":" in host else host  # hostname is lower-cased already
    if parts.port is not None and parts.port != {"http": 80, "https": 443}[scheme]:
        netloc += f":{parts.port}"
    path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
    return urlunsplit((scheme, netloc, path, "", ""))


def _scope_tuple(name: str, scopes: Iterable[str]) -> tuple[str, ...]:
    if isinstance(scopes, str):
        raise TypeError(f"{name} must be a list of scope strings, not one string ({scopes!r})")
    result = tuple(scopes)
    for scope in result:
        if not isinstance(scope, str) or not scope or any(c in scope for c in ' "\\'):
            raise ValueError(f"{name}: {scope!r} is not a scope (a non-empty token)")
        if scope == "offline_access":  # MCP 2026-07-28: never in metadata or a challenge
            raise ValueError(f"{name}: offline_access is the client's business, not a resource's")
    return result


def _scopes(value: Iterable[str]) -> tuple[str, ...]:
    return _scope_tuple("scopes", value)


def _issuers(value: str | Iterable[str]) -> tuple[str, ...]:
    servers = (value,) if isinstance(value, str) else tuple(value)
    if not servers or not all(isinstance(s, str) and s for s in servers):
        raise ValueError("authorization_servers must name at least one issuer URL")
    return servers


def _implications(value: Mapping[str, Iterable[str]]) -> Mapping[str, frozenset[str]]:
    """The transitive closure of *value* (scope → the scopes it implies)."""
    direct = {k: frozenset(_scope_tuple(f"implies[{k!r}]", v)) for k, v in value.items()}
    closed: dict[str, frozenset[str]] = {}
    for scope in direct:
        seen: set[str] = set()
        todo = list(direct[scope])
        while todo:
            implied = todo.pop()
            if implied not in seen:
                seen.add(implied)
                todo.extend(direct.get(implied, ()))
        closed[scope] = frozenset(seen - {scope})
    return closed


@attrs.frozen
class Auth:
    """Bearer-token authorization for an App served over HTTP (`App(..., auth=Auth(...))`).

    - *resource*: this server's URL as clients reach it, e.g. `https://mcp.example.com/mcp`:
      the audience tokens must carry, and the `resource` of the Protected Resource Metadata.
      Kept in canonical form (lower-case scheme and host, no trailing slash);
    - *authorization_servers*: the issuer URL (or URLs) clients get tokens from, each exactly
      as its metadata's `issuer` spells it;
    - *verifier*: an `mcp.server.auth.provider.TokenVerifier` (a
      [JWTVerifier][mrtr_trio.auth.JWTVerifier], an
      [IntrospectionVerifier][mrtr_trio.auth.IntrospectionVerifier], or your own): it turns a
      bearer token into an `AccessToken`, or `None` to refuse it;
    - *scopes*: the scopes every request needs (handlers may need more: `@app.tool(scopes=...)`);
    - *implies*: scope hierarchies, broader scope → the narrower scopes it grants as well
      (`{"mcp:admin": ["mcp:tools"]}`), applied transitively; without it scopes are flat;
    - *resource_name*, *resource_documentation*: shown to users in the metadata.

    stdio and in-process clients are never asked for a token: a local process is trusted
    with what its user can do.
    """

    resource: str = attrs.field(converter=canonical_resource)
    authorization_servers: tuple[str, ...] = attrs.field(converter=_issuers)
    verifier: TokenVerifier = attrs.field()
    scopes: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_scopes)
    implies: Mapping[str, frozenset[str]] = attrs.field(
        factory=dict, kw_only=True, converter=_implications
    )
    resource_name: str | None = attrs.field(default=None, kw_only=True)
    resource_documentation: str | None = attrs.field(default=None, kw_only=True)

    @verifier.validator
    def _check_verifier(self, attribute: Any, value: Any) -> None:
        if not callable(getattr(value, "verify_token", None)):
            raise TypeError(
                f"verifier must be a TokenVerifier (with async verify_token), got {value!r}"
            )

    def granted(self, scopes: Iterable[str]) -> frozenset[str]:
        """The scopes a token with *scopes* holds, hierarchies applied."""
        held = frozenset(scopes)
        if not self.implies:
            return held
        return held.union(*(self.implies.get(s, frozenset()) for s in held))

    def missing(self, scopes: Iterable[str], needed: Iterable[str]) -> tuple[str, ...]:
        """The scopes of *needed* that a token with *scopes* lacks, in *needed*'s order."""
        held = self.granted(scopes)
        return tuple(s for s in needed if s not in held)
