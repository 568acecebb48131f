"""What exactly-once steps and confidential tokens cost: `python -m benchmarks.steps [--quick]`.

- token size: characters of the trip's `requestState` after one and after two answers, signed
  (the default) and encrypted (`Runtime(encrypt=True)`);
- a step's cost: wall time of the modern round that answers an ask and runs a step, without a
  store, with a `MemoryStepStore` and with a `RedisStepStore` (over a unix socket and over
  loopback TCP): on a new token each time (the store claims the key and records the result),
  and on one token presented again (the store answers with the recorded result, and the step
  does not run). The cost of a store is the difference from the round without one; the same
  round with encrypted tokens and no store gives the cost of encryption.

Redis figures need `redis-server` on `PATH` (the script starts its own on a temporary socket and
stops it) or `--redis URL` (a server of yours: the script writes keys under `bench:` there).
Wall time, not CPU time: a Redis call waits on a socket and a worker thread.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from mrtr_trio import (
    Context,
    InputRequired,
    MemoryStepStore,
    Runtime,
    StepStore,
    done,
    elicit,
    step,
)

from . import core, flows
from ._timing import Stats

__all__ = ["step_costs", "token_sizes"]

KEY = secrets.token_bytes(32)
CONFIRM = flows.CONFIRM
YES = {"input-0": {"action": "accept", "content": {"confirm": True}}}


async def token_sizes() -> dict[str, int]:
    """Characters of the trip's token after 1 and 2 answers, signed and encrypted."""
    sizes: dict[str, int] = {}
    for encrypt in (False, True):
        runtime = Runtime([KEY], encrypt=encrypt)
        states = await core.drive(runtime, flows.trip, core.TRIP_ARGUMENTS, keep=(1, 2))
        for answers, outcome in states.items():
            name = f"{'encrypted' if encrypt else 'signed'}_{answers}_answers"
            sizes[name] = len(outcome.request_state or "")
    return sizes


def charge(amount: int) -> str:
    return f"receipt for {amount}"


async def confirm_then_charge(ctx: Context, amount: int) -> Any:
    """Asks, then charges: the round that answers the ask runs the step."""
    yield elicit(f"Charge {amount}?", CONFIRM)
    receipt = yield step(charge, amount)
    yield done(receipt)


async def wall_us(calls: list[Callable[[], Awaitable[Any]]]) -> Stats:
    """Wall time of each call, in microseconds (the first one is a warm-up)."""
    await calls[0]()
    samples = []
    for call in calls[1:]:
        start = time.perf_counter_ns()
        await call()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return Stats.of(samples)


async def step_costs(
    stores: dict[str, StepStore | None], calls: int, *, encrypt: bool = False
) -> dict[str, Stats]:
    """Per store, the round that answers the ask and runs the step (each on a token of its
    own), and the same round on one token presented again and again (with a store, the
    recorded result is reused; without one, the step runs again)."""
    results: dict[str, Stats] = {}
    for name, store in stores.items():
        runtime = Runtime([KEY], step_store=store, encrypt=encrypt)
        tokens = []
        for _ in range(calls + 1):
            first = await runtime.advance(confirm_then_charge, {"amount": 5})
            assert isinstance(first, InputRequired)
            tokens.append(first.request_state)

        def present(token: str | None, runtime: Runtime = runtime) -> Any:
            return lambda: runtime.advance(
                confirm_then_charge, {"amount": 5}, input_responses=YES, request_state=token
            )

        results[f"{name}: new token, the step runs"] = await wall_us(
            [present(token) for token in tokens]
        )
        results[f"{name}: same token again"] = await wall_us([present(tokens[0])] * (calls + 1))
    return results


@contextlib.contextmanager
def own_redis() -> Iterator[tuple[str, str] | None]:
    """A redis-server on a temporary unix socket and a loopback port: their URLs, or `None`
    when redis-server is not installed."""
    program = shutil.which("redis-server")
    if program is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as directory, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        sock = Path(directory) / "redis.sock"
        process = subprocess.Popen(
            [
                *(program, "--port", str(port), "--bind", "127.0.0.1"),
                *("--unixsocket", str(sock), "--save", "", "--appendonly", "no"),
                *("--dir", directory, "--logfile", str(Path(directory) / "redis.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 15
            while not sock.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
            yield f"unix://{sock}", f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


@contextlib.asynccontextmanager
async def stores(redis_url: str | None) -> AsyncIterator[dict[str, StepStore | None]]:
    found: dict[str, StepStore | None] = {
        "no store": None,
        "MemoryStepStore": MemoryStepStore(max_entries=1_000_000),
    }
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        if redis_url is not None:
            urls["RedisStepStore"] = redis_url
        else:
            started = stack.enter_context(own_redis())
            if started is None:
                print("redis-server is not installed: no Redis figures (or pass --redis URL)")
            else:
                urls["RedisStepStore (unix socket)"] = started[0]
                urls["RedisStepStore (TCP loopback)"] = started[1]
        if urls:
            from mrtr_trio.redis import RedisStepStore

            for name, url in urls.items():
                redis_store = RedisStepStore(url, prefix="bench:")
                stack.callback(redis_store.close)
                found[name] = redis_store
        yield found


async def main(quick: bool, redis_url: str | None) -> None:
    sizes = await token_sizes()
    print("token characters (the trip flow)")
    for answers in (1, 2):
        signed, encrypted = (
            sizes[f"signed_{answers}_answers"],
            sizes[f"encrypted_{answers}_answers"],
        )
        print(f"  after {answers} answer(s): signed {signed}, encrypted {encrypted}")
    calls = 50 if quick else 3000
    async with stores(redis_url) as found:
        costs = await step_costs(found, calls)
    costs |= await step_costs({"no store, encrypted tokens": None}, calls, encrypt=True)
    print(f"\nwall time of one modern round, median (p10-p90) of {calls} calls, in us")
    for name, stats in costs.items():
        print(f"  {name:<56} {stats.median:8.1f}  ({stats.p10:.1f}-{stats.p90:.1f})")
        if not stats.median > 0:
            raise SystemExit(f"insane measurement for {name}: {stats}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steps", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few calls: check that it runs")
    parser.add_argument("--redis", metavar="URL", help="measure this Redis instead of our own")
    args = parser.parse_args()
    trio.run(main, args.quick, args.redis)
