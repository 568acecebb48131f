"""The flows every benchmark runs, written once as mrtr_trio handlers, and what the client answers.

- ``trip``: the 3-question trip (destination, dates, confirm, then a booking), the end-to-end
  flow that the SDK implementations in [benchmarks.servers][] also serve;
- ``plan_trip``: the same with a fourth question (party size), for the 3-answer modern round;
- ``survey``: *n* identical questions, for journals of any length.

Answers are the client's JSON, filled by property name from the requested schema, the same for
every implementation.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from mrtr_trio import Context, ElicitRequest, done, elicit

__all__ = [
    "CONFIRM",
    "COUNT",
    "DATES",
    "DESTINATION",
    "PARTY",
    "TRAVELLER",
    "answer_json",
    "booking",
    "fill",
    "plan_trip",
    "survey",
    "trip",
]


def _form(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


DESTINATION = _form(city={"type": "string", "description": "City"})
DATES = _form(
    start={"type": "string", "description": "First day (YYYY-MM-DD)"},
    nights={"type": "integer", "minimum": 1},
)
PARTY = _form(adults={"type": "integer", "minimum": 1})
CONFIRM = _form(confirm={"type": "boolean"})
COUNT = _form(v={"type": "integer"})

#: The traveller every flow is run for.
TRAVELLER = "Ada"

_CANNED: dict[str, Any] = {
    "city": "Lisbon",
    "start": "2026-09-01",
    "nights": 3,
    "adults": 2,
    "confirm": True,
    "v": 1,
}


def fill(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The content the benchmark's user types into a form with these properties."""
    return {name: _CANNED[name] for name in properties}


def answer_json(request: object) -> dict[str, Any]:
    """The client's JSON answer to a form elicitation: accept, with canned content."""
    assert isinstance(request, ElicitRequest) and request.schema is not None
    return {"action": "accept", "content": fill(request.schema["properties"])}


def booking(traveller: str, city: str, start: str, nights: int) -> str:
    """What a completed trip returns, in every implementation."""
    return f"Booked {city} from {start}, {nights} nights, for {traveller}"


async def trip(ctx: Context, traveller: str) -> AsyncGenerator[Any, Any]:
    """Book a trip: where, when, and a confirmation."""
    where = yield elicit(f"Where to, {traveller}?", DESTINATION)
    city = where.content["city"]
    when = yield elicit(f"When do you go to {city}?", DATES)
    start, nights = when.content["start"], when.content["nights"]
    ok = yield elicit(f"Book {city} from {start} for {nights} nights?", CONFIRM)
    if not (ok.accepted and ok.content["confirm"]):
        yield done("Cancelled")
    yield done(booking(traveller, city, start, nights))


async def plan_trip(ctx: Context, traveller: str) -> AsyncGenerator[Any, Any]:
    """The trip with a fourth question: four asks, so the last round replays three answers."""
    where = yield elicit(f"Where to, {traveller}?", DESTINATION)
    city = where.content["city"]
    when = yield elicit(f"When do you go to {city}?", DATES)
    start, nights = when.content["start"], when.content["nights"]
    party = yield elicit(f"How many adults travel to {city}?", PARTY)
    adults = party.content["adults"]
    ok = yield elicit(f"Book {city} from {start} for {nights} nights, {adults} adults?", CONFIRM)
    if not (ok.accepted and ok.content["confirm"]):
        yield done("Cancelled")
    yield done(booking(traveller, city, start, nights))


async def survey(ctx: Context, n: int) -> AsyncGenerator[Any, Any]:
    """Ask the same question *n* times and return the sum of the answers."""
    total = 0
    for i in range(n):
        answer = yield elicit(f"Question {i}?", COUNT)
        total += answer.content["v"]
    yield done(total)
