"""MCP content blocks: the shapes the protocol allows, checked, and trimmed to their known fields.

A content block is a JSON object whose string `type` names its kind. The kinds and their fields
are those of the MCP schema (the SDK's `mcp_types`):

| kind | required | optional |
|---|---|---|
| `text` | `text` | |
| `image`, `audio` | `data` (base64), `mimeType` | |
| `resource_link` | `uri`, `name` | `title`, `description`, `mimeType`, `size`, `icons` |
| `resource` | `resource` (`uri`, and `text` or `blob`; `mimeType`) | |
| `tool_use` | `id`, `name`, `input` (object) | |
| `tool_result` | `toolUseId` | `content` (blocks), `structuredContent`, `isError` |

Every kind may also carry `annotations` and `_meta` (objects). Which kinds a place accepts is the
caller's choice: a sampling answer to a request without tools carries text, image or audio
([SAMPLING_ANSWER][mrtr_trio._content.SAMPLING_ANSWER]). Checks are the same in both eras;
trimming drops the keys no kind defines, so unknown keys never reach a handler or a token.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from ._util import short_repr as _describe

__all__ = ["SAMPLING_ANSWER", "SAMPLING_MESSAGE", "check_content"]

#: A field check: the problem with a value (`"must be a string"`), or `None`.
_Check: TypeAlias = Callable[[Any], str | None]


def _is(kind: type | tuple[type, ...], name: str) -> _Check:
    def check(value: Any) -> str | None:
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            return None
        return f"must be {name}, got {_describe(value)}"

    return check


_STR = _is(str, "a string")
_OBJECT = _is(Mapping, "an object")
_LIST = _is(list, "a list")
_INT = _is(int, "an integer")
_BOOL = _is(bool, "a boolean")


def _any(value: Any) -> str | None:
    return None


def _resource_contents(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return f"must be an object with uri and text or blob, got {_describe(value)}"
    if not isinstance(value.get("uri"), str):
        return "must have a string uri"
    bodies = [field for field in ("text", "blob") if field in value]
    if len(bodies) != 1 or not isinstance(value[bodies[0]], str):
        return "must have exactly one of a string text or a string blob"
    if "mimeType" in value and not isinstance(value["mimeType"], str):
        return "mimeType must be a string"
    return None


def _blocks(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"must be a list of content blocks, got {_describe(value)}"
    for index, block in enumerate(value):
        problem = _block_problem(block, _CONTENT_BLOCK)
        if problem is not None:
            return f"[{index}] {problem}"
    return None


#: kind → (required fields, optional fields), each field with its check.
_KINDS: dict[str, tuple[dict[str, _Check], dict[str, _Check]]] = {
    "text": ({"text": _STR}, {}),
    "image": ({"data": _STR, "mimeType": _STR}, {}),
    "audio": ({"data": _STR, "mimeType": _STR}, {}),
    "resource_link": (
        {"uri": _STR, "name": _STR},
        {"title": _STR, "description": _STR, "mimeType": _STR, "size": _INT, "icons": _LIST},
    ),
    "resource": ({"resource": _resource_contents}, {}),
    "tool_use": ({"id": _STR, "name": _STR, "input": _OBJECT}, {}),
    "tool_result": (
        {"toolUseId": _STR},
        {"content": _blocks, "structuredContent": _any, "isError": _BOOL},
    ),
}
_COMMON: dict[str, _Check] = {"annotations": _OBJECT, "_meta": _OBJECT}
#: kind → the fields a block of it keeps.
_KNOWN = {
    kind: frozenset({"type", *required, *optional, *_COMMON})
    for kind, (required, optional) in _KINDS.items()
}
#: kind → its optional fields and the common ones, with their checks.
_OPTIONAL = {kind: {**optional, **_COMMON} for kind, (_, optional) in _KINDS.items()}

#: The kinds a sampling answer carries (the request offers the client's LLM no tools).
SAMPLING_ANSWER = ("text", "image", "audio")
#: The kinds a sampling request's messages may carry.
SAMPLING_MESSAGE = ("text", "image", "audio", "tool_use", "tool_result")
#: The kinds of a tool result's or a prompt's content.
_CONTENT_BLOCK = ("text", "image", "audio", "resource_link", "resource")


def check_content(
    content: object, where: str, kinds: tuple[str, ...]
) -> Mapping[str, Any] | tuple[Mapping[str, Any], ...]:
    """*content* (one block, or a non-empty list of them) checked against the shapes of *kinds*
    and trimmed to the fields those kinds define: a block, or a tuple of blocks.

    Raises `TypeError` (not a block) or `ValueError` (a block of the wrong shape) naming
    *where* and the problem.
    """
    if isinstance(content, list | tuple):
        if not content:
            raise ValueError(f"{where} must not be an empty list")
        return tuple(_checked(block, f"{where}[{i}]", kinds) for i, block in enumerate(content))
    return _checked(content, where, kinds)


def _checked(block: object, where: str, kinds: tuple[str, ...]) -> Mapping[str, Any]:
    problem = _block_problem(block, kinds)
    if problem is not None:
        raise (ValueError if isinstance(block, Mapping) else TypeError)(f"{where} {problem}")
    assert isinstance(block, Mapping)
    known = _KNOWN[block["type"]]
    return {name: value for name, value in block.items() if name in known}


def _block_problem(block: object, kinds: tuple[str, ...]) -> str | None:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        return f"must be a content block with a string type, got {_describe(block)}"
    kind = block["type"]
    if kind not in kinds:
        return f"has type {_describe(kind)}; expected one of {', '.join(kinds)}"
    required, _ = _KINDS[kind]
    for name, check in required.items():
        if name not in block:
            return f"({kind}) lacks {name}"
        problem = check(block[name])
        if problem is not None:
            return f"({kind}) {name} {problem}"
    for name, check in _OPTIONAL[kind].items():
        if name in block and block[name] is not None:
            problem = check(block[name])
            if problem is not None:
                return f"({kind}) {name} {problem}"
    return None
