"""The `ctx` a handler receives: the era, the client's capabilities, the return-style inputs,
and push-style asks where the era allows them.

Drivers create one [Context][mrtr_trio.Context] per invocation; handlers only read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ._errors import MrtrError
from ._flow import MintedState
from ._journal import recordable
from ._values import (
    ALL_CAPABILITIES,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Request,
    create_message,
    elicit,
    elicit_url,
    list_roots,
    parse_answer,
    sdk_answer_json,
)

if TYPE_CHECKING:
    from ._replay import Replay

__all__ = ["Context", "Host", "Pusher", "accepted_content", "input_response"]

Era = Literal["legacy", "modern"]


class Pusher(Protocol):
    """What a live driver lends a context for push-style asks."""

    async def push(self, key: str, request: Request) -> Answer:
        """Ask the client *request* under *key*, now, and return its answer."""


class Host(Protocol):
    """What a host (such as `mrtr_trio.mcp`) lends the contexts of the handlers it runs."""

    @property
    def request_context(self) -> Any:
        """The host's own per-request object (the MCP SDK's `ServerRequestContext`)."""

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        """Tell the client how far the request has got."""

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Send the client a log message."""


class Context:
    """What a handler knows about the call it serves.

    - `era`: `"legacy"` (a 2025-era session, run live) or `"modern"` (a 2026-07-28
      request, replayed);
    - `client_capabilities`: the client's declared capabilities (a ClientCapabilities dict);
    - `input_responses`: return style only: the answers to the previous round's requests,
      key → answer object (`None` on a first call, `{}` after a state-only round);
    - `request_state()`: return style only: the payload minted on the previous round;
    - `is_replaying`: yield style on modern requests: `True` while the handler re-runs
      code an earlier round already ran (up to the ask this request answers);
    - `await ctx.report_progress(...)` and `await ctx.log(...)`: notifications through the
      host, silent while replaying (the client already saw them);
    - `request_context`: the host's per-request object (the MCP SDK's
      `ServerRequestContext` under `mrtr_trio.mcp`), or `None`;
    - push-style `await ctx.elicit(...)`, `create_message(...)`, `list_roots()`: live
      legacy sessions only.
    """

    __slots__ = (
        "_capabilities",
        "_era",
        "_host",
        "_input_responses",
        "_machine",
        "_payload",
        "_push",
        "_pushes",
    )

    def __init__(
        self,
        era: Era,
        client_capabilities: Mapping[str, Any] | None,
        *,
        machine: Replay | None = None,
        push: Pusher | None = None,
        host: Host | None = None,
    ) -> None:
        self._era: Era = era
        self._machine = machine
        self._host = host
        # Kept as given (no copy per flow); handlers get a copy when they ask.
        self._capabilities = (
            ALL_CAPABILITIES if client_capabilities is None else client_capabilities
        )
        self._push = push
        self._pushes = 0
        self._input_responses: dict[str, Answer] | None = None
        self._payload: Any = None

    def __repr__(self) -> str:
        return f"<Context era={self._era!r} replaying={self.is_replaying}>"

    @property
    def era(self) -> Era:
        """`"legacy"` or `"modern"`."""
        return self._era

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The client's declared capabilities (all of them when the host did not say)."""
        return dict(self._capabilities)

    @property
    def input_responses(self) -> Mapping[str, Answer] | None:
        """Return style: the previous round's answers by key (`None` on a first call)."""
        return self._input_responses

    @property
    def is_replaying(self) -> bool:
        """True while a yield-style handler, replayed on a modern request, re-runs code an
        earlier round already ran (up to the ask this request answers)."""
        machine = self._machine
        return machine is not None and machine.is_replaying

    @property
    def request_context(self) -> Any:
        """The host's per-request object, or `None` outside a host."""
        return None if self._host is None else self._host.request_context

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to the client (a no-op without a host, or while replaying)."""
        if self._host is not None and not self.is_replaying:
            await self._host.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send the client a log message at *level* (`"debug"` ... `"emergency"`); a no-op
        without a host, or while replaying. Modern clients get it only if they asked for logs."""
        if self._host is not None and not self.is_replaying:
            await self._host.log(level, data, logger)

    def request_state(self) -> Any:
        """Return style: the payload given to `mint_request_state` on the previous round,
        or `None`."""
        return self._payload

    async def mint_request_state(self, payload: Any) -> MintedState:
        """Return style: carry *payload* (CBOR-encodable: None, bool, numbers, str, bytes,
        lists, dicts) to the next round inside the runtime's signed envelope.

        Pass the result to `input_required(request_state=...)`; read the payload back with
        `request_state`. It arrives as a replay would give it (tuples become lists) in
        both eras.
        """
        return MintedState(recordable(payload, "mint_request_state"))

    # ------------------------------------------------------------------------ push style

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> ElicitResult:
        """Push-style form elicitation (live legacy sessions only)."""
        answer = await self._ask(elicit(message, schema), "elicit", "elicit(...)")
        assert isinstance(answer, ElicitResult)
        return answer

    async def elicit_url(self, message: str, url: str) -> ElicitResult:
        """Push-style URL elicitation (live legacy sessions only)."""
        answer = await self._ask(elicit_url(message, url), "elicit_url", "elicit_url(...)")
        assert isinstance(answer, ElicitResult)
        return answer

    async def create_message(
        self, messages: str | Sequence[Mapping[str, Any]], *, max_tokens: int, **options: Any
    ) -> CreateMessageResult:
        """Push-style sampling (live legacy sessions only); options as
        [create_message][mrtr_trio.create_message]."""
        request = create_message(messages, max_tokens=max_tokens, **options)
        answer = await self._ask(request, "create_message", "create_message(...)")
        assert isinstance(answer, CreateMessageResult)
        return answer

    async def list_roots(self) -> ListRootsResult:
        """Push-style roots request (live legacy sessions only)."""
        answer = await self._ask(list_roots(), "list_roots", "list_roots()")
        assert isinstance(answer, ListRootsResult)
        return answer

    async def _ask(self, request: Request, method: str, constructor: str) -> Answer:
        if self._push is None:
            where = (
                "a modern (2026-07-28) request"
                if self._era == "modern"
                else "a legacy session without a live driver"
            )
            raise MrtrError(
                f"ctx.{method}() cannot ask on {where}: the server may not send requests "
                f"there. Yield {constructor} from a yield-style handler, or return "
                f"input_required({{'key': {constructor}}}) from a return-style one."
            )
        key = f"push-{self._pushes}"
        self._pushes += 1
        return await self._push.push(key, request)

    # ----------------------------------------------------------------- driver interface

    def _enter_return_round(self, responses: dict[str, Answer] | None, payload: Any) -> None:
        self._input_responses = responses
        self._payload = payload


def accepted_content(responses: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    """The `content` of an accepted elicitation answer under *key* in *responses* (answer
    objects, the SDK's, or raw JSON), else `None`."""
    answer = sdk_answer_json((responses or {}).get(key))
    if isinstance(answer, ElicitResult):
        return dict(answer.content) if answer.accepted and answer.content is not None else None
    if isinstance(answer, Mapping) and answer.get("action") == "accept":
        content = answer.get("content")
        return dict(content) if isinstance(content, Mapping) else None
    return None


def input_response(responses: Mapping[str, Any] | None, key: str) -> Any:
    """The answer under *key* in *responses* (answer objects, or raw JSON which is parsed by its
    shape; the SDK's answer types too), else `None`. Raw JSON that is no answer at all is
    returned unchanged."""
    answer = sdk_answer_json((responses or {}).get(key))
    if answer is None or isinstance(answer, ElicitResult | CreateMessageResult | ListRootsResult):
        return answer
    if isinstance(answer, Mapping):
        probe = _probe_request(answer)
        if probe is not None:
            try:
                parsed = parse_answer(probe, answer)
            except MrtrError:
                return answer
            if isinstance(parsed, ElicitResult) and parsed.content is not None:
                # The probe asked for no properties, so parsing kept none: the content is
                # the client's, checked above as an object of content values.
                return ElicitResult(parsed.action, dict(answer["content"]))
            return parsed
    return answer


def _probe_request(json: Mapping[str, Any]) -> Request | None:
    if "action" in json:
        form = "content" in json
        return elicit("", {"type": "object"}) if form else elicit_url("", "about:blank")
    if "model" in json and "role" in json:
        return create_message("", max_tokens=1)
    if "roots" in json:
        return list_roots()
    return None
