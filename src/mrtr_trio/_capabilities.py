"""Client capabilities: which capability each request needs, and what a client lacks.

A 2026-07-28 client declares its capabilities on every request, a 2025-era client once per
session; either way [missing_capabilities][mrtr_trio._capabilities.missing_capabilities] names
what the requests of a round need and the client did not declare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._requests import CreateMessageRequest, ElicitRequest, Request

__all__ = ["ALL_CAPABILITIES", "missing_capabilities"]

#: The capabilities assumed when a caller passes `client_capabilities=None` ("all declared").
ALL_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"context": {}, "tools": {}},
    "roots": {"listChanged": True},
}


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
