"""The tasks extension on the official ``mcp`` client (2.3), which ships no SEP-2663 client:
its public extension API (a ``ClientExtension`` that claims ``resultType: "task"``) and typed
``tasks/*`` requests, whose ``name_param`` makes the client send ``Mcp-Name: <taskId>``.

The claim resolves a task as a client should: poll ``tasks/get`` at the suggested interval,
answer each new ``inputRequests`` key once through the client's own callbacks
(``tasks/update``), and return the inlined result.
"""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as types
import pydantic
import trio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError

from mrtr_trio.mcp import TASKS_EXTENSION

ANY: pydantic.TypeAdapter[dict[str, Any]] = pydantic.TypeAdapter(dict[str, Any])
_INPUT_REQUEST: pydantic.TypeAdapter[types.InputRequest] = pydantic.TypeAdapter(types.InputRequest)


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CreatedTask(types.Result):
    """A ``CreateTaskResult``."""

    model_config = pydantic.ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), ANY)


async def update_task(
    session: ClientSession, task_id: str, responses: dict[str, Any]
) -> dict[str, Any]:
    request = UpdateTask(params=UpdateParams(task_id=task_id, input_responses=responses))
    return await session.send_request(request, ANY)


class TasksClient(ClientExtension):
    """Declares the tasks extension and resolves tasks to their results."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []
        self.snapshots: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        session = ctx.session
        answered: set[str] = set()
        interval = (created.poll_interval_ms or 100) / 1000
        with trio.fail_after(30):
            while True:
                task = await get_task(session, created.task_id)
                self.snapshots.append(task)
                status = task["status"]
                if status == "completed":
                    return types.CallToolResult.model_validate(task["result"])
                if status == "failed":
                    error = task["error"]
                    raise MCPError(error["code"], error["message"], error.get("data"))
                if status == "cancelled":
                    raise MCPError(-32603, f"task {created.task_id} was cancelled")
                fresh = {
                    k: v for k, v in task.get("inputRequests", {}).items() if k not in answered
                }
                if fresh:
                    responses = {}
                    for key, raw in fresh.items():
                        request = _INPUT_REQUEST.validate_python(raw)
                        context = ClientRequestContext(session=session, request_id=key)
                        answer = await session.dispatch_input_request(context, request)
                        responses[key] = answer.model_dump(
                            by_alias=True, mode="json", exclude_none=True
                        )
                    await update_task(session, created.task_id, responses)
                    answered.update(fresh)
                    continue
                await trio.sleep(min(interval, 0.05))
