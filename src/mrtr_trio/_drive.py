"""What the live and the replay drivers share: stepping a flow under trio's rules, running
``step`` functions, and checking an ask before it goes to the client.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import trio

from ._errors import MissingCapability, MrtrError, RoundLimitExceeded
from ._flow import Flow, Need, RunStep, normalise_step_value
from ._values import Request, missing_capabilities

__all__ = ["Settings", "check_capabilities", "check_round_budget", "resume", "run_step"]


@attrs.frozen
class Settings:
    """The knobs of a :class:`~mrtr_trio.Runtime` that the drivers read."""

    max_rounds: int
    round_timeout: float
    legacy_shim: bool
    state_only_pacing: float
    replay: str


async def resume(flow: Flow, value: Any, *, first: bool = False) -> Need:
    """Start or resume *flow* and return its next need.

    A handler must not suspend at a ``yield`` inside a cancel scope or nursery it opened: trio
    forbids it and may corrupt its own state later. The cancel status of the running task is
    compared across the step, and a change raises a clear :class:`MrtrError` at once.
    """
    try:
        task = trio.lowlevel.current_task()
    except RuntimeError:  # not under trio: nothing to guard
        return await (flow.start() if first else flow.resume(value))
    status, nurseries = _scope_marks(task)
    need = await (flow.start() if first else flow.resume(value))
    if _scope_marks(task) != (status, nurseries):
        raise MrtrError(
            f"{flow.name} yielded inside a cancel scope or nursery it opened (such as `with "
            "trio.move_on_after(...)` or `async with trio.open_nursery()` around a yield). "
            "Trio forbids suspending a generator there: close the scope before yielding, or "
            "move the timed work into step(fn)."
        )
    return need


def _scope_marks(task: trio.lowlevel.Task) -> tuple[object, int]:
    # Task._cancel_status is private; the nursery count is public. Both change exactly when a
    # generator leaves a scope it entered on the task's stack.
    return getattr(task, "_cancel_status", None), len(task.child_nurseries)


async def run_step(need: RunStep) -> Any:
    """Call the step function (awaiting an awaitable result) and return its recordable value."""
    value = need.fn(*need.args)
    if inspect.isawaitable(value):
        value = await value
    return normalise_step_value(need, value)


def check_capabilities(
    name: str, requests: Iterable[Request], client_capabilities: Mapping[str, Any] | None
) -> None:
    """Raise :class:`MissingCapability` if the client did not declare what *requests* need."""
    missing = missing_capabilities(requests, client_capabilities)
    if missing:
        raise MissingCapability(
            f"{name} needs client capabilities the client did not declare: {missing}",
            missing,
        )


def check_round_budget(name: str, rounds_done: int, settings: Settings) -> None:
    """Raise :class:`RoundLimitExceeded` if another round trip would exceed ``max_rounds``."""
    if rounds_done >= settings.max_rounds:
        raise RoundLimitExceeded(
            f"{name} still required input after {settings.max_rounds} rounds "
            f"(max_rounds={settings.max_rounds})"
        )
