"""Answers the SDK drops: a legacy round fails at once instead of waiting out `round_timeout`.

On a legacy (2025-era) connection each ask is a server-to-client JSON-RPC request, and the round
waits for the response with that id. The SDK drops a response it cannot read (not JSON, nested
too deep, `"result": null`) and one whose id it never issued, so the round would wait until
`round_timeout`. An [AnswerWatch][mrtr_trio.mcp._wirewatch.AnswerWatch] sees the connection's
raw traffic (sans-IO: the transport feeds it what is sent and what arrives) and, for such a
message, returns a JSON-RPC *error response* to feed back in for each request it fails: the SDK
then ends the waiting `send_request` with that error, and the host turns it into
[InvalidInputResponse][mrtr_trio.InvalidInputResponse] (-32602) naming the request.

Which requests fail: the one the malformed response names, when it names an outstanding id; else
every request outstanding on the connection (a client that sends garbage on its session loses
its open rounds). A response for an id answered or abandoned earlier is late, not wrong, and is
left to the SDK, which ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
import pydantic
import pydantic_core
from mcp import MCPError

from .._errors import INVALID_PARAMS

__all__ = ["AnswerWatch", "malformed_reason"]

#: `error.data` of the error responses a watch makes, so the host can tell them apart.
_MARK = "mrtr_trio.malformed_answer"
#: How many settled ids a busy connection remembers to recognise late answers.
_SETTLED_KEPT = 1024


def malformed_reason(error: MCPError) -> str | None:
    """Why the client's answer was dropped, when *error* is a watch's error response."""
    data = error.error.data
    if isinstance(data, Mapping) and data.get("kind") == _MARK:
        return str(data.get("reason", "malformed"))
    return None


class AnswerWatch:
    """The server-to-client requests outstanding on one legacy connection, and what to do about
    a response the SDK will drop."""

    def __init__(self) -> None:
        self._outstanding: dict[Any, tuple[str, object]] = {}  # id → (method, stream)
        self._settled: dict[Any, None] = {}  # ids answered or abandoned, oldest first

    @property
    def idle(self) -> bool:
        """True when no request is outstanding (the watch may be forgotten)."""
        return not self._outstanding

    def sent(self, message: Mapping[str, Any], stream: object = None) -> None:
        """The server sent *message* (JSON) on *stream*."""
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self._outstanding[_key(message["id"])] = (method, stream)
        elif method == "notifications/cancelled":  # the server gave up on one of its requests
            params = message.get("params")
            if isinstance(params, Mapping):
                self._settle(_key(params.get("requestId")))

    def stream_ended(self, stream: object) -> None:
        """*stream* closed: requests sent on it can no longer be answered."""
        for key in [k for k, (_, s) in self._outstanding.items() if s is stream]:
            self._settle(key)

    def received(self, body: bytes | str) -> list[dict[str, Any]]:
        """The client sent *body*: the error responses to feed in (empty when the SDK reads it,
        or when it is no answer at all)."""
        if not self._outstanding:
            return []
        try:
            raw = pydantic_core.from_json(body)
        except ValueError as error:
            return self.unreadable(error)
        return self.received_json(raw)

    def unreadable(self, error: ValueError) -> list[dict[str, Any]]:
        """The client sent a body that is not JSON (*error* says why): as `received`."""
        if not self._outstanding:
            return []
        return self._fail_all(f"the client sent a message that is not readable JSON ({error})")

    def received_json(self, raw: Any) -> list[dict[str, Any]]:
        """The client sent *raw*, a body already parsed as JSON: as `received`."""
        if not self._outstanding:
            return []
        key = _plain_answer_key(raw)
        if key is not None and key in self._outstanding:
            self._settle(key)  # the commonest message here, read without the union's validator
            return []
        try:
            message = types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except pydantic.ValidationError as error:
            return self._invalid(raw, error)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            key = _key(message.id)
            if key in self._outstanding:
                self._settle(key)  # the SDK delivers it; the host checks its shape
            elif key not in self._settled:
                return self._fail_all(
                    f"the client sent an answer to request id {message.id!r}, which the server "
                    "never sent"
                )
        return []

    def _invalid(self, raw: Any, error: pydantic.ValidationError) -> list[dict[str, Any]]:
        if isinstance(raw, Mapping) and "method" in raw and "result" not in raw:
            return []  # a malformed request or notification: the SDK answers it, no round waits
        if isinstance(raw, Mapping) and ("result" in raw or "error" in raw):
            shape = types.JSONRPCError if "error" in raw else types.JSONRPCResponse
            try:
                shape.model_validate(raw, by_name=False)
            except pydantic.ValidationError as specific:
                error = specific
        detail = f"it is not a JSON-RPC response ({_first_error(error)})"
        if isinstance(raw, Mapping) and "id" in raw and _key(raw["id"]) in self._outstanding:
            self._settle(_key(raw["id"]))
            return [_error(raw["id"], detail)]
        return self._fail_all(
            f"the client sent a message that is not a JSON-RPC message ({_first_error(error)})"
        )

    def _fail_all(self, reason: str) -> list[dict[str, Any]]:
        failed = [_error(key[1], reason) for key in self._outstanding]
        for key in list(self._outstanding):
            self._settle(key)
        return failed

    def _settle(self, key: tuple[str, Any]) -> None:
        """Forget the request under *key* (see `_key`), remembering that it was settled."""
        self._outstanding.pop(key, None)
        self._settled[key] = None  # kept after the last request, so a late answer stays late
        if len(self._settled) > _SETTLED_KEPT:
            del self._settled[next(iter(self._settled))]


def _plain_answer_key(raw: Any) -> tuple[str, Any] | None:
    """The key of *raw* when it is a plain JSON-RPC result (exactly `jsonrpc` `"2.0"`, an
    integer or string `id` and an object `result`), which the SDK reads and delivers; else
    `None` (the full check decides)."""
    if type(raw) is not dict or len(raw) != 3 or raw.get("jsonrpc") != "2.0":
        return None
    request_id = raw.get("id")
    if type(raw.get("result")) is not dict or type(request_id) not in (int, str):
        return None
    return _key(request_id)


def _key(request_id: Any) -> tuple[str, Any]:
    # JSON-RPC ids compare by type and value: 1 and "1" are different requests.
    return (type(request_id).__name__, request_id)


def _error(request_id: Any, reason: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": INVALID_PARAMS,
            "message": reason,
            "data": {"kind": _MARK, "reason": reason},
        },
    }


def _first_error(error: pydantic.ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])
