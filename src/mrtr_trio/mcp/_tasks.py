"""The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a tool call that becomes a
task, and the third driver, which runs the unchanged handler live in the background.

The driver is [Runtime.run_live][mrtr_trio.Runtime.run_live] with a back channel of its own.
Before a task exists, each ask the flow makes is returned to the client as an
`input_required` result whose `requestState` is an opaque, single-use handle on the parked
flow, and the retry's `inputResponses` answer it (MRTR before the task). When the handler
yields [background()][mrtr_trio.mcp.background] the task is created (readable by `tasks/get`
before the `CreateTaskResult` is sent) and the flow goes on in a nursery the server owns:
each ask now sets the task to `input_required` with `inputRequests`, and `tasks/update`
answers it. Answers are checked as in the other eras: malformed ones are `-32602` naming the
key (and nothing is taken), valid ones are kept, unknown keys ignored, and content that fails
the requested schema is asked again by the core. `tasks/cancel` cancels the flow's trio task
(the generator is closed, its `finally` runs); the time to live cancels it too and removes
the task.

The handler's own outcome decides the task's: a value or a tool error (anything but a protocol
error) ends `completed` with the `CallToolResult` a synchronous call would have returned;
a protocol error (`-32602`, `-32021`) ends `failed` with that JSON-RPC error.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from typing import Any, Literal, TypeAlias

import attrs
import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from .._errors import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    InvalidInputResponse,
    InvalidRequestState,
)
from .._flow import Step, step
from .._runtime import Runtime
from .._values import Answer, Request, parse_answer
from ._host import (
    RequestHost,
    client_capabilities,
    is_modern,
    principal,
    raw_input_responses,
    request_bind,
)
from ._registry import Entry
from ._sdk import mcp_name_header
from ._taskstore import MemoryTaskStore, TaskRecord, TaskStatus, TaskStore, TaskStoreFull
from ._wire import PROTOCOL_ERRORS, error_message, error_result, mcp_error, sdk_request, tool_result

__all__ = [
    "FLOW_HANDLE_PREFIX",
    "TASKS_EXTENSION",
    "TaskPolicy",
    "Tasks",
    "background",
    "is_flow_handle",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TaskPolicy = Literal["forbidden", "optional", "required"]
TASK_POLICIES: tuple[str, ...] = ("forbidden", "optional", "required")
#: The `requestState` of a parked pre-task flow starts with this; a core token never does
#: (it is base64url, which has no `.`).
FLOW_HANDLE_PREFIX = "flow."
METHOD_NOT_FOUND = -32601
HEADER_MISMATCH = -32020
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


def is_flow_handle(request_state: str | None) -> bool:
    """Whether *request_state* names a parked pre-task flow (not a core token)."""
    return isinstance(request_state, str) and request_state.startswith(FLOW_HANDLE_PREFIX)


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


# ------------------------------------------------------------------------ what a turn is


@attrs.frozen
class _Asking:
    """Before the task: the flow waits for these answers (wire key → request)."""

    requests: Mapping[str, Request]


@attrs.frozen
class _Started:
    """The flow yielded `background()`: this task now carries it."""

    record: TaskRecord


@attrs.frozen
class _Ended:
    """The flow finished before becoming a task: *result*, or the protocol *error*."""

    result: types.CallToolResult | None
    error: MCPError | None


_Turn: TypeAlias = _Asking | _Started | _Ended


class _PendingAsk:
    """One outstanding request and the answer that will end its wait."""

    def __init__(self, key: str, wire_key: str, request: Request) -> None:
        self.key = key
        self.wire_key = wire_key
        self.request = request
        self.answer: Answer | None = None
        self.answered = trio.Event()

    def resolve(self, answer: Answer) -> None:
        self.answer = answer
        self.answered.set()


class _FlowHost:
    """The flow's [Host][mrtr_trio.Host]: progress and logs reach the request currently
    waiting on the flow (a pre-task round); a task has no stream for them, so they are
    dropped."""

    def __init__(self) -> None:
        self.current: RequestHost | None = None

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
    """One task-capable tool call's flow, run live in the background: first behind MRTR rounds
    of the call, then (after `background()`) as a task."""

    def __init__(
        self,
        tasks: Tasks,
        entry: Entry,
        arguments: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        bind: bytes,
        owner: tuple[str, ...],
        preloaded: Mapping[str, Any] | None,
    ) -> None:
        self.tasks = tasks
        self.entry = entry
        self.arguments = arguments
        self.capabilities = capabilities
        self.bind = bind
        self.owner = owner
        self.host = _FlowHost()
        self.record: TaskRecord | None = None
        self.ended: _Ended | None = None
        self.handle: str | None = None
        self.cancel_scope = trio.CancelScope()
        self._preloaded = preloaded
        self._asks: dict[str, _PendingAsk] = {}
        self._issued: set[str] = set()
        self._cancel_requested = False
        self._changed = trio.Event()
        self.finished = trio.Event()

    # ----------------------------------------------------------- the flow's own trio task

    async def run(self, runtime: Runtime) -> None:
        """Run the handler to its end (in the server's task nursery)."""
        _CURRENT_FLOW.set(self)
        result: types.CallToolResult | None = None
        error: MCPError | None = None
        try:
            with self.cancel_scope:
                try:
                    value = await runtime.run_live(
                        self.entry.fn,
                        self.arguments,
                        self._ask,
                        client_capabilities=self.capabilities,
                        host=self.host,
                    )
                    result = tool_result(value)
                except PROTOCOL_ERRORS as failure:
                    error = mcp_error(failure)
                except Exception as failure:  # a tool error, as a synchronous call reports it
                    result = error_result(error_message(failure))
            with trio.CancelScope(shield=True):
                await self._end(result, error)
        finally:
            self.finished.set()
            self.tasks._forget(self)

    async def _end(self, result: types.CallToolResult | None, error: MCPError | None) -> None:
        self._asks.clear()
        if self.record is None:
            if result is None and error is None:  # cancelled before it became a task
                error = MCPError(-32603, f"the flow of tool {self.entry.name!r} was cancelled")
            self.ended = _Ended(result, error)
            self._notify()
            return
        if self.cancel_scope.cancelled_caught and not self._cancel_requested:
            await self.tasks.store.delete(self.record.task_id)  # its time to live ran out
            return
        if self.cancel_scope.cancelled_caught:
            await self._save(status="cancelled")
        elif error is not None:
            await self._save(status="failed", error=_error_json(error), status_message=str(error))
        else:
            assert result is not None
            await self._save(status="completed", result=_result_json(result))

    # ------------------------------------------------------------------ the back channel

    async def _ask(self, key: str, request: Request) -> Answer:
        """run_live's `ask`: publish one request and wait for its answer."""
        if self.record is None and self._preloaded is not None and key in self._preloaded:
            return _parse(key, request, self._preloaded[key])
        pending = self._publish(key, request)
        try:
            if self.record is not None:
                await self._save()
            self._notify()
            await pending.answered.wait()
            assert pending.answer is not None
            return pending.answer
        finally:
            if self._asks.get(pending.wire_key) is pending:
                del self._asks[pending.wire_key]

    def _publish(self, key: str, request: Request) -> _PendingAsk:
        wire_key = key
        if self.record is not None:  # a task's keys are never reused over its lifetime
            n = 1
            while wire_key in self._issued:
                n += 1
                wire_key = f"{key}~{n}"
            self._issued.add(wire_key)
        pending = _PendingAsk(key, wire_key, request)
        self._asks[wire_key] = pending
        return pending

    def deliver(self, responses: Mapping[str, Any]) -> None:
        """Answer outstanding asks from *responses* (wire key → client JSON), all or none:
        a malformed answer raises [InvalidInputResponse][mrtr_trio.InvalidInputResponse]
        naming its key and nothing is taken; keys not outstanding are ignored."""
        parsed = {
            wire_key: _parse(wire_key, self._asks[wire_key].request, raw)
            for wire_key, raw in responses.items()
            if wire_key in self._asks
        }
        for wire_key, answer in parsed.items():
            self._asks.pop(wire_key).resolve(answer)

    # ------------------------------------------------------------------------ the task

    async def enter_task(self) -> None:
        """`background()` reached: create the task (if this call may have one) before the
        client hears of it, and go on in the background."""
        if self.record is not None or self.ended is not None:
            return
        tasks = self.tasks
        now = tasks.store.clock()
        record = TaskRecord(
            task_id=f"task-{secrets.token_urlsafe(18)}",
            status="working",
            created_at=now,
            updated_at=now,
            ttl=tasks.ttl,
            owner=self.owner,
            poll_interval=tasks.poll_interval,
        )
        await tasks.store.create(record)
        self.record = record
        self._preloaded = None
        tasks._by_task[record.task_id] = self
        if tasks.ttl is not None:
            self.cancel_scope.deadline = trio.current_time() + tasks.ttl
        self.host.current = None
        self._notify()

    async def cancel_task(self) -> None:
        """`tasks/cancel`: the task is `cancelled` at once; the handler is cancelled (its
        `finally` runs in the background)."""
        self._cancel_requested = True
        if self.record is not None and not self.record.terminal:
            await self._save(status="cancelled")
        self.cancel_scope.cancel()

    async def save(self) -> None:
        """Write the task's current asks and status (after `deliver`)."""
        await self._save()

    async def _save(self, status: TaskStatus | None = None, **changes: Any) -> None:
        current = self.record
        if current is None or current.terminal:
            return
        if status is None:
            status = "input_required" if self._asks else "working"
        asks = {key: ask.request.to_wire() for key, ask in self._asks.items()}
        self.record = current.evolve(
            self.tasks.store.clock(), status=status, input_requests=asks, **changes
        )
        await self.tasks.store.put(self.record)

    # ------------------------------------------------------------- the waiting request

    def _notify(self) -> None:
        self._changed.set()

    async def next_turn(self) -> _Turn:
        """Wait until the flow needs the client, became a task, or ended."""
        while True:
            if self.record is not None:
                return _Started(self.record)
            if self.ended is not None:
                return self.ended
            if self._asks:
                # A batch's asks are published by sibling trio tasks: let them all arrive.
                count = -1
                while count != len(self._asks):
                    count = len(self._asks)
                    await trio.lowlevel.checkpoint()
                if self._asks and self.record is None and self.ended is None:
                    self._preloaded = None
                    return _Asking({k: a.request for k, a in self._asks.items()})
                continue
            await self._changed.wait()
            self._changed = trio.Event()


def _parse(key: str, request: Request, raw: Any) -> Answer:
    try:
        return parse_answer(request, raw)
    except InvalidInputResponse as error:
        raise InvalidInputResponse(f"the answer to {key!r} is malformed: {error}") from None


def _result_json(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _error_json(error: MCPError) -> dict[str, Any]:
    wire: dict[str, Any] = {"code": error.error.code, "message": error.error.message}
    if error.error.data is not None:
        wire["data"] = error.error.data
    return wire


# ------------------------------------------------------------------ the extension, per App


class Tasks:
    """An App's tasks: the store, the flows running in this process, and the `tasks/*`
    methods.

    - *store*: where task records live ([MemoryTaskStore][mrtr_trio.mcp.MemoryTaskStore] by
      default);
    - *ttl*: seconds a task lives after its creation (`None`: unlimited); a task still
      running then is cancelled and removed;
    - *poll_interval*: the `pollIntervalMs` suggested to clients, in seconds;
    - *max_flows*: how many task-capable flows (parked before their task, or running) this
      process holds at once.
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
    ) -> None:
        if ttl is not None and not (isinstance(ttl, int | float) and ttl > 0):
            raise ValueError(f"task_ttl must be a positive number of seconds or None, got {ttl!r}")
        if poll_interval is not None and not (
            isinstance(poll_interval, int | float) and poll_interval > 0
        ):
            raise ValueError(f"task_poll_interval must be positive seconds, got {poll_interval!r}")
        self.runtime = runtime
        self.audience = audience
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.ttl = None if ttl is None else float(ttl)
        self.poll_interval = None if poll_interval is None else float(poll_interval)
        self.max_flows = max_flows
        self._by_task: dict[str, TaskFlow] = {}
        self._by_handle: dict[str, TaskFlow] = {}
        self._flows: set[TaskFlow] = set()

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
        self._flows.discard(flow)
        if flow.handle is not None:
            self._by_handle.pop(flow.handle, None)
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
        policy: TaskPolicy,
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Serve a `tools/call` of a task-capable tool from a client that declared the
        extension: one round of the flow before its task, or the `CreateTaskResult`."""
        if not declares_tasks(ctx):
            raise missing_tasks_extension(f"continuing the flow of tool {entry.name!r}")
        bind = request_bind(ctx.method, entry.name, raw_arguments, self.audience)
        responses = raw_input_responses(params)
        request_state = params.request_state
        if responses is not None and not (
            isinstance(responses, Mapping) and all(isinstance(k, str) for k in responses)
        ):
            raise mcp_error(InvalidInputResponse("inputResponses must be an object of answers"))
        if request_state is None:
            flow = self._start(ctx, entry, arguments, bind, responses)
        else:
            flow = self._resume(request_state, bind, responses or {})
        turn = await self._wait(ctx, flow)
        if isinstance(turn, _Asking):
            flow.handle = f"{FLOW_HANDLE_PREFIX}{secrets.token_urlsafe(24)}"
            self._by_handle[flow.handle] = flow
            return types.InputRequiredResult(
                input_requests={key: sdk_request(r) for key, r in turn.requests.items()},
                request_state=flow.handle,
            )
        if isinstance(turn, _Started):
            return turn.record.to_wire(detailed=False)
        if policy == "required":  # it never went to the background: a task born finished
            return await self._born_finished(flow.owner, turn)
        if turn.error is not None:
            raise turn.error
        assert turn.result is not None
        return turn.result

    def _start(
        self,
        ctx: ServerRequestContext[Any],
        entry: Entry,
        arguments: Mapping[str, Any],
        bind: bytes,
        responses: Mapping[str, Any] | None,
    ) -> TaskFlow:
        nursery = (
            ctx.lifespan_context.get(_NURSERY_KEY)
            if isinstance(ctx.lifespan_context, Mapping)
            else None
        )
        if not isinstance(nursery, trio.Nursery):
            raise MCPError(
                -32603,
                "tasks need the server's lifespan: serve with App.serve_http, App.serve_stdio "
                "or an ASGI server that runs lifespans",
            )
        if len(self._flows) >= self.max_flows:
            raise MCPError(
                -32603, f"the server is running {self.max_flows} task flows; retry later"
            )
        capabilities = client_capabilities(ctx)
        flow = TaskFlow(self, entry, arguments, capabilities, bind, principal(), responses)
        self._flows.add(flow)
        nursery.start_soon(flow.run, self.runtime)
        return flow

    def _resume(self, handle: str, bind: bytes, responses: Mapping[str, Any]) -> TaskFlow:
        flow = self._by_handle.get(handle)
        if flow is None or flow.bind != bind:
            raise mcp_error(InvalidRequestState("unknown, used or foreign flow handle"))
        try:
            flow.deliver(responses)  # a malformed answer raises here; the handle stays valid
        except InvalidInputResponse as error:
            raise mcp_error(error) from None
        del self._by_handle[handle]
        flow.handle = None
        return flow

    async def _wait(self, ctx: ServerRequestContext[Any], flow: TaskFlow) -> _Turn:
        flow.host.current = RequestHost(ctx)
        try:
            return await flow.next_turn()
        except BaseException:
            if flow.record is None:  # the caller went away before a task existed
                flow.cancel_scope.cancel()
            raise
        finally:
            flow.host.current = None

    async def _born_finished(self, owner: tuple[str, ...], turn: _Ended) -> dict[str, Any]:
        now = self.store.clock()
        record = TaskRecord(
            task_id=f"task-{secrets.token_urlsafe(18)}",
            status="failed" if turn.error is not None else "completed",
            created_at=now,
            updated_at=now,
            ttl=self.ttl,
            owner=owner,
            poll_interval=self.poll_interval,
            status_message=None if turn.error is None else str(turn.error),
            result=None if turn.result is None else _result_json(turn.result),
            error=None if turn.error is None else _error_json(turn.error),
        )
        try:
            await self.store.create(record)
        except TaskStoreFull as full:
            raise MCPError(-32603, str(full)) from None
        return record.to_wire(detailed=False)

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
        if record.terminal or flow is None:
            if not record.terminal:
                raise _elsewhere(record.task_id)
            return {"resultType": "complete"}
        try:
            flow.deliver(responses)
        except InvalidInputResponse as error:
            raise mcp_error(error) from None
        await flow.save()
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
            raise MCPError(METHOD_NOT_FOUND, "Method not found", method)
        task_id = (ctx.params or {}).get("taskId")
        present, header = mcp_name_header(ctx)
        if present and header != task_id:
            raise MCPError(HEADER_MISMATCH, f"the Mcp-Name header does not match {method}'s taskId")
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
        -32603,
        f"task {task_id!r} runs in another process; route tasks/* requests by their Mcp-Name "
        "header to the process that created the task",
    )
