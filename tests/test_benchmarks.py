"""The benchmark suite's judgement: which targets a result misses, what counts as insane output,
and the docs block it rewrites; and the load targets' self-test, the one benchmark run here (a
leak injected into a real server must miss them). (The benchmarks themselves run in
``.ci/run``'s quick mode; performance is never asserted here.)"""

from __future__ import annotations

import argparse
import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import conclude
from benchmarks._timing import Stats
from benchmarks.report import replace_block
from benchmarks.servers import IMPLEMENTATIONS
from benchmarks.targets import (
    LIVE_RATIO,
    LONG_RATIO,
    MODERN_RATIO,
    Verdict,
    insane,
    verdicts,
)
from mrtr_trio import done


def stats(median: float) -> dict[str, float]:
    return {"median": median, "p10": median * 0.9, "p90": median * 1.1, "samples": 10}


def burst(rss_after: float, errors: int = 0, flows: int = 1000) -> dict[str, Any]:
    return {
        "completed": flows - errors,
        "errors": errors,
        "errors_by_kind": {"ReadTimeout": errors} if errors else {},
        "p50_ms": 900.0,
        "p99_ms": 1500.0,
        "wall_s": 2.0,
        "rss_peak_mib": rss_after,
        "rss_after_mib": rss_after,
    }


def results(**changes: Any) -> dict[str, Any]:
    """A full run that meets every target; *changes* patch it (``a__b=x`` sets ``["a"]["b"]``)."""
    combo = {"a/c": 0.9, "a/b": 0.7}
    found: dict[str, Any] = {
        "meta": {
            "mode": "full",
            "date": "2026-12-06T18:00:00+00:00",
            "machine": {
                "cpu": "test",
                "cpus": 2,
                "memory_gib": 1.0,
                "os": "test",
                "python": "3",
                "packages": {},
                "commit": "abc",
            },
            "load_before": (0.0, 0.0, 0.0),
            "load_after": (0.0, 0.0, 0.0),
            "seconds": 1.0,
        },
        "core": {
            "modern_3_us": stats(25.0),
            "modern_3_floor_us": stats(12.0),
            "modern_3_ratio": stats(2.0),
            "modern_3_checkpoint_us": stats(38.0),
            "long_answers": 1000,
            "modern_long_us": stats(1500.0),
            "modern_long_floor_us": stats(1000.0),
            "modern_long_ratio": stats(1.5),
            "live_us": stats(8.0),
            "live_floor_us": stats(2.0),
            "live_ratio": stats(4.0),
            "live_bare_trip_us": stats(0.5),
            "live_waiting_us": stats(16.0),
            "live_survey_us": stats(4.5),
            "token_chars": {"answers_0": 60, "answers_1": 90, "answers_2": 120},
        },
        "memory": {
            "flows": 10,
            "mrtr_trio": {"tracemalloc": 4000.0, "rss": 4100.0},
            "bare": {"tracemalloc": 2500.0, "rss": 2600.0},
        },
        "e2e": {
            f"{transport} {era}": {
                **combo,
                "runs": [dict(combo)] * 3,
                "latency_ms": {n: stats(5.0) for n in IMPLEMENTATIONS},
                "server_cpu_ms_per_leg": {n: 1.0 for n in IMPLEMENTATIONS},
                "a/c of medians": 0.9,
                "a/b of medians": 0.7,
                "state_chars": {},
                "iterations": 600,
            }
            for transport in ("stdio", "http")
            for era in ("2025-11-25", "2026-07-28")
        },
        "load": {
            era: {
                "flows": 1000,
                "settle_s": 5.0,
                "rss_before_mib": 80.0,
                "bursts": [burst(190.0), burst(191.0), burst(191.5)],
            }
            for era in ("legacy", "modern")
        },
        "auth": {
            era: {
                "plain_ms_per_leg": 2.0,
                "auth_ms_per_leg": 2.04,
                "auth/plain": 1.02,
                "runs": [1.02],
            }
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


def judged(found: dict[str, Any]) -> dict[str, Verdict]:
    return {v.name: v for v in verdicts(found)}


def test_a_run_within_every_target_misses_none() -> None:
    assert missed(results()) == []
    assert all(v.met for v in verdicts(results()))
    assert len(verdicts(results())) == 3 + 1 + 1 + 8 + 6 + 2


def test_the_rounds_are_judged_on_their_ratio_to_their_floor_not_on_microseconds() -> None:
    # A slow host: every round ten times dearer, its floor too; the ratios hold.
    slow = results(
        core__modern_3_us=stats(250.0),
        core__modern_3_floor_us=stats(120.0),
        core__live_us=stats(80.0),
        core__live_floor_us=stats(20.0),
        core__modern_long_us=stats(15_000.0),
        core__modern_long_floor_us=stats(10_000.0),
    )
    assert missed(slow) == []
    found = results(
        core__modern_3_ratio=stats(MODERN_RATIO + 0.01),
        core__modern_long_ratio=stats(LONG_RATIO + 0.01),
        core__live_ratio=stats(LIVE_RATIO + 0.01),
    )
    assert missed(found) == [
        "modern round, 3-answer journal, against its floor (CPU)",
        "modern round, 1000-answer journal, against its floor (CPU)",
        "live round, against its floor (CPU)",
    ]
    at_limit = results(core__modern_3_ratio=stats(MODERN_RATIO))
    assert missed(at_limit) == []
    assert judged(found)["live round, against its floor (CPU)"].detail == "8 µs against 2 µs"


def test_memory_is_judged_against_a_bare_task_measured_in_the_same_run() -> None:
    name = "suspended live flow, against a bare task (memory)"
    assert judged(results())[name].value == 4000 / 2500
    heavy = {"flows": 10, "mrtr_trio": {"tracemalloc": 4600.0}, "bare": {"tracemalloc": 2500.0}}
    assert missed(results(memory=heavy)) == [name]  # 1.84 > 1.8
    # 4.5 KiB would have missed issue 7's 4 KiB; beside a bare task of 2.6 KiB it is 1.73x.
    roomy = {"flows": 10, "mrtr_trio": {"tracemalloc": 4600.0}, "bare": {"tracemalloc": 2660.0}}
    assert missed(results(memory=roomy)) == []


def test_the_withdrawn_absolute_targets_are_gone() -> None:
    # Issue 7's 20 µs round and 10 µs live round: far slower rounds pass while their ratios hold.
    slow = results(core__modern_3_us=stats(40.0), core__modern_3_floor_us=stats(20.0))
    assert missed(slow) == []
    # Legacy HTTP a/c up to 1.05 (issue 7 asked for 1.0).
    e2e = results()["e2e"]
    e2e["http 2025-11-25"]["a/c"] = 1.04
    assert missed(results(e2e=e2e)) == []
    assert not any("µs" in v.unit or v.unit == "bytes" for v in verdicts(results()))


def test_end_to_end_limits_per_leg() -> None:
    e2e = results()["e2e"]
    e2e["stdio 2026-07-28"]["a/c"] = 1.06  # over 1.05 on any leg
    e2e["http 2026-07-28"]["a/b"] = 0.86  # over 0.85 on 2026-07-28
    e2e["http 2025-11-25"]["a/b"] = 0.99  # legacy allows up to 1.0
    e2e["stdio 2025-11-25"]["a/b"] = 1.01
    assert missed(results(e2e=e2e)) == [
        "a/c latency, stdio 2026-07-28",
        "a/b latency, stdio 2025-11-25",
        "a/b latency, http 2026-07-28",
    ]


def test_an_authenticated_round_may_cost_at_most_5_percent_more_server_cpu() -> None:
    auth = results()["auth"]
    auth["2026-07-28"]["auth/plain"] = 1.051
    assert missed(results(auth=auth)) == ["auth/plain server CPU, http 2026-07-28"]
    verdict = judged(results(auth=auth))["auth/plain server CPU, http 2025-11-25"]
    assert verdict.met and verdict.detail == "2.04 ms against 2 ms per leg"


def test_the_load_run_must_reach_a_steady_state_without_errors() -> None:
    growing = results()["load"]
    growing["legacy"]["bursts"] = [burst(190.0), burst(200.0), burst(209.0)]  # +5.3%, +4.5%
    growing["modern"]["bursts"] = [burst(130.0), burst(130.0), burst(130.0, errors=1)]
    assert missed(results(load=growing)) == [
        "load legacy: RSS added by burst 2 of 1000 flows",
        "load modern: errors",
    ]
    verdict = judged(results(load=growing))["load legacy: RSS added by burst 3 of 1000 flows"]
    assert verdict.value == pytest.approx(4.5) and verdict.met
    assert verdict.detail == "200.0 MiB to 209.0 MiB"
    # The first burst may grow the server as much as it needs (it warms it).
    first = results()["load"]
    first["modern"]["rss_before_mib"] = 40.0
    assert missed(results(load=first)) == []
    # A server that shrinks is steady too, and sane.
    shrinking = results()["load"]
    shrinking["legacy"]["bursts"] = [burst(190.0), burst(180.0), burst(180.0)]
    assert missed(results(load=shrinking)) == [] and insane(results(load=shrinking)) == []


def test_the_load_table_shows_the_live_allocations_beside_the_rss() -> None:
    from benchmarks.report import tables

    load = results()["load"]
    load["legacy"]["blocks_before"] = 400_000
    for burst_, blocks in zip(load["legacy"]["bursts"], (420_000, 421_000, 420_790), strict=True):
        burst_["blocks_after"] = blocks
    [table] = [t for t in tables({"load": load}, [], True) if t.title.startswith("Load")]
    assert table.headers[-1] == "live Python allocations after (vs the step before)"
    assert [row[-1] for row in table.rows] == [
        "420,000 (+5.0%)",
        "421,000 (+0.2%)",
        "420,790 (-0.0%)",
        "-",  # a run from before the allocations were measured
        "-",
        "-",
    ]


def test_a_shorter_journal_than_the_targets_is_not_judged() -> None:
    found = results(core__long_answers=30, core__modern_long_ratio=stats(5.0))
    [long] = [v for v in verdicts(found) if "answer journal" in v.name and "3-" not in v.name]
    assert long.value is None and long.met is None and long.detail == ""


def test_sections_not_run_are_not_measured() -> None:
    found = verdicts({"core": results()["core"]})
    assert [v.met for v in found if v.name.startswith(("a/", "load"))] == [None] * 14
    assert all(v.met is None for v in verdicts({}))


def test_sane_output_passes_and_insane_output_is_named() -> None:
    assert insane(results()) == []
    bad = results(core__modern_3_us=stats(math.nan))
    assert any("modern_3_us.median" in problem for problem in insane(bad))
    zero = results(core__token_chars={"answers_0": 0, "answers_1": 0, "answers_2": 0})
    assert any("one-answer token" in problem for problem in insane(zero))
    floorless = results(core__live_ratio=stats(0.0))
    assert any("live round, against its floor" in problem for problem in insane(floorless))
    lean = results(
        memory={"flows": 10, "mrtr_trio": {"tracemalloc": 1.0}, "bare": {"tracemalloc": 2.0}}
    )
    assert any("bare task" in problem for problem in insane(lean))
    lost = results()["load"]
    lost["modern"]["bursts"][1] = dict(burst(190.0), completed=998)  # 2 flows unaccounted for
    assert insane(results(load=lost)) == [
        f"load modern burst 2: {lost['modern']['bursts'][1]} does not add up to 1000"
    ]


def options(tmp_path: Path, quick: bool = False) -> argparse.Namespace:
    return argparse.Namespace(quick=quick, out=tmp_path, only=None, baseline=False)


def test_a_full_run_that_misses_targets_exits_1_naming_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    e2e = results()["e2e"]
    e2e["http 2025-11-25"]["a/c"] = 1.07
    found = results(core__live_ratio=stats(9.0), e2e=e2e)
    assert conclude(found, options(tmp_path), False, tmp_path) == 1
    err = capsys.readouterr().err
    assert "MISSED TARGETS" in err
    assert "live round, against its floor (CPU): 9 x > " in err
    assert "a/c latency, http 2025-11-25: 1.07 x > 1.05 x" in err
    assert err.count("\n  ") == 2  # those two, no other
    written = json.loads((tmp_path / "benchmarks.json").read_text())
    assert [t["name"] for t in written["targets"] if t["met"] is False] == [
        "live round, against its floor (CPU)",
        "a/c latency, http 2025-11-25",
    ]


def test_a_full_run_within_its_targets_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert conclude(results(), options(tmp_path), False, tmp_path) == 0
    out = capsys.readouterr()
    assert "MISSED" not in out.out + out.err
    assert "Targets (issue 19)" in out.out and "load legacy: errors" in out.out


def test_a_quick_run_reports_a_missed_target_but_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = results(core__modern_3_ratio=stats(10.0))
    assert conclude(found, options(tmp_path, quick=True), False, tmp_path) == 0
    assert "MISSED (not enforced)" in capsys.readouterr().out


def test_a_server_that_shrank_between_bursts_is_sane_once_the_verdicts_are_written(
    tmp_path: Path,
) -> None:
    shrinking = results()["load"]
    shrinking["modern"]["bursts"] = [burst(132.5), burst(130.5), burst(130.6)]  # -1.5%
    assert conclude(results(load=shrinking), options(tmp_path), False, tmp_path) == 0


def test_insane_output_exits_2_in_any_mode(tmp_path: Path) -> None:
    for quick in (False, True):
        found = results(core__live_us=stats(math.inf))
        assert conclude(found, options(tmp_path, quick=quick), False, tmp_path) == 2


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


def test_every_floor_runs_its_handler_to_the_end() -> None:
    import trio

    from benchmarks import core, flows
    from benchmarks.floor import bare_trip, live_floor, survey_floor, trip_floor

    async def each() -> None:
        # Each floor steps its handler through every question to its done(...), as the
        # real round does.
        assert await trip_floor()() == done(flows.booking("Ada", "Lisbon", "2026-09-01", 3))
        assert await survey_floor(30)() == done(31)
        assert await live_floor(core.live_calls().ask)() == done(
            flows.booking("Ada", "Lisbon", "2026-09-01", 3)
        )
        await bare_trip()

    trio.run(each)


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


def test_end_to_end_ratios_are_the_median_of_the_runs_own_paired_medians() -> None:
    from benchmarks.e2e import _Run, _summary

    names = list(IMPLEMENTATIONS)

    def run(a: list[float], b: list[float], c: list[float]) -> _Run:
        return _Run(dict(zip(names, (a, b, c), strict=True)), dict.fromkeys(names, 0.3), {})

    runs = [
        # per-iteration a/c: 0.9, 1.0, 1.1 -> 1.0; a/b 0.5
        run([9.0, 10.0, 11.0], [18.0, 20.0, 22.0], [10.0, 10.0, 10.0]),
        # a host that stalled a for the whole run: a/c 2.0, a/b 1.0
        run([20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [10.0, 10.0, 10.0]),
        # a/c 0.8 twice and 5.0 once (one flow stalled) -> 0.8; a/b 0.4
        run([8.0, 8.0, 50.0], [20.0, 20.0, 125.0], [10.0, 10.0, 10.0]),
    ]
    summary = _summary(names, runs)
    assert [r["a/c"] for r in summary["runs"]] == [1.0, 2.0, 0.8]
    assert summary["a/c"] == 1.0 and summary["a/b"] == 0.5
    assert summary["iterations"] == 9
    assert summary["latency_ms"]["mrtr_trio"]["samples"] == 9  # pooled over the runs
    assert summary["server_cpu_ms_per_flow"]["mrtr_trio"] == pytest.approx(0.9 * 1e3 / 9)


async def test_a_burst_held_together_has_every_flow_at_its_ready_point_at_once(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: object
) -> None:
    import os
    from types import SimpleNamespace

    import trio

    from benchmarks import load

    events: list[str] = []
    going = [0, 0]  # flows on their way to or from their ready point now, and the most at once

    def move(by: int) -> None:
        going[0] += by
        going[1] = max(going)

    async def flow(http: object, url: str, job: str, ready: Any) -> str:
        index = int(job.removeprefix("job"))
        move(1)
        await trio.sleep(index % 2 + 1)  # the flows get there at different times
        if index == 3:
            move(-1)
            raise RuntimeError("failed before its ready point")
        events.append("arrive")
        move(-1)
        await ready()
        events.append("leave")
        move(1)
        await trio.sleep(1)  # the rest of the flow
        move(-1)
        return f"{job}: True"

    monkeypatch.setitem(load.FLOWS, "held", flow)
    monkeypatch.setattr(load, "WAVE", 2)
    server = load.Server(SimpleNamespace(pid=os.getpid()), "http://127.0.0.1:9/unused")
    result = await load.run(server, "held", 6, 0, together=True)
    assert (result.completed, result.errors) == (5, {"RuntimeError": 1})
    assert events == ["arrive"] * 5 + ["leave"] * 5  # nobody left before the last arrived
    assert going[1] == 2  # they started, and went on, a wave of 2 at a time
    events.clear()
    result = await load.run(server, "held", 6, 0)  # not held: each goes on at once
    assert events[:2] == ["arrive", "leave"]


def test_the_load_targets_fail_on_a_leak_and_hold_without_one() -> None:
    # The targets' self-test on a real server (`python -m benchmarks.steady --leak` at full size):
    # 30 modern flows a burst, each leaking 256 KiB, grow an ~85 MiB server by 7.5 MiB a burst.
    import trio

    from benchmarks import steady

    def load_missed(leak: int) -> list[str]:
        found = trio.run(partial(steady.bursts, 30, 3, 0.2, leak=leak, eras=("modern",)))
        assert found["modern"]["bursts"][0]["blocks_after"] > 0
        return [v.name for v in verdicts({"load": found}) if v.met is False]

    assert load_missed(256 * 1024) == [
        "load modern: RSS added by burst 2 of 30 flows",
        "load modern: RSS added by burst 3 of 30 flows",
    ]
    assert load_missed(0) == []
