"""Bearer-token authorization for an App served over HTTP (extra `mrtr_trio[auth]`).

`App(..., auth=Auth(resource, authorization_servers, verifier, scopes=...))` makes the App an
OAuth 2.1 resource server, as the MCP specification asks of an HTTP server: it serves its
Protected Resource Metadata (RFC 9728), answers a request without a valid token with `401`
and a `WWW-Authenticate` challenge that leads the client to the authorization server, answers
a token lacking scopes with `403 insufficient_scope`, and binds every `requestState`, task and
legacy session to the principal the token names. docs/security.md says what each binding
protects and how to deploy.

- [Auth][mrtr_trio.auth.Auth]: the settings;
- [JWTVerifier][mrtr_trio.auth.JWTVerifier]: JWT access tokens checked against the issuer's
  JWKS;
- [IntrospectionVerifier][mrtr_trio.auth.IntrospectionVerifier]: tokens checked by RFC 7662
  introspection.

Both verifiers implement the official SDK's `TokenVerifier`; any other implementation works too.
"""

from .._util import fixup_module_metadata
from ._introspection import IntrospectionVerifier
from ._jwt import JWTVerifier
from ._settings import Auth, canonical_resource

__all__ = ["Auth", "IntrospectionVerifier", "JWTVerifier", "canonical_resource"]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata
