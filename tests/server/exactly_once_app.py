"""The Apps the exactly-once tests serve from several processes at once:
`mrtr-trio serve tests/server/exactly_once_app.py:app --http 127.0.0.1:0` (or `:single_use_app`).

Every process reads the same settings from the environment:

- `MRTR_TRIO_TEST_KEY`: the signing key, in hex;
- `MRTR_TRIO_TEST_REDIS`: the URL of the Redis that holds the shared step store;
- `MRTR_TRIO_TEST_LEDGER`: a file that each run of the charge step appends one line to: the side
  effect the tests count, outside every server process.
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
