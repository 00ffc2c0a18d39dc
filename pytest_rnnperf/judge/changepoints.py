"""Change points of one series (a case's value over stored runs): steps and slow drifts, by ruptures' PELT.

Used by ``history`` over all stored runs, and by the nightly verdict over the history it judged against (so a
drift of +1% a night, which a median of past nights follows, is still caught). Pure: numpy and ruptures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# 6 is three times BIC's 2 per change point (a location and a level): sigma is itself estimated from 6-40 runs
# and can come out low, and a GPU model has ~60 cases, so one false alarm per case must be rare. Simulated with
# 0.5% noise (1000 series each): flat 12-40 runs, at most 2 false alarms (7 with heavy-tailed t4 noise); a 5%
# step at its run +-1 in all, a 2% step in 992; a 1%/run drift over 10 runs from its start +-2 in 993. At 8 the
# drift falls to 851 and at 10 to 577, for t4 false alarms (30 runs) of 4 and 1.
PENALTY = 6.0
MIN_RUNS = 6  # fewer runs leave too few differences to estimate the noise from
MIN_SIZE = 2  # a level held by one run only is an outlier, not a change
SIGMA_FLOOR = 1e-4  # 0.01%: keeps a series of identical values finite; --min-shift decides what is worth a line
DEFAULT_MIN_SHIFT = 0.01


@dataclass(frozen=True)
class ChangePoint:
    """A shift of one series: a step at one point, or a drift over several (indices into the series)."""

    kind: str  # "step" or "drift"
    start: int  # step: the first point at the new level; drift: the first point that moved
    end: int  # step: == start; drift: the first point at the final level
    before: float  # level before (geometric mean of the segment; for a drift, the fitted flat level)
    after: float

    @property
    def shift(self) -> float:
        """Relative change of the level: after / before - 1."""
        return self.after / self.before - 1.0


@dataclass(frozen=True)
class Detection:
    """What ``detect`` found in one series: its noise, its change points, and the smallest step it finds."""

    noise: float  # sigma of the log values: about the relative run-to-run noise
    change_points: tuple[ChangePoint, ...]
    smallest_shift: float  # a step mid-series smaller than this is not reported
    first_level: float  # level of the first segment (plots are normalized to it)


def _mad_sigma(d: np.ndarray, scale: float) -> float:
    """Standard deviation of the noise behind differences ``d`` whose noise is ``scale`` times one point's."""
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / scale) if len(d) else 0.0


def noise_sigma(y: np.ndarray) -> float:
    """Robust run-to-run noise of log values ``y``: the larger of the MADs of first and second differences.

    Differences cancel the level, so a step moves one first difference (two second ones) and a linear drift no
    second difference; but a MAD of 4-38 differences can come out at a fraction of the true noise, and the
    two rarely do so together.
    """
    return max(_mad_sigma(np.diff(y), math.sqrt(2)), _mad_sigma(np.diff(y, 2), math.sqrt(6)), SIGMA_FLOOR)


def _segment(z: np.ndarray, pen: float) -> list[int]:
    """Segment edges [0, ..., n] of ``z`` (in noise units) by ruptures' PELT, L2 cost, every index a candidate."""
    import ruptures as rpt

    # ruptures rather than E-divisive (signal-processing-algorithms): PELT is exact for this cost, deterministic
    # (no permutation test), and ships wheels for current Pythons. Its kernel form with the linear kernel is the same
    # L2 cost in C: the same edges as Pelt(model="l2") in 3,000 random series, ~180x quicker (a history site of the
    # H100's 62 runs spent most of its time in the pure-Python cost).
    return [0] + [int(b) for b in rpt.KernelCPD(kernel="linear", min_size=MIN_SIZE, jump=1).fit(z).predict(pen=pen)]


def _sse(y: np.ndarray, edges: Sequence[int]) -> float:
    """Squared residuals of ``y`` around the mean of each segment."""
    return float(sum(np.sum((y[a:b] - y[a:b].mean()) ** 2) for a, b in zip(edges, edges[1:])))


def _ramp(w: np.ndarray) -> tuple[float, int, int, float, float]:
    """Best flat-ramp-flat line through ``w`` by least squares: (SSE, last flat index, first top index, level, slope)."""
    m = len(w)
    t = np.arange(m)
    a, b = np.triu_indices(m, k=1)  # every pair of kinks a < b
    r = np.clip(t[None, :] - a[:, None], 0, (b - a)[:, None]).astype(float)
    rc = r - r.mean(axis=1, keepdims=True)
    wc = w - w.mean()
    cov, var = rc @ wc, np.sum(rc * rc, axis=1)
    sse = float(wc @ wc) - cov * cov / var
    k = int(np.argmin(sse))
    slope = float(cov[k] / var[k])
    return float(sse[k]), int(a[k]), int(b[k]), float(w.mean() - slope * r[k].mean()), slope


def detect(values: Sequence[float], min_shift: float = DEFAULT_MIN_SHIFT) -> Detection:
    """Change points of a series of positive values (at least MIN_RUNS of them); see the module docstring."""
    y = np.log(np.asarray(values, dtype=float))
    n = len(y)
    if n < MIN_RUNS:
        raise ValueError(f"change points need at least {MIN_RUNS} values, got {n}")
    pen = PENALTY * math.log(n)
    sigma = noise_sigma(y)
    edges = _segment(y / sigma, pen)
    # The residual spread around the fitted levels is the noise the segmentation leaves: larger than sigma means
    # the MAD came out low (and cut the series into noise), so segment again with it.
    for _ in range(3):
        residual = math.sqrt(_sse(y, edges) / max(n - (len(edges) - 1), 1))
        if residual <= sigma * 1.001:
            break
        sigma = residual
        edges = _segment(y / sigma, pen)
    levels = [float(y[a:b].mean()) for a, b in zip(edges, edges[1:])]
    found: list[ChangePoint] = []
    i = 1
    while i < len(levels):
        up = levels[i] > levels[i - 1]
        j = i
        while j + 1 < len(levels) and (levels[j + 1] > levels[j]) == up:
            j += 1
        # Change points i..j (before segments i..j) all move one way: a staircase, or one ramp.
        drift = None
        if j > i:
            lo, hi = edges[i - 1], edges[j + 1]
            stairs = _sse(y, edges[i - 1:j + 2]) / sigma ** 2
            sse, a, b, level, slope = _ramp(y[lo:hi] / sigma)
            if sse + 2 * pen <= stairs + (j - i + 1) * pen and b - a >= 2 and (slope > 0) == up:
                drift = ChangePoint("drift", lo + a + 1, lo + b, math.exp(level * sigma),
                                    math.exp((level + slope * (b - a)) * sigma))
        if drift is not None:
            found.append(drift)
        else:
            found.extend(ChangePoint("step", edges[k], edges[k], math.exp(levels[k - 1]), math.exp(levels[k]))
                         for k in range(i, j + 1))
        i = j + 1
    smallest = max(min_shift, math.expm1(sigma * math.sqrt(4 * PENALTY * math.log(n) / n)))
    return Detection(noise=sigma, change_points=tuple(c for c in found if abs(c.shift) >= min_shift),
                     smallest_shift=smallest, first_level=math.exp(levels[0]))
