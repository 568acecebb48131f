"""`mrtr-trio inspect TOKEN` (issue 20, item 17), run as a user runs it: tokens minted by an App
over the official client, then read by `python -m mrtr_trio inspect` with the keys from
MRTR_TRIO_KEYS or --key, alone or with the call named (--app, --tool, --arguments)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp_types import ElicitResult, InputRequiredResult

from mrtr_trio import InvalidRequestState
from mrtr_trio._cli import load_app
from mrtr_trio._inspect import inspect_token
from mrtr_trio._keys import generate_key, parse_keys

SERVER = """
from mrtr_trio import MemoryStepStore, Runtime, done, elicit, input_required, pause, step, step_key
from mrtr_trio.mcp import App

app = App("deployer", runtime=Runtime(step_store=MemoryStepStore()))
sealed = App("sealed", runtime=Runtime(step_store=MemoryStepStore(), encrypt=True))
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


def reserve(service):
    return {"reference": f"R-{service}", "key": step_key()}


async def deploy(ctx, service: str, env: str = "staging"):
    ok = yield elicit(f"Deploy {service} to {env}?", CONFIRM)
    reserved = yield step(reserve, service)
    yield pause()
    again = yield {"sure": elicit("Sure?", CONFIRM), "really": elicit("Really?", CONFIRM)}
    yield done(reserved["reference"])


app.tool()(deploy)
sealed.tool()(deploy)


@app.tool()
async def wipe(ctx, path: str):
    if ctx.input_responses is None:
        state = await ctx.mint_request_state({"path": path, "attempt": 1})
        return input_required({"sure": elicit(f"Wipe {path}?", CONFIRM)}, state)
    return "done"
"""
YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    key = generate_key()
    monkeypatch.setenv("MRTR_TRIO_KEYS", key)
    return key


@pytest.fixture
def server(tmp_path: Path, keys: str) -> Path:
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    return path


async def declared(context: Any, params: Any) -> Any:
    raise AssertionError("the test answers the rounds itself")


async def tokens(server: Path, attribute: str, tool: str, arguments: dict[str, Any]) -> list[str]:
    """The requestState of each round of *tool*, answered yes, until it completes."""
    app = load_app(f"{server}:{attribute}")
    minted = []
    async with Client(app.server, mode="2026-07-28", elicitation_callback=declared) as client:
        responses, state = None, None
        for _ in range(6):
            result = await client.session.call_tool(
                tool,
                arguments,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
            if not isinstance(result, InputRequiredResult):
                return minted
            state = result.request_state
            minted.append(state)
            responses = {key: ElicitResult(**YES) for key in result.input_requests}
    raise AssertionError("the flow did not finish")


def inspect(*args: str, cwd: Path, keys: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MRTR_TRIO_KEYS"}
    if keys is not None:
        env["MRTR_TRIO_KEYS"] = keys
    return subprocess.run(
        [sys.executable, "-m", "mrtr_trio", "inspect", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def never_shows(keys: str, run: subprocess.CompletedProcess[str]) -> None:
    for key in parse_keys(keys):
        for form in (key.hex(), keys):
            assert form not in run.stdout + run.stderr


async def test_a_token_alone_shows_the_flow(server: Path, keys: str) -> None:
    minted = await tokens(server, "app", "deploy", {"service": "api"})
    # round 1 asks input-0; round 2 after the step is a pause; round 3 asks the batch
    run = inspect(minted[2], "--json", cwd=server.parent, keys=keys)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["verified"].startswith("body check only")
    assert report["format"] == "signed" and report["rounds"] == 3
    assert report["expires_at"] - report["issued_at"] == 600 and not report["expired"]
    assert len(report["flow_id"]) == 16
    first, reserved, paused = report["journal"]
    assert (first["kind"], first["key"], first["answer"]) == ("elicitation/create", "input-0", YES)
    assert reserved["kind"] == "step" and reserved["value"]["reference"] == "R-api"
    assert "step_key" not in reserved  # it needs the call
    assert paused["kind"] == "pause"
    asks = report["pending"]["asks"]
    assert [(a["key"], a["kind"]) for a in asks] == [
        ("sure", "elicitation/create"),
        ("really", "elicitation/create"),
    ]
    assert "binding_digest" not in report
    never_shows(keys, run)
    # The same flow id in every token of the flow.
    first_report = json.loads(inspect(minted[0], "--json", cwd=server.parent, keys=keys).stdout)
    assert first_report["flow_id"] == report["flow_id"] and first_report["journal"] == []
    assert first_report["pending"]["asks"][0]["key"] == "input-0"


async def test_with_the_call_it_verifies_the_tag_and_gives_step_keys(
    server: Path, keys: str
) -> None:
    minted = await tokens(server, "app", "deploy", {"service": "api"})
    call = ("--app", str(server), "--tool", "deploy", "--arguments", '{"service": "api"}')
    run = inspect(minted[2], "--json", *call, cwd=server.parent, keys=keys)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["verified"] == "tag checked against the call"
    assert len(report["binding_digest"]) == 64
    step = report["journal"][1]
    assert step["step_key"] == step["value"]["key"]  # the key the step function saw
    text = inspect(minted[2], *call, cwd=server.parent, keys=keys)
    assert "step_key " + step["step_key"] in text.stdout
    assert f"binding:     {report['binding_digest']}" in text.stdout
    never_shows(keys, text)
    other = ("--app", str(server), "--tool", "deploy", "--arguments", '{"service": "web"}')
    wrong = inspect(minted[2], *other, cwd=server.parent, keys=keys)
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert "does not verify: bound to another call" in wrong.stderr


async def test_an_encrypted_token_shows_nothing_without_the_call(server: Path, keys: str) -> None:
    minted = await tokens(server, "sealed", "deploy", {"service": "db"})
    alone = inspect(minted[1], cwd=server.parent, keys=keys)
    assert alone.returncode == 1 and alone.stdout == ""
    assert "encrypted: its contents open only with the call" in alone.stderr
    call = ("--app", f"{server}:sealed", "--tool", "deploy", "--arguments", '{"service": "db"}')
    opened = inspect(minted[1], "--json", *call, cwd=server.parent, keys=keys)
    assert opened.returncode == 0, opened.stderr
    report = json.loads(opened.stdout)
    assert report["format"] == "encrypted" and report["journal"][1]["value"]["reference"] == "R-db"
    assert inspect(minted[1], *call, cwd=server.parent, keys=generate_key()).returncode == 1


async def test_a_return_style_token_shows_its_payload_and_request(server: Path, keys: str) -> None:
    [minted] = await tokens(server, "app", "wipe", {"path": "/tmp/x"})
    run = inspect(minted, cwd=server.parent, keys=keys)
    assert run.returncode == 0, run.stderr
    assert 'payload:     {"path": "/tmp/x", "attempt": 1}' in run.stdout
    assert "'sure' elicitation/create" in run.stdout and '"message": "Wipe /tmp/x?"' in run.stdout


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda t: t[:-3] + ("A" if t[-3] != "A" else "B") + t[-2:], "tag mismatch"),
        (lambda t: t[:30] + ("A" if t[30] != "A" else "B") + t[31:], "body check mismatch"),
        (lambda t: t + "!", "not unpadded base64url"),
        (lambda t: "AQ", "too short"),
    ],
)
async def test_a_token_that_does_not_verify_says_why(
    server: Path, keys: str, change: Any, reason: str
) -> None:
    [minted, *_] = await tokens(server, "app", "deploy", {"service": "api"})
    bad = change(minted)
    call = ("--app", str(server), "--tool", "deploy", "--arguments", '{"service": "api"}')
    for extra in ((), call):
        run = inspect(bad, *extra, cwd=server.parent, keys=keys)
        if reason == "tag mismatch" and not extra:
            # Without the call only the body check is checked, and it does not cover the tag:
            # the contents are the minted ones, and the report says the tag was not checked.
            assert run.returncode == 0 and "binding was not checked" in run.stdout
            continue
        expected = {
            # A tag that fails over a body that holds: as for a token of another call.
            ("tag mismatch", True): "bound to another call",
            ("body check mismatch", True): "tag mismatch",
        }.get((reason, bool(extra)), reason)
        assert run.returncode == 1 and run.stdout == ""
        assert f"the token does not verify: {expected}" in run.stderr, run.stderr


async def test_keys_come_from_the_environment_or_key_options(server: Path, keys: str) -> None:
    [minted, *_] = await tokens(server, "app", "deploy", {"service": "api"})
    assert inspect(minted, cwd=server.parent, keys=None).stderr.strip() == (
        "mrtr-trio inspect: no keys: set MRTR_TRIO_KEYS or pass --key"
    )
    stranger = generate_key()
    # (--key=KEY: a base64url key may start with "-")
    assert inspect(minted, f"--key={keys}", cwd=server.parent, keys=stranger).returncode == 0
    rotated = inspect(minted, f"--key={stranger}", f"--key={keys}", cwd=server.parent)
    assert rotated.returncode == 0, rotated.stderr
    missing = inspect(minted, f"--key={stranger}", cwd=server.parent)
    assert missing.returncode == 1 and "is not in the keyring" in missing.stderr
    bad = inspect(minted, "--key=short", cwd=server.parent)
    assert bad.returncode == 1 and "--key" in bad.stderr and "short" not in bad.stderr


def test_an_expired_token_is_reported_expired_not_refused(keys: str, server: Path) -> None:
    minted = trio.run(tokens, server, "app", "deploy", {"service": "api"})
    later = inspect_token(minted[0], parse_keys(keys), now=2e10)
    assert later["expired"] is True and later["seconds_left"] < 0
    with pytest.raises(InvalidRequestState):
        inspect_token(minted[0], [os.urandom(32)])
