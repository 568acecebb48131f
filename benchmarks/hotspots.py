"""``python -m benchmarks.hotspots``: where a round's time goes, by cProfile.

Profiles, under ``trio.run``, the modern round with a 3-answer journal (completing and
checkpointing), the live round, and through an `mrtr_trio.mcp.App` in-process the trip's last
modern round and a whole legacy trip. For each it prints the functions ranked by own time, the
mrtr_trio functions ranked by inclusive time, and the own time per component (each mrtr_trio
module, trio, cbor2, the SDK...).
Also the memory of a suspended live flow, by the source line that allocated it (tracemalloc).
cProfile slows everything it sees about twice, so read the shares, not the microseconds.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import trio
from mcp import Client

from mrtr_trio import Runtime

from . import client, core, flows, memory
from .servers import mrtr_app

__all__ = ["main"]

Call = Callable[[], Awaitable[Any]]


def _component(filename: str) -> str:
    if "/mrtr_trio/" in filename:
        return "mrtr_trio." + filename.rsplit("/mrtr_trio/", 1)[1].removesuffix(".py").replace(
            "/", "."
        )
    for marker, name in (
        ("/trio/", "trio"),
        ("cbor2", "cbor2"),
        ("blake3", "blake3"),
        ("/mcp/", "mcp"),
        ("mcp_types", "mcp"),
        ("pydantic", "pydantic"),
        ("/attr", "attrs"),
        ("/anyio/", "anyio"),
        ("/benchmarks/", "benchmark harness"),
    ):
        if marker in filename:
            return name
    if filename == "~":
        return "C builtins"
    if filename.startswith("<frozen "):  # <frozen abc>: isinstance against an ABC
        return "stdlib " + filename.strip("<>").split(" ")[1]
    if filename.startswith("<"):
        return "attrs (generated)" if "attrs" in filename else filename
    return "stdlib " + filename.rsplit("/", 1)[-1].removesuffix(".py")


def _label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    return f"{_component(filename)}:{name}:{line}"


def _report(title: str, profile: cProfile.Profile, calls: int, top: int) -> None:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    print(f"\n## {title}\n\n{calls} calls, {total / calls * 1e6:.1f} µs per call under cProfile\n")
    own = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    print("Own time (share of the round):")
    for key, (_, ncalls, tottime, _, _) in own:
        print(f"  {tottime / total:6.1%}  {ncalls / calls:6.1f}/call  {_label(key)}")
    inclusive = sorted(
        ((key, entry) for key, entry in stats.items() if "/mrtr_trio/" in key[0]),
        key=lambda item: item[1][3],
        reverse=True,
    )[:top]
    print("\nmrtr_trio functions by inclusive time:")
    for key, (_, ncalls, _, cumtime, _) in inclusive:
        print(f"  {cumtime / total:6.1%}  {ncalls / calls:6.1f}/call  {_label(key)}")
    components: dict[str, float] = defaultdict(float)
    for key, entry in stats.items():
        components[_component(key[0])] += entry[2]
    print("\nOwn time by component:")
    for name, tottime in sorted(components.items(), key=lambda item: item[1], reverse=True):
        print(f"  {tottime / total:6.1%}  {name}")


async def _profile(title: str, call: Call, calls: int, top: int) -> None:
    for _ in range(20):
        await call()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        await call()
    profile.disable()
    _report(title, profile, calls, top)


async def _app_round(session: Client) -> Call:
    """The trip's last round (replay 2, answer, complete) through an App in-process."""
    arguments = {"traveller": flows.TRAVELLER}
    last = (await client.rounds(session, "trip", arguments, keep=(2,)))[2]

    async def call() -> Any:
        result = await client.retry(session, "trip", arguments, last)
        assert isinstance(result, types.CallToolResult) and not result.is_error
        return result

    return call


async def _all(calls: int, top: int, memory_flows: int) -> None:
    runtime = Runtime([secrets.token_bytes(32)])
    arguments = core.TRIP_ARGUMENTS
    states = await core.drive(runtime, flows.plan_trip, arguments, keep=(2, 3))
    for title, at in (
        ("Modern round, 3-answer journal: replay 3, answer, complete", states[3]),
        ("Modern round, 3-answer journal: replay 2, answer, checkpoint", states[2]),
    ):
        await _profile(title, core.round_call(runtime, flows.plan_trip, arguments, at), calls, top)

    async def ask(key: str, request: object) -> Any:
        return flows.answer_json(request)

    async def live() -> Any:
        return await runtime.run_live(flows.plan_trip, arguments, ask)

    await _profile("Live flow, 4 rounds (run_live, in-memory ask)", live, calls // 4, top)
    print(f"\n## Memory of a suspended live flow, by allocation site ({memory_flows} flows)\n")
    for site, size in await memory.allocation_sites(memory_flows, top):
        print(f"  {size:8.1f} B/flow  {site}")

    target = mrtr_app.target()
    async with Client(target, mode="2026-07-28", elicitation_callback=client.answer) as session:
        title = "App, the trip's last round in-process (replay 2, answer, complete)"
        await _profile(title, await _app_round(session), calls // 4, top)
    async with Client(target, mode="legacy", elicitation_callback=client.answer) as session:

        async def legacy_trip() -> Any:
            result = await session.call_tool("trip", {"traveller": flows.TRAVELLER})
            assert not result.is_error
            return result

        title = "App, a whole legacy trip in-process (client and server both profiled)"
        await _profile(title, legacy_trip, calls // 8, top)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hotspots", description=__doc__)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--flows", type=int, default=2000, help="suspended flows for memory")
    options = parser.parse_args()
    trio.run(_all, options.calls, options.top, options.flows)


if __name__ == "__main__":
    main()
