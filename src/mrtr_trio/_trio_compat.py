"""The one place mrtr_trio reads trio's private state.

Trio forbids a generator to suspend at a `yield` inside a cancel scope or nursery it opened,
and offers no public way to see that a task entered or left one. The drive loop needs to see
it (to turn the mistake into a clear error at once), so it compares
[scope_marks][mrtr_trio._trio_compat.scope_marks] around every resume. That reads trio's private
`Task._cancel_status`; `tests/test_trio_compat.py` fails loudly, naming this module, if a trio
release renames it or changes what it means.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["OFF_TRIO", "current_task", "scope_marks"]

#: `scope_marks(task)`: what changes exactly when code running in *task* enters or leaves a
#: cancel scope or a nursery (which opens a cancel scope of its own): the task's cancel status.
#: (An attribute getter, not a function: the drive reads it after every resume.)
scope_marks: Callable[[trio.lowlevel.Task], object] = operator.attrgetter("_cancel_status")

#: The task a drive outside trio stands for: it has no scopes to guard and no rounds to time.
OFF_TRIO: Any = types.SimpleNamespace(_cancel_status=None)


def current_task() -> Any:
    """The trio task running the caller, or [OFF_TRIO][mrtr_trio._trio_compat.OFF_TRIO] when
    trio is not running it."""
    try:
        return trio.lowlevel.current_task()
    except RuntimeError:
        return OFF_TRIO
