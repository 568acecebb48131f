"""What the host remembers between requests: a legacy session's capabilities are dumped once;
a modern request's (declared afresh each time) are not remembered at all."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from mrtr_trio import elicit
from mrtr_trio._util import IdentityMemo
from mrtr_trio.mcp import _host
from mrtr_trio.mcp._wire import sdk_request


def _ctx(version: str, declared: Any) -> Any:
    return SimpleNamespace(
        protocol_version=version, session=SimpleNamespace(client_capabilities=declared)
    )


@pytest.fixture
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> IdentityMemo[Any, Any]:
    memo: IdentityMemo[Any, Any] = IdentityMemo()
    monkeypatch.setattr(_host, "_DUMPED", memo)
    return memo


def test_a_legacy_sessions_capabilities_are_dumped_once(fresh_memo: IdentityMemo[Any, Any]) -> None:
    declared = types.ClientCapabilities(roots=types.RootsCapability(list_changed=True))
    first = _host.client_capabilities(_ctx("2025-11-25", declared))
    assert first == {"roots": {"listChanged": True}}
    assert _host.client_capabilities(_ctx("2025-11-25", declared)) is first
    assert fresh_memo.get(declared) is first


def test_a_modern_requests_capabilities_are_not_remembered(
    fresh_memo: IdentityMemo[Any, Any],
) -> None:
    declared = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    dumped = _host.client_capabilities(_ctx("2026-07-28", declared))
    assert dumped == {"elicitation": {}}
    assert fresh_memo._memo._values == {}  # nothing stored


def test_a_legacy_sessions_capabilities_go_with_the_session(
    fresh_memo: IdentityMemo[Any, Any],
) -> None:
    declared = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    _host.client_capabilities(_ctx("2025-11-25", declared))
    assert len(fresh_memo._memo) == 1
    held = weakref.ref(declared)
    del declared  # the session ended
    gc.collect()
    assert held() is None and len(fresh_memo._memo) == 0


def test_an_identity_memo_holds_what_it_cannot_reference_weakly() -> None:
    memo: IdentityMemo[list[int], str] = IdentityMemo()
    memo.put([1], "a")  # a list takes no weak reference: held, so its id is not reused
    (held, value), *_ = memo._memo._values.values()
    assert held == ([1],) and value == "a"


def test_no_declaration_is_an_empty_mapping() -> None:
    assert _host.client_capabilities(_ctx("2025-11-25", None)) == {}


def test_an_identity_memo_tells_objects_apart() -> None:
    memo: IdentityMemo[list[int], str] = IdentityMemo(limit=2)
    a, b = [1], [1]  # equal, not the same
    assert memo.put(a, "a") == "a"
    assert (memo.get(a), memo.get(b)) == ("a", None)
    memo.put(b, "b")
    memo.put([2], "c")  # past the limit: everything is forgotten
    assert (memo.get(a), memo.get(b)) == (None, None)


def test_sdk_requests_are_built_once_per_request() -> None:
    request = elicit("Go?", {"type": "object", "properties": {}})
    modern = sdk_request(request)
    assert sdk_request(request) is modern
    assert sdk_request(elicit("Go?", {"type": "object", "properties": {}})) is not modern
