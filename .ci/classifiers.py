"""CI's check that pyproject.toml's Python classifiers list exactly the versions CI tests.

`.ci/run` tests one Python, the machine's `python3` (a fresh CI machine has no other, and
neither PyPI nor Debian's packages offer another quickly), and runs this with it:
`python .ci/classifiers.py [pyproject.toml]` exits 1, saying what to change, when the
"Programming Language :: Python :: 3.X" classifiers are not exactly that Python's version.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PREFIX = "Programming Language :: Python :: 3."


def listed_versions(pyproject: Path) -> list[str]:
    """The `3.X` versions the classifiers list."""
    classifiers = tomllib.loads(pyproject.read_text())["project"]["classifiers"]
    return sorted(c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith(PREFIX))


def main(argv: list[str]) -> int:
    pyproject = Path(argv[1]) if len(argv) > 1 else Path(__file__).parents[1] / "pyproject.toml"
    tested = f"{sys.version_info.major}.{sys.version_info.minor}"
    listed = listed_versions(pyproject)
    if listed != [tested]:
        print(
            f"{pyproject}: the classifiers list Python {', '.join(listed) or 'no 3.X version'}, "
            f"but CI tests Python {tested} only: list exactly the versions CI tests",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
