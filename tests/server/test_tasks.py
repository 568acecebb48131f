"""The tasks extension (SEP-2663): a task's whole lifecycle, over raw JSON-RPC on loopback HTTP
(so every key on the wire is checked) and through the official ``mcp`` client.

Create, input, partial update, cancel, tool error, protocol error and expiry; MRTR rounds
before the task; the capability gate and the error order; the same handler in the other eras.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError

from mrtr_trio import Context, Runtime, done, elicit, list_roots, poll, step
from mrtr_trio.mcp import TASKS_EXTENSION, App, MemoryTaskStore, background
from mrtr_trio.mcp._tasks import TASK_LIMIT_REACHED
from mrtr_trio.mcp._transports import serve_http
from mrtr_trio.redis import RedisTaskStore

from ..services import RedisServer
from .clients import CALLBACKS
from .tasks_client import TasksClient, get_task, update_task

EXT = {"extensions": {TASKS_EXTENSION: {}}}
EXT_PLUS = {"elicitation": {}, "sampling": {}, **EXT}
CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

FINALLY: list[str] = []
RELEASE = trio.Event()


def make_app(**options: Any) -> App:
    app = App("tasks-test", runtime=Runtime([b"k" * 32]), task_poll_interval=0.05, **options)

    @app.tool(task="optional")
    async def wait_for(ctx: Context, label: str, seconds: float = 60.0):
        """Sleeps in the background; records that its finally ran."""
        try:
            yield background()
            yield step(trio.sleep, seconds)
            yield done(f"{label} waited")
        finally:
            FINALLY.append(label)

    @app.tool(task="required")
    async def confirm(ctx: Context, filename: str):
        yield background()
        answer = yield elicit(f"Delete {filename}?", CONFIRM)
        yield done(f"{filename}: {'deleted' if answer.content['confirm'] else 'kept'}")

    @app.tool(task="required")
    async def pair(ctx: Context):
        yield background()
        answers = yield {"first": elicit("First?", NAME), "second": elicit("Second?", NAME)}
        yield done(" & ".join(a.content["name"] for a in answers.values()))

    @app.tool(task="required")
    async def broken(ctx: Context):
        yield background()
        raise RuntimeError("disk on fire")

    @app.tool(task="required")
    async def needs_roots(ctx: Context):
        yield background()
        roots = yield list_roots()
        yield done(len(roots.roots))

    @app.tool(task="optional")
    async def ask_then_work(ctx: Context, note: str = ""):
        answers = yield {"user_name": elicit("Name?", NAME)}
        yield background()
        again = yield elicit("Sure?", CONFIRM)
        yield done(f"{answers['user_name'].content['name']} {again.content['confirm']}")

    @app.tool(task="required")
    async def quick(ctx: Context):
        yield done("finished before any background()")

    @app.tool()
    async def plain(ctx: Context) -> str:
        return "never a task"

    return app


_ids = itertools.count(1)


async def rpc(
    url: str,
    method: str,
    params: dict[str, Any],
    caps: dict[str, Any] | None = None,
    name: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 request as the conformance harness sends it; ``Mcp-Name`` defaults to
    the name, the URI or the task id the body carries."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": EXT_PLUS if caps is None else caps,
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **(headers or {}),
    }
    name = name if name is not None else params.get("name", params.get("taskId"))
    if name is not None:
        headers["Mcp-Name"] = name
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        # Escaped JSON (ensure_ascii): it can carry strings that are not Unicode, as a client may.
        response = await http.post(url, content=json.dumps(body), headers=headers)
    return response.status_code, response.json()


async def call(url: str, tool: str, arguments: dict[str, Any] | None = None, **extra: Any) -> Any:
    _, body = await rpc(url, "tools/call", {"name": tool, "arguments": arguments or {}, **extra})
    return body.get("result", body.get("error"))


async def get(url: str, task_id: str) -> dict[str, Any]:
    status, body = await rpc(url, "tasks/get", {"taskId": task_id})
    assert status == 200, body
    return body["result"]


async def until(url: str, task_id: str, *statuses: str) -> dict[str, Any]:
    return await until_seen(url, task_id, lambda task: task["status"] in statuses)


async def until_seen(
    url: str, task_id: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    with trio.fail_after(10):
        while True:
            task = await get(url, task_id)
            if check(task):
                return task
            await trio.sleep(0.02)


async def finally_ran(label: str) -> None:
    with trio.fail_after(5):
        while True:
            if label in FINALLY:
                return
            await trio.sleep(0.01)


@pytest.fixture
async def url(nursery: trio.Nursery) -> str:
    FINALLY.clear()
    return await nursery.start(make_app().serve_http, "127.0.0.1", 0)


CREATE_KEYS = {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}


async def test_create_returns_a_flat_task_readable_at_once(url: str) -> None:
    created = await call(url, "wait_for", {"label": "create", "seconds": 0.2})
    assert set(created) - {"_meta"} == CREATE_KEYS | {"pollIntervalMs"}
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 50
    assert created["taskId"].startswith("task-") and len(created["taskId"]) > 20
    task = await get(url, created["taskId"])  # no delay: durable before the result was sent
    assert task["resultType"] == "complete" and task["taskId"] == created["taskId"]
    assert task["status"] == "working" and "requestState" not in task
    task = await until(url, created["taskId"], "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "create waited"}]
    # Stamped when it finished, after the 0.2 s step: not left at its creation time.
    ran_for = datetime.fromisoformat(task["lastUpdatedAt"]) - datetime.fromisoformat(
        task["createdAt"]
    )
    assert ran_for >= timedelta(seconds=0.15)
    assert FINALLY == ["create"]


async def test_input_inside_the_task_then_completion(url: str) -> None:
    created = await call(url, "confirm", {"filename": "a.txt"})
    task = await until(url, created["taskId"], "input_required")
    (key, request), *_ = task["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"] == CONFIRM
    status, body = await rpc(
        url,
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        },
    )
    assert status == 200 and set(body["result"]) == {"resultType", "_meta"}
    assert body["result"]["resultType"] == "complete"
    task = await until(url, created["taskId"], "completed")
    assert task["result"]["content"][0]["text"] == "a.txt: deleted"


async def test_partial_update_keeps_the_rest_pending_and_checks_every_answer(url: str) -> None:
    task_id = (await call(url, "pair"))["taskId"]
    task = await until_seen(url, task_id, lambda task: len(task.get("inputRequests", {})) == 2)
    first, second = task["inputRequests"]

    # A malformed answer is -32602 naming its key, and nothing is taken.
    status, body = await rpc(
        url,
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {
                first: {"action": "accept", "content": {"name": "A"}},
                second: 12345,
            },
        },
    )
    assert (
        status == 400
        and body["error"]["code"] == -32602
        and repr(second) in body["error"]["message"]
    )
    assert set((await get(url, task_id))["inputRequests"]) == {first, second}
    # So is an answer no token could hold (a lone surrogate), checked as in the other eras.
    unusable = {"action": "accept", "content": {"name": "\ud800"}}
    status, body = await rpc(
        url, "tasks/update", {"taskId": task_id, "inputResponses": {second: unusable}}
    )
    assert status == 400 and body["error"]["code"] == -32602
    assert "cannot be used" in body["error"]["message"]
    assert set((await get(url, task_id))["inputRequests"]) == {first, second}

    # One valid answer plus an unknown key: the answer is taken at once, the key ignored.
    answer = {"action": "accept", "content": {"name": "Ann"}}
    status, body = await rpc(
        url,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {first: answer, "nope": {"x": 1}}},
    )
    assert status == 200 and body["result"]["resultType"] == "complete"
    task = await get(url, task_id)
    assert task["status"] == "input_required" and set(task["inputRequests"]) == {second}

    # Content that fails the requested schema is asked again, under a fresh key.
    bad = {"action": "accept", "content": {"name": 7}}
    await rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": {second: bad}})
    task = await until_seen(
        url, task_id, lambda task: set(task.get("inputRequests", {})) not in ({second}, set())
    )
    (again,) = task["inputRequests"]
    assert again != second and again.startswith(second)  # keys are never reused in a task
    good = {"action": "accept", "content": {"name": "Bob"}}
    await rpc(
        url, "tasks/update", {"taskId": task_id, "inputResponses": {again: good, first: good}}
    )
    task = await until(url, task_id, "completed")
    assert task["result"]["content"][0]["text"] == "Ann & Bob"


async def test_an_update_that_takes_nothing_writes_nothing(nursery: trio.Nursery) -> None:
    store = MemoryTaskStore()
    url = await nursery.start(make_app(task_store=store).serve_http, "127.0.0.1", 0)
    task_id = (await call(url, "confirm", {"filename": "n.txt"}))["taskId"]
    (key,) = (await until(url, task_id, "input_required"))["inputRequests"]
    before = await store.get(task_id)
    assert before is not None
    yes = {"action": "accept", "content": {"confirm": True}}
    for responses in ({}, {"nope": yes}):  # empty, or only keys that are not outstanding
        status, body = await rpc(
            url, "tasks/update", {"taskId": task_id, "inputResponses": responses}
        )
        assert status == 200 and body["result"]["resultType"] == "complete"
    assert await store.get(task_id) == before  # the same revision: nothing was written
    await rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": {key: yes}})
    after = await store.get(task_id)  # an answer taken is written before the acknowledgement
    assert after is not None and after.revision > before.revision
    assert key not in after.input_requests


async def test_cancel_stops_the_handler_and_is_idempotent(url: str) -> None:
    task_id = (await call(url, "wait_for", {"label": "cancel"}))["taskId"]
    await until(url, task_id, "working")
    status, body = await rpc(url, "tasks/cancel", {"taskId": task_id})
    assert status == 200 and set(body["result"]) == {"resultType", "_meta"}
    task = await until(url, task_id, "cancelled", "completed", "failed")
    assert task["status"] == "cancelled" and "result" not in task
    await finally_ran("cancel")  # the generator was closed
    assert FINALLY == ["cancel"]
    status, body = await rpc(url, "tasks/cancel", {"taskId": task_id})
    assert status == 200 and body["result"]["resultType"] == "complete"
    # A task parked on input is released too.
    task_id = (await call(url, "confirm", {"filename": "b.txt"}))["taskId"]
    await until(url, task_id, "input_required")
    await rpc(url, "tasks/cancel", {"taskId": task_id})
    task = await until(url, task_id, "cancelled")
    assert "inputRequests" not in task
    status, body = await rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": {}})
    assert status == 200  # a finished task acknowledges late answers


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mrtr_trio.mcp" and r.levelno >= logging.ERROR]


async def test_tool_error_completes_and_protocol_error_fails(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    task_id = (await call(url, "broken"))["taskId"]
    task = await until(url, task_id, "completed", "failed")
    assert task["status"] == "completed" and task["result"]["isError"] is True
    assert task["result"]["content"][0]["text"] == "disk on fire"
    # Logged as an ordinary call's tool error is: ERROR, with the handler's traceback.
    [record] = errors_logged(caplog)
    assert record.getMessage() == "tool 'broken' failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "disk on fire"
    assert f'File "{__file__}"' in caplog.text and 'raise RuntimeError("disk' in caplog.text

    task_id = (await call(url, "needs_roots"))["taskId"]  # the client declared no roots
    task = await until(url, task_id, "completed", "failed")
    assert task["status"] == "failed" and "result" not in task
    assert task["error"]["code"] == -32021
    assert task["error"]["data"] == {"requiredCapabilities": {"roots": {}}}
    assert "roots" in task["statusMessage"]
    assert len(errors_logged(caplog)) == 1  # a protocol error is the client's, not a fault


async def test_a_full_store_refuses_the_call_wherever_the_task_would_start(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    FINALLY.clear()
    url = await nursery.start(make_app(task_store=MemoryTaskStore(1)).serve_http, "127.0.0.1", 0)
    running = await call(url, "wait_for", {"label": "holder"})
    assert running["status"] == "working"  # the store's one place is taken by a running task
    # At background() (an optional tool, a required one) or born finished: refused with the
    # limit's own code (not -32603), no task, and not a tool error (no isError result,
    # nothing logged as a fault).
    for tool, arguments in [
        ("wait_for", {"label": "refused"}),
        ("confirm", {"filename": "x"}),
        ("quick", {}),
    ]:
        _, body = await rpc(url, "tools/call", {"name": tool, "arguments": arguments})
        assert body["error"]["code"] == TASK_LIMIT_REACHED == -32000, tool
        assert body["error"]["message"] == (
            "the task store holds max_tasks=1 tasks that have not expired; retry once some "
            "have (or lower the tasks' ttl)"
        )
    await finally_ran("refused")  # the refused flow was closed at background()
    assert errors_logged(caplog) == []


def _signed_in_as_x_client(app: Any) -> Any:
    """The ASGI *app* behind the SDK's auth context, every request authenticated as the
    principal its ``X-Client`` header names (a stand-in for bearer tokens, which this test
    does not need)."""

    with_context = AuthContextMiddleware(app)

    async def as_user(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            client = dict(scope["headers"]).get(b"x-client", b"").decode()
            token = AccessToken(token=client, client_id=client, scopes=[], subject=client)
            scope = dict(scope, user=AuthenticatedUser(token))
        await with_context(scope, receive, send)

    return as_user


async def test_running_task_flows_are_bounded_per_principal(nursery: trio.Nursery) -> None:
    FINALLY.clear()
    app = make_app(task_max_flows_per_owner=1)
    url = await nursery.start(
        serve_http, _signed_in_as_x_client(app.asgi()), "127.0.0.1", 0, "/mcp"
    )
    params = {"name": "wait_for", "arguments": {"label": "alice-1"}}
    alice, bob = {"X-Client": "alice"}, {"X-Client": "bob"}
    _, first = await rpc(url, "tools/call", params, headers=alice)
    assert first["result"]["status"] == "working"
    _, second = await rpc(
        url, "tools/call", dict(params, arguments={"label": "alice-2"}), headers=alice
    )
    assert "error" in second, second
    assert second["error"]["code"] == TASK_LIMIT_REACHED
    assert "max_flows_per_owner=1" in second["error"]["message"]
    _, other = await rpc(url, "tools/call", dict(params, arguments={"label": "bob-1"}), headers=bob)
    assert other["result"]["status"] == "working"  # one client's flows do not hold up another's
    await rpc(url, "tasks/cancel", {"taskId": first["result"]["taskId"]}, headers=alice)
    await finally_ran("alice-1")
    _, again = await rpc(
        url, "tools/call", dict(params, arguments={"label": "alice-3"}), headers=alice
    )
    assert again["result"]["status"] == "working"  # its place is free once its flow ended


async def test_mrtr_rounds_before_the_task(url: str) -> None:
    first = await call(url, "ask_then_work")
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    state = first["requestState"]
    # A signed token like any other round's, not a handle on a parked flow: the rounds before
    # the task are as stateless as the rest of the era (any process with the key continues).
    assert "." not in state and len(state) < 200

    # A malformed answer is -32602 and the token stays good; a schema-invalid one is re-asked.
    error = await call(url, "ask_then_work", inputResponses={"user_name": 1}, requestState=state)
    assert error["code"] == -32602
    again = await call(
        url,
        "ask_then_work",
        inputResponses={"user_name": {"action": "accept", "content": {"name": 3}}},
        requestState=state,
    )
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]
    assert again["requestState"] != state
    replayed = await call(url, "ask_then_work", requestState=state)  # presented again
    assert replayed["resultType"] == "input_required"
    assert list(replayed["inputRequests"]) == ["user_name"]
    # One character changed, always to another one (a token that already ended in "AA"
    # would otherwise be presented unchanged, about once in 4,096 runs).
    tampered_state = state[:-2] + ("B" if state[-2] == "A" else "A") + state[-1]
    tampered = await call(url, "ask_then_work", requestState=tampered_state)
    assert tampered["code"] == -32602 and tampered["message"] == "Invalid or expired requestState"
    foreign = await call(url, "ask_then_work", {"note": "x"}, requestState=again["requestState"])
    assert foreign["code"] == -32602  # bound to the tool and its arguments

    created = await call(
        url,
        "ask_then_work",
        inputResponses={"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        requestState=again["requestState"],
    )
    assert created["resultType"] == "task"
    assert "requestState" not in created and "inputRequests" not in created
    task = await until(url, created["taskId"], "input_required")
    (key,) = task["inputRequests"]
    await rpc(
        url,
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        },
    )
    task = await until(url, created["taskId"], "completed")
    assert task["result"]["content"][0]["text"] == "Alice True"


async def test_rounds_before_the_task_continue_in_another_process(nursery: trio.Nursery) -> None:
    # Two servers with one key stand in for two processes behind a load balancer: the round
    # that asks runs on one, the round that reaches background() on the other, which then owns
    # the task.
    first_url = await nursery.start(make_app().serve_http, "127.0.0.1", 0)
    second_url = await nursery.start(make_app().serve_http, "127.0.0.1", 0)
    first = await call(first_url, "ask_then_work")
    created = await call(
        second_url,
        "ask_then_work",
        inputResponses={"user_name": {"action": "accept", "content": {"name": "Bo"}}},
        requestState=first["requestState"],
    )
    assert created["resultType"] == "task"
    task = await until(second_url, created["taskId"], "input_required")
    (key,) = task["inputRequests"]
    answer = {key: {"action": "accept", "content": {"confirm": False}}}
    await rpc(second_url, "tasks/update", {"taskId": created["taskId"], "inputResponses": answer})
    task = await until(second_url, created["taskId"], "completed")
    assert task["result"]["content"][0]["text"] == "Bo False"


async def test_a_shared_redis_task_store_lets_another_process_answer_tasks_get(
    nursery: trio.Nursery, redis_db: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Two servers, each with its own client on one real redis-server: the task runs on the
    # first; the second reads it at every stage, but only the first takes its answers.
    owner_url = await nursery.start(
        make_app(task_store=RedisTaskStore(redis_db.unix_url)).serve_http, "127.0.0.1", 0
    )
    other_url = await nursery.start(
        make_app(task_store=RedisTaskStore(redis_db.tcp_url)).serve_http, "127.0.0.1", 0
    )
    created = await call(owner_url, "confirm", {"filename": "shared.txt"})
    task_id = created["taskId"]
    assert (await get(other_url, task_id))["status"] in ("working", "input_required")
    task = await until(other_url, task_id, "input_required")
    (key,) = task["inputRequests"]
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    _, refused = await rpc(other_url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert refused["error"]["code"] == -32603  # not the process that runs it
    await rpc(owner_url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    task = await until(other_url, task_id, "completed")
    assert task["result"]["content"][0]["text"] == "shared.txt: deleted"
    assert task == await get(owner_url, task_id)
    with redis_db.client() as client:
        assert sorted(client.keys()) == [b"mrtr_trio:task:" + task_id.encode(), b"mrtr_trio:tasks"]
        client.set(f"mrtr_trio:task:{task_id}", b"overwritten by someone else")
    # A key that does not hold a record is an error answer, logged with the key's name, and
    # the server keeps serving.
    _, broken = await rpc(other_url, "tasks/get", {"taskId": task_id})
    assert broken["error"]["code"] == -32603
    assert f"the task store key 'mrtr_trio:task:{task_id}' holds" in caplog.text
    assert (await call(other_url, "plain"))["content"][0]["text"] == "never a task"


async def test_who_gets_a_task(url: str) -> None:
    # Optional tool, client without the extension: an ordinary call, never a task.
    status, body = await rpc(
        url,
        "tools/call",
        {"name": "wait_for", "arguments": {"label": "sync", "seconds": 0}},
        caps={},
    )
    assert body["result"]["resultType"] == "complete"
    assert body["result"]["content"][0]["text"] == "sync waited"
    # Required tool, client without it: -32021 naming the extension, before anything runs.
    status, body = await rpc(
        url, "tools/call", {"name": "confirm", "arguments": {"filename": "x"}}, caps={}
    )
    assert status == 400 and body["error"]["code"] == -32021
    assert body["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    # Forbidden tool: never a task, whatever the client declares; a legacy task param is ignored.
    result = await call(url, "plain", task={"ttl": 60000})
    assert result["resultType"] == "complete" and "taskId" not in result
    # Required tool that finished before background(): a task born completed.
    created = await call(url, "quick")
    assert created["resultType"] == "task" and created["status"] == "completed"
    task = await get(url, created["taskId"])
    assert task["result"]["content"][0]["text"] == "finished before any background()"
    # The extension is advertised in server/discover.
    status, body = await rpc(url, "server/discover", {})
    capabilities = body["result"]["capabilities"]
    assert capabilities["extensions"] == {TASKS_EXTENSION: {}} and "tasks" not in capabilities


async def test_tasks_methods_check_era_header_declaration_then_id(url: str) -> None:
    task_id = (await call(url, "wait_for", {"label": "gate", "seconds": 0.1}))["taskId"]
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params = {"taskId": "gate-test", "inputResponses": {}}
        status, body = await rpc(url, method, params, caps={})
        assert body["error"]["code"] == -32021, method  # before the id is looked up
        status, body = await rpc(url, method, {**params, "taskId": task_id}, name="other-task")
        assert status == 400 and body["error"]["code"] == -32020, method
        status, body = await rpc(url, method, params)
        assert status == 400 and body["error"]["code"] == -32602, method
    for method in ("tasks/result", "tasks/list"):
        status, body = await rpc(url, method, {"taskId": task_id})
        assert status == 404 and body["error"]["code"] == -32601
    status, body = await rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": [1]})
    assert body["error"]["code"] == -32602


async def test_the_official_client_runs_tasks_over_http(url: str) -> None:
    tasks = TasksClient()
    async with Client(url, extensions=[tasks], **CALLBACKS) as client:
        result = await client.call_tool("confirm", {"filename": "c.txt"})
        assert result.content[0].text == "c.txt: deleted"  # type: ignore[union-attr]
        result = await client.call_tool("ask_then_work", {})  # an MRTR round, then a task
        assert result.content[0].text == "Alice True"  # type: ignore[union-attr]
        result = await client.call_tool("plain", {})
        assert result.content[0].text == "never a task"  # type: ignore[union-attr]
    assert len(tasks.created) == 2 and {c.status for c in tasks.created} <= {
        "working",
        "input_required",
    }
    assert any(s["status"] == "input_required" for s in tasks.snapshots)


async def test_the_same_handlers_run_in_the_other_eras() -> None:
    app = make_app()
    async with Client(app.server, mode="legacy", **CALLBACKS) as client:
        result = await client.call_tool("ask_then_work", {})
        assert result.content[0].text == "Alice True"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as caught:  # required, and legacy has no tasks
            await client.call_tool("confirm", {"filename": "d"})
        assert caught.value.error.code == -32021
        with pytest.raises(MCPError) as caught:  # nor tasks/* methods
            await get_task(client.session, "task-x")
        assert caught.value.error.code == -32601
        with pytest.raises(MCPError) as caught:
            await update_task(client.session, "task-x", {})
        assert caught.value.error.code == -32601
    async with Client(app.server, mode="2026-07-28", **CALLBACKS) as client:
        result = await client.call_tool("ask_then_work", {})  # no declaration: plain MRTR
        assert result.content[0].text == "Alice True"  # type: ignore[union-attr]


async def test_expiry_cancels_a_running_task_and_removes_it(autojump_clock: trio.abc.Clock) -> None:
    FINALLY.clear()
    store = MemoryTaskStore(clock=trio.current_time)
    app = make_app(task_store=store, task_ttl=30.0)
    tasks = TasksClient()
    async with Client(app.server, mode="2026-07-28", extensions=[tasks], **CALLBACKS) as client:
        created = await client.session.call_tool(
            "wait_for", {"label": "expiry", "seconds": 3600}, allow_claimed=True
        )
        task_id = created.task_id  # type: ignore[union-attr]
        assert (await store.get(task_id)) is not None
        await trio.sleep(29)
        assert (await store.get(task_id)).status == "working"  # type: ignore[union-attr]
        await trio.sleep(2)
        assert await store.get(task_id) is None and len(store) == 0
        assert FINALLY == ["expiry"]  # the handler was cancelled, its finally ran
        # A finished task stays readable until its time to live, then it is gone.
        created = await client.session.call_tool(
            "wait_for", {"label": "done", "seconds": 1}, allow_claimed=True
        )
        task_id = created.task_id  # type: ignore[union-attr]
        await trio.sleep(5)
        assert (await store.get(task_id)).status == "completed"  # type: ignore[union-attr]
        await trio.sleep(30)
        assert await store.get(task_id) is None


async def test_the_docs_example_runs_under_all_three_drivers() -> None:
    page = (Path(__file__).parents[2] / "docs" / "tasks.md").read_text()
    namespace: dict[str, Any] = {}
    exec(page.split("```python\n")[1].split("```")[0], namespace)
    app = namespace["app"]
    tasks = TasksClient()
    async with Client(app.server, mode="2026-07-28", extensions=[tasks], **CALLBACKS) as client:
        result = await client.call_tool("deploy", {"service": "api"})
        assert result.content[0].text == "Live"  # type: ignore[union-attr]
    assert len(tasks.created) == 1  # it became a task at background()
    for mode in ("legacy", "2026-07-28"):
        async with Client(app.server, mode=mode, **CALLBACKS) as client:
            result = await client.call_tool("deploy", {"service": "api"})
            assert result.content[0].text == "Live"  # type: ignore[union-attr]


async def test_a_task_waits_on_poll_while_working(autojump_clock: trio.abc.Clock) -> None:
    calls: list[float] = []
    approved_at = 120.0

    def approval() -> str | None:
        calls.append(trio.current_time())
        return "approved" if trio.current_time() >= approved_at else None

    store = MemoryTaskStore(clock=trio.current_time)
    app = App("polling", runtime=Runtime([b"k" * 32]), task_store=store)

    @app.tool(task="required")
    async def wait_for_approval(ctx: Context):
        yield background()
        verdict = yield poll(approval, every=30.0, timeout=600.0)
        yield done(verdict)

    async with Client(app.server, mode="2026-07-28", extensions=[TasksClient()]) as client:
        created = await client.session.call_tool("wait_for_approval", {}, allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        await trio.sleep(60)
        waiting = await store.get(task_id)
        assert waiting is not None and waiting.status == "working"
        assert waiting.to_wire(detailed=True)["pollIntervalMs"] == 30_000  # the poll's `every`
        await trio.sleep(90)
        task = await store.get(task_id)
        assert task is not None and task.status == "completed"
        assert task.result is not None and task.result["content"][0]["text"] == "approved"
    assert len(calls) == 5  # at 0, 30, 60, 90 and 120 s: every `every` seconds, then read once


async def test_debug_logs_the_task_a_call_became_and_every_tasks_request(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mrtr_trio.mcp")
    created = await call(url, "confirm", {"filename": "log.txt"})
    task_id = created["taskId"]
    task = await until(url, task_id, "input_required")
    [key] = task["inputRequests"]
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    await rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    await until(url, task_id, "completed")
    await rpc(url, "tasks/cancel", {"taskId": task_id})
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    lines = [line for line in lines if "[2026-07-28]" in line]

    def logged(start: str, outcome: str) -> None:
        assert any(line.startswith(start) and f"]: {outcome} (" in line for line in lines), (
            start,
            outcome,
            lines,
        )

    logged("tools/call 'confirm'", f"task {task_id!r} created, working")
    assert not any(
        line.startswith("tools/call 'confirm'") and ": complete" in line for line in lines
    )
    logged(f"tasks/get task {task_id!r}", f"task input_required [{key!r}]")
    logged(f"tasks/update task {task_id!r} answering [{key!r}]", "complete")
    logged(f"tasks/get task {task_id!r}", "task completed")
    logged(f"tasks/cancel task {task_id!r}", "complete")
