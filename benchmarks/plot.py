"""The plot in ``docs/benchmarks.md``: modern round CPU against journal length, each line of
[benchmarks.journal][], with the targets and (when recorded) the baseline before the refactor."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["journal_plot"]

_STYLE: dict[str, dict[str, Any]] = {
    "mrtr_trio core": {"color": "#1f77b4", "marker": "o"},
    "mrtr_trio App": {"color": "#1f77b4", "marker": "s", "linestyle": ":"},
    "sdk-resolve": {"color": "#d62728", "marker": "^"},
    "sdk-handbuilt": {"color": "#2ca02c", "marker": "v"},
}


def journal_plot(
    journal: Mapping[str, Any], path: Path, baseline: Mapping[str, Any] | None = None
) -> None:
    """Draw *journal* (and the baseline's core line, if given) to the PNG at *path*."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5), dpi=100)
    for name, line in journal["lines"].items():
        lengths = sorted(int(n) for n in line)
        medians = [line[str(n)]["median"] for n in lengths]
        axes.plot(lengths, medians, label=name, **_STYLE.get(name, {}))
    if baseline is not None:
        line = baseline["lines"]["mrtr_trio core"]
        lengths = sorted(int(n) for n in line)
        axes.plot(
            lengths,
            [line[str(n)]["median"] for n in lengths],
            label="mrtr_trio core, baseline",
            color="#7f7f7f",
            linestyle="--",
        )
    axes.plot([3, 1000], [20, 2000], "k*", markersize=12, label="targets (completing round)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("journal length n (answers recorded)")
    axes.set_ylabel("CPU per round (µs, median)")
    axes.set_title("Modern round: replay n, answer, checkpoint n + 1")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
