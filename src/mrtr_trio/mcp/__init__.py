"""The MCP server: serve mrtr_trio handlers to real clients in both eras.

[App][mrtr_trio.mcp.App] is hosted on the official `mcp` SDK's low-level server, under trio,
over stdio or Streamable HTTP (hypercorn's trio worker). Tools may become tasks under the tasks
extension ([background][mrtr_trio.mcp.background], [TaskStore][mrtr_trio.mcp.TaskStore]).
"""

from .._util import fixup_module_metadata
from ._app import App
from ._tasks import TASKS_EXTENSION, background
from ._taskstore import MemoryTaskStore, TaskRecord, TaskStore, TaskStoreFull

__all__ = [
    "App",
    "MemoryTaskStore",
    "TASKS_EXTENSION",
    "TaskRecord",
    "TaskStore",
    "TaskStoreFull",
    "background",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata
