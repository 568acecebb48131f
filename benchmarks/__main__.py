"""``python -m benchmarks [--quick]``: run every benchmark, print the tables, write JSON and the
plot, and (full mode) update ``docs/benchmarks.md`` and exit 1 naming each missed target.

The quick mode (used by ``.ci/run``) runs everything with small counts into a scratch directory
and fails only when something does not run or its output is not sane, never on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import trio

from . import auth, core, e2e, floor, journal, memory, steady
from ._timing import Paired, cpu_us, paired_cpu_us
from .plot import journal_plot
from .report import replace_block, tables
from .targets import insane, verdicts

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SECTIONS = ("core", "memory", "journal", "e2e", "load", "auth")


@attrs.frozen
class Plan:
    """How much of each benchmark to run."""

    budget: float  # seconds of CPU per core measurement
    long_answers: int
    memory_flows: int
    lengths: tuple[int, ...]
    resolve_lengths: tuple[int, ...]
    sweep_budget: float
    e2e_iterations: int  # per run
    e2e_warmup: int
    e2e_runs: int
    load_flows: int  # per burst
    load_bursts: int
    load_settle: float  # seconds idle before each burst's RSS
    auth_flows: int  # per run and server
    auth_runs: int


FULL = Plan(
    budget=1.0,
    long_answers=1000,
    memory_flows=10_000,
    lengths=(1, 3, 10, 30, 100, 300, 1000),
    resolve_lengths=(1, 3, 10, 30, 100, 300),
    sweep_budget=0.3,
    e2e_iterations=200,
    e2e_warmup=10,
    e2e_runs=3,
    load_flows=1000,
    load_bursts=3,
    load_settle=5.0,
    auth_flows=300,
    auth_runs=3,
)
QUICK = Plan(
    budget=0.05,
    long_answers=30,
    # As many as the full run: bytes per flow include the flows' share of containers that grow
    # in steps (the nursery's sets, the deadline heap), so the ratio to a bare task depends on
    # the count (1.81x at 300 flows, 1.80x at 1,000, 1.77x at 10,000); a few seconds of CPU.
    memory_flows=10_000,
    lengths=(1, 3, 10),
    resolve_lengths=(1, 3, 10),
    sweep_budget=0.02,
    e2e_iterations=3,
    e2e_warmup=1,
    e2e_runs=1,
    load_flows=20,
    load_bursts=3,
    load_settle=0.2,
    auth_flows=30,
    auth_runs=1,
)


def _machine() -> dict[str, Any]:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in cpuinfo
                    if line.startswith("model name")
                ),
                model,
            )
        with open("/proc/meminfo") as meminfo:
            memory_kib = int(
                next(line for line in meminfo if line.startswith("MemTotal")).split()[1]
            )
    except OSError:
        memory_kib = 0
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024**2, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: metadata.version(p) for p in ("mrtr_trio", "mcp", "trio", "hypercorn")},
        "commit": commit,
    }


def _pair(key: str, pair: Paired, per: float = 1.0) -> dict[str, Any]:
    """A round, its floor and their ratio, as the results hold them (CPU figures *per* call)."""
    return {
        f"{key}_us": core.scaled(pair.numerator, per).as_json(),
        f"{key}_floor_us": core.scaled(pair.denominator, per).as_json(),
        f"{key}_ratio": pair.ratio.as_json(),
    }


async def _core(plan: Plan) -> dict[str, Any]:
    """Each targeted round side by side with its floor; the other rounds alone."""
    rounds = await core.trip_rounds()
    long_round = await core.long_round(plan.long_answers)
    live = await core.checked_live_calls()
    budget = plan.budget
    return {
        **_pair(
            "modern_3",
            await paired_cpu_us(rounds["complete"], floor.trip_floor(), budget=budget),
        ),
        "modern_3_checkpoint_us": (await cpu_us(rounds["checkpoint"], budget=budget)).as_json(),
        "long_answers": plan.long_answers,
        **_pair(
            "modern_long",
            await paired_cpu_us(long_round, floor.survey_floor(plan.long_answers), budget=budget),
        ),
        # Per round: the trip's 4 rounds, setup included.
        **_pair(
            "live",
            await paired_cpu_us(live.trip, floor.live_floor(live.ask), budget=budget),
            1 / 4,
        ),
        "live_bare_trip_us": core.scaled(
            await cpu_us(floor.bare_trip, budget=budget / 2), 1 / 4
        ).as_json(),
        "live_waiting_us": core.scaled(
            await cpu_us(live.trip_waiting, budget=budget), 1 / 4
        ).as_json(),
        "live_survey_us": core.scaled(await cpu_us(live.survey, budget=budget), 1 / 100).as_json(),
        "token_chars": await core.token_sizes(),
    }


async def _journal(plan: Plan) -> dict[str, Any]:
    lines = await journal.sweep(plan.lengths, plan.resolve_lengths, plan.sweep_budget)
    return {
        "lengths": list(plan.lengths),
        "lines": {
            name: {str(n): s.as_json() for n, s in line.items()} for name, line in lines.items()
        },
        "slopes_us": {name: journal.slope(line) for name, line in lines.items()},
    }


def run(plan: Plan, sections: tuple[str, ...]) -> dict[str, Any]:
    """Run the chosen sections; return the results, ``meta`` first."""
    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "mode": "quick" if plan == QUICK else "full",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": _machine(),
            "load_before": os.getloadavg(),
        }
    }
    steps: dict[str, Callable[[], Any]] = {
        "core": lambda: trio.run(_core, plan),
        "memory": lambda: {"flows": plan.memory_flows, **memory.per_flow(plan.memory_flows)},
        "journal": lambda: trio.run(_journal, plan),
        "e2e": lambda: trio.run(
            e2e.side_by_side, plan.e2e_iterations, plan.e2e_warmup, plan.e2e_runs
        ),
        "load": lambda: trio.run(
            steady.bursts, plan.load_flows, plan.load_bursts, plan.load_settle
        ),
        "auth": lambda: trio.run(auth.auth_ratio, plan.auth_flows, plan.auth_runs),
    }
    for section in sections:
        print(f"running {section} ...", flush=True)
        results[section] = steps[section]()
    results["meta"]["load_after"] = os.getloadavg()
    results["meta"]["seconds"] = round(time.monotonic() - started, 1)
    return results


def _meta_line(meta: dict[str, Any]) -> str:
    machine = meta["machine"]

    def load(values: Sequence[float]) -> str:
        return " ".join(f"{v:.2f}" for v in values)

    return (
        f"{meta['mode']} run, {meta['date']}, commit {machine['commit']}; {machine['cpus']} x "
        f"{machine['cpu']}, {machine['memory_gib']} GiB, {machine['os']}; Python "
        f"{machine['python']}, "
        + ", ".join(f"{p} {v}" for p, v in machine["packages"].items())
        + f"; load average {load(meta['load_before'])} before, {load(meta['load_after'])} after; "
        f"{meta['seconds']} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts; fail only on errors")
    parser.add_argument(
        "--out", type=Path, help="where JSON and the plot go (a complete full run: docs/)"
    )
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument(
        "--baseline", action="store_true", help="also record this run as the baseline in the docs"
    )
    options = parser.parse_args()
    plan = QUICK if options.quick else FULL
    sections = tuple(options.only or SECTIONS)
    # Only a complete full run writes into docs/ by default.
    complete = not options.quick and set(sections) == set(SECTIONS)
    if options.out is None and options.quick:  # a smoke test (CI): nothing to keep
        with tempfile.TemporaryDirectory(prefix="mrtr-bench-") as scratch:
            return _measure(options, plan, sections, complete, Path(scratch))
    out = options.out or (DOCS if complete else Path(tempfile.mkdtemp(prefix="mrtr-bench-")))
    return _measure(options, plan, sections, complete, out)


def _measure(
    options: argparse.Namespace, plan: Plan, sections: tuple[str, ...], complete: bool, out: Path
) -> int:
    """Run *sections* of *plan* and `conclude`."""
    out.mkdir(parents=True, exist_ok=True)
    return conclude(run(plan, sections), options, complete, out)


def conclude(
    results: dict[str, Any], options: argparse.Namespace, complete: bool, out: Path
) -> int:
    """Judge *results*, write JSON and the plot to *out*, print the tables, and say how it
    went: 0; 1 on a full run that missed a target (each named on stderr); 2 for insane
    output, in any mode."""
    found = verdicts(results)
    results["targets"] = [v.as_json() for v in found]
    (out / "benchmarks.json").write_text(json.dumps(results, indent=1) + "\n")
    plot = out / "benchmarks-journal.png"
    if "journal" in results:
        baseline_file = DOCS / "benchmarks-baseline.json"
        baseline = None
        if baseline_file.exists() and not options.baseline:
            baseline = json.loads(baseline_file.read_text()).get("journal")
        journal_plot(results["journal"], plot, baseline)

    enforced = not options.quick
    rendered = tables(results, found, enforced)
    print("\n" + _meta_line(results["meta"]) + "\n", flush=True)
    print("\n\n".join(t.text() for t in rendered))
    if not (options.quick and options.out is None):  # a quick run's scratch goes with it
        print(f"\nJSON: {out / 'benchmarks.json'}" + (f"\nplot: {plot}" if plot.exists() else ""))

    sys.stdout.flush()
    problems = insane(results)
    if "journal" in results and not (plot.exists() and plot.stat().st_size > 0):
        problems.append(f"no plot at {plot}")
    if problems:
        print("\nINSANE OUTPUT:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if complete and out == DOCS:
        block = f"_{_meta_line(results['meta'])}_\n\n" + "\n\n".join(t.markdown() for t in rendered)
        replace_block(DOCS / "benchmarks.md", "latest", block)
        if options.baseline:
            (DOCS / "benchmarks-baseline.json").write_text(json.dumps(results, indent=1) + "\n")
            replace_block(DOCS / "benchmarks.md", "baseline", block)
        print(f"updated {DOCS / 'benchmarks.md'}")
    missed = [v for v in found if v.met is False]
    if enforced and missed:
        print("\nMISSED TARGETS:", file=sys.stderr)
        for v in missed:
            print(f"  {v.name}: {v.value:.4g} {v.unit} > {v.limit:g} {v.unit}", file=sys.stderr)
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
