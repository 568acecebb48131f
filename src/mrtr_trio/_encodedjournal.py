"""A journal read from a token, each entry made when a replay reads it
([EncodedJournal][mrtr_trio._encodedjournal.EncodedJournal]), and a journal's encoding for
the next token, reusing the bytes it was read from (`_encode_journal`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import cbor2

from ._entrycbor import (
    _ACTION_COUNT,
    _entry_from_cbor,
    _entry_to_cbor,
    _is_single,
)
from ._errors import InvalidRequestState
from ._journal import Entry, Journal, answers_one
from ._values import ACTIONS, KIND_CODES, Answer, trusted_elicit_result

__all__ = ["EncodedJournal", "Reject"]

_ELICIT_KIND = KIND_CODES["elicitation/create"]
#: Raises [InvalidRequestState][mrtr_trio.InvalidRequestState] for a reason (logging it, or not).
Reject = Callable[[str], NoReturn]


def _refuse(reason: str) -> NoReturn:
    raise InvalidRequestState(reason)


class EncodedJournal(Journal):
    """A journal read from a token: its entries as the token's CBOR items, each made into an
    [Entry][mrtr_trio._journal.Entry] only when it is read, so a retry builds only what its
    replay does not answer on the spot; and their encoding, which sealing the next token
    reuses. Entries added after them (`then`) are held in memory.

    An item's shape is checked when it is read: a malformed one, in a token that verified,
    is refused through *reject* (an [InvalidRequestState][mrtr_trio.InvalidRequestState],
    "malformed body"). Items never read (a flow that diverged before them) are not checked.
    """

    __slots__ = ("_counted", "_encoded", "_items", "_reject", "_singles")

    def __init__(
        self,
        items: list[Any],
        encoded: bytes,
        reject: Reject = _refuse,
        entries: Sequence[Entry] = (),
    ) -> None:
        super().__init__(entries)
        self._items = items
        self._encoded = encoded
        self._reject = reject
        # The asks of one request among the first `_counted` items (see `_singles_before`):
        # where the last read stopped, so that reading in order counts each item once.
        self._counted = 0
        self._singles = 0

    def __len__(self) -> int:
        return len(self._items) + len(self._entries)

    def _entry(self, index: int) -> Entry:
        size = len(self._items)
        if index < 0:
            index += len(self)
        if index >= size:
            return self._entries[index - size]
        if index < 0:
            raise IndexError("journal index out of range")
        try:
            return _entry_from_cbor(self._items[index], self._singles_before(index))
        except Exception as problem:  # whatever a signed but absurd item trips over
            self._reject(f"malformed body ({_problem(problem)})")

    def answer(self, position: int, singles: int, fingerprint: bytes) -> Answer | None:
        # The commonest entry, an elicitation's answer, is checked and built here, as
        # `_entry_from_cbor` would (without the entry around it), and matched by the journal's
        # one rule (`answers_one`) on the key's ordinal; anything else is read as an entry, and
        # matched and checked there.
        try:
            item = self._items[position]
        except IndexError:  # past the items: an entry held in memory
            return super().answer(position, singles, fingerprint)
        if position != self._counted:  # (reads in order find the count ready)
            self._singles_before(position)
        if fingerprint[0] == _ELICIT_KIND and type(item) is list:
            size = len(item)
            if size == 3:
                fp, code, content = item
                if type(content) is not dict:
                    fp = None
            elif size == 2:
                fp, code = item
                content = None
            else:
                fp = code = content = None
            if (
                answers_one(self._singles, fp, singles, fingerprint)
                and type(code) is int
                and 0 <= code < _ACTION_COUNT
            ):
                self._counted, self._singles = position + 1, singles + 1
                return trusted_elicit_result(ACTIONS[code], content)
        return super().answer(position, singles, fingerprint)

    def head(self, length: int) -> Journal:
        size = len(self._items)
        if length < size:
            return Journal(self[:length])
        return self._followed_by(self._entries[: length - size]) if length < len(self) else self

    def then(self, entries: Sequence[Entry]) -> Journal:
        return self._followed_by((*self._entries, *entries)) if entries else self

    def sealed(self) -> tuple[bytes, int, tuple[Entry, ...]]:
        """What sealing this journal reuses: the items' encoding and how many of them are asks
        of one request; and the entries held in memory after them, to encode."""
        return self._encoded, self._singles_before(len(self._items)), self._entries

    def _followed_by(self, entries: Sequence[Entry]) -> EncodedJournal:
        journal = EncodedJournal(self._items, self._encoded, self._reject, entries)
        journal._counted, journal._singles = self._counted, self._singles
        return journal

    def _singles_before(self, position: int) -> int:
        """How many of the items before *position* are asks of one request (the next one's key
        is `input-N`, N that count). Items read in order are counted once."""
        counted, singles = self._counted, self._singles
        if position < counted:
            counted = singles = 0
        items = self._items
        for index in range(counted, position):
            singles += _is_single(items[index])
        self._counted, self._singles = position, singles
        return singles


def _problem(problem: Exception) -> str:
    return str(problem) if type(problem) is ValueError else f"{type(problem).__name__}: {problem}"


def _encode_journal(journal: Journal) -> bytes:
    """The journal's bstr content, reusing the encoding of the entries it was read with."""
    encoded, singles, new = journal.sealed()
    parts = [_array_header(len(journal)), encoded]
    for entry in new:
        value, singles = _entry_to_cbor(entry, singles)
        parts.append(cbor2.dumps(value))
    return b"".join(parts)


def _array_header(length: int) -> bytes:
    """The CBOR head of an array of *length* items (the shortest form, as cbor2 writes it)."""
    if length < 24:
        return bytes((0x80 | length,))
    for first, size in ((0x98, 1), (0x99, 2), (0x9A, 4), (0x9B, 8)):
        if length < 1 << (8 * size):
            return bytes((first,)) + length.to_bytes(size, "big")
    raise ValueError("journal too long")  # pragma: no cover
