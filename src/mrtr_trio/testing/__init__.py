"""Testing tools for mrtr_trio handlers (a first-class public API, like `trio.testing`).

- [run_modern][mrtr_trio.testing.run_modern] / [run_live][mrtr_trio.testing.run_live]: drive a
  handler as a 2026-07-28 client or a legacy session would, with a scripted `answer(key, request)`;
  `run_modern(..., replay_check=True)` also replays every token in a fresh runtime;
- [assert_eras_agree][mrtr_trio.testing.assert_eras_agree]: run both and compare the requests, round
  by round, and the values;
- [AnswerScript][mrtr_trio.testing.AnswerScript]: an answer function whose answers do not depend on
  call order;
- [RecordedState][mrtr_trio.testing.RecordedState],
  [replay_recorded][mrtr_trio.testing.replay_recorded],
  [ReplayReport][mrtr_trio.testing.ReplayReport],
  [assert_all_continue][mrtr_trio.testing.assert_all_continue]: check recorded tokens against the
  current code before a deploy;
- [Runner][mrtr_trio.testing.Runner] and `TEST_KEY`: the runners bound to one runtime, as the pytest
  fixtures in [mrtr_trio.testing.pytest_plugin][] give them;
- [mrtr_trio.testing.strategies][] (needs hypothesis): `answers_for`, `answer_functions`,
  `flows` and friends.

The runners run on whichever event loop awaits them, trio or asyncio.
"""

from .._util import fixup_module_metadata
from ._answers import AnswerScript
from ._bound import TEST_KEY, Runner
from ._eras import assert_eras_agree
from ._recorded import RecordedState, ReplayReport, assert_all_continue, replay_recorded
from ._runners import AnswerFunction, ReplayCheckError, run_live, run_modern

__all__ = [
    "TEST_KEY",
    "AnswerFunction",
    "AnswerScript",
    "RecordedState",
    "ReplayCheckError",
    "ReplayReport",
    "Runner",
    "assert_all_continue",
    "assert_eras_agree",
    "replay_recorded",
    "run_live",
    "run_modern",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata
