"""Journals: made in memory, or read from a token's CBOR one entry at a time; and the
strict decoder that reads them.

An [EncodedJournal][mrtr_trio._encodedjournal.EncodedJournal] must read back exactly the
entries it was sealed from, answer a replay as the journal made in memory would, keep its encoding for
the next token, and refuse a malformed entry (in a token that verified) when it is read. Each
thread decodes with a decoder of its own, which a failure leaves as good as new.
"""

from __future__ import annotations

import random
import threading
from typing import Any, NoReturn

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_trio import InvalidRequestState, create_message, elicit, list_roots, step
from mrtr_trio._encodedjournal import EncodedJournal, _encode_journal
from mrtr_trio._journal import (
    PAUSED,
    Answered,
    AnsweredOne,
    Cursor,
    Entry,
    Journal,
    StepResult,
    StrictDecoder,
    answers,
    single_key,
    step_fingerprint,
    strict_decoder,
    strict_loads,
)
from mrtr_trio._replay import ERROR, Replay, Rules
from mrtr_trio._values import CreateMessageResult, ElicitResult, ListRootsResult, Root

FORM = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}
ASKS = [elicit(f"Question {n}?", FORM) for n in range(4)]
SAMPLE = create_message("Hi", max_tokens=5)
ROOTS = list_roots()


def lookup() -> None:
    pass


def one(n: int, request: Any, answer: Any) -> AnsweredOne:
    return AnsweredOne(single_key(n), request.fingerprint, answer)


def accept(v: int) -> ElicitResult:
    return ElicitResult("accept", {"v": v})


#: One entry of every kind, each single ask under the key its place gives it.
ENTRIES: tuple[Entry, ...] = (
    one(0, ASKS[0], accept(1)),
    StepResult(step_fingerprint(lookup), {"looked": ["up"]}),
    PAUSED,
    one(1, ASKS[1], ElicitResult("decline")),
    Answered(
        {"a": ASKS[2].fingerprint, "b": SAMPLE.fingerprint},
        {
            "a": accept(2),
            "b": CreateMessageResult("assistant", {"type": "text", "text": "yo"}, "m"),
        },
    ),
    one(2, SAMPLE, CreateMessageResult("assistant", {"type": "text", "text": "hi"}, "m", "end")),
    one(3, ROOTS, ListRootsResult((Root("file:///a"), Root("file:///b", "b")))),
    one(4, ASKS[3], accept(4)),
)


def refuse(reason: str) -> NoReturn:
    raise InvalidRequestState(reason)


def encoded(entries: tuple[Entry, ...] | list[Any], *, raw: bool = False) -> EncodedJournal:
    """The journal a token holding *entries* reads back (*raw*: CBOR items as they are)."""
    data = cbor2.dumps(entries) if raw else _encode_journal(Journal(entries))  # type: ignore[arg-type]
    return EncodedJournal(strict_loads(data), data[_head(data) :], refuse)


def _head(data: bytes) -> int:
    return {0x98: 2, 0x99: 3}.get(data[0], 1)


def test_an_encoded_journal_reads_back_the_entries_it_was_sealed_from() -> None:
    journal = encoded(ENTRIES)
    assert len(journal) == len(ENTRIES)
    assert list(journal) == list(ENTRIES)
    assert journal == Journal(ENTRIES)
    assert journal[-1] == ENTRIES[-1] and journal[2:4] == ENTRIES[2:4]
    with pytest.raises(IndexError):
        journal[len(ENTRIES)]


def test_a_single_ask_under_another_key_reads_back_as_a_batch_of_one() -> None:
    # The key of the n-th request yielded alone is implied by its place; one recorded under
    # another key is kept as a batch, and never replayed as a request yielded alone.
    moved = AnsweredOne("input-7", ASKS[0].fingerprint, accept(1))
    journal = encoded((moved,))
    assert list(journal) == [Answered({"input-7": ASKS[0].fingerprint}, {"input-7": accept(1)})]
    assert journal.answer(0, 0, ASKS[0].fingerprint) is None
    assert Journal((moved,)).answer(0, 0, ASKS[0].fingerprint) is None


@pytest.mark.parametrize("order", ["in order", "backwards"])
def test_answer_agrees_with_the_journal_made_in_memory(order: str) -> None:
    journal, memory = encoded(ENTRIES), Journal(ENTRIES)
    requests = [*ASKS, SAMPLE, ROOTS]
    positions = range(len(ENTRIES))
    for position in positions if order == "in order" else reversed(positions):
        for singles in range(6):
            for request in requests:
                fingerprint = request.fingerprint
                expected = memory.answer(position, singles, fingerprint)
                assert journal.answer(position, singles, fingerprint) == expected
    # The entries answered: each request yielded alone, under its place's key.
    hits = [
        (p, s)
        for p in positions
        for s in range(6)
        if any(memory.answer(p, s, r.fingerprint) is not None for r in requests)
    ]
    assert hits == [(0, 0), (3, 1), (5, 2), (6, 3), (7, 4)]


#: Entries a journal may hold: asks of one request under the key their place gives them or
#: another, of every kind and action, steps, pauses and batches.
_SOME_ENTRIES = st.one_of(
    st.builds(
        AnsweredOne,
        st.sampled_from([single_key(n) for n in range(4)]),
        st.sampled_from([a.fingerprint for a in ASKS[:2]]),
        st.sampled_from([accept(1), ElicitResult("decline"), ElicitResult("cancel")]),
    ),
    st.sampled_from(ENTRIES),
)


@settings(max_examples=max(100, settings.default.max_examples))
@given(entries=st.lists(_SOME_ENTRIES, max_size=6), order=st.randoms(use_true_random=False))
def test_the_tokens_shortcut_answers_as_the_one_rule_does(
    entries: list[Entry], order: random.Random
) -> None:
    # EncodedJournal.answer matches an elicitation's answer on the key's ordinal, without
    # making the entry. Whatever the journal, read in order or in any other, it answers exactly
    # what `answers` says the entry it holds answers (the entry as a token reads it back: a
    # single ask under a key its place does not give it reads back as a batch of one).
    journal, memory = encoded(entries), Journal(tuple(encoded(entries)))
    requests = [*ASKS, SAMPLE, ROOTS]
    reads = [(p, s, r) for p in range(len(entries)) for s in range(7) for r in requests]
    for shuffled in (False, True):
        if shuffled:
            order.shuffle(reads)
        for position, singles, request in reads:
            fingerprint = request.fingerprint
            expected = memory.answer(position, singles, fingerprint)
            assert journal.answer(position, singles, fingerprint) == expected
            assert (expected is not None) == answers(
                memory[position], single_key(singles), fingerprint
            )


def test_answers_read_in_order_are_fresh_values() -> None:
    journal = encoded(ENTRIES)
    first = journal.answer(0, 0, ASKS[0].fingerprint)
    assert first == accept(1) and type(first) is ElicitResult
    again = encoded(ENTRIES).answer(0, 0, ASKS[0].fingerprint)
    assert again == first and again is not first
    assert journal.answer(3, 1, ASKS[1].fingerprint) == ElicitResult("decline")


def test_sealing_reuses_the_encoding_and_appends_the_new_entries() -> None:
    journal = encoded(ENTRIES[:4])
    new = ENTRIES[4:]
    longer = journal.then(new)
    assert type(longer) is EncodedJournal and list(longer) == list(ENTRIES)
    assert _encode_journal(longer) == _encode_journal(Journal(ENTRIES))
    assert longer.then(()) is longer and journal.head(4) is journal
    # The first entries only (a flow that diverged after them): made again, then encoded.
    for length in range(len(ENTRIES) + 1):
        head = longer.head(length)
        assert list(head) == list(ENTRIES[:length])
        assert _encode_journal(head) == _encode_journal(Journal(ENTRIES[:length]))
    assert type(longer.head(3)) is Journal and type(longer.head(5)) is EncodedJournal


def test_sealing_a_journal_read_in_part_counts_its_single_asks() -> None:
    # The next single ask's key is its place among them: the count covers unread items too.
    journal = encoded(ENTRIES[:4])
    new = (one(2, SAMPLE, CreateMessageResult("user", {"type": "text", "text": "x"}, "m")),)
    assert _encode_journal(journal.then(new)) == _encode_journal(Journal(ENTRIES[:4] + new))


ADA = [ASKS[0].fingerprint, 0, {"v": 1}]


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ([b"\0", 1], "fingerprint"),
        ([ASKS[0].fingerprint, 7, {"v": 1}], "action 7"),
        ([ASKS[0].fingerprint, True, {"v": 1}], "action True"),
        ([ASKS[0].fingerprint, 0, [1]], "content"),
        ([ASKS[0].fingerprint], "elicitation answer"),
        ([ASKS[0].fingerprint, 0, {}, 1], "elicitation answer"),
        ({"k": [ASKS[0].fingerprint]}, "elicitation answer"),
        ({"k": 5}, "TypeError"),
        ([step_fingerprint(lookup), 1, 2], "unpack"),
        ([b"\x07\0\0\0\0\0\0\0\0", 1], "answer kind 7"),
        (5, "journal entry 5"),
        ([], "IndexError"),
    ],
)
def test_a_malformed_item_is_refused_when_it_is_read(item: Any, reason: str) -> None:
    journal = encoded([ADA, item, ADA], raw=True)
    assert journal.answer(0, 0, ASKS[0].fingerprint) == accept(1)
    for read in (
        lambda: journal[1],
        lambda: journal.answer(1, 1, ASKS[0].fingerprint),
        lambda: journal.answer(1, 1, ASKS[1].fingerprint),
    ):
        with pytest.raises(InvalidRequestState) as caught:
            read()
        assert caught.value.reason.startswith("malformed body (") and reason in caught.value.reason
    # The items around it read as ever (a replay never gets past it, but reading is robust);
    # an array that is not a step's counts as a single ask.
    before = 1 + (isinstance(item, list) and item[:1] != [step_fingerprint(lookup)])
    assert journal[2] == AnsweredOne(single_key(before), ADA[0], accept(1))


def test_a_replay_that_reads_a_malformed_item_ends_in_error() -> None:
    journal = encoded([ADA, [ASKS[1].fingerprint, 9]], raw=True)
    machine = Replay("flow", Rules(8, record=True), Cursor(journal))
    assert machine.replayed(ASKS[0]) == accept(1)
    with pytest.raises(InvalidRequestState) as caught:
        machine.replayed(ASKS[1])
    assert "action 9" in caught.value.reason and machine.phase is ERROR
    machine = Replay("flow", Rules(8, record=True), Cursor(encoded([[b"\0"]], raw=True)))
    with pytest.raises(InvalidRequestState) as caught:
        machine.next(step(lookup))
    assert "fingerprint" in caught.value.reason and machine.phase is ERROR


def test_the_count_of_single_asks_survives_malformed_items() -> None:
    journal = encoded([5, [], {"k": 1}, [b"\0"], ADA], raw=True)
    assert journal.answer(4, 2, ASKS[0].fingerprint) == accept(1)


# ------------------------------------------------------------------ the thread's decoder


def test_each_thread_decodes_with_a_decoder_of_its_own() -> None:
    values = [{"n": n, "s": "x" * n, "l": list(range(n))} for n in range(50)]
    encoded_values = [cbor2.dumps(v) for v in values]
    mine = strict_decoder()
    assert strict_decoder() is mine and strict_decoder(8) is not mine
    seen: dict[str, Any] = {}
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def decode(name: str) -> None:
        try:
            start.wait()
            seen[name] = strict_decoder()
            for _ in range(200):
                assert [strict_loads(e) for e in encoded_values] == values
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=decode, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len({id(d) for d in seen.values()} | {id(mine)}) == 5


def test_a_decode_inside_a_decode_gets_a_decoder_of_its_own() -> None:
    # Code that runs while the thread's decoder is busy (here a tag hook; in real life a
    # finalizer) may decode too.
    decoder = StrictDecoder()

    def hook(tag: cbor2.CBORTag, immutable: bool) -> Any:
        return decoder.loads(cbor2.dumps(["inner", tag.value]))

    decoder._decoder.tag_hook = hook
    assert decoder.loads(cbor2.dumps([1, cbor2.CBORTag(9999, "x"), 2])) == [1, ["inner", "x"], 2]
    assert decoder.loads(cbor2.dumps([3])) == [3]


@pytest.mark.parametrize(
    "bad",
    [
        b"\x81" * 40 + b"\x00",  # too deep
        cbor2.dumps([[[cbor2.CBORTag(1, 0)]]]),  # a tag, deep inside
        cbor2.dumps([[[1, 2, 3]]])[:-1],  # cut short
        b"\xa2\x01\x01\x01\x02",  # a duplicate key
        cbor2.dumps([1]) + b"\x00",  # trailing
    ],
)
def test_a_decoder_that_failed_decodes_the_next_input_as_a_fresh_one(bad: bytes) -> None:
    decoder = strict_decoder()
    deepest: Any = 0
    for _ in range(31):  # the deepest nesting allowed
        deepest = [deepest]
    with pytest.raises((ValueError, cbor2.CBORDecodeError)):
        decoder.loads(bad)
    assert decoder.loads(cbor2.dumps(deepest)) == deepest
    assert decoder.loads(cbor2.dumps({"a": [1, {"b": 2}]})) == {"a": [1, {"b": 2}]}
