"""Step and poll identity: what a replay compares a `step` or `poll` with, so that a changed
release (charge became refund), two lambdas or a partial and its function are told apart."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from mrtr_trio import (
    Complete,
    Context,
    InputRequired,
    NondeterminismError,
    Runtime,
    done,
    elicit,
    poll,
    step,
)
from mrtr_trio._journal import step_fingerprint, step_identity
from mrtr_trio._values import FINGERPRINT_BYTES

from .flows import CONFIRM

KEY = b"i" * 32
YES = {"input-0": {"action": "accept", "content": {"confirm": True}}}
ran: list[str] = []


def charge(amount: int = 5) -> str:
    ran.append("charge")
    return f"charged {amount}"


def refund(amount: int = 5) -> str:
    ran.append("refund")
    return f"refunded {amount}"


# The step each "release" of the handler runs: tests swap it between the two rounds of a flow.
release: list[Callable[..., Any]] = [charge]
names: list[str | None] = [None]


async def pay(ctx: Context):
    receipt = yield step(release[0], name=names[0])
    yield elicit("Confirm?", CONFIRM)
    yield done(receipt)


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()
    release[:] = [charge]
    names[:] = [None]


async def first_round(runtime: Runtime) -> str:
    out = await runtime.advance(pay, {})
    assert isinstance(out, InputRequired) and out.request_state is not None
    return out.request_state


async def retry(runtime: Runtime, token: str) -> Complete | InputRequired:
    return await runtime.advance(pay, {}, input_responses=YES, request_state=token)


# ------------------------------------------------------------------- a changed release


async def test_a_step_that_became_another_function_is_a_divergence_under_strict() -> None:
    runtime = Runtime([KEY], replay="strict")
    token = await first_round(runtime)
    release[:] = [refund]  # the next release refunds where the last one charged
    with pytest.raises(NondeterminismError) as caught:
        await retry(runtime, token)
    assert "refund" in str(caught.value) and caught.value.current == {"step": "refund"}
    assert ran == ["charge"]  # refund never ran, and never got charge's value


async def test_a_step_that_became_another_function_runs_live_under_reask() -> None:
    runtime = Runtime([KEY])
    token = await first_round(runtime)
    release[:] = [refund]
    out = await retry(runtime, token)
    # The journal is cut at the step: refund runs (it never ran for this identity), and the
    # ask after it is asked again rather than answered with an answer given to charge's flow.
    assert ran == ["charge", "refund"]
    assert isinstance(out, InputRequired) and list(out.input_requests) == ["input-0"]
    done_ = await runtime.advance(pay, {}, input_responses=YES, request_state=out.request_state)
    assert done_ == Complete("refunded 5")


async def test_the_same_step_replays_its_recorded_value() -> None:
    runtime = Runtime([KEY], replay="strict")
    token = await first_round(runtime)
    assert await retry(runtime, token) == Complete("charged 5")
    assert ran == ["charge"]


# ------------------------------------------------------------ lambdas, partials, closures


def _two_lambdas() -> tuple[Callable[[], str], Callable[[], str]]:
    return (lambda: "a"), (lambda: "b")  # on one line: told apart by their column


def _closure(tag: str) -> Callable[[], str]:
    def inner() -> str:
        return tag

    return inner


def _other_closure(tag: str) -> Callable[[], str]:
    def inner() -> str:
        return tag + "!"

    return inner


def test_two_lambdas_on_one_line_have_different_identities() -> None:
    a, b = _two_lambdas()
    assert a.__qualname__ == b.__qualname__
    assert step_identity(a) != step_identity(b)
    assert step_fingerprint(a) != step_fingerprint(b)


def test_a_partial_and_its_function_have_different_identities() -> None:
    assert step_identity(functools.partial(charge, 5)) == "partial(charge)"
    assert step_identity(charge) == "charge"
    assert step_fingerprint(functools.partial(charge, 5)) != step_fingerprint(charge)
    # The partial's bound arguments are arguments, which may vary: not part of the identity.
    assert step_fingerprint(functools.partial(charge, 6)) == step_fingerprint(
        functools.partial(charge, 5)
    )


def test_closures_of_the_same_name_from_different_factories_differ() -> None:
    one, other = _closure("x"), _other_closure("x")
    assert one.__qualname__.endswith("inner") and other.__qualname__.endswith("inner")
    assert step_identity(one) != step_identity(other)
    # The same factory's closures are the same step (like one function with other arguments).
    assert step_identity(_closure("y")) == step_identity(one)


def test_identity_is_the_qualname_not_the_module() -> None:
    assert step_identity(charge) == "charge"
    assert step_identity(Runtime.advance) == "Runtime.advance"


def test_an_explicit_name_is_the_identity() -> None:
    a, b = _two_lambdas()
    assert step_identity(a, "charge") == step_identity(b, "charge") == "charge"
    assert step_fingerprint(a, "charge") == step_fingerprint(b, "charge")
    # Naming a step after its function keeps the identity it had.
    assert step_fingerprint(charge, "charge") == step_fingerprint(charge)


def test_names_are_checked() -> None:
    with pytest.raises(TypeError, match="name"):
        step(charge, name="")
    with pytest.raises(TypeError, match="name"):
        poll(charge, name=3)  # type: ignore[arg-type]


async def test_a_lambda_swapped_for_another_lambda_is_a_divergence() -> None:
    a, b = _two_lambdas()
    runtime = Runtime([KEY], replay="strict")
    release[:] = [a]
    token = await first_round(runtime)
    release[:] = [b]
    with pytest.raises(NondeterminismError):
        await retry(runtime, token)


async def test_a_partial_swapped_for_its_function_is_a_divergence() -> None:
    runtime = Runtime([KEY], replay="strict")
    release[:] = [functools.partial(charge, 5)]
    token = await first_round(runtime)
    release[:] = [charge]
    with pytest.raises(NondeterminismError):
        await retry(runtime, token)


async def test_a_named_lambda_keeps_its_identity_when_its_code_moves() -> None:
    a, b = _two_lambdas()
    runtime = Runtime([KEY], replay="strict")
    release[:], names[:] = [a], ["pick"]
    token = await first_round(runtime)
    release[:] = [b]  # another location, the same name: the recorded value replays
    assert await retry(runtime, token) == Complete("a")


def test_fingerprints_carry_a_64_bit_digest() -> None:
    assert FINGERPRINT_BYTES == 9
    assert len(step_fingerprint(charge)) == FINGERPRINT_BYTES
    assert len(elicit("Confirm?", CONFIRM).fingerprint) == FINGERPRINT_BYTES


# ------------------------------------------------------------------------------- polls

ready: list[Callable[..., Any]] = []


def charge_settled() -> str | None:
    return "settled"


def refund_settled() -> str | None:
    return "refund settled"


def never() -> None:
    return None


def not_yet() -> None:
    return None


async def waiting(ctx: Context):
    value = yield poll(ready[0], every=1.0)
    yield elicit("Confirm?", CONFIRM)
    yield done(value)


async def test_a_journaled_poll_that_became_another_is_a_divergence() -> None:
    runtime = Runtime([KEY], replay="strict")
    ready[:] = [charge_settled]
    out = await runtime.advance(waiting, {})
    assert isinstance(out, InputRequired) and out.request_state is not None
    ready[:] = [refund_settled]
    with pytest.raises(NondeterminismError) as caught:
        await runtime.advance(waiting, {}, input_responses=YES, request_state=out.request_state)
    assert caught.value.current == {"poll": "refund_settled"}


async def test_a_pending_poll_that_became_another_is_a_divergence() -> None:
    runtime = Runtime([KEY], replay="strict")
    ready[:] = [never]
    out = await runtime.advance(waiting, {})
    assert isinstance(out, InputRequired) and not out.input_requests  # waiting on the poll
    ready[:] = [not_yet]
    with pytest.raises(NondeterminismError):
        await runtime.advance(waiting, {}, request_state=out.request_state)
