"""The live driver: a whole flow on a legacy (2025-era) session, the handler kept alive.

Each ask becomes real server-to-client requests through the host's ``ask(key, request)``; a
batch fans out concurrently in a trio nursery under ``trio.fail_after(round_timeout)``, and the
first failure cancels its siblings and is re-raised alone (never as an ``ExceptionGroup``).
Return-style handlers run on the legacy shim: re-entered with their answers, paced by
``state_only_pacing`` between state-only rounds. The flow is closed on every exit path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ._context import Context, Host
from ._drive import Settings, check_capabilities, check_round_budget, resume, run_step
from ._errors import BackChannelUnavailable, MrtrError, RoundTimeout
from ._flow import (
    Ask,
    Finished,
    Flow,
    Need,
    RunStep,
    Wait,
    collect_answers,
    handler_name,
    open_flow,
)
from ._values import Answer, Request

__all__ = ["AskFunction", "run_live"]

#: ``await ask(key, request)`` performs one server-to-client request and returns the answer
#: (an answer object or the client's JSON).
AskFunction = Callable[[str, Request], Awaitable[Any]]


async def run_live(
    settings: Settings,
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    ask: AskFunction | None,
    client_capabilities: Mapping[str, Any] | None,
    host: Host | None = None,
) -> Any:
    """Run *handler* to completion on a live session and return its value.

    ``ask=None`` means the session has no back channel: asks fail with
    :class:`BackChannelUnavailable` (before any capability check), steps and pauses work.
    """
    session = _LiveSession(settings, handler_name(handler), ask, client_capabilities)
    ctx = Context("legacy", client_capabilities, push=session.push, host=host)
    flow = open_flow(handler, ctx, arguments)
    try:
        need = await resume(flow, None, first=True)
        while not isinstance(need, Finished):
            need = await resume(flow, await session.meet(flow, need))
        return need.value
    finally:
        await flow.aclose()


class _LiveSession:
    """Meets a live flow's needs and counts its round trips."""

    def __init__(
        self,
        settings: Settings,
        name: str,
        ask: AskFunction | None,
        client_capabilities: Mapping[str, Any] | None,
    ) -> None:
        self.settings = settings
        self.name = name
        self._ask = ask
        self._capabilities = client_capabilities
        self._rounds = 0

    async def meet(self, flow: Flow, need: Need) -> Any:
        if isinstance(need, RunStep):
            return await run_step(need)
        if not flow.replayable and not self.settings.legacy_shim:
            raise MrtrError(
                f"{flow.name} returned input_required() on a legacy session, but the runtime "
                "has legacy_shim=False: enable the shim, or write the handler in yield style"
            )
        if isinstance(need, Ask):
            return await self.ask_all(need.requests)
        assert isinstance(need, Wait)
        if not flow.replayable:  # the shim's state-only round: a paced round trip
            self._count_round()
            await trio.sleep(self.settings.state_only_pacing)
        return None  # a yield-style pause() continues at once and costs no round

    async def push(self, key: str, request: Request) -> Answer:
        """A push-style ``ctx.elicit(...)`` and friends: one request, asked like any other."""
        return (await self.ask_all({key: request}))[key]

    async def ask_all(self, requests: Mapping[str, Request]) -> dict[str, Answer]:
        """Ask until every request has a valid answer (re-asking schema-invalid ones)."""
        if self._ask is None:
            kinds = ", ".join(sorted({r.method for r in requests.values()}))
            raise BackChannelUnavailable(
                f"{self.name} asked the client ({kinds}), but this legacy session has no back "
                "channel for server-to-client requests (stateless or JSON-response HTTP). Serve "
                "Streamable HTTP with stateless=False and json_response=False, or connect with "
                "MCP 2026-07-28, where the same handler asks through input_required results."
            )
        check_capabilities(self.name, requests.values(), self._capabilities)
        answers: dict[str, Answer] = {}
        todo = dict(requests)
        while todo:
            self._count_round()
            answers, todo = collect_answers(requests, answers, await self._fan_out(todo))
        return answers

    def _count_round(self) -> None:
        check_round_budget(self.name, self._rounds, self.settings)
        self._rounds += 1

    async def _fan_out(self, requests: Mapping[str, Request]) -> dict[str, Any]:
        results: dict[str, Any] = {}
        failure: BaseException | None = None
        ask = self._ask
        assert ask is not None

        async def ask_one(key: str, request: Request, cancel_scope: trio.CancelScope) -> None:
            nonlocal failure
            try:
                results[key] = await ask(key, request)
            except Exception as error:
                if failure is None:
                    failure = error
                cancel_scope.cancel()

        try:
            with trio.fail_after(self.settings.round_timeout):
                async with trio.open_nursery() as nursery:
                    for key, request in requests.items():
                        nursery.start_soon(ask_one, key, request, nursery.cancel_scope)
        except trio.TooSlowError:
            raise RoundTimeout(
                f"{self.name}: the client did not answer round {self._rounds} "
                f"({', '.join(requests)}) within round_timeout={self.settings.round_timeout} s"
            ) from None
        if failure is not None:
            raise failure
        return results
