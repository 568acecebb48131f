"""Requests and answers: constructors, wire forms in both eras, parsing untrusted answers."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_trio import (
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    InvalidInputResponse,
    ListRootsResult,
    Root,
    accepted_content,
    create_message,
    elicit,
    elicit_url,
    input_response,
    list_roots,
    parse_answer,
)
from mrtr_trio._values import missing_capabilities, request_from_wire

from .flows import CONFIRM

ENUMS = {
    "type": "object",
    "properties": {
        "untitled": {"type": "string", "enum": ["a", "b"]},
        "titled": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "legacy": {"type": "string", "enum": ["x", "y"], "enumNames": ["X", "Y"]},
        "multi": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}},
        "titled_multi": {
            "type": "array",
            "items": {"anyOf": [{"const": "p", "title": "P"}]},
            "maxItems": 1,
        },
        "email": {"type": "string", "format": "email", "default": "a@b.c"},
        "n": {"type": "number", "minimum": 0, "maximum": 1.5, "default": 1},
    },
    "required": ["untitled"],
}


def test_elicit_wire_forms_in_both_eras() -> None:
    request = elicit("Deploy?", CONFIRM)
    assert request.to_wire() == {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Deploy?", "requestedSchema": CONFIRM},
    }
    assert request.to_legacy_wire("2025-06-18") == {
        "method": "elicitation/create",
        "params": {"message": "Deploy?", "requestedSchema": CONFIRM},
    }
    url = elicit_url("Sign in", "https://example.com/login")
    assert url.to_wire()["params"] == {
        "mode": "url",
        "message": "Sign in",
        "url": "https://example.com/login",
    }
    legacy = url.to_legacy_wire("2025-11-25", elicitation_id="e-1")
    assert legacy["params"]["elicitationId"] == "e-1"
    assert (
        url.to_legacy_wire()["params"]["elicitationId"]
        != url.to_legacy_wire()["params"]["elicitationId"]
    )
    with pytest.raises(ValueError, match="does not exist in MCP 2025-06-18"):
        url.to_legacy_wire("2025-06-18")
    with pytest.raises(ValueError, match="not a legacy MCP version"):
        request.to_legacy_wire("2026-07-28")


def test_sampling_and_roots_wire_forms() -> None:
    request = create_message(
        "What is the capital of France?",
        max_tokens=100,
        system_prompt="Be brief",
        temperature=0.2,
        stop_sequences=["\n"],
        include_context="none",
    )
    assert request.messages == (
        {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}},
    )
    assert request.to_wire() == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [
                {
                    "role": "user",
                    "content": {"type": "text", "text": "What is the capital of France?"},
                }
            ],
            "maxTokens": 100,
            "systemPrompt": "Be brief",
            "temperature": 0.2,
            "stopSequences": ["\n"],
            "includeContext": "none",
        },
    }
    assert list_roots().to_wire() == {"method": "roots/list", "params": {}}
    assert list_roots().to_legacy_wire() == list_roots().to_wire()


@pytest.mark.parametrize(
    "request_",
    [
        elicit("m", ENUMS),
        elicit_url("m", "https://x.test/a"),
        create_message(
            [{"role": "assistant", "content": [{"type": "text", "text": "t"}]}], max_tokens=3
        ),
        list_roots(),
    ],
)
def test_request_wire_round_trip(request_: Any) -> None:
    assert request_from_wire(request_.to_wire()) == request_


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: elicit("m", {"type": "array"}), 'must have "type": "object"'),
        (lambda: elicit("m", []), "must be a dict"),
        (
            lambda: elicit("m", {"type": "object", "properties": {"x": {"type": "object"}}}),
            "allows only",
        ),
        (lambda: elicit("m", {"type": "object", "required": ["x"]}), "no such properties"),
        (
            lambda: elicit("m", {"type": "object", "properties": {"x": {"type": "array"}}}),
            'needs "items"',
        ),
        (
            lambda: elicit(
                "m", {"type": "object", "properties": {"x": {"type": "string", "format": "ip"}}}
            ),
            "format 'ip'",
        ),
        (lambda: elicit(3, CONFIRM), "message must be a str"),  # type: ignore[arg-type]
        (lambda: elicit("m", None), "use elicit_url"),  # type: ignore[arg-type]
        (lambda: elicit_url("m", ""), "non-empty str"),
        (lambda: ElicitRequest("m", schema=CONFIRM, url="https://x"), "exactly one"),
        (lambda: create_message("m", max_tokens=0), "positive int"),
        (lambda: create_message([], max_tokens=1), "at least one message"),
        (
            lambda: create_message([{"role": "bot", "content": {"type": "text"}}], max_tokens=1),
            "role",
        ),
        (lambda: create_message(["hi"], max_tokens=1), "role and content"),
        (lambda: create_message("m", max_tokens=1, include_context="all"), "include_context"),
        (lambda: create_message("m", max_tokens=1, stop_sequences="x"), "not a str"),
        (lambda: create_message(42, max_tokens=1), "str or a list"),  # type: ignore[arg-type]
    ],
)
def test_constructors_say_what_is_wrong(call: Any, error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        call()


def test_parse_answers_of_each_kind() -> None:
    form = elicit("m", CONFIRM)
    assert parse_answer(form, {"action": "accept", "content": {"confirm": True}, "_meta": {}}) == (
        ElicitResult("accept", {"confirm": True})
    )
    assert parse_answer(form, {"action": "decline", "content": {"x": 1}}) == ElicitResult("decline")
    assert parse_answer(elicit_url("m", "https://x"), {"action": "accept"}).accepted
    sampled = parse_answer(
        create_message("q", max_tokens=5),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Pa"},
                {"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "ris"},
            ],
            "model": "m",
            "stopReason": "endTurn",
            "resultType": "complete",
        },
    )
    assert isinstance(sampled, CreateMessageResult)
    assert sampled.text == "Paris" and sampled.stop_reason == "endTurn"
    roots = parse_answer(
        list_roots(), {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]}
    )
    assert roots == ListRootsResult([Root("file:///a", "A"), Root("file:///b")])
    assert parse_answer(list_roots(), roots) == roots  # answer objects pass through


@pytest.mark.parametrize(
    ("request_", "json", "error"),
    [
        (elicit("m", CONFIRM), 12345, "expected an object"),
        (elicit("m", CONFIRM), {"action": "ok"}, "accept, decline or cancel"),
        (elicit("m", CONFIRM), {"action": "accept"}, "needs an object content"),
        (
            elicit("m", CONFIRM),
            {"action": "accept", "content": {"x": {"nested": 1}}},
            "'x' must be",
        ),
        (
            create_message("q", max_tokens=5),
            {"role": "assistant", "content": {"type": "text"}},
            "model",
        ),
        (create_message("q", max_tokens=5), {"role": "bot", "content": {}, "model": "m"}, "role"),
        (
            create_message("q", max_tokens=5),
            {"role": "user", "content": "text", "model": "m"},
            "content",
        ),
        (list_roots(), {"roots": "file:///a"}, "roots list"),
        (list_roots(), {"roots": [{"name": "no uri"}]}, "roots\\[0\\]"),
        (list_roots(), {"roots": [{"uri": "not a uri"}]}, "roots\\[0\\].uri must be a file:// URI"),
        (list_roots(), {"roots": [{"uri": "https://example.com/x"}]}, "file:// URI, got 'https:"),
        (list_roots(), {"action": "accept"}, "roots list"),
    ],
)
def test_malformed_answers_say_what_is_wrong(request_: Any, json: Any, error: str) -> None:
    with pytest.raises(InvalidInputResponse, match=error) as caught:
        parse_answer(request_, json)
    assert caught.value.code == -32602


def test_answer_values_validate_and_round_trip() -> None:
    with pytest.raises(ValueError, match="action"):
        ElicitResult("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        CreateMessageResult("bot", {"type": "text", "text": ""}, "m")  # type: ignore[arg-type]
    answer = CreateMessageResult("assistant", {"type": "text", "text": "hi"}, "m")
    assert parse_answer(create_message("q", max_tokens=1), answer.to_wire()) == answer


def test_helpers_read_answers_and_raw_json() -> None:
    responses = {
        "a": ElicitResult("accept", {"confirm": True}),
        "b": {"action": "accept", "content": {"x": 1}},
        "c": {"action": "decline"},
        "d": {"roots": [{"uri": "file:///r"}]},
    }
    assert accepted_content(responses, "a") == {"confirm": True}
    assert accepted_content(responses, "b") == {"x": 1}
    assert accepted_content(responses, "c") is None
    assert accepted_content(None, "a") is None
    assert input_response(responses, "c") == ElicitResult("decline")
    assert input_response(responses, "d") == ListRootsResult([Root("file:///r")])
    assert input_response(responses, "missing") is None


def test_missing_capabilities_names_only_what_is_missing() -> None:
    requests = [elicit("m", CONFIRM), create_message("q", max_tokens=1), list_roots()]
    assert missing_capabilities(requests, None) == {}
    assert missing_capabilities(requests, {"elicitation": {}, "sampling": {}, "roots": {}}) == {}
    assert missing_capabilities(requests, {"roots": {"listChanged": True}}) == {
        "elicitation": {"form": {}},
        "sampling": {},
    }
    # A mode or a sampling context is needed by name; a bare "elicitation": {} declares form
    # mode only; an area declared as anything but an object declares nothing.
    url = elicit_url("m", "https://example.com/form")
    context = create_message("q", max_tokens=1, include_context="thisServer")
    both = [elicit("m", CONFIRM), url, context]
    assert missing_capabilities(both, {"elicitation": {}, "sampling": {}}) == {
        "elicitation": {"url": {}},
        "sampling": {"context": {}},
    }
    assert missing_capabilities(both, {"elicitation": {"url": {}}, "sampling": True}) == {
        "elicitation": {"form": {}},
        "sampling": {"context": {}},
    }
    declared = {"elicitation": {"form": {}, "url": {}}, "sampling": {"context": {}}}
    assert missing_capabilities(both, declared) == {}


def test_constructors_hand_back_an_equal_request_only_when_it_is_the_same() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert elicit("Go?", schema) is elicit("Go?", schema)  # replays rebuild it: interned
    schema["properties"]["ok"] = {"type": "string"}  # changed in place: a new request
    assert elicit("Go?", schema).schema["properties"]["ok"] == {"type": "string"}
    assert create_message("hi", max_tokens=5) is create_message("hi", max_tokens=5)
    # Equal keys of other types are other requests: what a fresh process would build.
    create_message("hi", max_tokens=1)
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        create_message("hi", max_tokens=True)
    whole = create_message("hi", max_tokens=5, temperature=1)
    real = create_message("hi", max_tokens=5, temperature=1.0)
    assert real.to_wire()["params"]["temperature"] == 1.0
    assert type(real.to_wire()["params"]["temperature"]) is float
    assert type(whole.to_wire()["params"]["temperature"]) is int
