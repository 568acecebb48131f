"""The official mcp.Client against App in-process (under trio), in both eras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mrtr_trio._cli import load_app

from . import apps
from .clients import CALLBACKS, text_of

MODES = ["legacy", "2026-07-28"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("mode", MODES)
async def test_the_same_tool_gives_the_same_result_in_both_eras(mode: str) -> None:
    async with Client(apps.app.server, mode=mode, **CALLBACKS) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
        assert not result.is_error
        assert text_of(result) == "Deployed api to prod (1 roots): Paris"
        returned = await client.call_tool("confirm_return_style", {"action": "ship"})
        assert text_of(returned) == "ship: yes"


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_and_resources_ask_in_both_eras(mode: str) -> None:
    async with Client(apps.app.server, mode=mode, **CALLBACKS) as client:
        prompt = await client.get_prompt("greeting", {"tone": "formal"})
        assert prompt.messages[0].content.text == "Write a formal greeting for Alice."
        resource = await client.read_resource("interop://report/q3")
        assert resource.contents[0].text == "report q3: shared"


async def test_mrtr_conformance_fixtures_also_complete_on_a_legacy_session() -> None:
    conformance = load_app(f"{EXAMPLES / 'conformance_server.py'}:app")
    expected = {
        "test_input_required_result_elicitation": "Hello, Alice!",
        "test_input_required_result_sampling": "Model said: Paris",
        "test_input_required_result_list_roots": "Client exposed 1 root(s).",
        "test_input_required_result_request_state": "state-ok: confirmation accept",
        "test_input_required_result_multiple_inputs": "All inputs received: Alice, 'Paris', 1 root(s).",
        "test_input_required_result_multi_round": "Alice likes Alice.",
        "test_input_required_result_tampered_state": "state-ok: accept",
        "test_input_required_result_capabilities": "Received ask, roots, sample.",
    }
    for mode in MODES:
        async with Client(conformance.server, mode=mode, **CALLBACKS) as client:
            for tool, text in expected.items():
                result = await client.call_tool(tool, {})
                assert (tool, text_of(result)) == (tool, text), mode
            prompt = await client.get_prompt("test_input_required_result_prompt", {})
            assert prompt.messages[0].content.text == "Use the following context: Alice"


async def test_a_tampered_request_state_is_rejected_with_the_fixed_error() -> None:
    async with Client(apps.app.server, mode="2026-07-28", **CALLBACKS) as client:
        first = await client.session.call_tool(
            "deploy", {"service": "api"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        answer = {"input-0": {"action": "accept", "content": {"confirm": True}}}
        for forged in (first.request_state + "x", first.request_state[:-1] + "A", ""):
            if forged == first.request_state:
                continue
            with pytest.raises(MCPError) as caught:
                await client.session.call_tool(
                    "deploy",
                    {"service": "api"},
                    input_responses=answer,
                    request_state=forged,
                    allow_input_required=True,
                )
            assert caught.value.code == -32602
            assert caught.value.message == "Invalid or expired requestState"
            assert caught.value.data == {"reason": "invalid_request_state"}
        # Other arguments, same token: bound to the original call.
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "deploy",
                {"service": "db"},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )


@pytest.mark.parametrize("mode", MODES)
async def test_a_missing_capability_is_32021(mode: str) -> None:
    async with Client(
        apps.app.server, mode=mode, elicitation_callback=CALLBACKS["elicitation_callback"]
    ) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("needs_sampling", {})
        assert caught.value.code == -32021
        assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize("mode", MODES)
async def test_failures_are_tool_errors_and_prompt_errors(mode: str) -> None:
    async with Client(apps.app.server, mode=mode, **CALLBACKS) as client:
        failed = await client.call_tool("fails_after_asking", {})
        assert failed.is_error and text_of(failed) == "the handler gave up"
        invalid = await client.call_tool("counts", {"count": "many"})
        assert invalid.is_error and "count" in text_of(invalid)
        assert text_of(await client.call_tool("counts", {"count": 21})) == "n=42"
        with pytest.raises(MCPError, match="prompt flow failed") as caught:
            await client.get_prompt("failing_prompt", {})
        assert caught.value.code == -32603


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_targets_are_invalid_params(mode: str) -> None:
    async with Client(apps.app.server, mode=mode, **CALLBACKS) as client:
        for call in (
            client.call_tool("no_such_tool", {}),
            client.get_prompt("no_such_prompt", {}),
            client.read_resource("interop://nothing/here"),
        ):
            with pytest.raises(MCPError) as caught:
                await call
            assert caught.value.code == -32602


async def test_a_legacy_client_error_answer_fails_the_tool() -> None:
    async def refuse(ctx: Any, params: Any) -> types.ErrorData:
        return types.ErrorData(code=-1, message="user rejected sampling")

    async with Client(apps.app.server, mode="legacy", sampling_callback=refuse) as client:
        result = await client.call_tool("needs_sampling", {})
        assert result.is_error and "user rejected sampling" in text_of(result)


async def test_lists_describe_the_handlers() -> None:
    async with Client(apps.app.server, mode="2026-07-28", **CALLBACKS) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert (
            tools["deploy"].description
            == "Deploy after a confirmation, with notes and the client's roots."
        )
        schema = tools["counts"].input_schema
        assert schema["required"] == ["count"]
        assert schema["properties"]["count"]["type"] == "integer"
        assert "ctx" not in schema["properties"]
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert [(a.name, a.required) for a in prompts["greeting"].arguments] == [("tone", False)]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["interop://report/{name}"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_goes_away_mid_round_leaves_no_open_generator(mode: str) -> None:
    apps.reset_accounting()
    async with Client(apps.app.server, mode=mode, **CALLBACKS) as client:
        with trio.move_on_after(0.5) as scope:
            await client.call_tool("tracked", {"tag": mode})  # blocks in the step
        assert scope.cancelled_caught
        with trio.fail_after(5):
            await apps.all_closed()
    assert apps.STARTED and apps.FINALISED == apps.STARTED


async def test_url_elicitation_gets_an_elicitation_id_on_legacy_sessions() -> None:
    from mrtr_trio import done, elicit_url
    from mrtr_trio.mcp import App

    url_app = App("url", runtime=apps.app.runtime)
    seen: list[Any] = []

    @url_app.tool()
    async def sign_in(ctx: Any):
        answer = yield elicit_url("Sign in, please", "https://example.com/login")
        yield done(answer.action)

    async def on_elicit(ctx: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept")

    for mode in MODES:
        async with Client(url_app.server, mode=mode, elicitation_callback=on_elicit) as client:
            assert text_of(await client.call_tool("sign_in", {})) == "accept"
    legacy, modern = seen
    assert legacy.mode == modern.mode == "url"
    assert legacy.elicitation_id  # 2025-11-25 requires one
    assert modern.url == "https://example.com/login"


async def test_tokens_recorded_from_a_server_replay_against_its_code() -> None:
    from mrtr_trio.testing import RecordedState, replay_recorded

    arguments = {"service": "api", "env": "prod"}
    async with Client(apps.app.server, mode="2026-07-28", **CALLBACKS) as client:
        first = await client.session.call_tool("deploy", arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    recorded = RecordedState(
        first.request_state,
        arguments,
        apps.app.bind_bytes("tools/call", "deploy", arguments),
    )
    [report] = await replay_recorded(apps.deploy, [recorded], runtime=apps.app.runtime)
    assert report.ok, str(report)
    [elsewhere] = await replay_recorded(
        apps.deploy,
        [
            RecordedState(
                first.request_state, arguments, apps.app.bind_bytes("tools/call", "x", arguments)
            )
        ],
        runtime=apps.app.runtime,
    )
    assert elsewhere.status == "invalid"
