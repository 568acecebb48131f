"""Draw the replay machine's phase diagram from its transition table.

``python docs/scripts/phase_diagram.py`` rewrites the diagram in docs/replay.md (between the
``phase-diagram`` markers); ``--check`` exits non-zero when the page is out of date (the test
suite runs it, so the picture cannot drift from the code).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrtr_trio._replay import TRANSITIONS

PAGE = Path(__file__).resolve().parents[1] / "replay.md"
BEGIN = "<!-- phase-diagram: generated from mrtr_trio._replay.TRANSITIONS -->"
END = "<!-- /phase-diagram -->"


def diagram() -> str:
    """The Mermaid state diagram of ``TRANSITIONS``."""
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += ["    [*] --> REPLAYING: a retry with a journal"]
    lines += ["    [*] --> PENDING: a retry with only a pending point"]
    lines += ["    [*] --> LIVE: a first call, or a live session"]
    for phase, moves in TRANSITIONS.items():
        for event, target in moves.items():
            lines.append(f"    {phase!r} --> {target!r}: {event}")
    lines += ["    FINISHED --> [*]", "    ERROR --> [*]", "```"]
    return "\n".join(lines)


def render(page: str) -> str:
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{diagram()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    page = PAGE.read_text()
    if BEGIN not in page or END not in page:
        print(f"{PAGE} has no phase-diagram markers", file=sys.stderr)
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
