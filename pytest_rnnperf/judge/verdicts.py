"""A case's verdict: the rules of ``rules.py`` run on its two records, combined, re-measured when ambiguous.

A case is judged against the stored baseline of this GPU model:

- ``compare`` puts a bootstrap interval on the ratio of medians (current / baseline) and runs a two-sided
  Mann-Whitney test on the raw samples. Regressed or improved needs the whole interval beyond the threshold's
  band *and* p < ``alpha``; unchanged needs the whole interval inside the band; anything else is ambiguous,
  and an undecided case (device, balanced or steady time ambiguous) is timed once more and decided on both windows'
  rounds (``judge_remeasuring``).
- Where both runs have device time (CUPTI), the cuDNN side's device time decides, at ``device_effect``
  (or at the case's own between-process noise measured by null runs, where higher: ``noise``) and on its
  estimate (the whole interval on the worse side of no change is enough, see ``compare``): it is what cuDNN,
  the driver and the GPU did, and it does not drift with the host. Busy time (the union of kernel intervals)
  is what the step waits for, but it also moves when concurrent kernels overlap differently; a busy-time
  regression whose summed kernel time did not regress too (across processes: and no kernel regressed on its
  own) is flagged ``OVERLAP`` and reported, not failed, where the process's host probe (``measure.host_speed``)
  ran measurably slower than its history by at least as much; on a host of unchanged speed it fails, saying so.
  The host overhead (wall minus device time per step: dispatch, launches, host work the GPU waited for) gets
  its own verdict at
  ``host_effect``, where it is at least ``host_share`` of the baseline's wall step, and a regression there is
  named as such (a slower driver launch path or framework dispatch shows up here, not in device time). It
  fails the case only with ``fail_host``: host time drifts with the runner (up to 2x between null runs on a
  H100 VM), so by default it is reported, never failed.
- Where either run has no device time (an older baseline, a runner without cupti-python), the wall time
  decides: at ``min_effect``, or at ``host_bound_effect`` for a case that kept the GPU
  busy less than ``host_bound_below`` of its timed rounds; such a case whose cuDNN time regressed while its
  speedup held is flagged ``HOST_SLOWED`` (both sides slowed alike) instead of failing.
- A regression in a window flagged by the telemetry (throttled clocks, a process that appeared on the GPU)
  is reported, not failed.
- A device-time regression must also hold in clock cycles: where this run's SM clock over its timed rounds
  (NVML) was lower than the baseline's (across processes: the median of the history's), the device time is
  scaled by the ratio of the clocks and judged again; a regression that then holds no longer is
  ``ambiguous (clock)``, not failed (a clock dip is no slower kernel). Where either clock is unknown, the
  device time alone decides.
- With ``confirm_nights`` N > 1 (``confirmed``), a case that would fail is ``suspect`` (reported, not failed)
  until it has violated on N stored nights running; path, parity and floor gates are not delayed.
- Each side's first call after build and the compile time (cold costs, ``rules.Cold``) are judged against the
  case's history of processes at ``cold_effect``, a compile-cache hit only against hits; a regression there fails
  the case as ``first call regressed`` while its steady verdict stays what it was.

The speedup is compared too and reported: it also moves when the generic side changes, and the case's
floor guards it. The thresholds' defaults come from null runs (baselines/*/evidence/README.md). The statistic
is ``compare.py``, each rule and finding a class in ``rules.py`` with the thresholds it declares (their values
for one run a ``policy.Policy``), the gates a record passes on its own in ``gates.py`` (tested in
tests/unit/test_verdicts.py and test_gates.py); nothing else decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from pytest_rnnperf.judge.compare import Comparison, Verdict, Word, compare, pct
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.sensitivity import drift
from pytest_rnnperf.judge.rules import (COLD_RULES, FINDINGS, RULES, Context, Finding, Rule, kernel_comparisons,
                                       with_reasons)
from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.metrics import BUSY, METRICS
from pytest_rnnperf.model.process import ProcessSummary

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.records import CaseRecord, StoredRun

# The statistic and the thresholds are read from here by the rest of the package.
__all__ = ["CaseVerdict", "Comparison", "Outcome", "Policy", "Verdict", "compare", "compare_runs", "confirmed",
           "judge", "judge_remeasuring"]


class Outcome(Word):
    """A case's verdict as summaries count it: a regression in an untrusted window does not fail."""

    REGRESSED = "regressed"
    REGRESSED_NOT_FAILED = "regressed (not failed)"
    HOST_REGRESSED = "host overhead regressed"
    HOST_REGRESSED_NOT_FAILED = "host overhead regressed (not failed)"
    COLD_REGRESSED = "first call regressed"  # a cold cost (first call, compile) regressed, the steady time did not
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    AMBIGUOUS = "ambiguous"
    AMBIGUOUS_CLOCK = "ambiguous (clock)"  # regressed in device time, not in clock cycles: the SM clock dipped
    SUSPECT = "suspect"  # would fail, on fewer nights running than ``confirm_nights``


# Outcomes of a regression that are reported, not failed (the answer table lists them beside the failed ones).
HELD_BACK = (Outcome.REGRESSED_NOT_FAILED, Outcome.AMBIGUOUS_CLOCK, Outcome.SUSPECT)


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict of one case against its baseline: each rule's comparison by name, and the window's flags."""

    case_id: str
    comparisons: Mapping[str, Comparison]  # rule name -> comparison; "cudnn_time" is always there and decides
    flags: tuple[WindowFlag, ...] = field(default=())  # why the window is not trusted; empty when clean
    remeasured: bool = False
    host_bound_busy: float | None = None  # the GPU-busy fraction when the host-bound wall threshold applied
    basis: str = "device"  # "device", or "wall" where either run has no device time
    fail_host: bool = False  # a host overhead regression fails (Policy.fail_host)
    # Judged across processes: how many stored processes, and each kernel of the cuDNN side that moved.
    processes: int = 0
    kernels: tuple[Comparison, ...] = ()
    drift: str = ""  # a slow change toward slower that the change-point check found over the history and now
    clock: str = ""  # why a device-time regression is put down to the SM clock (it held not in clock cycles)
    # Nights running (this one included) on which the case would have failed, where ``confirmed`` counted them
    # (0: not counted), and how many it takes to fail (``Policy.confirm_nights``).
    nights: int = 0
    confirm_nights: int = 1

    def __post_init__(self) -> None:
        """A verdict without the deciding comparison is a bug in the rules."""
        if "cudnn_time" not in self.comparisons:
            raise ValueError(f"verdict of {self.case_id!r} has no cudnn_time")

    @property
    def time(self) -> Comparison:
        """The cuDNN side's device time, or its wall time where either run has no device time: it decides."""
        return self.comparisons["cudnn_time"]

    @property
    def speedup(self) -> Comparison | None:
        """The per-round speedup, reported."""
        return self.comparisons.get("speedup")

    @property
    def host(self) -> Comparison | None:
        """The cuDNN side's host overhead, where it is judged."""
        return self.comparisons.get("host_overhead")

    @property
    def work(self) -> Comparison | None:
        """The cuDNN side's summed kernel time, beside its busy time."""
        return self.comparisons.get("kernel_time")

    @property
    def cold(self) -> tuple[Comparison, ...]:
        """The cold costs judged (each side's first call after build, the compile), in ``COLD_RULES`` order."""
        return tuple(c for rule in COLD_RULES if (c := self.comparisons.get(rule.name)) is not None)

    @property
    def cold_regressed(self) -> tuple[Comparison, ...]:
        """The cold costs that regressed: they fail the case whatever its steady verdict."""
        return tuple(c for c in self.cold if c.verdict is Verdict.REGRESSED)

    @property
    def regressed_kernels(self) -> tuple[Comparison, ...]:
        """The kernels that appeared or grew by a share of the step that matters."""
        return tuple(k for k in self.kernels if k.verdict is Verdict.REGRESSED)

    @property
    def balanced(self) -> Comparison | None:
        """The geometric mean of busy and summed kernel time, where judged across processes (``BalancedTime``)."""
        return self.comparisons.get("balanced_time")

    @property
    def balanced_regressed(self) -> bool:
        """The busy and summed kernel time together regressed, whatever each alone did."""
        return self.balanced is not None and self.balanced.verdict is Verdict.REGRESSED

    @property
    def steady(self) -> Comparison | None:
        """The summed time of the kernels steady across the history, where judged (``SteadyTime``)."""
        return self.comparisons.get("steady_time")

    @property
    def steady_regressed(self) -> bool:
        """The kernels that every stored process ran alike got slower together, whatever the busy time did."""
        return self.steady is not None and self.steady.verdict is Verdict.REGRESSED

    @property
    def overlap(self) -> Comparison | None:
        """How many kernels ran at once against the least of the history's processes (``KernelOverlap``)."""
        return self.comparisons.get("kernel_overlap")

    @property
    def overlap_regressed(self) -> bool:
        """The kernels ran at once less than in any stored process, by more than the floor."""
        return self.overlap is not None and self.overlap.verdict is Verdict.REGRESSED

    @property
    def verdict(self) -> Verdict:
        """The cuDNN-time verdict, or regressed where a kernel, busy and kernel time together, the steady kernels or
        the kernels' overlap regressed: another kernel's speedup excuses nothing. Where busy and kernel time together
        or the steady kernels, which can fail a case by themselves, are ambiguous, so is the case."""
        if (self.regressed_kernels or self.drift or self.balanced_regressed or self.steady_regressed
                or self.overlap_regressed):
            return Verdict.REGRESSED
        if any(c is not None and c.verdict is Verdict.AMBIGUOUS for c in (self.balanced, self.steady)):
            return Verdict.AMBIGUOUS
        return self.time.verdict

    @property
    def undecided(self) -> bool:
        """Regressed on nothing and ambiguous on a step metric that can fail the case by itself (device, balanced or
        steady time): another window of rounds may decide it (``judge_remeasuring``)."""
        return self.verdict is Verdict.AMBIGUOUS

    @property
    def host_regressed(self) -> bool:
        """The host overhead of the cuDNN side regressed."""
        return self.host is not None and self.host.verdict is Verdict.REGRESSED

    @property
    def outcome(self) -> Outcome:
        """The verdict as counted: a regression in an untrusted window is "regressed (not failed)", one that held not
        in clock cycles "ambiguous (clock)", a failure on fewer nights running than asked "suspect"."""
        if self.verdict is Verdict.REGRESSED and self.clock:
            return Outcome.AMBIGUOUS_CLOCK
        found = self._outcome()
        if found in (Outcome.REGRESSED, Outcome.HOST_REGRESSED) and 0 < self.nights < self.confirm_nights:
            return Outcome.SUSPECT
        return found

    def _outcome(self) -> Outcome:
        """The outcome of this night alone."""
        if self.verdict is Verdict.REGRESSED or (self.host_regressed and self.flags):
            return Outcome.REGRESSED_NOT_FAILED if self.flags else Outcome.REGRESSED
        # Cold costs are paid at build, outside the timed window its flags speak of.
        if self.cold_regressed:
            return Outcome.COLD_REGRESSED
        if self.host_regressed:
            return Outcome.HOST_REGRESSED if self.fail_host else Outcome.HOST_REGRESSED_NOT_FAILED
        return Outcome(self.verdict.value)

    @property
    def violates(self) -> bool:
        """This night alone would fail the case (whatever the nights before it): what ``confirmed`` counts."""
        return self.outcome is not Outcome.AMBIGUOUS_CLOCK and self._outcome() in (Outcome.REGRESSED,
                                                                                     Outcome.HOST_REGRESSED)

    @property
    def suspect(self) -> str:
        """e.g. "suspect: night 1 of 2 it must regress on running" for a suspect case, else empty."""
        if self.outcome is not Outcome.SUSPECT:
            return ""
        return f"suspect: night {self.nights} of {self.confirm_nights} it must regress on running to fail"

    @property
    def fails(self) -> bool:
        """Regressed in a clean window: the case's test fails (unless regressions are only reported)."""
        return self.outcome in (Outcome.REGRESSED, Outcome.HOST_REGRESSED, Outcome.COLD_REGRESSED)

    @property
    def moved(self) -> bool:
        """Regressed or improved, trusted or not (device/wall time or host overhead)."""
        return self.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) or self.host_regressed or bool(self.cold_regressed)

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
        line = f"launch/dispatch overhead {pct(r.estimate - 1)} [{pct(r.low - 1)}, {pct(r.high - 1)}]"
        return line + (": driver or framework" if self.host_regressed else f": {self.host.verdict}")

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the run's report."""
        return {"case": self.case_id, "basis": self.basis, "verdict": str(self.verdict), "outcome": str(self.outcome),
                "regressed": self.fails, "flagged": self.flagged,
                "flags": [{"kind": f.kind.value, "message": f.message} for f in self.flags],
                "remeasured": self.remeasured, "host_bound": self.host_bound,
                **{name: None for name in COMPARISONS},
                **{name: c.as_dict() for name, c in self.comparisons.items()},
                "host_bound_busy": self.host_bound_busy, "fail_host": self.fail_host,
                "processes": self.processes, "kernels": [k.as_dict() for k in self.kernels], "drift": self.drift,
                "clock": self.clock, "nights": self.nights, "confirm_nights": self.confirm_nights}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseVerdict:
        """The inverse of ``as_dict`` (a pytest-xdist worker's verdicts reach the controller this way)."""
        if data.get("cudnn_time") is None:
            raise ValueError(f"verdict of {data.get('case')!r} has no cudnn_time")
        busy = data.get("host_bound_busy")
        return cls(case_id=str(data["case"]),
                   comparisons={k: Comparison.from_dict(data[k]) for k in COMPARISONS if data.get(k) is not None},
                   flags=tuple(WindowFlag(FlagKind(f["kind"]), str(f["message"])) for f in data.get("flags", ())),
                   remeasured=bool(data.get("remeasured", False)), host_bound_busy=None if busy is None else float(busy),
                   basis=str(data.get("basis", "device")), fail_host=bool(data.get("fail_host", False)),
                   processes=int(data.get("processes", 0)),
                   kernels=tuple(Comparison.from_dict(k) for k in data.get("kernels", ())),
                   drift=str(data.get("drift", "")), clock=str(data.get("clock", "")),
                   nights=int(data.get("nights", 0)), confirm_nights=int(data.get("confirm_nights", 1)))


# Every comparison a verdict can hold, by the name it is stored under in rnnperf.json.
COMPARISONS: tuple[str, ...] = tuple(dict.fromkeys(rule.name for rule in RULES))


def judge(baseline: CaseRecord, current: CaseRecord, policy: Policy = Policy(), remeasured: bool = False,
          rules: tuple[Rule, ...] = RULES, findings: tuple[Finding, ...] = FINDINGS,
          history: Sequence[ProcessSummary] = (), clock: bool = True) -> CaseVerdict | None:
    """Verdict of one case (None when either side has no cuDNN timing to compare): every rule, then the findings.

    With ``history`` (the case's stored processes, oldest first) of at least ``policy.min_processes`` processes,
    each rule judges this process against their spread (``across``) and every kernel gets its own verdict;
    with fewer, the newest stored record (``baseline``) decides as one process against one. With ``clock``, a
    device-time regression must hold in clock cycles too (``clock_checked``).
    """
    if baseline.cudnn is None or current.cudnn is None:
        return None
    ctx = Context(baseline, current, policy, tuple(history))
    found = {rule.name: c for rule in rules if (c := rule.compare(ctx)) is not None}
    if ctx.across and "cudnn_time" not in found:  # the history lacks what this run measured: one record decides
        return judge(baseline, current, policy, remeasured, rules, findings)
    flags = current.flags + tuple(f for f in current.device_flags if f not in current.flags)
    flags += tuple(f for finding in findings if (f := finding.flag(ctx, found)) is not None)
    found = with_reasons(ctx, found, findings)
    time = found["cudnn_time"]
    processes, kernels = (len(ctx.processes), kernel_comparisons(ctx, time)) if ctx.across else (0, ())
    if time.metric == METRICS[BUSY].name:
        slow = "" if time.verdict is Verdict.REGRESSED or not ctx.across else drift(
            ctx.processes, time.current_median, policy.device_effect)
        verdict = CaseVerdict(current.id, found, flags=flags, remeasured=remeasured, fail_host=policy.fail_host,
                              processes=processes, kernels=kernels, drift=slow)
        if not clock:
            return verdict
        return clock_checked(verdict, ctx, lambda scaled: judge(baseline, scaled, policy, remeasured, rules, findings,
                                                                history, clock=False))
    return CaseVerdict(current.id, found, flags=flags, remeasured=remeasured,
                       host_bound_busy=min(ctx.busy) if ctx.host_bound else None, basis="wall",
                       processes=processes, kernels=kernels)


def sm_clocks(ctx: Context) -> tuple[float, float] | None:
    """The SM clock (MHz) of the baseline (across processes: the median of the history's where read) and of this
    run, over their timed rounds; None where either is unknown."""
    now = ctx.current.sm_clock_mhz
    if ctx.across:
        known = [c for s in ctx.processes if (c := s.sm_clock_mhz) is not None]
        before = float(np.median(known)) if known else None
    else:
        before = ctx.baseline.sm_clock_mhz
    return None if now is None or before is None else (before, now)


def at_clock(record: CaseRecord, factor: float) -> CaseRecord:
    """``record`` with its cuDNN side's device times times ``factor``: in the baseline's clock cycles where
    ``factor`` is this run's clock over the baseline's."""
    dev = record.cudnn_device
    if dev is None:
        return record

    def scaled(samples: Sequence[float]) -> tuple[float, ...]:
        """Each sample times the factor."""
        return tuple(v * factor for v in samples)

    return replace(record, cudnn_device=replace(
        dev, busy=replace(dev.busy, samples=scaled(dev.busy.samples)), work=replace(dev.work, samples=scaled(dev.work.samples)),
        kernels=tuple(replace(k, ms_per_step=k.ms_per_step * factor) for k in dev.kernels),
        kernel_rounds={name: scaled(v) for name, v in dev.kernel_rounds.items()}))


def clock_checked(verdict: CaseVerdict, ctx: Context, again: Callable[[CaseRecord], CaseVerdict | None]) -> CaseVerdict:
    """A device-time regression at a lower SM clock than the baseline's, judged ``again`` in clock cycles; where it
    no longer regresses there, the verdict says why (``ambiguous (clock)``).

    A GPU held at a lower clock runs the same kernels slower (a power cap, a neighbour's heat); only the part
    of a slowdown the clock does not explain is the code's. A higher clock leaves nothing to excuse.
    """
    clocks = sm_clocks(ctx)
    if verdict.verdict is not Verdict.REGRESSED or clocks is None or clocks[1] >= clocks[0]:
        return verdict
    before, now = clocks
    cycles = again(at_clock(ctx.current, now / before))
    if cycles is None or cycles.verdict is Verdict.REGRESSED:
        return verdict
    why = (f"SM clock {now:.0f} MHz now against {before:.0f} MHz: device time {pct(verdict.time.ratio.estimate - 1)}"
           f" is {pct(cycles.time.ratio.estimate - 1)} in clock cycles ({cycles.verdict})")
    return replace(verdict, clock=why)


def judge_remeasuring(baseline: CaseRecord, current: CaseRecord, remeasure: Callable[[], CaseRecord],
                      policy: Policy = Policy(), history: Sequence[ProcessSummary] = ()
                      ) -> tuple[CaseRecord, CaseVerdict | None]:
    """Judge; an undecided case (``CaseVerdict.undecided``: its device, balanced or steady time ambiguous) is timed
    once more (``remeasure``) and both windows' rounds, pooled, decide.

    Pooling rather than replacing: a true shift near the threshold leaves the interval across the band edge
    in either window alone; twice the rounds narrow it. Balanced and steady time count too: each fails a case by
    itself, and the steady kernels' interval comes from the few traced rounds alone.
    """
    verdict = judge(baseline, current, policy, history=history)
    if verdict is not None and verdict.undecided:
        current = current.pooled_with(remeasure())
        verdict = judge(baseline, current, policy, remeasured=True, history=history)
    return current, verdict


def confirmed(verdict: CaseVerdict, before: int, nights: int) -> CaseVerdict:
    """``verdict`` with the nights it violated on running counted: ``before`` stored nights and this one; from
    the ``nights``-th on it fails, before that it is suspect. A verdict that would not fail is left as it is."""
    return replace(verdict, nights=before + 1, confirm_nights=nights) if verdict.violates else verdict


def compare_runs(old: StoredRun, new: StoredRun, policy: Policy = Policy()) -> list[CaseVerdict]:
    """Verdicts for every case the two runs share, in the new run's order."""
    out = []
    for case_id, record in new.records.items():
        if case_id in old.records:
            verdict = judge(old.records[case_id], record, policy)
            if verdict is not None:
                out.append(verdict)
    return out
