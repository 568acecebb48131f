"""The answer watch on its own (sans-IO): what it remembers of the server's requests, when it
forgets them, and which requests a message the SDK drops fails; and what stdio shows it."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pydantic_core
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from mrtr_trio.mcp._transports import _WatchedWrite
from mrtr_trio.mcp._wirewatch import AnswerWatch, malformed_reason

STREAM = object()


def _ask(watch: AnswerWatch, request_id: Any, stream: object = STREAM) -> None:
    watch.sent(
        {"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": {}}, stream
    )


def _answer(request_id: Any) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept", "content": {}}}
    ).encode()


def _failed(feed: list[dict[str, Any]]) -> list[Any]:
    """The ids the error responses in *feed* fail, each checked to be a watch's own."""
    for message in feed:
        error = message["error"]
        assert malformed_reason(MCPError(error["code"], error["message"], error["data"]))
    return [message["id"] for message in feed]


def test_an_answered_request_is_forgotten() -> None:
    watch = AnswerWatch()
    assert watch.idle
    _ask(watch, 0)
    assert not watch.idle
    assert watch.received(_answer(0)) == []  # the SDK delivers it
    assert watch.idle


def test_requests_on_an_ended_stream_are_forgotten() -> None:
    watch = AnswerWatch()
    other = object()
    _ask(watch, 0)
    _ask(watch, 1, other)
    watch.stream_ended(STREAM)
    assert not watch.idle  # request 1 is on another stream
    watch.stream_ended(other)
    assert watch.idle


def test_a_request_the_server_cancelled_is_forgotten() -> None:
    watch = AnswerWatch()
    _ask(watch, "a")
    watch.sent(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}}
    )
    assert watch.idle


def test_a_late_duplicate_answer_after_a_new_ask_does_not_fail_the_new_round() -> None:
    watch = AnswerWatch()
    _ask(watch, 0)
    assert watch.received(_answer(0)) == []
    _ask(watch, 1)  # the next round
    assert watch.received(_answer(0)) == []  # late, not wrong: the SDK ignores it
    assert not watch.idle
    assert watch.received(_answer(1)) == []
    assert watch.idle


def test_garbage_fails_only_what_is_outstanding() -> None:
    watch = AnswerWatch()
    _ask(watch, 0)
    assert watch.received(_answer(0)) == []
    _ask(watch, 1)
    _ask(watch, 2)
    assert _failed(watch.received(b"not json")) == [1, 2]  # not 0, answered long ago
    assert watch.idle


def test_an_answer_to_an_id_never_sent_fails_every_outstanding_request() -> None:
    watch = AnswerWatch()
    _ask(watch, 0)
    feed = watch.received(_answer(99))
    assert _failed(feed) == [0]
    assert "never sent" in feed[0]["error"]["message"]
    assert watch.idle


def test_a_malformed_answer_fails_the_request_it_names() -> None:
    watch = AnswerWatch()
    _ask(watch, 0)
    _ask(watch, 1)
    feed = watch.received(b'{"jsonrpc": "2.0", "id": 1, "result": null}')
    assert _failed(feed) == [1]
    assert not watch.idle
    assert watch.received(_answer(0)) == []
    assert watch.idle


def test_ids_of_different_types_are_different_requests() -> None:
    watch = AnswerWatch()
    _ask(watch, 1)
    assert _failed(watch.received(_answer("1"))) == [1]  # "1" was never sent


@pytest.mark.parametrize(
    "answer",
    [
        {"jsonrpc": "2.0", "id": True, "result": {}},  # True == 1, but not a JSON-RPC id
        {"jsonrpc": "2.0", "id": 1, "result": []},  # a result that is not an object
        {"jsonrpc": "1.0", "id": 1, "result": {}},
    ],
)
def test_an_answer_that_only_looks_plain_takes_the_full_check(answer: dict[str, Any]) -> None:
    watch = AnswerWatch()
    _ask(watch, 1)
    assert _failed(watch.received(json.dumps(answer).encode())) == [1]


def test_a_plain_answer_with_more_members_is_still_delivered() -> None:
    watch = AnswerWatch()
    _ask(watch, 1)
    answer = {"jsonrpc": "2.0", "id": 1, "result": {}, "x-vendor": {}}  # the SDK reads it
    assert watch.received(json.dumps(answer).encode()) == []
    assert watch.idle


def test_a_request_or_notification_from_the_client_fails_nothing() -> None:
    watch = AnswerWatch()
    _ask(watch, 0)
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    assert watch.received(json.dumps(ping).encode()) == []
    assert watch.received(b'{"jsonrpc": "2.0", "method": 5}') == []  # malformed, SDK answers
    assert not watch.idle


def test_a_body_parsed_by_the_caller_reads_as_the_same_bytes() -> None:
    parsed, raw = AnswerWatch(), AnswerWatch()
    for watch in (parsed, raw):
        _ask(watch, 0)
        _ask(watch, 1)
    assert parsed.received_json(json.loads(_answer(0))) == raw.received(_answer(0)) == []
    with pytest.raises(ValueError) as unreadable:
        pydantic_core.from_json(b"{")
    feed = parsed.unreadable(unreadable.value)
    assert feed == raw.received(b"{") and _failed(feed) == [1]
    assert parsed.idle and raw.idle


async def test_stdio_shows_the_watch_only_requests_and_cancellations() -> None:
    shown: list[dict[str, Any]] = []
    delivered: list[SessionMessage] = []

    class Recorder(AnswerWatch):
        def sent(self, message: Any, stream: object = None) -> None:
            shown.append(dict(message))
            super().sent(message, stream)

    class Stream:
        async def send(self, item: SessionMessage) -> None:
            delivered.append(item)

    write = _WatchedWrite(Stream(), Recorder())
    messages = [
        types.JSONRPCRequest(jsonrpc="2.0", id=0, method="roots/list"),
        types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/progress", params={"progress": 1}
        ),
        types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 0}
        ),
        types.JSONRPCResponse(jsonrpc="2.0", id=3, result={}),
    ]
    for message in messages:
        await write.send(SessionMessage(message))
    assert [m["method"] for m in shown] == ["roots/list", "notifications/cancelled"]
    assert [d.message for d in delivered] == messages
    assert write._watch.idle  # cancelled: forgotten
