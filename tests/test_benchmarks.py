"""The benchmark suite's judgement, without running a benchmark: which targets a result misses,
what counts as insane output, and the docs block it rewrites. (The benchmarks themselves run in
``.ci/run``'s quick mode; performance is never asserted here.)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks._timing import Stats
from benchmarks.report import replace_block
from benchmarks.targets import insane, verdicts


def stats(median: float) -> dict[str, float]:
    return {"median": median, "p10": median * 0.9, "p90": median * 1.1, "samples": 10}


def results(**changes: Any) -> dict[str, Any]:
    """A run that meets every target; *changes* patch it."""
    combo = {"a/c": 0.9, "a/b": 0.7}
    found: dict[str, Any] = {
        "core": {
            "modern_3_complete_us": stats(15.0),
            "long_answers": 1000,
            "modern_long_us": stats(1500.0),
            "live_round_us": stats(8.0),
            "token_chars": {"answers_0": 60, "answers_1": 90, "answers_2": 120},
        },
        "memory": {
            "flows": 10,
            "mrtr_trio": {"tracemalloc": 3000.0},
            "bare": {"tracemalloc": 2500.0},
        },
        "e2e": {
            f"{transport} {era}": dict(combo)
            for transport in ("stdio", "http")
            for era in ("2025-11-25", "2026-07-28")
        },
    }
    for path, value in changes.items():
        node = found
        *parents, leaf = path.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return found


def missed(found: dict[str, Any]) -> list[str]:
    return [v.name for v in verdicts(found) if v.met is False]


def test_a_run_within_every_target_misses_none() -> None:
    assert missed(results()) == []
    assert all(v.met for v in verdicts(results()))


def test_each_missed_target_is_named() -> None:
    found = results(core__modern_3_complete_us=stats(128.0), core__live_round_us=stats(50.0))
    assert missed(found) == ["modern round, 3-answer journal (CPU)", "live round (CPU)"]


def test_ab_on_the_modern_era_must_beat_the_sdk_by_a_fifth() -> None:
    e2e = results()["e2e"]
    e2e["http 2026-07-28"]["a/b"] = 0.85  # over 0.8
    e2e["http 2025-11-25"]["a/b"] = 0.95  # legacy allows up to 1.0
    assert missed(results(e2e=e2e)) == ["a/b latency, http 2026-07-28"]


def test_a_shorter_journal_than_the_targets_is_not_judged() -> None:
    found = results(core__long_answers=30, core__modern_long_us=stats(5000.0))
    [long] = [v for v in verdicts(found) if "answer journal" in v.name and "3-" not in v.name]
    assert long.value is None and long.met is None


def test_sections_not_run_are_not_measured() -> None:
    found = verdicts({"core": results()["core"]})
    assert [v.met for v in found if v.name.startswith("a/")] == [None] * 8


def test_sane_output_passes_and_insane_output_is_named() -> None:
    assert insane(results()) == []
    bad = results(core__modern_3_complete_us=stats(math.nan))
    assert any("modern_3_complete_us.median" in problem for problem in insane(bad))
    zero = results(core__token_chars={"answers_0": 0, "answers_1": 0, "answers_2": 0})
    assert any("one-answer token" in problem for problem in insane(zero))
    lean = results(
        memory={"flows": 10, "mrtr_trio": {"tracemalloc": 1.0}, "bare": {"tracemalloc": 2.0}}
    )
    assert any("bare task" in problem for problem in insane(lean))


def test_a_flat_line_may_fit_a_slightly_negative_slope_and_rss_may_shrink() -> None:
    assert insane({"journal": {"slopes_us": {"sdk-handbuilt": -0.5}}}) == []
    memory = {
        "flows": 10,
        "mrtr_trio": {"tracemalloc": 3.0, "rss": -4096.0},
        "bare": {"tracemalloc": 2.0},
    }
    assert insane({"memory": memory}) == []
    assert insane({"memory": dict(memory, flows=-1)}) == ["memory.flows = -1"]


def test_stats_summarise_samples() -> None:
    summary = Stats.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (summary.median, summary.p10, summary.p90, summary.samples) == (3.0, 1.4, 4.6, 5)
    with pytest.raises(ValueError):
        Stats.of([])


def test_replace_block_rewrites_only_between_its_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- latest:start -->\nold\n<!-- latest:end -->\noutro\n")
    replace_block(page, "latest", "new $1 \\g<0> table")
    assert page.read_text() == (
        "intro\n<!-- latest:start -->\nnew $1 \\g<0> table\n<!-- latest:end -->\noutro\n"
    )
    with pytest.raises(ValueError, match="baseline"):
        replace_block(page, "baseline", "x")


def test_the_floor_benchmark_runs() -> None:
    import trio

    from benchmarks.floor import floor_us

    cost = trio.run(floor_us, 0.01)
    assert 0 < cost < 100_000  # microseconds: finite and sane, whatever the machine


@pytest.mark.parametrize("kind", ["complete", "checkpoint", "live"])
def test_the_rounds_the_instruction_count_runs_run(kind: str) -> None:
    import trio

    from benchmarks.instructions import run_rounds

    trio.run(run_rounds, kind, 2)  # (what callgrind counts; valgrind itself is not needed here)


def test_the_stacks_benchmark_serves_each_server_behind_both_stacks() -> None:
    import trio

    from benchmarks.stacks import VARIANTS, stacks

    result = trio.run(stacks, 2, 1, 1)  # 2 trips, 1 run, 1 warm-up: it runs, not a figure
    assert set(VARIANTS) <= set(result)
    for label in VARIANTS:
        assert 0 <= result[label]["median_ms"] < 1000  # CPU per leg: finite and sane
