"""Shared test setup: the hypothesis profiles, and the real services some tests need
(``redis_server``: see ``services.py``). (The mrtr_trio fixtures come from the package's
``pytest11`` entry point, as they do for users.)

Profiles (pick one with the HYPOTHESIS_PROFILE environment variable):

- ``ci`` (the default): bounded and derandomized, so every run tries the same examples and
  takes the same time; no example database.
- ``long``: for local runs hunting for rare bugs: many more examples, random, with the database.

Every trio test runs under the per-test watchdog of ``tests/watchdog.py``, and every replay
machine a test drives is checked after each input to hold only the data its phase owns
(``tests/machine_checks.py``).

Both loops: a test that takes the ``anyio_backend`` fixture (or sits in a module marked
``pytestmark = BOTH_LOOPS``, from ``loops.py``) runs twice, under trio and under asyncio. The
trio run is pytest-trio's, as for every other test; the asyncio run is anyio's pytest plugin's
(this file takes pytest-trio's mark off it). Such a test is written against anyio's API
(``anyio.sleep``, ``anyio.fail_after``), which means trio's under trio, and uses no async
fixtures.

Property tests that need a floor (the era-equivalence property runs at least 500 flows) take
``max(floor, settings.default.max_examples)``, so ``long`` raises them too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from .loops import LOOPS, anyio_backend_of
from .machine_checks import checking_every_input
from .services import RedisServer, redis_server
from .watchdog import guard_trio_tests

pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz",
        choices=("short", "long"),
        default="short",
        help="hostile-token fuzz scale (tests/test_token_fuzz.py): short in the suite, long by hand",
    )


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked the trio tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if anyio_backend_of(item) == "asyncio":  # anyio's plugin runs it, not pytest-trio
            item.own_markers[:] = [mark for mark in item.own_markers if mark.name != "trio"]
    guard_trio_tests(items)


@pytest.fixture(params=LOOPS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The loop a both-loops test runs under (see the module docstring)."""
    return request.param  # type: ignore[no-any-return]


settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def redis_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session, on a temporary unix socket and a loopback port."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_db(redis_service: RedisServer) -> RedisServer:
    """The session's redis-server, emptied for this test."""
    with redis_service.client() as client:
        client.flushall()
    return redis_service


@pytest.fixture(autouse=True)
def _no_keys_from_the_developers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their keys: an MRTR_TRIO_KEYS exported in the shell that runs them must not
    change what they see (tests that need it set it themselves)."""
    monkeypatch.delenv("MRTR_TRIO_KEYS", raising=False)


@pytest.fixture(autouse=True)
def _every_machine_owns_only_its_phase_data(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every replay machine any test drives holds, after each input, only the data its phase
    owns (see `machine_checks`)."""
    with checking_every_input(monkeypatch):
        yield
