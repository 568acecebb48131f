"""The trip flow served three ways, for the side-by-side benchmarks.

- ``mrtr_trio`` ([benchmarks.servers.mrtr_app][]): an `mrtr_trio.mcp.App` whose tools are the
  handlers of [benchmarks.flows][], written once for both eras;
- ``sdk-resolve`` ([benchmarks.servers.sdk_resolve][]): the official SDK's `MCPServer`, each
  question a `Resolve` resolver depending on the one before;
- ``sdk-handbuilt`` ([benchmarks.servers.sdk_handbuilt][]): the SDK's low-level `Server` with
  a hand-written state machine: `InputRequiredResult` rounds whose JSON state is sealed by the
  SDK's `RequestStateBoundary` on 2026-07-28, three `elicit_form` calls on a legacy session.

Each serves the tools ``trip(traveller)`` (three questions) and ``survey`` (*n* questions in a
row, for journals of any length) with the same messages, schemas and results.
``python -m benchmarks.servers IMPL stdio|http`` runs one as a server process.
"""

from __future__ import annotations

from types import ModuleType

from . import mrtr_app, sdk_handbuilt, sdk_resolve

__all__ = ["IMPLEMENTATIONS"]

#: name -> the module that builds it. Each module has ``build(survey_questions=0)``,
#: ``target(survey_questions=0)`` (what an in-process ``mcp.Client`` connects to),
#: ``serve_stdio()`` and ``serve_http(task_status)``.
IMPLEMENTATIONS: dict[str, ModuleType] = {
    "mrtr_trio": mrtr_app,
    "sdk-resolve": sdk_resolve,
    "sdk-handbuilt": sdk_handbuilt,
}
