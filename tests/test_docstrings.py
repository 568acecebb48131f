"""Docstrings are Markdown: mkdocstrings renders them on the API page and `help()` shows them
as they are, so reST roles (:class:`X`) and double backticks would show as raw text."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import mrtr_trio

SOURCE = Path(mrtr_trio.__file__).resolve().parent
ROOT = SOURCE.parents[1]
NOT_YET_CONVERTED: set[str] = set()
# Double backticks, but not a Markdown code fence (three or more).
REST = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj|py:\w+):`|(?<!`)``(?!`)")
MODULES = sorted(
    p for p in SOURCE.rglob("*.py") if p.name not in NOT_YET_CONVERTED or p.parent != SOURCE
)


def docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                found.append((getattr(node, "lineno", 1), text))
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_docstrings_have_no_rest_markup(path: Path) -> None:
    raw = [
        (line, match.group()) for line, text in docstrings(path) for match in REST.finditer(text)
    ]
    assert raw == [], f"{path.name}: reST markup in docstrings at {raw}"


def test_the_package_overview_names_where_to_start() -> None:
    overview = mrtr_trio.__doc__ or ""
    for name in ("[Runtime][mrtr_trio.Runtime]", "mrtr_trio.mcp.App", "mrtr_trio.testing", "docs/"):
        assert name in overview


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
def test_pages_have_no_rest_roles(page: Path) -> None:
    assert re.search(r":(?:class|meth|func|attr|mod):`", page.read_text()) is None
