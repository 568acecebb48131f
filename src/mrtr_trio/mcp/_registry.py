"""What an [App][mrtr_trio.mcp.App] serves: tools, prompts and resources, and how their
arguments are described and checked.

Each registered function becomes an `Entry`. Its arguments model is a pydantic model of the
function's parameters after the first (the context, whatever its name), read with
`inspect.signature(fn, eval_str=True)` so string annotations work; it gives the tool's input
schema and the prompt's argument list, and validates what clients send. A tool may instead
advertise a schema given verbatim (its arguments are still checked against the parameters), map
parameters to `Mcp-Param-*` HTTP headers (`x-mcp-header`, SEP-2243), and carry a task policy;
any handler may name the scopes a caller's token needs to use it.
Resource URIs may be RFC 6570 templates (`test://items/{id}`, `file:///{+path}`,
`logs://{app}{?since}`) whose variables are the function's parameters; they are parsed and
matched by the official SDK's `UriTemplate`, which percent-decodes what it captures.

A tool registered with `strict=True` (the App's `strict_arguments`) checks its arguments against
the advertised input schema first, by JSON Schema and without coercion: `"3"` is not an
integer, `"true"` not a boolean, and an argument the schema does not name is refused rather
than dropped (a schema made from the parameters says so, `additionalProperties: false`). Every
problem is reported, each with its path. Prompt arguments and URI template variables are strings
by the protocol, so their parameters convert them in both modes.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attrs
import jsonschema
import pydantic
from mcp import InvalidUriTemplate, UriTemplate

from .._flow import is_generator_handler
from ._sdk import X_MCP_HEADER_KEY, invalid_header_annotation

__all__ = ["ArgumentsError", "Entry", "make_entry"]

Kind = Literal["tool", "prompt", "resource"]


class ArgumentsError(ValueError):
    """A client's arguments do not fit the handler's parameters; the message says how."""


@attrs.frozen
class Entry:
    """One registered handler."""

    kind: Kind
    name: str
    fn: Callable[..., Any]
    description: str | None
    arguments_model: type[pydantic.BaseModel]
    uri: str | None = None
    mime_type: str | None = None
    uri_template: UriTemplate | None = None
    task: str = "forbidden"
    schema: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    scopes: tuple[str, ...] = ()
    strict: bool = False
    mask_errors: bool = False
    _input_schema: Mapping[str, Any] = attrs.field(init=False, eq=False, repr=False)
    _checker: jsonschema.protocols.Validator | None = attrs.field(init=False, eq=False, repr=False)
    _plain: _Plain | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # Built once: the SDK asks for a tool's schema before every tools/call with arguments.
        schema = self._build_input_schema()
        object.__setattr__(self, "_input_schema", schema)
        checker = None
        if self.strict and self.kind == "tool":
            cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
            cls.check_schema(schema)
            checker = cls(schema)
        object.__setattr__(self, "_checker", checker)
        object.__setattr__(self, "_plain", _plain(schema) if checker is not None else None)

    @property
    def is_template(self) -> bool:
        """A resource whose URI has `{variables}`."""
        return self.uri_template is not None

    def input_schema(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments (a tool's `inputSchema`): the one given verbatim,
        or the parameters' own; with each header-mapped parameter annotated. Built at
        registration and shared: read it, never change it (copy it to hand it out)."""
        return self._input_schema

    def _build_input_schema(self) -> dict[str, Any]:
        if self.schema is not None:
            schema = copy.deepcopy(dict(self.schema))
        else:
            schema = self.arguments_model.model_json_schema(by_alias=True)
            schema.pop("title", None)
            if self.strict and self.kind == "tool":
                schema["additionalProperties"] = False  # what strict checking enforces
        properties = schema.setdefault("properties", {})
        for parameter, header in self.headers.items():
            properties[parameter] = {**properties.get(parameter, {}), X_MCP_HEADER_KEY: header}
        return schema

    def parameters(self) -> list[tuple[str, str | None, bool]]:
        """`(name, description, required)` for each argument (a prompt's argument list)."""
        return [
            (field.alias or name, field.description, field.is_required())
            for name, field in self.arguments_model.model_fields.items()
        ]

    def validate(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The arguments as the handler receives them (validated and converted), or
        `ArgumentsError` saying what is wrong."""
        if self._checker is not None:
            self._check_strictly(dict(arguments or {}))
        try:
            model = self.arguments_model.model_validate(dict(arguments or {}))
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors()
            )
            raise ArgumentsError(
                f"invalid arguments for {self.kind} {self.name!r}: {problems}"
            ) from None
        return {
            field.alias or name: getattr(model, name)
            for name, field in self.arguments_model.model_fields.items()
        }

    def _check_strictly(self, arguments: dict[str, Any]) -> None:
        """`ArgumentsError` listing every way *arguments* break the advertised schema, and
        every argument it does not name."""
        assert self._checker is not None
        if self._plain is not None and self._plain.passes(arguments):
            return
        problems = [
            f"{_json_path(error.absolute_path) or 'arguments'}: {error.message}"
            for error in sorted(self._checker.iter_errors(arguments), key=_error_order)
            if error.validator != "additionalProperties"  # said below, one line per name
        ]
        named = self._input_schema.get("properties", {})
        unknown = sorted(key for key in arguments if key not in named)
        # Refused unless a schema given verbatim allows more (`additionalProperties`).
        if unknown and self._input_schema.get("additionalProperties", False) is False:
            takes = ", ".join(sorted(named)) or "none"
            problems += [
                f"{key}: not an argument of this tool (it takes {takes})" for key in unknown
            ]
        if problems:
            raise ArgumentsError(
                f"invalid arguments for tool {self.name!r} (checked strictly against its "
                f"input schema): {'; '.join(problems)}"
            )

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The template variables, percent-decoded, if *uri* matches this resource's template,
        else `None` (always, for a plain URI: those are looked up by key). Query variables
        (`{?since}`) the URI leaves out are absent, so their defaults apply."""
        return None if self.uri_template is None else self.uri_template.match(uri)


# Strict checking by jsonschema alone cost about 13 us a call (16.1 us against 2.6 us for the
# lax pydantic validation alone, for a two-string tool: some 10% of the server's work per
# modern leg). Most tools' schemas are plain typed properties, which these checks pass for
# about 0.6 us (2.7 us against 2.1 us, timeit, 20,000 calls). They only ever say "valid":
# anything they do not pass goes to jsonschema for the verdict and the messages.
_PLAIN_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: type(value) is str,
    "integer": lambda value: type(value) is int,
    "boolean": lambda value: type(value) is bool,
    "number": lambda value: type(value) is int or type(value) is float,
}
_PLAIN_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})
_PLAIN_PROPERTY_KEYWORDS = frozenset({"type", "title", "description", "default"})


@attrs.frozen
class _Plain:
    """A schema of plain typed properties, no others allowed: checked by hand."""

    required: frozenset[str]
    checks: Mapping[str, Callable[[Any], bool]]

    def passes(self, arguments: Mapping[str, Any]) -> bool:
        checks = self.checks
        for key, value in arguments.items():
            check = checks.get(key)
            if check is None or not check(value):
                return False
        return self.required <= arguments.keys()


def _plain(schema: Mapping[str, Any]) -> _Plain | None:
    """The hand checks for *schema*, or `None` when it is not plain (see `_PLAIN_TYPES`)."""
    if not set(schema) <= _PLAIN_OBJECT_KEYWORDS or schema.get("type") != "object":
        return None
    if schema.get("additionalProperties") is not False:
        return None
    checks = {}
    for name, prop in schema.get("properties", {}).items():
        if not isinstance(prop, Mapping) or not set(prop) <= _PLAIN_PROPERTY_KEYWORDS:
            return None
        check = _PLAIN_TYPES.get(prop.get("type"))  # type: ignore[arg-type]
        if check is None:
            return None
        checks[name] = check
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    return _Plain(frozenset(required), checks)


def _json_path(path: Any) -> str:
    """A JSON Schema error's location as `items[0].name`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _error_order(error: jsonschema.ValidationError) -> tuple[str, str]:
    return (_json_path(error.absolute_path), error.message)


def make_entry(
    kind: Kind,
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    uri: str | None = None,
    mime_type: str | None = None,
    task: str = "forbidden",
    input_schema: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    scopes: Iterable[str] = (),
    strict: bool = False,
    mask_errors: bool = False,
) -> Entry:
    """An `Entry` for *fn*, or `TypeError`/`ValueError` saying
    why it cannot be one. *strict*: a tool's arguments are checked against its advertised
    schema without coercion. *mask_errors*: a failure in the handler reaches the client as an
    error id only."""
    is_generator_handler(fn)  # raises TypeError for anything but an async def function
    name = name or getattr(fn, "__name__", None)
    if not name:
        raise TypeError(f"cannot name {fn!r}; pass name=...")
    if description is None:
        description = inspect.getdoc(fn)
    model = _arguments_model(fn, name)
    template = _uri_template(uri, model) if uri is not None else None
    if input_schema is not None and (
        not isinstance(input_schema, Mapping) or input_schema.get("type") != "object"
    ):
        raise TypeError(f"{name}: input_schema must be a JSON schema of type object")
    entry = Entry(
        kind,
        name,
        fn,
        description,
        model,
        uri,
        mime_type,
        template,
        task=task,
        schema=None if input_schema is None else copy.deepcopy(dict(input_schema)),
        headers=dict(headers or {}),
        scopes=_scopes(name, scopes),
        strict=strict,
        mask_errors=mask_errors,
    )
    _check_headers(entry)
    return entry


def _scopes(name: str, scopes: Iterable[str]) -> tuple[str, ...]:
    if isinstance(scopes, str):
        raise TypeError(f"{name}: scopes must be a list of scope strings, not one string")
    result = tuple(dict.fromkeys(scopes))
    for scope in result:
        if not isinstance(scope, str) or not scope or any(c in scope for c in ' "\\'):
            raise TypeError(f"{name}: {scope!r} is not a scope (a non-empty token)")
        if scope == "offline_access":  # MCP 2026-07-28: never in metadata or a challenge
            raise TypeError(f"{name}: offline_access is the client's business, not a handler's")
    return result


def _check_headers(entry: Entry) -> None:
    parameters = {field.alias for field in entry.arguments_model.model_fields.values()}
    for parameter, header in entry.headers.items():
        if parameter not in parameters:
            raise TypeError(f"{entry.name}: headers= names {parameter!r}, not a parameter")
        if not isinstance(header, str):
            raise TypeError(f"{entry.name}: the header for {parameter!r} must be a str")
    problem = invalid_header_annotation(entry.input_schema())
    if problem is not None:
        raise TypeError(f"{entry.name}: {problem}")


def _uri_template(uri: str, model: type[pydantic.BaseModel]) -> UriTemplate | None:
    """The parsed template of a resource URI (`None` for a plain URI), checked against the
    handler's parameters."""
    if "{" not in uri and "}" not in uri:  # braces are not URI characters: a template
        variables: list[str] = []
        template = None
    else:
        try:
            template = UriTemplate.parse(uri)
        except InvalidUriTemplate as error:
            raise ValueError(f"resource {uri!r}: {error}") from None
        variables = template.variable_names
    fields = {field.alias or key: field for key, field in model.model_fields.items()}
    if set(variables) != set(fields):
        raise TypeError(
            f"resource {uri!r}: the handler's parameters after the context "
            f"({sorted(fields)}) must be the URI template's variables ({sorted(variables)})"
        )
    for name in sorted(template.query_variable_names if template else ()):
        if fields[name].is_required():
            raise TypeError(
                f"resource {uri!r}: query variable {name!r} may be left out of a URI; "
                "give its parameter a default"
            )
    return template


def _arguments_model(fn: Callable[..., Any], name: str) -> type[pydantic.BaseModel]:
    try:
        signature = inspect.signature(fn, eval_str=True)
    except NameError as error:
        raise TypeError(f"{name}: cannot resolve an annotation ({error})") from None
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(f"{name}: the first parameter must be the context (e.g. `ctx`)")
    fields: dict[str, Any] = {}
    for parameter in parameters[1:]:
        if parameter.kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            raise TypeError(
                f"{name}: parameter {parameter.name!r} must be nameable by a client "
                "(no *args, **kwargs or positional-only parameters)"
            )
        annotation = (
            Any if parameter.annotation is inspect.Parameter.empty else parameter.annotation
        )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        # Fields are aliased so any parameter name works, even one pydantic reserves.
        fields[f"arg_{len(fields)}"] = (
            annotation,
            pydantic.Field(default, alias=parameter.name),
        )
    return pydantic.create_model(
        f"{name}_arguments",
        __config__=pydantic.ConfigDict(populate_by_name=False, arbitrary_types_allowed=True),
        **fields,
    )
