"""Answer functions whose answers do not depend on call order.

An [AnswerScript][mrtr_trio.testing.AnswerScript] decides each answer from the request's key, the
request itself (its wire form) and how many times that same keyed request was asked before in the
run. The live driver fans a batch out concurrently, so the order in which it calls `answer` is not
fixed; a script keyed this way still gives both eras the same answers, because each era meets the
same `(key, request, occurrence)` triples, whatever order they come in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .._values import Request, canonical_wire

__all__ = ["AnswerScript", "Restartable", "restart_answer"]


@runtime_checkable
class Restartable(Protocol):
    """An answer function with per-run state: the runners call `restart` before each
    run, so that every run sees the same answers."""

    def restart(self) -> None:
        """Forget what this run asked (but not the answers already decided)."""


def restart_answer(answer: object) -> None:
    """Restart *answer* if it keeps per-run state (see `Restartable`)."""
    if isinstance(answer, Restartable):
        answer.restart()


class AnswerScript:
    """An `answer(key, request)` function that answers each distinct question once and for
    all.

    *choose(key, request, occurrence)* (sync) decides the answer the first time a keyed request is
    met; `occurrence` counts earlier askings of the same key with the same wire form in this
    run (0 the first time), so a loop that asks the same question again can get a different
    answer. The decision is remembered, so a second run (the other era, or a replay check)
    that asks the same questions gets the same answers, in whatever order it asks them.

    The runners in [mrtr_trio.testing][] call `restart` at the start of each run.
    Scripts drawn by [mrtr_trio.testing.strategies.answer_functions][] decide with
    hypothesis.
    """

    def __init__(self, choose: Callable[[str, Request, int], Any]) -> None:
        self._choose = choose
        self._decided: dict[tuple[str, str, int], Any] = {}
        self._seen: dict[tuple[str, str], int] = {}

    def __call__(self, key: str, request: Request) -> Any:
        text = canonical_wire(request)
        occurrence = self._seen.get((key, text), 0)
        self._seen[key, text] = occurrence + 1
        slot = (key, text, occurrence)
        if slot not in self._decided:
            self._decided[slot] = self._choose(key, request, occurrence)
        return self._decided[slot]

    def restart(self) -> None:
        """Start a new run: occurrences count from 0 again; decided answers are kept."""
        self._seen.clear()

    @property
    def decided(self) -> dict[tuple[str, str, int], Any]:
        """The answers decided so far: `(key, request wire JSON, occurrence)` → answer."""
        return dict(self._decided)

    def __repr__(self) -> str:
        return f"<AnswerScript: {len(self._decided)} answer(s) decided>"
