"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) of an App: a tool call
that becomes a task, and the third driver, which runs the unchanged handler in the background.

A tool call that may become a task is one modern round of its flow
([Runtime.advance][mrtr_trio.Runtime.advance]), run in a nursery the server owns while the
request waits for what to answer. Before the task exists, a client turn ends the round as
always: an `input_required` result with a signed `requestState`, whose retry may land on
any process holding the key (MRTR before the task, as stateless as every other round). When the
handler yields [background()][mrtr_trio.mcp.background] the task is created (readable by
`tasks/get` before the `CreateTaskResult` is sent), the request answers with it, and the
round simply goes on in the background: from then on a client turn waits in-process, the
requests become the task's `inputRequests` (under keys never reused) and `tasks/update`
answers them. Answers are checked as in the other eras: malformed ones are `-32602` naming
the key (and nothing is taken), valid ones are kept, unknown keys ignored, and content that
fails the requested schema is asked again by the core. `tasks/cancel` cancels the flow's
trio task (the generator is closed, its `finally` runs); the time to live cancels it too and
removes the task.

This module owns [Tasks][mrtr_trio.mcp._tasks.Tasks]: the server's task nursery, the bounds on
flows (per process and per owner), serving a task-capable `tools/call`, and creating task
records. The rest lives beside it, one idea a module:

- `_taskextension`: the extension's identifier, policies, declaration check and errors;
- `_taskflow`: one call's flow in the background, and the `background()` marker;
- `_taskmethods`: the `tasks/*` JSON-RPC methods and the checks (owner rule included) they
  share;
- `_taskstore`: the task records and where they are kept.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import mcp_types as types
import trio
from mcp import MCPError

from .._errors import INTERNAL_ERROR
from .._runtime import Runtime
from .._util import check_count, check_seconds
from ._host import principal, raw_input_responses, request_bind
from ._registry import Entry
from ._sdk import ServerRequestContext
from ._taskextension import (
    TASK_LIMIT_REACHED,
    TASK_POLICIES,
    TASKS_EXTENSION,
    TaskPolicy,
    _NoRoom,
    declares_tasks,
    missing_tasks_extension,
)
from ._taskflow import TaskFlow, _Asking, _Ended, _outcome, _TaskCreated, background
from ._taskmethods import TaskMethods
from ._taskstore import MemoryTaskStore, TaskRecord, TaskStore, TaskStoreFull
from ._wire import input_required_result

__all__ = [
    "TASKS_EXTENSION",
    "TASK_LIMIT_REACHED",
    "TASK_POLICIES",
    "TaskPolicy",
    "Tasks",
    "background",
    "declares_tasks",
    "missing_tasks_extension",
]

_NURSERY_KEY = "mrtr_trio.tasks.nursery"


# ------------------------------------------------------------------ the extension, per App


class Tasks(TaskMethods):
    """An App's tasks: the store, the flows running in this process, and the `tasks/*`
    methods.

    - *store*: where task records live ([MemoryTaskStore][mrtr_trio.mcp.MemoryTaskStore] by
      default);
    - *ttl*: seconds a task lives after its creation (`None`: unlimited); a task still
      running then is cancelled and removed;
    - *poll_interval*: the `pollIntervalMs` suggested to clients, in seconds;
    - *max_flows*: how many task-capable flows (a round in progress, or a task running) this
      process holds at once;
    - *max_flows_per_owner*: how many of them one authenticated principal holds at once
      (`None`: no such bound; unauthenticated clients share *max_flows*).

    A call past either bound is refused with `TASK_LIMIT_REACHED` (-32000) naming it.
    """

    def __init__(
        self,
        runtime: Runtime,
        audience: str,
        *,
        store: TaskStore | None = None,
        ttl: float | None = 3600.0,
        poll_interval: float | None = 1.0,
        max_flows: int = 1000,
        max_flows_per_owner: int | None = 100,
    ) -> None:
        self.runtime = runtime
        self.audience = audience
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.ttl: float | None = check_seconds("task_ttl", ttl, optional=True)
        self.poll_interval: float | None = check_seconds(
            "task_poll_interval", poll_interval, optional=True
        )
        self.max_flows = check_count("max_flows", max_flows)
        self.max_flows_per_owner = (
            None
            if max_flows_per_owner is None
            else check_count("max_flows_per_owner", max_flows_per_owner)
        )
        self._by_task: dict[str, TaskFlow] = {}
        self._flows: set[TaskFlow] = set()
        #: Whether the caller's token holds these scopes (the App's scope check; by default
        #: everyone does).
        self.permits: Callable[[Sequence[str]], bool] = lambda scopes: True
        self._flows_by_owner: Counter[tuple[str, ...]] = Counter()

    # -------------------------------------------------------------------------- lifespan

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[dict[str, Any]]:
        """The nursery task flows run in, for as long as the server serves."""
        async with trio.open_nursery() as nursery:
            try:
                yield {_NURSERY_KEY: nursery}
            finally:
                nursery.cancel_scope.cancel()

    def _forget(self, flow: TaskFlow) -> None:
        if flow in self._flows:
            self._flows.remove(flow)
            self._flows_by_owner[flow.owner] -= 1
            if not self._flows_by_owner[flow.owner]:
                del self._flows_by_owner[flow.owner]
        if flow.record is not None:
            self._by_task.pop(flow.record.task_id, None)

    # ------------------------------------------------------------------------ tools/call

    async def call_tool(
        self,
        ctx: ServerRequestContext[Any],
        entry: Entry,
        raw_arguments: Mapping[str, Any],
        arguments: Mapping[str, Any],
        params: types.CallToolRequestParams,
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Serve a `tools/call` of a task-capable tool from a client that declared the
        extension: one round of the flow, or the `CreateTaskResult` when it goes on as a
        task."""
        bind = request_bind(ctx.method, entry.name, raw_arguments, self.audience)
        flow = self._start(ctx, entry, arguments, params, bind)
        try:
            await flow.ready.wait()
        except BaseException:
            if flow.record is None:  # the caller went away before a task existed
                flow.cancel_scope.cancel()
            raise
        answer = flow.answer
        if isinstance(answer, _Asking):
            return input_required_result(answer.outcome)
        if isinstance(answer, _TaskCreated):
            return answer.record.to_wire(detailed=False)
        assert isinstance(answer, _Ended)
        if isinstance(answer.error, _NoRoom):  # no room for the task at background()
            raise answer.error
        if entry.task == "required":  # it never went to the background: a task born finished
            return await self._born_finished(flow.owner, entry.scopes, answer)
        if answer.error is not None:
            raise answer.error
        assert answer.result is not None
        return answer.result

    def _start(
        self,
        ctx: ServerRequestContext[Any],
        entry: Entry,
        arguments: Mapping[str, Any],
        params: types.CallToolRequestParams,
        bind: bytes,
    ) -> TaskFlow:
        nursery = (
            ctx.lifespan_context.get(_NURSERY_KEY)
            if isinstance(ctx.lifespan_context, Mapping)
            else None
        )
        if not isinstance(nursery, trio.Nursery):
            raise MCPError(
                INTERNAL_ERROR,
                "tasks need the server's lifespan: serve with App.serve_http, App.serve_stdio "
                "or an ASGI server that runs lifespans",
            )
        if len(self._flows) >= self.max_flows:
            raise MCPError(
                TASK_LIMIT_REACHED,
                f"the server is running max_flows={self.max_flows} task flows; retry once "
                "some have finished",
            )
        owner = principal()
        if (
            owner
            and self.max_flows_per_owner is not None
            and self._flows_by_owner[owner] >= self.max_flows_per_owner
        ):
            raise MCPError(
                TASK_LIMIT_REACHED,
                f"this client is running max_flows_per_owner={self.max_flows_per_owner} task "
                "flows; retry once some have finished",
            )
        responses = raw_input_responses(params)
        flow = TaskFlow(self, entry, arguments, params, responses, ctx, bind)
        self._flows.add(flow)
        self._flows_by_owner[flow.owner] += 1
        nursery.start_soon(flow.run)
        return flow

    async def _born_finished(
        self, owner: tuple[str, ...], scopes: tuple[str, ...], turn: _Ended
    ) -> dict[str, Any]:
        record = await self._create(owner, scopes, **_outcome(turn.result, turn.error))
        return record.to_wire(detailed=False)

    async def _create(
        self, owner: tuple[str, ...], scopes: tuple[str, ...], **fields: Any
    ) -> TaskRecord:
        """Store a new task of *owner*'s, for a tool needing *scopes*, with these record fields
        (its status at least); `_NoRoom` (-32603) when the store is full."""
        now = self.store.clock()
        record = TaskRecord(
            task_id=f"task-{secrets.token_urlsafe(18)}",
            created_at=now,
            updated_at=now,
            ttl=self.ttl,
            owner=owner,
            scopes=scopes,
            poll_interval=self.poll_interval,
            **fields,
        )
        try:
            await self.store.create(record)
        except TaskStoreFull as full:
            raise _NoRoom(TASK_LIMIT_REACHED, str(full)) from None
        return record
