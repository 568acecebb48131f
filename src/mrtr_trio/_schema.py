"""The restricted JSON schema of form-mode elicitation, and form content checked against it.

MCP limits `requestedSchema` to a flat object whose properties are primitives: strings (with
`minLength`, `maxLength`, `format`), numbers and integers (`minimum`, `maximum`), booleans,
single-choice enums (`enum`, or `oneOf` of `{const, title}`) and multi-choice arrays
(`items.enum` or `items.anyOf`, with `minItems` / `maxItems`). This module owns two checks:

- `check_schema`: is this a schema a client can render? Raises
  `ValueError` or `TypeError` naming the problem. Hand-written, because the restriction is
  MCP's, not JSON Schema's.
- `content_problems`: does accepted content satisfy it?
  Validated by jsonschema with strict formats (`mrtr_trio._formats`), one validator compiled
  per property; the problems come back as sentences naming the field.

Every live round and every modern completion checks one answer, so the check is on the hot
path: jsonschema's generic machinery costs several microseconds per field. Each property the
restricted subset fully describes therefore also gets a *fast check*, a predicate compiled
from the same keywords, which answers "valid" for the common case; jsonschema decides, and
says why, whenever the fast check does not pass (or cannot be compiled for a property). The
test suite checks the two agree on generated schemas and content, jsonschema being the oracle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from jsonschema import Draft202012Validator, ValidationError, validators

from ._formats import FORMATS
from ._util import Memo

__all__ = [
    "Compiled",
    "check_schema",
    "compile_schema",
    "content_problems",
    "is_int",
    "is_mapping",
    "is_number",
]

_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean", "array"})
_STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})


def check_schema(schema: object) -> None:
    """Raise `TypeError` or `ValueError` unless *schema* is a valid elicitation schema; the
    message lists every problem found (the type is the first problem's)."""
    if not isinstance(schema, Mapping):
        raise TypeError(f"requested schema must be a dict, got {type(schema).__name__}")
    problems: list[tuple[type[Exception], str]] = []
    if schema.get("type") != "object":
        problems.append(
            (ValueError, f'requested schema must have "type": "object", got {schema.get("type")!r}')
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        problems.append(
            (TypeError, 'requested schema "properties" must be a dict of property schemas')
        )
        properties = {}
    for name, prop in properties.items():
        if not isinstance(name, str):
            problems.append(
                (TypeError, f"requested schema property names must be strings, got {name!r}")
            )
            continue
        problems += _property_problems(name, prop)
    required = schema.get("required", [])
    if not isinstance(required, list | tuple) or not all(isinstance(r, str) for r in required):
        problems.append((TypeError, 'requested schema "required" must be a list of property names'))
    else:
        unknown = [r for r in required if r not in properties]
        if unknown:
            problems.append(
                (ValueError, f"requested schema requires {unknown} but has no such properties")
            )
    if problems:
        kind, first = problems[0]
        if len(problems) == 1:
            raise kind(first)
        listed = "; ".join(f"({n}) {text}" for n, (_, text) in enumerate(problems, 1))
        raise kind(f"the requested schema has {len(problems)} problems: {listed}")


def _property_problems(name: str, prop: object) -> list[tuple[type[Exception], str]]:
    """Every way the property schema *prop* is not one elicitation allows."""
    where = f"requested schema property {name!r}"
    if not isinstance(prop, Mapping):
        return [(TypeError, f"{where} must be a dict, got {type(prop).__name__}")]
    problems: list[tuple[type[Exception], str]] = []

    def problem(text: str) -> None:
        problems.append((ValueError, text))

    kind = prop.get("type")
    if kind not in _PRIMITIVE_TYPES:
        problem(
            f"{where} has type {kind!r}; elicitation allows only "
            "string, number, integer, boolean, or array (multi-select enum)"
        )
    if "enum" in prop:
        values = prop["enum"]
        if kind != "string" or not isinstance(values, list) or not values:
            problem(f'{where}: "enum" must be a non-empty list on a string property')
        elif not all(isinstance(v, str) for v in values):
            problem(f'{where}: "enum" values must be strings')
    if "oneOf" in prop:
        problems += _const_problems(where, "oneOf", prop["oneOf"])
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
            problem(
                f'{where}: an array property needs "items" with "enum" or "anyOf" '
                "(elicitation arrays are multi-select enums)"
            )
        else:
            if "enum" in items and (
                not isinstance(items["enum"], list)
                or not items["enum"]
                or not all(isinstance(v, str) for v in items["enum"])
            ):
                problem(f'{where}: "items.enum" must be a non-empty list of strings')
            if "anyOf" in items:
                problems += _const_problems(where, "items.anyOf", items["anyOf"])
    if "format" in prop and prop["format"] not in _STRING_FORMATS:
        problem(f"{where}: format {prop['format']!r} is not one of {sorted(_STRING_FORMATS)}")
    for bound in ("minLength", "maxLength", "minItems", "maxItems"):
        if bound in prop and not (is_int(prop[bound]) and prop[bound] >= 0):
            problem(f"{where}: {bound} must be a non-negative integer")
    for bound in ("minimum", "maximum"):
        if bound in prop and not is_number(prop[bound]):
            problem(f"{where}: {bound} must be a number")
    return problems


def _const_problems(where: str, field: str, options: object) -> list[tuple[type[Exception], str]]:
    if (
        not isinstance(options, list)
        or not options
        or not all(isinstance(o, Mapping) and isinstance(o.get("const"), str) for o in options)
    ):
        return [
            (ValueError, f'{where}: "{field}" must be a non-empty list of {{"const": str}} options')
        ]
    return []


def content_problems(schema: Mapping[str, Any], content: Mapping[str, Any]) -> list[str]:
    """The ways *content* fails *schema* (a schema that passed
    `check_schema`), one sentence each, naming the field; empty
    when it satisfies it.

    Validated by jsonschema (Draft 2020-12) with strict formats
    (`FORMATS`): required fields, types, enums and `oneOf` /
    `anyOf` choices, numeric, length and item-count bounds, formats. Numbers must be finite.
    Fields the schema does not mention are not checked.
    """
    return compile_schema(schema).problems(content)


# Finite numbers only: JSON has no NaN or infinity, and bounds cannot hold them.
_TYPES = Draft202012Validator.TYPE_CHECKER.redefine(
    "number", lambda checker, value: is_number(value)
)
_Validator = validators.extend(Draft202012Validator, type_checker=_TYPES)  # type: ignore[no-untyped-call]


class Compiled:
    """A schema compiled: its required names, a jsonschema validator per property, and the
    fast checks (none when a property has no fast check). A schema with validation keywords
    of its own beyond `type`, `properties` and `required` (say `additionalProperties`) is
    validated as one, by `whole`."""

    __slots__ = ("checks", "required", "validators", "whole")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        properties: Mapping[str, Any] = schema.get("properties", {})
        self.required: tuple[str, ...] = tuple(schema.get("required", ()))
        self.whole = None
        self.checks: dict[str, Callable[[Any], bool]] | None = None
        self.validators: dict[str, Any] = {}
        if not set(schema) <= _OBJECT_KEYWORDS | _ANNOTATIONS:
            self.whole = _Validator(schema, format_checker=FORMATS)
            return
        self.validators = {
            name: _Validator(prop, format_checker=FORMATS) for name, prop in properties.items()
        }
        checks = {name: _fast_check(prop) for name, prop in properties.items()}
        if None not in checks.values():
            self.checks = checks  # type: ignore[assignment]

    def problems(self, content: Mapping[str, Any]) -> list[str]:
        """`content_problems` for the schema this was compiled from."""
        if self.passes(content):
            return []
        problems: dict[str, None] = {}  # ordered, without repeats
        if self.whole is not None:  # keywords beyond the subset: the schema as one
            for error in self.whole.iter_errors(content):
                for problem in _problems(list(error.absolute_path), error):
                    problems[problem] = None
            return list(problems)
        for name, value in content.items():
            validator = self.validators.get(name)
            if validator is not None:
                for error in validator.iter_errors(value):
                    problems[_problem([name, *error.absolute_path], error)] = None
        for name in self.required:
            if name not in content:
                problems[f"{name!r} is required"] = None
        return list(problems)

    def passes(self, content: Mapping[str, Any]) -> bool:
        """True when the fast checks show *content* valid; False when they cannot tell."""
        checks = self.checks
        if checks is None:
            return False
        for name in self.required:
            if name not in content:
                return False
        for name, value in content.items():
            check = checks.get(name)
            if check is not None and not check(value):
                return False
        return True


#: Compiled schemas by the `id` of the schema they were compiled for, each with a copy of that
#: schema: a hit must still equal it, so a schema mutated in place, or a new one that reuses a
#: freed object's id, is looked up afresh. Behind it, the same by the schema's JSON text, so
#: equal schemas (every flow's request carries its own copy) share one compilation.
_COMPILED: Memo[int, tuple[Any, Compiled]] = Memo(256)
_BY_TEXT: Memo[str, tuple[Any, Compiled]] = Memo(256)


def compile_schema(schema: Mapping[str, Any]) -> Compiled:
    """*schema* compiled (once per schema; a hit costs a dict lookup and an equality test of
    two small dicts, about half a microsecond)."""
    hit = _COMPILED.get(id(schema))
    if hit is not None and hit[0] == schema:
        return hit[1]
    text = json.dumps(schema, default=repr)
    known = _BY_TEXT.get(text)
    if known is None:
        frozen = json.loads(text)  # a copy the caller cannot mutate
        known = _BY_TEXT.put(text, (frozen, Compiled(frozen)))
    _COMPILED.put(id(schema), known)
    return known[1]


# ------------------------------------------------------------------------- fast checks

# The keywords a fast check implements, by property type. Annotations (title, description,
# default...) do not validate; a property with any other keyword gets no fast check.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "$schema"})
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required"})
_FAST_KEYWORDS = {
    "string": frozenset({"type", "minLength", "maxLength", "format", "enum", "oneOf"}),
    "number": frozenset({"type", "minimum", "maximum"}),
    "integer": frozenset({"type", "minimum", "maximum"}),
    "boolean": frozenset({"type"}),
    "array": frozenset({"type", "minItems", "maxItems", "items"}),
}


def _fast_check(prop: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A predicate true exactly when jsonschema finds *prop* satisfied (the suite checks it),
    or `None` when *prop* uses a keyword it does not implement."""
    kind = prop.get("type")
    allowed = _FAST_KEYWORDS.get(kind) if isinstance(kind, str) else None
    if allowed is None or not set(prop) <= allowed | _ANNOTATIONS:
        return None
    if kind == "boolean":
        return _is_bool
    if kind in ("number", "integer"):
        return _number_check(prop, integral=kind == "integer")
    if kind == "string":
        return _string_check(prop)
    return _array_check(prop)


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _number_check(prop: Mapping[str, Any], integral: bool) -> Callable[[Any], bool]:
    low = prop.get("minimum", -math.inf)
    high = prop.get("maximum", math.inf)

    def check(value: Any) -> bool:
        if not is_number(value) or (integral and not _is_integral(value)):
            return False
        return bool(low <= value <= high)

    return check


def _string_check(prop: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    shortest = prop.get("minLength", 0)
    longest = prop.get("maxLength", math.inf)
    fmt = prop.get("format")
    choices = _choices(prop)
    if choices is _AMBIGUOUS:
        return None
    conforms = FORMATS.conforms

    def check(value: Any) -> bool:
        if type(value) is not str or not shortest <= len(value) <= longest:
            return False
        if choices is not None and value not in choices:
            return False
        return fmt is None or conforms(value, fmt)

    return check


def _array_check(prop: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    items = prop.get("items")
    if not isinstance(items, Mapping) or not set(items) <= {"type", "enum", "anyOf"}:
        return None
    if items.get("type", "string") != "string":
        return None
    choices = _choices(items, "anyOf")
    if choices is None or choices is _AMBIGUOUS:
        return None
    fewest = prop.get("minItems", 0)
    most = prop.get("maxItems", math.inf)

    def check(value: Any) -> bool:
        if type(value) is not list or not fewest <= len(value) <= most:
            return False
        return all(type(item) is str and item in choices for item in value)

    return check


_AMBIGUOUS: Any = frozenset({"ambiguous"})


def _choices(prop: Mapping[str, Any], options: str = "oneOf") -> frozenset[str] | None:
    """The strings *prop* allows (`enum`, or the `const` of each option), `None` when any
    string goes, or `_AMBIGUOUS` when the fast check cannot decide (a `oneOf` with two equal
    consts matches none of them)."""
    allowed = None
    if "enum" in prop:
        allowed = frozenset(prop["enum"])
    if options in prop:
        consts = [option.get("const") for option in prop[options]]
        if options == "oneOf" and len(set(consts)) != len(consts):
            return _AMBIGUOUS  # type: ignore[no-any-return]
        if not all(set(option) <= {"const", "title", "description"} for option in prop[options]):
            return _AMBIGUOUS  # type: ignore[no-any-return]
        from_options = frozenset(consts)
        allowed = from_options if allowed is None else allowed & from_options
    return allowed


def _is_integral(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean (true or false)",
    "array": "a list of choices",
}
_FORMAT_EXAMPLES = {
    "date": "a date like 2024-01-31",
    "date-time": "a date and time with an offset, like 2024-01-31T09:30:00Z",
    "email": "an email address like name@example.com",
    "uri": "an absolute URI like https://example.com/page",
}


def _problems(path: list[Any], error: ValidationError) -> list[str]:
    """*error* at *path* as sentences naming the field (`required` names every missing one)."""
    if error.validator == "required":
        required: Any = error.validator_value
        content: Any = error.instance
        return [f"{name!r} is required" for name in required if name not in content]
    return [_problem(path, error)]


def _problem(path: list[Any], error: ValidationError) -> str:
    """*error* at *path* (the field, then the item of a list) as a sentence naming it."""
    field = f"{path[0]!r}" if path else "the content"
    if len(path) > 1:
        field += f" item {path[1]}"
    return f"{field} {_sentence(error)}"


def _sentence(error: ValidationError) -> str:
    keyword = error.validator
    expected: Any = error.validator_value
    got = _shown(error.instance)
    if keyword == "type":
        return f"must be {_TYPE_NAMES.get(expected, expected)}, got {got}"
    if keyword in ("enum", "oneOf", "anyOf"):
        choices = expected if keyword == "enum" else [option["const"] for option in expected]
        return f"must be one of {choices}, got {got}"
    if keyword == "format":
        return f"must be {_FORMAT_EXAMPLES.get(expected, expected)}, got {got}"
    bounds = {
        "minimum": f"must be at least {expected}",
        "maximum": f"must be at most {expected}",
        "minLength": f"must be at least {_count(expected, 'character')} long",
        "maxLength": f"must be at most {_count(expected, 'character')} long",
        "minItems": f"must hold at least {_count(expected, 'choice')}",
        "maxItems": f"must hold at most {_count(expected, 'choice')}",
    }
    if keyword in bounds:
        return f"{bounds[keyword]}, got {got}"
    return error.message


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _shown(value: object) -> str:
    """*value* for a message: its JSON, cut short."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """A JSON object: a `dict` (checked first: it is what a client's JSON gives) or any other
    `Mapping`."""
    return type(value) is dict or isinstance(value, Mapping)


def is_int(value: object) -> bool:
    """A JSON integer: an `int` that is not a `bool`."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A JSON number: a finite `int` or `float` that is not a `bool` (JSON has no NaN or
    infinity)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not math.isfinite(value))
    )
