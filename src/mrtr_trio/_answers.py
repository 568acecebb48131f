"""Answers: what the client sends back for a request, as frozen values, read from its JSON.

Answers arrive as client JSON and become [ElicitResult][mrtr_trio.ElicitResult],
[CreateMessageResult][mrtr_trio.CreateMessageResult] or
[ListRootsResult][mrtr_trio.ListRootsResult] through [parse_answer][mrtr_trio.parse_answer], which
rejects anything not shaped like an answer to that request with
[InvalidInputResponse][mrtr_trio.InvalidInputResponse]; `content_problems_for` says whether an
accepted form satisfies the requested schema. `answer.to_wire()` is the answer's JSON (the same in
both eras). `trusted_answer` rebuilds an answer read back from a verified token without checking
it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

import attrs

from ._content import SAMPLING_ANSWER, check_content
from ._errors import InvalidInputResponse
from ._requests import (
    ELICIT,
    REQUEST_TYPES,
    ROOTS,
    SAMPLING,
    CreateMessageRequest,
    ElicitRequest,
    Request,
)
from ._requests import ROLES as _ROLES
from ._schema import is_mapping, is_number
from ._util import short_repr as _describe
from ._util import slot_setter

__all__ = [
    "ACTIONS",
    "ANSWER_TYPES",
    "Answer",
    "CreateMessageResult",
    "ElicitResult",
    "ListRootsResult",
    "Root",
    "content_problems_for",
    "parse_answer",
    "sdk_answer_json",
    "trusted_answer",
    "trusted_elicit_result",
]

#: The actions a user may answer an elicitation with, in wire order.
ACTIONS: tuple[Literal["accept", "decline", "cancel"], ...] = ("accept", "decline", "cancel")
_A = TypeVar("_A", "ElicitResult", "CreateMessageResult", "ListRootsResult")


@attrs.frozen
class ElicitResult:
    """The user's answer to an elicitation. `content` is present for a form-mode accept."""

    answers: ClassVar[str] = ELICIT

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {self.action!r}")
        if self.content is not None and not isinstance(self.content, Mapping):
            raise TypeError(f"content must be a dict, got {type(self.content).__name__}")

    @property
    def accepted(self) -> bool:
        """True when the user accepted."""
        return self.action == "accept"

    def to_wire(self) -> dict[str, Any]:
        """The ElicitResult JSON."""
        if self.content is None:
            return {"action": self.action}
        return {"action": self.action, "content": dict(self.content)}


@attrs.frozen
class CreateMessageResult:
    """The client LLM's completion. `content` is one wire content block or a list of them."""

    answers: ClassVar[str] = SAMPLING

    role: Literal["user", "assistant"]
    content: Mapping[str, Any] | tuple[Mapping[str, Any], ...]
    model: str
    stop_reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"role must be one of {_ROLES}, got {self.role!r}")
        check_content(self.content, "content", SAMPLING_ANSWER)
        if not isinstance(self.model, str):
            raise TypeError(f"model must be a str, got {type(self.model).__name__}")
        if self.stop_reason is not None and not isinstance(self.stop_reason, str):
            raise TypeError("stop_reason must be a str")

    @property
    def text(self) -> str:
        """The text of the text blocks, joined."""
        blocks = self.content if isinstance(self.content, tuple | list) else (self.content,)
        return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")

    def to_wire(self) -> dict[str, Any]:
        """The CreateMessageResult JSON."""
        content = (
            [dict(b) for b in self.content]
            if isinstance(self.content, tuple | list)
            else dict(self.content)
        )
        wire: dict[str, Any] = {"role": self.role, "content": content, "model": self.model}
        if self.stop_reason is not None:
            wire["stopReason"] = self.stop_reason
        return wire


@attrs.frozen
class Root:
    """One client root."""

    uri: str
    name: str | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.uri, str):
            raise TypeError(f"root uri must be a str, got {type(self.uri).__name__}")
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError("root name must be a str")

    def to_wire(self) -> dict[str, Any]:
        """The Root JSON."""
        return {"uri": self.uri} if self.name is None else {"uri": self.uri, "name": self.name}


def _to_roots(roots: Iterable[Root]) -> tuple[Root, ...]:
    return tuple(roots)


@attrs.frozen
class ListRootsResult:
    """The client's roots."""

    answers: ClassVar[str] = ROOTS

    roots: tuple[Root, ...] = attrs.field(converter=_to_roots)

    def __attrs_post_init__(self) -> None:
        if not all(isinstance(r, Root) for r in self.roots):
            raise TypeError("roots must be Root values")

    def to_wire(self) -> dict[str, Any]:
        """The ListRootsResult JSON."""
        return {"roots": [r.to_wire() for r in self.roots]}


Answer: TypeAlias = ElicitResult | CreateMessageResult | ListRootsResult


def trusted_answer(cls: type[_A], *values: Any) -> _A:
    """An answer built from *values* (its fields, in order) without checking them again: for
    answers read back from a verified token, which were checked when they arrived."""
    answer = _new(cls)
    fields = _ANSWER_FIELDS[cls]
    for (name, _), value in zip(fields, values, strict=False):
        _set(answer, name, value)
    for name, default in fields[len(values) :]:
        _set(answer, name, default)
    return answer


def trusted_elicit_result(action: str, content: Mapping[str, Any] | None) -> ElicitResult:
    """`trusted_answer` for the commonest answer, unrolled
    (a replay builds one per recorded elicitation)."""
    answer = _new(ElicitResult)
    _set_action(answer, action)
    _set_content(answer, content)
    return answer


_new = object.__new__
_set = object.__setattr__
_NOTHING: Mapping[str, Any] = {}
# The slots' own setters: a third cheaper than `object.__setattr__` by name (no attribute
# lookup), for the answer a replay builds per recorded elicitation.
_set_action = slot_setter(ElicitResult, "action")
_set_content = slot_setter(ElicitResult, "content")


#: The answer classes, for `isinstance` checks.
ANSWER_TYPES = (ElicitResult, CreateMessageResult, ListRootsResult)
_ANSWER_NAMES = {cls.answers: cls.__name__ for cls in ANSWER_TYPES}
_ANSWER_FIELDS = {cls: [(f.name, f.default) for f in attrs.fields(cls)] for cls in ANSWER_TYPES}


def sdk_answer_json(model: Any) -> Any:
    """The wire JSON of a pydantic model, such as the official SDK's `mcp_types.ElicitResult`
    (what its client callbacks return): dumped by alias, without unset fields. Anything else
    is returned as it is."""
    dump = getattr(model, "model_dump", None)
    if not callable(dump):
        return model
    try:
        return dump(by_alias=True, exclude_none=True, mode="json")
    except Exception:  # not a pydantic model after all: reported as what it is
        return model


def parse_answer(request: Request, json: object) -> Answer:
    """The answer object for *request*, from a client's JSON (or an answer object).

    Raises [InvalidInputResponse][mrtr_trio.InvalidInputResponse] (-32602) when *json* is not
    shaped like an answer to that kind of request (sampling content must be text, image or audio
    blocks of the protocol's shape). Unknown keys are dropped: extra answer fields, content-block
    fields no block kind defines, and elicitation content properties the requested schema does
    not name. The requested schema is *not* checked here (see `content_problems_for`): the
    runtime asks again instead of failing.
    """
    if not isinstance(request, REQUEST_TYPES):
        raise TypeError(f"parse_answer needs a request, got {type(request).__name__}")
    if type(json) is not dict:  # a client's JSON object is a dict: the rest is rarer
        json = json.to_wire() if isinstance(json, ANSWER_TYPES) else sdk_answer_json(json)
        if not is_mapping(json):
            raise InvalidInputResponse(
                f"expected an object answering {request.method} (a JSON object, a "
                f"mrtr_trio.{_ANSWER_NAMES[request.method]} or the SDK's "
                f"mcp_types.{_ANSWER_NAMES[request.method]}), got {_describe(json)}"
            )
    if isinstance(request, ElicitRequest):
        return _parse_elicit(request, json)
    if isinstance(request, CreateMessageRequest):
        return _parse_sampling(json)
    return _parse_roots(json)


def _parse_elicit(request: ElicitRequest, json: Mapping[str, Any]) -> ElicitResult:
    action = json.get("action")
    if action not in ACTIONS:
        raise InvalidInputResponse(
            f"an elicitation answer needs action accept, decline or cancel, got {_describe(action)}"
        )
    if action != "accept" or request.url is not None:
        return ElicitResult(action)  # decline, cancel and a URL-mode accept carry no content
    content = json.get("content")
    if not is_mapping(content):
        raise InvalidInputResponse(
            f"a form-mode accept needs an object content, got {_describe(content)}"
        )
    # Properties the requested schema did not ask for never reach the handler or the token.
    asked = request.schema.get("properties", _NOTHING) if request.schema is not None else _NOTHING
    kept = {}
    for name, value in content.items():  # one loop: checks each value, keeps what was asked
        if not (isinstance(name, str) and _is_content_value(value)):
            raise InvalidInputResponse(
                f"elicitation content {name!r} must be a string, number, boolean or list of "
                f"strings, got {_describe(value)}"
            )
        if name in asked:
            kept[name] = value
    # Checked above: the action is one of ACTIONS and the content a dict.
    return trusted_elicit_result("accept", kept)


def _parse_sampling(json: Mapping[str, Any]) -> CreateMessageResult:
    role, content, model = json.get("role"), json.get("content"), json.get("model")
    stop_reason = json.get("stopReason")
    if role not in _ROLES:
        raise InvalidInputResponse(
            f"a sampling answer needs role user or assistant, got {_describe(role)}"
        )
    if not isinstance(model, str):
        raise InvalidInputResponse(
            f"a sampling answer needs a string model, got {_describe(model)}"
        )
    if stop_reason is not None and not isinstance(stop_reason, str):
        raise InvalidInputResponse(f"stopReason must be a string, got {_describe(stop_reason)}")
    try:
        blocks = check_content(content, "content", SAMPLING_ANSWER)
    except (TypeError, ValueError) as problem:
        raise InvalidInputResponse(f"a sampling answer has a bad content: {problem}") from None
    return trusted_answer(CreateMessageResult, role, blocks, model, stop_reason)  # all checked


def _parse_roots(json: Mapping[str, Any]) -> ListRootsResult:
    roots = json.get("roots")
    if not isinstance(roots, list):
        raise InvalidInputResponse(f"a roots answer needs a roots list, got {_describe(roots)}")
    parsed = []
    for index, root in enumerate(roots):
        if not isinstance(root, Mapping) or not isinstance(root.get("uri"), str):
            raise InvalidInputResponse(
                f"roots[{index}] must be an object with a string uri, got {_describe(root)}"
            )
        if not root["uri"][:7].lower() == "file://":  # the protocol's rule for a root
            raise InvalidInputResponse(
                f"roots[{index}].uri must be a file:// URI, got {_describe(root['uri'])}"
            )
        name = root.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidInputResponse(f"roots[{index}].name must be a string")
        parsed.append(Root(root["uri"], name))
    return ListRootsResult(parsed)


def content_problems_for(request: Request, answer: Answer) -> list[str]:
    """Why *answer* does not satisfy what *request* asked (an accepted form that fails the
    requested schema); empty when it does."""
    if (
        isinstance(answer, ElicitResult)
        and answer.content is not None
        and isinstance(request, ElicitRequest)
        and request.schema is not None
    ):
        return request._form.problems(answer.content)
    return []


def _is_content_value(value: object) -> bool:
    kind = type(value)
    if kind is str or kind is bool or kind is int:  # the common cases, at once
        return True
    if isinstance(value, str | bool) or is_number(value):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
