"""Resource templates, parsed and matched by the official SDK's RFC 6570 UriTemplate: captured
values are percent-decoded, multi-segment and query variables work, and templates that cannot
serve their handler are refused at registration."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.mcp import App

from .clients import CALLBACKS

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}

app = App("resources", runtime=Runtime([b"r" * 32]))


@app.resource("notes://{name}")
async def note(ctx: Context, name: str) -> str:
    return f"note {name!r}"


@app.resource("notes://pinned")
async def pinned(ctx: Context) -> str:
    return "the pinned note"


@app.resource("files://{+path}")
async def file(ctx: Context, path: str):
    ok = yield elicit(f"Read {path}?", CONFIRM)
    yield done(f"file {path!r}: {'read' if ok.accepted else 'refused'}")


@app.resource("logs://{service}{?since,level}")
async def logs(ctx: Context, service: str, since: int = 0, level: str = "info") -> str:
    return f"{service} since {since} at {level}"


@app.resource("tree://{/parts*}")
async def tree(ctx: Context, parts: list[str]) -> str:
    return " > ".join(parts)


READS = [
    ("notes://a%20b", "note 'a b'"),
    ("notes://caf%C3%A9", "note 'café'"),
    ("notes://x%2Fy", "note 'x/y'"),
    ("notes://pinned", "the pinned note"),  # the plain URI wins over the template
    ("files://docs/read%20me.md", "file 'docs/read me.md': read"),
    ("logs://api", "api since 0 at info"),
    ("logs://api?level=error&since=5", "api since 5 at error"),
    ("tree:///a/b%20c", "a > b c"),
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_templates_match_and_percent_decode(mode: str) -> None:
    async with Client(app.server, mode=mode, **CALLBACKS) as client:
        for uri, text in READS:
            result = await client.read_resource(uri)
            assert (uri, result.contents[0].text) == (uri, text)


async def test_a_uri_no_template_matches_is_unknown_and_a_bad_value_is_invalid() -> None:
    async with Client(app.server, mode="2026-07-28", **CALLBACKS) as client:
        with pytest.raises(MCPError, match="Unknown resource: notes://a/b") as unknown:
            await client.read_resource("notes://a/b")  # {name} stops at a literal '/'
        assert unknown.value.code == -32602
        with pytest.raises(MCPError, match="since") as invalid:
            await client.read_resource("logs://api?since=yesterday")
        assert invalid.value.code == -32602


async def test_templates_are_listed_as_written() -> None:
    async with Client(app.server, mode="2026-07-28", **CALLBACKS) as client:
        templates = (await client.list_resource_templates()).resource_templates
        listed = (await client.list_resources()).resources
    assert [t.uri_template for t in templates] == [
        "notes://{name}",
        "files://{+path}",
        "logs://{service}{?since,level}",
        "tree://{/parts*}",
    ]
    assert [str(r.uri) for r in listed] == ["notes://pinned"]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("notes://{a}{b}", "adjacent"),
        ("notes://{name", "Unclosed expression"),
        ("notes://{na me}", "Invalid variable name"),
        ("notes://{other}", r"parameters after the context \(\['name'\]\) must be"),
    ],
)
def test_unusable_templates_are_refused_at_registration(uri: str, message: str) -> None:
    other = App("refusing", runtime=Runtime([b"r" * 32]))

    async def handler(ctx: Context, name: str) -> str:
        return name

    with pytest.raises((TypeError, ValueError), match=message):
        other.resource(uri)(handler)


def test_a_query_variable_needs_a_default() -> None:
    other = App("refusing", runtime=Runtime([b"r" * 32]))

    async def handler(ctx: Context, service: str, since: int) -> str:
        return service

    with pytest.raises(TypeError, match="query variable 'since' may be left out"):
        other.resource("logs://{service}{?since}")(handler)
