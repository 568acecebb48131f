"""The `mrtr-trio` command line: `serve` an App from a file, make a signing key with `keygen`,
read a `requestState` with `inspect`, or run the `demo`."""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from ._keys import ENVIRONMENT_VARIABLE, environment_keys, generate_key

__all__ = ["auth_from", "load_app", "main"]

DESCRIPTION = """\
Serve mrtr_trio apps over MCP.

  mrtr-trio serve server.py               serve server.py's `app` on stdio
  mrtr-trio serve server.py:api --http 127.0.0.1:8000
                                          serve its `api` on http://127.0.0.1:8000/mcp
  mrtr-trio serve server.py --http 0.0.0.0:8000 --resource https://mcp.example.com/mcp \
      --auth-issuer https://auth.example.com --auth-jwks https://auth.example.com/jwks \
      --scope mcp:tools                   the same, asking every request for a bearer token
  mrtr-trio keygen                        print a fresh signing key for MRTR_TRIO_KEYS
  mrtr-trio inspect TOKEN                 verify a requestState and print what it holds
  mrtr-trio demo                          serve an example app and drive it in both eras
"""

SERVE_DESCRIPTION = """\
Import an App from a Python file and serve it, over stdio unless --http is given.

The file is imported (not run as __main__), so a call to app.run() in it must be under
`if __name__ == "__main__":`; serve refuses to start if importing the file starts a server.
Signing keys come from the App's Runtime, or from MRTR_TRIO_KEYS (comma-separated, the first
signs; make one with `mrtr-trio keygen`). Logs go to stderr.

Bearer tokens (HTTP only; docs/security.md): --resource, --auth-issuer and --auth-jwks
together (or MRTR_TRIO_RESOURCE, MRTR_TRIO_AUTH_ISSUER, MRTR_TRIO_AUTH_JWKS) make every
request need a JWT access token from that issuer for that resource; --scope (repeatable, or
MRTR_TRIO_SCOPES, space-separated) names the scopes every request needs. They replace an
auth the App was built with; serve refuses to start with only some of them.
"""

#: Environment variables of the auth options (the option wins over its variable).
AUTH_ENVIRONMENT = {
    "resource": "MRTR_TRIO_RESOURCE",
    "auth_issuer": "MRTR_TRIO_AUTH_ISSUER",
    "auth_jwks": "MRTR_TRIO_AUTH_JWKS",
    "scope": "MRTR_TRIO_SCOPES",
}
INSPECT_DESCRIPTION = """\
Verify a requestState with the signing keys and print what it holds, to debug a stuck flow:
the flow id, format, key id, issue and expiry times, every journal entry with its kind,
fingerprint and recorded value (answers, step results), the pending ask, and the return-style
payload. Keys are never printed.

The keys are MRTR_TRIO_KEYS's, or those given with --key. The token's tag covers the call it was
minted for, which the token does not carry: alone, a signed token is checked by its 16-bit body
check only, and an encrypted one cannot be opened. Name the call (--app with --tool, --prompt or
--resource, and --arguments) to verify the tag as the server does, open an encrypted token, and
see the binding digest and each recorded step's idempotency key. Exit status 1, with the reason,
when the token does not verify.
"""

#: Said on stderr when `serve` runs on stdio with a terminal as stdin: nothing else is printed
#: until a client writes JSON-RPC, so it would look hung.
STDIO_ON_A_TERMINAL = """\
mrtr-trio: serving {name!r} over stdio: it reads MCP JSON-RPC messages from stdin and writes
them to stdout, so it waits silently for a client. An MCP client runs this command itself (its
stdio configuration: the command, the file and MRTR_TRIO_KEYS); to call it from other
processes, serve HTTP instead: --http 127.0.0.1:8000. Ctrl-C stops it."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def load_app(target: str) -> Any:
    """The App named by `path/to/file.py:attribute` (`:app` when omitted); `SystemExit` with
    a message saying what is wrong otherwise."""
    from .mcp import App
    from .mcp._transports import ServingDuringImport, importing

    path_text, _, attribute = target.partition(":")
    attribute = attribute or "app"
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
    try:
        with importing(str(path)):
            spec.loader.exec_module(module)
    except ServingDuringImport as error:
        raise SystemExit(
            f"mrtr-trio: importing {path} started a server{_where(error, path)}. "
            "`mrtr-trio serve` serves the app itself: put that call under "
            '`if __name__ == "__main__":`.'
        ) from None
    if not hasattr(module, attribute):
        apps = [name for name, value in vars(module).items() if isinstance(value, App)]
        hint = f" (it has {', '.join(f'{path}:{name}' for name in apps)})" if apps else ""
        raise SystemExit(f"mrtr-trio: {path} has no attribute {attribute!r}{hint}")
    app = getattr(module, attribute)
    if not isinstance(app, App):
        raise SystemExit(
            f"mrtr-trio: {path}:{attribute} is not a mrtr_trio.mcp.App "
            f"(its type is {type(app).__name__})"
        )
    return app


def _where(error: BaseException, path: Path) -> str:
    """`" (line N: code)"`: the line of *path* that raised *error*, if any."""
    resolved = path.resolve()
    lines = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename).resolve() == resolved
    ]
    return f" (line {lines[-1].lineno}: {lines[-1].line})" if lines else ""


async def check_step_store(store: Any, required: bool = True) -> None:
    """Check the runtime's step store once, before serving: a line in the log when it answers
    (and a warning when it is a Redis that keeps nothing across a restart); when it does not,
    `SystemExit` saying so (*required*), or a warning."""
    from ._errors import StepStoreUnavailable
    from ._steps import probe_store

    log = logging.getLogger("mrtr_trio")
    try:
        await probe_store(store)
    except StepStoreUnavailable as error:
        if required:
            raise SystemExit(
                f"mrtr-trio: {error}. Start it (docs/exactly-once.md says how), or pass "
                "--no-store-check to serve anyway (steps then fail until it answers)"
            ) from None
        log.warning("%s; serving anyway (--no-store-check): steps fail until it answers", error)
        return
    log.info("step store %r answers", store)
    check = getattr(store, "persistence_problem", None)
    if check is not None:
        try:
            problem = await check()
        except Exception as error:  # a check that cannot run is no reason not to serve
            log.debug("could not read the step store's persistence settings: %r", error)
            return
        if problem is not None:
            log.warning("step store %r: %s", store, problem)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


async def _serve_http(app: Any, host: str, port: int, limits: dict[str, Any]) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(functools.partial(app.serve_http, host, port, **limits))
        print(f"mrtr-trio: serving {app.name!r} on {url}", file=sys.stderr, flush=True)


def configure_logging(level: str) -> None:
    """Log to stderr (stdout carries the stdio transport): mrtr_trio's loggers from *level* up,
    every other library's from WARNING up, so that their routine lines (the SDK announces each
    session manager start at INFO) do not bury the line per call."""
    numeric = logging.getLevelNamesMapping()[level]
    logging.basicConfig(
        level=max(numeric, logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    logging.getLogger("mrtr_trio").setLevel(numeric)


def _add_http_limits(serve: argparse.ArgumentParser) -> None:
    """Add the HTTP limit options to *serve*; `args.http_limits` names their destinations (each
    a keyword of `App.serve_http`)."""
    from .mcp import _transports as t

    limits = serve.add_argument_group("HTTP limits (see docs/reliability.md)")
    added = [
        limits.add_argument(
            "--backlog", type=int, default=t.BACKLOG, help="listen queue (default %(default)s)"
        ),
        limits.add_argument(
            "--max-body-size",
            type=int,
            default=t.MAX_BODY_SIZE,
            metavar="BYTES",
            help="largest request body (default %(default)s)",
        ),
        limits.add_argument(
            "--keep-alive-timeout",
            type=float,
            default=t.KEEP_ALIVE_TIMEOUT,
            metavar="SECONDS",
            help="idle connection lifetime (default %(default)s)",
        ),
        limits.add_argument(
            "--session-idle-timeout",
            type=float,
            default=t.SESSION_IDLE_TIMEOUT,
            metavar="SECONDS",
            help="close a legacy session idle this long (default %(default)s)",
        ),
        limits.add_argument(
            "--max-sessions",
            type=int,
            default=t.MAX_SESSIONS,
            help="legacy sessions open at once (default %(default)s)",
        ),
        limits.add_argument(
            "--max-sessions-per-client",
            type=int,
            default=t.MAX_SESSIONS_PER_CLIENT,
            help="legacy sessions one client address holds at once (default %(default)s)",
        ),
        limits.add_argument(
            "--session-first-use-timeout",
            type=float,
            default=t.FIRST_USE_TIMEOUT,
            metavar="SECONDS",
            help="close a legacy session unused this long after initialize when room is"
            " needed (default %(default)s)",
        ),
        limits.add_argument(
            "--max-buffered-bytes",
            type=int,
            default=t.MAX_BUFFERED_BYTES,
            metavar="BYTES",
            help="request bodies held at once, all requests together (default %(default)s)",
        ),
    ]
    serve.set_defaults(http_limits=tuple(action.dest for action in added))


def _add_auth(serve: argparse.ArgumentParser) -> None:
    """Add the bearer-token options to *serve*."""
    auth = serve.add_argument_group("bearer tokens (HTTP only; see docs/security.md)")
    auth.add_argument(
        "--resource",
        metavar="URL",
        help="this server's URL as clients reach it, the tokens' audience "
        f"(${AUTH_ENVIRONMENT['resource']})",
    )
    auth.add_argument(
        "--auth-issuer",
        metavar="URL",
        help=f"the authorization server's issuer (${AUTH_ENVIRONMENT['auth_issuer']})",
    )
    auth.add_argument(
        "--auth-jwks",
        metavar="URL",
        help=f"the issuer's JWKS URL (${AUTH_ENVIRONMENT['auth_jwks']})",
    )
    auth.add_argument(
        "--scope",
        action="append",
        metavar="SCOPE",
        help="a scope every request needs; repeatable "
        f"(${AUTH_ENVIRONMENT['scope']}, space-separated)",
    )


def auth_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Any:
    """The [Auth][mrtr_trio.auth.Auth] the options (or their environment variables) ask for,
    or `None` when none is given; `SystemExit` naming what is missing when only some are."""
    values = {name: getattr(args, name) for name in AUTH_ENVIRONMENT}
    for name, variable in AUTH_ENVIRONMENT.items():
        if values[name] is None and environ.get(variable):
            text = environ[variable]
            values[name] = text.split() if name == "scope" else text
    given = [name for name, value in values.items() if value]
    if not given:
        return None
    needed = ("resource", "auth_issuer", "auth_jwks")
    missing = [name for name in needed if not values[name]]
    if missing:
        flags = ", ".join(f"--{n.replace('_', '-')} (${AUTH_ENVIRONMENT[n]})" for n in missing)
        raise SystemExit(f"mrtr-trio: bearer tokens need {flags} too; refusing to start")
    if args.http is None:
        raise SystemExit(
            "mrtr-trio: bearer tokens are for HTTP (--http HOST:PORT); stdio serves a local "
            "process and is not authenticated"
        )
    from .auth import Auth, JWTVerifier

    try:
        verifier = JWTVerifier(
            values["auth_jwks"], issuer=values["auth_issuer"], audience=values["resource"]
        )
        return Auth(
            values["resource"], [values["auth_issuer"]], verifier, scopes=values["scope"] or ()
        )
    except (ValueError, TypeError, ImportError) as error:
        raise SystemExit(f"mrtr-trio: {error}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrtr-trio",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve an App from a Python file over stdio (default) or HTTP",
        description=SERVE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "target",
        metavar="FILE[:APP]",
        help="the Python file and the name of its App (default: app), e.g. server.py:app",
    )
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_host_port,
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free "
        "port; the URL is printed on stderr)",
    )
    serve.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="INFO",
        type=str.upper,
        help="log to stderr from this level up (default: INFO; DEBUG adds a line per call; "
        "other libraries log from WARNING up)",
    )
    serve.add_argument(
        "--no-store-check",
        action="store_true",
        help="start even when the runtime's step store cannot be reached (by default serve "
        "checks it once and refuses to start without it)",
    )
    _add_http_limits(serve)
    _add_auth(serve)
    commands.add_parser(
        "keygen",
        help=f"print a fresh random signing key (for {ENVIRONMENT_VARIABLE})",
        description=f"Print a fresh random 32-byte key as base64url, e.g. "
        f"`export {ENVIRONMENT_VARIABLE}=$(mrtr-trio keygen)`. To rotate, put the new key "
        f"first and keep the old one after a comma until its tokens have expired.",
    )
    inspect = commands.add_parser(
        "inspect",
        help="verify a requestState and print what it holds",
        description=INSPECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument("token", metavar="TOKEN", help="the requestState ('-': read stdin)")
    inspect.add_argument(
        "--key",
        action="append",
        metavar="KEY",
        help=f"a key (base64url or hex; repeat for several) instead of {ENVIRONMENT_VARIABLE}; "
        "write --key=KEY for a key that starts with -",
    )
    inspect.add_argument(
        "--app", metavar="FILE[:APP]", help="the App that minted the token, to name the call"
    )
    call = inspect.add_mutually_exclusive_group()
    call.add_argument("--tool", metavar="NAME", help="the call was tools/call of this tool")
    call.add_argument("--prompt", metavar="NAME", help="the call was prompts/get of this prompt")
    call.add_argument("--resource", metavar="URI", help="the call was resources/read of this URI")
    inspect.add_argument(
        "--arguments",
        metavar="JSON",
        default="{}",
        help="the call's arguments as the client sent them (default: {})",
    )
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    commands.add_parser(
        "demo",
        help="serve an example App on loopback and drive it with the official client",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `mrtr-trio` console script."""
    from .mcp._transports import run_until_interrupted

    args = _parser().parse_args(argv)
    if args.command == "keygen":
        print(generate_key())
        return
    if args.command == "inspect":
        raise SystemExit(_inspect(args))
    if args.command == "demo":
        from .mcp._demo import run_demo

        trio.run(run_demo)
        return
    configure_logging(args.log_level)
    try:
        environment_keys()  # a malformed MRTR_TRIO_KEYS is a startup error, not a traceback
    except ValueError as error:
        raise SystemExit(f"mrtr-trio: {error}") from None
    auth = auth_from(args, os.environ)
    app = load_app(args.target)
    if auth is not None:
        app.auth = auth
    if app.runtime.step_store is not None:
        trio.run(check_step_store, app.runtime.step_store, not args.no_store_check)
    if args.http is None:
        if sys.stdin.isatty():
            print(STDIO_ON_A_TERMINAL.format(name=app.name), file=sys.stderr, flush=True)
        run_until_interrupted(app.serve_stdio)
    else:
        host, port = args.http
        limits = {name: getattr(args, name) for name in args.http_limits}
        run_until_interrupted(functools.partial(_serve_http, app, host, port, limits))


def _inspect(args: argparse.Namespace) -> int:
    """`mrtr-trio inspect`: the report on stdout and 0, or the reason on stderr and 1."""
    from ._errors import InvalidRequestState
    from ._inspect import inspect_token
    from ._keys import parse_keys

    try:
        if args.key:
            keys = [key for text in args.key for key in parse_keys(text, source="--key")]
        else:
            keys = environment_keys() or []
    except ValueError as error:
        print(f"mrtr-trio inspect: {error}", file=sys.stderr)
        return 1
    if not keys:
        print(
            f"mrtr-trio inspect: no keys: set {ENVIRONMENT_VARIABLE} or pass --key",
            file=sys.stderr,
        )
        return 1
    token = sys.stdin.read() if args.token == "-" else args.token
    binding = _call_binding(args)
    try:
        report = inspect_token(token, keys, binding=binding)
    except InvalidRequestState as error:
        print(f"mrtr-trio inspect: the token does not verify: {error.reason}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else _report_text(report))
    return 0


def _call_binding(args: argparse.Namespace) -> bytes | None:
    """The binding digest of the call `inspect` was told of (`--app` and the target), as the
    App computes it when it serves that call; `None` when no call was named."""
    from ._binding import binding_digest
    from ._journal import qualified_name
    from .mcp._registry import ArgumentsError

    named = args.tool or args.prompt or args.resource
    if args.app is None and named is None:
        return None
    if args.app is None or named is None:
        raise SystemExit(
            "mrtr-trio inspect: name the call with --app and --tool/--prompt/--resource"
        )
    try:
        raw = json.loads(args.arguments)
    except json.JSONDecodeError as error:
        raise SystemExit(f"mrtr-trio inspect: --arguments is not JSON: {error}") from None
    if not isinstance(raw, dict):
        raise SystemExit("mrtr-trio inspect: --arguments must be a JSON object")
    app = load_app(args.app)
    if args.resource is not None:
        method, target = "resources/read", args.resource
        found = app._find_resource(target)
        if found is None:
            raise SystemExit(f"mrtr-trio inspect: {args.app} has no resource matching {target!r}")
        entry, raw = found
    else:
        kind = "tool" if args.tool else "prompt"
        method, target = ("tools/call" if args.tool else "prompts/get"), named
        entry = app._entries[kind].get(target)
        if entry is None:
            raise SystemExit(f"mrtr-trio inspect: {args.app} has no {kind} {target!r}")
    try:
        arguments = entry.validate(raw)
    except ArgumentsError as error:
        raise SystemExit(f"mrtr-trio inspect: {error}") from None
    bind = app.bind_bytes(method, target, raw)
    return binding_digest(qualified_name(entry.fn), arguments, bind)


def _report_text(report: dict[str, Any]) -> str:
    """The `inspect` report for a person."""

    def when(seconds: int) -> str:
        stamp = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
        return f"{stamp:%Y-%m-%d %H:%M:%S} UTC"

    left = report["seconds_left"]
    lines = [
        f"verified:    {report['verified']}",
        f"format:      {report['format']} (version {report['format_version']}), "
        f"key id {report['key_id']}, {report['token_characters']} characters",
        f"flow id:     {report['flow_id']}",
        f"issued:      {when(report['issued_at'])}",
        f"expires:     {when(report['expires_at'])} "
        + (f"(expired {-left} s ago)" if report["expired"] else f"(in {left} s)"),
        f"rounds:      {report['rounds']}",
    ]
    if "binding_digest" in report:
        lines.append(f"binding:     {report['binding_digest']}")
    lines.append(f"journal:     {len(report['journal'])} entries")
    for item in report["journal"]:
        lines += [f"  #{item['index']} {line}" for line in _entry_lines(item)]
    pending = report["pending"]
    if pending is None:
        lines.append("pending:     nothing (the flow had not asked yet)")
    elif pending["kind"] == "ask":
        lines.append("pending:     ask")
        for ask in pending["asks"]:
            state = f"answered {_compact(ask['answered'])}" if "answered" in ask else "waiting"
            lines.append(f"  {ask['key']!r} {ask['kind']} {ask['fingerprint']}: {state}")
            if "request" in ask:
                lines.append(f"    request {_compact(ask['request'])}")
    elif pending["kind"] == "poll":
        deadline = pending["deadline"]
        until = "no deadline" if deadline is None else f"until {when(deadline)}"
        lines.append(f"pending:     poll {pending['fingerprint']} ({until})")
    else:
        lines.append("pending:     pause (the client's turn, nothing asked)")
    if "payload" in report:
        lines.append(f"payload:     {_compact(report['payload'])}")
    return "\n".join(lines)


def _entry_lines(item: dict[str, Any]) -> list[str]:
    if item["kind"] == "step":
        key = f" step_key {item['step_key']}" if "step_key" in item else ""
        return [f"step {item['fingerprint']}{key}: {_compact(item['value'])}"]
    if item["kind"] == "pause":
        return ["pause"]
    if item["kind"] == "batch":
        return ["batch"] + [
            f"  {a['key']!r} {a['kind']} {a['fingerprint']}: {_compact(a['answer'])}"
            for a in item["answers"]
        ]
    return [f"{item['key']!r} {item['kind']} {item['fingerprint']}: {_compact(item['answer'])}"]


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."


if __name__ == "__main__":
    main()
