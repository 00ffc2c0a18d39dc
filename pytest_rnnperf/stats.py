"""Statistics for timing samples: summaries, bootstrap intervals of ratios, the regression test, noise checks.

Everything here works on plain sequences of floats (seconds per iteration, or per-round speedups) and knows
nothing of pytest, GPUs or frameworks. Every resampling takes a seed so that a verdict is reproducible: the
same samples always give the same interval and the same verdict.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Sequence

import numpy as np
import scipy.stats

__all__ = [
    "Comparison",
    "Interval",
    "Summary",
    "Verdict",
    "compare",
    "noisy",
    "paired_ratios",
    "ratio_interval",
    "speedup_interval",
    "spread",
    "summarize",
]

DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 2000

# scipy 1.15 renamed bootstrap's `random_state` to `rng` (the old name warns); the project allows scipy>=1.10.
_RNG_KWARG = "rng" if "rng" in inspect.signature(scipy.stats.bootstrap).parameters else "random_state"


# --------------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one set of samples (robust ones first: timings have long right tails)."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    mean: float
    stdev: float
    min: float
    max: float
    rel_iqr: float


def _as_finite_array(samples: Sequence[float], name: str = "samples") -> np.ndarray:
    """Return samples as a 1-D float array, or raise ValueError naming what is wrong."""
    arr = np.asarray(samples, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: at least one sample is needed")
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} contains {int(bad.sum())} non-finite value(s) (first at index {idx}: {arr[idx]!r})"
        )
    return arr


def _as_positive_array(samples: Sequence[float], name: str) -> np.ndarray:
    """Return samples as a finite, strictly positive array: ratios of medians need positive medians."""
    arr = _as_finite_array(samples, name)
    if (arr <= 0).any():
        raise ValueError(f"{name} must be strictly positive (times or speedups), got min {arr.min()!r}")
    return arr


def summarize(samples: Sequence[float]) -> Summary:
    """Summarize samples: n, median, quartiles, IQR, mean, stdev, range and relative IQR."""
    arr = _as_finite_array(samples)
    q1, median, q3 = (float(v) for v in np.percentile(arr, [25.0, 50.0, 75.0]))
    iqr = q3 - q1
    # A zero median (never a real timing) would make the relative IQR meaningless; say "infinitely noisy"
    # unless there is no spread at all.
    rel_iqr = iqr / median if median != 0 else (0.0 if iqr == 0 else math.inf)
    return Summary(
        n=int(arr.size),
        median=median,
        q1=q1,
        q3=q3,
        iqr=iqr,
        mean=float(arr.mean()),
        # Sample stdev (ddof=1); a single sample has no spread to estimate, report 0 rather than NaN.
        stdev=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        min=float(arr.min()),
        max=float(arr.max()),
        rel_iqr=float(rel_iqr),
    )


# -------------------------------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval [low, high]."""

    estimate: float
    low: float
    high: float
    confidence: float

    def contains(self, x: float) -> bool:
        """True when x lies within [low, high] (bounds included)."""
        return self.low <= x <= self.high

    @property
    def rel_halfwidth(self) -> float:
        """Half the interval's width relative to the estimate ((high - low) / 2 / estimate)."""
        if self.estimate == 0:
            return 0.0 if self.high == self.low else math.inf
        return (self.high - self.low) / 2.0 / abs(self.estimate)


def _median_ratio(den: np.ndarray, num: np.ndarray, axis: int = -1) -> np.ndarray:
    """median(num) / median(den) along axis; vectorized so scipy can evaluate all resamples at once."""
    return np.median(num, axis=axis) / np.median(den, axis=axis)


def _check_confidence(confidence: float) -> None:
    """Raise ValueError unless 0 < confidence < 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _bootstrap_ci(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    *,
    paired: bool,
    confidence: float,
    seed: int,
    n_resamples: int,
    method: str,
) -> tuple[float, float] | None:
    """One scipy bootstrap; None when the method degenerates (NaN bounds or scipy's degenerate-data warning)."""
    with warnings.catch_warnings():
        # BCa on a (nearly) constant bootstrap distribution cannot estimate its acceleration and scipy
        # warns and returns NaN; turn that warning into an error so we fall back instead.
        warnings.simplefilter("error", scipy.stats.DegenerateDataWarning)
        # The jackknife inside BCa may divide 0/0 on tied data; the fallback deals with the outcome.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            res = scipy.stats.bootstrap(
                data,
                statistic,
                n_resamples=n_resamples,
                vectorized=True,
                paired=paired,
                confidence_level=confidence,
                method=method,
                **{_RNG_KWARG: np.random.default_rng(seed)},
            )
        except (scipy.stats.DegenerateDataWarning, ValueError, FloatingPointError, ZeroDivisionError):
            return None
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return None
    return low, high


def _ratio_interval(
    den: np.ndarray,
    num: np.ndarray,
    *,
    paired: bool,
    confidence: float,
    seed: int,
    n_resamples: int,
) -> Interval:
    """Bootstrap interval of median(num)/median(den): BCa, then percentile, then the collapsed estimate."""
    _check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples!r}")
    estimate = float(_median_ratio(den, num))
    # With fewer than 3 samples a side the bootstrap has almost nothing to resample, and with no variance
    # at all it has nothing to say: collapse to the estimate instead of inventing (or crashing on) a width.
    if min(den.size, num.size) < 3 or (np.ptp(den) == 0 and np.ptp(num) == 0):
        return Interval(estimate, estimate, estimate, confidence)
    for method in ("BCa", "percentile"):
        bounds = _bootstrap_ci(
            (den, num),
            _median_ratio,
            paired=paired,
            confidence=confidence,
            seed=seed,
            n_resamples=n_resamples,
            method=method,
        )
        if bounds is not None:
            low, high = bounds
            # On small or tied samples a bound can land on the estimate's value but one ulp short of it
            # (the vectorized statistic rounds differently); widen to include it, since an interval that
            # excludes its own point estimate would read as nonsense in reports and verdicts.
            return Interval(estimate, min(low, estimate), max(high, estimate), confidence)
    return Interval(estimate, estimate, estimate, confidence)


def speedup_interval(
    cudnn: Sequence[float],
    generic: Sequence[float],
    paired: bool = True,
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> Interval:
    """Bootstrap interval of the speedup median(generic) / median(cudnn).

    Round i timed cudnn then generic back to back, so drift (clocks, thermals, other tenants) hits both sides
    of a round alike; with paired=True and equal lengths whole rounds are resampled together, which cancels
    that drift out of the width. Otherwise the two sides are resampled independently.
    """
    c = _as_positive_array(cudnn, "cudnn samples")
    g = _as_positive_array(generic, "generic samples")
    return _ratio_interval(
        c,
        g,
        paired=paired and c.size == g.size,
        confidence=confidence,
        seed=seed,
        n_resamples=n_resamples,
    )


def ratio_interval(
    baseline: Sequence[float],
    current: Sequence[float],
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> Interval:
    """Bootstrap interval of median(current) / median(baseline), resampled unpaired (different runs)."""
    b = _as_positive_array(baseline, "baseline samples")
    c = _as_positive_array(current, "current samples")
    return _ratio_interval(b, c, paired=False, confidence=confidence, seed=seed, n_resamples=n_resamples)


def paired_ratios(cudnn: Sequence[float], generic: Sequence[float]) -> np.ndarray:
    """Per-round speedups generic_i / cudnn_i of interleaved rounds (equal lengths required)."""
    c = _as_positive_array(cudnn, "cudnn samples")
    g = _as_positive_array(generic, "generic samples")
    if c.size != g.size:
        raise ValueError(
            f"paired ratios need one cudnn and one generic sample per round, got {c.size} cudnn and "
            f"{g.size} generic samples"
        )
    return g / c


# ------------------------------------------------------------------------------------------------ comparison


class Verdict(str, Enum):
    """Outcome of comparing current samples with a baseline."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    AMBIGUOUS = "ambiguous"

    def __str__(self) -> str:
        """The plain value ("regressed"), for messages and JSON."""
        return self.value


def _pct(x: float) -> str:
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

    def explain(self) -> str:
        """One line, e.g. "cudnn time +7.9% [+5.1%, +10.8%] (p=0.0003, threshold 5%): regressed"."""
        r = self.ratio
        if self.p_value is None:
            p = "p=n/a"
        elif self.p_value < 1e-4:
            p = "p<0.0001"
        else:
            p = f"p={self.p_value:.4f}"
        return (
            f"{self.metric} {_pct(r.estimate - 1)} [{_pct(r.low - 1)}, {_pct(r.high - 1)}] "
            f"({p}, threshold {self.min_effect * 100:g}%): {self.verdict.value}"
        )


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
) -> Comparison:
    """Compare current samples with baseline samples and decide regressed/improved/unchanged/ambiguous.

    The ratio r = median(current) / median(baseline) gets an unpaired bootstrap interval [low, high]; the
    tolerance band is [1/(1+min_effect), 1+min_effect] (symmetric in log space, so +5% and its inverse
    -4.8% weigh the same). "Worse" means r > 1 for times (higher_is_better=False) and r < 1 for speedups.

    - regressed: the whole interval lies beyond the band on the worse side (times: low > 1+min_effect;
      speedups: high < 1/(1+min_effect)) AND the two-sided Mann-Whitney U test gives p < alpha.
    - improved: the same on the better side (times: high < 1/(1+min_effect); speedups: low > 1+min_effect)
      AND p < alpha.
    - unchanged: the whole interval lies inside the band (an equivalence test: a shift may be
      statistically significant yet too small to matter).
    - ambiguous: anything else -- the interval straddles a band edge, the shift is beyond the band but not
      significant, or a side has fewer than 3 samples so the uncertainty is unknown. Callers re-measure.

    For speedups pass per-round speedups (see paired_ratios) as samples with higher_is_better=True.
    """
    if min_effect <= 0:
        raise ValueError(f"min_effect must be > 0, got {min_effect!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    b = _as_positive_array(baseline, f"{metric}: baseline samples")
    c = _as_positive_array(current, f"{metric}: current samples")
    interval = _ratio_interval(b, c, paired=False, confidence=confidence, seed=seed, n_resamples=n_resamples)

    enough = min(b.size, c.size) >= 3
    p_value: float | None = None
    if enough:
        p = float(scipy.stats.mannwhitneyu(c, b, alternative="two-sided").pvalue)
        # All values tied across both sides leaves the test undefined; there is no evidence of a shift.
        p_value = 1.0 if math.isnan(p) else p

    upper = 1.0 + min_effect
    lower = 1.0 / upper
    beyond_upper = interval.low > upper
    beyond_lower = interval.high < lower
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

    return Comparison(
        metric=metric,
        baseline_median=float(np.median(b)),
        current_median=float(np.median(c)),
        ratio=interval,
        p_value=p_value,
        min_effect=min_effect,
        verdict=verdict,
        higher_is_better=higher_is_better,
        alpha=alpha,
    )


# ------------------------------------------------------------------------------------------------------ noise


def spread(values: Sequence[float]) -> float:
    """Run-to-run spread of a figure across runs: max/min - 1 (0.03 means 3%)."""
    arr = _as_positive_array(values, "values")
    return float(arr.max() / arr.min() - 1.0)


def noisy(summary: Summary, max_rel_iqr: float = 0.05) -> str | None:
    """None when the relative IQR is within max_rel_iqr, else a one-line reason the measurement is noisy."""
    if summary.rel_iqr <= max_rel_iqr:
        return None
    return f"relative IQR {summary.rel_iqr:.1%} > {max_rel_iqr * 100:g}%: the measurement is noisy"
