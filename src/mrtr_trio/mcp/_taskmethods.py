"""The `tasks/*` JSON-RPC methods of an App's [Tasks][mrtr_trio.mcp._tasks.Tasks]:
`tasks/get`, `tasks/update` and `tasks/cancel` (`tasks/result` and `tasks/list` no longer exist
and stay `-32601`), and the checks every one of them passes first, the access rule included: a
task is its creator's only (anyone else is answered exactly as for an unknown task), and only
with a token that still holds the scopes of its tool (else the insufficient-scope refusal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError

from .._errors import INTERNAL_ERROR, INVALID_PARAMS, InvalidInputResponse
from ._host import is_modern, principal
from ._sdk import ServerRequestContext, mcp_name_header
from ._taskextension import declares_tasks, missing_tasks_extension
from ._taskstore import TaskRecord, TaskStore
from ._wire import mcp_error

if TYPE_CHECKING:
    from ._taskflow import TaskFlow

__all__ = ["TaskMethods"]


class TaskMethods:
    """The `tasks/*` handlers, a part of [Tasks][mrtr_trio.mcp._tasks.Tasks] (which holds
    the store, the flows of this process by task id, and the scope check)."""

    store: TaskStore
    _by_task: dict[str, TaskFlow]
    permits: Callable[[Sequence[str]], bool]

    def register(self, server: Any) -> None:
        """Add `tasks/get`, `tasks/update` and `tasks/cancel` to *server*."""
        server.add_request_handler("tasks/get", types.RequestParams, self._get)
        server.add_request_handler("tasks/update", types.RequestParams, self._update)
        server.add_request_handler("tasks/cancel", types.RequestParams, self._cancel)

    async def _get(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        record = await self._find(ctx)
        return record.to_wire(detailed=True)

    async def _update(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        record = await self._find(ctx)
        responses = (ctx.params or {}).get("inputResponses")
        if not isinstance(responses, Mapping) or not all(isinstance(k, str) for k in responses):
            raise MCPError(INVALID_PARAMS, "inputResponses must be an object of answers")
        flow = self._by_task.get(record.task_id)
        if not record.terminal:  # a finished task acknowledges late answers
            if flow is None:
                raise _elsewhere(record.task_id)
            try:
                took = flow.deliver(responses)
            except InvalidInputResponse as error:
                raise mcp_error(error) from None
            if took:  # nothing taken, nothing to write
                await flow._save()
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        record = await self._find(ctx)
        flow = self._by_task.get(record.task_id)
        if not record.terminal:
            if flow is None:
                raise _elsewhere(record.task_id)
            await flow.cancel_task()
        return {"resultType": "complete"}

    async def _find(self, ctx: ServerRequestContext[Any]) -> TaskRecord:
        """The checks every `tasks/*` request passes, in the order the extension gives:
        era, routing header, the client's declaration, then the task id; then who may touch
        the task: its owner only (anyone else is told it is unknown), with a token that still
        holds the scopes of its tool (else the insufficient-scope refusal, `-32602` naming
        them)."""
        method = ctx.method
        if not is_modern(ctx):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", method)
        task_id = (ctx.params or {}).get("taskId")
        present, header = mcp_name_header(ctx)
        if present and header != task_id:
            raise MCPError(
                types.HEADER_MISMATCH, f"the Mcp-Name header does not match {method}'s taskId"
            )
        if not declares_tasks(ctx):
            raise missing_tasks_extension(method)
        if not isinstance(task_id, str) or not task_id:
            raise MCPError(INVALID_PARAMS, f"{method} needs a taskId string")
        record = await self.store.get(task_id)
        if record is None or record.owner != principal():
            raise MCPError(INVALID_PARAMS, f"Unknown or expired task {task_id!r}")
        if not self.permits(record.scopes):  # its owner, with a token narrowed since
            raise MCPError(
                INVALID_PARAMS,
                f"task {task_id!r} runs a tool that needs the scopes {' '.join(record.scopes)}, "
                "which this token lacks",
            )
        return record


def _elsewhere(task_id: str) -> MCPError:
    return MCPError(
        INTERNAL_ERROR,
        f"task {task_id!r} runs in another process; route tasks/* requests by their Mcp-Name "
        "header to the process that created the task",
    )
