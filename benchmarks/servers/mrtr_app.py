"""(a) The trip served by mrtr_trio: one `App` whose tools are the handlers of
[benchmarks.flows][], the same code for both eras."""

from __future__ import annotations

import secrets
from typing import Any

import trio
from mcp.server.lowlevel import Server

from mrtr_trio import Runtime
from mrtr_trio.mcp import App

from .. import core, flows

__all__ = ["build", "target", "serve_http", "serve_stdio"]


def build(survey_questions: int = 0) -> App:
    """The App; with *survey_questions*, knobs large enough for that long a survey."""
    if survey_questions:
        runtime = core.survey_runtime(survey_questions)
    else:
        runtime = Runtime([secrets.token_bytes(32)])
    app = App("trip", version="1.0", runtime=runtime)
    app.tool()(flows.trip)
    app.tool()(flows.survey)
    return app


def target(survey_questions: int = 0) -> Server[Any]:
    """What an in-process ``mcp.Client`` connects to: the SDK server under the App."""
    return build(survey_questions).server


async def serve_stdio() -> None:
    await build().serve_stdio()


async def serve_http(task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    await build().serve_http("127.0.0.1", 0, task_status=task_status)
