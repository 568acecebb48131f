"""Input requests and their answers: frozen values and their wire forms in both MCP eras.

A handler asks for input with [elicit][mrtr_trio.elicit], [elicit_url][mrtr_trio.elicit_url],
[create_message][mrtr_trio.create_message] or [list_roots][mrtr_trio.list_roots]; each returns a
frozen request. `request.to_wire()` is the 2026-07-28 embedded-request JSON (`{"method", "params"}`,
the value of one `inputRequests` entry); `request.to_legacy_wire(version)` is the params-bearing
body of the 2025-era server-to-client JSON-RPC request. Answers arrive as client JSON and become
[ElicitResult][mrtr_trio.ElicitResult], [CreateMessageResult][mrtr_trio.CreateMessageResult] or
[ListRootsResult][mrtr_trio.ListRootsResult] through [parse_answer][mrtr_trio.parse_answer], which
rejects anything not shaped like an answer to that request with
[InvalidInputResponse][mrtr_trio.InvalidInputResponse].

This module also knows which client capability each request needs (`missing_capabilities`).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, cast

import attrs
import blake3

from ._content import SAMPLING_ANSWER, SAMPLING_MESSAGE, check_content
from ._errors import InvalidInputResponse
from ._schema import Compiled, check_schema, compile_schema, is_int, is_mapping, is_number
from ._util import Memo, slot_setter
from ._util import short_repr as _describe

__all__ = [
    "ALL_CAPABILITIES",
    "ACTIONS",
    "ANSWER_TYPES",
    "Answer",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitRequest",
    "ElicitResult",
    "ListRootsRequest",
    "KIND_CODES",
    "KIND_NAMES",
    "LEGACY_VERSIONS",
    "ListRootsResult",
    "REQUEST_TYPES",
    "Request",
    "Root",
    "canonical_wire",
    "content_problems_for",
    "create_message",
    "elicit",
    "elicit_url",
    "fingerprint_of",
    "list_roots",
    "missing_capabilities",
    "parse_answer",
    "request_from_wire",
]

ELICIT = "elicitation/create"
SAMPLING = "sampling/createMessage"
ROOTS = "roots/list"

#: The capabilities assumed when a caller passes `client_capabilities=None` ("all declared").
ALL_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"context": {}, "tools": {}},
    "roots": {"listChanged": True},
}

#: The actions a user may answer an elicitation with, in wire order.
ACTIONS: tuple[Literal["accept", "decline", "cancel"], ...] = ("accept", "decline", "cancel")
_ROLES = ("user", "assistant")
_INCLUDE_CONTEXT = ("none", "thisServer", "allServers")
#: The 2025-era protocol versions (sessions opened with `initialize`).
LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


# ------------------------------------------------------------------------------ identity
#
# A request's fingerprint is one byte naming its kind, then a short digest of its canonical wire
# form: enough for a replay to notice that the handler now asks something else, and to say what
# kind of thing the journal recorded. Requests compute it once and keep it.

#: The first byte of a fingerprint, by request method (and `"step"`).
KIND_CODES = {ELICIT: 0, SAMPLING: 1, ROOTS: 2, "step": 3}
KIND_NAMES = {code: kind for kind, code in KIND_CODES.items()}
FINGERPRINT_BYTES = 4
_KDF_FINGERPRINT = "mrtr_trio 2026-11-30 request fingerprint"

# Sorted keys: the same request fingerprints the same whatever order its dicts were built in.
_CANONICAL_JSON = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
)


def canonical_wire(request: Request) -> str:
    """*request*'s wire form as canonical JSON (sorted keys): equal texts, equal requests."""
    return _CANONICAL_JSON.encode(request.to_wire())


def fingerprint_of(kind: str, data: bytes) -> bytes:
    """A fingerprint: the *kind*'s code, then a short digest of *data*."""
    digest = blake3.blake3(data, derive_key_context=_KDF_FINGERPRINT).digest(FINGERPRINT_BYTES - 1)
    return bytes((KIND_CODES[kind],)) + digest


def _request_fingerprint(request: Request) -> bytes:
    return fingerprint_of(request.method, canonical_wire(request).encode())


def _compile_form(request: ElicitRequest) -> Compiled:
    assert request.schema is not None
    return compile_schema(request.schema)


# ---------------------------------------------------------------------------------- requests


@attrs.frozen
class ElicitRequest:
    """Ask the user: form mode (`schema` set) or URL mode (`url` set)."""

    method: ClassVar[str] = ELICIT

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    #: The requested schema compiled (once, like the fingerprint): what answers are checked
    #: with, without looking the schema up again per answer.
    _form = functools.cached_property(_compile_form)

    message: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.message, str):
            raise TypeError(f"elicitation message must be a str, got {type(self.message).__name__}")
        if (self.schema is None) == (self.url is None):
            raise TypeError("an ElicitRequest needs exactly one of schema (form) or url (URL mode)")
        if self.schema is not None:
            check_schema(self.schema)
        if self.url is not None and (not isinstance(self.url, str) or not self.url):
            raise TypeError(f"elicitation url must be a non-empty str, got {self.url!r}")

    @property
    def mode(self) -> Literal["form", "url"]:
        """`"form"` or `"url"`."""
        return "form" if self.schema is not None else "url"

    def to_wire(self) -> dict[str, Any]:
        """The 2026-07-28 embedded request `{"method", "params"}`."""
        params: dict[str, Any]
        if self.schema is not None:
            params = {"mode": "form", "message": self.message, "requestedSchema": self.schema}
        else:
            params = {"mode": "url", "message": self.message, "url": self.url}
        return {"method": ELICIT, "params": params}

    def to_legacy_wire(
        self, protocol_version: str = "2025-11-25", *, elicitation_id: str | None = None
    ) -> dict[str, Any]:
        """The 2025-era request `{"method", "params"}`.

        2025-06-18 has no `mode` and no URL mode; 2025-11-25 URL mode needs an
        `elicitationId` (a fresh UUID unless one is given).
        """
        _check_legacy_version(protocol_version)
        wire = self.to_wire()
        params = dict(wire["params"])
        if protocol_version < "2025-11-25":
            if self.url is not None:
                raise ValueError(f"URL-mode elicitation does not exist in MCP {protocol_version}")
            del params["mode"]
        elif self.url is not None:
            params["elicitationId"] = elicitation_id or str(uuid.uuid4())
        return {"method": ELICIT, "params": params}


@attrs.frozen
class CreateMessageRequest:
    """Ask the client's LLM for a completion (sampling)."""

    method: ClassVar[str] = SAMPLING

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    messages: tuple[Mapping[str, Any], ...]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] | None = None
    model_preferences: Mapping[str, Any] | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    metadata: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.messages:
            raise ValueError("create_message needs at least one message")
        for index, message in enumerate(self.messages):
            _check_sampling_message(message, f"messages[{index}]")
        if not is_int(self.max_tokens) or self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive int, got {self.max_tokens!r}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError("system_prompt must be a str")
        if self.temperature is not None and not is_number(self.temperature):
            raise TypeError(f"temperature must be a number, got {self.temperature!r}")
        if self.stop_sequences is not None and not all(
            isinstance(s, str) for s in self.stop_sequences
        ):
            raise TypeError("stop_sequences must be a list of str")
        if self.include_context is not None and self.include_context not in _INCLUDE_CONTEXT:
            raise ValueError(f"include_context must be one of {_INCLUDE_CONTEXT}")
        for name in ("model_preferences", "metadata"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"{name} must be a dict")

    def to_wire(self) -> dict[str, Any]:
        """The embedded request `{"method", "params"}` (the same params in both eras)."""
        params: dict[str, Any] = {"messages": list(self.messages), "maxTokens": self.max_tokens}
        optional = (
            ("systemPrompt", self.system_prompt),
            ("temperature", self.temperature),
            ("stopSequences", list(self.stop_sequences) if self.stop_sequences else None),
            ("modelPreferences", self.model_preferences),
            ("includeContext", self.include_context),
            ("metadata", self.metadata),
        )
        params.update((name, value) for name, value in optional if value is not None)
        return {"method": SAMPLING, "params": params}

    def to_legacy_wire(self, protocol_version: str = "2025-11-25") -> dict[str, Any]:
        """The 2025-era request: the same `{"method", "params"}`."""
        _check_legacy_version(protocol_version)
        return self.to_wire()


@attrs.frozen
class ListRootsRequest:
    """Ask the client for its roots."""

    method: ClassVar[str] = ROOTS

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    def to_wire(self) -> dict[str, Any]:
        """The embedded request `{"method": "roots/list", "params": {}}`."""
        return {"method": ROOTS, "params": {}}

    def to_legacy_wire(self, protocol_version: str = "2025-11-25") -> dict[str, Any]:
        """The 2025-era request: the same `{"method", "params"}`."""
        _check_legacy_version(protocol_version)
        return self.to_wire()


Request: TypeAlias = ElicitRequest | CreateMessageRequest | ListRootsRequest
#: The request classes, for `isinstance` checks.
REQUEST_TYPES = (ElicitRequest, CreateMessageRequest, ListRootsRequest)


def elicit(message: str, schema: Mapping[str, Any]) -> ElicitRequest:
    """A form-mode elicitation: show *message* and a form for the restricted JSON *schema*
    (`{"type": "object", "properties": {...}, "required": [...]}`)."""
    if schema is None:
        raise TypeError("elicit() needs a schema; use elicit_url() for URL mode")
    # Replays rebuild the same requests every round: hand back the one already validated and
    # fingerprinted when the schema is the same object with the same content.
    key = (message, id(schema)) if type(message) is str else None
    if key is not None:
        known = _FORMS.lookup(key)  # a str and an int: hashable
        if known is not None and known[0] is schema and known[1].schema == schema:
            return known[1]
    request = ElicitRequest(message, schema=_copy_json(schema))
    if key is not None:
        _FORMS.put(key, (schema, request))
    return request


def elicit_url(message: str, url: str) -> ElicitRequest:
    """A URL-mode elicitation: ask the user to open *url* (for anything sensitive)."""
    if url is None:
        raise TypeError("elicit_url() needs a url")
    key = (message, url)
    if type(message) is str and type(url) is str:
        known = _URLS.get(key)
        if known is None:
            known = _URLS.put(key, ElicitRequest(message, url=url))
        return known
    return ElicitRequest(message, url=url)


def create_message(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] | None = None,
    model_preferences: Mapping[str, Any] | None = None,
    include_context: Literal["none", "thisServer", "allServers"] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> CreateMessageRequest:
    """A sampling request. *messages* is a string (one user text message) or a list of
    `{"role": "user" | "assistant", "content": block | [blocks]}` dicts."""
    key: tuple[Any, ...] | None = None
    if type(messages) is str and model_preferences is None and metadata is None:
        stops = tuple(stop_sequences) if isinstance(stop_sequences, list) else stop_sequences
        # Types too: 1, 1.0 and True are equal keys, but not equal requests (True is refused,
        # and 1 and 1.0 have different wire forms, so different fingerprints).
        key = (messages, max_tokens, type(max_tokens), system_prompt, temperature)
        key += (type(temperature), stops, include_context)
        known = _SAMPLINGS.get(key)  # (an unhashable option is not cached: the checks name it)
        if known is not None:
            return known
    request = _create_message(
        messages,
        max_tokens=max_tokens,
        system_prompt=system_prompt,
        temperature=temperature,
        stop_sequences=stop_sequences,
        model_preferences=model_preferences,
        include_context=include_context,
        metadata=metadata,
    )
    return request if key is None else _SAMPLINGS.put(key, request)


def _create_message(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None,
    temperature: float | None,
    stop_sequences: Sequence[str] | None,
    model_preferences: Mapping[str, Any] | None,
    include_context: Literal["none", "thisServer", "allServers"] | None,
    metadata: Mapping[str, Any] | None,
) -> CreateMessageRequest:
    if isinstance(messages, str):
        message_tuple: tuple[Mapping[str, Any], ...] = (
            {"role": "user", "content": {"type": "text", "text": messages}},
        )
    elif isinstance(messages, Sequence):
        message_tuple = tuple(cast("Sequence[Mapping[str, Any]]", messages))
    else:
        raise TypeError(
            f"messages must be a str or a list of message dicts, got {type(messages).__name__}"
        )
    if isinstance(stop_sequences, str):
        raise TypeError("stop_sequences must be a list of str, not a str")
    return CreateMessageRequest(
        message_tuple,
        max_tokens,
        system_prompt=system_prompt,
        temperature=temperature,
        stop_sequences=tuple(stop_sequences) if stop_sequences is not None else None,
        model_preferences=model_preferences,
        include_context=include_context,
        metadata=metadata,
    )


_LIST_ROOTS = ListRootsRequest()


def list_roots() -> ListRootsRequest:
    """A roots request."""
    return _LIST_ROOTS


# The constructors' memory of requests already built (bounded: cleared when full). A hit costs
# a lookup instead of a schema check and a fingerprint, which matters because every modern round
# replays the handler and so rebuilds every request it asked before.
_FORMS: Memo[tuple[str, int], tuple[Mapping[str, Any], ElicitRequest]] = Memo()
_URLS: Memo[tuple[str, str], ElicitRequest] = Memo()
_SAMPLINGS: Memo[tuple[Any, ...], CreateMessageRequest] = Memo()
_A = TypeVar("_A", "ElicitResult", "CreateMessageResult", "ListRootsResult")


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-like *value* (dicts and lists copied, leaves shared)."""
    if isinstance(value, Mapping):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_json(item) for item in value]
    return value


def request_from_wire(wire: object) -> Request:
    """The request for an embedded-request JSON `{"method", "params"}` (either era).

    Raises `ValueError` naming what is wrong.
    """
    if not isinstance(wire, Mapping) or not isinstance(wire.get("params", {}), Mapping):
        raise ValueError(f"an input request is an object with method and params, got {wire!r}")
    method, params = wire.get("method"), wire.get("params", {})
    try:
        if method == ELICIT:
            if params.get("mode", "form") == "url":
                return elicit_url(params["message"], params["url"])
            return elicit(params["message"], params["requestedSchema"])
        if method == SAMPLING:
            return create_message(
                params["messages"],
                max_tokens=params["maxTokens"],
                system_prompt=params.get("systemPrompt"),
                temperature=params.get("temperature"),
                stop_sequences=params.get("stopSequences"),
                model_preferences=params.get("modelPreferences"),
                include_context=params.get("includeContext"),
                metadata=params.get("metadata"),
            )
        if method == ROOTS:
            return _LIST_ROOTS
    except KeyError as missing:
        raise ValueError(f"{method} request params lack {missing}") from None
    except TypeError as problem:
        raise ValueError(f"{method} request is malformed: {problem}") from None
    raise ValueError(f"unknown input request method {method!r}")


# ----------------------------------------------------------------------------------- answers


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
_ANSWER_FIELDS = {cls: [(f.name, f.default) for f in attrs.fields(cls)] for cls in ANSWER_TYPES}


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
        if isinstance(json, ANSWER_TYPES):
            json = json.to_wire()
        if not is_mapping(json):
            raise InvalidInputResponse(
                f"expected an object answering {request.method}, got {_describe(json)}"
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


# ------------------------------------------------------------------------------ capabilities


def missing_capabilities(
    requests: Iterable[Request], client_capabilities: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ClientCapabilities-shaped object naming what *requests* need and the client lacks
    (empty when nothing is missing). `client_capabilities=None` means "all declared"."""
    missing: dict[str, Any] = {}
    if client_capabilities is None:
        return missing
    for request in requests:  # (checked every round: nothing is built when all is declared)
        area, keys = _required_capability(request)
        declared = client_capabilities.get(area)
        if not isinstance(declared, Mapping):
            missing.setdefault(area, {}).update({key: {} for key in keys})
            continue
        if keys is _FORM and not declared:
            continue  # a bare "elicitation": {} declares form mode (2025 compatibility)
        for key in keys:
            if key not in declared:
                missing.setdefault(area, {})[key] = {}
    return missing


_FORM = ("form",)
_URL = ("url",)
_CONTEXT = ("context",)


def _required_capability(request: Request) -> tuple[str, tuple[str, ...]]:
    """The capability *request* needs: its area, and the keys it needs declared there."""
    if isinstance(request, ElicitRequest):
        return "elicitation", _FORM if request.mode == "form" else _URL
    if isinstance(request, CreateMessageRequest):
        if request.include_context in ("thisServer", "allServers"):
            return "sampling", _CONTEXT
        return "sampling", ()
    return "roots", ()


# ----------------------------------------------------------------------------------- helpers


def _check_legacy_version(protocol_version: str) -> None:
    if protocol_version not in LEGACY_VERSIONS:
        raise ValueError(
            f"{protocol_version!r} is not a legacy MCP version (one of {LEGACY_VERSIONS})"
        )


def _check_sampling_message(message: object, where: str) -> None:
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a dict with role and content, got {message!r}")
    if message.get("role") not in _ROLES:
        raise ValueError(f"{where}.role must be 'user' or 'assistant', got {message.get('role')!r}")
    check_content(message.get("content"), f"{where}.content", SAMPLING_MESSAGE)


def _is_content_value(value: object) -> bool:
    kind = type(value)
    if kind is str or kind is bool or kind is int:  # the common cases, at once
        return True
    if isinstance(value, str | bool) or is_number(value):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
