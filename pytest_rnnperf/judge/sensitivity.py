"""What a case's history can detect: the smallest regression of its device time, and whether it needs more processes.

Also the drift check of the nightly verdict: the history's process medians and this process's, in order, through
the change-point detection, so a slow drift that each night's median follows is still caught. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from typing import Sequence

from pytest_rnnperf.judge import across as xp
from pytest_rnnperf.judge.changepoints import MIN_RUNS, detect
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.model.process import BUSY, WALL, ProcessSummary


@dataclass(frozen=True)
class Sensitivity:
    """One case: how many processes its history holds, their noise, and the smallest change it can tell."""

    case_id: str
    processes: int
    metric: str  # "device" or "wall" (no device time in the history)
    noise: float | None  # relative, between processes (None with fewer than min_processes)
    smallest: float | None  # the threshold a new process is judged at (None: judged against one record)
    floor: float

    @property
    def status(self) -> str:
        """One phrase: resolves the floor, is limited by its noise, or needs more processes."""
        if self.smallest is None:
            return "judged against one record: record more processes (--rnnperf-record-processes) or keep nightly runs"
        if self.smallest <= self.floor:
            return f"resolves {self.floor:.0%}"
        return (f"its own noise ({self.noise:.1%} between processes) limits it to {self.smallest:.1%}; a new kernel "
                f"of {self.floor:.0%} of the step is still caught")


def sensitivity(case_id: str, history: Sequence[ProcessSummary], policy: Policy) -> Sensitivity:
    """The smallest device-time (or wall-time) regression ``history`` lets a new process be failed for."""
    busy = [v for s in history if (v := s.get(BUSY))]
    metric, values, floor = ("device", busy, policy.device_effect) if busy else (
        "wall", [v for s in history if (v := s.get(WALL))], policy.min_effect)
    if len(values) < policy.min_processes:
        return Sensitivity(case_id, len(values), metric, None, None, floor)
    sp = xp.spread(values)
    return Sensitivity(case_id, sp.n, metric, sp.noise, sp.threshold(floor, policy.history_k), floor)


def drift_check_available() -> bool:
    """ruptures (the change-point library) can be imported; without it the drift check is off, never a crash."""

    return find_spec("ruptures") is not None


def drift(history: Sequence[ProcessSummary], current: float, floor: float) -> str:
    """A change toward slower of at least ``floor`` that ends at this process, over the history's device time; else "".

    Each night is judged against the median of the nights before; ten nights of +1% each move that median too,
    but not the change points of the whole series.
    """
    series = [v for s in history if (v := s.get(BUSY))] + [current]
    if len(series) < MIN_RUNS or not drift_check_available():
        return ""
    # The trailing run of changes toward slower, together: a ramp may come out as several small steps.
    trailing = []
    for c in reversed(detect(series).change_points):
        if c.shift <= 0:
            break
        trailing.append(c)
    total = 1.0
    for c in trailing:
        total *= 1.0 + c.shift
    if not trailing or total - 1.0 < floor:  # the level now is the slow one: until a new baseline resets it
        return ""
    start = trailing[-1].start
    what = "drift" if len(trailing) > 1 or trailing[0].kind == "drift" else "step"
    return (f"{what} of {total - 1:+.1%} in device time over the history's last {len(series) - start} of "
            f"{len(series)} processes (change-point check)")
