"""Where tasks live: the [TaskRecord][mrtr_trio.mcp.TaskRecord] a client polls, the
[TaskStore][mrtr_trio.mcp.TaskStore] protocol, and the bounded, expiring
[MemoryTaskStore][mrtr_trio.mcp.MemoryTaskStore].

A record is what `tasks/get` returns, as data: status, timestamps, time to live, the
outstanding input requests, and the inlined result or error. The process that runs a task's
handler is its only writer; every write carries a higher `revision`. A store shared by several
processes (Redis, a database) lets any of them answer `tasks/get`; `tasks/update` and
`tasks/cancel` must still reach the process that runs the handler (route on the `Mcp-Name`
header, which carries the task id).
"""

from __future__ import annotations

import datetime
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, get_args

import attrs

from .._util import check_count

__all__ = [
    "MemoryTaskStore",
    "TERMINAL_STATUSES",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TaskStoreFull",
]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
#: Once a task reaches one of these, its record never changes again.
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class TaskStoreFull(Exception):
    """The store holds its maximum number of unexpired tasks, in all or for the task's owner;
    no new task can start until some expire. The message names the bound."""


@attrs.frozen
class TaskRecord:
    """One task as its clients see it (all times in seconds since the epoch).

    - *owner*: the authenticated principal that created it (`()` when unauthenticated);
      only the same principal may read, answer or cancel it;
    - *scopes*: the scopes its tool needed when it was created (`@app.tool(scopes=...)`); a
      token must still hold them to read, answer or cancel it;
    - *input_requests*: wire key → embedded request JSON (`{"method", "params"}`), the asks
      still outstanding while the status is `input_required`;
    - *result*: the inlined `CallToolResult` JSON of a `completed` task;
    - *error*: the JSON-RPC error (`{"code", "message"[, "data"]}`) of a `failed` task;
    - *revision*: bumped on every write, so a shared store can keep the newest.
    """

    task_id: str
    status: TaskStatus
    created_at: float
    updated_at: float
    ttl: float | None
    owner: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    poll_interval: float | None = None
    status_message: str | None = None
    input_requests: Mapping[str, Any] = attrs.field(factory=dict)
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    revision: int = 0

    @property
    def terminal(self) -> bool:
        """Whether the task has finished (completed, failed or cancelled)."""
        return self.status in TERMINAL_STATUSES

    @property
    def expires_at(self) -> float:
        """When the record may be purged (`inf` for an unlimited time to live)."""
        return math.inf if self.ttl is None else self.created_at + self.ttl

    def evolve(self, at: float, **changes: Any) -> TaskRecord:
        """A newer revision of this record, updated at *at*."""
        return attrs.evolve(self, updated_at=at, revision=self.revision + 1, **changes)

    def to_json(self) -> dict[str, Any]:
        """The whole record as a JSON-able dict (every field, under its attribute name), for
        a store that keeps records outside the process;
        [from_json][mrtr_trio.mcp.TaskRecord.from_json] reads it back."""
        data = attrs.asdict(self, recurse=False)
        data["owner"] = list(self.owner)
        data["scopes"] = list(self.scopes)
        data["input_requests"] = dict(self.input_requests)
        for name in ("result", "error"):
            if data[name] is not None:
                data[name] = dict(data[name])
        return data

    @classmethod
    def from_json(cls, data: Any) -> TaskRecord:
        """The record [to_json][mrtr_trio.mcp.TaskRecord.to_json] made; `ValueError` saying
        what is wrong when *data* is not one."""
        if not isinstance(data, dict) or set(data) != _FIELDS:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"a task record has the fields {sorted(_FIELDS)}, got {got}")
        problems = [name for name, valid in _VALID.items() if not valid(data[name])]
        if problems:
            raise ValueError(f"a task record with invalid {', '.join(problems)}")
        return cls(**{**data, "owner": tuple(data["owner"]), "scopes": tuple(data["scopes"])})

    def to_wire(self, *, detailed: bool) -> dict[str, Any]:
        """The task as JSON: a `CreateTaskResult` (`detailed=False`: flat,
        `resultType: "task"`, no result, error or requests) or a `tasks/get` result
        (`detailed=True`: `resultType: "complete"` with the status's extra field inlined).
        `ttlMs` is always present (`null` when unlimited); `requestState` never is."""
        wire: dict[str, Any] = {
            "resultType": "complete" if detailed else "task",
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.updated_at),
            "ttlMs": None if self.ttl is None else max(1, round(self.ttl * 1000)),
        }
        if self.poll_interval is not None:
            wire["pollIntervalMs"] = max(1, round(self.poll_interval * 1000))
        if self.status_message is not None:
            wire["statusMessage"] = self.status_message
        if detailed:
            if self.status == "input_required":
                wire["inputRequests"] = dict(self.input_requests)
            elif self.status == "completed" and self.result is not None:
                wire["result"] = dict(self.result)
            elif self.status == "failed" and self.error is not None:
                wire["error"] = dict(self.error)
        return wire


_FIELDS = frozenset(field.name for field in attrs.fields(TaskRecord))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _object(value: Any) -> bool:
    return isinstance(value, dict)


# What each field of a record's JSON form may hold.
_VALID: dict[str, Callable[[Any], bool]] = {
    "task_id": _text,
    "status": lambda value: value in get_args(TaskStatus),
    "created_at": _number,
    "updated_at": _number,
    "ttl": _optional(_number),
    "owner": lambda value: isinstance(value, list) and all(map(_text, value)),
    "scopes": lambda value: isinstance(value, list) and all(map(_text, value)),
    "poll_interval": _optional(_number),
    "status_message": _optional(_text),
    "input_requests": _object,
    "result": _optional(_object),
    "error": _optional(_object),
    "revision": lambda value: isinstance(value, int) and not isinstance(value, bool),
}


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskStore(Protocol):
    """Where task records are kept. Every method is async so a shared store can follow.

    A store never returns a record past its `expires_at`; it may purge such records at any
    time. Writes for one task come from one process, in `revision` order. `clock` gives
    seconds since the epoch; records are stamped and expired by it.
    """

    clock: Callable[[], float]

    async def create(self, record: TaskRecord) -> None:
        """Add a new task; [TaskStoreFull][mrtr_trio.mcp.TaskStoreFull] when no room can be made."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task's current record, or `None` when unknown or expired."""

    async def put(self, record: TaskRecord) -> None:
        """Replace the task's record with this newer revision (ignored if it is gone)."""

    async def delete(self, task_id: str) -> None:
        """Forget the task."""


class MemoryTaskStore:
    """Task records in this process's memory: bounded and expiring.

    A record stays readable until its time to live has passed, never dropped sooner. At most
    *max_tasks* unexpired records are kept, and at most *max_tasks_per_owner* of one
    authenticated owner (`None`: no per-owner bound; unauthenticated tasks, whose owner is
    `()`, share *max_tasks* only). When a bound is reached, expired records are purged; if
    that makes no room, creating another task raises
    [TaskStoreFull][mrtr_trio.mcp.TaskStoreFull] naming the bound. *clock* gives seconds
    since the epoch (for tests).
    """

    def __init__(
        self,
        max_tasks: int = 10_000,
        *,
        max_tasks_per_owner: int | None = 1_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_tasks = check_count("max_tasks", max_tasks)
        self.max_tasks_per_owner = (
            None
            if max_tasks_per_owner is None
            else check_count("max_tasks_per_owner", max_tasks_per_owner)
        )
        self.clock = clock
        self._records: dict[str, TaskRecord] = {}
        self._owned: Counter[tuple[str, ...]] = Counter()

    def __len__(self) -> int:
        return len(self._records)

    async def create(self, record: TaskRecord) -> None:
        if record.task_id in self._records:
            raise ValueError(f"task {record.task_id!r} exists already")
        if self._full(record.owner):
            self._purge_expired()
            if len(self._records) >= self.max_tasks:
                raise TaskStoreFull(
                    f"the task store holds max_tasks={self.max_tasks} tasks that have not "
                    "expired; retry once some have (or lower the tasks' ttl)"
                )
            if self._full(record.owner):
                raise TaskStoreFull(
                    f"this client holds max_tasks_per_owner={self.max_tasks_per_owner} tasks "
                    "that have not expired; retry once some have (or lower the tasks' ttl)"
                )
        self._records[record.task_id] = record
        self._owned[record.owner] += 1

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and self.clock() >= record.expires_at:
            await self.delete(task_id)
            return None
        return record

    async def put(self, record: TaskRecord) -> None:
        current = self._records.get(record.task_id)
        if current is not None and record.revision > current.revision:
            self._records[record.task_id] = record

    async def delete(self, task_id: str) -> None:
        record = self._records.pop(task_id, None)
        if record is not None:
            self._owned[record.owner] -= 1
            if not self._owned[record.owner]:
                del self._owned[record.owner]

    def _full(self, owner: tuple[str, ...]) -> bool:
        return len(self._records) >= self.max_tasks or (
            bool(owner)
            and self.max_tasks_per_owner is not None
            and self._owned[owner] >= self.max_tasks_per_owner
        )

    def _purge_expired(self) -> None:
        now = self.clock()
        for task_id in [t for t, r in self._records.items() if now >= r.expires_at]:
            record = self._records.pop(task_id)
            self._owned[record.owner] -= 1
            if not self._owned[record.owner]:
                del self._owned[record.owner]
