"""Hypothesis strategies for property-testing mrtr_trio handlers, and the runtime itself.

- [answers_for][mrtr_trio.testing.strategies.answers_for]: valid answers to one request (accepted
  form content satisfies the requested schema; decline and cancel; URL-mode accepts; sampling
  results; file roots);
- [form_content][mrtr_trio.testing.strategies.form_content] and
  [schemas][mrtr_trio.testing.strategies.schemas]: content for a restricted elicitation schema, and
  such schemas;
- [answer_functions][mrtr_trio.testing.strategies.answer_functions]: `answer(key, request)`
  functions drawing from [answers_for][mrtr_trio.testing.strategies.answers_for], the same answers
  in both eras (see [AnswerScript][mrtr_trio.testing.AnswerScript]);
- [flows][mrtr_trio.testing.strategies.flows]: random yield-style handler programs, with arguments
  and an answer function, to property-test the runtime (`assert_eras_agree` over `flows()`).

This module needs hypothesis, which mrtr_trio's `test` extra brings (`pip install -e ".[test]"`
in a checkout of mrtr_trio), or `pip install hypothesis`; [mrtr_trio.testing][] itself does
not. Import it as `from mrtr_trio.testing import strategies`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import string
from collections.abc import AsyncGenerator, Callable, Collection, Mapping
from typing import Any, Literal, TypeAlias

import attrs

try:
    from hypothesis import strategies as st
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "mrtr_trio.testing.strategies needs hypothesis: install mrtr_trio's test extra "
        "(pip install -e '.[test]' in its checkout) or hypothesis itself (pip install hypothesis)"
    ) from error

from .. import _values
from .._context import Context
from .._flow import done, pause, step
from .._schema import check_schema, content_problems
from .._values import (
    Answer,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    Request,
    Root,
    canonical_wire,
    create_message,
    elicit,
    elicit_url,
    list_roots,
)
from ._answers import AnswerScript

__all__ = [
    "ACTIONS",
    "FlowCase",
    "Ledger",
    "Program",
    "UnsatisfiableSchema",
    "answer_functions",
    "answers_for",
    "flows",
    "form_content",
    "program_of",
    "programs",
    "schemas",
]

#: The elicitation actions [answers_for][mrtr_trio.testing.strategies.answers_for] draws from by
#: default: every action there is.
ACTIONS: tuple[str, ...] = _values.ACTIONS

# The range CBOR carries without tags (major types 0 and 1).
_WORD = string.ascii_letters + string.digits


class UnsatisfiableSchema(ValueError):
    """No content can satisfy a required property of the schema (for example
    `minLength` > `maxLength`, or a `date` with `maxLength` 5)."""


# ------------------------------------------------------------------------------- answers


def answers_for(
    request: Request, *, actions: Collection[str] = ACTIONS
) -> st.SearchStrategy[Answer]:
    """Valid answers to *request*: answer objects the runtime accepts without asking again.

    - form-mode elicitation: `accept` with content drawn by
      [form_content][mrtr_trio.testing.strategies.form_content] (it satisfies the requested schema),
      `decline` and `cancel`;
    - URL-mode elicitation: `accept` (no content), `decline` and `cancel`;
    - sampling: [CreateMessageResult][mrtr_trio.CreateMessageResult] with one or more text blocks;
    - roots: [ListRootsResult][mrtr_trio.ListRootsResult] with zero to three `file://` roots.

    *actions* limits the elicitation actions (e.g. `actions=["accept"]`). When the schema
    cannot be satisfied, `accept` is left out; if nothing is left, `ValueError`.
    """
    if isinstance(request, ElicitRequest):
        unknown = set(actions) - set(ACTIONS)
        if unknown:
            raise ValueError(f"unknown elicitation actions {sorted(unknown)}; use {ACTIONS}")
        options: list[st.SearchStrategy[Answer]] = []
        if "accept" in actions:
            if request.schema is None:
                options.append(st.just(ElicitResult("accept")))
            else:
                try:
                    content = form_content(request.schema)
                except UnsatisfiableSchema:
                    pass
                else:
                    options.append(content.map(_accept))
        options.extend(st.just(ElicitResult(a)) for a in ("decline", "cancel") if a in actions)
        if not options:
            why = "the schema cannot be satisfied" if actions else "no actions were given"
            raise ValueError(f"no answer to {request.message!r} with actions {actions}: {why}")
        return st.one_of(options)
    if isinstance(request, CreateMessageRequest):
        return _sampling_results
    if isinstance(request, ListRootsRequest):
        return _roots_results
    raise TypeError(f"answers_for() needs a request, got {request!r}")


def _accept(content: dict[str, Any]) -> Answer:
    return ElicitResult("accept", content)


_text_block = st.text(max_size=24).map(lambda text: {"type": "text", "text": text})
_sampling_results: st.SearchStrategy[Answer] = st.builds(
    CreateMessageResult,
    role=st.sampled_from(["assistant", "user"]),
    content=st.one_of(_text_block, st.lists(_text_block, min_size=1, max_size=3).map(tuple)),
    model=st.sampled_from(["test-model", "claude", "gpt", ""]),
    stop_reason=st.none() | st.sampled_from(["endTurn", "stopSequence", "maxTokens"]),
)
_path_segment = st.text(alphabet=_WORD + "-_.", min_size=1, max_size=8)
_file_uri = st.lists(_path_segment, max_size=3).map(lambda parts: "file:///" + "/".join(parts))
_roots_results: st.SearchStrategy[Answer] = st.lists(
    st.builds(Root, _file_uri, st.none() | st.text(max_size=10)), max_size=3
).map(ListRootsResult)


def form_content(schema: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Accepted content for the restricted elicitation *schema*: every required property and
    some of the optional ones, each within its type, enum or `oneOf`/`anyOf` choices,
    length, format, numeric and item-count bounds.

    Raises [UnsatisfiableSchema][mrtr_trio.testing.strategies.UnsatisfiableSchema] when a required
    property cannot be satisfied (an optional one that cannot is left out), and
    `ValueError`/`TypeError` when *schema* is not a valid elicitation schema.
    """
    check_schema(schema)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, prop in properties.items():
        try:
            values = _values_for(prop)
        except UnsatisfiableSchema as problem:
            if name in required:
                raise UnsatisfiableSchema(f"property {name!r}: {problem}") from None
            continue
        (fixed if name in required else optional)[name] = values
    return st.fixed_dictionaries(fixed, optional=optional)


def _values_for(prop: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    kind = prop["type"]
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low, high = _integer_bounds(prop.get("minimum"), prop.get("maximum"))
        if low is not None and high is not None and low > high:
            raise UnsatisfiableSchema(f"no integer in [{low}, {high}]")
        return st.integers(low, high)
    if kind == "number":
        return _numbers(prop)
    if kind == "array":
        return _multi_select(prop)
    return _strings(prop).filter(lambda value: _fits(prop, value))


def _fits(prop: Mapping[str, Any], value: Any) -> bool:
    return not content_problems({"type": "object", "properties": {"v": prop}}, {"v": value})


def _numbers(prop: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None and low > high:
        raise UnsatisfiableSchema(f"no number in [{low}, {high}]")
    floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
    int_low, int_high = _integer_bounds(low, high)
    if int_low is not None and int_high is not None and int_low > int_high:
        return floats
    return st.integers(int_low, int_high) | floats


def _integer_bounds(low: float | None, high: float | None) -> tuple[int | None, int | None]:
    """The integer range inside `[low, high]` (`None`: unbounded; JSON integers have no
    size limit, and tokens carry big ones)."""
    return (
        None if low is None else math.ceil(low),
        None if high is None else math.floor(high),
    )


def _multi_select(prop: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    items = prop["items"]
    if "enum" in items:
        choices = list(dict.fromkeys(items["enum"]))
    else:
        choices = list(dict.fromkeys(option["const"] for option in items["anyOf"]))
    low = prop.get("minItems", 0)
    high = prop.get("maxItems")
    if high is not None and low > high:
        raise UnsatisfiableSchema(f"minItems {low} > maxItems {high}")
    if low <= len(choices):  # distinct choices, as a multi-select gives
        top = len(choices) if high is None else min(high, len(choices))
        return st.lists(st.sampled_from(choices), min_size=low, max_size=top, unique=True)
    return st.lists(st.sampled_from(choices), min_size=low, max_size=low if high is None else high)


def _strings(prop: Mapping[str, Any]) -> st.SearchStrategy[str]:
    low: int = prop.get("minLength", 0)
    high: int | None = prop.get("maxLength")
    if high is not None and low > high:
        raise UnsatisfiableSchema(f"minLength {low} > maxLength {high}")
    choices = _choices(prop)
    if choices is not None:
        fitting = [choice for choice in choices if _fits(prop, choice)]
        if not fitting:
            raise UnsatisfiableSchema(f"none of the choices {choices} fits the bounds")
        return st.sampled_from(fitting)
    fmt = prop.get("format")
    if fmt is None:
        return st.text(min_size=low, max_size=low + 12 if high is None else high)
    if fmt == "date":
        return _exactly(low, high, {10: st.dates().map(datetime.date.isoformat)})
    if fmt == "date-time":
        return _exactly(low, high, _DATE_TIMES)
    # email: 3 to 254 characters; uri: any length from 3 up.
    low = max(low, 3)
    top = low + 20 if high is None else high
    top = min(top, 254) if fmt == "email" else top
    if top < low:
        raise UnsatisfiableSchema(f"no {fmt} is {low} to {high} characters long")
    return _emails(low, top) if fmt == "email" else _uris(low, top)


def _choices(prop: Mapping[str, Any]) -> list[str] | None:
    if "enum" in prop:
        return list(prop["enum"])
    if "oneOf" in prop:
        return [option["const"] for option in prop["oneOf"]]
    return None


def _exactly(
    low: int, high: int | None, by_length: Mapping[int, st.SearchStrategy[str]]
) -> st.SearchStrategy[str]:
    fitting = [s for n, s in by_length.items() if low <= n and (high is None or n <= high)]
    if not fitting:
        raise UnsatisfiableSchema(f"lengths {sorted(by_length)} are outside [{low}, {high}]")
    return st.one_of(fitting)


_offsets = st.sampled_from(
    [
        datetime.timezone(datetime.timedelta(hours=hours, minutes=minutes))
        for hours, minutes in ((-5, -30), (1, 0), (14, 0))
    ]
)
_instants = st.datetimes(datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31))


def _rfc3339(moment: datetime.datetime, zone: datetime.tzinfo, timespec: str) -> str:
    """An RFC 3339 date-time: the offset is always written, UTC as `Z`."""
    text = moment.replace(tzinfo=zone).isoformat(timespec=timespec)
    return text.removesuffix("+00:00") + "Z" if zone is datetime.UTC else text


# RFC 3339 date-times by length: whole seconds or microseconds, in UTC (Z) or at an offset.
_DATE_TIMES: Mapping[int, st.SearchStrategy[str]] = {
    length: st.builds(_rfc3339, _instants, st.just(zone) if zone else _offsets, st.just(spec))
    for length, zone, spec in (
        (20, datetime.UTC, "seconds"),
        (27, datetime.UTC, "microseconds"),
        (25, None, "seconds"),
        (32, None, "microseconds"),
    )
}


@st.composite
def _emails(draw: st.DrawFn, low: int, high: int) -> str:
    """RFC 5321 mailboxes of a length in [low, high]: a dot-free atom, `@`, and a domain of
    LDH labels of at most 63 characters."""
    length = draw(st.integers(low, high))
    local = draw(st.integers(1, min(64, length - 2)))
    head = draw(st.text(_WORD + "+_-", min_size=local, max_size=local))
    labels, rest = [], length - 1 - local
    while rest > 63:
        size = 63 if rest > 64 else 62  # leave at least one character after the dot
        labels.append(size)
        rest -= size + 1
    labels.append(rest)
    domain = ".".join(draw(st.text(_WORD, min_size=n, max_size=n)) for n in labels)
    return f"{head}@{domain}"


@st.composite
def _uris(draw: st.DrawFn, low: int, high: int) -> str:
    length = draw(st.integers(low, high))
    prefixes = [p for p in ("x:", "urn:", "https://example.com/") if len(p) < length]
    prefixes += ["https://example.com/"] if length == 20 else []
    prefix = draw(st.sampled_from(prefixes))
    size = length - len(prefix)
    return prefix + draw(st.text(string.ascii_lowercase, min_size=size, max_size=size))


# ------------------------------------------------------------------------------- schemas

_names = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
_labels = st.text(alphabet=_WORD + " ", max_size=12)
_small = st.integers(0, 8)


@st.composite
def _bounded_strings(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.none() | _small)
    high = draw(st.none() | st.integers(low or 0, (low or 0) + 12))
    prop: dict[str, Any] = {"type": "string"}
    if low is not None:
        prop["minLength"] = low
    if high is not None:
        prop["maxLength"] = high
    return prop


@st.composite
def _bounded_numbers(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    bound = (
        st.integers(-1000, 1000)
        if kind == "integer"
        else st.integers(-1000, 1000) | st.floats(-1e6, 1e6)
    )
    low = draw(st.none() | bound)
    high = draw(st.none() | bound)
    if low is not None and high is not None and low > high:
        low, high = high, low
    prop: dict[str, Any] = {"type": kind}
    if low is not None:
        prop["minimum"] = low
    if high is not None:
        prop["maximum"] = high
    return prop


@st.composite
def _multi_selects(draw: st.DrawFn) -> dict[str, Any]:
    choices = draw(st.lists(_labels, min_size=1, max_size=4, unique=True))
    if draw(st.booleans()):
        items: dict[str, Any] = {"type": "string", "enum": choices}
    else:
        items = {"anyOf": [{"const": c, "title": c.upper()} for c in choices]}
    prop: dict[str, Any] = {"type": "array", "items": items}
    low = draw(st.none() | st.integers(0, len(choices)))
    high = draw(st.none() | st.integers(low or 0, len(choices)))
    if low is not None:
        prop["minItems"] = low
    if high is not None:
        prop["maxItems"] = high
    return prop


_property_kinds: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({"type": "boolean"}),
    _bounded_strings(),
    _bounded_numbers("integer"),
    _bounded_numbers("number"),
    st.sampled_from(["email", "uri", "date", "date-time"]).map(
        lambda f: {"type": "string", "format": f}
    ),
    st.lists(_labels, min_size=1, max_size=4, unique=True).map(
        lambda values: {"type": "string", "enum": values}
    ),
    st.lists(_labels, min_size=1, max_size=4, unique=True).map(
        lambda values: {"type": "string", "oneOf": [{"const": v, "title": v} for v in values]}
    ),
    _multi_selects(),
)


@st.composite
def _property_schemas(draw: st.DrawFn) -> dict[str, Any]:
    prop = dict(draw(_property_kinds))
    for note in ("title", "description"):
        if draw(st.booleans()):
            prop[note] = draw(_labels)
    return prop


@st.composite
def _schemas(draw: st.DrawFn, max_properties: int = 4) -> dict[str, Any]:
    properties = draw(
        st.dictionaries(_names, _property_schemas(), min_size=1, max_size=max_properties)
    )
    names = sorted(properties)
    required = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    say_required: bool = draw(st.booleans())
    if required or say_required:
        schema["required"] = required
    return schema


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Restricted elicitation schemas (`check_schema` accepts them) that can be satisfied:
    one to four properties of every kind MCP allows (booleans; strings with lengths, formats,
    `enum` or `oneOf`; integers and numbers with bounds; multi-select arrays), some of them
    required."""
    return _schemas()


# ------------------------------------------------------------------------ answer functions


def answer_functions(*, actions: Collection[str] = ACTIONS) -> st.SearchStrategy[AnswerScript]:
    """`answer(key, request)` functions ([AnswerScript][mrtr_trio.testing.AnswerScript]) that draw
    each answer from [answers_for][mrtr_trio.testing.strategies.answers_for] the first time a
    `(key, request, occurrence)` is met.

    The answers are drawn while the test runs (like `st.data()`), so they shrink with the
    example and show up in its report. The same function gives both eras the same answers, in
    whatever order they ask (`assert_eras_agree` restarts it between runs). Drawing during a
    live run happens in the order trio runs a batch's tasks, which pytest-trio makes
    deterministic under hypothesis; `assert_eras_agree` runs the modern era first, so the
    live run only meets answers already drawn.
    """
    return _answer_scripts(tuple(actions))


@st.composite
def _answer_scripts(draw: st.DrawFn, actions: tuple[str, ...]) -> AnswerScript:
    data = draw(st.data())
    strategies: dict[str, st.SearchStrategy[Answer]] = {}

    def choose(key: str, request: Request, occurrence: int) -> Answer:
        text = canonical_wire(request)
        if text not in strategies:
            strategies[text] = answers_for(request, actions=actions)
        return data.draw(strategies[text], label=f"answer to {key!r} #{occurrence}")

    return AnswerScript(choose)


# -------------------------------------------------------------------------------- programs
#
# A program is a tree of statements that Program.run interprets as a yield-style handler:
# asks (single or batched) that may branch on the answer, steps, pauses, bounded loops and an
# early done. Every request's message carries its node number, and "echo" asks also carry a
# digest of everything answered so far, so later requests depend on earlier answers.

Kind: TypeAlias = Literal["form", "url", "sampling", "roots"]


@attrs.frozen
class _Spec:
    kind: Kind
    schema: Mapping[str, Any] | None = None
    max_tokens: int = 1

    def build(self, message: str) -> Request:
        if self.kind == "form":
            assert self.schema is not None
            return elicit(message, self.schema)
        if self.kind == "url":
            return elicit_url(message, "https://example.com/confirm")
        if self.kind == "sampling":
            return create_message(message, max_tokens=self.max_tokens)
        return list_roots()

    def __repr__(self) -> str:
        if self.kind == "form":
            return f"elicit({json.dumps(self.schema, sort_keys=True)})"
        if self.kind == "sampling":
            return f"create_message(max_tokens={self.max_tokens})"
        return {"url": "elicit_url()", "roots": "list_roots()"}[self.kind]


_OUTCOMES: Mapping[Kind, tuple[str, ...]] = {
    "form": ACTIONS,
    "url": ACTIONS,
    "sampling": ("even", "odd"),
    "roots": ("none", "some"),
}


def _outcome(answer: Any) -> str:
    if isinstance(answer, ElicitResult):
        return answer.action
    if isinstance(answer, CreateMessageResult):
        return ("even", "odd")[len(answer.text) % 2]
    assert isinstance(answer, ListRootsResult)
    return "some" if answer.roots else "none"


@attrs.frozen
class _Ask:
    node: int
    requests: tuple[tuple[str, _Spec], ...]  # one entry with key "" for a single ask
    echo: bool
    branches: tuple[tuple[str, tuple[Any, ...]], ...]


@attrs.frozen
class _Step:
    node: int


@attrs.frozen
class _Pause:
    pass


@attrs.frozen
class _Repeat:
    times: int
    body: tuple[Any, ...]


@attrs.frozen
class _Done:
    pass


class Ledger:
    """What the runs of one [Program][mrtr_trio.testing.strategies.Program] did, for accounting
    properties.

    `started` and `closed` count handler invocations and their `finally` blocks (equal
    after every run: the runtime always closes its generators); `step_calls` counts calls of
    the program's step function; `last_trail` is the trail of the last invocation to close
    (for a completed run, the whole flow's events).
    """

    def __init__(self) -> None:
        self.started = 0
        self.closed = 0
        self.step_calls = 0
        self.last_trail: list[Any] = []

    def step(self, node: int, seen: int) -> str:
        """The program's step function: deterministic, and counted."""
        self.step_calls += 1
        return f"step{node}:{seen}"

    def __repr__(self) -> str:
        return f"Ledger(started={self.started}, closed={self.closed}, step_calls={self.step_calls})"


@attrs.frozen(repr=False)
class Program:
    """A random yield-style handler: `run` is the handler.

    The flow's value is its trail (a list of what happened: each ask's node and answers in wire
    form, each step's value, each pause) when the program ends with `done`, and `None` when
    it falls off its end. `str(program)` shows it as pseudo-code.
    """

    body: tuple[Any, ...]
    finish: bool = True
    ledger: Ledger = attrs.field(factory=Ledger, eq=False)

    @property
    def steps(self) -> int:
        """How many steps the last closed invocation had run, by its trail."""
        return sum(
            1
            for event in self.ledger.last_trail
            if isinstance(event, str) and event.startswith("step")
        )

    async def run(self, ctx: Context, label: str = "", **_: Any) -> AsyncGenerator[Any, Any]:
        """The handler: interpret the program."""
        self.ledger.started += 1
        trail: list[Any] = []
        try:
            stack = [iter(self.body)]
            while stack:
                statement = next(stack[-1], None)
                if statement is None:
                    stack.pop()
                elif isinstance(statement, _Repeat):
                    stack.append(iter(statement.body * statement.times))
                elif isinstance(statement, _Step):
                    trail.append((yield step(self.ledger.step, statement.node, len(trail))))
                elif isinstance(statement, _Pause):
                    yield pause()
                    trail.append("pause")
                elif isinstance(statement, _Done):
                    yield done(list(trail))
                else:
                    assert isinstance(statement, _Ask)
                    message = f"[{statement.node}] {label}"
                    if statement.echo:
                        message += f" after {_digest(trail)}"
                    if statement.requests[0][0] == "":
                        answer = yield statement.requests[0][1].build(message)
                        answers = {"": answer}
                    else:
                        answers = yield {
                            key: spec.build(f"{message} ({key})")
                            for key, spec in statement.requests
                        }
                    trail.append([statement.node, {k: a.to_wire() for k, a in answers.items()}])
                    first = _outcome(answers[statement.requests[0][0]])
                    for outcome, block in statement.branches:
                        if outcome == first:
                            stack.append(iter(block))
                            break
            if self.finish:
                yield done(list(trail))
        finally:
            self.ledger.closed += 1
            self.ledger.last_trail = trail

    def __str__(self) -> str:
        end = "done(trail)" if self.finish else "falls off"
        lines = [f"async def program(ctx, label):  # ends with {end}"]
        _render(self.body, 1, lines)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Program(\n{self}\n)"


def _digest(trail: list[Any]) -> str:
    text = json.dumps(trail, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.blake2s(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _render(block: tuple[Any, ...], depth: int, lines: list[str]) -> None:
    pad = "    " * depth
    if not block:
        lines.append(f"{pad}pass")
    for statement in block:
        if isinstance(statement, _Repeat):
            lines.append(f"{pad}for _ in range({statement.times}):")
            _render(statement.body, depth + 1, lines)
        elif isinstance(statement, _Step):
            lines.append(f"{pad}yield step(ledger.step)  # node {statement.node}")
        elif isinstance(statement, _Pause):
            lines.append(f"{pad}yield pause()")
        elif isinstance(statement, _Done):
            lines.append(f"{pad}yield done(trail)")
        else:
            echo = " (echoes answers)" if statement.echo else ""
            if statement.requests[0][0] == "":
                asked = repr(statement.requests[0][1])
            else:
                asked = "{" + ", ".join(f"{k!r}: {s!r}" for k, s in statement.requests) + "}"
            lines.append(f"{pad}answer = yield {asked}  # node {statement.node}{echo}")
            for outcome, branch in statement.branches:
                lines.append(f"{pad}if outcome(answer) == {outcome!r}:")
                _render(branch, depth + 1, lines)


# Programs draw form schemas from this pool (one draw each: generating a schema is costlier
# than running a flow); it covers every kind of property. schemas() has the full variety.
_SCHEMA_POOL: tuple[dict[str, Any], ...] = (
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}}},
    {
        "type": "object",
        "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "minimum": -1.5, "maximum": 1e3},
        },
        "required": ["size"],
    },
    {
        "type": "object",
        "properties": {
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "tone": {"type": "string", "oneOf": [{"const": "warm"}, {"const": "cold"}]},
        },
        "required": ["color", "tone"],
    },
    {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2},
            "picks": {"type": "array", "items": {"anyOf": [{"const": "x"}, {"const": "y"}]}},
        },
        "required": ["tags"],
    },
    {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
        },
        "required": ["email", "day"],
    },
)

_specs: st.SearchStrategy[_Spec] = st.one_of(
    st.sampled_from(_SCHEMA_POOL).map(lambda schema: _Spec("form", schema)),
    st.just(_Spec("url")),
    st.integers(1, 1000).map(lambda n: _Spec("sampling", max_tokens=n)),
    st.just(_Spec("roots")),
)
_keys = st.text(alphabet=_WORD + "-_", min_size=1, max_size=6)


class _Nodes:
    def __init__(self) -> None:
        self.count = 0

    def next(self) -> int:
        self.count += 1
        return self.count


def _block(draw: st.DrawFn, budget: int, depth: int, nodes: _Nodes) -> tuple[tuple[Any, ...], int]:
    """A block within *budget* round trips (on its costliest path), and that cost."""
    statements: list[Any] = []
    cost = 0
    for _ in range(draw(st.integers(0, 4))):
        left = budget - cost
        kinds = ["ask", "batch", "pause"] if left >= 1 else []
        kinds += ["step"]
        kinds += ["repeat"] if depth > 0 and left >= 2 else []
        kinds += ["done"]
        kind = draw(st.sampled_from(kinds))
        if kind == "done":
            statements.append(_Done())
            break
        if kind == "step":
            statements.append(_Step(nodes.next()))
        elif kind == "pause":
            statements.append(_Pause())
            cost += 1
        elif kind == "repeat":
            times = draw(st.integers(2, 3))
            body, body_cost = _block(draw, left // times, depth - 1, nodes)
            statements.append(_Repeat(times, body))
            cost += times * body_cost
        else:
            node = nodes.next()
            if kind == "ask":
                requests: tuple[tuple[str, _Spec], ...] = (("", draw(_specs)),)
            else:
                keys = draw(st.lists(_keys, min_size=1, max_size=3, unique=True))
                requests = tuple((key, draw(_specs)) for key in keys)
            branches = []
            branch_cost = 0
            if depth > 0:
                outcomes = _OUTCOMES[requests[0][1].kind]
                for outcome in draw(st.lists(st.sampled_from(outcomes), unique=True)):
                    branch, spent = _block(draw, left - 1, depth - 1, nodes)
                    branches.append((outcome, branch))
                    branch_cost = max(branch_cost, spent)
            statements.append(_Ask(node, requests, draw(st.booleans()), tuple(branches)))
            cost += 1 + branch_cost
    return tuple(statements), cost


@st.composite
def _programs(draw: st.DrawFn, max_rounds: int, max_depth: int) -> Program:
    body, _ = _block(draw, max_rounds, max_depth, _Nodes())
    return Program(body, finish=draw(st.booleans()))


def programs(*, max_rounds: int = 8, max_depth: int = 2) -> st.SearchStrategy[Program]:
    """Random [Program][mrtr_trio.testing.strategies.Program] values (their `run` method is a
    yield-style handler).

    No path through a program makes more than *max_rounds* round trips (asks and pauses), so
    it fits a runtime's `max_rounds` and the client's 10 retries. *max_depth* bounds the
    nesting of branches and loops.
    """
    if max_rounds < 0 or max_depth < 0:
        raise ValueError("max_rounds and max_depth must be >= 0")
    return _programs(max_rounds, max_depth)


FlowCase: TypeAlias = tuple[Callable[..., Any], dict[str, Any], AnswerScript]


@st.composite
def _flows(draw: st.DrawFn, max_rounds: int, max_depth: int, actions: tuple[str, ...]) -> FlowCase:
    program = draw(programs(max_rounds=max_rounds, max_depth=max_depth))
    arguments = {"label": draw(st.text(max_size=8))}
    return program.run, arguments, draw(answer_functions(actions=actions))


def flows(
    *, max_rounds: int = 8, max_depth: int = 2, actions: Collection[str] = ACTIONS
) -> st.SearchStrategy[FlowCase]:
    """`(handler, arguments, answer)`: a random yield-style handler program (single asks
    of every kind, batches, steps, pauses, bounded loops, branches on the answers, an early `done`),
    its arguments, and an answer function from
    [answer_functions][mrtr_trio.testing.strategies.answer_functions].

    The handler is a [Program][mrtr_trio.testing.strategies.Program]'s bound `run` method;
    [program_of][mrtr_trio.testing.strategies.program_of] gives the program back, with its
    [Ledger][mrtr_trio.testing.strategies.Ledger]. See
    [programs][mrtr_trio.testing.strategies.programs] for *max_rounds* and *max_depth*.
    """
    return _flows(max_rounds, max_depth, tuple(actions))


def program_of(handler: Callable[..., Any]) -> Program:
    """The [Program][mrtr_trio.testing.strategies.Program] behind a handler drawn by
    [flows][mrtr_trio.testing.strategies.flows]."""
    program = getattr(handler, "__self__", None)
    if not isinstance(program, Program):
        raise TypeError(f"{handler!r} was not drawn by flows()")
    return program
