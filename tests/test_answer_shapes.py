"""Answers are checked once, the same way in both eras: sampling content must be blocks of the
protocol's shapes, and content the requested schema did not ask for never reaches the handler
or the token (issue 9, fixes 1 and 2)."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from mrtr_trio import (
    Context,
    CreateMessageResult,
    InputRequired,
    InvalidInputResponse,
    Runtime,
    create_message,
    done,
    elicit,
    parse_answer,
)

from .flows import CONFIRM

SAMPLE = create_message("hi", max_tokens=5)
RUNTIME = Runtime([secrets.token_bytes(32)])

BAD_SAMPLING_CONTENT = [
    pytest.param({"type": "text", "text": 5}, "(text) text must be a string", id="text-not-str"),
    pytest.param({"type": "text"}, "(text) lacks text", id="text-missing"),
    pytest.param({"type": "image"}, "(image) lacks data", id="image-no-data"),
    pytest.param({"type": "image", "data": "AA=="}, "lacks mimeType", id="image-no-mime"),
    pytest.param({"type": "audio", "data": 1, "mimeType": "a/b"}, "data must be", id="audio"),
    pytest.param({"type": "x"}, "has type 'x'", id="unknown-kind"),
    pytest.param(
        {"type": "tool_use", "id": "1", "name": "t", "input": {}}, "has type 'tool_use'", id="tool"
    ),
    pytest.param({"type": "text", "text": "a", "annotations": 3}, "annotations", id="annotations"),
    pytest.param([], "must not be an empty list", id="empty-list"),
    pytest.param([{"type": "text", "text": "a"}, "b"], "content[1]", id="list-item"),
    pytest.param("text", "content block", id="not-a-block"),
]


@pytest.mark.parametrize(("content", "error"), BAD_SAMPLING_CONTENT)
def test_malformed_sampling_content_is_an_invalid_input_response(content: Any, error: str) -> None:
    with pytest.raises(InvalidInputResponse, match="bad content") as raised:
        parse_answer(SAMPLE, {"role": "assistant", "content": content, "model": "m"})
    assert error in str(raised.value)


@pytest.mark.parametrize(("content", "error"), BAD_SAMPLING_CONTENT)
def test_sampling_answer_values_refuse_malformed_content(content: Any, error: str) -> None:
    with pytest.raises((TypeError, ValueError)) as raised:
        CreateMessageResult("assistant", content, "m")
    assert error in str(raised.value)


async def _sample(ctx: Context):
    reply = yield create_message("hi", max_tokens=5)
    yield done(reply.text)


@pytest.mark.parametrize(("content", "error"), BAD_SAMPLING_CONTENT[:6])
async def test_neither_era_completes_a_flow_on_malformed_sampling_content(
    content: Any, error: str
) -> None:
    answer = {"role": "assistant", "content": content, "model": "m"}
    first = await RUNTIME.advance(_sample, {})
    assert isinstance(first, InputRequired)
    with pytest.raises(InvalidInputResponse, match=r"'input-0' \(the .*\) is malformed"):
        await RUNTIME.advance(
            _sample, {}, input_responses={"input-0": answer}, request_state=first.request_state
        )

    async def ask(key: str, request: Any) -> Any:
        return answer

    with pytest.raises(InvalidInputResponse, match=r"'input-0' \(the .*\) is malformed"):
        await RUNTIME.run_live(_sample, {}, ask)


def test_well_formed_blocks_of_every_sampling_kind_parse() -> None:
    blocks = [
        {"type": "text", "text": "Pa", "annotations": {"priority": 1}, "_meta": {"k": 1}},
        {"type": "image", "data": "AA==", "mimeType": "image/png"},
        {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
        {"type": "text", "text": "ris"},
    ]
    answer = parse_answer(SAMPLE, {"role": "assistant", "content": blocks, "model": "m"})
    assert isinstance(answer, CreateMessageResult)
    assert answer.text == "Paris"
    assert answer.content == tuple(blocks)


def test_unknown_block_fields_are_dropped() -> None:
    answer = parse_answer(
        SAMPLE,
        {
            "role": "assistant",
            "content": {"type": "text", "text": "a", "x": "y" * 50},
            "model": "m",
        },
    )
    assert answer.to_wire() == {
        "role": "assistant",
        "content": {"type": "text", "text": "a"},
        "model": "m",
    }


ASK_NAME = elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})


async def _greet(ctx: Context):
    first = yield ASK_NAME
    yield elicit("Sure?", CONFIRM)
    yield done(dict(first.content))


def test_content_the_schema_did_not_ask_for_is_dropped() -> None:
    answer = parse_answer(ASK_NAME, {"action": "accept", "content": {"name": "A", "x": "y"}})
    assert answer.to_wire() == {"action": "accept", "content": {"name": "A"}}


async def test_unasked_content_reaches_neither_the_handler_nor_the_token_in_either_era() -> None:
    plain = {"action": "accept", "content": {"name": "Ada"}}
    padded = {"action": "accept", "content": {"name": "Ada", "extra": "x" * 50}}
    huge = {
        "action": "accept",
        "content": {"name": "Ada", **{f"k{i}": "x" * 1000 for i in range(48)}},
    }
    first = await RUNTIME.advance(_greet, {})
    assert isinstance(first, InputRequired)
    tokens = []
    for answer in (plain, padded, huge):
        second = await RUNTIME.advance(
            _greet, {}, input_responses={"input-0": answer}, request_state=first.request_state
        )
        assert isinstance(second, InputRequired)
        tokens.append(second.request_state)
    assert tokens[0] is not None
    assert {len(t or "") for t in tokens} == {len(tokens[0])}  # no extra inflates the token

    answers = iter([huge, {"action": "accept", "content": {"confirm": True}}])

    async def ask(key: str, request: Any) -> Any:
        return next(answers)

    assert await RUNTIME.run_live(_greet, {}, ask) == {"name": "Ada"}
