"""Draw the replay machine's phase diagram, and the table of the data each phase owns, from the
machine's own tables.

``python docs/scripts/phase_diagram.py`` rewrites both in docs/replay.md (between the
``phase-diagram`` and the ``phase-data`` markers); ``--check`` exits non-zero when the page is
out of date (the test suite runs it, so the pictures cannot drift from the code).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrtr_trio._replay import HOLDS, OWNS, TRANSITIONS

PAGE = Path(__file__).resolve().parents[1] / "replay.md"
#: The markers around each generated block.
DIAGRAM = (
    "<!-- phase-diagram: generated from mrtr_trio._replay.TRANSITIONS -->",
    "<!-- /phase-diagram -->",
)
DATA = ("<!-- phase-data: generated from mrtr_trio._replay.OWNS -->", "<!-- /phase-data -->")


def diagram() -> str:
    """The Mermaid state diagram of ``TRANSITIONS``: every move, an error's included."""
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += ["    [*] --> REPLAYING: a retry with a journal"]
    lines += ["    [*] --> PENDING: a retry with only a pending point"]
    lines += ["    [*] --> LIVE: a first call, or a live session"]
    for phase, moves in TRANSITIONS.items():
        for event, target in moves.items():
            lines.append(f"    {phase!r} --> {target!r}: {event}")
    lines += ["    FINISHED --> [*]", "    ERROR --> [*]", "```"]
    return "\n".join(lines)


def data() -> str:
    """The table of ``OWNS``: what each phase owns, in words (``HOLDS``)."""
    lines = ["| phase | owns |", "|---|---|"]
    for phase, owned in OWNS.items():
        held = "; ".join(HOLDS[slot] for slot in HOLDS if slot in owned) or "nothing"
        lines.append(f"| {phase!r} | {held} |")
    return "\n".join(lines)


def render(page: str) -> str:
    for (begin, end), draw in ((DIAGRAM, diagram), (DATA, data)):
        head, _, rest = page.partition(begin)
        _, _, tail = rest.partition(end)
        page = f"{head}{begin}\n{draw()}\n{end}{tail}"
    return page


def main(argv: list[str]) -> int:
    page = PAGE.read_text()
    missing = [marker for pair in (DIAGRAM, DATA) for marker in pair if marker not in page]
    if missing:
        print(f"{PAGE} lacks the markers {missing}", file=sys.stderr)
        return 1
    wanted = render(page)
    if "--check" in argv:
        if wanted != page:
            print(f"{PAGE} is out of date: run python {__file__}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
