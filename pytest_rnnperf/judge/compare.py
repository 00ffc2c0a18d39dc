"""The statistic every rule uses: one metric's current samples against its baseline samples.

A bootstrap interval on the ratio of medians (current / baseline) and a two-sided Mann-Whitney test on the raw
samples; ``compare`` says how they become regressed, improved, unchanged or ambiguous.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Sequence

import numpy as np

from pytest_rnnperf.model.metrics import KERNEL, MS, show
from pytest_rnnperf.model.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Interval, as_positive_array, ratio_interval

PER_STEP = f"{MS}/step"  # how a kernel's time per step reads


class Word(str, Enum):
    """An enum that prints as its plain value ("regressed"), for messages and JSON."""

    def __str__(self) -> str:
        """The plain value."""
        return self.value


class Verdict(Word):
    """Outcome of comparing current samples with a baseline."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    AMBIGUOUS = "ambiguous"


def pct(x: float) -> str:
    """Format a relative change as a signed percentage, e.g. +7.9%."""
    return f"{x * 100:+.1f}%"


@dataclass(frozen=True)
class Comparison:
    """A metric's current samples against its baseline: ratio interval, test, threshold and verdict."""

    metric: str
    baseline_median: float
    current_median: float
    ratio: Interval  # current / baseline
    p_value: float | None  # two-sided Mann-Whitney U; None when a side has < 3 samples
    min_effect: float
    verdict: Verdict
    higher_is_better: bool = False
    alpha: float = 0.01
    # Judged across processes (``across``): how many stored processes the baseline is the median of, and their
    # relative noise (None for a kernel that ran in too few of them to have a noise of its own).
    processes: int = 0
    noise: float | None = None
    # Why the rule called it what it did, where that is not the comparison itself (e.g. a kernel held back).
    why: str = ""

    def explain(self) -> str:
        """One line, e.g. "cudnn time +7.9% [+5.1%, +10.8%] (p=0.0003, threshold 5%): regressed"."""
        r = self.ratio
        if self.processes:
            return self._explain_across()
        if self.p_value is None:
            p = "p=n/a"
        elif self.p_value < 1e-4:
            p = "p<0.0001"
        else:
            p = f"p={self.p_value:.4f}"
        return (
            f"{self.metric} {pct(r.estimate - 1)} [{pct(r.low - 1)}, {pct(r.high - 1)}] "
            f"({p}, threshold {self.min_effect * 100:.3g}%): {self.verdict.value}"
        )

    def _explain_across(self) -> str:
        """e.g. "cudnn device time +9.0% [+8.6%, +9.4%] against 6 processes (their noise 0.4%, threshold 3%): regressed"."""
        r = self.ratio
        change = f"{pct(r.estimate - 1)} [{pct(r.low - 1)}, {pct(r.high - 1)}]"
        noise = "no noise of its own" if self.noise is None else f"its own noise {self.noise * 100:.1f}%"
        if self.metric.startswith(KERNEL):
            name, before, now = self.metric[len(KERNEL):], self.baseline_median, self.current_median
            if before == 0:
                moved = f"appeared: {name} {show(KERNEL, now)} {PER_STEP}"
            elif now == 0:
                moved = f"vanished: {name} {show(KERNEL, before)} {PER_STEP}"
            else:
                moved = f"{name} {show(KERNEL, before)} -> {show(KERNEL, now)} {PER_STEP}"
            return (f"{moved}, {change} of the step ({noise} over {self.processes} processes, threshold "
                    f"{self.min_effect * 100:.3g}%): {self.verdict.value}" + (f" ({self.why})" if self.why else ""))
        return (f"{self.metric} {change} against {self.processes} processes ({noise}, threshold "
                f"{self.min_effect * 100:.3g}%): {self.verdict.value}" + (f" ({self.why})" if self.why else ""))

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run's report."""
        return {"processes": self.processes, "noise": self.noise,
                "verdict": str(self.verdict), "ratio": self.ratio.estimate, "low": self.ratio.low,
                "high": self.ratio.high, "p_value": self.p_value, "baseline_median": self.baseline_median,
                "current_median": self.current_median, "min_effect": self.min_effect, "explain": self.explain(),
                "metric": self.metric, "confidence": self.ratio.confidence, "higher_is_better": self.higher_is_better,
                "alpha": self.alpha, "why": self.why}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """The inverse of ``as_dict`` (a pytest-xdist worker's verdicts reach the controller this way)."""
        p_value = data.get("p_value")
        ratio = Interval(float(data["ratio"]), float(data["low"]), float(data["high"]), float(data.get("confidence", 0.95)))
        return cls(metric=str(data.get("metric", "")), baseline_median=float(data["baseline_median"]),
                   current_median=float(data["current_median"]), ratio=ratio,
                   p_value=None if p_value is None else float(p_value), min_effect=float(data["min_effect"]),
                   verdict=Verdict(data["verdict"]), higher_is_better=bool(data.get("higher_is_better", False)),
                   alpha=float(data.get("alpha", 0.01)), processes=int(data.get("processes", 0)),
                   noise=None if data.get("noise") is None else float(data["noise"]), why=str(data.get("why", "")))


def compare(
    metric: str,
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    higher_is_better: bool = False,
    min_effect: float = 0.05,
    confidence: float = 0.95,
    alpha: float = 0.01,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
    whole_interval: bool = True,
) -> Comparison:
    """Compare current samples with baseline samples and decide regressed/improved/unchanged/ambiguous.

    The ratio r = median(current) / median(baseline) gets an unpaired bootstrap interval [low, high]; the
    tolerance band is [1/(1+min_effect), 1+min_effect] (symmetric in log space, so +5% and its inverse
    -4.8% weigh the same). "Worse" means r > 1 for times (higher_is_better=False) and r < 1 for speedups.

    - regressed: the whole interval lies beyond the band on the worse side AND the two-sided Mann-Whitney U
      test gives p < alpha; improved: the same on the better side. With ``whole_interval=False`` it is
      enough that the estimate lies beyond the band and the whole interval on that side of no change: a
      shift of about the threshold's size is then called, not left ambiguous (the device-time rule).
    - unchanged: the whole interval lies inside the band (an equivalence test: a shift may be
      statistically significant yet too small to matter).
    - ambiguous: anything else -- the interval straddles a band edge, the shift is beyond the band but not
      significant, or a side has fewer than 3 samples so the uncertainty is unknown.
    """
    import scipy.stats

    if not (math.isfinite(min_effect) and min_effect > 0):
        raise ValueError(f"min_effect must be a finite number > 0, got {min_effect!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    b = as_positive_array(baseline, f"{metric}: baseline samples")
    c = as_positive_array(current, f"{metric}: current samples")
    interval = ratio_interval(baseline, current, confidence=confidence, seed=seed, n_resamples=n_resamples)

    enough = min(b.size, c.size) >= 3
    p_value: float | None = None
    if enough:
        p = float(scipy.stats.mannwhitneyu(c, b, alternative="two-sided").pvalue)
        # All values tied across both sides leaves the test undefined; there is no evidence of a shift.
        p_value = 1.0 if math.isnan(p) else p

    upper = 1.0 + min_effect
    lower = 1.0 / upper
    if whole_interval:
        beyond_upper, beyond_lower = interval.low > upper, interval.high < lower
    else:
        beyond_upper = interval.estimate >= upper and interval.low > 1.0
        beyond_lower = interval.estimate <= lower and interval.high < 1.0
    worse, better = (beyond_lower, beyond_upper) if higher_is_better else (beyond_upper, beyond_lower)
    significant = p_value is not None and p_value < alpha

    if not enough:
        # A collapsed interval from 1-2 samples would look certain while knowing nothing.
        verdict = Verdict.AMBIGUOUS
    elif worse and significant:
        verdict = Verdict.REGRESSED
    elif better and significant:
        verdict = Verdict.IMPROVED
    elif lower <= interval.low and interval.high <= upper:
        verdict = Verdict.UNCHANGED
    else:
        verdict = Verdict.AMBIGUOUS

    return Comparison(metric=metric, baseline_median=float(np.median(b)), current_median=float(np.median(c)),
                      ratio=interval, p_value=p_value, min_effect=min_effect, verdict=verdict,
                      higher_is_better=higher_is_better, alpha=alpha)
