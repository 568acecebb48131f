"""Every numeric knob is checked where it is given, with an error naming the knob and value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mrtr_trio import MemoryStepStore, Runtime, poll
from mrtr_trio.mcp import App, MemoryTaskStore

KEY = b"k" * 32

BAD_SECONDS = [0, -1, True, "5", None, float("nan")]


@pytest.mark.parametrize("name", ["ttl", "round_timeout"])
@pytest.mark.parametrize("value", BAD_SECONDS)
def test_runtime_seconds_are_positive_numbers(name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a positive number of seconds"):
        Runtime([KEY], **{name: value})


def test_runtime_knobs_are_kept_as_floats_and_ints() -> None:
    runtime = Runtime([KEY], ttl=5, round_timeout=2, state_only_pacing=0, max_rounds=3)
    assert (runtime.ttl, runtime.round_timeout, runtime.state_only_pacing) == (5.0, 2.0, 0.0)
    assert all(type(v) is float for v in (runtime.ttl, runtime.round_timeout))
    assert runtime.max_rounds == 3
    with pytest.raises(ValueError, match="ttl must be finite"):
        Runtime([KEY], ttl=float("inf"))


@pytest.mark.parametrize("value", [-0.5, True, "0"])
def test_state_only_pacing_may_be_zero_but_not_negative(value: Any) -> None:
    with pytest.raises(ValueError, match="state_only_pacing must be a non-negative number"):
        Runtime([KEY], state_only_pacing=value)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda v: Runtime([KEY], max_rounds=v), "max_rounds"),
        (lambda v: MemoryStepStore(v), "max_entries"),
        (lambda v: MemoryTaskStore(v), "max_tasks"),
    ],
)
@pytest.mark.parametrize("value", [0, -3, True, 2.0, "4"])
def test_counts_are_ints_of_at_least_one(make: Callable[[Any], Any], name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{name} must be an int >= 1, got {value!r}"):
        make(value)


def test_max_state_bytes_has_a_floor() -> None:
    with pytest.raises(ValueError, match="max_state_bytes must be an int >= 64, got 63"):
        Runtime([KEY], max_state_bytes=63)


@pytest.mark.parametrize("value", [0, -1, True, "1"])
def test_poll_every_and_timeout(value: Any) -> None:
    with pytest.raises(ValueError, match="every must be a positive number of seconds"):
        poll(print, every=value)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds or None"):
        poll(print, timeout=value)
    assert poll(print, every=2, timeout=None).every == 2.0


@pytest.mark.parametrize("name", ["task_ttl", "task_poll_interval"])
@pytest.mark.parametrize("value", [0, -1, True])
def test_app_task_knobs(name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a positive number of seconds or None"):
        App("knobs", runtime=Runtime([KEY]), **{name: value})
    App("knobs", runtime=Runtime([KEY]), **{name: None})  # None: no expiry, no interval
