"""A fixed test key, and the testing runners bound to one runtime (what the pytest fixtures
hand out)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._runtime import Runtime
from ._eras import assert_eras_agree
from ._recorded import RecordedState, ReplayReport, replay_recorded
from ._runners import AnswerFunction, run_live, run_modern

__all__ = ["TEST_KEY", "Runner"]

#: A fixed 32-byte signing key for tests: tokens minted under it are reproducible. Never use
#: it in production.
TEST_KEY = b"mrtr_trio.testing key: not a secret"


class Runner:
    """[run_modern][mrtr_trio.testing.run_modern], [run_live][mrtr_trio.testing.run_live],
    [assert_eras_agree][mrtr_trio.testing.assert_eras_agree] and
    [replay_recorded][mrtr_trio.testing.replay_recorded] bound to one [Runtime][mrtr_trio.Runtime].

    *replay_check* is the default of the same argument of [run_modern][mrtr_trio.testing.run_modern]
    and [assert_eras_agree][mrtr_trio.testing.assert_eras_agree] (on by default here: this is the
    strict runner).
    """

    def __init__(self, runtime: Runtime, *, replay_check: bool = True) -> None:
        self.runtime = runtime
        self.replay_check = replay_check

    def __repr__(self) -> str:
        return f"Runner({self.runtime!r}, replay_check={self.replay_check})"

    async def run_modern(
        self,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        answer: AnswerFunction,
        *,
        client_capabilities: Mapping[str, Any] | None = None,
        on_round: Callable[[int, Any], Awaitable[None] | None] | None = None,
        replay_check: bool | None = None,
    ) -> Any:
        """[run_modern][mrtr_trio.testing.run_modern] on this runner's runtime."""
        return await run_modern(
            handler,
            arguments,
            answer,
            runtime=self.runtime,
            client_capabilities=client_capabilities,
            on_round=on_round,
            replay_check=self.replay_check if replay_check is None else replay_check,
        )

    async def run_live(
        self,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        answer: AnswerFunction,
        *,
        client_capabilities: Mapping[str, Any] | None = None,
    ) -> Any:
        """[run_live][mrtr_trio.testing.run_live] on this runner's runtime."""
        return await run_live(
            handler,
            arguments,
            answer,
            runtime=self.runtime,
            client_capabilities=client_capabilities,
        )

    async def assert_eras_agree(
        self,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        answer: AnswerFunction,
        *,
        client_capabilities: Mapping[str, Any] | None = None,
        replay_check: bool | None = None,
    ) -> Any:
        """[assert_eras_agree][mrtr_trio.testing.assert_eras_agree] on this runner's runtime."""
        return await assert_eras_agree(
            handler,
            arguments,
            answer,
            runtime=self.runtime,
            client_capabilities=client_capabilities,
            replay_check=self.replay_check if replay_check is None else replay_check,
        )

    async def replay_recorded(
        self, handler: Callable[..., Any], recorded: Iterable[RecordedState]
    ) -> list[ReplayReport]:
        """[replay_recorded][mrtr_trio.testing.replay_recorded] with this runner's keys."""
        return await replay_recorded(handler, recorded, runtime=self.runtime)
