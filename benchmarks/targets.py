"""The targets of issue 7 and the sanity checks, as data: each is read from the results and
judged the same way in every mode (the quick mode reports targets but enforces only sanity)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

__all__ = ["Verdict", "insane", "verdicts"]


@attrs.frozen
class Verdict:
    """One target: what was measured against its limit."""

    name: str
    value: float | None  # None: not measured in this run
    limit: float
    unit: str

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit

    def as_json(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "met": self.met}


def _get(results: Mapping[str, Any], *path: str) -> Any:
    node: Any = results
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def verdicts(results: Mapping[str, Any], long_answers_target: int = 1000) -> list[Verdict]:
    """Every target, in the issue's order."""
    core = results.get("core") or {}
    long_us = _get(core, "modern_long_us", "median")
    if core.get("long_answers") != long_answers_target:
        long_us = None  # the quick mode measures a shorter journal
    found = [
        Verdict(
            "modern round, 3-answer journal (CPU)",
            _get(core, "modern_3_complete_us", "median"),
            20,
            "us",
        ),
        Verdict(f"modern round, {long_answers_target}-answer journal (CPU)", long_us, 2000, "us"),
        Verdict("live round (CPU)", _get(core, "live_round_us", "median"), 10, "us"),
        Verdict(
            "memory per suspended live flow",
            _get(results, "memory", "mrtr_trio", "tracemalloc"),
            4096,
            "bytes",
        ),
        Verdict("one-answer token", _get(core, "token_chars", "answers_1"), 120, "chars"),
    ]
    for combo in ("stdio 2025-11-25", "stdio 2026-07-28", "http 2025-11-25", "http 2026-07-28"):
        found.append(Verdict(f"a/c latency, {combo}", _get(results, "e2e", combo, "a/c"), 1.0, "x"))
    for combo in ("stdio 2025-11-25", "stdio 2026-07-28", "http 2025-11-25", "http 2026-07-28"):
        limit = 0.8 if combo.endswith("2026-07-28") else 1.0
        found.append(
            Verdict(f"a/b latency, {combo}", _get(results, "e2e", combo, "a/b"), limit, "x")
        )
    return found


def _numbers(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _numbers(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}[{i}]")
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path, node


def _may_dip(path: str) -> bool:
    """A fitted slope of a flat line, and the resident set of a few flows (the allocator may
    hand back pages), can come out a little below zero on a sane run."""
    return ".slopes_us." in path or path.endswith(".rss")


def insane(results: Mapping[str, Any]) -> list[str]:
    """What is wrong with the output whatever the machine: numbers that are not finite, negative
    measurements, targets measured as zero, memory per flow below a bare task's."""
    problems = [
        f"{path} = {value!r}"
        for path, value in _numbers({k: v for k, v in results.items() if k != "meta"})
        if not math.isfinite(value) or (value < 0 and not _may_dip(path))
    ]
    for verdict in verdicts(results):
        if verdict.value is not None and verdict.value <= 0:
            problems.append(f"{verdict.name} = {verdict.value!r}")
    memory = results.get("memory")
    if memory and not memory["mrtr_trio"]["tracemalloc"] > memory["bare"]["tracemalloc"] > 0:
        problems.append(f"memory per flow is not above a bare task's: {memory}")
    return problems
