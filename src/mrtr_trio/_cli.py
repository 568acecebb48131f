"""The ``mrtr-trio`` command line: ``serve`` an App from a file, or run the ``demo``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import trio

__all__ = ["load_app", "main"]


def load_app(target: str) -> Any:
    """The App named by ``path/to/file.py:attribute`` (``:app`` when omitted)."""
    from .mcp import App

    path_text, _, attribute = target.partition(":")
    path = Path(path_text)
    if not path.is_file():
        raise SystemExit(f"mrtr-trio: no such file: {path}")
    module_name = f"mrtr_trio_app_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"mrtr-trio: cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    app = getattr(module, attribute or "app", None)
    if not isinstance(app, App):
        raise SystemExit(
            f"mrtr-trio: {path}:{attribute or 'app'} is not a mrtr_trio.mcp.App "
            f"(got {type(app).__name__})"
        )
    return app


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


async def _serve_http(app: Any, host: str, port: int) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(app.serve_http, host, port)
        print(f"mrtr-trio: serving {app.name!r} on {url}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``mrtr-trio`` console script."""
    parser = argparse.ArgumentParser(prog="mrtr-trio", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve an App over stdio (default) or HTTP")
    serve.add_argument("target", help="path/to/file.py:app")
    serve.add_argument("--http", metavar="HOST:PORT", type=_host_port, help="serve HTTP here")
    commands.add_parser("demo", help="run an example App against the official client")
    args = parser.parse_args(argv)

    if args.command == "demo":
        from .mcp._demo import run_demo

        trio.run(run_demo)
        return
    app = load_app(args.target)
    try:
        if args.http is None:
            trio.run(app.serve_stdio)
        else:
            trio.run(_serve_http, app, *args.http)
    except* KeyboardInterrupt:  # Ctrl-C: stop quietly, however deep in the task tree
        pass


if __name__ == "__main__":
    main()
