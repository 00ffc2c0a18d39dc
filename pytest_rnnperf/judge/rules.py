"""The rule as objects: each rule compares one metric of a case with its baseline; findings flag the window.

``judge`` (verdicts.py) runs every rule of ``RULES`` on a ``Context`` and keeps each comparison under the
rule's name, then asks each finding of ``FINDINGS`` whether the comparisons together say the window is not to
be trusted. A new rule is one class here (a ``name``, its ``params`` and a ``compare``) in ``RULES``, and its
test: each threshold it declares (``params.Threshold``) becomes a value of ``Policy`` and, where ``option``, a
pytest option, an ini key, a ``compare`` flag and a row of docs/options.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from pytest_rnnperf.judge import across as xp
from pytest_rnnperf.judge.compare import Comparison, Verdict, compare, pct
from pytest_rnnperf.judge.gates import GATES
from pytest_rnnperf.judge.params import FRACTION, Threshold, Thresholds
from pytest_rnnperf.judge.steady import SteadyMix, steady_series
from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.metrics import BALANCED, COMPILE, FIRST_CALL, METRICS, OVERLAP, STEADY, metric, side_tag
from pytest_rnnperf.model.process import BUSY, HOST, PROBE, SPEEDUP, WALL, WORK, ProcessSummary, summarize
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.stats import Interval


# What every rule shares (``Context``): how a comparison is called, and when a history judges a case.
ALPHA = Threshold("alpha", float, 0.01, FRACTION, "significance level of the Mann-Whitney test", low=0, high=1,
                  option=False)
CONFIDENCE = Threshold("confidence", float, 0.95, FRACTION, "confidence of the bootstrap intervals", low=0, high=1,
                       option=False)
MIN_PROCESSES = Threshold("min_processes", int, 3, "processes", "stored processes a case's history needs before it "
                          "is judged across processes (fewer: against its newest stored record alone); also the "
                          "stored processes a kernel mix, and stored runs a slower speed, needs before a night in it "
                          "passes", low=2,
                          strict=False)
HISTORY_K = Threshold("history_k", float, 4.0, "times the noise", "across processes, a change must exceed this many "
                      "times the history's own between-process noise", low=0, option=False)
# A night's violation can be the runner's (a slow host, a neighbour): with N > 1 it is suspect until it repeats.
CONFIRM_NIGHTS = Threshold("confirm_nights", int, 1, "nights", "stored nights running a case's regression must "
                           "show on before it fails (1: tonight decides; 2: its first night is reported as suspect and named "
                           "in the night's kept run, --rnnperf-keep-run, and the next night that regresses too fails); "
                           "path, parity and floor gates fail at once",
                           low=1, strict=False)
JUDGING: tuple[Threshold, ...] = (ALPHA, CONFIDENCE, MIN_PROCESSES, HISTORY_K, CONFIRM_NIGHTS)

# Thresholds are fractions (0.05) or percents ("5%"); a bare 5 is refused where users type them.
MIN_EFFECT = Threshold("min_effect", float, 0.05, FRACTION, "smallest change of the cuDNN wall time that counts as a "
                       "regression or improvement where either run has no device time (0.05 or 5%)", low=0)
HOST_BOUND_EFFECT = Threshold("host_bound_effect", float, 0.35, FRACTION, "wall-time threshold for cases that kept "
                              "the GPU busy less than half the time, where either run has no device time", low=0)
HOST_BOUND_BELOW = Threshold("host_bound_below", float, 0.5, FRACTION, "GPU-busy fraction under which a case counts "
                             "as host-bound", low=0, high=1, option=False)
WALL_TIME: tuple[Threshold, ...] = (MIN_EFFECT, HOST_BOUND_EFFECT, HOST_BOUND_BELOW)
DEVICE_EFFECT = Threshold("device_effect", float, 0.03, FRACTION, "smallest change of the cuDNN device time that "
                          "counts as a regression or improvement (0.03 or 3%)", low=0)
# Host overhead (wall minus device time): over ten H100 processes of one case it ranged 2-8x, a tail no robust
# noise estimate of a few processes sees; what a driver or framework does to dispatch doubles it or worse.
HOST_EFFECT = Threshold("host_effect", float, 1.0, FRACTION, "smallest change of the host overhead (wall minus "
                        "device time) that counts as a regression (100%: doubled; write 50% for half)", low=0)
HOST_SHARE = Threshold("host_share", float, 0.2, FRACTION, "host overhead is judged where it is at least this share "
                       "of the wall step", low=0, high=1, option=False)
# Cold costs (a side's first call after build, a compile) move by tens of percent between processes of one case;
# what a library or compiler adds there (~1.6 s of cuDNN plan finalization) doubles them or worse.
COLD_EFFECT = Threshold("cold_effect", float, 1.0, FRACTION, "smallest change of a cold cost (a side's first call "
                        "after build, the compile time), judged across processes, that counts as a regression (100%: "
                        "doubled; write 50% for half)", low=0)
# A first call moves by tens of ms with the case's place in the run and the runner's caches, a JAX program loaded
# from the compile cache by hundreds (0.17-0.40 s over six H100 nights: 0.2 s failed a null night); what users feel
# (a new cuDNN's plan building) is seconds (the H100 evidence README, 2026-11-26 and 2026-11-27).
COLD_FLOOR = Threshold("cold_floor", float, 0.5, "seconds", "smallest growth of a cold cost in seconds that counts "
                       "as a regression, whatever its percentage (0: none)", low=0, strict=False)
# No stored H100 process of any case overlapped 5% less than the least of the others (scripts/replay_history.py).
OVERLAP_EFFECT = Threshold("overlap_effect", float, 0.05, FRACTION, "smallest drop of the cuDNN side's kernel overlap "
                           "(summed kernel time over busy time) below the least of its stored processes that counts as "
                           "lost concurrency (0.05 or 5%)", low=0)
# The least of few processes bounds little (the JAX bidirectional LSTM's first nights): a drop fails only against
# at least this many.
OVERLAP_HISTORY = 10
FAIL_HOST = Threshold("fail_host", bool, False, "", "fail a case whose host overhead regressed (off: reported by "
                      "name; host time drifts with the runner)")


@dataclass(frozen=True)
class Context:
    """What every rule may read: the case's newest stored record, its history, this run's record, the policy."""

    baseline: CaseRecord
    current: CaseRecord
    policy: Thresholds  # a policy.Policy, made from this module's declarations
    # Every stored process of the case since its newest recorded baseline, oldest first (``store.history``).
    history: Sequence[ProcessSummary] = field(default=())

    @property
    def across(self) -> bool:
        """The history has enough processes to judge this one against their spread (else one record decides)."""
        return len(self.history) >= self.policy.min_processes

    @cached_property
    def summary(self) -> ProcessSummary:
        """This process's medians."""
        return summarize(self.current, "this run")

    @cached_property
    def processes(self) -> list[ProcessSummary]:
        """The history's processes of this process's nearest kernel mode (the clean ones where that mode is not known)."""
        return xp.nearest_mode(self.history, self.summary, self.policy.min_processes)

    def past(self, metric: str, every: bool = False) -> list[float] | None:
        """The process medians of ``metric`` (> 0) of this process's nearest mode (``every``: of the whole history,
        reported processes included), where at least ``min_processes`` measured it."""
        values = [v for s in (self.history if every else self.processes) if (v := s.get(metric)) is not None and v > 0]
        return values if len(values) >= self.policy.min_processes else None

    def across_options(self, floor: float, **extra: Any) -> dict[str, Any]:
        """The keyword arguments of ``across`` every rule shares."""
        return dict(floor=floor, k=self.policy.history_k, confidence=self.policy.confidence, **extra)

    def speeds(self, *metrics: str) -> dict[str, Any]:
        """The keyword arguments of ``across`` that let a process at a slower speed its history knows pass
        (``across.stored_speed``): the stored file of each value ``past`` gives (each process that measured all of
        ``metrics``), and the stored runs a speed needs."""
        sources = [s.source for s in self.processes if all((s.get(m) or 0.0) > 0 for m in metrics)]
        return dict(sources=sources, min_runs=self.policy.min_processes)

    @property
    def busy(self) -> list[float]:
        """The GPU-busy fractions of the two runs' timed rounds, where known."""
        return [b for b in (self.baseline.gpu_busy, self.current.gpu_busy) if b is not None]

    @property
    def host_bound(self) -> bool:
        """Either run kept the GPU busy less than ``host_bound_below`` of its timed rounds."""
        return bool(self.busy) and min(self.busy) < self.policy.host_bound_below

    @property
    def wall_effect(self) -> float:
        """The wall-time threshold: wider for host-bound cases, whose wall time drifts with the host."""
        p = self.policy
        return max(p.min_effect, p.host_bound_effect) if self.host_bound else p.min_effect

    @property
    def device(self) -> bool:
        """Both runs have the cuDNN side's device time, which then decides."""
        return self.baseline.cudnn_device is not None and self.current.cudnn_device is not None

    def options(self, **extra: Any) -> dict[str, Any]:
        """The keyword arguments of ``compare`` every rule shares."""
        return dict(alpha=self.policy.alpha, confidence=self.policy.confidence, **extra)

    def device_options(self) -> dict[str, Any]:
        """Device time is called on its estimate at the case's own threshold (see ``compare``).

        Within one process it is steady to well under the threshold, so the whole-interval rule would leave a
        true shift just past it ambiguous.
        """
        return self.options(whole_interval=False, min_effect=self.policy.device_threshold(self.current.id))


class Rule(Protocol):
    """One comparison of a case with its baseline, stored in the verdict under ``name``."""

    @property
    def name(self) -> str:
        """The key of its comparison in the verdict and in rnnperf.json."""

    @property
    def params(self) -> tuple[Threshold, ...]:
        """The thresholds it reads from the policy (one declaration may serve several rules)."""

    def compare(self, ctx: Context) -> Comparison | None:
        """The comparison, or None where the rule does not apply to these two records."""


class Finding(Protocol):
    """A reason, read off the comparisons, not to blame a regression on the code."""

    def flag(self, ctx: Context, found: Mapping[str, Comparison]) -> WindowFlag | None:
        """The flag, or None."""


@dataclass(frozen=True)
class Speedup:
    """The per-round speedup: reported, never failed (it moves with the generic side; the floor guards it)."""

    name: str = "speedup"
    params: tuple[Threshold, ...] = WALL_TIME

    def compare(self, ctx: Context) -> Comparison | None:
        """Round speedups, higher is better, at the wall threshold."""
        base, cur = ctx.baseline.round_speedups, ctx.current.round_speedups
        if ctx.across:
            past = ctx.past(SPEEDUP)
            return None if past is None or not cur else xp.across(
                METRICS[SPEEDUP].name, past, cur, **ctx.across_options(ctx.wall_effect, higher_is_better=True))
        if not (base and cur):
            return None
        return compare(METRICS[SPEEDUP].name, base, cur, higher_is_better=True, **ctx.options(min_effect=ctx.wall_effect))


@dataclass(frozen=True)
class DeviceTime:
    """The cuDNN side's device busy time per step: what decides where both runs have device time."""

    name: str = "cudnn_time"
    params: tuple[Threshold, ...] = (DEVICE_EFFECT,)

    def compare(self, ctx: Context) -> Comparison | None:
        """Busy time per step, per traced round."""
        base, cur = ctx.baseline.cudnn_device, ctx.current.cudnn_device
        if ctx.across:
            past = ctx.past(BUSY)
            return None if past is None or cur is None else xp.across(
                METRICS[BUSY].name, past, cur.busy.samples,
                **ctx.across_options(ctx.policy.device_effect, **ctx.speeds(BUSY)))
        if base is None or cur is None:
            return None
        return compare(METRICS[BUSY].name, base.busy.samples, cur.busy.samples, **ctx.device_options())


@dataclass(frozen=True)
class WallTime:
    """The cuDNN side's wall time per step: what decides where either run has no device time."""

    name: str = "cudnn_time"
    params: tuple[Threshold, ...] = WALL_TIME

    def compare(self, ctx: Context) -> Comparison | None:
        """Wall time per step, per round, at the wall threshold (wider when host-bound)."""
        if ctx.across:
            past, cur = ctx.past(WALL), ctx.current.cudnn
            if ctx.past(BUSY) is not None and ctx.current.cudnn_device is not None:
                return None  # device time decides
            return None if past is None or cur is None else xp.across(
                METRICS[WALL].name, past, cur.samples, **ctx.across_options(ctx.wall_effect, **ctx.speeds(WALL)))
        if ctx.device or ctx.baseline.cudnn is None or ctx.current.cudnn is None:
            return None
        return compare(METRICS[WALL].name, ctx.baseline.cudnn.samples, ctx.current.cudnn.samples,
                       **ctx.options(min_effect=ctx.wall_effect))


@dataclass(frozen=True)
class KernelTime:
    """The cuDNN side's summed kernel time per step (> busy where kernels overlap): the work, whatever the overlap."""

    name: str = "kernel_time"
    params: tuple[Threshold, ...] = (DEVICE_EFFECT,)

    def compare(self, ctx: Context) -> Comparison | None:
        """Summed kernel durations per step, per traced round."""
        base, cur = ctx.baseline.cudnn_device, ctx.current.cudnn_device
        if ctx.across:
            past = ctx.past(WORK)
            return None if past is None or cur is None else xp.across(
                METRICS[WORK].name, past, cur.work.samples,
                **ctx.across_options(ctx.policy.device_effect, **ctx.speeds(WORK)))
        if base is None or cur is None:
            return None
        return compare(METRICS[WORK].name, base.work.samples, cur.work.samples, **ctx.device_options())


def balanced(busy: float, work: float) -> float:
    """The geometric mean of a step's busy time and its summed kernel time (both > 0)."""
    return math.sqrt(busy * work)


def busy_and_work(ctx: Context, combine: Callable[[float, float], float],
                  processes: Sequence[ProcessSummary]) -> tuple[list[float], list[float]]:
    """``combine(busy, work)`` of each of ``processes``' medians, and of each of this process's traced rounds."""
    dev = ctx.current.cudnn_device
    past = [combine(b, w) for s in processes if (b := s.get(BUSY)) and (w := s.get(WORK))]
    now = [] if dev is None else [combine(b, w) for b, w in zip(dev.busy.samples, dev.work.samples) if b > 0 and w > 0]
    return past, now


@dataclass(frozen=True)
class BalancedTime:
    """The cuDNN side's busy and summed kernel time together, their geometric mean, judged across processes only.

    How much of a step's kernels overlap differs by process (the host launches them earlier or later): more
    overlap lowers the busy time and, through contention, raises the summed kernel time, so each alone spreads
    where their product holds (the H100 evidence README, scripts/replay_history.py). It fails a case beside busy
    time, never instead: a step that lost overlap still fails on busy time.
    """

    name: str = "balanced_time"
    params: tuple[Threshold, ...] = (DEVICE_EFFECT,)

    def compare(self, ctx: Context) -> Comparison | None:
        """Per traced round, the geometric mean of busy and summed kernel time, against the history's."""
        if not ctx.across:
            return None
        past, now = busy_and_work(ctx, balanced, ctx.processes)
        if len(past) < ctx.policy.min_processes or not now:
            return None
        return xp.across(METRICS[BALANCED].name, past, now,
                         **ctx.across_options(ctx.policy.device_effect, **ctx.speeds(BUSY, WORK)))


def steady_rounds(kernel_rounds: Mapping[str, Sequence[float]], summary: ProcessSummary, mix: SteadyMix) -> list[float]:
    """The steady time (``mix``) of each traced round, where every steady kernel has its rounds alike and nonzero;
    else that of the process's medians (``summary``: a record stored before rounds were kept), as one sample."""
    rounds = [kernel_rounds.get(n) or () for n in mix.names]
    if all(rounds) and len({len(r) for r in rounds}) == 1 and all(v > 0 for r in rounds for v in r):
        return [mix.time(dict(zip(mix.names, values))) for values in zip(*rounds)]
    return [mix.time(summary.kernels)]


@dataclass(frozen=True)
class SteadyTime:
    """The summed time of the cuDNN side's steady kernels (``across.steady_kernels``), judged across processes only.

    A kernel that runs at two speeds by process (a cuBLAS GEMM under cuDNN) spreads the step's busy time beyond what
    a 3% regression moves it, and so its balanced time too; the kernels beside it often hold within 1%. Their sum
    sees a 3% slowdown of those kernels (a uniform one of the whole step, a release that slows cuDNN's
    own elementwise kernels), where busy time could not; the two-speed kernels stay judged through busy time and the
    kernel rule. It fails a case beside busy time, never instead. Being that quiet, it is called below the floor
    (``across.Spread.catching``): a slowdown of the floor itself is caught 19 times in 20, not half the time. Over a
    history of ten processes or more their time weighed by each kernel's quiet (``judge.steady``) is judged too, and
    the worse of the two verdicts is the rule's.
    """

    name: str = "steady_time"
    params: tuple[Threshold, ...] = (DEVICE_EFFECT,)

    def compare(self, ctx: Context) -> Comparison | None:
        """Per traced round, the summed time of the kernels steady across the history that this process ran too."""
        dev = ctx.current.cudnn_device
        if not ctx.across or dev is None or len(ctx.processes) < ctx.policy.min_processes:
            return None
        now_kernels = ctx.summary.kernels
        names = [n for n in xp.steady_kernels(ctx.processes) if now_kernels.get(n, 0.0) > 0]
        if not names:
            return None
        share = xp.steady_time(ctx.summary, names) / (sum(now_kernels.values()) or 1.0)
        found = [self._judged(ctx, mix, past, steady_rounds(dev.kernel_rounds, ctx.summary, mix),
                              f"{share:.0%} of the summed kernel time")
                 for mix, past in steady_series(ctx.processes, names)]
        return max(found, key=lambda c: (_ORDER[c.verdict], c.ratio.estimate))

    @staticmethod
    def _judged(ctx: Context, mix: SteadyMix, past: Sequence[float], rounds: Sequence[float],
                share: str) -> Comparison:
        """This process's ``rounds`` of ``mix`` against the history's values of it (``past``)."""
        found = xp.across(METRICS[STEADY].name, past, rounds,
                          **ctx.across_options(ctx.policy.device_effect, catch=True))
        n = len(mix.names)
        weighed = "" if mix.weights is None else f", weighed by their quiet (at most {mix.largest:.0%} on one)"
        return replace(found, why=f"{n} steady kernel{'s' if n != 1 else ''}, {share}{weighed}; "
                                  f"{xp.reach(found):.1%} caught 19 times in 20")


# Of two comparisons of one rule, the one reported: a regression before an ambiguity before the rest.
_ORDER = {Verdict.REGRESSED: 3, Verdict.AMBIGUOUS: 2, Verdict.UNCHANGED: 1, Verdict.IMPROVED: 0}


@dataclass(frozen=True)
class KernelOverlap:
    """How many of the cuDNN side's kernels ran at once, against the least any clean stored process ran.

    Judged across processes only, where the history overlaps its kernels at all. A slower host overlaps them less,
    and the history's least overlap holds its slowest hosts; a release that runs a bidirectional RNN's directions
    one after the other overlaps them less than any of them, while busy time stays within its noise and the summed
    kernel time falls (the H100 evidence README, 2026-11-26, fifth and sixth). On a host slower than every stored
    one the least is lowered by the history's own slope of overlap over host probe (``host_allowance``); fewer than
    ``OVERLAP_HISTORY`` stored processes make a drop ambiguous.
    """

    name: str = "kernel_overlap"
    params: tuple[Threshold, ...] = (OVERLAP_EFFECT,)

    def compare(self, ctx: Context) -> Comparison | None:
        """Per traced round, summed kernel time over busy time, against the least of the history's processes."""
        if not ctx.across:
            return None
        clean = [s for s in ctx.history if not s.reported]
        past, now = busy_and_work(ctx, lambda b, w: w / b, clean)
        floor = ctx.policy.overlap_effect
        # A step whose kernels never ran at once (by more than the floor) has no concurrency to lose.
        if len(past) < ctx.policy.min_processes or not now or float(np.median(past)) < 1 + floor:
            return None
        allowance, host = host_allowance(ctx, clean)
        unknown = math.isinf(allowance)  # a host slower than any stored, by an effect the history cannot tell
        # A step cannot overlap less than not at all (1.0), however slow its host.
        least = max(1.0, min(past) - (0.0 if unknown else allowance))
        iv = xp.median_interval(now, ctx.policy.confidence)
        ratio = Interval(iv.estimate / least, iv.low / least, iv.high / least, iv.confidence)
        bound = 1 / (1 + floor)
        verdict = (Verdict.REGRESSED if ratio.high < bound else Verdict.UNCHANGED if ratio.low >= bound
                   else Verdict.AMBIGUOUS)
        why = f"against their least, {least:.2f}{', ' + host if host else ''}; median {float(np.median(past)):.2f}"
        if verdict is Verdict.REGRESSED and unknown:
            verdict = Verdict.AMBIGUOUS
        elif verdict is Verdict.REGRESSED and len(past) < OVERLAP_HISTORY:
            verdict, why = Verdict.AMBIGUOUS, (f"{why}; reported, not judged: {len(past)} stored processes, "
                                               f"{OVERLAP_HISTORY} are needed for their least to bound it")
        return Comparison(metric=METRICS[OVERLAP].name, baseline_median=least, current_median=iv.estimate, ratio=ratio,
                          p_value=None, min_effect=floor, verdict=verdict, higher_is_better=True, processes=len(past),
                          noise=xp.spread(past).noise, why=why)


def host_samples(record: CaseRecord) -> tuple[float, ...] | None:
    """The cuDNN side's host overhead per wall round (wall sample minus the device median), if all positive."""
    if record.cudnn is None or record.cudnn_device is None:
        return None
    device = record.cudnn_device.busy.median
    samples = tuple(s - device for s in record.cudnn.samples)
    return samples if all(s > 0 for s in samples) else None


@dataclass(frozen=True)
class HostOverhead:
    """Wall minus device time per step (dispatch, launches): judged where it is a real share of the step.

    Across processes its history is every stored process, reported ones included, and its noise sees the tail
    (``across``'s ``tails``): the dynamo-wrapped torch LSTM's overhead read 0.07-0.37 ms by H100 process, and a
    history that left out each process it reported learned only the low level and reported every other night.
    It is reported, not failed (unless ``fail_host``), so a night it reports is a sample of it, not a fault.
    """

    name: str = "host_overhead"
    params: tuple[Threshold, ...] = (HOST_EFFECT, HOST_SHARE, FAIL_HOST)

    def compare(self, ctx: Context) -> Comparison | None:
        """The host overhead, where it is at least ``host_share`` of the baseline's wall step."""
        if ctx.across:
            past, walls, now = ctx.past(HOST, every=True), ctx.past(WALL), host_samples(ctx.current)
            if past is None or walls is None or not now:
                return None
            if float(np.median(past)) < ctx.policy.host_share * float(np.median(walls)):
                return None
            return xp.across(METRICS[HOST].name, past, now, **ctx.across_options(ctx.policy.host_effect, tails=True))
        base, cur = host_samples(ctx.baseline), host_samples(ctx.current)
        if not (ctx.device and base and cur and ctx.baseline.cudnn is not None):
            return None
        if float(np.median(base)) < ctx.policy.host_share * ctx.baseline.cudnn.median:
            return None
        return compare(METRICS[HOST].name, base, cur, **ctx.options(min_effect=ctx.policy.host_effect))


# How much slower the host probe must run before the host counts as slower, where its own noise is not known (one
# record against one, or a history with too few probes): a CPU workload's median moves a few percent between processes.
HOST_SLOWER = 0.05


def host_change(ctx: Context) -> tuple[float, float] | None:
    """This process's host probe over its history's (or its baseline record's), and the change that counts as slower.

    None where either lacks the probe: then no host is known to have slowed.
    """
    now = ctx.current.host_probe_s
    past = ctx.past(PROBE) if ctx.across else None
    if now is None:
        return None
    if past is not None:
        sp = xp.spread(past)
        return now / sp.center, sp.threshold(HOST_SLOWER, ctx.policy.history_k)
    before = ctx.baseline.host_probe_s
    return None if before is None else (now / before, HOST_SLOWER)


def host_allowance(ctx: Context, processes: Sequence[ProcessSummary]) -> tuple[float, str]:
    """How far below the least stored overlap a host slower than every stored one may go, and why; inf: unknown.

    A slower host launches later and fewer kernels overlap, so the history's least was set on its slowest hosts; on
    a host slower still, its probe past the slowest stored probe times the history's slope of overlap over probe
    (Theil-Sen; none where it rises) says how much less. Where fewer than ``min_processes`` stored processes measured
    both, a host more than ``HOST_SLOWER`` slower than them (or than the baseline record) leaves the drop unexplained.
    """
    now = ctx.current.host_probe_s
    pairs = [(p, w / b) for s in processes if (p := s.get(PROBE)) and (b := s.get(BUSY)) and (w := s.get(WORK))]
    slowest = max((p for p, _ in pairs), default=ctx.baseline.host_probe_s)
    if now is None or not slowest or now <= slowest * (1 + HOST_SLOWER):
        return 0.0, ""
    slower = f"on a host slower than any stored (probe {pct(now / slowest - 1)})"
    if len(pairs) < ctx.policy.min_processes or len({p for p, _ in pairs}) < 2:
        return math.inf, f"{slower}: too few stored probes to say how much less it overlaps"
    import scipy.stats  # only here: a drop on a host slower than every stored one is rare

    slope = min(0.0, float(scipy.stats.theilslopes([o for _, o in pairs], [p for p, _ in pairs]).slope))
    allowance = -slope * (now - slowest)
    return allowance, f"{slower}, lowered by {allowance:.2f}: stored overlap falls {-slope * 1e-3:.3f} per ms of probe"


@dataclass(frozen=True)
class Cold:
    """A cold cost of this process (a side's first call after build, or the compile) against the case's history.

    Judged across processes only, against the stored processes that measured it in the same compile-cache state
    (``ColdCost.key``: a cache hit is never judged against misses, nor a miss against hits); where fewer than
    ``min_processes`` did, a change is reported as ambiguous, never failed, and where none did, not at all.
    """

    name: str
    tag: str  # FIRST_CALL or COMPILE (model.metrics)
    side: str = ""  # the side of a first call
    params: tuple[Threshold, ...] = (COLD_EFFECT, COLD_FLOOR)

    def compare(self, ctx: Context) -> Comparison | None:
        """This process's cold cost, one value, against the history's values at ``cold_effect`` and ``cold_floor``.

        A change under ``cold_floor`` seconds is unchanged; the process's first case of its framework is reported,
        never failed (its first call can carry what the warm-up does not reach).
        """
        cold = ctx.current.cold
        if cold is None:
            return None
        key = side_tag(self.side, cold.key(self.tag)) if self.side else cold.key(self.tag)
        now = cold.metrics().get(key)
        # A reported process's cold cost is its own regression: only clean processes make the cold history.
        past = [v for s in ctx.history if not s.reported and (v := s.get(key)) is not None and v > 0]
        if now is None or now <= 0 or not past:
            return None
        label = f"{self.side} {metric(key).name}" if self.side else metric(key).name
        found = xp.across(label, past, [now], **ctx.across_options(ctx.policy.cold_effect))
        if found.verdict not in (Verdict.REGRESSED, Verdict.IMPROVED):
            return found
        if abs(now - found.baseline_median) < ctx.policy.cold_floor:
            return replace(found, verdict=Verdict.UNCHANGED, why=f"moved {abs(now - found.baseline_median) * 1e3:.0f}"
                           f" ms, under the cold floor of {ctx.policy.cold_floor:g} s")
        if len(past) < ctx.policy.min_processes:
            return replace(found, verdict=Verdict.AMBIGUOUS, why=f"reported, not judged: {len(past)} stored "
                           f"process(es) measured it, {ctx.policy.min_processes} are needed")
        if cold.first and found.verdict is Verdict.REGRESSED:
            return replace(found, verdict=Verdict.AMBIGUOUS, why="reported, not judged: the process's first case of "
                           "its framework (what its warm-up does not reach lands here)")
        return found


# The cold costs a verdict judges, by the name each comparison is stored under.
COLD_RULES: tuple[Cold, ...] = (Cold("first_call", FIRST_CALL, "cudnn"), Cold("generic_first_call", FIRST_CALL,
                                                                            "generic"), Cold("compile_time", COMPILE))


@dataclass(frozen=True)
class Overlap:
    """Busy time regressed while the summed kernel time did not, on a host measurably slower than its history."""

    def flag(self, ctx: Context, found: Mapping[str, Comparison]) -> WindowFlag | None:
        """The OVERLAP flag with both changes and the host's, where the slower host explains the busier step."""
        return self.judged(ctx, found)[0]

    def judged(self, ctx: Context, found: Mapping[str, Comparison]) -> tuple[WindowFlag | None, str]:
        """The flag where the host explains the busier step; else, for a busier step whose kernels held, why it fails."""
        busy, work = found.get("cudnn_time"), found.get("kernel_time")
        if busy is None or work is None or busy.metric != METRICS[BUSY].name:
            return None, ""
        if busy.verdict is not Verdict.REGRESSED or work.verdict is Verdict.REGRESSED:
            return None, ""
        # Across processes each kernel is judged on its own: one that appeared or grew is never excused, so only
        # a step whose every kernel held is put down to the overlap (on a slower host fewer launches overlap).
        if ctx.across and any(k.verdict is Verdict.REGRESSED for k in kernel_comparisons(ctx, busy)):
            return None, ""
        grew, host = busy.ratio.estimate, host_change(ctx)
        # Launches y% later along the step place kernels of unchanged length at positions stretched by 1 + y: they
        # cover at most 1 + y times the time they did, so only a host slowed at least as much as the step explains it.
        if host is not None and host[0] - 1 > host[1] and host[0] >= grew:
            return WindowFlag(FlagKind.OVERLAP, f"kernels overlapped less on a slower host: busy {pct(grew - 1)}, "
                                                f"summed kernel time {pct(work.ratio.estimate - 1)} ({work.verdict}), "
                                                f"host probe {pct(host[0] - 1)}"), ""
        # A probe within its own noise is named with that noise: "+30.6%" read as "unchanged" needs its line beside it.
        speed = ("host speed not measured" if host is None
                 else f"host speed within its noise (probe {pct(host[0] - 1)}, line {host[1] * 100:.1f}%)"
                 if host[0] - 1 <= host[1] else f"host probe only {pct(host[0] - 1)}")
        return None, f"kernels overlapped less: busy {pct(grew - 1)}, summed kernel time held, {speed}"


def with_reasons(ctx: Context, found: Mapping[str, Comparison], findings: Sequence[Finding]) -> dict[str, Comparison]:
    """``found`` with the reason on the deciding comparison where a busier step whose kernels held still fails."""
    overlap = next((f for f in findings if isinstance(f, Overlap)), None)
    why = "" if overlap is None else overlap.judged(ctx, found)[1]
    return {**found, "cudnn_time": replace(found["cudnn_time"], why=why)} if why else dict(found)


@dataclass(frozen=True)
class HostSlowed:
    """A host-bound case judged on wall time whose time regressed while its speedup held."""

    def flag(self, ctx: Context, found: Mapping[str, Comparison]) -> WindowFlag | None:
        """The HOST_SLOWED flag.

        Both sides are host-bound and timed interleaved in one window: a slower host slows both alike and the
        speedup holds, while a slower cuDNN path moves the speedup. That holds across processes too: a slower
        runner host slows a whole process, both sides alike.
        """
        time, speed = found.get("cudnn_time"), found.get("speedup")
        if ctx.device or not ctx.host_bound or time is None or speed is None:
            return None
        if time.verdict is not Verdict.REGRESSED or speed.verdict not in (Verdict.UNCHANGED, Verdict.IMPROVED):
            return None
        change = f"{round((speed.ratio.estimate - 1) * 100):+d}%"  # rounded first: never "-0%"
        return WindowFlag(FlagKind.HOST_SLOWED, f"the host slowed both sides alike: speedup {change}, {speed.verdict}")


def kernel_comparisons(ctx: Context, busy: Comparison | None = None) -> tuple[Comparison, ...]:
    """Each kernel of the cuDNN side that moved against its own history (judged across processes only).

    A kernel that appeared counts at its full share of the step. One that grew counts where at least half of
    its growth reached the step's device time (``busy``): on H100 null runs a kernel on one of cuDNN's streams
    ran 0.31 or 0.57 ms by process while the step moved 2%, its time stretched by what ran beside it; such a
    kernel is reported as ambiguous, not failed.
    """
    dev = ctx.current.cudnn_device
    if not ctx.across or dev is None or ctx.past(WORK) is None:
        return ()
    rounds = {name: v for name, v in dev.kernel_rounds.items() if not name.startswith("(")}
    found = xp.kernels(ctx.processes, ctx.summary, rounds, floor=ctx.policy.device_effect,
                       k=ctx.policy.history_k, confidence=ctx.policy.confidence, min_runs=ctx.policy.min_processes)
    step = 0.0 if busy is None else busy.ratio.estimate - 1
    found = [replace(k, verdict=Verdict.AMBIGUOUS, why="less than half of it reached the step's device time")
             if k.verdict is Verdict.REGRESSED and k.baseline_median > 0 and step < 0.5 * (k.ratio.estimate - 1)
             else k for k in found]
    return tuple(mix_changes(found, ctx.policy.device_effect))


def mix_changes(found: Sequence[Comparison], floor: float) -> list[Comparison]:
    """Kernels that appeared where kernels that got faster freed as much of the step: the kernel mix changed.

    cuDNN and cuBLAS choose algorithms per process: on a lent H100 a null process of a Keras LSTM ran a
    tensor-op GEMM that none of its history had (+5.4% of the step) while cuDNN's elementwise kernel shrank by
    8.5% of it, the step unchanged. Appeared kernels regress only where, together, they add at least ``floor``
    of the step beyond what the improved (or vanished) kernels freed; a kernel that grew is judged on its own,
    so no slowdown of a kernel that was there is excused by another one getting faster.
    """
    appeared = [k for k in found if k.verdict is Verdict.REGRESSED and k.baseline_median == 0]
    freed = sum(1 - k.ratio.estimate for k in found if k.verdict is Verdict.IMPROVED)
    added = sum(k.ratio.estimate - 1 for k in appeared)
    if not appeared or freed <= 0 or added - freed >= floor:
        return list(found)
    why = f"the kernel mix changed: kernels that got faster freed {freed * 100:.1f}% of the step"
    return [replace(k, verdict=Verdict.AMBIGUOUS, why=why) if k in appeared else k for k in found]


# Order matters only for reading: the speedup first, then the time that decides, then what explains it.
RULES: tuple[Rule, ...] = (Speedup(), DeviceTime(), WallTime(), KernelTime(), BalancedTime(), SteadyTime(),
                           KernelOverlap(), HostOverhead(), *COLD_RULES)
FINDINGS: tuple[Finding, ...] = (Overlap(), HostSlowed())


def thresholds() -> tuple[Threshold, ...]:
    """Every threshold the rules and gates declare, once each, in the order the options list them.

    Read at each call, so a rule added to ``RULES`` brings its thresholds everywhere they are generated.
    """
    found: dict[str, Threshold] = {}
    for t in JUDGING + tuple(t for rule in RULES + GATES for t in rule.params):
        if found.setdefault(t.name, t) != t:
            raise ValueError(f"two declarations of the threshold {t.name!r}: {found[t.name]} and {t}")
    return tuple(found.values())
