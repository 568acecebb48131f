"""What a modern flow remembers between rounds: its journal, its pending point, and which values
can be remembered at all.

A **journal** has one entry per yield the client has already seen through: an `Answered` entry
holds the answers to an ask (none for a `pause()`; `AnsweredOne` for a request yielded on its
own, the common case), a `StepResult` the value of a `step` or `poll`. Each entry carries
the short fingerprint of the request or step it answers, so a replay can tell that the handler
now does something else. A `Journal` holds the entries in order (one read from a token makes
each entry only when a replay reads it: `_encodedjournal`'s `EncodedJournal`). The **pending** point
is the yield the client is answering this round (`Pending`, `PendingOne` for a request
yielded on its own, or `PendingPoll` for a `poll`
waiting on the outside world). A `Cursor` holds both, with the round count and the
return-style payload: everything a retry needs to continue a flow in a fresh process.

Values a journal holds must survive CBOR: `recordable` gives a value as it will read back, so
both eras feed handlers exactly the same thing.

This module knows nothing of tokens, keys or trio; `_cursorcbor` encodes a cursor, `_replay`
decides what to do with one.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, overload

import attrs
import cbor2

from ._errors import MrtrError
from ._util import Memo
from ._values import KIND_NAMES, Answer, Request, fingerprint_of

__all__ = [
    "MAX_DEPTH",
    "Mark",
    "Answered",
    "AnsweredOne",
    "Cursor",
    "EMPTY_JOURNAL",
    "Entry",
    "Journal",
    "PAUSED",
    "Pending",
    "PendingOne",
    "PendingPoll",
    "SINGLE_KEYS",
    "StepResult",
    "StrictDecoder",
    "answers",
    "answers_one",
    "describe_fingerprint",
    "flat_record_problem",
    "qualified_name",
    "record_problem",
    "recordable",
    "single_key",
    "step_fingerprint",
    "step_identity",
    "strict_decoder",
    "strict_loads",
]


def qualified_name(fn: Callable[..., Any]) -> str:
    """The identity of a handler: its `__qualname__` (not its module, so a file run as a
    script and the same file imported agree); a `functools.partial` is named after the
    function it wraps. (A step's identity says more: see `step_identity`.)"""
    target = getattr(fn, "func", fn)
    return getattr(target, "__qualname__", None) or type(fn).__qualname__


def step_identity(fn: Callable[..., Any], name: str | None = None) -> str:
    """The identity of a `step` or `poll` in the journal: *name* when the handler gave one;
    otherwise derived from *fn* so that distinct functions differ:

    - its `__qualname__` (not its module, as for handlers);
    - a `functools.partial` is `partial(...)` around the identity of the function it wraps, so
      it differs from that function;
    - a lambda, or a function defined inside another (`<locals>` in its qualname: a closure),
      adds its code location within the file (`@line:column`), so two lambdas of one handler
      differ. Editing the lines above it changes that location: name such steps explicitly
      (`step(fn, name="charge")`) to keep flows in flight replayable across releases.

    The step's position is not part of it: the journal is compared entry by entry, in order.
    """
    if name is not None:
        return name
    if isinstance(fn, functools.partial):
        return f"partial({step_identity(fn.func)})"
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:  # a callable object: its class names it
        return type(fn).__qualname__
    if "<" in qualname:  # <lambda>, <locals>: tell them apart by where they are defined
        code = getattr(fn, "__code__", None)
        if code is not None:
            return f"{qualname}@{_location(code)}"
    return str(qualname)


def _location(code: Any) -> str:
    """`line:column` of a code object's definition: its first line, and the first column on
    it where an instruction starts (the body of a lambda)."""
    first = code.co_firstlineno
    columns = [col for line, _, col, _ in code.co_positions() if line == first and col]
    return f"{first}:{min(columns, default=0)}"


_STEP_FINGERPRINTS: Memo[Any, bytes] = Memo()


def step_fingerprint(fn: Callable[..., Any], name: str | None = None) -> bytes:
    """A short digest naming a `step` (or `poll`): its identity (`step_identity`), not its
    arguments, which may legitimately vary."""
    memo_key = fn if name is None else name
    known = _STEP_FINGERPRINTS.get(memo_key)
    if known is not None:
        return known
    identity = step_identity(fn, name)
    return _STEP_FINGERPRINTS.put(memo_key, fingerprint_of("step", identity.encode()))


def describe_fingerprint(value: bytes) -> str:
    """`"elicitation/create 0a1b2c3d"`: the kind and the hex of a fingerprint."""
    return f"{KIND_NAMES.get(value[0], '?')} {value.hex()}"


# ------------------------------------------------------------------------------ entries

#: The keys of a flow's first single-request asks (see `single_key`), made once: every
#: replayed entry needs one.
SINGLE_KEYS = tuple(f"input-{n}" for n in range(1024))


def single_key(n: int) -> str:
    """The generated key of a flow's *n*-th request yielded on its own: `input-N`."""
    return SINGLE_KEYS[n] if n < len(SINGLE_KEYS) else f"input-{n}"


@attrs.frozen
class Answered:
    """An ask the client answered: by key, the fingerprint of each request and its answer. No
    keys: a `pause()` the client already gave its turn for."""

    fingerprints: Mapping[str, bytes]
    answers: Mapping[str, Answer]


@attrs.frozen
class AnsweredOne:
    """An ask of one request (a request yielded bare, under its generated key), answered."""

    key: str
    fingerprint: bytes
    answer: Answer


@attrs.frozen
class StepResult:
    """A `step` that ran, or a `poll` that ended: its fingerprint and its (CBOR-normalised)
    value."""

    fingerprint: bytes
    value: Any


Entry: TypeAlias = Answered | AnsweredOne | StepResult

#: The journal entry of a pause.
PAUSED = Answered({}, {})


@attrs.frozen
class Pending:
    """The ask the client is answering this round (no keys: a `pause()`).

    `fingerprints` maps each key to the fingerprint of its request; `answered` holds the
    valid answers already received for some keys (a batch answered in part). `requests` is set
    for return-style handlers only: they are not replayed, so the requests travel along to check
    the answers against.
    """

    fingerprints: Mapping[str, bytes]
    answered: Mapping[str, Answer] = attrs.field(factory=dict)
    requests: Mapping[str, Request] | None = None


@attrs.frozen
class PendingOne:
    """The request a yield-style flow yielded on its own, which the client is answering this
    round: its fingerprint. Its key is implied: `input-N`, N the asks of one request in the
    journal before it (see `single_key`), so a token need not carry it."""

    fingerprint: bytes


@attrs.frozen
class PendingPoll:
    """A `poll` whose condition was not met yet: its fingerprint and the time (seconds since
    the epoch) after which waiting fails; `None` waits as long as the client retries."""

    fingerprint: bytes
    deadline: int | None


#: What a need is matched by: the fingerprint of a request yielded on its own or of a step or
#: poll, or an ask's fingerprints by key.
Mark: TypeAlias = bytes | Mapping[str, bytes]


def answers(
    recorded: Entry | Pending | PendingOne | PendingPoll,
    key: str | None,
    mark: Mark,
    poll: bool = False,
) -> bool:
    """Whether *recorded* (a journal entry, or the pending point of a checkpoint) answers a
    need: a request yielded on its own, asked under *key* with fingerprint *mark*; or (*key*
    `None`) an ask whose fingerprints by key are *mark*, or a step or (*poll*) a poll whose
    fingerprint is *mark*. The one rule replaying and resuming follow: the same kind, keys and
    fingerprints (a pending ask of one request implies its key, the next `input-N`; a step's
    result answers a step or a poll, a waiting poll's pending point only that poll)."""
    kind = type(recorded)
    if kind is AnsweredOne:
        return answers_one(recorded.key, recorded.fingerprint, key, mark)  # type: ignore[union-attr]
    if kind is PendingOne:
        return key is not None and recorded.fingerprint == mark  # type: ignore[union-attr]
    if kind is Answered or kind is Pending:
        return key is None and recorded.fingerprints == mark  # type: ignore[union-attr]
    if kind is PendingPoll and not poll:
        return False
    return key is None and recorded.fingerprint == mark  # type: ignore[union-attr]


def answers_one(
    recorded_key: object, recorded_fingerprint: bytes, key: object, mark: object
) -> bool:
    """[answers][mrtr_trio._journal.answers]'s rule for the answer to a request yielded on its
    own, on its parts: it answers a need with the same key and fingerprint. A journal read from
    a token, where that key is implied by the entry's place, passes the keys' ordinals
    (`input-N`'s N, which names one key: see `single_key`) and so makes no key to compare."""
    return recorded_fingerprint == mark and recorded_key == key


class Journal(Sequence[Entry]):
    """A flow's journal: its entries, in order.

    This class holds entries made in memory (a round's new ones, a test's). A journal read from
    a token is an [EncodedJournal][mrtr_trio._encodedjournal.EncodedJournal], which makes each
    entry only when it is read, and keeps the token's encoding for the next token. Both follow
    one rule: the *n*-th request a flow yields on its own is asked under `input-n` (see
    `single_key`), and only an `AnsweredOne` under that key answers it.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._entries = tuple(entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Entry, ...]: ...

    def __getitem__(self, index: int | slice) -> Entry | tuple[Entry, ...]:
        if isinstance(index, slice):
            return tuple(self._entry(i) for i in range(*index.indices(len(self))))
        return self._entry(index)

    def _entry(self, index: int) -> Entry:
        """The entry at *index* (negative: from the end); `IndexError` when there is none."""
        return self._entries[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Journal):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def answer(self, position: int, singles: int, fingerprint: bytes) -> Answer | None:
        """The recorded answer when the entry at *position* answers the flow's request yielded
        on its own as its *singles*-th (asked under `input-{singles}`), whose fingerprint is
        *fingerprint*; `None` when it records anything else."""
        entry = self[position]
        if answers(entry, single_key(singles), fingerprint):
            return entry.answer  # type: ignore[union-attr]
        return None

    def head(self, length: int) -> Journal:
        """The first *length* entries."""
        return self if length >= len(self) else Journal(self[:length])

    def then(self, entries: Sequence[Entry]) -> Journal:
        """This journal followed by *entries*."""
        return Journal((*self._entries, *entries)) if entries else self

    def sealed(self) -> tuple[bytes, int, tuple[Entry, ...]]:
        """What sealing this journal into a token reuses: the encoding of its first entries
        (none here: every entry is held in memory) and how many of those are asks of one
        request; and the entries after them, to encode."""
        return b"", 0, self._entries


#: The journal of a flow that has not been answered anything yet.
EMPTY_JOURNAL = Journal()


@attrs.frozen
class Cursor:
    """Where a modern flow stands (see the module docstring). `issued_at` and `lifetime`
    are set when the cursor is sealed into a token.

    `flow_id` is minted at random on the flow's first call and carried in every token: it
    tells one flow from another with the same arguments (step idempotency keys are derived
    from it).

    Set when a cursor is read from a token, for the codec's use only: `key_id`, the key that
    verified it; `token_id`, its tag.
    """

    journal: Journal = EMPTY_JOURNAL
    pending: Pending | PendingOne | PendingPoll | None = None
    rounds: int = 0
    payload: Any = None
    issued_at: int = 0
    lifetime: int = 0
    flow_id: bytes = b""
    key_id: bytes = attrs.field(default=b"", repr=False, eq=False)
    token_id: bytes = attrs.field(default=b"", repr=False, eq=False)


# ------------------------------------------------------------------------------ recordable

# The tags cbor2 decodes itself (tag_hook never sees them); each is overridden to fail, but
# for bignums (2, 3): JSON integers have no size limit, and they decode to plain ints.
_BUILTIN_TAGS = (
    *(0, 1, 4, 5, 25, 28, 29, 30, 35, 36, 37, 52, 54),
    *(100, 256, 258, 260, 261, 1004, 43000, 55799),
)
#: Nesting the token decoder allows; recorded values get less, for the cursor around them.
MAX_DEPTH = 32
_VALUE_DEPTH = MAX_DEPTH - 8


def _reject_tag(*_: Any) -> Any:
    raise ValueError("CBOR tags are not allowed")


_NO_TAGS = dict.fromkeys(_BUILTIN_TAGS, _reject_tag)


def strict_loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Decode CBOR with tight limits: no tags (so nothing but plain JSON-like values and bytes),
    no indefinite lengths, no duplicate keys, small depth, and no trailing bytes."""
    return strict_decoder(max_depth).loads(data)


def strict_decoder(max_depth: int = MAX_DEPTH) -> StrictDecoder:
    """This thread's `StrictDecoder` for *max_depth*. Making a decoder costs about as much as
    decoding a short value, and a decode runs to its end without yielding to other code, so
    one per thread serves every call. (It keeps a reference to its last input until the
    next.)"""
    decoders = _THREAD.decoders
    decoder = decoders.get(max_depth)
    if decoder is None:
        decoder = decoders[max_depth] = StrictDecoder(max_depth)
    return decoder


class _Thread(threading.local):
    def __init__(self) -> None:
        self.decoders: dict[int, StrictDecoder] = {}


_THREAD = _Thread()


class StrictDecoder:
    """`strict_loads` for several byte strings in turn, through one decoder (see
    `strict_decoder`)."""

    __slots__ = ("_decoder", "_max_depth")

    def __init__(self, max_depth: int = MAX_DEPTH) -> None:
        self._max_depth = max_depth
        self._decoder = cbor2.CBORDecoder(
            _NO_INPUT,
            tag_hook=_reject_tag,
            semantic_decoders=_NO_TAGS,
            max_depth=max_depth,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            strict_hashable_types=True,
        )

    def loads(self, data: bytes) -> Any:
        """*data* decoded (see `strict_loads`)."""
        decoder = self._decoder
        try:
            decoder.fp = stream = io.BytesIO(data)
        except RuntimeError:  # "Already borrowed": called from code run inside a decode
            return StrictDecoder(self._max_depth).loads(data)
        value = decoder.decode()
        if stream.tell() != len(data):
            raise ValueError(f"{len(data) - stream.tell()} trailing bytes")
        return value


# What a decoder reads before it is given its first input (it never reads from it).
_NO_INPUT = io.BytesIO(b"")


_UNRECORDABLE = (cbor2.CBORError, TypeError, ValueError, RecursionError)


def recordable(value: Any, what: str) -> Any:
    """*value* as it will read back from a token: encoded to CBOR and decoded again (tuples
    become lists). Both eras feed handlers this normalised value, so they see the same thing.

    Raises [MrtrError][mrtr_trio.MrtrError] naming *what* when the value cannot be recorded.
    """
    try:
        return strict_loads(cbor2.dumps(value), _VALUE_DEPTH)
    except _UNRECORDABLE as problem:
        raise MrtrError(
            f"cannot record the {type(value).__name__} from {what} in requestState "
            f"({problem}); use None, bool, int, float, str, bytes, lists and dicts"
        ) from None


def flat_record_problem(content: Mapping[str, Any]) -> str | None:
    """`record_problem` for flat content (string keys; strings, numbers, booleans and lists of
    strings as values, as a form answer holds): only a string can fail (one that is not valid
    Unicode), and an ASCII string never does, which `str.isascii` says at once. Anything
    else takes the full check, for its exact message."""
    for key, value in content.items():
        kind = type(value)
        if kind is str:
            plain = value.isascii()
        elif kind is list:
            plain = all(type(v) is str and v.isascii() for v in value)
        else:
            plain = kind is bool or kind is int or kind is float
        if not (plain and type(key) is str and key.isascii()):
            return record_problem(content, False)
    return None


def record_problem(value: Any, depth: bool = True) -> str | None:
    """Why *value* could not be recorded in a token and read back (too deep, a type with no
    plain CBOR form, a string that is not valid Unicode), or `None` when it can.
    *depth=False* skips the depth check, for a value known to be shallow."""
    try:
        encoded = cbor2.dumps(value)
        # Every level of nesting takes at least a byte: a short value cannot be too deep.
        if depth and len(encoded) > _VALUE_DEPTH:
            strict_loads(encoded, _VALUE_DEPTH)
    except _UNRECORDABLE as problem:
        return str(problem)
    return None
