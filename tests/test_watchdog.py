"""The per-test time limit: a test that never finishes fails, and the suite goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HANGING = """
import time
import pytest
import trio

async def test_awaits_forever():
    await trio.Event().wait()

async def test_waits_forever_on_a_mock_clock(autojump_clock):
    await trio.Event().wait()

@pytest.mark.timeout(2)
def test_busy_loop_in_sync_code():
    while True:
        time.sleep(0.01)

async def test_after_the_hangs():
    await trio.sleep(0)
"""


def _suite(pytester: pytest.Pytester, *names: str) -> pytest.RunResult:
    pytester.makeini(
        "[pytest]\ntrio_mode = true\ntimeout = 4\ntimeout_method = thread\nfilterwarnings = error\n"
    )
    pytester.makeconftest(
        "import pytest\n"
        "from tests.watchdog import guard_trio_tests\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_collection_modifyitems(items):\n"
        "    guard_trio_tests(items)\n"
    )
    pytester.makepyfile(test_hangs=HANGING)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    targets = [f"test_hangs.py::{name}" for name in names]
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *targets, timeout=60)


def test_trio_tests_that_never_finish_fail_and_the_suite_goes_on(pytester: pytest.Pytester) -> None:
    result = _suite(
        pytester,
        "test_awaits_forever",
        "test_waits_forever_on_a_mock_clock",
        "test_after_the_hangs",
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*was still running after 2 s (per-test timeout)*"])


def test_a_sync_busy_loop_ends_the_run_with_every_stack(pytester: pytest.Pytester) -> None:
    result = _suite(pytester, "test_busy_loop_in_sync_code")
    assert result.ret != 0
    output = result.stdout.str() + result.stderr.str()
    assert "+++ Timeout +++" in output
    assert "in test_busy_loop_in_sync_code" in output  # the hung test's stack
