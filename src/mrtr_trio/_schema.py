"""The restricted JSON schema of form-mode elicitation.

MCP limits ``requestedSchema`` to a flat object whose properties are primitives: strings (with
``minLength``, ``maxLength``, ``format``), numbers and integers (``minimum``, ``maximum``),
booleans, single-choice enums (``enum``, or ``oneOf`` of ``{const, title}``) and multi-choice
arrays (``items.enum`` or ``items.anyOf``, with ``minItems`` / ``maxItems``). This module owns two
checks: :func:`check_schema` (is this a schema a client can render? raises ``ValueError`` or
``TypeError`` naming the problem) and :func:`content_problems` (does accepted content satisfy
it? returns the problems, empty when it does).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any, TypeGuard
from urllib.parse import urlsplit

__all__ = ["check_schema", "content_problems", "is_int", "is_mapping", "is_number"]

_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean", "array"})
_STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


def check_schema(schema: object) -> None:
    """Raise ``TypeError`` or ``ValueError`` unless *schema* is a valid elicitation schema."""
    if not isinstance(schema, Mapping):
        raise TypeError(f"requested schema must be a dict, got {type(schema).__name__}")
    if schema.get("type") != "object":
        raise ValueError(f'requested schema must have "type": "object", got {schema.get("type")!r}')
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise TypeError('requested schema "properties" must be a dict of property schemas')
    for name, prop in properties.items():
        if not isinstance(name, str):
            raise TypeError(f"requested schema property names must be strings, got {name!r}")
        _check_property(name, prop)
    required = schema.get("required", [])
    if not isinstance(required, list | tuple) or not all(isinstance(r, str) for r in required):
        raise TypeError('requested schema "required" must be a list of property names')
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise ValueError(f"requested schema requires {unknown} but has no such properties")


def _check_property(name: str, prop: object) -> None:
    where = f"requested schema property {name!r}"
    if not isinstance(prop, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(prop).__name__}")
    kind = prop.get("type")
    if kind not in _PRIMITIVE_TYPES:
        raise ValueError(
            f"{where} has type {kind!r}; elicitation allows only "
            "string, number, integer, boolean, or array (multi-select enum)"
        )
    if "enum" in prop:
        values = prop["enum"]
        if kind != "string" or not isinstance(values, list) or not values:
            raise ValueError(f'{where}: "enum" must be a non-empty list on a string property')
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f'{where}: "enum" values must be strings')
    if "oneOf" in prop:
        _check_consts(where, "oneOf", prop["oneOf"])
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
            raise ValueError(
                f'{where}: an array property needs "items" with "enum" or "anyOf" '
                "(elicitation arrays are multi-select enums)"
            )
        if "enum" in items and (
            not isinstance(items["enum"], list)
            or not items["enum"]
            or not all(isinstance(v, str) for v in items["enum"])
        ):
            raise ValueError(f'{where}: "items.enum" must be a non-empty list of strings')
        if "anyOf" in items:
            _check_consts(where, "items.anyOf", items["anyOf"])
    if "format" in prop and prop["format"] not in _STRING_FORMATS:
        raise ValueError(
            f"{where}: format {prop['format']!r} is not one of {sorted(_STRING_FORMATS)}"
        )
    for bound in ("minLength", "maxLength", "minItems", "maxItems"):
        if bound in prop and not (is_int(prop[bound]) and prop[bound] >= 0):
            raise ValueError(f"{where}: {bound} must be a non-negative integer")
    for bound in ("minimum", "maximum"):
        if bound in prop and not is_number(prop[bound]):
            raise ValueError(f"{where}: {bound} must be a number")


def _check_consts(where: str, field: str, options: object) -> None:
    if (
        not isinstance(options, list)
        or not options
        or not all(isinstance(o, Mapping) and isinstance(o.get("const"), str) for o in options)
    ):
        raise ValueError(f'{where}: "{field}" must be a non-empty list of {{"const": str}} options')


def content_problems(schema: Mapping[str, Any], content: Mapping[str, Any]) -> list[str]:
    """The ways *content* fails *schema* (a schema that passed :func:`check_schema`).

    Checks required fields, types, enums and the numeric, length, item-count and format bounds.
    Fields the schema does not mention are not checked.
    """
    problems: list[str] = []
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in content:
            problems.append(f"{name!r} is required")
    for name, value in content.items():
        prop = properties.get(name)
        if prop is not None:
            problem = _value_problem(prop, value)
            if problem:
                problems.append(f"{name!r} {problem}")
    return problems


def _value_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    kind = prop["type"]
    if kind == "string":
        if not isinstance(value, str):
            return f"must be a string, got {_json_type(value)}"
        if "minLength" in prop and len(value) < prop["minLength"]:
            return f"must be at least {prop['minLength']} characters"
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            return f"must be at most {prop['maxLength']} characters"
        if "format" in prop and not _has_format(prop["format"], value):
            return f"must be a valid {prop['format']}"
        allowed = _choices(prop)
        if allowed is not None and value not in allowed:
            return f"must be one of {sorted(allowed)}"
        return None
    if kind in ("number", "integer"):
        if not is_number(value) or (kind == "integer" and not _is_integral(value)):
            return f"must be {'an integer' if kind == 'integer' else 'a number'}, got {value!r}"
        if "minimum" in prop and value < prop["minimum"]:
            return f"must be at least {prop['minimum']}"
        if "maximum" in prop and value > prop["maximum"]:
            return f"must be at most {prop['maximum']}"
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else f"must be a boolean, got {_json_type(value)}"
    # kind == "array": a multi-select enum
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"must be a list of strings, got {_json_type(value)}"
    if "minItems" in prop and len(value) < prop["minItems"]:
        return f"must have at least {prop['minItems']} items"
    if "maxItems" in prop and len(value) > prop["maxItems"]:
        return f"must have at most {prop['maxItems']} items"
    allowed = _choices(prop["items"])
    if allowed is not None and not set(value) <= allowed:
        return f"items must be among {sorted(allowed)}"
    return None


def _choices(prop: Mapping[str, Any]) -> set[str] | None:
    if "enum" in prop:
        return set(prop["enum"])
    for field in ("oneOf", "anyOf"):
        if field in prop:
            return {option["const"] for option in prop[field]}
    return None


def _has_format(fmt: str, value: str) -> bool:
    try:
        if fmt == "date":
            datetime.date.fromisoformat(value)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(value)
        elif fmt == "uri":
            parts = urlsplit(value)
            return bool(parts.scheme) and bool(parts.netloc or parts.path)
        elif fmt == "email":
            return _EMAIL.match(value) is not None
    except ValueError:
        return False
    return True


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """A JSON object: a ``dict`` (checked first: it is what a client's JSON gives) or any other
    ``Mapping``."""
    return type(value) is dict or isinstance(value, Mapping)


def is_int(value: object) -> bool:
    """A JSON integer: an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A JSON number: a finite ``int`` or ``float`` that is not a ``bool`` (JSON has no NaN or
    infinity)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def _is_integral(value: int | float) -> bool:
    return isinstance(value, int) or value.is_integer()


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__
