"""mrtr_trio's benchmark suite: what a round costs, measured through the public API only.

Run it with ``python -m benchmarks`` (full: checks the targets, updates ``docs/benchmarks.md``)
or ``python -m benchmarks --quick`` (small counts, checks only that everything runs and the
output is sane). ``docs/benchmarks.md`` explains the numbers.
"""
