"""Unit tests of pytest_rnnperf.stats on seeded synthetic timings (lognormal noise around known medians)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_rnnperf.stats import (
    Comparison,
    Interval,
    Summary,
    Verdict,
    compare,
    noisy,
    paired_ratios,
    ratio_interval,
    speedup_interval,
    spread,
    summarize,
)


def times(median: float, n: int, seed: int, sigma: float = 0.015) -> np.ndarray:
    """n lognormal timings around `median` with ~sigma relative noise, from a fixed seed."""
    return median * np.random.default_rng(seed).lognormal(0.0, sigma, n)


# ------------------------------------------------------------------------------------------------ summarize


def test_summarize_hand_checked_values() -> None:
    s = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert isinstance(s, Summary)
    assert s.n == 5
    assert (s.median, s.q1, s.q3, s.iqr) == (3.0, 2.0, 4.0, 2.0)
    assert s.mean == 3.0
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert (s.min, s.max) == (1.0, 5.0)
    assert s.rel_iqr == pytest.approx(2.0 / 3.0)


def test_summarize_single_sample_has_zero_spread() -> None:
    s = summarize([0.25])
    assert (s.n, s.median, s.iqr, s.stdev, s.rel_iqr) == (1, 0.25, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("samples", "match"),
    [([], "empty"), ([1.0, float("nan")], "non-finite"), ([1.0, float("inf"), 2.0], "non-finite")],
)
def test_summarize_rejects_empty_and_non_finite(samples: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        summarize(samples)


def test_summary_is_frozen() -> None:
    s = summarize([1.0, 2.0])
    with pytest.raises(AttributeError):
        s.median = 0.0  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------- intervals


def test_interval_contains_and_rel_halfwidth() -> None:
    iv = Interval(estimate=2.0, low=1.9, high=2.3, confidence=0.95)
    assert iv.contains(1.9) and iv.contains(2.3) and iv.contains(2.0)
    assert not iv.contains(1.89) and not iv.contains(2.31)
    assert iv.rel_halfwidth == pytest.approx(0.1)


def test_speedup_interval_contains_true_ratio_for_paired_noisy_data() -> None:
    cudnn = times(1.0e-3, 30, seed=1)
    generic = times(7.0e-3, 30, seed=2)
    iv = speedup_interval(cudnn, generic)
    assert iv.estimate == pytest.approx(np.median(generic) / np.median(cudnn))
    assert iv.contains(7.0)
    assert iv.low < iv.estimate < iv.high
    # 1.5% noise, 30 rounds: the interval is a few percent wide, not tens.
    assert 0.002 < iv.rel_halfwidth < 0.03
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
    assert paired.contains(5.0)
    # The drift is 10x the per-sample noise, so pairing should shrink the interval (about 3x here).
    assert paired.rel_halfwidth * 2 < unpaired.rel_halfwidth


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
    assert iv.rel_halfwidth == pytest.approx(0.0)


def test_bca_failure_falls_back_to_percentile() -> None:
    # Every leave-one-out median of the generic side is 5, so BCa cannot estimate its acceleration, while
    # resampled medians still range over 4..6: the percentile interval is the honest answer.
    iv = speedup_interval([1.0] * 7, [4.0, 4.0, 5.0, 5.0, 5.0, 6.0, 6.0])
    assert (iv.estimate, iv.low, iv.high) == (5.0, 4.0, 6.0)


def test_interval_always_contains_its_estimate() -> None:
    # Pinned case where scipy's BCa bound lands one ulp above the estimate (1.666...67 vs 1.666...7).
    iv = speedup_interval([3.0, 3.0, 2.0], [5.0, 8.0, 4.0], n_resamples=500)
    assert iv.contains(iv.estimate)
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
    assert iv.contains(1.1)
    assert iv.low > 1.05


def test_intervals_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="cudnn samples is empty"):
        speedup_interval([], [1.0])
    with pytest.raises(ValueError, match="strictly positive"):
        ratio_interval([1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="confidence"):
        ratio_interval([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], confidence=95)


# ------------------------------------------------------------------------------------------------- compare


def test_compare_regressed_for_ten_percent_slower() -> None:
    c = compare("cudnn time", times(1.0e-3, 30, seed=11), times(1.1e-3, 30, seed=12))
    assert isinstance(c, Comparison)
    assert c.verdict is Verdict.REGRESSED
    assert c.ratio.low > 1.05
    assert c.p_value is not None and c.p_value < 0.01
    assert c.baseline_median == pytest.approx(1.0e-3, rel=0.02)
    assert c.current_median == pytest.approx(1.1e-3, rel=0.02)


def test_compare_unchanged_for_identical_distributions() -> None:
    c = compare("cudnn time", times(1.0e-3, 30, seed=13), times(1.0e-3, 30, seed=14))
    assert c.verdict is Verdict.UNCHANGED
    assert 1 / 1.05 <= c.ratio.low and c.ratio.high <= 1.05


def test_compare_improved_for_ten_percent_faster() -> None:
    c = compare("cudnn time", times(1.0e-3, 30, seed=15), times(0.9e-3, 30, seed=16))
    assert c.verdict is Verdict.IMPROVED
    assert c.ratio.high < 1 / 1.05


def test_compare_ambiguous_at_the_threshold() -> None:
    baseline = times(1.0e-3, 30, seed=17)
    # Same shape shifted by exactly +5%: the ratio interval must straddle the 1.05 edge.
    current = 1.05 * np.random.default_rng(18).permutation(baseline)
    c = compare("cudnn time", baseline, current, min_effect=0.05)
    assert c.ratio.contains(1.05)
    assert c.verdict is Verdict.AMBIGUOUS


def test_compare_ambiguous_for_tiny_noisy_samples() -> None:
    # A +20% shift in 4 samples of 30% noise: neither a regression nor "unchanged" can be claimed.
    c = compare("cudnn time", times(1.0, 4, seed=19, sigma=0.3), times(1.2, 4, seed=20, sigma=0.3))
    assert c.verdict is Verdict.AMBIGUOUS
    assert c.ratio.high - c.ratio.low > 0.2


def test_compare_ambiguous_with_too_few_samples_even_if_quiet() -> None:
    c = compare("cudnn time", [1.0, 1.0], [1.0, 1.0])
    assert c.p_value is None
    assert c.verdict is Verdict.AMBIGUOUS


def test_compare_ambiguous_when_beyond_threshold_but_not_significant() -> None:
    # 3 vs 3 constant samples 20% apart: the collapsed interval is far beyond the band, but 3 samples a
    # side cannot reach p < 0.01 in a two-sided Mann-Whitney test (p ~ 0.047 here), so no call is made.
    c = compare("cudnn time", [1.0, 1.0, 1.0], [1.2, 1.2, 1.2])
    assert c.ratio.low > 1.05
    assert c.p_value is not None and c.p_value > 0.01
    assert c.verdict is Verdict.AMBIGUOUS


def test_compare_constant_identical_samples_are_unchanged() -> None:
    c = compare("cudnn time", [2.0] * 5, [2.0] * 5)
    assert c.p_value == 1.0
    assert c.verdict is Verdict.UNCHANGED


def test_higher_is_better_flips_the_direction() -> None:
    rng = np.random.default_rng(21)
    base_speedup = paired_ratios(times(1.0, 30, seed=22), 7.0 * rng.lognormal(0.0, 0.015, 30))
    rng = np.random.default_rng(23)
    cur_speedup = paired_ratios(times(1.0, 30, seed=24), 6.3 * rng.lognormal(0.0, 0.015, 30))
    as_speedup = compare("speedup", base_speedup, cur_speedup, higher_is_better=True)
    assert as_speedup.verdict is Verdict.REGRESSED  # speedup dropped 10%
    as_time = compare("speedup", base_speedup, cur_speedup, higher_is_better=False)
    assert as_time.verdict is Verdict.IMPROVED  # the same drop read as a time is an improvement
    assert compare("speedup", cur_speedup, base_speedup, higher_is_better=True).verdict is Verdict.IMPROVED


def test_explain_mentions_percentage_threshold_and_verdict() -> None:
    c = compare("cudnn time", times(1.0e-3, 30, seed=11), times(1.1e-3, 30, seed=12))
    line = c.explain()
    pct = f"{(c.ratio.estimate - 1) * 100:+.1f}%"
    assert line.startswith(f"cudnn time {pct} [")
    assert f"[{(c.ratio.low - 1) * 100:+.1f}%, {(c.ratio.high - 1) * 100:+.1f}%]" in line
    assert "threshold 5%" in line
    assert line.endswith("): regressed")
    assert "\n" not in line
    assert "p=n/a" in compare("t", [1.0], [1.0]).explain()


def test_explain_exact_format() -> None:
    c = Comparison(
        metric="cudnn time",
        baseline_median=1.0,
        current_median=1.079,
        ratio=Interval(1.079, 1.051, 1.108, 0.95),
        p_value=0.0003,
        min_effect=0.05,
        verdict=Verdict.REGRESSED,
    )
    assert c.explain() == "cudnn time +7.9% [+5.1%, +10.8%] (p=0.0003, threshold 5%): regressed"


def test_compare_is_deterministic() -> None:
    base, cur = times(1.0, 20, seed=25), times(1.03, 20, seed=26)
    assert compare("t", base, cur, seed=5) == compare("t", base, cur, seed=5)


def test_verdict_is_a_string() -> None:
    assert Verdict.REGRESSED == "regressed"
    assert str(Verdict.AMBIGUOUS) == "ambiguous"


# ------------------------------------------------------------------------------------ ratios, spread, noise


def test_paired_ratios() -> None:
    np.testing.assert_allclose(paired_ratios([1.0, 2.0, 4.0], [3.0, 5.0, 4.0]), [3.0, 2.5, 1.0])
    with pytest.raises(ValueError, match="one cudnn and one generic sample per round.*3 cudnn and 2 generic"):
        paired_ratios([1.0, 2.0, 3.0], [1.0, 2.0])


def test_spread() -> None:
    assert spread([6.9, 7.1, 7.0]) == pytest.approx(7.1 / 6.9 - 1)
    assert spread([2.0, 2.0]) == 0.0
    assert spread([1.0, 1.03]) == pytest.approx(0.03)
    with pytest.raises(ValueError):
        spread([])


def test_noisy() -> None:
    assert noisy(summarize(times(1.0, 30, seed=27, sigma=0.01))) is None
    s = summarize([1.0, 1.0, 1.0, 1.0, 1.0])
    assert noisy(s) is None
    loud = summarize([0.9, 0.96, 1.0, 1.04, 1.2])  # q1 0.96, q3 1.04: rel IQR 8%
    assert loud.rel_iqr == pytest.approx(0.08)
    assert noisy(loud) == "relative IQR 8.0% > 5%: the measurement is noisy"
    assert noisy(loud, max_rel_iqr=0.1) is None
