"""Tool arguments against the advertised schema (issue 20, item 8): `App(strict_arguments=True)`,
the default, checks them by JSON Schema without coercion and refuses unknown ones, reporting
every problem; `strict_arguments=False` converts and drops as pydantic does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from mrtr_trio import Runtime
from mrtr_trio.mcp import App
from mrtr_trio.mcp._registry import make_entry

from .clients import text_of

KEYS = [b"a" * 32]
VERBATIM = {
    "type": "object",
    "properties": {"size": {"type": "integer", "minimum": 1}},
    "required": ["size"],
}


def app_with(**options: Any) -> App:
    app = App("arguments", runtime=Runtime(KEYS), **options)

    @app.tool()
    async def order(ctx: Any, count: int, gift: bool = False, note: str = "") -> str:
        return f"{count!r} {gift!r} {note!r}"

    @app.tool(input_schema=VERBATIM)
    async def shirt(ctx: Any, size: int) -> str:
        return f"size {size!r}"

    @app.prompt()
    async def repeat(ctx: Any, times: int) -> str:
        return "again " * times

    @app.resource("shop://items/{number}")
    async def item(ctx: Any, number: int) -> str:
        return f"item {number!r}"

    return app


async def call(app: App, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    async with Client(app.server, mode="2026-07-28") as client:
        result = await client.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)


async def test_strict_is_the_default_and_takes_well_typed_arguments() -> None:
    app = App("default", runtime=Runtime(KEYS))
    assert app.strict_arguments is True
    assert await call(app_with(), "order", {"count": 3, "gift": True}) == (False, "3 True ''")


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"count": "3"}, ["count: '3' is not of type 'integer'"]),
        ({"count": 3, "gift": "true"}, ["gift: 'true' is not of type 'boolean'"]),
        ({"count": 3, "colour": "red"}, ["colour: not an argument of this tool"]),
        (
            {"count": "3", "gift": 1, "colur": "red"},
            [
                "count: '3' is not of type 'integer'",
                "gift: 1 is not of type 'boolean'",
                "colur: not an argument of this tool (it takes count, gift, note)",
            ],
        ),
        ({}, ["arguments: 'count' is a required property"]),
    ],
)
async def test_strict_refuses_coercion_and_unknown_arguments_naming_every_problem(
    arguments: dict[str, Any], problems: list[str]
) -> None:
    is_error, text = await call(app_with(), "order", arguments)
    assert is_error, text
    assert text.startswith("invalid arguments for tool 'order' (checked strictly"), text
    for problem in problems:
        assert problem in text, text


async def test_strict_checks_a_verbatim_schema_too() -> None:
    assert await call(app_with(), "shirt", {"size": 2}) == (False, "size 2")
    is_error, text = await call(app_with(), "shirt", {"size": 0})
    assert is_error and "size: 0 is less than the minimum of 1" in text, text


async def test_the_advertised_schema_says_unknown_arguments_are_refused() -> None:
    for strict in (True, False):
        async with Client(app_with(strict_arguments=strict).server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        generated = tools["order"].input_schema
        assert generated.get("additionalProperties") is (False if strict else None)
        assert tools["shirt"].input_schema == VERBATIM  # verbatim stays verbatim


async def test_lax_arguments_convert_and_drop() -> None:
    lax = app_with(strict_arguments=False)
    assert lax.strict_arguments is False
    result = await call(lax, "order", {"count": "3", "gift": "true", "colour": "red"})
    assert result == (False, "3 True ''")


@pytest.mark.parametrize("strict", [True, False])
async def test_prompt_arguments_and_uri_variables_are_converted_in_both_modes(
    strict: bool,
) -> None:
    async with Client(app_with(strict_arguments=strict).server, mode="2026-07-28") as client:
        prompt = await client.get_prompt("repeat", {"times": "2"})
        assert prompt.messages[0].content.text == "again again "
        resource = await client.read_resource("shop://items/7")
        assert resource.contents[0].text == "item 7"


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@given(st.dictionaries(st.sampled_from(["count", "gift", "note", "other"]), VALUES, max_size=4))
def test_the_hand_checks_never_pass_what_json_schema_refuses(arguments: dict[str, Any]) -> None:
    """Plain schemas are checked by hand first (the fast path): it may send valid arguments on
    to jsonschema, but never passes invalid ones."""

    async def order(ctx: Any, count: int, gift: bool = False, note: str = "") -> str:
        return ""

    entry = make_entry("tool", order, name=None, description=None, strict=True)
    plain, checker = entry._plain, entry._checker
    assert plain is not None and checker is not None
    if plain.passes(arguments):
        assert not list(checker.iter_errors(arguments)), arguments
    if set(arguments) <= {"count", "gift", "note"} and "count" in arguments:
        typed = (
            type(arguments["count"]) is int
            and type(arguments.get("gift", False)) is bool
            and type(arguments.get("note", "")) is str
        )
        assert plain.passes(arguments) == typed, arguments


def test_schemas_beyond_plain_types_have_no_hand_checks() -> None:
    app = app_with()
    assert app._entries["tool"]["shirt"]._plain is None  # minimum: jsonschema's
    assert app._entries["tool"]["order"]._plain is not None
