"""Form content against the requested schema: one table per keyword, strict formats, and
validators compiled once per schema."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_trio import _schema, elicit
from mrtr_trio._formats import FORMATS, is_date_time, is_email, is_uri
from mrtr_trio._schema import content_problems
from mrtr_trio._util import Memo
from mrtr_trio.testing import strategies

CHOICES = ["a", "b"]

# (property schema, value, the problem reported, or None when the value satisfies it)
KEYWORDS: list[tuple[dict[str, Any], Any, str | None]] = [
    # type
    ({"type": "string"}, "x", None),
    ({"type": "string"}, 5, "'v' must be a string, got 5"),
    ({"type": "integer"}, 3, None),
    ({"type": "integer"}, 3.0, None),
    ({"type": "integer"}, 2.5, "'v' must be an integer, got 2.5"),
    ({"type": "integer"}, True, "'v' must be an integer, got true"),
    ({"type": "number"}, 2.5, None),
    ({"type": "number"}, "3", "'v' must be a number, got \"3\""),
    ({"type": "number"}, math.nan, "'v' must be a number, got NaN"),
    ({"type": "number"}, math.inf, "'v' must be a number, got Infinity"),
    ({"type": "boolean"}, False, None),
    ({"type": "boolean"}, "yes", "'v' must be a boolean (true or false), got \"yes\""),
    ({"type": "boolean"}, 1, "'v' must be a boolean (true or false), got 1"),
    (
        {"type": "array", "items": {"enum": CHOICES}},
        "a",
        "'v' must be a list of choices, got \"a\"",
    ),
    # single-select: enum and oneOf
    ({"type": "string", "enum": CHOICES}, "b", None),
    ({"type": "string", "enum": CHOICES}, "z", "'v' must be one of ['a', 'b'], got \"z\""),
    ({"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]}, "a", None),
    (
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]},
        "A",
        "'v' must be one of ['a', 'b'], got \"A\"",
    ),
    # multi-select: items.enum and items.anyOf
    ({"type": "array", "items": {"type": "string", "enum": CHOICES}}, ["a", "b"], None),
    (
        {"type": "array", "items": {"type": "string", "enum": CHOICES}},
        ["a", "z"],
        "'v' item 1 must be one of ['a', 'b'], got \"z\"",
    ),
    ({"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}}, [], None),
    (
        {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}},
        ["z"],
        "'v' item 0 must be one of ['a', 'b'], got \"z\"",
    ),
    (
        {"type": "array", "items": {"enum": CHOICES}},
        [1],
        "'v' item 0 must be one of ['a', 'b'], got 1",
    ),
    # bounds
    ({"type": "integer", "minimum": 1}, 1, None),
    ({"type": "integer", "minimum": 1}, 0, "'v' must be at least 1, got 0"),
    ({"type": "number", "maximum": 2.5}, 2.5, None),
    ({"type": "number", "maximum": 2.5}, 3, "'v' must be at most 2.5, got 3"),
    ({"type": "string", "minLength": 2}, "ab", None),
    ({"type": "string", "minLength": 2}, "a", "'v' must be at least 2 characters long, got \"a\""),
    (
        {"type": "string", "maxLength": 2},
        "abc",
        "'v' must be at most 2 characters long, got \"abc\"",
    ),
    (
        {"type": "array", "items": {"enum": CHOICES}, "minItems": 1},
        [],
        "'v' must hold at least 1 choice, got []",
    ),
    (
        {"type": "array", "items": {"enum": CHOICES}, "maxItems": 1},
        ["a", "b"],
        '\'v\' must hold at most 1 choice, got ["a", "b"]',
    ),
    # formats
    ({"type": "string", "format": "date"}, "2024-01-31", None),
    (
        {"type": "string", "format": "date"},
        "20240101",
        "'v' must be a date like 2024-01-31, got \"20240101\"",
    ),
    ({"type": "string", "format": "date-time"}, "2024-01-01T10:00:00Z", None),
    (
        {"type": "string", "format": "date-time"},
        "2024-01-01T10:00",
        "'v' must be a date and time with an offset, like 2024-01-31T09:30:00Z, "
        'got "2024-01-01T10:00"',
    ),
    ({"type": "string", "format": "email"}, "ada@example.com", None),
    (
        {"type": "string", "format": "email"},
        "ada@",
        "'v' must be an email address like name@example.com, got \"ada@\"",
    ),
    ({"type": "string", "format": "uri"}, "https://example.com/", None),
    (
        {"type": "string", "format": "uri"},
        "example.com",
        "'v' must be an absolute URI like https://example.com/page, got \"example.com\"",
    ),
]


@pytest.mark.parametrize(("prop", "value", "problem"), KEYWORDS)
def test_each_keyword_is_checked(prop: dict[str, Any], value: Any, problem: str | None) -> None:
    schema = {"type": "object", "properties": {"v": prop}}
    assert content_problems(schema, {"v": value}) == ([] if problem is None else [problem])


def test_required_fields_are_named_each_once() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
        "required": ["a", "b", "c"],
    }
    assert content_problems(schema, {"b": "x"}) == ["'a' is required", "'c' is required"]
    assert content_problems(schema, {"a": "x", "b": "y", "c": "z"}) == []


def test_every_problem_is_reported_and_unknown_fields_are_ignored() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 3}, "s": {"type": "string"}},
        "required": ["s"],
    }
    assert content_problems(schema, {"n": 9, "extra": object()}) == [
        "'n' must be at most 3, got 9",
        "'s' is required",
    ]


def test_a_long_value_is_cut_short_in_the_message() -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 3}}}
    assert content_problems(schema, {"v": "x" * 500}) == [
        "'v' must be at most 3 characters long, got \"" + "x" * 56 + "..."
    ]


def test_validators_are_compiled_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    real = _schema._Validator

    def counting(schema: Any, **options: Any) -> Any:
        compiled.append(schema)
        return real(schema, **options)

    monkeypatch.setattr(_schema, "_Validator", counting)
    monkeypatch.setattr(_schema, "_COMPILED", Memo(256))
    monkeypatch.setattr(_schema, "_BY_TEXT", Memo(256))
    form = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}
    for _ in range(3):
        assert content_problems(form, {"n": 1}) == []
    assert len(compiled) == 1
    # Mutated in place: compiled afresh, and the new bound holds.
    form["properties"]["n"]["maximum"] = 0
    assert content_problems(form, {"n": 1}) == ["'n' must be at most 0, got 1"]
    assert len(compiled) == 2
    # An equal schema in another object (each flow's request carries its own copy) shares the
    # compilation: a burst of flows asking the same question compiles it once.
    copies = [json.loads(json.dumps(form)) for _ in range(50)]
    for copy in copies:
        assert content_problems(copy, {"n": 1}) == ["'n' must be at most 0, got 1"]
    assert len(compiled) == 2
    # Written in another order it is another text: compiled for that object, once.
    twin = {"properties": {"n": {"maximum": 0, "type": "integer"}}, "type": "object"}
    content_problems(twin, {"n": 1})
    content_problems(twin, {"n": 1})
    assert len(compiled) == 3


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_schema, "_COMPILED", Memo(256))
    monkeypatch.setattr(_schema, "_BY_TEXT", Memo(256))
    forms = [
        {"type": "object", "properties": {"n": {"type": "integer", "maximum": i}}}
        for i in range(256 + 10)
    ]
    for form in forms:
        content_problems(form, {"n": 1})
    assert len(_schema._COMPILED) <= 256 and len(_schema._BY_TEXT) <= 256
    assert _schema._COMPILED.get(id(forms[-1])) is not None


# (value, valid) per format: RFC 3339 full-date and date-time, RFC 5321 mailbox, RFC 3986 URI
DATES = [
    ("2024-01-31", True),
    ("2024-02-29", True),
    ("0001-01-01", True),
    ("20240101", False),
    ("2024-W01-1", False),
    ("2024-001", False),
    ("2023-02-29", False),
    ("2024-1-5", False),
    ("0000-01-01", False),
    ("2024-01-31T00:00:00Z", False),
    ("२०२४-01-01", False),
]
DATE_TIMES = [
    ("2024-01-31T09:30:00Z", True),
    ("2024-01-31t09:30:00z", True),
    ("2024-01-31T09:30:00.123456+02:00", True),
    ("2024-01-31T09:30:00-23:59", True),
    ("1998-12-31T23:59:60Z", True),
    ("1998-12-31T15:59:60.123-08:00", True),
    ("2024-01-01T10:00", False),
    ("2024-01-01T10:00:00", False),
    ("2024-01-01 10:00:00Z", False),
    ("2024-01-01T24:00:00Z", False),
    ("2024-01-01T10:60:00Z", False),
    ("2024-02-30T10:00:00Z", False),
    ("2024-01-01T10:00:00+24:00", False),
    ("2024-01-01T10:00:00+02:60", False),
    ("1998-12-31T23:58:60Z", False),
    ("2024-01-01T10:00:00.Z", False),
    ("2024-01-01T10:00:00Z\n", False),
    ("2024-01-01T10:00:00+0200", False),
    ("2024-001T10:00:00Z", False),
]
EMAILS = [
    ("joe.bloggs@example.com", True),
    ("te~st+tag@sub.example.co", True),
    ('"joe bloggs"@example.com', True),
    ("joe@[127.0.0.1]", True),
    ("joe@[IPv6:2001:db8::1]", True),
    ("postmaster@localhost", True),
    ("2962", False),
    ("@example.com", False),
    ("joe@", False),
    (".joe@example.com", False),
    ("joe.@example.com", False),
    ("jo..e@example.com", False),
    ("jo e@example.com", False),
    ("joe@exa_mple.com", False),
    ("joe@-example.com", False),
    ("joe@example-.com", False),
    ("joe@example.com.", False),
    ("joe@[127.0.0.300]", False),
    ("joe@[IPv6:127.0.0.1]", False),
    ("joe@example.com\n", False),
    ("j" * 65 + "@example.com", False),
    ("jöe@example.com", False),
]
URIS = [
    ("https://example.com/page?q=1#top", True),
    ("mailto:joe@example.com", True),
    ("urn:isbn:0451450523", True),
    ("http://[2001:db8::1]:8080/", True),
    ("http://[v1.fe]/", True),
    ("file:///etc/hosts", True),
    ("http://a/%20b", True),
    ("x:", True),
    ("example.com", False),
    ("//example.com/a", False),
    ("/relative/path", False),
    ("https://example.com/a b", False),
    ("https://example.com/\n", False),
    ("http://a/%zz", False),
    ("http://[::1/", False),
    ("http://[127.0.0.1]/", False),
    ("http://[fe80::1%25eth0]/", False),
    ("1http://a", False),
    ("http://a.com/é", False),
]


@pytest.mark.parametrize(
    ("check", "value", "valid"),
    [("date", v, ok) for v, ok in DATES]
    + [("date-time", v, ok) for v, ok in DATE_TIMES]
    + [("email", v, ok) for v, ok in EMAILS]
    + [("uri", v, ok) for v, ok in URIS],
)
def test_formats_are_strict(check: str, value: str, valid: bool) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": check}}}
    assert (content_problems(schema, {"v": value}) == []) is valid
    direct = {"date-time": is_date_time, "email": is_email, "uri": is_uri}.get(check)
    if direct is not None:
        assert direct(value) is valid


# ----------------------------------------------- the fast check against jsonschema, the oracle

_JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["2024-01-31", "2024-01-31T09:30:00Z", "a@b.c", "https://x.y/", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=6,
)


def _near_misses(prop: dict[str, Any]) -> list[Any]:
    """Values just outside what *prop* allows (and a few just inside)."""
    misses: list[Any] = ["true", 1, None, [], {}]
    for bound, step in (("minimum", -1), ("maximum", 1)):
        if bound in prop:
            misses += [prop[bound] + step, prop[bound] + step / 2, prop[bound]]
    for bound, step in (("minLength", -1), ("maxLength", 1)):
        if bound in prop:
            misses += ["x" * max(0, prop[bound] + step), "x" * prop[bound]]
    choices = [*prop.get("enum", ()), *(o["const"] for o in prop.get("oneOf", ()))]
    items = prop.get("items", {})
    options = [*items.get("enum", ()), *(o["const"] for o in items.get("anyOf", ()))]
    misses += [c + "!" for c in choices] + choices
    if options:
        misses += [options, [*options, "not-a-choice"], options[:1] * 3, [options[0], 7]]
    for bound, step in (("minItems", -1), ("maxItems", 1)):
        if bound in prop and options:
            misses.append((options * (prop[bound] + 2))[: max(0, prop[bound] + step)])
    misses += ["2024-13-45", "20240101", "2024-01-31T09:30", "a@", "no scheme", 1.5, True]
    return misses


@st.composite
def _schema_and_content(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = draw(strategies.schemas())
    content: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        choice = draw(st.integers(0, 2))
        if choice == 0:  # a value drawn to fit
            single = {"type": "object", "properties": {name: prop}, "required": [name]}
            try:
                content[name] = draw(strategies.form_content(single))[name]
            except strategies.UnsatisfiableSchema:
                continue
        elif choice == 1:  # anything at all
            content[name] = draw(_JSONISH)
    return schema, content


def _agree(schema: dict[str, Any], content: dict[str, Any]) -> None:
    valid = _schema._Validator(schema, format_checker=FORMATS).is_valid(content)
    compiled = _schema.compile_schema(schema)
    if compiled.checks is not None:  # the fast check decides the common case: it must agree
        assert compiled.passes(content) == valid, (schema, content)
    assert (content_problems(schema, content) == []) == valid, (schema, content)


@settings(max_examples=max(300, settings.default.max_examples))
@given(_schema_and_content())
def test_the_fast_check_agrees_with_jsonschema(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, content = case
    _agree(schema, content)
    for name, prop in schema.get("properties", {}).items():  # every near miss, one at a time
        for value in _near_misses(prop):
            _agree(schema, {**content, name: value})
    for name in schema.get("required", ()):
        _agree(schema, {k: v for k, v in content.items() if k != name})


def test_schemas_beyond_the_subset_are_validated_as_one() -> None:
    closed = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "additionalProperties": False,
        "minProperties": 1,
    }
    assert _schema.compile_schema(closed).checks is None
    assert content_problems(closed, {}) != []
    assert content_problems(closed, {"n": 1}) == []
    patterned = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}
    assert _schema.compile_schema(patterned).checks is None  # no fast check for `pattern`
    assert content_problems(patterned, {"s": "b"}) != []
    assert content_problems(patterned, {"s": "ab"}) == []


def test_a_schema_error_lists_every_problem() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "weird"},
            "b": {"type": "string", "format": "zip", "minLength": -1},
            "c": "not a dict",
        },
        "required": ["d"],
    }
    with pytest.raises(ValueError) as caught:
        elicit("Fill in", schema)
    message = str(caught.value)
    assert message.startswith("the requested schema has 5 problems: (1) ")
    for problem in (
        "property 'a' has type 'weird'",
        "property 'b': format 'zip'",
        "property 'b': minLength must be a non-negative integer",
        "property 'c' must be a dict, got str",
        "requires ['d'] but has no such properties",
    ):
        assert problem in message, message
    with pytest.raises(TypeError, match="must be a dict"):  # one problem: as it always was
        elicit("Fill in", {"type": "object", "properties": {"c": 3}})
