"""Statistics for timing samples: summaries, bootstrap intervals of ratios, run-to-run spread.

Everything here works on plain sequences of floats (seconds per step, or per-round speedups) and knows
nothing of pytest, GPUs or frameworks. Every resampling takes a seed so that the same samples always give
the same interval. The regression rule built on these intervals lives in ``verdicts``.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

# scipy is imported where a bootstrap runs, not here: the plugin loads this module (through verdicts) while
# it checks options, and scipy.stats costs about a second to import.

__all__ = ["Interval", "Summary", "describe", "ratio_interval", "speedup_interval", "spread"]

DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 2000


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


def as_positive_array(samples: Sequence[float], name: str) -> np.ndarray:
    """Return samples as a finite, strictly positive array: ratios of medians need positive medians."""
    arr = _as_finite_array(samples, name)
    if (arr <= 0).any():
        raise ValueError(f"{name} must be strictly positive (times or speedups), got min {arr.min()!r}")
    return arr


def describe(samples: Sequence[float]) -> Summary:
    """Describe samples: n, median, quartiles, IQR, mean, stdev, range and relative IQR."""
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
    import scipy.stats

    # scipy 1.15 renamed bootstrap's `random_state` to `rng` (the old name warns); the project allows scipy>=1.10.
    rng_kwarg = "rng" if "rng" in inspect.signature(scipy.stats.bootstrap).parameters else "random_state"
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
                **{rng_kwarg: np.random.default_rng(seed)},
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
    c = as_positive_array(cudnn, "cudnn samples")
    g = as_positive_array(generic, "generic samples")
    return _ratio_interval(
        c,
        g,
        paired=paired and c.size == g.size,
        confidence=confidence,
        seed=seed,
        n_resamples=n_resamples,
    )


def speedup_estimate(cudnn: Sequence[float], generic: Sequence[float], confidence: float = 0.95) -> Interval:
    """The speedup median(generic) / median(cudnn) alone, its interval collapsed onto it: no bootstrap."""
    c, g = as_positive_array(cudnn, "cudnn samples"), as_positive_array(generic, "generic samples")
    estimate = float(_median_ratio(c, g))
    return Interval(estimate, estimate, estimate, confidence)


def ratio_interval(
    baseline: Sequence[float],
    current: Sequence[float],
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> Interval:
    """Bootstrap interval of median(current) / median(baseline), resampled unpaired (different runs)."""
    b = as_positive_array(baseline, "baseline samples")
    c = as_positive_array(current, "current samples")
    return _ratio_interval(b, c, paired=False, confidence=confidence, seed=seed, n_resamples=n_resamples)


# ------------------------------------------------------------------------------------------------------ noise


def spread(values: Sequence[float]) -> float:
    """Run-to-run spread of a figure across runs: max/min - 1 (0.03 means 3%)."""
    arr = as_positive_array(values, "values")
    return float(arr.max() / arr.min() - 1.0)


def median_noise(samples: Sequence[float]) -> float:
    """Relative standard error of the median of ``samples``, from their IQR (inf for fewer than 2 or a zero median).

    The stopping signal of the timed rounds (NVBench stops at a target noise the same way). The IQR rather than
    the MAD: rounds that flip between two modes have a MAD of 0 once most sit in one mode, and must keep going.
    """
    values = np.asarray(samples, dtype=float)
    if values.size < 2 or not np.all(np.isfinite(values)):
        return math.inf
    middle = float(np.median(values))
    if middle <= 0:
        return math.inf
    q1, q3 = np.percentile(values, [25.0, 75.0])
    # IQR / 1.349 estimates sigma for normal data; the median's standard error is sqrt(pi/2) * sigma / sqrt(n).
    return float(q3 - q1) / 1.349 * math.sqrt(math.pi / 2) / math.sqrt(values.size) / middle
