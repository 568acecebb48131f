"""The Apps the exactly-once tests serve from several processes at once:
`mrtr-trio serve tests/server/exactly_once_app.py:app --http 127.0.0.1:0` (or `:single_use_app`).

Every process reads the same settings from the environment:

- `MRTR_TRIO_TEST_KEY`: the signing key, in hex;
- `MRTR_TRIO_TEST_REDIS`: the URL of the Redis that holds the shared step store;
- `MRTR_TRIO_TEST_LEDGER`: a file that each run of the charge step appends one line to: the side
  effect the tests count, outside every server process;
- `MRTR_TRIO_TEST_LEASE` (`slow_app` only): the step store's lease, in seconds;
- `MRTR_TRIO_TEST_HOLD` (`slow_app` only): while this file exists, a slow charge, once its
  effect is done, waits (so that a test can kill its process mid-step).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import trio

from mrtr_trio import Context, Runtime, done, elicit, step, step_key
from mrtr_trio.mcp import App
from mrtr_trio.redis import RedisStepStore

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}

KEY = bytes.fromhex(os.environ["MRTR_TRIO_TEST_KEY"])
STORE = RedisStepStore(os.environ["MRTR_TRIO_TEST_REDIS"])
LEDGER = Path(os.environ["MRTR_TRIO_TEST_LEDGER"])
#: How long a charge takes: long enough for concurrent presentations to find it running.
CHARGE_SECONDS = 0.5

app = App("exactly-once", runtime=Runtime([KEY], step_store=STORE))
single_use_app = App("exactly-once", runtime=Runtime([KEY], step_store=STORE, single_use=True))


async def charge_card(amount: int) -> str:
    """The side effect: one ledger line per run, with a receipt no other run returns."""
    receipt = secrets.token_hex(8)
    line = f"{os.getpid()} {step_key()} {amount} {receipt}\n"
    await trio.to_thread.run_sync(_append, line)
    await trio.sleep(CHARGE_SECONDS)
    return receipt


def _append(line: str) -> None:
    with LEDGER.open("a") as ledger:
        ledger.write(line)


async def charge(ctx: Context, amount: int):
    """Asks for a confirmation, then charges once."""
    answer = yield elicit(f"Charge {amount}?", CONFIRM)
    if not (answer.accepted and answer.content["confirm"]):
        yield done("not charged")
    receipt = yield step(charge_card, amount)
    yield done(f"charged {amount}: receipt {receipt}")


app.tool()(charge)
single_use_app.tool()(charge)

# A store with a short lease, and charges that hold mid-step: for the test that kills a process.
SHORT_LEASE = RedisStepStore(
    os.environ["MRTR_TRIO_TEST_REDIS"], lease=float(os.environ.get("MRTR_TRIO_TEST_LEASE", "10"))
)
slow_app = App("exactly-once", runtime=Runtime([KEY], step_store=SHORT_LEASE))


async def idempotent_charge(amount: int) -> str:
    """The downstream service deduplicates by idempotency key: one ledger line per key, and
    the same receipt for the key every time. Then, while the hold file exists, it waits."""
    key = step_key()
    line = await trio.to_thread.run_sync(_charge_once, key, amount)
    hold = Path(os.environ.get("MRTR_TRIO_TEST_HOLD", "/nonexistent"))
    while await trio.to_thread.run_sync(hold.exists):  # noqa: ASYNC110 - a file, not an event
        await trio.sleep(0.05)
    return line.split()[3]


def _charge_once(key: str, amount: int) -> str:
    for line in LEDGER.read_text().splitlines() if LEDGER.exists() else ():
        if line.split()[1] == key:
            return line
    line = f"{os.getpid()} {key} {amount} {secrets.token_hex(8)}"
    _append(line + "\n")
    return line


@slow_app.tool()
async def charge_retry(ctx: Context, amount: int):
    """Charges through a service that deduplicates by step_key(): safe to run again."""
    yield elicit(f"Charge {amount}?", CONFIRM)
    receipt = yield step(idempotent_charge, amount, retry=True)
    yield done(f"charged {amount}: receipt {receipt}")


@slow_app.tool()
async def charge_once(ctx: Context, amount: int):
    """The same charge, not declared safe to run again."""
    yield elicit(f"Charge {amount}?", CONFIRM)
    receipt = yield step(idempotent_charge, amount)
    yield done(f"charged {amount}: receipt {receipt}")
