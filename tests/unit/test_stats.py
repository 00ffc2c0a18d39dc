"""Unit tests of pytest_rnnperf.model.stats on seeded synthetic timings (lognormal noise around known medians)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_rnnperf.model.stats import Interval, Summary, describe, ratio_interval, speedup_interval, spread


def times(median: float, n: int, seed: int, sigma: float = 0.015) -> np.ndarray:
    """n lognormal timings around `median` with ~sigma relative noise, from a fixed seed."""
    return median * np.random.default_rng(seed).lognormal(0.0, sigma, n)


# ------------------------------------------------------------------------------------------------- describe


def test_describe_hand_checked_values() -> None:
    s = describe([5.0, 1.0, 4.0, 2.0, 3.0])
    assert isinstance(s, Summary)
    assert s.n == 5
    assert (s.median, s.q1, s.q3, s.iqr) == (3.0, 2.0, 4.0, 2.0)
    assert s.mean == 3.0
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert (s.min, s.max) == (1.0, 5.0)
    assert s.rel_iqr == pytest.approx(2.0 / 3.0)


def test_describe_single_sample_has_zero_spread() -> None:
    s = describe([0.25])
    assert (s.n, s.median, s.iqr, s.stdev, s.rel_iqr) == (1, 0.25, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("samples", "match"),
    [([], "empty"), ([1.0, float("nan")], "non-finite"), ([1.0, float("inf"), 2.0], "non-finite")],
)
def test_describe_rejects_empty_and_non_finite(samples: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        describe(samples)


def test_summary_is_frozen() -> None:
    s = describe([1.0, 2.0])
    with pytest.raises(AttributeError):
        s.median = 0.0  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------- intervals


def contains(iv: Interval, x: float) -> bool:
    """x lies within [low, high], bounds included."""
    return iv.low <= x <= iv.high


def rel_halfwidth(iv: Interval) -> float:
    """Half the interval's width relative to its estimate."""
    return (iv.high - iv.low) / 2.0 / abs(iv.estimate)


def test_speedup_interval_contains_true_ratio_for_paired_noisy_data() -> None:
    cudnn = times(1.0e-3, 30, seed=1)
    generic = times(7.0e-3, 30, seed=2)
    iv = speedup_interval(cudnn, generic)
    assert iv.estimate == pytest.approx(np.median(generic) / np.median(cudnn))
    assert contains(iv, 7.0)
    assert iv.low < iv.estimate < iv.high
    # 1.5% noise, 30 rounds: the interval is a few percent wide, not tens.
    assert 0.002 < rel_halfwidth(iv) < 0.03
    assert iv.confidence == 0.95


def test_paired_interval_is_narrower_than_unpaired_under_shared_drift() -> None:
    rng = np.random.default_rng(3)
    n = 30
    drift = rng.lognormal(0.0, 0.10, n)  # round i: clocks/thermals hit both sides alike
    cudnn = 1.0 * drift * rng.lognormal(0.0, 0.01, n)
    generic = 5.0 * drift * rng.lognormal(0.0, 0.01, n)
    paired = speedup_interval(cudnn, generic, paired=True)
    unpaired = speedup_interval(cudnn, generic, paired=False)
    assert paired.estimate == unpaired.estimate
    assert contains(paired, 5.0)
    # The drift is 10x the per-sample noise, so pairing should shrink the interval (about 3x here).
    assert rel_halfwidth(paired) * 2 < rel_halfwidth(unpaired)


def test_speedup_interval_unequal_lengths_falls_back_to_unpaired() -> None:
    cudnn = times(1.0, 20, seed=4)
    generic = times(3.0, 25, seed=5)
    assert speedup_interval(cudnn, generic, paired=True) == speedup_interval(cudnn, generic, paired=False)


@pytest.mark.parametrize(
    ("cudnn", "generic", "expected"),
    [
        ([1.0, 1.0, 1.0, 1.0], [4.0, 4.0, 4.0, 4.0], 4.0),  # zero variance
        ([1.0, 2.0], [3.0, 5.0], 4.0 / 1.5),  # n < 3
        ([2.0], [6.0], 3.0),  # single round
        ([1.0] * 10, [5.0] * 9 + [6.0], 5.0),  # BCa degenerates (constant jackknife); percentile is exact
    ],
)
def test_speedup_interval_degenerate_collapses_to_estimate(
    cudnn: list[float], generic: list[float], expected: float
) -> None:
    iv = speedup_interval(cudnn, generic)
    assert iv.estimate == pytest.approx(expected)
    assert iv.low == pytest.approx(expected) and iv.high == pytest.approx(expected)
    assert rel_halfwidth(iv) == pytest.approx(0.0)


def test_bca_failure_falls_back_to_percentile() -> None:
    # Every leave-one-out median of the generic side is 5, so BCa cannot estimate its acceleration, while
    # resampled medians still range over 4..6: the percentile interval is the honest answer.
    iv = speedup_interval([1.0] * 7, [4.0, 4.0, 5.0, 5.0, 5.0, 6.0, 6.0])
    assert (iv.estimate, iv.low, iv.high) == (5.0, 4.0, 6.0)


def test_interval_always_contains_its_estimate() -> None:
    # Pinned case where scipy's BCa bound lands one ulp above the estimate (1.666...67 vs 1.666...7).
    iv = speedup_interval([3.0, 3.0, 2.0], [5.0, 8.0, 4.0], n_resamples=500)
    assert contains(iv, iv.estimate)
    assert iv.estimate == 5.0 / 3.0 and iv.high == pytest.approx(2.0)


def test_speedup_interval_exact_ratio_under_pure_drift_is_tight() -> None:
    # generic == 5 * cudnn round by round: every paired resample has speedup 5 (up to rounding).
    cudnn = times(1.0, 12, seed=6, sigma=0.05)
    iv = speedup_interval(cudnn, 5.0 * cudnn)
    assert iv.estimate == pytest.approx(5.0)
    assert iv.high - iv.low < 1e-9


def test_intervals_are_deterministic_per_seed() -> None:
    cudnn = times(1.0, 15, seed=7)
    generic = times(6.0, 15, seed=8)
    a = speedup_interval(cudnn, generic, seed=42)
    assert a == speedup_interval(cudnn, generic, seed=42)
    assert a != speedup_interval(cudnn, generic, seed=43)  # the seed really drives the resampling
    b = ratio_interval(cudnn, generic * 0.2, seed=0)
    assert b == ratio_interval(cudnn, generic * 0.2, seed=0)


def test_ratio_interval_is_current_over_baseline() -> None:
    baseline = times(2.0, 30, seed=9)
    current = times(2.2, 30, seed=10)
    iv = ratio_interval(baseline, current)
    assert iv.estimate == pytest.approx(np.median(current) / np.median(baseline))
    assert contains(iv, 1.1)
    assert iv.low > 1.05


def test_intervals_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="cudnn samples is empty"):
        speedup_interval([], [1.0])
    with pytest.raises(ValueError, match="strictly positive"):
        ratio_interval([1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="confidence"):
        ratio_interval([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], confidence=95)


def test_spread() -> None:
    assert spread([6.9, 7.1, 7.0]) == pytest.approx(7.1 / 6.9 - 1)
    assert spread([2.0, 2.0]) == 0.0
    assert spread([1.0, 1.03]) == pytest.approx(0.03)
    with pytest.raises(ValueError):
        spread([])


def test_median_noise_is_the_relative_standard_error_of_the_median_and_ignores_one_outlier() -> None:
    """Normal samples give about sqrt(pi/2) * sigma / sqrt(n); one slow block barely moves it; too few is infinite."""
    from pytest_rnnperf.model.stats import median_noise

    rng = np.random.default_rng(0)
    samples = 1.0 + 0.01 * rng.standard_normal(400)
    assert median_noise(samples) == pytest.approx(1.2533 * 0.01 / 20, rel=0.15)
    steady = [1.0, 1.001, 0.999, 1.0, 1.0005]
    assert median_noise(steady + [3.0]) < 0.002
    assert median_noise([1.0]) == median_noise([]) == median_noise([0.0, 0.0]) == float("inf")
