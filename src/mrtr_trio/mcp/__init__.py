"""The MCP server: serve mrtr_trio handlers to real clients in both eras.

:class:`App` is hosted on the official ``mcp`` SDK's low-level server, under trio, over stdio or
Streamable HTTP (hypercorn's trio worker).
"""

from ._app import App

__all__ = ["App"]
