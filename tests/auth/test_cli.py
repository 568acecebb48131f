"""`mrtr-trio serve --http ... --resource --auth-issuer --auth-jwks --scope` (or their
environment variables): a served App that asks a real authorization server's tokens, and a
command line that refuses to start half-configured."""

from __future__ import annotations

import pytest

from mrtr_trio import _cli
from mrtr_trio._cli import main

from ..server.processes import http_server
from ..services import free_port
from .authserver import AuthServer
from .secured import call, challenge


@pytest.mark.parametrize("through", ["options", "environment"])
async def test_serve_asks_for_tokens_from_the_issuer_it_is_given(
    idp: AuthServer, through: str
) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    settings = {
        "resource": resource,
        "auth-issuer": idp.issuer,
        "auth-jwks": idp.jwks_url,
        "scope": "mcp:tools",
    }
    if through == "options":
        options = [part for name, value in settings.items() for part in (f"--{name}", value)]
        variables = {}
    else:
        options = []
        names = {"resource": "RESOURCE", "auth-issuer": "AUTH_ISSUER", "auth-jwks": "AUTH_JWKS"}
        variables = {f"MRTR_TRIO_{names.get(k, 'SCOPES')}": v for k, v in settings.items()}
    with http_server(None, port, *options, **variables) as served:
        assert served.url == resource
        refused = await call(resource, "deploy", None, {"service": "api"})
        assert refused.status_code == 401
        assert challenge(refused)["scope"] == "mcp:tools"
        token = await idp.token("beta", resource, "mcp:tools")
        listed = await call(resource, "only_steps", token, {"n": 2})
        assert listed.status_code == 200, listed.text
        assert listed.json()["result"]["content"][0]["text"] == "doubled=4"
        narrow = await idp.token("beta", resource, "mcp:read")
        assert (await call(resource, "only_steps", narrow, {"n": 2})).status_code == 403


def test_serve_refuses_to_start_half_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cli, "configure_logging", lambda level: None)
    for variable in _cli.AUTH_ENVIRONMENT.values():
        monkeypatch.delenv(variable, raising=False)
    http = ["--http", "127.0.0.1:0"]
    cases = {
        ("--resource", "http://127.0.0.1:1/mcp", *http): "--auth-issuer",
        ("--auth-issuer", "http://as", "--auth-jwks", "http://as/jwks", *http): "--resource",
        ("--scope", "mcp:tools", *http): "--resource",
    }
    for argv, named in cases.items():
        with pytest.raises(SystemExit) as refused:
            main(["serve", "app.py", *argv])
        assert named in str(refused.value) and "refusing to start" in str(refused.value)
    monkeypatch.setenv("MRTR_TRIO_RESOURCE", "http://127.0.0.1:1/mcp")
    with pytest.raises(SystemExit, match="--auth-jwks"):
        main(["serve", "app.py", *http])
    full = [
        "--resource",
        "http://h/mcp",
        "--auth-issuer",
        "http://as",
        "--auth-jwks",
        "http://as/j",
    ]
    with pytest.raises(SystemExit, match=r"stdio .* not authenticated"):
        main(["serve", "app.py", *full])
    with pytest.raises(SystemExit, match="absolute http"):
        main(["serve", "app.py", *http, *full[2:], "--resource", "mcp"])
