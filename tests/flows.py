"""Example flows the tests run in both eras, with answer functions for them, and a payment flow
whose step's runs are counted (the exactly-once tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from mrtr_trio import (
    Complete,
    Context,
    CreateMessageRequest,
    ElicitRequest,
    InputRequired,
    ListRootsRequest,
    Runtime,
    accepted_content,
    create_message,
    done,
    elicit,
    input_required,
    list_roots,
    pause,
    step,
    step_key,
)

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOR = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
    "required": ["color"],
}
SIZE = {
    "type": "object",
    "properties": {"size": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["size"],
}


# ------------------------------------------------------------------------------ yield style


async def single_ask(ctx: Context, who: str = "world"):
    name = yield elicit(f"What is your name, {who}?", NAME)
    yield done(f"Hello, {name.content['name']}!" if name.accepted else "Hello, stranger!")


async def batch_of_three(ctx: Context):
    answers = yield {
        "user": elicit("Your name?", NAME),
        "capital": create_message("What is the capital of France?", max_tokens=100),
        "roots": list_roots(),
    }
    name = answers["user"].content["name"] if answers["user"].accepted else "?"
    roots = ",".join(r.uri for r in answers["roots"].roots)
    yield done(f"{name}|{answers['capital'].text}|{roots}")


async def wizard(ctx: Context, title: str):
    name = yield elicit(f"{title}: step 1, your name", NAME)
    color = yield elicit(f"{title}: step 2, {name.content['name']}, pick a color", COLOR)
    size = yield elicit(f"{title}: step 3, a size for {color.content['color']}", SIZE)
    yield done(
        {
            "name": name.content["name"],
            "color": color.content["color"],
            "size": size.content["size"],
        }
    )


async def decline_or_cancel(ctx: Context):
    answer = yield elicit("Proceed?", CONFIRM)
    if answer.action == "decline":
        again = yield elicit("Sure? Last chance.", CONFIRM)
        yield done(f"declined, then {again.action}")
    if answer.action == "cancel":
        yield done("cancelled")
    yield done(f"accepted confirm={answer.content['confirm']}")


STEP_CALLS: list[str] = []


def mint_ticket(prefix: str) -> str:
    STEP_CALLS.append(prefix)
    return f"{prefix}-{len(STEP_CALLS)}"


async def with_step(ctx: Context):
    ticket = yield step(mint_ticket, "T")
    ok = yield elicit(f"File ticket {ticket}?", CONFIRM)
    yield done(f"{ticket} filed={ok.accepted and ok.content['confirm']}")


async def with_pause(ctx: Context, n: int = 2):
    total = 0
    for i in range(n):
        yield pause()
        total += i + 1
    ok = yield elicit(f"Total is {total}. Keep?", CONFIRM)
    yield done(total if ok.accepted else None)


# ----------------------------------------------------------------------------- return style


async def return_confirm(ctx: Context, action: str = "deploy"):
    if ctx.input_responses is None:
        return input_required({"confirm": elicit(f"Really {action}?", CONFIRM)})
    content = accepted_content(ctx.input_responses, "confirm")
    return f"{action}: {'yes' if content and content['confirm'] else 'no'}"


async def return_chunked_sum(ctx: Context, numbers: list[int], chunk: int = 2):
    """State-only rounds: add *chunk* numbers per round, carrying the partial sum."""
    state = ctx.request_state() or {"index": 0, "total": 0}
    index, total = state["index"], state["total"]
    total += sum(numbers[index : index + chunk])
    index += chunk
    if index >= len(numbers):
        return total
    return input_required(
        request_state=await ctx.mint_request_state({"index": index, "total": total})
    )


# --------------------------------------------------------------------------------- answers


def happy_answer(key: str, request: Any) -> dict[str, Any]:
    """A cooperative client: accepts forms with plausible content."""
    if isinstance(request, ElicitRequest):
        if request.url is not None:
            return {"action": "accept"}
        content: dict[str, Any] = {}
        for name, prop in request.schema["properties"].items():
            content[name] = _plausible(prop, name)
        return {"action": "accept", "content": content}
    if isinstance(request, CreateMessageRequest):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Paris"},
            "model": "test-model",
            "stopReason": "endTurn",
        }
    assert isinstance(request, ListRootsRequest)
    return {"roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]}


def _plausible(prop: dict[str, Any], name: str) -> Any:
    if "enum" in prop:
        return prop["enum"][-1]
    kind = prop["type"]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return prop.get("minimum", 0) + 1
    if kind == "array":
        return [prop["items"]["enum"][0]]
    return f"{name}-value"


def action_answer(*actions: str):
    """Answer elicitations with *actions* in turn (accept with plausible content)."""
    queue = list(actions)

    def answer(key: str, request: Any) -> dict[str, Any]:
        action = queue.pop(0)
        if action == "accept":
            return happy_answer(key, request)
        return {"action": action}

    return answer


# ------------------------------------------------------------------------ steps that charge

YES = {"input-0": {"action": "accept", "content": {"confirm": True}}}


class Ledger:
    """A step with a side effect to count: each run appends its idempotency key and returns a
    receipt no other run returns. It can take *delay* seconds and fail its first *failures*
    runs."""

    def __init__(self, delay: float = 0.0, failures: int = 0) -> None:
        self.keys: list[str] = []
        self.delay = delay
        self.failures = failures

    async def charge(self, amount: int) -> str:
        self.keys.append(step_key())
        if self.delay:
            await trio.sleep(self.delay)
        if len(self.keys) <= self.failures:
            raise RuntimeError(f"the payment API failed (run {len(self.keys)})")
        return f"receipt {len(self.keys)} for {amount}"


def payment(ledger: Ledger, retry: bool = False) -> Callable[..., Any]:
    """A flow that asks for a confirmation, then charges once (*retry*: a charge whose
    outcome is unknown may run again, under the same key)."""

    async def pay(ctx: Context, amount: int):
        yield elicit(f"Pay {amount}?", CONFIRM)
        receipt = yield step(ledger.charge, amount, retry=retry)
        yield done(receipt)

    return pay


class Payment:
    """A payment flow that has had its first round: its runtime, its ledger and the token a
    client holds, which [present][tests.flows.Payment.present] sends (again)."""

    def __init__(
        self, runtime: Runtime, ledger: Ledger, amount: int = 5, retry: bool = False
    ) -> None:
        self.runtime = runtime
        self.ledger = ledger
        self.flow = payment(ledger, retry)
        self.amount = amount
        self.token = ""

    async def start(self) -> Payment:
        """Another first call (another flow with the same arguments): its round-1 token."""
        first = await self.runtime.advance(self.flow, {"amount": self.amount})
        assert isinstance(first, InputRequired) and first.request_state is not None
        self.token = first.request_state
        return self

    async def present(self, answers: Any = YES, token: str | None = None) -> Any:
        """Answer round 1 with *token* (this flow's by default); the flow's value."""
        out = await self.runtime.advance(
            self.flow,
            {"amount": self.amount},
            input_responses=answers,
            request_state=self.token if token is None else token,
        )
        assert isinstance(out, Complete)
        return out.value


async def paying(
    runtime: Runtime, ledger: Ledger | None = None, amount: int = 5, *, retry: bool = False
) -> Payment:
    """A payment flow on *runtime* after its first round."""
    return await Payment(runtime, ledger or Ledger(), amount, retry).start()
