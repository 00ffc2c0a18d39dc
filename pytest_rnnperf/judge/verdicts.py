"""The regression rule, in one place: thresholds and their defaults, the statistic, re-measuring, outcomes.

A case is judged against the stored baseline of this GPU model:

- ``compare`` puts a bootstrap interval on the ratio of medians (current / baseline) and runs a two-sided
  Mann-Whitney test on the raw samples. Regressed or improved needs the whole interval beyond the threshold's
  band *and* p < ``alpha``; unchanged needs the whole interval inside the band; anything else is ambiguous,
  and an ambiguous case is timed once more and decided on both windows' rounds (``judge_remeasuring``).
- Where both runs have device time (CUPTI), the cuDNN side's device time decides, at ``device_min_effect``
  (or at the case's own between-process noise measured by null runs, where higher: ``noise``) and on its
  estimate (the whole interval on the worse side of no change is enough, see ``compare``): it is what cuDNN,
  the driver and the GPU did, and it does not drift with the host. Busy time (the union of kernel intervals)
  is what the step waits for, but it also moves when concurrent kernels overlap differently; a busy-time
  regression whose summed kernel time did not regress too is flagged ``OVERLAP`` and reported, not failed.
  The host overhead (wall minus device time per step: dispatch, launches, host work the GPU waited for) gets
  its own verdict at
  ``host_effect``, where it is at least ``host_share`` of the baseline's wall step, and a regression there is
  named as such (a slower driver launch path or framework dispatch shows up here, not in device time). It
  fails the case only with ``fail_host``: host time drifts with the runner (up to 2x between null runs on a
  lent H100 VM), so by default it is reported, never failed.
- Where either run has no device time (an older baseline, a runner without cupti-python), the wall time
  decides, as before device time: at ``min_effect``, or at ``host_bound_effect`` for a case that kept the GPU
  busy less than ``host_bound_below`` of its timed rounds; such a case whose cuDNN time regressed while its
  speedup held is flagged ``HOST_SLOWED`` (both sides slowed alike) instead of failing.
- A regression in a window flagged by the telemetry (throttled clocks, a process that appeared on the GPU)
  is reported, not failed.

The speedup is compared too and reported: it also moves when the generic side changes, and the case's
floor guards it. The thresholds' defaults come from null runs on lent GPUs (baselines/*/evidence/README.md).
Change the rule here and in tests/unit/test_verdicts.py; nothing else decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Interval, as_positive_array, ratio_interval

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.records import CaseRecord, StoredRun


@dataclass(frozen=True)
class Policy:
    """Thresholds of the rule; the defaults are the ones the command line and the ini file start from."""

    min_effect: float = 0.05  # wall time: smallest relative change that counts (0.05 = 5%)
    host_bound_effect: float = 0.35  # wall time of host-bound cases
    host_bound_below: float = 0.5  # GPU-busy fraction under which a case counts as host-bound
    device_min_effect: float = 0.03  # device time
    host_effect: float = 0.5  # host overhead (wall minus device time)
    host_share: float = 0.2  # host overhead is judged where it is at least this share of the wall step
    fail_host: bool = False  # a host overhead regression fails the case (else it is reported by name)
    alpha: float = 0.01  # significance level of the Mann-Whitney test
    confidence: float = 0.95  # of the bootstrap intervals
    # Case id -> device-time threshold measured for that case on this GPU model (see ``noise``); a case
    # without one is judged at device_min_effect, and none is judged below it.
    device_effects: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse thresholds that would make every verdict meaningless (0, negative, inf, nan)."""
        for name in ("min_effect", "host_bound_effect", "device_min_effect", "host_effect"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for case_id, value in self.device_effects.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"device threshold of {case_id} must be a finite number > 0, got {value!r}")
        for name in ("host_bound_below", "host_share", "alpha", "confidence"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < 1):
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")


    def device_effect(self, case_id: str) -> float:
        """The device-time threshold of one case: its measured one where larger than ``device_min_effect``."""
        return max(self.device_min_effect, self.device_effects.get(case_id, 0.0))


class _Word(str, Enum):
    """An enum that prints as its plain value ("regressed"), for messages and JSON."""

    def __str__(self) -> str:
        """The plain value."""
        return self.value


class Verdict(_Word):
    """Outcome of comparing current samples with a baseline."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    AMBIGUOUS = "ambiguous"


class Outcome(_Word):
    """A case's verdict as summaries count it: a regression in an untrusted window does not fail."""

    REGRESSED = "regressed"
    REGRESSED_NOT_FAILED = "regressed (not failed)"
    HOST_REGRESSED = "host overhead regressed"
    HOST_REGRESSED_NOT_FAILED = "host overhead regressed (not failed)"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    AMBIGUOUS = "ambiguous"


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
            f"({p}, threshold {self.min_effect * 100:.3g}%): {self.verdict.value}"
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run's report."""
        return {"verdict": str(self.verdict), "ratio": self.ratio.estimate, "low": self.ratio.low,
                "high": self.ratio.high, "p_value": self.p_value, "baseline_median": self.baseline_median,
                "current_median": self.current_median, "min_effect": self.min_effect, "explain": self.explain(),
                "metric": self.metric, "confidence": self.ratio.confidence, "higher_is_better": self.higher_is_better,
                "alpha": self.alpha}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """The inverse of ``as_dict`` (a pytest-xdist worker's verdicts reach the controller this way)."""
        p_value = data.get("p_value")
        ratio = Interval(float(data["ratio"]), float(data["low"]), float(data["high"]), float(data.get("confidence", 0.95)))
        return cls(metric=str(data.get("metric", "")), baseline_median=float(data["baseline_median"]),
                   current_median=float(data["current_median"]), ratio=ratio,
                   p_value=None if p_value is None else float(p_value), min_effect=float(data["min_effect"]),
                   verdict=Verdict(data["verdict"]), higher_is_better=bool(data.get("higher_is_better", False)),
                   alpha=float(data.get("alpha", 0.01)))


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


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict of one case against its baseline: cuDNN time (decides), host overhead and speedup."""

    case_id: str
    time: Comparison  # the cuDNN side's device time, or its wall time where either run has no device time
    speedup: Comparison | None
    flags: tuple[WindowFlag, ...] = field(default=())  # why the window is not trusted; empty when clean
    remeasured: bool = False
    host_bound_busy: float | None = None  # the GPU-busy fraction when the host-bound wall threshold applied
    host: Comparison | None = None  # the cuDNN side's host overhead, where it is judged
    work: Comparison | None = None  # the cuDNN side's summed kernel time, beside its busy time
    basis: str = "device"  # "device", or "wall" where either run has no device time
    fail_host: bool = False  # a host overhead regression fails (Policy.fail_host)

    @property
    def verdict(self) -> Verdict:
        """The cuDNN-time verdict: what regresses when cuDNN gets slower (the speedup also moves with generic)."""
        return self.time.verdict

    @property
    def host_regressed(self) -> bool:
        """The host overhead of the cuDNN side regressed."""
        return self.host is not None and self.host.verdict is Verdict.REGRESSED

    @property
    def outcome(self) -> Outcome:
        """The verdict as counted: a regression in an untrusted window is "regressed (not failed)"."""
        if self.verdict is Verdict.REGRESSED or (self.host_regressed and self.flags):
            return Outcome.REGRESSED_NOT_FAILED if self.flags else Outcome.REGRESSED
        if self.host_regressed:
            return Outcome.HOST_REGRESSED if self.fail_host else Outcome.HOST_REGRESSED_NOT_FAILED
        return Outcome(self.verdict.value)

    @property
    def fails(self) -> bool:
        """Regressed in a clean window: the case's test fails (unless regressions are only reported)."""
        return self.outcome in (Outcome.REGRESSED, Outcome.HOST_REGRESSED)

    @property
    def moved(self) -> bool:
        """Regressed or improved, trusted or not (device/wall time or host overhead)."""
        return self.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) or self.host_regressed

    @property
    def flagged(self) -> str:
        """The flags' messages in one line (empty when the window is clean)."""
        return "; ".join(f.message for f in self.flags)

    @property
    def host_bound(self) -> str:
        """e.g. "host-bound: GPU busy 20%" when the wider wall threshold applied, else empty."""
        return "" if self.host_bound_busy is None else f"host-bound: GPU busy {self.host_bound_busy:.0%}"

    def host_line(self) -> str:
        """e.g. "launch/dispatch overhead +40% [+31%, +52%]: driver or framework" for a host regression."""
        if self.host is None:
            return ""
        r = self.host.ratio
        line = f"launch/dispatch overhead {_pct(r.estimate - 1)} [{_pct(r.low - 1)}, {_pct(r.high - 1)}]"
        return line + (": driver or framework" if self.host_regressed else f": {self.host.verdict}")

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run's report."""
        return {"case": self.case_id, "basis": self.basis, "verdict": str(self.verdict), "outcome": str(self.outcome),
                "regressed": self.fails, "flagged": self.flagged,
                "flags": [{"kind": f.kind.value, "message": f.message} for f in self.flags],
                "remeasured": self.remeasured, "host_bound": self.host_bound,
                "cudnn_time": self.time.as_dict(), "host_overhead": None if self.host is None else self.host.as_dict(),
                "speedup": None if self.speedup is None else self.speedup.as_dict(),
                "kernel_time": None if self.work is None else self.work.as_dict(),
                "host_bound_busy": self.host_bound_busy, "fail_host": self.fail_host}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseVerdict:
        """The inverse of ``as_dict`` (a pytest-xdist worker's verdicts reach the controller this way)."""
        def comparison(key: str) -> Comparison | None:
            return None if data.get(key) is None else Comparison.from_dict(data[key])

        time = comparison("cudnn_time")
        if time is None:
            raise ValueError(f"verdict of {data.get('case')!r} has no cudnn_time")
        busy = data.get("host_bound_busy")
        return cls(case_id=str(data["case"]), time=time, speedup=comparison("speedup"),
                   flags=tuple(WindowFlag(FlagKind(f["kind"]), str(f["message"])) for f in data.get("flags", ())),
                   remeasured=bool(data.get("remeasured", False)), host_bound_busy=None if busy is None else float(busy),
                   host=comparison("host_overhead"), work=comparison("kernel_time"),
                   basis=str(data.get("basis", "device")), fail_host=bool(data.get("fail_host", False)))


def _host_samples(record: CaseRecord) -> tuple[float, ...] | None:
    """The cuDNN side's host overhead per wall round (wall sample minus the device median), if all positive."""
    if record.cudnn is None or record.cudnn_device is None:
        return None
    device = record.cudnn_device.busy.median
    samples = tuple(s - device for s in record.cudnn.samples)
    return samples if all(s > 0 for s in samples) else None


def judge(baseline: CaseRecord, current: CaseRecord, policy: Policy = Policy(),
          remeasured: bool = False) -> CaseVerdict | None:
    """Verdict of one case (None when either side has no cuDNN timing to compare)."""
    if baseline.cudnn is None or current.cudnn is None:
        return None
    options: dict[str, Any] = dict(alpha=policy.alpha, confidence=policy.confidence)
    busy = [b for b in (baseline.gpu_busy, current.gpu_busy) if b is not None]
    host_bound = bool(busy) and min(busy) < policy.host_bound_below
    wall_effect = max(policy.min_effect, policy.host_bound_effect) if host_bound else policy.min_effect
    speed_cmp = None
    if baseline.round_speedups and current.round_speedups:
        speed_cmp = compare("speedup", baseline.round_speedups, current.round_speedups, higher_is_better=True,
                            min_effect=wall_effect, **options)
    flags = current.flags + tuple(f for f in current.device_flags if f not in current.flags)
    if baseline.cudnn_device is not None and current.cudnn_device is not None:
        # Device time is called on its estimate: within one process it is steady to well under the threshold,
        # so the whole-interval rule would leave a true shift just past it ambiguous (evidence README: 5% spin).
        device_options = dict(options, whole_interval=False, min_effect=policy.device_effect(current.id))
        time_cmp = compare("cudnn device time", baseline.cudnn_device.busy.samples,
                           current.cudnn_device.busy.samples, **device_options)
        work_cmp = compare("cudnn kernel time", baseline.cudnn_device.work.samples, current.cudnn_device.work.samples,
                           **device_options)
        if time_cmp.verdict is Verdict.REGRESSED and work_cmp.verdict is not Verdict.REGRESSED:
            flags = flags + (WindowFlag(FlagKind.OVERLAP, f"kernels overlapped differently: busy "
                                        f"{_pct(time_cmp.ratio.estimate - 1)}, summed kernel time "
                                        f"{_pct(work_cmp.ratio.estimate - 1)} ({work_cmp.verdict})"),)
        host_cmp = None
        base_host, cur_host = _host_samples(baseline), _host_samples(current)
        if base_host and cur_host and float(np.median(base_host)) >= policy.host_share * baseline.cudnn.median:
            host_cmp = compare("cudnn host overhead", base_host, cur_host, min_effect=policy.host_effect, **options)
        return CaseVerdict(current.id, time_cmp, speed_cmp, flags=flags, remeasured=remeasured, host=host_cmp,
                           fail_host=policy.fail_host, work=work_cmp)
    time_cmp = compare("cudnn time", baseline.cudnn.samples, current.cudnn.samples, min_effect=wall_effect, **options)
    if (host_bound and time_cmp.verdict is Verdict.REGRESSED and speed_cmp is not None
            and speed_cmp.verdict in (Verdict.UNCHANGED, Verdict.IMPROVED)):
        # Both sides are host-bound and timed interleaved in one window: a slower host slows both alike and
        # the speedup holds, while a slower cuDNN path moves the speedup.
        change = f"{round((speed_cmp.ratio.estimate - 1) * 100):+d}%"  # rounded first: never "-0%"
        flags = flags + (WindowFlag(FlagKind.HOST_SLOWED, f"the host slowed both sides alike: speedup {change}, "
                                                          f"{speed_cmp.verdict}"),)
    return CaseVerdict(current.id, time_cmp, speed_cmp, flags=flags, remeasured=remeasured,
                       host_bound_busy=min(busy) if host_bound else None, basis="wall")


def judge_remeasuring(baseline: CaseRecord, current: CaseRecord, remeasure: Callable[[], CaseRecord],
                      policy: Policy = Policy()) -> tuple[CaseRecord, CaseVerdict | None]:
    """Judge; an ambiguous case is timed once more (``remeasure``) and both windows' rounds, pooled, decide.

    Pooling rather than replacing: a true shift near the threshold leaves the interval across the band edge
    in either window alone; twice the rounds narrow it.
    """
    verdict = judge(baseline, current, policy)
    if verdict is not None and verdict.verdict is Verdict.AMBIGUOUS:
        current = current.pooled_with(remeasure())
        verdict = judge(baseline, current, policy, remeasured=True)
    return current, verdict


def compare_runs(old: StoredRun, new: StoredRun, policy: Policy = Policy()) -> list[CaseVerdict]:
    """Verdicts for every case the two runs share, in the new run's order."""
    out = []
    for case_id, record in new.records.items():
        if case_id in old.records:
            verdict = judge(old.records[case_id], record, policy)
            if verdict is not None:
                out.append(verdict)
    return out
