"""The authorization servers of the auth tests: one per test module (two where a test needs
several issuers), each a real oidc-provider process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .authserver import AuthServer, auth_server


@pytest.fixture(scope="module")
def idp() -> Iterator[AuthServer]:
    with auth_server() as server:
        yield server


@pytest.fixture(scope="module")
def other_idp() -> Iterator[AuthServer]:
    with auth_server() as server:
        yield server
