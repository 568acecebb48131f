"""pytest fixtures for testing mrtr_trio handlers.

They load by themselves wherever mrtr_trio is installed (a `pytest11` entry point).

- `mrtr_keys`: the signing keys, `[TEST_KEY]` (override the fixture to test rotation);
- `mrtr_runtime`: a [Runtime][mrtr_trio.Runtime] with those keys and `replay="strict"`;
- `mrtr_run`: a [Runner][mrtr_trio.testing.Runner] on that runtime:
  `await mrtr_run.run_modern(...)`, `run_live`, `assert_eras_agree` and `replay_recorded`, with
  the replay-after-every-round check on.

The fixtures are session-scoped (a runtime keeps no per-test state), so hypothesis tests can
use them without a health-check warning; a conftest overriding `mrtr_keys` must keep that
scope. They are plain (synchronous) fixtures, so they serve trio tests (pytest-trio) and
asyncio tests (anyio's pytest plugin) alike.
"""

from __future__ import annotations

import pytest

from .._runtime import Runtime
from ._bound import TEST_KEY, Runner

__all__ = ["mrtr_keys", "mrtr_run", "mrtr_runtime"]


@pytest.fixture(scope="session")
def mrtr_keys() -> list[bytes]:
    """The signing keys of `mrtr_runtime`: `[TEST_KEY]`."""
    return [TEST_KEY]


@pytest.fixture(scope="session")
def mrtr_runtime(mrtr_keys: list[bytes]) -> Runtime:
    """A runtime with the test keys and strict replay."""
    return Runtime(mrtr_keys, replay="strict")


@pytest.fixture(scope="session")
def mrtr_run(mrtr_runtime: Runtime) -> Runner:
    """The strict-replay runner: the testing runners bound to `mrtr_runtime`."""
    return Runner(mrtr_runtime)
