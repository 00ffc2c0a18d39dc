"""The speedup plot (PNG), drawn from the report's rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from pytest_rnnperf.report.html import outcome_colour
from pytest_rnnperf.report.rows import Rows

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.stats import Interval


def plot_speedups(rows: Rows, path: Any) -> bool:
    """Speedup per case with its 95% interval, next to the baseline's where one exists (PNG)."""
    import numpy as np

    paired = [r for r in rows.cases if r.speedup is not None]
    if not paired:
        return False
    import matplotlib

    matplotlib.use("Agg")  # headless: CI runners have no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.35 * len(paired) + 1.5))
    y = np.arange(len(paired))
    speedups = [r.speedup for r in paired if r.speedup is not None]  # the same list, typed as intervals
    ax.errorbar([s.estimate for s in speedups], y, xerr=_errors(speedups), fmt="o", color="tab:blue",
                label="now (95% CI)", capsize=3)
    stored = [(i + 0.25, r.baseline_speedup) for i, r in enumerate(paired) if r.baseline_speedup is not None]
    if stored:
        ax.errorbar([s.estimate for _, s in stored], [at for at, _ in stored], xerr=_errors([s for _, s in stored]),
                    fmt="s", color="tab:gray", label="baseline (95% CI)", capsize=3)
    ax.scatter([r.floor for r in paired], y, marker="|", s=200, color="tab:red", label="floor")
    for i, r in enumerate(paired):
        v = r.verdict
        if v is not None and v.moved:  # the outcome, in the page's colour: a regression that did not fail is amber
            ax.annotate(str(v.outcome), (speedups[i].high, i), xytext=(6, -3), textcoords="offset points",
                        color=outcome_colour(str(v.outcome)), fontsize=8)
    ax.set_yticks(y, [r.id for r in paired], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cuDNN speedup over generic (x)")
    ax.set_title(f"pytest-rnnperf on {rows.gpu}")
    ax.axvline(1.0, color="black", lw=0.5)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _errors(intervals: Sequence[Interval]) -> list[list[float]]:
    """Matplotlib's asymmetric error bars: distances below and above each estimate."""
    return [[s.estimate - s.low for s in intervals], [s.high - s.estimate for s in intervals]]
