"""The replay machine's ownership rule, checked from outside: after every driver input, each
slot of a [Replay][mrtr_trio._replay.Replay] is the flow's record or data its current phase
owns (`_replay.OWNS`); any other holds its empty value.

`conftest.py` applies `checking_every_input` to every test, so each machine any test drives
(through the machine tests, the drivers, the runtime, the MCP host) is checked after each move.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mrtr_trio import _replay
from mrtr_trio._replay import OWNS, Replay

#: The slots every phase shares: the flow's record (see Replay's docstring).
FLOW_RECORD = frozenset(
    {
        "name",
        "rules",
        "client_capabilities",
        "rounds",
        "phase",
        "_cursor",
        "_journal",
        "_recorded",
        "_singles",
        "_payload",
        "_replayable",
    }
)

#: What the drivers call: the machine's inputs.
INPUTS = (
    "next",
    "replayed",
    "ran",
    "polled",
    "answered",
    "answered_one",
    "push",
    "abandon",
    "checkpoint",
    "so_far",
)


def strays(machine: Replay) -> dict[str, Any]:
    """The data *machine* holds that its phase does not own (slot → value): none, always."""
    owned = OWNS[machine.phase]
    return {
        slot: getattr(machine, slot)
        for slot, empty in _replay._UNOWNED.items()
        if slot not in owned and getattr(machine, slot) is not empty
    }


def check(machine: Replay, after: str) -> None:
    found = strays(machine)
    assert not found, f"after {after} in phase {machine.phase!r}, data it does not own: {found}"


def _checked(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def checked(self: Replay, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            check(self, f"{name}()")

    return checked


@contextmanager
def checking_every_input(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Check every machine after each of its inputs (and once made), while in the block."""
    for name in INPUTS:
        monkeypatch.setattr(Replay, name, _checked(name, getattr(Replay, name)))
    init = Replay.__init__

    def made(self: Replay, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        check(self, "its start")

    monkeypatch.setattr(Replay, "__init__", made)
    yield
