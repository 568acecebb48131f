"""The Python classifiers list exactly what CI tests: `.ci/run` runs `.ci/classifiers.py` with
the one Python it tests, and the script fails when the list says anything else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "classifiers.py"
THIS = f"3.{sys.version_info.minor}"


def check(tmp_path: Path, *versions: str) -> subprocess.CompletedProcess[str]:
    listed = "".join(f'    "Programming Language :: Python :: {v}",\n' for v in versions)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        f'[project]\nname = "x"\nclassifiers = [\n    "Programming Language :: Python :: 3",\n'
        f'{listed}    "Typing :: Typed",\n]\n'
    )
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(pyproject)], capture_output=True, text=True, timeout=60
    )


def test_ci_runs_the_check() -> None:
    assert ".venv/bin/python .ci/classifiers.py\n" in (ROOT / ".ci" / "run").read_text()


def test_the_version_ci_tests_passes(tmp_path: Path) -> None:
    assert check(tmp_path, THIS).returncode == 0


@pytest.mark.parametrize("versions", [(), ("3.99",), (THIS, "3.99")])
def test_anything_else_fails_naming_the_difference(tmp_path: Path, versions: tuple[str]) -> None:
    ran = check(tmp_path, *versions)
    assert ran.returncode == 1
    assert f"but CI tests Python {THIS} only" in ran.stderr, ran.stderr
