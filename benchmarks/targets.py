"""The benchmark targets (issue 19) and the sanity checks, as data: each target is read from
the results and judged the same way in every mode (the quick mode reports targets but enforces
only sanity).

Every timed target is a ratio of two things measured in the same run, side by side, so that a
host that runs slower (another process, a cooler clock) slows both and the ratio holds: a round
against its floor (the work no runtime can skip, `benchmarks.floor`), batch for batch; a
suspended flow's memory against a bare trio task's; mrtr_trio's end-to-end latency against the
SDK servers', flow for flow. The load run's targets compare a burst with the burst before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

__all__ = [
    "AB_LEGACY",
    "AB_MODERN",
    "AC",
    "AUTH_RATIO",
    "BURST_GROWTH_PERCENT",
    "LIVE_RATIO",
    "LONG_RATIO",
    "MEMORY_RATIO",
    "MODERN_RATIO",
    "TOKEN_CHARS",
    "Verdict",
    "insane",
    "verdicts",
]

#: The 3-answer modern round against `benchmarks.floor`'s bare round.
MODERN_RATIO = 2.5
#: Measured ratios of issue 19's change (medians of several runs, docs/benchmarks.md) ...
LONG_RATIO_MEASURED = 1.60
LIVE_RATIO_MEASURED = 4.85
#: ... and the targets: each may grow by no more than 10%.
LONG_RATIO = round(LONG_RATIO_MEASURED * 1.10, 2)
LIVE_RATIO = round(LIVE_RATIO_MEASURED * 1.10, 2)
#: A suspended live flow's Python heap against a bare trio task with a suspended generator.
MEMORY_RATIO = 1.8
#: The trip's `requestState` after one answer (a size: the same on every machine).
TOKEN_CHARS = 120
#: End to end, latency ratios: a = mrtr_trio, b = sdk-resolve, c = sdk-handbuilt.
AC = 1.05
AB_MODERN = 0.85
AB_LEGACY = 1.0
#: Server CPU per leg of the same App behind `Auth` against it without (issue 17).
AUTH_RATIO = 1.05
#: The load run: RSS a burst may add to the resident set after the burst before it.
BURST_GROWTH_PERCENT = 5.0

E2E_COMBOS = ("stdio 2025-11-25", "stdio 2026-07-28", "http 2025-11-25", "http 2026-07-28")
LOAD_ERAS = ("legacy", "modern")
AUTH_ERAS = ("2025-11-25", "2026-07-28")


@attrs.frozen
class Verdict:
    """One target: what was measured against its limit (met when ``value <= limit``)."""

    name: str
    value: float | None  # None: not measured in this run
    limit: float
    unit: str
    detail: str = ""  # what the value was computed from, for the tables
    positive: bool = True  # a sane measurement is above zero

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


def _against_floor(name: str, core: Mapping[str, Any], key: str, limit: float) -> Verdict:
    """*key*'s paired ratio to its floor (``{key}_ratio``, over ``{key}_us`` and
    ``{key}_floor_us``)."""
    ratio = _get(core, f"{key}_ratio", "median")
    real, floor = _get(core, f"{key}_us", "median"), _get(core, f"{key}_floor_us", "median")
    detail = "" if real is None or floor is None else f"{real:.3g} µs against {floor:.3g} µs"
    return Verdict(name, ratio, limit, "x", detail)


def _core(core: Mapping[str, Any], long_answers_target: int) -> list[Verdict]:
    long_target = _against_floor(
        f"modern round, {long_answers_target}-answer journal, against its floor (CPU)",
        core,
        "modern_long",
        LONG_RATIO,
    )
    if core.get("long_answers") != long_answers_target:
        long_target = attrs.evolve(long_target, value=None, detail="")  # quick: a shorter one
    return [
        _against_floor(
            "modern round, 3-answer journal, against its floor (CPU)",
            core,
            "modern_3",
            MODERN_RATIO,
        ),
        long_target,
        _against_floor("live round, against its floor (CPU)", core, "live", LIVE_RATIO),
    ]


def _memory(results: Mapping[str, Any]) -> Verdict:
    flow = _get(results, "memory", "mrtr_trio", "tracemalloc")
    bare = _get(results, "memory", "bare", "tracemalloc")
    ratio = None if flow is None or not bare else flow / bare
    detail = "" if ratio is None else f"{flow:,.0f} B against {bare:,.0f} B"
    return Verdict(
        "suspended live flow, against a bare task (memory)", ratio, MEMORY_RATIO, "x", detail
    )


def _e2e(results: Mapping[str, Any]) -> list[Verdict]:
    found = []
    for combo in E2E_COMBOS:
        found.append(Verdict(f"a/c latency, {combo}", _get(results, "e2e", combo, "a/c"), AC, "x"))
    for combo in E2E_COMBOS:
        limit = AB_MODERN if combo.endswith("2026-07-28") else AB_LEGACY
        ab = _get(results, "e2e", combo, "a/b")
        found.append(Verdict(f"a/b latency, {combo}", ab, limit, "x"))
    return found


def _load(results: Mapping[str, Any]) -> list[Verdict]:
    found = []
    for era in LOAD_ERAS:
        bursts = _get(results, "load", era, "bursts")
        flows = _get(results, "load", era, "flows")
        for k in (2, 3):
            growth = detail = None
            if bursts is not None and len(bursts) >= k:
                before, after = bursts[k - 2]["rss_after_mib"], bursts[k - 1]["rss_after_mib"]
                growth = (after / before - 1) * 100
                detail = f"{before:.1f} MiB to {after:.1f} MiB"
            found.append(
                Verdict(
                    f"load {era}: RSS added by burst {k} of {flows or '-'} flows",
                    growth,
                    BURST_GROWTH_PERCENT,
                    "%",
                    detail or "",
                    positive=False,
                )
            )
        errors = None if bursts is None else sum(b["errors"] for b in bursts)
        found.append(Verdict(f"load {era}: errors", errors, 0, "errors", positive=False))
    return found


def _auth(results: Mapping[str, Any]) -> list[Verdict]:
    found = []
    for era in AUTH_ERAS:
        ratio = _get(results, "auth", era, "auth/plain")
        plain, authed = (_get(results, "auth", era, f"{k}_ms_per_leg") for k in ("plain", "auth"))
        detail = "" if ratio is None else f"{authed:.3g} ms against {plain:.3g} ms per leg"
        found.append(Verdict(f"auth/plain server CPU, http {era}", ratio, AUTH_RATIO, "x", detail))
    return found


def verdicts(results: Mapping[str, Any], long_answers_target: int = 1000) -> list[Verdict]:
    """Every target, in the issue's order."""
    return [
        *_core(results.get("core") or {}, long_answers_target),
        _memory(results),
        Verdict(
            "one-answer token",
            _get(results, "core", "token_chars", "answers_1"),
            TOKEN_CHARS,
            "chars",
        ),
        *_e2e(results),
        *_load(results),
        *_auth(results),
    ]


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
    measurements, targets measured as zero, memory per flow below a bare task's, load bursts
    whose flows do not add up."""
    problems = [
        f"{path} = {value!r}"
        # (the verdicts, once added to the results, are judged below, not as measurements)
        for path, value in _numbers(
            {k: v for k, v in results.items() if k not in ("meta", "targets")}
        )
        if not math.isfinite(value) or (value < 0 and not _may_dip(path))
    ]
    for verdict in verdicts(results):
        if verdict.positive and verdict.value is not None and verdict.value <= 0:
            problems.append(f"{verdict.name} = {verdict.value!r}")
    memory = results.get("memory")
    if memory and not memory["mrtr_trio"]["tracemalloc"] > memory["bare"]["tracemalloc"] > 0:
        problems.append(f"memory per flow is not above a bare task's: {memory}")
    for era, load in (results.get("load") or {}).items():
        for k, burst in enumerate(load["bursts"], 1):
            if burst["completed"] + burst["errors"] != load["flows"]:
                problems.append(f"load {era} burst {k}: {burst} does not add up to {load['flows']}")
    return problems
