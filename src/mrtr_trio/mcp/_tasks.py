"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a tool call that becomes a
task, and the third driver, which runs the unchanged handler in the background.

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

The handler's own outcome decides the task's: a value or a tool error (anything but a protocol
error) ends `completed` with the `CallToolResult` a synchronous call would have returned;
a protocol error (`-32602`, `-32021`) ends `failed` with that JSON-RPC error.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal, TypeAlias, TypeVar

import attrs
import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    InvalidInputResponse,
)
from .._flow import Step, step
from .._modern import InputRequired
from .._replay import Suspend, check_answer
from .._runtime import Runtime
from .._util import check_count, check_seconds
from .._values import Request
from ._host import (
    RequestHost,
    client_capabilities,
    is_modern,
    principal,
    raw_input_responses,
    request_bind,
)
from ._log import flow_failure
from ._registry import Entry
from ._sdk import mcp_name_header
from ._taskstore import MemoryTaskStore, TaskRecord, TaskStatus, TaskStore, TaskStoreFull
from ._wire import (
    error_result,
    input_required_result,
    mcp_error,
    tool_result,
)

__all__ = [
    "TASKS_EXTENSION",
    "TASK_LIMIT_REACHED",
    "TaskPolicy",
    "Tasks",
    "background",
]

R = TypeVar("R")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TaskPolicy = Literal["forbidden", "optional", "required"]
TASK_POLICIES: tuple[str, ...] = ("forbidden", "optional", "required")
_NURSERY_KEY = "mrtr_trio.tasks.nursery"

_CURRENT_FLOW: ContextVar[TaskFlow | None] = ContextVar("mrtr_trio_task_flow", default=None)


# ---------------------------------------------------------------------------- the marker


async def _enter_background() -> None:
    flow = _CURRENT_FLOW.get()
    if flow is not None:
        await flow.enter_task()


def background() -> Step:
    """Yield this where a tool's flow may go on in the background: from here, when the tool's
    `task` policy and the request allow it, the call becomes a task (the client gets a
    `CreateTaskResult` and polls `tasks/get`), and later asks are the task's
    `inputRequests`. Asks before it are ordinary rounds of the call itself.

    Everywhere else (a live legacy session, a request that did not declare the tasks
    extension, a tool whose policy is `"forbidden"`) the flow simply continues. It is a
    [step][mrtr_trio.step], so replays skip it like any other.
    """
    return step(_enter_background)


def missing_tasks_extension(what: str) -> MCPError:
    """The `-32021` error for a client that did not declare the tasks extension."""
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the {TASKS_EXTENSION} extension, which this request did not declare",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this request (2026-07-28 only) declared the tasks extension."""
    if not is_modern(ctx):
        return False
    extensions = client_capabilities(ctx).get("extensions")
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


# ------------------------------------------------------------- what the request answers


@attrs.frozen
class _Asking:
    """Before the task: the round ended with a client turn."""

    outcome: InputRequired


@attrs.frozen
class _Started:
    """The flow yielded `background()`: this task now carries it."""

    record: TaskRecord


@attrs.frozen
class _Ended:
    """The flow finished before becoming a task: *result*, or the protocol *error*."""

    result: types.CallToolResult | None
    error: MCPError | None


_Answer: TypeAlias = _Asking | _Started | _Ended


class _FlowHost:
    """The flow's [Host][mrtr_trio.Host]: progress and logs reach the request waiting on the
    flow's round; a task has no stream for them, so they are dropped."""

    def __init__(self, request: RequestHost) -> None:
        self.current: RequestHost | None = request

    @property
    def request_context(self) -> Any:
        return None if self.current is None else self.current.request_context

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        if self.current is not None:
            await self.current.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if self.current is not None:
            await self.current.log(level, data, logger)


# --------------------------------------------------------------------------- the driver


class TaskFlow:
    """One round of a task-capable tool call, run in the background: it ends like any modern
    round, unless it reaches `background()` first; then it goes on as a task."""

    def __init__(
        self,
        tasks: Tasks,
        entry: Entry,
        arguments: Mapping[str, Any],
        params: types.CallToolRequestParams,
        responses: Mapping[str, Any] | None,
        ctx: ServerRequestContext[Any],
        bind: bytes,
    ) -> None:
        self.tasks = tasks
        self.entry = entry
        self.arguments = arguments
        self.request_state = params.request_state
        self.responses = responses
        self.capabilities = client_capabilities(ctx)
        self.bind = bind
        self.owner = principal()
        self.host = _FlowHost(RequestHost(ctx))
        self.record: TaskRecord | None = None
        self.answer: _Answer | None = None
        self.ready = trio.Event()  # the waiting request has its answer
        self.cancel_scope = trio.CancelScope()
        self._asks: dict[str, tuple[str, Request]] = {}  # wire key -> (flow's key, request)
        self._answers: dict[str, Any] = {}
        self._answered = trio.Event()
        self._issued: set[str] = set()
        self._cancel_requested = False

    # ----------------------------------------------------------- the flow's own trio task

    async def run(self) -> None:
        """Run the round to its end (in the server's task nursery)."""
        _CURRENT_FLOW.set(self)
        asking: InputRequired | None = None
        result: types.CallToolResult | None = None
        error: MCPError | None = None
        try:
            with self.cancel_scope:
                try:
                    outcome = await self.tasks.runtime.advance(
                        self.entry.fn,
                        self.arguments,
                        input_responses=self.responses,
                        request_state=self.request_state,
                        client_capabilities=self.capabilities,
                        bind=self.bind,
                        host=self.host,
                        turn=self._turn,
                    )
                    if isinstance(outcome, InputRequired):
                        asking = outcome
                    else:
                        result = tool_result(outcome.value)
                except _NoRoom as refused:  # at background(): the call is refused, not failed
                    error = refused
                except Exception as failure:  # as a synchronous call answers (and logs) it
                    answer = flow_failure(self.entry, failure, error_result)
                    if isinstance(answer, MCPError):
                        error = answer
                    else:
                        result = answer
            with trio.CancelScope(shield=True):
                await self._end(asking, result, error)
        finally:
            self.tasks._forget(self)

    async def _end(
        self,
        asking: InputRequired | None,
        result: types.CallToolResult | None,
        error: MCPError | None,
    ) -> None:
        self._asks.clear()
        if self.record is None:
            if asking is not None:
                self._answer(_Asking(asking))
            else:
                if result is None and error is None:  # cancelled before it became a task
                    error = MCPError(
                        INTERNAL_ERROR, f"the flow of tool {self.entry.name!r} was cancelled"
                    )
                self._answer(_Ended(result, error))
            return
        if self.cancel_scope.cancelled_caught and not self._cancel_requested:
            await self.tasks.store.delete(self.record.task_id)  # its time to live ran out
            return
        if self.cancel_scope.cancelled_caught:
            await self._save(status="cancelled")
        else:
            await self._save(**_outcome(result, error))

    def _answer(self, answer: _Answer) -> None:
        self.answer = answer
        self.ready.set()

    # ------------------------------------------------------------------ the client's turns

    async def _turn(self, suspend: Suspend) -> Mapping[str, Any] | None:
        """The core's client turn: before the task, none (the round ends with a token); in
        the task, publish the requests and wait for `tasks/update`."""
        if self.record is None:
            return None
        if suspend.retry_after is not None:  # a poll: the task works, and looks again later
            await self._save(poll_interval=suspend.retry_after)
            await trio.sleep(suspend.retry_after)
            return {}
        if not suspend.requests:  # a pause: a task's client has nothing to do
            return {}
        for key, request in suspend.requests.items():
            wire_key = key
            n = 1
            while wire_key in self._issued:  # a task's keys are never reused in its lifetime
                n += 1
                wire_key = f"{key}~{n}"
            self._issued.add(wire_key)
            self._asks[wire_key] = (key, request)
        self._answers, self._answered = {}, trio.Event()
        await self._save()
        await self._answered.wait()
        return self._answers

    def deliver(self, responses: Mapping[str, Any]) -> bool:
        """Answer outstanding requests from *responses* (wire key → client JSON), all or none:
        a malformed answer raises [InvalidInputResponse][mrtr_trio.InvalidInputResponse]
        naming its key and nothing is taken; keys not outstanding are ignored. Whether any
        answer was taken."""
        taken = {wire_key: raw for wire_key, raw in responses.items() if wire_key in self._asks}
        for wire_key, raw in taken.items():  # all of them, before any is taken
            check_answer(wire_key, self._asks[wire_key][1], raw)
        for wire_key, raw in taken.items():
            key, _ = self._asks.pop(wire_key)
            self._answers[key] = raw
        if taken and not self._asks:
            self._answered.set()
        return bool(taken)

    # ------------------------------------------------------------------------ the task

    async def enter_task(self) -> None:
        """`background()` reached: create the task (if this call may have one) before the
        client hears of it, and go on in the background."""
        if self.record is not None:
            return
        tasks = self.tasks
        record = await tasks._create(self.owner, status="working")
        self.record = record
        tasks._by_task[record.task_id] = self
        if tasks.ttl is not None:
            self.cancel_scope.deadline = trio.current_time() + tasks.ttl
        self.host.current = None
        self._answer(_Started(record))

    async def cancel_task(self) -> None:
        """`tasks/cancel`: the task is `cancelled` at once; the handler is cancelled (its
        `finally` runs in the background)."""
        self._cancel_requested = True
        if self.record is not None and not self.record.terminal:
            await self._save(status="cancelled")
        self.cancel_scope.cancel()

    async def _save(self, status: TaskStatus | None = None, **changes: Any) -> None:
        current = self.record
        if current is None or current.terminal:
            return
        if status is None:
            status = "input_required" if self._asks else "working"
        asks = {key: request.to_wire() for key, (_, request) in self._asks.items()}
        changes.setdefault("poll_interval", self.tasks.poll_interval)
        self.record = current.evolve(
            self.tasks.store.clock(), status=status, input_requests=asks, **changes
        )
        await self.tasks.store.put(self.record)


def _outcome(result: types.CallToolResult | None, error: MCPError | None) -> dict[str, Any]:
    """A finished task's record fields, from the handler's outcome: `failed` with the protocol
    *error* inlined (its message as `statusMessage`), else `completed` with the *result*."""
    if error is not None:
        wire: dict[str, Any] = {"code": error.error.code, "message": error.error.message}
        if error.error.data is not None:
            wire["data"] = error.error.data
        return {"status": "failed", "error": wire, "status_message": str(error)}
    assert result is not None
    return {
        "status": "completed",
        "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
    }


#: The JSON-RPC error code (implementation-defined server error) of a `tools/call` refused
#: because a bound on tasks is reached: the process's or the owner's flows, or the store.
TASK_LIMIT_REACHED = -32000


class _NoRoom(MCPError):
    """The store has no room for a new task: the `tools/call` is refused with
    `TASK_LIMIT_REACHED` naming the bound, as when the process or the owner runs its maximum
    of flows (not a tool error, and no task exists)."""


# ------------------------------------------------------------------ the extension, per App


class Tasks:
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
        #: Whether the caller's token may use a handler (the App's scope check; by default
        #: everyone may).
        self.permits: Callable[[Entry], bool] = lambda entry: True
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
        if isinstance(answer, _Started):
            return answer.record.to_wire(detailed=False)
        assert isinstance(answer, _Ended)
        if isinstance(answer.error, _NoRoom):  # no room for the task at background()
            raise answer.error
        if entry.task == "required":  # it never went to the background: a task born finished
            return await self._born_finished(flow.owner, answer)
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

    async def _born_finished(self, owner: tuple[str, ...], turn: _Ended) -> dict[str, Any]:
        record = await self._create(owner, **_outcome(turn.result, turn.error))
        return record.to_wire(detailed=False)

    async def _create(self, owner: tuple[str, ...], **fields: Any) -> TaskRecord:
        """Store a new task of *owner*'s, with these record fields (its status at least);
        `_NoRoom` (-32603) when the store is full."""
        now = self.store.clock()
        record = TaskRecord(
            task_id=f"task-{secrets.token_urlsafe(18)}",
            created_at=now,
            updated_at=now,
            ttl=self.ttl,
            owner=owner,
            poll_interval=self.poll_interval,
            **fields,
        )
        try:
            await self.store.create(record)
        except TaskStoreFull as full:
            raise _NoRoom(TASK_LIMIT_REACHED, str(full)) from None
        return record

    # ------------------------------------------------------------------------ tasks/*

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
            if not self.permits(flow.entry):  # a token narrowed since: it cannot go on
                raise MCPError(
                    INVALID_PARAMS,
                    f"task {record.task_id!r} runs tool {flow.entry.name!r}, which needs the "
                    f"scopes {' '.join(flow.entry.scopes)}; this token lacks some",
                )
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
        era, routing header, the client's declaration, then the task id."""
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
        return record


def _elsewhere(task_id: str) -> MCPError:
    return MCPError(
        INTERNAL_ERROR,
        f"task {task_id!r} runs in another process; route tasks/* requests by their Mcp-Name "
        "header to the process that created the task",
    )
