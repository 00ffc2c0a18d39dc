"""A case's verdict: the rules of ``rules.py`` run on its two records, combined, re-measured when ambiguous.

A case is judged against the stored baseline of this GPU model:

- ``compare`` puts a bootstrap interval on the ratio of medians (current / baseline) and runs a two-sided
  Mann-Whitney test on the raw samples. Regressed or improved needs the whole interval beyond the threshold's
  band *and* p < ``alpha``; unchanged needs the whole interval inside the band; anything else is ambiguous,
  and an ambiguous case is timed once more and decided on both windows' rounds (``judge_remeasuring``).
- Where both runs have device time (CUPTI), the cuDNN side's device time decides, at ``device_effect``
  (or at the case's own between-process noise measured by null runs, where higher: ``noise``) and on its
  estimate (the whole interval on the worse side of no change is enough, see ``compare``): it is what cuDNN,
  the driver and the GPU did, and it does not drift with the host. Busy time (the union of kernel intervals)
  is what the step waits for, but it also moves when concurrent kernels overlap differently; a busy-time
  regression whose summed kernel time did not regress too (across processes: and no kernel regressed on its
  own) is flagged ``OVERLAP`` and reported, not failed.
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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pytest_rnnperf.judge.compare import Comparison, Verdict, Word, compare, pct
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.sensitivity import drift
from pytest_rnnperf.judge.rules import COLD_RULES, FINDINGS, RULES, Context, Finding, Rule, kernel_comparisons
from pytest_rnnperf.model.flags import FlagKind, WindowFlag
from pytest_rnnperf.model.metrics import BUSY, METRICS
from pytest_rnnperf.model.process import ProcessSummary

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.records import CaseRecord, StoredRun

# The statistic and the thresholds are read from here by the rest of the package.
__all__ = ["CaseVerdict", "Comparison", "Outcome", "Policy", "Verdict", "compare", "compare_runs", "judge",
           "judge_remeasuring"]


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
    def verdict(self) -> Verdict:
        """The cuDNN-time verdict, or regressed where a kernel regressed: another kernel's speedup excuses nothing."""
        return Verdict.REGRESSED if self.regressed_kernels or self.drift else self.time.verdict

    @property
    def host_regressed(self) -> bool:
        """The host overhead of the cuDNN side regressed."""
        return self.host is not None and self.host.verdict is Verdict.REGRESSED

    @property
    def outcome(self) -> Outcome:
        """The verdict as counted: a regression in an untrusted window is "regressed (not failed)"."""
        if self.verdict is Verdict.REGRESSED or (self.host_regressed and self.flags):
            return Outcome.REGRESSED_NOT_FAILED if self.flags else Outcome.REGRESSED
        # Cold costs are paid at build, outside the timed window its flags speak of.
        if self.cold_regressed:
            return Outcome.COLD_REGRESSED
        if self.host_regressed:
            return Outcome.HOST_REGRESSED if self.fail_host else Outcome.HOST_REGRESSED_NOT_FAILED
        return Outcome(self.verdict.value)

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
                "processes": self.processes, "kernels": [k.as_dict() for k in self.kernels], "drift": self.drift}

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
                   drift=str(data.get("drift", "")))


# Every comparison a verdict can hold, by the name it is stored under in rnnperf.json.
COMPARISONS: tuple[str, ...] = tuple(dict.fromkeys(rule.name for rule in RULES))


def judge(baseline: CaseRecord, current: CaseRecord, policy: Policy = Policy(), remeasured: bool = False,
          rules: tuple[Rule, ...] = RULES, findings: tuple[Finding, ...] = FINDINGS,
          history: Sequence[ProcessSummary] = ()) -> CaseVerdict | None:
    """Verdict of one case (None when either side has no cuDNN timing to compare): every rule, then the findings.

    With ``history`` (the case's stored processes, oldest first) of at least ``policy.min_processes`` processes,
    each rule judges this process against their spread (``across``) and every kernel gets its own verdict;
    with fewer, the newest stored record (``baseline``) decides as one process against one.
    """
    if baseline.cudnn is None or current.cudnn is None:
        return None
    ctx = Context(baseline, current, policy, tuple(history))
    found = {rule.name: c for rule in rules if (c := rule.compare(ctx)) is not None}
    if ctx.across and "cudnn_time" not in found:  # the history lacks what this run measured: one record decides
        return judge(baseline, current, policy, remeasured, rules, findings)
    flags = current.flags + tuple(f for f in current.device_flags if f not in current.flags)
    flags += tuple(f for finding in findings if (f := finding.flag(ctx, found)) is not None)
    time = found["cudnn_time"]
    processes, kernels = (len(ctx.processes), kernel_comparisons(ctx, time)) if ctx.across else (0, ())
    if time.metric == METRICS[BUSY].name:
        slow = "" if time.verdict is Verdict.REGRESSED or not ctx.across else drift(
            ctx.history, time.current_median, policy.device_effect)
        return CaseVerdict(current.id, found, flags=flags, remeasured=remeasured, fail_host=policy.fail_host,
                           processes=processes, kernels=kernels, drift=slow)
    return CaseVerdict(current.id, found, flags=flags, remeasured=remeasured,
                       host_bound_busy=min(ctx.busy) if ctx.host_bound else None, basis="wall",
                       processes=processes, kernels=kernels)


def judge_remeasuring(baseline: CaseRecord, current: CaseRecord, remeasure: Callable[[], CaseRecord],
                      policy: Policy = Policy(), history: Sequence[ProcessSummary] = ()
                      ) -> tuple[CaseRecord, CaseVerdict | None]:
    """Judge; an ambiguous case is timed once more (``remeasure``) and both windows' rounds, pooled, decide.

    Pooling rather than replacing: a true shift near the threshold leaves the interval across the band edge
    in either window alone; twice the rounds narrow it.
    """
    verdict = judge(baseline, current, policy, history=history)
    if verdict is not None and verdict.verdict is Verdict.AMBIGUOUS:
        current = current.pooled_with(remeasure())
        verdict = judge(baseline, current, policy, remeasured=True, history=history)
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
