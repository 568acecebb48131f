"""Running a test under both event loops (trio, the reference, and asyncio): see
``conftest.py``'s docstring.

A module of core tests marks itself ``pytestmark = BOTH_LOOPS``; one test can take the
``anyio_backend`` fixture instead (its value, ``"trio"`` or ``"asyncio"``, says which run this
is).
"""

from __future__ import annotations

import pytest

__all__ = ["BOTH_LOOPS", "LOOPS", "anyio_backend_of"]

LOOPS = ("trio", "asyncio")

#: Run every test of a module under both loops.
BOTH_LOOPS = pytest.mark.usefixtures("anyio_backend")


def anyio_backend_of(item: pytest.Item) -> str | None:
    """The loop a collected test runs under, when it is a both-loops test."""
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("anyio_backend")
