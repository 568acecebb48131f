"""What a token is bound to: the digest of the handler identity, the arguments and the
host's bind bytes, which the tag covers and the token does not carry (remembered for small,
plain arguments)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import blake3
import cbor2

from ._util import Memo

__all__ = ["binding_digest"]


def binding_digest(identity: str, arguments: Mapping[str, Any], bind: bytes) -> bytes:
    """The 32-byte digest of what a token is bound to: the handler identity, a canonical
    encoding of the arguments, and the host's *bind* bytes.

    Values CBOR cannot encode bind by their JSON form when they have one (pydantic models), else
    by type name only; a host that validates arguments binds the raw ones through *bind*.

    Every round of a flow binds the same arguments again: digests of small, plain ones are
    remembered (see `_binding_key`).
    """
    key = _binding_key(identity, arguments, bind)
    known = None if key is None else _BINDINGS.get(key)
    if known is not None:
        return known
    canonical = cbor2.dumps(
        [identity, dict(arguments), bytes(bind)], canonical=True, default=_bind_fallback
    )
    digest = blake3.blake3(canonical).digest()
    return digest if key is None else _BINDINGS.put(key, digest)


# At most 256 keys of at most 16 short values each: a bounded memory, whatever clients send.
_BINDINGS: Memo[tuple[Any, ...], bytes] = Memo(256)
_MAX_KEYED_ARGUMENTS = 16
_MAX_KEYED_TEXT = 128
_MAX_KEYED_INT = 1 << 64


def _binding_key(
    identity: str, arguments: Mapping[str, Any], bind: bytes
) -> tuple[Any, ...] | None:
    """A key under which the binding digest is remembered, or `None` (not remembered).

    Two keys are equal only when the canonical encodings are: each argument is keyed by its
    name (a str), its exact type and its value, and only str (short), int (within 64 bits),
    bool and None values are keyed (1, 1.0 and True are equal in Python but encode
    differently; so do 0.0 and -0.0, which is why floats are left out). Long texts, big
    numbers and many arguments are not keyed, so the memo stays small.
    """
    if (
        type(identity) is not str
        or type(bind) is not bytes
        or len(arguments) > _MAX_KEYED_ARGUMENTS
    ):
        return None
    parts: list[Any] = [identity, bind]
    for name, value in arguments.items():
        kind = type(value)
        if type(name) is not str:
            return None
        if kind is str:
            if len(value) > _MAX_KEYED_TEXT:
                return None
        elif kind is int:
            if not -_MAX_KEYED_INT < value < _MAX_KEYED_INT:
                return None
        elif kind is not bool and value is not None:
            return None
        parts += (name, kind, value)
    return tuple(parts)


def _bind_fallback(encoder: cbor2.CBOREncoder, value: Any) -> None:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        encoder.encode(dump(mode="json"))
    else:
        encoder.encode(f"<{type(value).__module__}.{type(value).__qualname__}>")
