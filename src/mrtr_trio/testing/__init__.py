"""Testing tools for mrtr_trio handlers (a first-class public API, like ``trio.testing``).

- :func:`run_modern` / :func:`run_live`: drive a handler as a 2026-07-28 client or a legacy
  session would, with a scripted ``answer(key, request)``.
"""

from ._runners import AnswerFunction, run_live, run_modern

__all__ = ["AnswerFunction", "run_live", "run_modern"]
