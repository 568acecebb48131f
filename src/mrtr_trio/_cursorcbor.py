"""A token's body: a [Cursor][mrtr_trio._journal.Cursor] as compact CBOR
(`[rounds, issued_at, lifetime, journal, pending, payload, flow_id]`), decoded with tight
limits and every field checked. Its items' layout is `_entrycbor`'s, the journal's
`_encodedjournal`'s."""

from __future__ import annotations

import cbor2

from ._encodedjournal import EncodedJournal, Reject, _encode_journal, _refuse
from ._entrycbor import _is_time, _pending_from_cbor, _pending_to_cbor
from ._journal import Cursor, strict_decoder
from ._tokenformat import FLOW_ID_BYTES

__all__ = ["decode_cursor", "encode_cursor"]


def _header_length(first: int) -> int:
    """How many bytes the CBOR head of an array takes, from its first byte."""
    return _HEADER_LENGTHS.get(first, 1)


_HEADER_LENGTHS = {0x98: 2, 0x99: 3, 0x9A: 5, 0x9B: 9}


def encode_cursor(cursor: Cursor, issued_at: int, lifetime: int) -> bytes:
    """The cursor as compact CBOR, stamped with *issued_at* and *lifetime*."""
    return cbor2.dumps(
        [
            cursor.rounds,
            issued_at,
            lifetime,
            _encode_journal(cursor.journal),
            _pending_to_cbor(cursor.pending),
            cursor.payload,
            cursor.flow_id,
        ]
    )


def decode_cursor(
    body: bytes, key_id: bytes = b"", token_id: bytes = b"", reject: Reject = _refuse
) -> Cursor:
    """The cursor from its CBOR (read from the token *token_id*, verified by the key *key_id*);
    `ValueError` when the body is not one. Its journal's entries are checked when they are
    read, and *reject* refuses a malformed one (see
    [EncodedJournal][mrtr_trio._encodedjournal.EncodedJournal])."""
    try:
        decoder = strict_decoder()
        rounds, issued_at, lifetime, journal, pending, payload, flow_id = decoder.loads(body)
        if not (_is_time(rounds) and _is_time(issued_at) and _is_time(lifetime)):
            raise ValueError("bad counters")
        if type(flow_id) is not bytes or len(flow_id) != FLOW_ID_BYTES:
            raise ValueError("bad flow id")
        if type(journal) is not bytes or not journal:
            raise ValueError("bad journal")
        items = decoder.loads(journal)
        if type(items) is not list:
            raise ValueError("the journal is not an array")
        return Cursor(
            EncodedJournal(items, journal[_header_length(journal[0]) :], reject),
            _pending_from_cbor(pending),
            rounds,
            payload,
            issued_at,
            lifetime,
            flow_id,
            key_id,
            token_id,
        )
    except ValueError:
        raise
    except Exception as problem:  # whatever else a signed but absurd body trips over
        raise ValueError(f"{type(problem).__name__}: {problem}") from None
