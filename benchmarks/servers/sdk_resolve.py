"""(b) The trip served by the official SDK's `MCPServer`, each question a `Resolve` resolver.

Resolvers run as a dependency chain, so the questions come one per round on 2026-07-28 (each
round re-runs the chain; answers recorded so far ride in the `requestState` the SDK seals with
its default `RequestStateBoundary`), and as real `elicitation/create` requests inside the one
call on a legacy session. The survey of *n* questions is a chain of *n* resolvers.

No ``from __future__ import annotations`` here: the SDK reads the resolvers' annotations, and
the survey's are built at run time.
"""

import sys
from typing import Annotated, Any

import trio
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from pydantic import BaseModel, Field

from mrtr_trio.mcp import _transports as transports

from .. import flows

__all__ = ["build", "target", "serve_http", "serve_stdio"]


class Destination(BaseModel):
    city: str = Field(description="City")


class Dates(BaseModel):
    start: str = Field(description="First day (YYYY-MM-DD)")
    nights: int = Field(ge=1)


class Confirm(BaseModel):
    confirm: bool


class Count(BaseModel):
    v: int


async def ask_destination(traveller: str) -> Elicit[Destination]:
    return Elicit(f"Where to, {traveller}?", Destination)


async def ask_dates(where: Annotated[Destination, Resolve(ask_destination)]) -> Elicit[Dates]:
    return Elicit(f"When do you go to {where.city}?", Dates)


async def ask_confirm(
    where: Annotated[Destination, Resolve(ask_destination)],
    when: Annotated[Dates, Resolve(ask_dates)],
) -> Elicit[Confirm]:
    return Elicit(f"Book {where.city} from {when.start} for {when.nights} nights?", Confirm)


async def trip(
    traveller: str,
    where: Annotated[Destination, Resolve(ask_destination)],
    when: Annotated[Dates, Resolve(ask_dates)],
    ok: Annotated[Confirm, Resolve(ask_confirm)],
) -> str:
    """Book a trip: where, when, and a confirmation."""
    if not ok.confirm:
        return "Cancelled"
    return flows.booking(traveller, where.city, when.start, when.nights)


def _survey_chain(n: int) -> Any:
    """The survey tool: *n* resolvers, each asking once the one before it has its answer."""
    previous: Any = None
    for i in range(n):
        previous = _question(i, previous)
    last = previous

    async def survey(answers: Annotated[Count, Resolve(last)]) -> str:
        return str(n)

    return survey


def _question(i: int, previous: Any) -> Any:
    if previous is None:

        async def first() -> Elicit[Count]:
            return Elicit(f"Question {i}?", Count)

        return first

    async def then(before: Annotated[Count, Resolve(previous)]) -> Elicit[Count]:
        return Elicit(f"Question {i}?", Count)

    return then


def build(survey_questions: int = 0) -> MCPServer:
    """The server; with *survey_questions*, a ``survey`` tool of that many resolvers."""
    # WARNING, not the SDK's default INFO: (b) is measured without a log line per request.
    server = MCPServer("trip", version="1.0", log_level="WARNING")
    server.tool()(trip)
    if survey_questions:
        # The SDK resolves a chain recursively, one Python frame per resolver.
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * survey_questions + 1000))
        server.tool(name="survey")(_survey_chain(survey_questions))
    return server


def target(survey_questions: int = 0) -> MCPServer:
    """What an in-process ``mcp.Client`` connects to."""
    return build(survey_questions)


async def serve_stdio() -> None:
    await build().run_stdio_async()


async def serve_http(task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the SDK's `streamable_http_app()`, as it comes, on a free loopback port with
    `mrtr_trio.mcp`'s hypercorn settings (those of `App.serve_http`; the App's ASGI stack
    differs, see [benchmarks.servers.__main__][])."""
    await transports.serve_http(
        build().streamable_http_app(), "127.0.0.1", 0, "/mcp", task_status=task_status
    )
