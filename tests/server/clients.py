"""Client-side helpers: callbacks for the official mcp.Client that answer like a user would."""

from __future__ import annotations

from typing import Any

import mcp_types as types

ASKED: list[tuple[str, str]] = []


def fill(schema: dict[str, Any]) -> dict[str, Any]:
    """Plausible content for a restricted elicitation schema."""
    content: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type")
        if "enum" in prop:
            content[name] = prop["enum"][0]
        elif "oneOf" in prop:
            content[name] = prop["oneOf"][0]["const"]
        elif kind == "boolean":
            content[name] = True
        elif kind == "integer":
            content[name] = max(3, prop.get("minimum", 3))
        elif kind == "number":
            content[name] = 1.5
        elif kind == "array":
            items = prop["items"]
            content[name] = [items["enum"][0]] if "enum" in items else [items["anyOf"][0]["const"]]
        else:
            content[name] = "Alice"
    return content


async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
    ASKED.append(("elicitation/create", params.message))
    schema = getattr(params, "requested_schema", None)
    if schema is None:  # URL mode
        return types.ElicitResult(action="accept")
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return types.ElicitResult(action="accept", content=fill(schema))


async def on_sample(ctx: Any, params: Any) -> types.CreateMessageResult:
    ASKED.append(("sampling/createMessage", ""))
    text = types.TextContent(type="text", text="Paris")
    return types.CreateMessageResult(role="assistant", content=text, model="test-model")


async def on_roots(ctx: Any) -> types.ListRootsResult:
    ASKED.append(("roots/list", ""))
    return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work", "name": "w"}]})


CALLBACKS: dict[str, Any] = {
    "elicitation_callback": on_elicit,
    "sampling_callback": on_sample,
    "list_roots_callback": on_roots,
}


def text_of(result: Any) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))
