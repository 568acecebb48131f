"""The docs build as CI runs it: `mkdocs build --strict`, the exact line of `.ci/run`, passes on
the docs as they are and fails on a broken cross-reference, in a page or in a docstring (which
mkdocstrings renders into the API page). A warning that CI cannot see is a check that cannot
fail: this is the test that it can."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI_LINE = re.compile(r"^NO_MKDOCS_2_WARNING=1 \.venv/bin/mkdocs build .*$", re.MULTILINE)


def ci_docs_command() -> str:
    """The docs build line of `.ci/run`, as it is."""
    [line] = CI_LINE.findall((ROOT / ".ci" / "run").read_text())
    return line


def build_like_ci(tree: Path) -> subprocess.CompletedProcess[str]:
    """Run `.ci/run`'s docs line in *tree*, with this interpreter's environment as `.venv`."""
    link_venv(tree)
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {ci_docs_command()}"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def link_venv(tree: Path) -> None:
    """Make this interpreter's environment *tree*'s `.venv`, as `.ci/run` sets it up."""
    pytest.importorskip("mkdocstrings", reason="the docs extra: pip install -e '.[docs]'")
    venv = tree / ".venv"
    if not venv.exists():
        venv.symlink_to(sys.prefix, target_is_directory=True)


def copy_of_the_docs(tmp_path: Path) -> Path:
    """A tree with what the docs build reads: mkdocs.yml, docs/ and src/."""
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", tree / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tree / "docs")
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_the_docs_build_as_ci_runs_it_is_clean(tmp_path: Path) -> None:
    built = build_like_ci(copy_of_the_docs(tmp_path))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr


@pytest.mark.parametrize("where", ["page", "docstring"])
def test_a_broken_reference_fails_the_ci_docs_build(tmp_path: Path, where: str) -> None:
    tree = copy_of_the_docs(tmp_path)
    if where == "page":
        with (tree / "docs" / "guide.md").open("a") as page:
            page.write("\nSee [nothing][mrtr_trio.NoSuchThing].\n")
    else:
        module = tree / "src" / "mrtr_trio" / "redis.py"
        text = module.read_text()
        anchor = "Expiries are in milliseconds, rounded up."
        assert anchor in text
        module.write_text(text.replace(anchor, f"{anchor} [x][mrtr_trio.NoSuchThing]", 1))
    built = build_like_ci(tree)
    assert built.returncode != 0, "a broken reference passed the docs build"
    assert "mrtr_trio.NoSuchThing" in built.stdout + built.stderr


def test_the_api_page_names_each_section_once(tmp_path: Path) -> None:
    """No heading of the API page's table of contents repeats the one above it (a module's
    section heading followed by mkdocstrings' heading for the same module)."""
    tree = copy_of_the_docs(tmp_path)
    link_venv(tree)
    site = tmp_path / "site"
    built = subprocess.run(
        [str(tree / ".venv" / "bin" / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    page = (site / "api" / "index.html").read_text()
    headings = [
        re.sub(r"<[^>]+>|&para;|¶", "", text).split("(")[0].split()[0]
        for text in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", page, re.DOTALL)
    ]
    repeated = sorted({name for name in headings if headings.count(name) > 1})
    assert not repeated, f"headings repeated on the API page: {repeated}"
