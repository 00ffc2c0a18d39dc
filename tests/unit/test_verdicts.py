"""The regression rule: the statistic, thresholds, host-bound cases, window flags, re-measuring, outcomes."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from factories import record

from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.stats import Interval
from pytest_rnnperf.model.timing import KernelStat
from pytest_rnnperf.judge.verdicts import (CaseVerdict, Comparison, Outcome, Policy, Verdict, compare, judge,
                                           judge_remeasuring)


def times(median: float, n: int, seed: int, sigma: float = 0.015) -> np.ndarray:
    """n lognormal timings around `median` with ~sigma relative noise, from a fixed seed."""
    return median * np.random.default_rng(seed).lognormal(0.0, sigma, n)


THROTTLED = WindowFlag(FlagKind.THROTTLED, "clocks throttled during the 2.00 s window: power 0.50 s")


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
    assert c.ratio.low <= 1.05 <= c.ratio.high
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
    base_speedup = 7.0 * rng.lognormal(0.0, 0.015, 30) / times(1.0, 30, seed=22)
    rng = np.random.default_rng(23)
    cur_speedup = 6.3 * rng.lognormal(0.0, 0.015, 30) / times(1.0, 30, seed=24)
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


def test_compare_refuses_thresholds_that_mean_nothing() -> None:
    """min_effect 0, inf or nan would flag noise or nothing at all: a ValueError, not a verdict."""
    for bad in (0.0, -0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="min_effect"):
            compare("t", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], min_effect=bad)


# ------------------------------------------------------------------------------------------------- policy


@pytest.mark.parametrize("field, value", [("min_effect", 0.0), ("min_effect", math.inf), ("host_bound_effect", -1.0),
                                          ("host_bound_effect", math.nan), ("alpha", 1.0), ("host_bound_below", 0.0)])
def test_policy_refuses_meaningless_thresholds(field: str, value: float) -> None:
    """Each threshold is checked where the policy is made, naming the field."""
    with pytest.raises(ValueError, match=field):
        Policy(**{field: value})


# ------------------------------------------------------------------------------------------ case verdicts


def test_regressed_unchanged_and_flagged() -> None:
    """+20% cuDNN time regresses and fails; noise alone does not; a throttled window is reported, not failed."""
    base = record("a", 1.0, seed=1)
    slow = judge(base, record("a", 1.2, seed=2))
    assert slow is not None and slow.verdict is Verdict.REGRESSED and slow.outcome is Outcome.REGRESSED and slow.fails
    same = judge(base, record("a", 1.0, seed=3))
    assert same is not None and same.outcome is Outcome.UNCHANGED and not same.fails
    hot = judge(base, record("a", 1.2, seed=2, flags=(THROTTLED,)))
    assert hot is not None and hot.verdict is Verdict.REGRESSED and not hot.fails
    assert hot.outcome is Outcome.REGRESSED_NOT_FAILED and hot.flags == (THROTTLED,) and "throttled" in hot.flagged


def test_a_flag_is_data_whatever_its_words() -> None:
    """A foreign-process flag with a message that mentions neither 'process' nor 'throttled' still holds a case back."""
    odd = WindowFlag(FlagKind.FOREIGN_PROCESS, "pid 4242 appeared")
    verdict = judge(record("a", 1.0, seed=1), record("a", 1.5, seed=2, flags=(odd,)))
    assert verdict is not None and verdict.outcome is Outcome.REGRESSED_NOT_FAILED


def test_speedup_is_reported_but_a_faster_generic_side_does_not_regress_the_case() -> None:
    """A faster generic side lowers the speedup; the case follows the cuDNN time, which is unchanged."""
    v = judge(record("a", 1.0, generic_ms=4.0, seed=1), record("a", 1.0, generic_ms=3.0, seed=4))
    assert v is not None and v.speedup is not None and v.speedup.verdict is Verdict.REGRESSED
    assert v.verdict is Verdict.UNCHANGED and not v.fails


def test_no_cudnn_side_has_no_verdict() -> None:
    """Generic-only records (CPU runs) are not compared."""
    rec = record("a", None)
    assert judge(rec, rec) is None


def test_host_bound_cases_get_the_wider_threshold() -> None:
    """+20% on a GPU-bound case regresses; the same +20% where the GPU was 20% busy does not; +60% still does."""
    base, slow = record("a", 1.0, seed=1, busy_pct=90), record("a", 1.2, seed=2, busy_pct=90)
    device_bound = judge(base, slow)
    assert device_bound is not None and device_bound.fails and not device_bound.host_bound
    host_bound = judge(record("a", 1.0, seed=1, busy_pct=20), record("a", 1.2, seed=2, busy_pct=20))
    assert host_bound is not None and host_bound.verdict is Verdict.UNCHANGED
    assert host_bound.host_bound == "host-bound: GPU busy 20%" and host_bound.time.min_effect == Policy().host_bound_effect
    much_slower = judge(record("a", 1.0, seed=1, busy_pct=20), record("a", 1.6, seed=2, busy_pct=20))
    assert much_slower is not None and much_slower.fails


def test_host_bound_slowdown_that_keeps_the_speedup_is_the_hosts() -> None:
    """Host-bound: cuDNN +60% with generic +60% is the host (reported, not failed); with generic flat it regresses."""
    base = record("a", 1.0, generic_ms=8.0, seed=1, busy_pct=20)
    host_slower = judge(base, record("a", 1.6, generic_ms=12.8, seed=2, busy_pct=20))
    assert host_slower is not None and host_slower.verdict is Verdict.REGRESSED and not host_slower.fails
    assert [f.kind for f in host_slower.flags] == [FlagKind.HOST_SLOWED]
    assert host_slower.flagged == "the host slowed both sides alike: speedup +0%, unchanged"
    assert host_slower.outcome is Outcome.REGRESSED_NOT_FAILED
    cudnn_slower = judge(base, record("a", 1.6, generic_ms=8.0, seed=2, busy_pct=20))
    assert cudnn_slower is not None and cudnn_slower.fails and not cudnn_slower.flags
    assert cudnn_slower.speedup is not None and cudnn_slower.speedup.verdict is Verdict.REGRESSED
    gpu_bound = judge(record("a", 1.0, generic_ms=8.0, seed=1, busy_pct=90),
                      record("a", 1.6, generic_ms=12.8, seed=2, busy_pct=90))
    assert gpu_bound is not None and gpu_bound.fails  # GPU-bound: the cuDNN time alone decides


def test_thresholds_come_from_the_policy() -> None:
    """The same +8% is a regression at 5% and unchanged at 10%."""
    base, now = record("a", 1.0, seed=1), record("a", 1.08, seed=2)
    assert judge(base, now, Policy(min_effect=0.05)).fails  # type: ignore[union-attr]
    assert judge(base, now, Policy(min_effect=0.10)).verdict is Verdict.UNCHANGED  # type: ignore[union-attr]


def test_an_ambiguous_case_is_timed_once_more_and_both_windows_decide() -> None:
    """Ambiguous (+6% against 5%, four rounds): one more window; the eight pooled rounds call it regressed."""
    base = record("a", 1.0, seed=1, n=20)
    first = record("a", 1.06, seed=5, n=4)
    assert judge(base, first).verdict is Verdict.AMBIGUOUS  # type: ignore[union-attr]
    calls: list[int] = []

    def remeasure() -> object:
        calls.append(1)
        return record("a", 1.06, seed=105, n=4)

    current, verdict = judge_remeasuring(base, first, remeasure)  # type: ignore[arg-type]
    assert calls == [1] and verdict is not None and verdict.remeasured and verdict.verdict is Verdict.REGRESSED
    assert current.cudnn is not None and len(current.cudnn.samples) == 8
    assert current.cudnn.samples[:4] == first.cudnn.samples  # type: ignore[union-attr]
    assert len(current.generic.samples) == 8 and "remeasure" in current.cost_s
    calls.clear()
    _, clear = judge_remeasuring(base, record("a", 1.5, seed=4), remeasure)  # type: ignore[arg-type]
    assert calls == [] and clear is not None and not clear.remeasured


def test_device_time_is_called_on_its_estimate_wall_time_on_its_whole_interval() -> None:
    """The same +3.6% [+2.6%, +4.6%]-like shift: regressed on device time at 3%, ambiguous on wall time at 3%."""
    base, now = times(1.0e-3, 8, seed=31, sigma=0.01), times(1.036e-3, 8, seed=32, sigma=0.01)
    loose = compare("cudnn device time", base, now, min_effect=0.03, whole_interval=False)
    strict = compare("cudnn time", base, now, min_effect=0.03)
    assert loose.ratio.low < 1.03 < loose.ratio.estimate and loose.ratio.low > 1.0
    assert loose.verdict is Verdict.REGRESSED and strict.verdict is Verdict.AMBIGUOUS
    # No change at all is never called on the estimate: the interval must clear 1.
    assert compare("t", base, times(1.0e-3, 8, seed=33, sigma=0.01), min_effect=0.03,
                   whole_interval=False).verdict is not Verdict.REGRESSED


def test_comparison_explains_itself_in_one_line() -> None:
    """explain() carries the change, its interval, p, the threshold and the verdict."""
    c = Comparison("cudnn time", 1e-3, 1.079e-3, Interval(1.079, 1.051, 1.108, 0.95), 0.0003, 0.05, Verdict.REGRESSED)
    assert c.explain() == "cudnn time +7.9% [+5.1%, +10.8%] (p=0.0003, threshold 5%): regressed"


# ------------------------------------------------------------------------------------------------ device time


def test_device_time_decides_where_both_runs_have_it() -> None:
    """Wall +20% with the kernels unchanged is not a cuDNN regression; the kernels +5% is, at the 3% threshold."""
    base = record("a", 1.0, seed=1, cudnn_dev_ms=0.5, generic_dev_ms=2.0)
    host_noise = judge(base, record("a", 1.2, seed=2, cudnn_dev_ms=0.5, generic_dev_ms=2.0))
    assert host_noise is not None and host_noise.basis == "device" and host_noise.verdict is Verdict.UNCHANGED
    slower = judge(base, record("a", 1.0, seed=2, cudnn_dev_ms=0.525, generic_dev_ms=2.0))
    assert slower is not None and slower.fails and slower.time.metric == "cudnn device time"
    assert slower.time.min_effect == Policy().device_effect == 0.03


def test_host_overhead_has_its_own_verdict_and_name() -> None:
    """Wall doubled over the same kernels: the host overhead regressed, named so; it fails only when asked."""
    base = record("a", 1.0, seed=1, cudnn_dev_ms=0.5)
    v = judge(base, record("a", 2.0, seed=2, cudnn_dev_ms=0.5))
    assert v is not None and v.verdict is Verdict.UNCHANGED and v.host_regressed
    assert v.outcome is Outcome.HOST_REGRESSED_NOT_FAILED and not v.fails
    assert v.host_line().startswith("launch/dispatch overhead +200.") and v.host_line().endswith("driver or framework")
    strict = judge(base, record("a", 2.0, seed=2, cudnn_dev_ms=0.5), Policy(fail_host=True))
    assert strict is not None and strict.outcome is Outcome.HOST_REGRESSED and strict.fails
    quiet = judge(base, record("a", 1.1, seed=2, cudnn_dev_ms=0.5))  # host +20%: within the 50% threshold
    assert quiet is not None and quiet.host is not None and not quiet.host_regressed and not quiet.fails


def _host_history(*host_ms: float, reported: tuple[float, ...] = ()) -> list[ProcessSummary]:
    """Stored processes of case "a" with 0.1 ms of kernels and these host overheads (``reported``: kept as reports)."""
    def one(i: int, host: float, was_reported: bool) -> ProcessSummary:
        """One process whose wall step is its kernels plus ``host``."""
        made = summarize(record("a", 0.1 + host, seed=i, cudnn_dev_ms=0.1), f"process {i}")
        return replace(made, reported=was_reported)

    return [one(i, h, False) for i, h in enumerate(host_ms)] + [one(50 + i, h, True) for i, h in enumerate(reported)]


def test_across_processes_host_overhead_counts_the_processes_it_reported_and_their_tail() -> None:
    """Dispatch through a compiled wrapper read 0.07-0.37 ms by process: a history that keeps its reported processes
    and sees its tail calls 0.22 ms unchanged, yet still reports a fivefold overhead, and a doubling of a steady one."""
    spread = _host_history(0.09, 0.092, 0.088, 0.091, 0.37, reported=(0.22,))
    now = judge(record("a", 1.0, seed=1, cudnn_dev_ms=0.1), record("a", 0.32, seed=9, cudnn_dev_ms=0.1),
                history=spread)
    assert now is not None and now.host is not None and now.host.processes == 6 and not now.host_regressed
    fivefold = judge(record("a", 1.0, seed=1, cudnn_dev_ms=0.1), record("a", 0.6, seed=9, cudnn_dev_ms=0.1),
                     history=spread)
    assert fivefold is not None and fivefold.host_regressed
    steady = judge(record("a", 1.0, seed=1, cudnn_dev_ms=0.1), record("a", 0.3, seed=9, cudnn_dev_ms=0.1),
                   history=_host_history(0.09, 0.092, 0.088, 0.091, 0.09))
    assert steady is not None and steady.host_regressed


def test_host_overhead_is_not_judged_where_it_is_a_sliver_of_the_step() -> None:
    """GPU-bound: wall 10.2 ms over 10 ms of kernels; a host 'change' of 0.2 -> 0.4 ms is not judged."""
    base = record("a", 10.2, seed=1, cudnn_dev_ms=10.0)
    v = judge(base, record("a", 10.4, seed=2, cudnn_dev_ms=10.0))
    assert v is not None and v.host is None and v.outcome is Outcome.UNCHANGED


def test_the_host_slowed_exemption_is_gone_where_device_time_decides() -> None:
    """Host-bound, both sides 2.2x on the host, kernels unchanged: the host overhead regression is named."""
    base = record("a", 1.0, generic_ms=8.0, seed=1, busy_pct=20, cudnn_dev_ms=0.3, generic_dev_ms=2.0)
    v = judge(base, record("a", 2.2, generic_ms=17.6, seed=2, busy_pct=20, cudnn_dev_ms=0.3, generic_dev_ms=2.0))
    assert v is not None and not v.flags and v.outcome is Outcome.HOST_REGRESSED_NOT_FAILED


def test_a_baseline_without_device_time_is_judged_on_wall_time() -> None:
    """An older baseline: the wall rule applies, and the verdict says which basis it used."""
    v = judge(record("a", 1.0, seed=1), record("a", 1.2, seed=2, cudnn_dev_ms=0.5))
    assert v is not None and v.basis == "wall" and v.time.metric == "cudnn time" and v.fails


def probed(rec: CaseRecord, probe_ms: float | None) -> CaseRecord:
    """``rec`` measured in a process whose host-speed probe took ``probe_ms``."""
    return replace(rec, host_probe_s=None if probe_ms is None else probe_ms / 1e3)


def test_busy_time_that_moved_on_a_slower_host_while_the_kernels_did_not_is_overlap_reported_not_failed() -> None:
    """Busy +9% with the same summed kernel time, the host probe 20% slower: fewer launches overlapped; flagged."""
    base = probed(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), 2.0)
    v = judge(base, probed(record("a", 1.0, seed=2, cudnn_dev_ms=0.203, cudnn_work_ms=0.236), 2.4))
    assert v is not None and v.verdict is Verdict.REGRESSED and not v.fails
    assert [f.kind for f in v.flags] == [FlagKind.OVERLAP] and v.outcome is Outcome.REGRESSED_NOT_FAILED
    assert v.flagged.startswith("kernels overlapped less on a slower host: busy +9.")
    assert v.flagged.endswith("host probe +20.0%")
    slower = judge(base, probed(record("a", 1.0, seed=2, cudnn_dev_ms=0.203, cudnn_work_ms=0.26), 2.4))
    assert slower is not None and slower.fails and slower.work is not None


@pytest.mark.parametrize("probe_ms, speed", [(2.0, "host speed within its noise (probe +0.0%, line 5.0%)"),
                                             (2.15, "host probe only +7.5%"),
                                             (None, "host speed not measured")])
def test_busy_time_that_moved_while_the_kernels_held_on_a_host_of_unchanged_speed_fails_saying_why(
        probe_ms: float | None, speed: str) -> None:
    """The same busier step where the host did not slow (or not by as much, or unknown): a loss of concurrency."""
    base = probed(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), 2.0)
    v = judge(base, probed(record("a", 1.0, seed=2, cudnn_dev_ms=0.203, cudnn_work_ms=0.236), probe_ms))
    assert v is not None and not v.flags and v.fails
    assert v.time.why == f"kernels overlapped less: busy +9.8%, summed kernel time held, {speed}"
    assert v.time.explain().endswith(f"regressed ({v.time.why})")


def _processes(n: int = 4, probe_ms: float | None = 2.0) -> list[ProcessSummary]:
    """``n`` stored processes of case "a": busy 0.185 ms, 0.235 ms of kernels on two streams."""
    return [summarize(probed(record("a", 1.0, seed=i, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), probe_ms),
                      f"process {i}") for i in range(n)]


def test_across_processes_a_busier_step_on_a_slower_host_whose_every_kernel_held_is_overlap_not_a_failure() -> None:
    """A slower host launches later and fewer kernels overlap: busy +10%, kernels as before, probe +25%; flagged."""
    v = judge(probed(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), 2.0),
              probed(record("a", 1.0, seed=9, cudnn_dev_ms=0.204, cudnn_work_ms=0.235), 2.5), history=_processes())
    assert v is not None and v.processes == 4 and v.verdict is Verdict.REGRESSED
    assert [f.kind for f in v.flags] == [FlagKind.OVERLAP] and not v.fails


def test_across_processes_a_busier_step_whose_kernels_held_on_a_host_as_fast_as_its_history_fails() -> None:
    """The same busier step where the probe ran as in every stored process: the concurrency was lost, not the host."""
    v = judge(probed(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), 2.0),
              probed(record("a", 1.0, seed=9, cudnn_dev_ms=0.204, cudnn_work_ms=0.235), 2.02), history=_processes())
    assert v is not None and v.processes == 4 and not v.flags and v.fails
    assert ("kernels overlapped less: busy +10.4%, summed kernel time held, host speed within its noise (probe +1.0%, "
            "line ") in v.time.explain()


def test_a_history_without_host_probes_is_judged_against_the_newest_record_probe() -> None:
    """Stored processes from before the probe: the newest record's probe is the host's past; 25% slower excuses."""
    base = probed(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), 2.0)
    current = probed(record("a", 1.0, seed=9, cudnn_dev_ms=0.204, cudnn_work_ms=0.235), 2.5)
    v = judge(base, current, history=_processes(probe_ms=None))
    assert v is not None and [f.kind for f in v.flags] == [FlagKind.OVERLAP] and not v.fails


def test_across_processes_a_kernel_that_appeared_is_never_put_down_to_overlap() -> None:
    """The same busier step with a spin kernel of 4% of it that no stored process ran: it fails, naming it."""
    current = record("a", 1.0, seed=9, cudnn_dev_ms=0.204, cudnn_work_ms=0.235)
    dev = current.cudnn_device
    assert dev is not None
    spun = replace(current, cudnn_device=replace(dev, kernels=(*dev.kernels, KernelStat("spin_kernel", 0.008, 1.0))))
    v = judge(record("a", 1.0, seed=1, cudnn_dev_ms=0.185, cudnn_work_ms=0.235), spun, history=_processes())
    assert v is not None and not v.flags and v.fails
    assert [k.metric for k in v.regressed_kernels] == ["kernel/spin_kernel"]


# ------------------------------------------------------------------------------------------ rules as objects


def test_a_new_rule_is_one_class_and_its_comparison_lands_under_its_name() -> None:
    from dataclasses import dataclass

    from pytest_rnnperf.judge.rules import RULES, Context

    @dataclass(frozen=True)
    class GenericTime:
        name: str = "generic_time"

        def compare(self, ctx: Context) -> Comparison | None:
            base, cur = ctx.baseline.generic, ctx.current.generic
            return compare("generic time", base.samples, cur.samples, **ctx.options(min_effect=0.05))

    base = record("a", 1.0, generic_ms=5.0, seed=1)
    slow_generic = record("a", 1.0, generic_ms=6.0, seed=2)
    verdict = judge(base, slow_generic, rules=RULES + (GenericTime(),))
    assert verdict is not None
    assert verdict.comparisons["generic_time"].verdict is Verdict.REGRESSED
    assert verdict.verdict is Verdict.UNCHANGED  # the cuDNN time still decides
    assert set(verdict.comparisons) == {"speedup", "cudnn_time", "generic_time"}


def test_a_verdict_round_trips_through_json_with_every_comparison_by_name() -> None:
    from pytest_rnnperf.judge.verdicts import CaseVerdict

    verdict = judge(record("a", 1.0, seed=5, cudnn_dev_ms=0.8), record("a", 1.2, seed=6, cudnn_dev_ms=1.0))
    assert verdict is not None
    data = verdict.as_dict()
    assert {"cudnn_time", "speedup", "kernel_time", "host_overhead"} <= set(data)
    again = CaseVerdict.from_dict(data)
    assert again.as_dict() == data and again.outcome is verdict.outcome is Outcome.REGRESSED
    assert data["kernel_time"] is not None and data["cudnn_time"]["metric"] == "cudnn device time"


def _overlapping(n: int = 12) -> list[ProcessSummary]:
    """``n`` stored processes whose kernels overlap more or less by process: busy 5.5 ms +-5%, and the summed kernel
    time the other way (contention), so that their geometric mean holds within 0.3%."""
    swing = [(-1) ** i * (0.02 + 0.01 * (i % 4)) for i in range(n)]
    return [summarize(record("a", 9.0, seed=i, cudnn_dev_ms=5.5 * (1 + d), cudnn_work_ms=7.0 / (1 + d)
                             * (1 + 0.001 * (i % 3))), f"process {i}") for i, d in enumerate(swing)]


def test_a_slowdown_inside_the_busy_times_spread_fails_on_busy_and_kernel_time_together() -> None:
    """Overlap spreads busy time 5% by process, so a 4% slower step hides in it; busy and summed kernel time, both
    4% up, regress together, and the failure says so."""
    from pytest_rnnperf.report.rows import deciding

    history = _overlapping()
    base = record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0)
    slower = judge(base, record("a", 9.0, seed=40, cudnn_dev_ms=5.5 * 1.04, cudnn_work_ms=7.0 * 1.04), history=history)
    assert slower is not None and slower.time.verdict is not Verdict.REGRESSED and slower.time.min_effect > 0.1
    assert slower.balanced is not None and slower.balanced.verdict is Verdict.REGRESSED and slower.fails
    assert slower.balanced.min_effect == 0.03 and deciding(slower) is slower.balanced
    assert slower.balanced.metric == "cudnn balanced time"


def test_a_process_whose_kernels_overlapped_more_passes_on_busy_and_kernel_time_together() -> None:
    """Busy 6% under its median and the kernels 6% over it, the trade of the history: nothing regressed."""
    quiet = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0),
                  record("a", 9.0, seed=41, cudnn_dev_ms=5.5 * 0.94, cudnn_work_ms=7.0 / 0.94), history=_overlapping())
    assert quiet is not None and quiet.balanced is not None and quiet.balanced.verdict is Verdict.UNCHANGED
    assert not quiet.fails


def test_busy_and_kernel_time_together_are_judged_across_processes_only_and_the_sensitivity_takes_the_finer() -> None:
    """One record against one: no such comparison; the history above is called at the 3% floor through it, not at
    busy time's noise, and so catches 3.8% (3% plus 1.645 noises) 19 times in 20."""
    from pytest_rnnperf.judge.policy import Policy as Thresholds
    from pytest_rnnperf.judge.sensitivity import sensitivity

    one = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0),
                record("a", 9.0, seed=2, cudnn_dev_ms=5.5 * 1.04, cudnn_work_ms=7.0 * 1.04))
    assert one is not None and one.balanced is None
    found = sensitivity("a", _overlapping(), Thresholds())
    assert found.smallest == pytest.approx(0.03 + 1.645 * 0.005) and not found.by_noise
    assert found.status.startswith("called at its 3% floor, which it reaches half the time: 3.8% is caught")


def test_directions_run_one_after_the_other_fail_on_kernel_overlap_while_busy_time_hides_in_its_noise(
        tmp_path: Path) -> None:
    """The H100's serialized bidirectional LSTM: busy +5.7% (inside the 5% spread of overlap by process), the summed
    kernel time -10% (less contention): the kernels overlapped less than in any stored process, and it fails so."""
    from fake_nvml import FakeNVML

    from pytest_rnnperf.measure.gpu import read_gpu_info
    from pytest_rnnperf.report.rows import deciding
    from pytest_rnnperf.report.text import regression_failure
    from pytest_rnnperf.session.run import Run
    from pytest_rnnperf.session.session import RnnperfSession

    history = _overlapping()
    serial = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0),
                   record("a", 9.0, seed=42, cudnn_dev_ms=5.5 * 1.057, cudnn_work_ms=7.0 * 0.901), history=history)
    assert serial is not None and serial.time.verdict is not Verdict.REGRESSED and serial.fails
    assert serial.balanced is not None and serial.balanced.verdict is not Verdict.REGRESSED
    assert serial.overlap is not None and serial.overlap.verdict is Verdict.REGRESSED
    assert deciding(serial) is serial.overlap and serial.overlap.metric == "cudnn kernel overlap"
    assert serial.overlap.explain().startswith("cudnn kernel overlap -7.7% [")
    assert serial.overlap.explain().endswith("threshold 5%): regressed (against their least, 1.17; median 1.29)")
    few = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0),
                record("a", 9.0, seed=42, cudnn_dev_ms=5.5 * 1.057, cudnn_work_ms=7.0 * 0.901), history=history[:6])
    assert few is not None and few.overlap is not None and few.overlap.verdict is Verdict.AMBIGUOUS and not few.fails
    assert few.overlap.why.endswith("reported, not judged: 6 stored processes, 10 are needed for their least to bound it")
    run = RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software={}, root=tmp_path))
    assert regression_failure(serial, run).startswith("a: cuDNN kernels overlapped less than in any stored process")


def test_a_drop_of_kernel_overlap_on_a_slower_host_is_ambiguous_and_a_step_that_never_overlapped_is_not_judged() -> None:
    """The same drop with the host probe 25% slower than every stored process's: ambiguous, the case passes. Kernels
    that never ran at once (summed kernel time = busy time) have no overlap to lose: no comparison."""
    history = [summarize(probed(record("a", 9.0, seed=i, cudnn_dev_ms=5.5 * (1 + d), cudnn_work_ms=7.0 / (1 + d)),
                                2.0), f"process {i}") for i, d in enumerate((0.02, -0.03, 0.04, -0.02, 0.0))]
    slow = judge(probed(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0), 2.0),
                 probed(record("a", 9.0, seed=42, cudnn_dev_ms=5.5 * 1.057, cudnn_work_ms=7.0 * 0.901), 2.5),
                 history=history)
    assert slow is not None and slow.overlap is not None and slow.overlap.verdict is Verdict.AMBIGUOUS
    assert "on a host slower than any stored (probe +25.0%)" in slow.overlap.explain() and not slow.overlap_regressed
    flat = [summarize(record("a", 9.0, seed=i, cudnn_dev_ms=5.5, cudnn_work_ms=5.5), f"p{i}") for i in range(5)]
    one_stream = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=5.5),
                       record("a", 9.0, seed=42, cudnn_dev_ms=5.8, cudnn_work_ms=5.5), history=flat)
    assert one_stream is not None and one_stream.overlap is None


# (host probe ms, kernel overlap) of the H100 torch LSTM-bi case's clean processes with a probe, tonight's included.
H100_OVERLAP_BY_PROBE = ((2.1, 1.432), (1.78, 1.476), (1.79, 1.354), (3.99, 1.294), (3.33, 1.357), (4.0, 1.254))


def _overlap_history(pairs: tuple[tuple[float, float], ...], unprobed: int = 6) -> list[ProcessSummary]:
    """Clean processes of case "a" overlapping as ``pairs`` say at their probe, and ``unprobed`` more at 1.20-1.50."""
    probed_ones = [summarize(probed(record("a", 9.0, seed=i, cudnn_dev_ms=5.5, cudnn_work_ms=5.5 * ov), ms),
                             f"process {i}") for i, (ms, ov) in enumerate(pairs)]
    return probed_ones + [summarize(record("a", 9.0, seed=50 + i, cudnn_dev_ms=5.5, cudnn_work_ms=5.5 * ov), f"old {i}")
                          for i, ov in enumerate((1.20, 1.21, 1.28, 1.32, 1.35, 1.50)[:unprobed])]


def _overlap_now(overlap: float, probe_ms: float, history: list[ProcessSummary]) -> CaseVerdict:
    """Tonight's verdict of case "a" overlapping ``overlap`` on a host whose probe read ``probe_ms``."""
    verdict = judge(probed(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0), 2.0),
                    probed(record("a", 9.0, seed=42, cudnn_dev_ms=5.5, cudnn_work_ms=5.5 * overlap), probe_ms),
                    history=history)
    assert verdict is not None and verdict.overlap is not None
    return verdict


def test_serialized_directions_fail_on_a_host_slower_than_any_stored_one_by_the_history_s_own_slope() -> None:
    """The second H100 of 2026-11-26: probe 4.51 ms, 13% past the slowest stored. Stored overlap falls with the probe,
    so the least (1.20) is lowered by that slope over 0.51 ms; the serialized LSTM (1.07) still falls 5% below it,
    while the same host's unserialized run (1.25) passes."""
    history = _overlap_history(H100_OVERLAP_BY_PROBE)
    serial = _overlap_now(1.07, 4.51, history)
    assert serial.overlap.verdict is Verdict.REGRESSED and serial.fails
    assert "on a host slower than any stored (probe +12.7%), lowered by 0.04: stored overlap falls 0.084 per ms" in serial.overlap.why
    assert "per ms of probe" in serial.overlap.why and serial.overlap.baseline_median < 1.20
    assert _overlap_now(1.25, 4.51, history).overlap.verdict is Verdict.UNCHANGED
    assert _overlap_now(1.07, 3.9, history).overlap.why.startswith("against their least, 1.20; median")


def test_a_host_slow_enough_for_the_history_s_slope_to_explain_the_drop_passes_and_an_unknown_slope_is_ambiguous(
        ) -> None:
    """Overlap that fell 0.1 per ms of probe in the history: a host 3 ms slower than any stored may overlap 0.3 less,
    so 1.07 passes. With every stored probe alike, the slope is unknown and the drop is ambiguous."""
    steep = tuple((ms, 1.60 - 0.1 * ms) for ms in (1.8, 2.0, 2.5, 3.0, 3.5, 4.0))
    slow = _overlap_now(1.07, 7.0, _overlap_history(steep))
    assert slow.overlap.verdict is not Verdict.REGRESSED and not slow.fails
    assert "lowered by 0.30: stored overlap falls 0.100 per ms of probe" in slow.overlap.why
    alike = _overlap_now(1.07, 4.51, _overlap_history(tuple((2.0, ov) for ov in (1.3, 1.4, 1.25, 1.45))))
    assert alike.overlap.verdict is Verdict.AMBIGUOUS and not alike.fails
    assert "too few stored probes to say how much less it overlaps" in alike.overlap.why


def _two_kernels(seed: int, gemm_ms: float, cell_ms: float, n: int = 8, sigma: float = 0.002) -> CaseRecord:
    """A record whose step runs a GEMM and a cuDNN cell kernel one after the other (busy = their sum), each round
    ``sigma`` apart (0.2%), with the kernels' own rounds kept."""
    from pytest_rnnperf.model.timing import DeviceTiming, Measurement

    rng = np.random.default_rng(seed + 500)
    gemm = tuple(gemm_ms / 1e3 * rng.lognormal(0, sigma, n))
    cell = tuple(cell_ms / 1e3 * rng.lognormal(0, sigma, n))
    step = tuple(g + c for g, c in zip(gemm, cell))
    dev = DeviceTiming(busy=Measurement("cudnn", step, 4, timer="device"),
                       work=Measurement("cudnn", step, 4, timer="device-work"), launches_per_step=2.0,
                       kernels=(KernelStat("sgemm_128x128", gemm_ms, 1.0), KernelStat("LSTM_elementWise_fp", cell_ms, 1.0)),
                       kernel_rounds={"sgemm_128x128": gemm, "LSTM_elementWise_fp": cell})
    return record("a", 9.0, seed=seed, cudnn_device=dev)


def _two_speed_gemm(n: int = 15) -> list[ProcessSummary]:
    """As the H100's T60-B4700 LSTM: a GEMM at 3.2, 3.7 or 4.5 ms by process, the cell kernel within 0.3% (3.0 ms)."""
    return [summarize(_two_kernels(i, (3.2, 3.7, 4.5)[i % 3], 3.0 * (1 + 0.003 * ((i % 5) - 2) / 2)), f"process {i}")
            for i in range(n)]


def test_a_slowdown_of_the_steady_kernels_fails_where_a_two_speed_gemm_hides_it_in_the_busy_time() -> None:
    """The cell kernel 5% slower moves the step 2%, inside the busy time's 14% spread: the steady kernels regress,
    the case fails, and the failure says so with what they cover."""
    from pytest_rnnperf.report.rows import deciding

    history = _two_speed_gemm()
    slower = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(90, 3.7, 3.0 * 1.05), history=history)
    assert slower is not None and slower.time.verdict is not Verdict.REGRESSED and slower.time.min_effect > 0.1
    assert slower.steady is not None and slower.steady.verdict is Verdict.REGRESSED and slower.fails
    assert slower.steady.min_effect == pytest.approx(0.03 - 1.645 * 0.005) and deciding(slower) is slower.steady
    assert slower.steady.metric == "cudnn steady time" and slower.steady.why.startswith("1 steady kernel, 4")


def test_steady_kernels_ambiguous_on_one_window_are_timed_once_more_and_both_windows_decide() -> None:
    """The cell kernel 4% slower over four noisy rounds: the steady interval straddles its line while busy time holds,
    so the case is ambiguous, says so on its steady kernels, and is timed once more; the pooled eight rounds call it
    regressed. Unchanged steady kernels are not timed again."""
    from pytest_rnnperf.report.rows import deciding

    history = _two_speed_gemm()
    first = _two_kernels(91, 3.7, 3.0 * 1.04, n=4, sigma=0.012)
    alone = judge(_two_kernels(1, 3.7, 3.0), first, history=history)
    assert alone is not None and alone.time.verdict is Verdict.UNCHANGED and alone.verdict is Verdict.AMBIGUOUS
    assert alone.steady is not None and alone.steady.verdict is Verdict.AMBIGUOUS and alone.undecided
    assert str(alone.outcome) == "ambiguous" and deciding(alone) is alone.steady and not alone.fails
    windows: list[int] = []

    def remeasure() -> CaseRecord:
        windows.append(1)
        return _two_kernels(191, 3.7, 3.0 * 1.04, n=4, sigma=0.012)

    _, pooled = judge_remeasuring(_two_kernels(1, 3.7, 3.0), first, remeasure, history=history)
    assert windows == [1] and pooled is not None and pooled.remeasured
    assert pooled.steady is not None and pooled.steady.verdict is Verdict.REGRESSED and pooled.fails
    held = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(91, 3.7, 3.0), history=history)
    assert held is not None and not held.undecided


def test_the_two_speed_gemm_at_its_slowest_speed_fails_nothing_on_the_steady_kernels() -> None:
    """The GEMM at the speed a third of the history ran: the steady kernels held, and so the case passes."""
    quiet = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(91, 4.5, 3.0), history=_two_speed_gemm())
    assert quiet is not None and quiet.steady is not None and quiet.steady.verdict is Verdict.UNCHANGED
    assert not quiet.fails


def _fast_and_slow_gemm(slow_sources: list[str]) -> list[ProcessSummary]:
    """As the H100's T60-B4700 LSTM over 62 stored runs: its GEMM at 3.7 ms in ten runs and at 5.3 ms in the
    processes named ``slow_sources``, every third process from the fourth on; the cell kernel within 0.3% (3.0 ms)."""
    fast = [summarize(_two_kernels(i, 3.7, 3.0 * (1 + 0.001 * (i % 3))), f"{i:04d}_run.json") for i in range(10)]
    slow = [summarize(_two_kernels(50 + i, 5.3, 3.0 * (1 + 0.001 * (i % 3))), source)
            for i, source in enumerate(slow_sources)]
    for i, process in enumerate(slow):  # the speeds alternate by process, as they did: no step in the series
        fast.insert(3 + 3 * i, process)
    return fast


def test_a_night_at_a_slower_speed_its_gemm_ran_in_stored_runs_fails_nothing_and_says_so() -> None:
    """The GEMM at 5.3 ms, as in 5 of 15 stored runs: +23% on the busy time's median, beyond its threshold, yet at
    a speed the history knows: busy time unchanged with the reason, no kernel named, the case passes."""
    history = _fast_and_slow_gemm([f"{20 + i:04d}_run.json" for i in range(5)])
    night = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(91, 5.3, 3.0), history=history)
    assert night is not None and night.time.ratio.estimate > 1 + night.time.min_effect
    assert night.time.verdict is Verdict.UNCHANGED and not night.regressed_kernels and not night.fails
    assert night.time.why == "at a speed 5 of the 15 stored processes ran, +23.8% on their median"


def test_a_slower_speed_seen_in_one_stored_run_alone_is_no_speed_and_the_night_fails_on_its_gemm() -> None:
    """The same night against a history whose slow GEMM came from one run's three processes: regressed."""
    history = _fast_and_slow_gemm(["0020_baseline.json", "0020_baseline.json#2", "0020_baseline.json#3"])
    night = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(91, 5.3, 3.0), history=history)
    assert night is not None and night.fails and not night.time.why
    assert [k.metric for k in night.regressed_kernels] == ["kernel/sgemm_128x128"]


@pytest.mark.parametrize("gemm_ms", [4.45, 6.4])
def test_a_gemm_between_its_stored_speeds_or_beyond_the_slowest_still_fails(gemm_ms: float) -> None:
    """The GEMM at 4.45 ms (+0.75 ms on the fast speed, 11% of the step) or at 6.4 ms (+1.1 ms on the slow one):
    at no stored speed, so named and failed."""
    history = _fast_and_slow_gemm([f"{20 + i:04d}_run.json" for i in range(5)])
    night = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(91, gemm_ms, 3.0), history=history)
    assert night is not None and night.fails
    assert [k.metric for k in night.regressed_kernels] == ["kernel/sgemm_128x128"]


def test_steady_kernels_are_judged_across_processes_only_and_the_sensitivity_says_what_they_cover() -> None:
    """One record against one: no such comparison. The history above resolves 3% on its steady kernels, not on
    its busy time, and says what share of the kernel time those are."""
    from pytest_rnnperf.judge.policy import Policy as Thresholds
    from pytest_rnnperf.judge.sensitivity import sensitivity

    one = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(2, 3.7, 3.0 * 1.05))
    assert one is not None and one.steady is None
    found = sensitivity("a", _two_speed_gemm(), Thresholds())
    assert (found.metric, found.smallest) == ("steady", 0.03)
    assert found.status == "resolves 3% on its steady kernels (45% of its kernel time)"


def test_a_kernel_at_two_speeds_in_a_few_processes_is_no_steady_kernel_however_small_its_median_deviation() -> None:
    """As the H100 history's GRU GEMM: 2.7 ms in most processes, 3.2 ms in a third. Its median deviation reads
    under 1%; the logs' deviation does not, so only the cell kernel is steady (a folded row never is)."""
    from pytest_rnnperf.judge.across import steady_kernels
    from pytest_rnnperf.model.process import FOLDED

    history = [ProcessSummary("a", f"p{i}", {"kernel/gemm": 0.0032 if i % 3 == 0 else 0.0027,
                                             "kernel/cell": 0.0050 * (1 + 0.001 * (i % 2)), "kernel/" + FOLDED: 1e-4})
               for i in range(12)]
    assert steady_kernels(history) == ["cell"]


def test_the_summary_counts_the_cases_that_catch_the_floor_and_how_many_on_their_steady_kernels() -> None:
    """One case judged across processes catches 3% 19 times in 20 on its steady kernels; one called at 3% on busy and
    kernel time together catches 3.8% so, one whose busy time decides at 3.3% 4.1%; one judged against a single
    record is not counted."""
    from pytest_rnnperf.report.rows import resolution_line

    steady = judge(_two_kernels(1, 3.7, 3.0), _two_kernels(92, 3.7, 3.0), history=_two_speed_gemm())
    together = judge(record("a", 9.0, seed=1, cudnn_dev_ms=5.5, cudnn_work_ms=7.0),
                     record("a", 9.0, seed=41, cudnn_dev_ms=5.5, cudnn_work_ms=7.0), history=_overlapping())
    single = judge(record("a", 1.0, seed=5, cudnn_dev_ms=0.8), record("a", 1.0, seed=6, cudnn_dev_ms=0.8))
    assert steady is not None and together is not None and single is not None
    coarse = replace(steady, comparisons={"cudnn_time": replace(steady.time, min_effect=0.033, noise=0.005)})
    assert resolution_line([steady, together, single, coarse]) == (
        "sensitivity: 1 of 3 case(s) judged across processes catch 3.0% 19 times in 20 (1 of them on their steady "
        "kernels); the rest 3.8%-4.1% (python -m pytest_rnnperf sensitivity says why)")
    assert resolution_line([single]) == ""
    close = replace(steady, comparisons={"cudnn_time": replace(steady.time, min_effect=0.0222, noise=0.005)})
    assert "catch 3.0% 19 times in 20 (1 of them on their steady kernels); the rest 3.04%-3.8% (" in \
        resolution_line([steady, together, close])
