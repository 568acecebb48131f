"""Answers in the official SDK's types (`mcp_types.ElicitResult` and friends, what an
`mcp.Client` callback returns) are taken wherever an answer is: `parse_answer`,
`Runtime.advance(input_responses=...)`, `run_live`'s `ask`, and the testing kit's answer
functions (issue 20, item 5). Anything else is refused with an error naming what is taken."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from mrtr_trio import (
    Complete,
    ElicitResult,
    InvalidInputResponse,
    Runtime,
    accepted_content,
    create_message,
    done,
    elicit,
    input_response,
    list_roots,
    parse_answer,
)
from mrtr_trio.testing import assert_eras_agree, run_live, run_modern

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
SDK_ELICIT = mcp_types.ElicitResult(action="accept", content={"name": "Ada"})
SDK_SAMPLE = mcp_types.CreateMessageResult(
    role="assistant", content=mcp_types.TextContent(type="text", text="hi"), model="m"
)
SDK_ROOTS = mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///srv", name="srv")])


async def everything(ctx: Any) -> Any:
    who = yield elicit("Name?", NAME)
    rest = yield {"notes": create_message("Say hi", max_tokens=5), "roots": list_roots()}
    yield done(f"{who.content['name']} {rest['notes'].text} {rest['roots'].roots[0].uri}")


def sdk_answer(key: str, request: Any) -> Any:
    return {"elicitation/create": SDK_ELICIT, "sampling/createMessage": SDK_SAMPLE}.get(
        request.method, SDK_ROOTS
    )


def test_parse_answer_takes_the_sdk_result_types() -> None:
    assert parse_answer(elicit("Name?", NAME), SDK_ELICIT) == ElicitResult(
        "accept", {"name": "Ada"}
    )
    assert parse_answer(create_message("x", max_tokens=5), SDK_SAMPLE).text == "hi"
    roots = parse_answer(list_roots(), SDK_ROOTS).roots
    assert [(r.uri, r.name) for r in roots] == [("file:///srv", "srv")]


async def test_the_testing_kit_takes_sdk_answers() -> None:
    expected = "Ada hi file:///srv"
    assert await run_modern(everything, {}, sdk_answer) == expected
    assert await run_live(everything, {}, sdk_answer) == expected
    assert await assert_eras_agree(everything, {}, sdk_answer) == expected


async def test_advance_and_run_live_take_sdk_answers() -> None:
    runtime = Runtime([b"s" * 32])
    first = await runtime.advance(everything, {})
    second = await runtime.advance(
        everything,
        {},
        input_responses={"input-0": SDK_ELICIT},
        request_state=first.request_state,  # type: ignore[union-attr]
    )
    third = await runtime.advance(
        everything,
        {},
        input_responses={"notes": SDK_SAMPLE, "roots": SDK_ROOTS},
        request_state=second.request_state,  # type: ignore[union-attr]
    )
    assert third == Complete("Ada hi file:///srv")

    async def ask(key: str, request: Any) -> Any:
        return sdk_answer(key, request)

    assert await runtime.run_live(everything, {}, ask) == "Ada hi file:///srv"


def test_an_answer_of_another_type_names_what_is_taken() -> None:
    with pytest.raises(InvalidInputResponse) as error:
        parse_answer(elicit("Name?", NAME), ("accept", {"name": "Ada"}))
    assert "mrtr_trio.ElicitResult or the SDK's mcp_types.ElicitResult" in str(error.value)
    assert "a JSON object" in str(error.value)


@pytest.mark.parametrize(
    "raw", [SDK_ELICIT, {"action": "accept", "content": {"name": "Ada"}}], ids=["sdk", "json"]
)
def test_the_return_style_helpers_read_sdk_answers_and_json(raw: Any) -> None:
    responses = {"who": raw}
    assert accepted_content(responses, "who") == {"name": "Ada"}
    assert input_response(responses, "who") == ElicitResult("accept", {"name": "Ada"})
    assert accepted_content(responses, "nobody") is None and input_response(responses, "x") is None
