"""What checking accepted form content costs: the validator cache lookup, and a whole check.

    python -m benchmarks.schema_check

Prints microseconds per call for a typical four-field form (process CPU time, the best of five
batches; run on an idle machine). The cache lookup (by the schema's `id`, checked by equality
with a copy) is paid on every check; compiling a validator only once per schema. For
comparison, the line keyed by canonical JSON shows what a cache keyed by
`json.dumps(schema, sort_keys=True)` would cost.
"""

from __future__ import annotations

import json
import time
import timeit
from collections.abc import Callable

from mrtr_trio import _schema
from mrtr_trio._schema import content_problems

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "people": {"type": "integer", "minimum": 1, "maximum": 12},
        "when": {"type": "string", "format": "date-time"},
        "seating": {"type": "string", "enum": ["inside", "terrace"]},
    },
    "required": ["name", "people", "when"],
}
VALID = {"name": "Ada", "people": 2, "when": "2026-12-24T19:30:00Z", "seating": "inside"}
INVALID = {"name": "", "people": 20, "when": "2026-12-24T19:30", "seating": "roof"}


def per_call_us(call: Callable[[], object], number: int = 20_000) -> float:
    """Process CPU microseconds per call, the best of five batches of *number* calls."""
    best = min(timeit.repeat(call, number=number, repeat=5, timer=time.process_time))
    return best / number * 1e6


def _compile_afresh() -> object:
    _schema._COMPILED.clear()
    _schema._BY_TEXT.clear()
    return _schema.compile_schema(SCHEMA)


def main() -> None:
    content_problems(SCHEMA, VALID)  # compile once
    results = {
        "cache lookup": per_call_us(lambda: _schema.compile_schema(SCHEMA), 200_000),
        "(a canonical-JSON cache key alone)": per_call_us(
            lambda: json.dumps(SCHEMA, sort_keys=True, separators=(",", ":"))
        ),
        "content_problems, valid content": per_call_us(lambda: content_problems(SCHEMA, VALID)),
        "content_problems, 4 problems": per_call_us(
            lambda: content_problems(SCHEMA, INVALID), 5_000
        ),
        "compiling a schema (a cache miss)": per_call_us(_compile_afresh, 5_000),
    }
    for name, micros in results.items():
        print(f"{name:40} {micros:8.2f} µs")


if __name__ == "__main__":
    main()
