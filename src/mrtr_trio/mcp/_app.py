"""The MCP server: [App][mrtr_trio.mcp.App] registers handlers of either style and serves them, in
both eras, on the official SDK's low-level server.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import mcp_types as types
import trio
from mcp import MCPError
from starlette.types import ASGIApp, Scope

from .._replay import Complete
from .._runtime import Runtime
from ..auth import Auth
from ._gate import AuthGate
from ._host import (
    bind_bytes,
    guard_request_state,
    lift_input_responses,
    raw_input_responses,
    request_principal,
    run_flow,
)
from ._log import flow_failure, log_calls
from ._registry import ArgumentsError, Entry, Kind, make_entry
from ._sdk import Server, ServerRequestContext, add_middleware, get_access_token
from ._tasks import (
    TASK_POLICIES,
    TASKS_EXTENSION,
    TaskPolicy,
    Tasks,
    declares_tasks,
    missing_tasks_extension,
)
from ._taskstore import TaskStore
from ._transports import (
    BACKLOG,
    FIRST_USE_TIMEOUT,
    KEEP_ALIVE_TIMEOUT,
    MAX_BODY_SIZE,
    MAX_BUFFERED_BYTES,
    MAX_SESSIONS,
    MAX_SESSIONS_PER_CLIENT,
    SESSION_IDLE_TIMEOUT,
    asgi_app,
    check_may_serve,
    client_key,
    run_until_interrupted,
    serve_http,
    serve_stdio,
)
from ._wire import (
    error_result,
    prompt_result,
    resource_result,
    tool_result,
)

__all__ = ["App"]

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


class App:
    """An MCP server whose tools, prompts and resources are mrtr_trio handlers.

    - *name*: the server's name (also the audience its `requestState` tokens are bound to);
    - *runtime*: the [Runtime][mrtr_trio.Runtime] (keys and knobs); by default `Runtime()`,
      which signs with the keys in `MRTR_TRIO_KEYS`, or else with a per-process random key and
      a warning that modern flows will not survive a restart;
    - *version*, *instructions*: what `initialize` and `server/discover` report;
    - *task_store*, *task_ttl*, *task_poll_interval*: where tool calls that become tasks
      (the tasks extension) are kept, how many seconds each lives after its creation
      (`None`: unlimited), and the polling interval suggested to clients;
    - *auth*: an [Auth][mrtr_trio.auth.Auth]: over HTTP every request then needs a bearer
      token the verifier accepts, with the scopes it names (and those of the handler it
      calls), and `requestState` tokens, tasks and legacy sessions belong to the principal
      the token names (docs/security.md). stdio and in-process clients are not asked for one;
    - *task_max_flows*, *task_max_flows_per_owner*: task-capable flows this process runs at
      once, in all and for one authenticated principal (docs/tasks.md);
    - *strict_arguments* (default `True`): a tool's arguments are checked against the input
      schema it advertises, by JSON Schema and without coercion (`"3"` is not an integer),
      and an argument the schema does not name is refused instead of dropped; every problem
      is reported. `False`: the parameters' pydantic model converts what it can (`"3"` → 3)
      and drops unknown arguments. Prompt arguments and URI variables, strings by the
      protocol, are converted either way;
    - *mask_errors* (default `False`): when a handler fails (it raised, or the runtime found a
      fault in it), the client gets a fixed message with an error id instead of the
      exception's text, and the log has the traceback under the same id. Failures the client
      can act on (invalid arguments, requestState, answers or capabilities, round limits, its
      own error answers) keep their messages.

    `app.server` is the underlying `mcp.server.lowlevel.Server`: `mcp.Client(app.server)`
    talks to it in-process, and its request handlers can be extended.
    """

    def __init__(
        self,
        name: str,
        *,
        runtime: Runtime | None = None,
        version: str | None = None,
        instructions: str | None = None,
        task_store: TaskStore | None = None,
        task_ttl: float | None = 3600.0,
        task_poll_interval: float | None = 1.0,
        auth: Auth | None = None,
        task_max_flows: int = 1000,
        task_max_flows_per_owner: int | None = 100,
        strict_arguments: bool = True,
        mask_errors: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("App needs a non-empty name")
        self.name = name
        self.strict_arguments = bool(strict_arguments)
        self.mask_errors = bool(mask_errors)
        self.runtime = runtime if runtime is not None else Runtime()
        self._entries: dict[Kind, dict[str, Entry]] = {"tool": {}, "prompt": {}, "resource": {}}
        self._tasks = Tasks(
            self.runtime,
            name,
            store=task_store,
            ttl=task_ttl,
            poll_interval=task_poll_interval,
            max_flows=task_max_flows,
            max_flows_per_owner=task_max_flows_per_owner,
        )
        self.server: Server[Any] = Server(
            name,
            version=version or "0.0.0",
            instructions=instructions,
            lifespan=lambda server: self._tasks.lifespan(),
            get_tool_input_schema=self._tool_input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,  # type: ignore[arg-type]  # tasks: a dict (see _sdk)
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
        )
        add_middleware(self.server, log_calls, guard_request_state, lift_input_responses)
        self._tasks.register(self.server)
        self._tasks.permits = self._holds
        self._scoped = False  # whether any handler has scopes
        self.auth = auth

    @property
    def auth(self) -> Auth | None:
        """The [Auth][mrtr_trio.auth.Auth] HTTP requests need (`None`: none); it may be set
        until the App is served."""
        return self._auth

    @auth.setter
    def auth(self, auth: Auth | None) -> None:
        if auth is not None and not isinstance(auth, Auth):
            raise TypeError(f"auth must be a mrtr_trio.auth.Auth, got {type(auth).__name__}")
        self._auth = auth
        self._tasks.audience = self.audience

    @property
    def audience(self) -> str:
        """What this App's `requestState` tokens are bound to besides the call: its name, and
        with [Auth][mrtr_trio.auth.Auth] also its resource URL (the tokens' audience)."""
        return self.name if self._auth is None else f"{self.name} {self._auth.resource}"

    def __repr__(self) -> str:
        counts = ", ".join(f"{len(v)} {k}s" for k, v in self._entries.items())
        return f"<App {self.name!r}: {counts}>"

    # ------------------------------------------------------------------- registration

    def tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        task: TaskPolicy = "forbidden",
        input_schema: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a tool (either handler style); the decorator returns the function unchanged.

        The first parameter is the context; the others form the input schema. *description*
        defaults to the docstring.

        - *task*: the tool's policy under the tasks extension. `"forbidden"` (the default):
          never a task. `"optional"`: when the request declares the extension, a flow that
          yields [background()][mrtr_trio.mcp.background] becomes a task there; otherwise it
          runs as usual. `"required"`: a request that does not declare the extension gets
          `-32021`.
        - *input_schema*: advertise this JSON schema verbatim (JSON Schema 2020-12 keywords
          included) instead of the one made from the parameters; arguments are still checked
          against the parameters.
        - *headers*: parameter name → header name: clients mirror the argument in the
          `Mcp-Param-<name>` HTTP header (`x-mcp-header`, SEP-2243), and the server
          rejects a request whose header does not match its body with `-32020`. Only
          string, integer and boolean parameters qualify.
        - *scopes*: with [Auth][mrtr_trio.auth.Auth], the scopes a caller's token needs (on
          top of the App's): without them the tool is not listed for that caller, and calling
          it is refused with `403 insufficient_scope` naming them.
        """
        if task not in TASK_POLICIES:
            raise ValueError(f"task must be one of {TASK_POLICIES}, got {task!r}")
        return self._register(
            "tool",
            name=name,
            description=description,
            task=task,
            input_schema=input_schema,
            headers=headers,
            scopes=scopes,
        )

    def prompt(
        self, name: str | None = None, description: str | None = None, *, scopes: Sequence[str] = ()
    ) -> Callable[[F], F]:
        """Register a prompt; it returns a `str` (one user message) or a list of messages.
        *scopes* as for [tool][mrtr_trio.mcp.App.tool]."""
        return self._register("prompt", name=name, description=description, scopes=scopes)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a resource at *uri*, which may be a template (`test://items/{id}`) whose
        variables are the handler's parameters. It returns `str` (text) or `bytes` (blob).
        *scopes* as for [tool][mrtr_trio.mcp.App.tool]."""
        if not isinstance(uri, str) or "://" not in uri:
            raise TypeError(f"a resource needs a URI like 'scheme://path', got {uri!r}")
        return self._register(
            "resource",
            name=name,
            description=description,
            uri=uri,
            mime_type=mime_type,
            scopes=scopes,
        )

    def _register(self, kind: Kind, *, name: Any, **options: Any) -> Callable[[F], F]:
        if callable(name):
            raise TypeError(f"write @app.{kind}() with parentheses")

        def register(fn: F) -> F:
            entry = make_entry(
                kind,
                fn,
                name=name,
                strict=self.strict_arguments,
                mask_errors=self.mask_errors,
                **options,
            )
            key = entry.uri if kind == "resource" else entry.name
            assert key is not None
            if key in self._entries[kind]:
                raise ValueError(f"{self.name} already has a {kind} {key!r}")
            self._entries[kind][key] = entry
            if entry.task != "forbidden":
                self.server.extensions[TASKS_EXTENSION] = {}
            self._scoped = self._scoped or bool(entry.scopes)
            return fn

        return register

    # --------------------------------------------------------------------------- lists

    def _permits(self, entry: Entry) -> bool:
        """Whether the caller may use *entry*: whether its token holds the entry's scopes."""
        return self._holds(entry.scopes)

    def _holds(self, scopes: Sequence[str]) -> bool:
        """Whether the caller's token holds *scopes*: always on unauthenticated transports
        (stdio, in-process) and when there are none; else as the token's scopes say."""
        if not scopes or self._auth is None:
            return True
        token = get_access_token()
        return token is None or not self._auth.missing(token.scopes, scopes)

    def _visible(self, kind: Kind) -> list[Entry]:
        """The entries of *kind* the caller may use, in registration order."""
        entries = self._entries[kind].values()
        return list(entries) if not self._scoped else [e for e in entries if self._permits(e)]

    def _cache_scope(self) -> dict[str, Any]:
        """A list's `cacheScope` (2026-07-28): `private` where lists depend on the caller."""
        return {"cache_scope": "private"} if self._auth is not None else {}

    def _refuse_unpermitted(self, entry: Entry) -> None:
        """Refuse a call the HTTP gate should have refused (`403`) already."""
        if not self._permits(entry):
            raise MCPError(
                -32602,
                f"{entry.kind} {entry.name!r} needs the scopes {' '.join(entry.scopes)}, "
                "which this token lacks",
            )

    def _handler_scopes(self, method: str, name: str | None) -> Sequence[str]:
        """The scopes of the handler a `(method, name)` request calls (none if unknown)."""
        if name is None:
            return ()
        entry: Entry | None = None
        if method == "tools/call":
            entry = self._entries["tool"].get(name)
        elif method == "prompts/get":
            entry = self._entries["prompt"].get(name)
        elif method == "resources/read":
            found = self._find_resource(name)
            entry = None if found is None else found[0]
        return () if entry is None else entry.scopes

    def _all_scopes(self) -> list[str]:
        """Every scope this App names, for the metadata's `scopes_supported`."""
        scopes: dict[str, None] = dict.fromkeys(self._auth.scopes if self._auth else ())
        for entries in self._entries.values():
            for entry in entries.values():
                scopes.update(dict.fromkeys(entry.scopes))
        return list(scopes)

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            **self._cache_scope(),
            tools=[
                types.Tool(
                    name=e.name,
                    description=e.description,
                    # A copy: the result may be edited on its way out; the registry must not be.
                    input_schema=copy.deepcopy(dict(e.input_schema())),
                )
                for e in self._visible("tool")
            ],
        )

    def _tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The SDK's lookup before each `tools/call` (it only reads the schema)."""
        entry = self._entries["tool"].get(name)
        return None if entry is None else entry.input_schema()

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            **self._cache_scope(),
            prompts=[
                types.Prompt(
                    name=e.name,
                    description=e.description,
                    arguments=[
                        types.PromptArgument(name=n, description=d, required=r)
                        for n, d, r in e.parameters()
                    ],
                )
                for e in self._visible("prompt")
            ],
        )

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            **self._cache_scope(),
            resources=[
                types.Resource(
                    uri=e.uri or "", name=e.name, description=e.description, mime_type=e.mime_type
                )
                for e in self._visible("resource")
                if not e.is_template
            ],
        )

    async def _list_resource_templates(
        self, ctx: Any, params: Any
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            **self._cache_scope(),
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=e.uri or "",
                    name=e.name,
                    description=e.description,
                    mime_type=e.mime_type,
                )
                for e in self._visible("resource")
                if e.is_template
            ],
        )

    # ------------------------------------------------------------------ the MRTR methods

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        entry = self._entries["tool"].get(params.name)
        if entry is None:
            raise MCPError(-32602, f"Unknown tool: {params.name}", {"name": params.name})
        self._refuse_unpermitted(entry)
        declared = entry.task != "forbidden" and declares_tasks(ctx)
        if entry.task == "required" and not declared:
            raise missing_tasks_extension(f"tool {entry.name!r}")
        raw = params.arguments or {}
        try:
            arguments = entry.validate(raw)
        except ArgumentsError as error:  # per spec, a tool execution error
            return error_result(str(error))
        if declared:
            return await self._tasks.call_tool(ctx, entry, raw, arguments, params)
        return await self._serve(
            ctx, entry, raw, arguments, params, entry.name, tool_result, error_result
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        entry = self._entries["prompt"].get(params.name)
        if entry is None:
            raise MCPError(-32602, f"Unknown prompt: {params.name}", {"name": params.name})
        self._refuse_unpermitted(entry)
        raw = params.arguments or {}
        try:
            arguments = entry.validate(raw)
        except ArgumentsError as error:
            raise MCPError(-32602, str(error)) from None
        return await self._serve(
            ctx,
            entry,
            raw,
            arguments,
            params,
            entry.name,
            lambda value: prompt_result(value, entry.description),
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        found = self._find_resource(uri)
        if found is None:
            raise MCPError(-32602, f"Unknown resource: {uri}", {"uri": uri})
        entry, variables = found
        self._refuse_unpermitted(entry)
        try:
            arguments = entry.validate(variables)
        except ArgumentsError as error:
            raise MCPError(-32602, str(error), {"uri": uri}) from None
        return await self._serve(
            ctx,
            entry,
            variables,
            arguments,
            params,
            uri,
            lambda value: resource_result(value, uri, entry.mime_type),
        )

    def _find_resource(self, uri: str) -> tuple[Entry, dict[str, str | list[str]]] | None:
        """The resource at *uri* and its template variables: a plain URI first, then the
        templates in the order they were registered."""
        resources = self._entries["resource"]
        if uri in resources and not resources[uri].is_template:
            return resources[uri], {}
        for entry in resources.values():
            variables = entry.match(uri)
            if variables is not None:
                return entry, variables
        return None

    async def _serve(
        self,
        ctx: ServerRequestContext[Any],
        entry: Entry,
        raw: Mapping[str, Any],
        arguments: dict[str, Any],
        params: Any,
        target: str,
        to_result: Callable[[Any], R],
        failure_result: Callable[[str], R] | None = None,
    ) -> R | types.InputRequiredResult:
        """Run the flow and shape its outcome; a failure answers as `flow_failure` says (the
        task driver answers its tool errors the same way)."""
        try:
            outcome = await run_flow(
                self.runtime,
                ctx,
                entry,
                raw,
                arguments,
                input_responses=raw_input_responses(params),
                request_state=params.request_state,
                target=target,
                audience=self.audience,
                principal=request_principal(),
            )
            return outcome if not isinstance(outcome, Complete) else to_result(outcome.value)
        except Exception as error:
            answer = flow_failure(entry, error, failure_result)
            if answer is error:
                raise
            if isinstance(answer, MCPError):
                raise answer from error
            return answer

    def bind_bytes(
        self,
        method: str,
        target: str,
        arguments: Mapping[str, Any],
        *,
        principal: Sequence[str | None] | None = None,
    ) -> bytes:
        """The `bind` bytes this app mints `requestState` with for one call: *method*
        (`"tools/call"`, `"prompts/get"`, `"resources/read"`), *target* (the tool or
        prompt name, or the resource URI), the *arguments* as the client sent them, and the
        authenticated *principal* (`(client_id, issuer, subject)`, `None` when
        unauthenticated). The audience is [audience][mrtr_trio.mcp.App.audience].

        With [mrtr_trio.testing.RecordedState][] and
        [mrtr_trio.testing.replay_recorded][], this checks tokens recorded from a running
        server against new code before a deploy.
        """
        if method not in ("tools/call", "prompts/get", "resources/read"):
            raise ValueError(
                f"method must be tools/call, prompts/get or resources/read: {method!r}"
            )
        return bind_bytes(method, target, arguments, self.audience, principal)

    # ------------------------------------------------------------------------ serving

    def asgi(
        self,
        *,
        path: str = "/mcp",
        stateless: bool = False,
        json_response: bool = False,
        allowed_hosts: Sequence[str] | None = None,
        max_body_size: int = MAX_BODY_SIZE,
        session_idle_timeout: float | None = SESSION_IDLE_TIMEOUT,
        max_sessions: int | None = MAX_SESSIONS,
        max_sessions_per_client: int | None = MAX_SESSIONS_PER_CLIENT,
        session_first_use_timeout: float = FIRST_USE_TIMEOUT,
        session_key: Callable[[Scope], Hashable] = client_key,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
    ) -> ASGIApp:
        """A fresh Streamable HTTP ASGI app (for any ASGI server that runs its lifespan).

        - *allowed_hosts*: the `Host` headers accepted (default: loopback only);
        - *max_body_size*: the largest request body in bytes (413 past it);
        - *session_idle_timeout*: seconds a legacy session may go with no request in flight
          before it is closed (`None`: never);
        - *max_sessions*: legacy sessions open at once; a new one past it gets 503 with
          `Retry-After` (`None`: no cap);
        - *max_sessions_per_client*: legacy sessions one client holds at once, the client
          being what *session_key* makes of the request's ASGI scope (default: the
          authenticated principal with *auth*, else the IP address; behind a proxy, read the
          forwarded address);
        - *session_first_use_timeout*: seconds a legacy session that made no request since
          `initialize` keeps its slot;
        - *max_buffered_bytes*: request bodies held at once across all requests (503 with
          `Retry-After` past it).

        A client that drops its connection mid-call has the call cancelled and its flow closed at
        once, with SSE and with JSON responses (*json_response*) alike. The defaults and their
        reasons are in docs/reliability.md. With [auth][mrtr_trio.mcp.App.auth], the endpoint
        asks for bearer tokens and the Protected Resource Metadata is served at
        `/.well-known/oauth-protected-resource` (with and without the path).
        """
        app = asgi_app(
            self.server,
            path=path,
            stateless=stateless,
            json_response=json_response,
            allowed_hosts=allowed_hosts,
            max_body_size=max_body_size,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            session_first_use_timeout=session_first_use_timeout,
            session_key=session_key,
            max_buffered_bytes=max_buffered_bytes,
        )
        if self._auth is None:
            return app
        return AuthGate(
            app,
            self._auth,
            path=path,
            needs=self._handler_scopes,
            scoped=lambda: self._scoped,
            scopes_supported=self._all_scopes(),
            max_body_size=max_body_size,
            name=self.name,
        )

    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        path: str = "/mcp",
        stateless: bool = False,
        json_response: bool = False,
        allowed_hosts: Sequence[str] | None = None,
        max_body_size: int = MAX_BODY_SIZE,
        session_idle_timeout: float | None = SESSION_IDLE_TIMEOUT,
        max_sessions: int | None = MAX_SESSIONS,
        max_sessions_per_client: int | None = MAX_SESSIONS_PER_CLIENT,
        session_first_use_timeout: float = FIRST_USE_TIMEOUT,
        session_key: Callable[[Scope], Hashable] = client_key,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
        backlog: int = BACKLOG,
        keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve Streamable HTTP on hypercorn's trio worker until cancelled.

        `url = await nursery.start(app.serve_http, "127.0.0.1", 0)` returns the endpoint URL
        with the real port. The knobs are those of [asgi][mrtr_trio.mcp.App.asgi], plus
        *backlog* (connections the listening socket queues) and *keep_alive_timeout* (seconds
        an idle connection stays open, whatever it carried). Out of file descriptors, new
        connections are refused and one WARNING line per 10 s says so.
        """
        check_may_serve("App.serve_http()")
        app = self.asgi(
            path=path,
            stateless=stateless,
            json_response=json_response,
            allowed_hosts=allowed_hosts,
            max_body_size=max_body_size,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            session_first_use_timeout=session_first_use_timeout,
            session_key=session_key,
            max_buffered_bytes=max_buffered_bytes,
        )
        await serve_http(
            app,
            host,
            port,
            path,
            backlog=backlog,
            keep_alive_timeout=keep_alive_timeout,
            task_status=task_status,
        )

    async def serve_stdio(self) -> None:
        """Serve on this process's stdin and stdout until EOF or cancellation."""
        check_may_serve("App.serve_stdio()")
        await serve_stdio(self.server)

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        host: str = "127.0.0.1",
        port: int = 8000,
    ) -> None:
        """Serve until stdin closes (stdio) or Ctrl-C, which exits quietly (blocking, on trio).

        HTTP is served at `http://{host}:{port}/mcp`. Put the call under
        `if __name__ == "__main__":`, so that `mrtr-trio serve file.py` can import the file
        without starting a server.
        """
        if transport not in ("stdio", "http"):
            raise ValueError(f'transport must be "stdio" or "http", got {transport!r}')
        check_may_serve(f"App.run({transport!r})")
        if transport == "stdio":
            run_until_interrupted(self.serve_stdio)
        else:
            run_until_interrupted(functools.partial(self.serve_http, host, port))
