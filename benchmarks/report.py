"""Turning results into tables: the same tables printed as text and written as Markdown into
``docs/benchmarks.md`` (between markers, so the prose around them stays hand-written)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .targets import Verdict

__all__ = ["Table", "replace_block", "tables"]


@attrs.frozen
class Table:
    title: str
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]

    def text(self) -> str:
        cells = [list(self.headers), *[list(r) for r in self.rows]]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.headers))]
        lines = [self.title, "-" * len(self.title)]
        for n, row in enumerate(cells):
            lines.append(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.headers) + " |"]
        lines.append("|" + "|".join("---" for _ in self.headers) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


def _us(stats: Mapping[str, float] | None) -> str:
    if stats is None:
        return "-"
    return f"{_num(stats['median'])} µs ({_num(stats['p10'])}-{_num(stats['p90'])})"


def _num(value: float) -> str:
    if isinstance(value, int) or value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio(stats: Mapping[str, float]) -> str:
    return f"{stats['median']:.2f}x ({stats['p10']:.2f}-{stats['p90']:.2f})"


def _core(core: Mapping[str, Any]) -> Table:
    n = core["long_answers"]
    tokens = core["token_chars"]
    rows = [
        ["modern round, 3-answer journal: replay 3, answer, complete", _us(core["modern_3_us"])],
        ["its floor (`benchmarks.floor`), measured side by side", _us(core["modern_3_floor_us"])],
        ["the round against its floor", _ratio(core["modern_3_ratio"])],
        [
            "modern round, 3-answer journal: replay 2, answer, checkpoint 3",
            _us(core["modern_3_checkpoint_us"]),
        ],
        [
            f"modern round, {n}-answer journal: replay {n}, answer, complete",
            _us(core["modern_long_us"]),
        ],
        ["its floor, measured side by side", _us(core["modern_long_floor_us"])],
        ["the round against its floor", _ratio(core["modern_long_ratio"])],
        [
            f"cost per replayed entry ({n}-answer round / {n})",
            f"{_num(core['modern_long_us']['median'] / n)} µs",
        ],
        ["live round (4-question trip, per round, setup included)", _us(core["live_us"])],
        [
            "its floor (the bare trip through the same handler), measured side by side",
            _us(core["live_floor_us"]),
        ],
        ["the round against its floor", _ratio(core["live_ratio"])],
        [
            "a bare async generator's trip (no handler, no checks; for reference)",
            _us(core["live_bare_trip_us"]),
        ],
        [
            "live round, an ask that waits once (4-question trip, per round, setup included)",
            _us(core["live_waiting_us"]),
        ],
        ["live round (100-question survey, per round)", _us(core["live_survey_us"])],
        [
            "trip `requestState` after 0 / 1 / 2 answers",
            f"{tokens['answers_0']} / {tokens['answers_1']} / {tokens['answers_2']} chars",
        ],
    ]
    return Table("Core: CPU per call, median (p10-p90)", ["measure", "value"], rows)


def _memory(memory: Mapping[str, Any]) -> Table:
    def kib(value: float) -> str:
        return f"{value / 1024:.2f} KiB"

    rows = [
        [label, kib(memory[kind]["tracemalloc"]), kib(memory[kind]["rss"])]
        for kind, label in (
            ("mrtr_trio", "`run_live` flow suspended in `ask` (trio task included)"),
            ("bare", "bare trio task + suspended async generator"),
        )
    ]
    return Table(
        f"Memory per suspended flow, {memory['flows']:,} flows",
        ["flow", "Python heap (tracemalloc)", "RSS growth"],
        rows,
    )


def _e2e(e2e: Mapping[str, Any]) -> list[Table]:
    names = ("mrtr_trio", "sdk-resolve", "sdk-handbuilt")
    latency, cpu, state = [], [], []
    for combo, result in e2e.items():
        medians = [f"{result['latency_ms'][n]['median']:.2f}" for n in names]
        runs = result["runs"]
        latency.append(
            [
                combo,
                *medians,
                f"{result['a/c']:.3f}",
                f"{result['a/b']:.3f}",
                " / ".join(f"{r['a/c']:.3f}" for r in runs),
                " / ".join(f"{r['a/b']:.3f}" for r in runs),
                f"{result['a/c of medians']:.3f} / {result['a/b of medians']:.3f}",
                f"{len(runs)} x {result['iterations'] // len(runs)}",
            ]
        )
        cpu.append([combo, *(f"{result['server_cpu_ms_per_leg'][n]:.2f}" for n in names)])
        if result["state_chars"]:
            state.append(
                [combo, *(" / ".join(map(str, result["state_chars"][n][1:3])) for n in names)]
            )
    return [
        Table(
            "End to end: the 3-question trip, wall-clock latency per flow (median ms, all runs) "
            "and the ratios (the median of the runs' own, each the median of its per-iteration "
            "ratios); a = mrtr_trio, b = sdk-resolve, c = sdk-handbuilt",
            [
                "transport, era",
                "a",
                "b",
                "c",
                "a/c",
                "a/b",
                "a/c per run",
                "a/b per run",
                "ratios of medians",
                "runs x flows",
            ],
            latency,
        ),
        Table(
            "End to end: server CPU per leg (ms; 4 legs per flow)",
            ["transport, era", *names],
            cpu,
        ),
        Table(
            "End to end: `requestState` characters after 1 / 2 answers",
            ["transport, era", *names],
            state,
        ),
    ]


def _load(load: Mapping[str, Any]) -> Table:
    rows = []
    for era, result in load.items():
        before = result["rss_before_mib"]
        blocks_before = result.get("blocks_before")
        for k, burst in enumerate(result["bursts"], 1):
            blocks = burst.get("blocks_after")
            live = "-"
            if blocks is not None and blocks_before:
                live = f"{blocks:,} ({(blocks / blocks_before - 1) * 100:+.1f}%)"
            errors = ", ".join(
                f"{kind} x{n}" for kind, n in sorted(burst["errors_by_kind"].items())
            )
            rows.append(
                [
                    era,
                    str(k),
                    f"{burst['completed']:,}",
                    errors or "0",
                    f"{burst['p50_ms']:,.0f}",
                    f"{burst['p99_ms']:,.0f}",
                    f"{burst['wall_s']:.1f}",
                    f"{burst['rss_peak_mib']:.1f}",
                    f"{burst['rss_after_mib']:.1f}",
                    f"{(burst['rss_after_mib'] / before - 1) * 100:+.1f}%",
                    live,
                ]
            )
            before, blocks_before = burst["rss_after_mib"], blocks
    first = next(iter(load.values()))
    return Table(
        f"Load: bursts of {first['flows']:,} simultaneous flows per era, one server each era, "
        f"HTTP on loopback, default settings (RSS read after {first['settle_s']:g} s idle)",
        [
            "era",
            "burst",
            "completed",
            "errors",
            "p50 ms",
            "p99 ms",
            "wall s",
            "RSS peak MiB",
            "RSS after MiB",
            "after vs the step before",
            "live Python allocations after (vs the step before)",
        ],
        rows,
    )


def _journal(journal: Mapping[str, Any]) -> Table:
    lines = journal["lines"]
    lengths = journal["lengths"]
    rows = []
    for n in lengths:
        row = [str(n)]
        for line in lines.values():
            stats = line.get(str(n))
            row.append("-" if stats is None else _num(stats["median"]))
        rows.append(row)
    rows.append(["per entry (fit)", *(f"{_num(s)}" for s in journal["slopes_us"].values())])
    return Table(
        "Modern round CPU (µs, median) against journal length: replay n, answer, checkpoint n+1",
        ["n", *lines],
        rows,
    )


def _auth(auth: Mapping[str, Any]) -> Table:
    rows = [
        [
            era,
            f"{row['plain_ms_per_leg']:.3f}",
            f"{row['auth_ms_per_leg']:.3f}",
            f"{row['auth/plain']:.3f}",
            " ".join(f"{r:.3f}" for r in row["runs"]),
        ]
        for era, row in auth.items()
    ]
    return Table(
        "Auth: server CPU per leg (ms, median of runs) of the same App over HTTP without and "
        "with `Auth` (a JWT verified once, then cached), flows interleaved",
        ["era", "plain", "auth", "auth/plain", "runs"],
        rows,
    )


def _targets(verdicts: Sequence[Verdict], enforced: bool) -> Table:
    def status(v: Verdict) -> str:
        if v.met is None:
            return "not measured"
        word = "met" if v.met else "MISSED"
        return word if enforced else f"{word} (not enforced)"

    def value(v: Verdict) -> str:
        if v.value is None:
            return "-"
        figure = f"{v.value:.2f}" if v.unit in ("x", "%") else _num(v.value)
        return f"{figure} {v.unit}"

    rows = [
        [v.name, value(v), f"≤ {v.limit:g} {v.unit}", v.detail or "-", status(v)] for v in verdicts
    ]
    return Table("Targets (issue 19)", ["target", "measured", "limit", "from", "status"], rows)


def tables(results: Mapping[str, Any], verdicts: Sequence[Verdict], enforced: bool) -> list[Table]:
    """Every table the results allow, targets last."""
    found: list[Table] = []
    if "core" in results:
        found.append(_core(results["core"]))
    if "memory" in results:
        found.append(_memory(results["memory"]))
    if "journal" in results:
        found.append(_journal(results["journal"]))
    if "e2e" in results:
        found += _e2e(results["e2e"])
    if results.get("load"):
        found.append(_load(results["load"]))
    if results.get("auth"):
        found.append(_auth(results["auth"]))
    found.append(_targets(verdicts, enforced))
    return found


def replace_block(path: Path, name: str, content: str) -> None:
    """Replace what lies between ``<!-- name:start -->`` and ``<!-- name:end -->`` in *path*."""
    text = path.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{path} has no {start} ... {end} block")
    path.write_text(pattern.sub(lambda _: f"{start}\n{content}\n{end}", text))
