"""The tasks extension's contract beyond its records: its identifier, the per-tool `task`
policies, whether a request declared the extension, the `-32021` error for one that did not,
and the `-32000` refusal of a call past a bound on tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mcp import MCPError

from .._errors import MISSING_REQUIRED_CLIENT_CAPABILITY
from ._host import client_capabilities, is_modern
from ._sdk import ServerRequestContext

__all__ = [
    "TASKS_EXTENSION",
    "TASK_LIMIT_REACHED",
    "TASK_POLICIES",
    "TaskPolicy",
    "declares_tasks",
    "missing_tasks_extension",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TaskPolicy = Literal["forbidden", "optional", "required"]
TASK_POLICIES: tuple[str, ...] = ("forbidden", "optional", "required")


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


#: The JSON-RPC error code (implementation-defined server error) of a `tools/call` refused
#: because a bound on tasks is reached: the process's or the owner's flows, or the store.
TASK_LIMIT_REACHED = -32000


class _NoRoom(MCPError):
    """The store has no room for a new task: the `tools/call` is refused with
    `TASK_LIMIT_REACHED` naming the bound, as when the process or the owner runs its maximum
    of flows (not a tool error, and no task exists)."""
