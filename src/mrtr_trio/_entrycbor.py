"""The CBOR of a token's items: journal entries, the answers they hold (by kind) and the
pending point, to and from their compact layout (below). The body around them is
`_cursorcbor`'s."""

from __future__ import annotations

from typing import Any

from ._journal import (
    PAUSED,
    Answered,
    AnsweredOne,
    Entry,
    Pending,
    PendingOne,
    PendingPoll,
    StepResult,
    single_key,
)
from ._tokenformat import _MAX_TIME
from ._values import (
    ACTIONS,
    FINGERPRINT_BYTES,
    KIND_CODES,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Request,
    Root,
    request_from_wire,
    trusted_answer,
    trusted_elicit_result,
)

__all__: list[str] = []

# ----------------------------------------------------------------------------- CBOR layout
#
# body    = [rounds, issued_at, lifetime, journal, pending, payload, flow_id]
# journal = bstr holding the CBOR array of the entries: kept as bytes, so that sealing the next
#           token appends the new entries to it instead of encoding the old ones again
# entry   = [fp, *answer]             an ask of one request (its key "input-N" implied: N counts
#                                     the entries of this form before it); fp[0] names the kind
#         | [fp, value]               a step or poll (fp[0] == 3)
#         | {key: [fp, *answer]}      a batch;  {} a pause
# pending = null | fp                  a request yielded on its own (its key "input-N" implied:
#                                     N counts the journal's asks of one request)
#         | {key: [fp, answer|null]} | {key: [fp, answer|null, request]} (return style)
#         | [fp, deadline|null] (poll)
# answer  = action | action, content                      (elicitation; action: 0 accept,
#                                                          1 decline, 2 cancel)
#         | role, content, model | role, content, model, stop_reason          (sampling)
#         | [[uri] | [uri, name], ...]                     (roots)
# (in a pending entry the answer fields are wrapped in one array)

_ACTION_CODES = {action: code for code, action in enumerate(ACTIONS)}
_ACTION_COUNT = len(ACTIONS)
_STEP_KIND = KIND_CODES["step"]


def _answer_fields(answer: Answer) -> list[Any]:
    if type(answer) is ElicitResult:
        code = _ACTION_CODES[answer.action]
        return [code] if answer.content is None else [code, dict(answer.content)]
    if type(answer) is CreateMessageResult:
        content = answer.content
        blocks = [dict(b) for b in content] if isinstance(content, tuple) else dict(content)
        tail = [] if answer.stop_reason is None else [answer.stop_reason]
        return [answer.role, blocks, answer.model, *tail]
    assert type(answer) is ListRootsResult
    return [[[r.uri] if r.name is None else [r.uri, r.name] for r in answer.roots]]


def _elicit_result(code: Any, content: Any) -> ElicitResult:
    if type(code) is not int or not 0 <= code < len(ACTIONS):
        raise ValueError(f"bad elicitation action {code!r}")
    if content is not None and type(content) is not dict:
        raise ValueError("bad elicitation content")
    return trusted_elicit_result(ACTIONS[code], content)


def _answer_from_fields(kind: int, fields: list[Any]) -> Answer:
    if kind == 0:
        if not 0 < len(fields) < 3:
            raise ValueError(f"bad elicitation answer {fields!r}")
        return _elicit_result(fields[0], fields[1] if len(fields) == 2 else None)
    if kind == 1:
        role, content = fields[0], fields[1]
        blocks = tuple(content) if isinstance(content, list) else content
        return trusted_answer(CreateMessageResult, role, blocks, *fields[2:4])
    if kind == 2:
        (roots,) = fields
        return trusted_answer(ListRootsResult, tuple(Root(*root) for root in roots))
    raise ValueError(f"unknown answer kind {kind!r}")


def _entry_to_cbor(entry: Entry, singles: int) -> tuple[Any, int]:
    """The entry's CBOR value, and the count of single-ask entries after it."""
    if isinstance(entry, StepResult):
        return [entry.fingerprint, entry.value], singles
    if isinstance(entry, AnsweredOne):
        if entry.key == single_key(singles):
            return [entry.fingerprint, *_answer_fields(entry.answer)], singles + 1
        entry = Answered({entry.key: entry.fingerprint}, {entry.key: entry.answer})
    return {
        key: [fp, *_answer_fields(entry.answers[key])] for key, fp in entry.fingerprints.items()
    }, singles


def _entry_from_cbor(item: Any, singles: int) -> Entry:
    """The entry *item* encodes, its shape checked (its values were checked when they
    arrived, and the token is verified); *singles* asks of one request come before it."""
    if type(item) is list:
        fp = _fp(item[0])
        if fp[0] == _STEP_KIND:
            (value,) = item[1:]
            return StepResult(fp, value)
        return AnsweredOne(single_key(singles), fp, _answer_from_fields(fp[0], item[1:]))
    if type(item) is not dict:
        raise ValueError(f"bad journal entry {item!r}")
    if not item:
        return PAUSED
    prints, answers = {}, {}
    for key, (fp, *fields) in item.items():
        prints[key] = fp = _fp(fp)
        answers[key] = _answer_from_fields(fp[0], fields)
    return Answered(prints, answers)


def _is_single(item: Any) -> bool:
    """Whether a journal item is an ask of one request: an array that is not a step's (or a
    malformed one, which is refused when it is read)."""
    if type(item) is not list:
        return False
    fp = item[0] if item else None
    return not (type(fp) is bytes and fp[:1] == _STEP_PREFIX)


_STEP_PREFIX = bytes((_STEP_KIND,))


def _pending_to_cbor(pending: Pending | PendingOne | PendingPoll | None) -> Any:
    if pending is None:
        return None
    if isinstance(pending, PendingOne):
        return pending.fingerprint
    if isinstance(pending, PendingPoll):
        return [pending.fingerprint, pending.deadline]
    entries: dict[str, list[Any]] = {}
    for key, fp in pending.fingerprints.items():
        answer = pending.answered.get(key)
        entry: list[Any] = [fp, None if answer is None else _answer_fields(answer)]
        if pending.requests is not None:
            entry.append(pending.requests[key].to_wire())
        entries[key] = entry
    return entries


def _pending_from_cbor(data: Any) -> Pending | PendingOne | PendingPoll | None:
    if data is None:
        return None
    if type(data) is bytes:
        return PendingOne(_fp(data))
    if type(data) is list:
        fp, deadline = data
        if deadline is not None and not _is_time(deadline):
            raise ValueError(f"bad poll deadline {deadline!r}")
        return PendingPoll(_fp(fp), deadline)
    if type(data) is not dict:
        raise ValueError(f"bad pending entry {data!r}")
    fingerprints: dict[str, bytes] = {}
    answered: dict[str, Answer] = {}
    requests: dict[str, Request] | None = {}
    for key, entry in data.items():
        fingerprints[key] = fp = _fp(entry[0])
        if entry[1] is not None:
            answered[key] = _answer_from_fields(fp[0], entry[1])
        if len(entry) == 3 and requests is not None:
            requests[key] = request_from_wire(entry[2])
        else:
            requests = None
    return Pending(fingerprints, answered, requests if data else None)


def _fp(value: Any) -> bytes:
    if type(value) is not bytes or len(value) != FINGERPRINT_BYTES:
        raise ValueError(f"bad fingerprint {value!r}")
    return value


def _is_time(value: Any) -> bool:
    return type(value) is int and 0 <= value < _MAX_TIME
