"""The ``mrtr-trio`` command line: ``serve`` an App from a file, or run the ``demo``."""

from __future__ import annotations

import argparse
import functools
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


async def _serve_http(app: Any, host: str, port: int, limits: dict[str, Any]) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(functools.partial(app.serve_http, host, port, **limits))
        print(f"mrtr-trio: serving {app.name!r} on {url}", file=sys.stderr, flush=True)


def _add_http_limits(serve: argparse.ArgumentParser) -> None:
    from .mcp import _transports as t

    limits = serve.add_argument_group("HTTP limits (see docs/reliability.md)")
    limits.add_argument(
        "--backlog", type=int, default=t.BACKLOG, help="listen queue (default %(default)s)"
    )
    limits.add_argument(
        "--max-body-size",
        type=int,
        default=t.MAX_BODY_SIZE,
        metavar="BYTES",
        help="largest request body (default %(default)s)",
    )
    limits.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=t.KEEP_ALIVE_TIMEOUT,
        metavar="SECONDS",
        help="idle connection lifetime (default %(default)s)",
    )
    limits.add_argument(
        "--session-idle-timeout",
        type=float,
        default=t.SESSION_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="close a legacy session idle this long (default %(default)s)",
    )
    limits.add_argument(
        "--max-sessions",
        type=int,
        default=t.MAX_SESSIONS,
        help="legacy sessions open at once (default %(default)s)",
    )


_LIMITS = ("backlog", "max_body_size", "keep_alive_timeout", "session_idle_timeout", "max_sessions")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``mrtr-trio`` console script."""
    parser = argparse.ArgumentParser(prog="mrtr-trio", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve an App over stdio (default) or HTTP")
    serve.add_argument("target", help="path/to/file.py:app")
    serve.add_argument("--http", metavar="HOST:PORT", type=_host_port, help="serve HTTP here")
    _add_http_limits(serve)
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
            host, port = args.http
            limits = {name: getattr(args, name) for name in _LIMITS}
            trio.run(_serve_http, app, host, port, limits)
    except* KeyboardInterrupt:  # Ctrl-C: stop quietly, however deep in the task tree
        pass


if __name__ == "__main__":
    main()
