"""One task-capable tool call, run in the background: the round of its flow in the server's
task nursery, what the waiting request answers (a client turn, the created task, or the end),
the [background()][mrtr_trio.mcp.background] marker at which the call becomes a task, and,
from then on, the task's client turns (`inputRequests`, answered by `tasks/update`), its
cancellation and its record's writes.

The handler's own outcome decides the task's: a value or a tool error (anything but a protocol
error) ends `completed` with the `CallToolResult` a synchronous call would have returned;
a protocol error (`-32602`, `-32021`) ends `failed` with that JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import mcp_types as types
import trio
from mcp import MCPError

from .._errors import INTERNAL_ERROR
from .._flow import Step, step
from .._modern import InputRequired
from .._replay import Suspend, check_answer
from .._values import Request
from ._host import RequestHost, client_capabilities, principal
from ._log import flow_failure
from ._registry import Entry
from ._sdk import ServerRequestContext
from ._taskextension import _NoRoom
from ._taskstore import TaskRecord, TaskStatus
from ._wire import error_result, tool_result

if TYPE_CHECKING:
    from ._tasks import Tasks

__all__ = ["TaskFlow", "background"]

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


# ------------------------------------------------------------- what the request answers


@attrs.frozen
class _Asking:
    """Before the task: the round ended with a client turn."""

    outcome: InputRequired


@attrs.frozen
class _TaskCreated:
    """The flow yielded `background()`: this task now carries it."""

    record: TaskRecord


@attrs.frozen
class _Ended:
    """The flow finished before becoming a task: *result*, or the protocol *error*."""

    result: types.CallToolResult | None
    error: MCPError | None


_Answer: TypeAlias = _Asking | _TaskCreated | _Ended


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
        record = await tasks._create(self.owner, self.entry.scopes, status="working")
        self.record = record
        tasks._by_task[record.task_id] = self
        if tasks.ttl is not None:
            self.cancel_scope.deadline = trio.current_time() + tasks.ttl
        self.host.current = None
        self._answer(_TaskCreated(record))

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
