"""Everything that outlives a request belongs to the principal whose token made it, proved end
to end with a real authorization server's tokens: a `requestState` (also bound to the server's
resource URL, the method and the target), a task, a legacy session; and a token whose scopes
narrowed mid-flow cannot finish a flow that needs the scope it lost, nor read, answer or cancel
a task whose tool needs it."""

from __future__ import annotations

from typing import Any

import trio

from .authserver import AuthServer
from .secured import (
    INVALID_STATE,
    YES,
    Legacy,
    build,
    call,
    modern,
    new_resource,
    serve,
    sse_json,
)


def _state(response: Any) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "input_required", result
    return str(result["requestState"])


def _refused_state(response: Any) -> None:
    assert (response.status_code, response.json().get("error")) == (400, INVALID_STATE)


async def test_a_request_state_minted_for_one_principal_is_refused_for_another(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    alpha = await idp.token("alpha", resource, "mcp:tools")
    beta = await idp.token("beta", resource, "mcp:tools")
    state = _state(await call(url, "confirm", alpha, {"item": "tea"}))
    _refused_state(await call(url, "confirm", beta, {"item": "tea"}, state=state, answer=YES))
    finished = await call(url, "confirm", alpha, {"item": "tea"}, state=state, answer=YES)
    assert finished.json()["result"]["content"][0]["text"] == "tea: True"


async def test_a_request_state_is_bound_to_the_resource_url_not_the_app_name_alone(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    first, second = new_resource(), new_resource()
    # Same name, same signing key, same handlers: only the resource URL differs.
    url = await serve(nursery, build(first, idp, name="same"))
    other = await serve(nursery, build(second, idp, name="same"))
    state = _state(
        await call(url, "confirm", await idp.token("alpha", first, "mcp:tools"), {"item": "tea"})
    )
    token = await idp.token("alpha", second, "mcp:tools")
    _refused_state(await call(other, "confirm", token, {"item": "tea"}, state=state, answer=YES))


async def test_a_request_state_is_bound_to_the_method_and_the_target(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    alpha = await idp.token("alpha", resource, "mcp:tools")
    state = _state(await call(url, "confirm", alpha, {"item": "tea"}))
    # The same handler as another tool (another target) and as a prompt (another method).
    _refused_state(await call(url, "confirm_too", alpha, {"item": "tea"}, state=state, answer=YES))
    as_prompt = {
        "name": "confirm",
        "arguments": {"item": "tea"},
        "requestState": state,
        "inputResponses": {"input-0": YES},
    }
    _refused_state(await modern(url, "prompts/get", as_prompt, alpha))
    # Each continues its own flow.
    prompt_state = _state(
        await modern(url, "prompts/get", {"name": "confirm", "arguments": {"item": "tea"}}, alpha)
    )
    done = await modern(url, "prompts/get", dict(as_prompt, requestState=prompt_state), alpha)
    assert done.status_code == 200 and "tea: True" in done.text


async def test_a_task_answers_anyone_but_its_creator_exactly_as_an_unknown_task(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    alpha = await idp.token("alpha", resource, "mcp:tools")
    beta = await idp.token("beta", resource, "mcp:tools")
    created = await call(url, "long_job", alpha, {"label": "report"})
    task_id = created.json()["result"]["taskId"]
    assert created.json()["result"]["resultType"] == "task"
    unknown_id = "task-" + "x" * 24

    async def answer(token: str, method: str, task: str) -> tuple[int, Any]:
        params: dict[str, Any] = {"taskId": task}
        if method == "tasks/update":
            params["inputResponses"] = {"input-0": YES}
        response = await modern(url, method, params, token)
        error = response.json().get("error")
        if error is not None:  # the only difference allowed: the id it names
            error = {**error, "message": error["message"].replace(task, "<id>")}
        return response.status_code, error

    for method in ("tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list"):
        as_beta = await answer(beta, method, task_id)
        assert as_beta == await answer(beta, method, unknown_id), method
        assert as_beta[1] is not None and as_beta[1]["code"] in (-32602, -32601), method
    # The task is untouched, and its creator still reaches it.
    got = await modern(url, "tasks/get", {"taskId": task_id}, alpha)
    assert got.json()["result"]["status"] == "input_required", got.text
    update = {
        "taskId": task_id,
        "inputResponses": dict(got.json()["result"]["inputRequests"].items()),
    }
    key = next(iter(update["inputResponses"]))
    update["inputResponses"] = {key: YES}
    assert (await modern(url, "tasks/update", update, alpha)).status_code == 200
    with trio.fail_after(10):
        while True:
            result = (await modern(url, "tasks/get", {"taskId": task_id}, alpha)).json()["result"]
            if result["status"] == "completed":
                break
            await trio.sleep(0.02)
    assert result["result"]["content"][0]["text"] == "report: True"


async def test_a_legacy_session_is_refused_to_another_principals_token(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    alpha = await idp.token("alpha", resource, "mcp:tools")
    beta = await idp.token("beta", resource, "mcp:tools")
    session = Legacy(url, alpha)
    assert (await session.open()).status_code == 200
    refused = await session.request("tools/list", {}, token=beta)
    stranger = Legacy(url, beta)
    stranger.session = "0" * 32  # a session that does not exist
    unknown = await stranger.request("tools/list", {})
    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == unknown.json()
    # The same principal with a fresh token (same client, issuer and subject) goes on.
    again = await idp.token("alpha", resource, "mcp:tools")
    listed = sse_json(await session.request("tools/list", {}, token=again))
    assert "confirm" in [tool["name"] for tool in listed["result"]["tools"]]


async def test_a_token_narrowed_mid_flow_cannot_finish_a_flow_needing_the_lost_scope(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    full = await idp.token("alpha", resource, "mcp:tools mcp:admin")
    narrowed = await idp.token("alpha", resource, "mcp:tools")
    state = _state(await call(url, "admin_op", full, {"item": "db"}))
    refused = await call(url, "admin_op", narrowed, {"item": "db"}, state=state, answer=YES)
    assert refused.status_code == 403
    assert "mcp:admin" in refused.headers["www-authenticate"]
    finished = await call(url, "admin_op", full, {"item": "db"}, state=state, answer=YES)
    assert finished.json()["result"]["content"][0]["text"] == "administered db: True"


async def test_a_token_narrowed_mid_task_is_refused_every_task_method_alike(
    nursery: trio.Nursery, idp: AuthServer
) -> None:
    """`tasks/get`, `tasks/update` and `tasks/cancel` of a task whose tool needs a scope the
    owner's token has lost get the same insufficient-scope refusal, while the task runs and
    once it has finished (its result is not read); anyone else is told the task is unknown."""
    resource = new_resource()
    url = await serve(nursery, build(resource, idp))
    full = await idp.token("alpha", resource, "mcp:tools mcp:admin")
    narrowed = await idp.token("alpha", resource, "mcp:tools")
    task_id = (await call(url, "admin_job", full, {"label": "db"})).json()["result"]["taskId"]
    with trio.fail_after(10):
        while True:
            got = (await modern(url, "tasks/get", {"taskId": task_id}, full)).json()["result"]
            if got["status"] == "input_required":
                break
            await trio.sleep(0.02)
    answers = {"taskId": task_id, "inputResponses": {k: YES for k in got["inputRequests"]}}
    requests = {
        "tasks/get": {"taskId": task_id},
        "tasks/update": answers,
        "tasks/cancel": {"taskId": task_id},
    }
    refusal = {
        "code": -32602,
        "message": f"task {task_id!r} runs a tool that needs the scopes mcp:admin, which this "
        "token lacks",
    }

    async def refused_to(token: str) -> dict[str, Any]:
        errors = {}
        for method, params in requests.items():
            response = await modern(url, method, params, token)
            assert "result" not in response.json(), (method, response.text)
            errors[method] = response.json()["error"]
        return errors

    assert await refused_to(narrowed) == dict.fromkeys(requests, refusal)
    # Nothing was taken or cancelled.
    still = (await modern(url, "tasks/get", {"taskId": task_id}, full)).json()["result"]
    assert still["status"] == "input_required"
    # The owner rule comes first: another principal (lacking mcp:admin too) learns nothing,
    # not even the scopes the task's tool needs.
    beta = await idp.token("beta", resource, "mcp:tools")
    for method, error in (await refused_to(beta)).items():
        assert error == {"code": -32602, "message": f"Unknown or expired task {task_id!r}"}, method
    assert (await modern(url, "tasks/update", answers, full)).status_code == 200
    with trio.fail_after(10):
        while True:
            got = (await modern(url, "tasks/get", {"taskId": task_id}, full)).json()["result"]
            if got["status"] == "completed":
                break
            await trio.sleep(0.02)
    assert got["result"]["content"][0]["text"] == "administered db: True"
    # Finished, its flow gone: the record alone refuses the narrowed token its result.
    assert await refused_to(narrowed) == dict.fromkeys(requests, refusal)
