"""What a case's history can detect: the smallest regression of its device time, and whether it needs more processes.

Also the drift check of the nightly verdict: the history's process medians and this process's, in order, through
the change-point detection, so a slow drift that each night's median follows is still caught. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Mapping, Sequence

import numpy as np

from pytest_rnnperf.judge import across as xp
from pytest_rnnperf.judge.changepoints import MIN_RUNS, detect
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.rules import balanced
from pytest_rnnperf.judge.steady import steady_series
from pytest_rnnperf.model.metrics import WORK, show
from pytest_rnnperf.model.process import BUSY, WALL, ProcessSummary


@dataclass(frozen=True)
class Sensitivity:
    """One case: how many processes its history holds, their noise, and the smallest change it can tell."""

    case_id: str
    processes: int
    metric: str  # "device", "steady" (its steady kernels tell the smallest) or "wall" (no device time in the history)
    noise: float | None  # relative, between processes (None with fewer than min_processes)
    smallest: float | None  # the smallest change caught 19 times in 20 (None: judged against one record)
    floor: float
    steady_share: float | None = None  # where the steady kernels decide: their share of the summed kernel time
    by_noise: bool = True  # its own noise drew the line; else the floor did, and it catches the floor half the time

    @property
    def resolves(self) -> bool:
        """A change of the floor is caught 19 times in 20 (rounding aside: the steady line's reach is the floor)."""
        return self.smallest is not None and self.smallest <= self.floor + 1e-9

    @property
    def shown(self) -> str:
        """``smallest`` as a percentage, with a second decimal where one would read as the floor (3.02%, not 3.0%)."""
        if self.smallest is None:
            return "-"
        text = f"{self.smallest:.1%}"
        return f"{self.smallest:.2%}" if not self.resolves and text == f"{self.floor:.1%}" else text

    @property
    def status(self) -> str:
        """One phrase: resolves the floor, is limited by its noise, or needs more processes."""
        if self.smallest is None:
            return "judged against one record: record more processes (--rnnperf-record-processes) or keep nightly runs"
        on = "" if self.steady_share is None else f" on its steady kernels ({self.steady_share:.0%} of its kernel time)"
        if self.resolves:
            return f"resolves {self.floor:.0%}{on}"
        if not self.by_noise:
            return (f"called at its {self.floor:.0%} floor, which it reaches half the time: {self.shown} is "
                    f"caught 19 times in 20; a new kernel of {self.floor:.0%} of the step is still caught")
        if self.few:
            return (f"its {self.processes} processes limit it to {self.shown}{on}: their noise is at its "
                    f"{xp.NOISE_FLOOR:.1%} floor, and more processes (kept nights) narrow the line; a new kernel of "
                    f"{self.floor:.0%} of the step is still caught")
        return (f"its own noise ({self.noise:.1%} between processes) limits it to {self.shown}{on}; a new "
                f"kernel of {self.floor:.0%} of the step is still caught")

    @property
    def few(self) -> bool:
        """Not resolving the floor with a noise at its own floor: too few processes, not their spread, draw the line."""
        return not self.resolves and self.noise is not None and self.noise <= xp.NOISE_FLOOR


def sensitivity(case_id: str, history: Sequence[ProcessSummary], policy: Policy) -> Sensitivity:
    """The smallest device-time (or wall-time) regression ``history`` lets a new process be failed for 19 times in 20
    (``across.Spread.reach``): on busy time, on busy and kernel time together (``rules.BalancedTime``), or on its
    steady kernels (``rules.SteadyTime``, with the share of the kernel time they cover), whichever tells the
    smallest."""
    busy = [v for s in history if (v := s.get(BUSY))]
    metric, values, floor = ("device", busy, policy.device_effect) if busy else (
        "wall", [v for s in history if (v := s.get(WALL))], policy.min_effect)
    if len(values) < policy.min_processes:
        return Sensitivity(case_id, len(values), metric, None, None, floor)
    spreads = [xp.spread(values)]
    both = [balanced(b, w) for s in history if (b := s.get(BUSY)) and (w := s.get(WORK))]
    if metric == "device" and len(both) >= policy.min_processes:
        spreads.append(xp.spread(both))
    sp = min(spreads, key=lambda one: one.reach(one.threshold(floor, policy.history_k)))
    found = Sensitivity(case_id, sp.n, metric, sp.noise, sp.reach(sp.threshold(floor, policy.history_k)), floor,
                        by_noise=sp.guard(policy.history_k) > floor)
    steady = _steady(case_id, history, policy) if metric == "device" else None
    return steady if steady is not None and steady.smallest is not None and found.smallest is not None \
        and steady.smallest < found.smallest else found


def _steady(case_id: str, history: Sequence[ProcessSummary], policy: Policy) -> Sensitivity | None:
    """What the history's steady kernels tell (``rules.SteadyTime``), over the processes that kept kernel tables;
    None where fewer than ``min_processes`` did or no kernel is steady."""
    tabled = [s for s in history if s.kernels and (s.get(BUSY) or 0) > 0]
    names = xp.steady_kernels(tabled) if len(tabled) >= policy.min_processes else []
    if not names:
        return None
    share = float(np.median([xp.steady_time(s, names) / sum(s.kernels.values()) for s in tabled]))
    # The rule fails on either of its values, so the quieter one tells the smallest change it catches.
    spreads = [xp.spread(values) for _, values in steady_series(tabled, names)]
    sp = min(spreads, key=lambda one: one.reach(one.catching(policy.device_effect, policy.history_k)))
    return Sensitivity(case_id, sp.n, "steady", sp.noise,
                       sp.reach(sp.catching(policy.device_effect, policy.history_k)), policy.device_effect, share)


# Causes are read only off a history this long: a few processes show no shape.
CAUSE_MIN_PROCESSES = 6
# Busy noise this many times the summed kernel time's: what spreads the step is how its kernels overlap.
OVERLAP_RATIO = 1.5
# Device time moving with the wall time this closely (correlation of their logs): the host sets the step's gaps.
HOST_CORRELATION = 0.7
# A kernel at two speeds: both groups hold this many processes, lie this many of their own deviations apart, and
# differ by at least this share of the step.
MODE_PROCESSES, MODE_SEPARATION, MODE_STEP_SHARE = 3, 4.0, 0.01
# SM clocks whose processes differ by more than this share of their median.
CLOCK_SPREAD = 0.02
# Cards that differ: this many ran the case more than once, and their medians spread this many times as much as the
# processes on one card do (both as 1.4826 x MAD of the logs, with no floor: the floor would hide the one-card noise).
CARD_REPEATS, CARD_RATIO = 3, 1.5


def noise_causes(history: Sequence[ProcessSummary], cards: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Why a case's device time spreads between processes, one phrase per cause its history shows.

    Overlap that varies by process (busy time spreads, summed kernel time does not), a step the host sets (busy
    time moves with wall time: launch gaps of a short step, or overlap on a slower host), a kernel that runs at two
    speeds in the same kernel mix, SM clocks that differ, and cards that differ (``cards``: each stored file's name ->
    the GPU's uuid). Each needs ``CAUSE_MIN_PROCESSES`` processes.
    """
    timed = [s for s in history if (s.get(BUSY) or 0) > 0]
    if len(timed) < CAUSE_MIN_PROCESSES:
        return ()
    busy = np.log([s.get(BUSY) or 0.0 for s in timed])
    found: list[str] = []
    works = [s.get(WORK) or 0.0 for s in timed]
    if all(w > 0 for w in works):
        b, w = xp.spread(np.exp(busy).tolist()).noise, xp.spread(works).noise
        if b > OVERLAP_RATIO * w and b > 2 * xp.NOISE_FLOOR:
            r = _correlation(busy, np.log(works))
            found.append(f"how its kernels overlap varies by process: its busy time spreads {b:.1%}, its summed kernel "
                         f"time {w:.1%} (r = {r:+.2f}); judging the summed time alone would hide a lost overlap")
    walls = [s.get(WALL) or 0.0 for s in timed]
    if all(w > 0 for w in walls) and (r := _correlation(busy, np.log(walls))) >= HOST_CORRELATION:
        step = float(np.exp(np.median(busy)))
        found.append(f"its device time moves with its wall time (r = {r:+.2f}): the host sets the gaps of its "
                     f"{show(BUSY, step, unit=True)} step")
    found += _two_speed_kernels(timed, float(np.exp(np.median(busy))))
    clocks = [c for s in timed if (c := s.sm_clock_mhz)]
    if len(clocks) >= CAUSE_MIN_PROCESSES and (max(clocks) - min(clocks)) > CLOCK_SPREAD * float(np.median(clocks)):
        found.append(f"its SM clock differed between processes: {min(clocks):.0f}-{max(clocks):.0f} MHz")
    if cards and (differ := _cards_differ(timed, cards)) is not None:
        found.append(differ)
    return tuple(found)


def _cards_differ(history: Sequence[ProcessSummary], cards: Mapping[str, str]) -> str | None:
    """The phrase for a history whose cards' medians spread ``CARD_RATIO`` times as much as the processes on one card,
    on its steady kernels' time where it has some (what it is judged on), else its summed kernel time; else None."""
    names = xp.steady_kernels([s for s in history if s.kernels])
    what, value = (("its steady kernels' time", lambda s: xp.steady_time(s, names)) if names
                   else ("its summed kernel time", lambda s: s.get(WORK) or 0.0))
    by_card: dict[str, list[float]] = {}
    for s in history:
        if (card := cards.get(s.source.split("#")[0])) and (v := value(s)) > 0:
            by_card.setdefault(card, []).append(float(np.log(v)))
    repeated = [np.array(v) for v in by_card.values() if len(v) >= 2]
    if len(repeated) < CARD_REPEATS:
        return None
    within = xp.log_mad(np.concatenate([v - np.median(v) for v in repeated]))
    between = xp.log_mad(np.array([np.median(v) for v in by_card.values()]))
    if between <= CARD_RATIO * within or between <= xp.NOISE_FLOOR:
        return None
    return (f"{what} differs between cards: the medians of its {len(by_card)} cards spread {between:.1%}, its "
            f"processes on one card {within:.1%} ({len(repeated)} cards ran it more than once); a runner that stays on "
            f"one card sees the smaller")


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r of two series (0 where either is flat)."""
    return 0.0 if np.std(a) == 0 or np.std(b) == 0 else float(np.corrcoef(a, b)[0, 1])


def _two_speed_kernels(history: Sequence[ProcessSummary], step: float, shown: int = 3) -> list[str]:
    """The ``shown`` kernels that ran at two speeds across ``history`` and moved the step most, the largest first;
    the processes of the smaller group are named where they are few (one machine, one night)."""
    found: list[tuple[float, str]] = []
    for name in dict.fromkeys(n for s in history for n in s.kernels):
        values = np.array([s.kernels.get(name, 0.0) for s in history])
        if values.min() <= 0:
            continue  # a kernel some processes did not run is a kernel-mix mode: nearest_mode's part
        slow = _slow_group(np.log(values))
        if slow is None:
            continue
        lo_ms, hi_ms = float(np.median(values[~slow])), float(np.median(values[slow]))
        if (hi_ms - lo_ms) / step < MODE_STEP_SHARE:
            continue
        fewer = slow if slow.sum() <= (~slow).sum() else ~slow
        few = fewer.sum() <= MODE_PROCESSES + 1
        named = f" ({', '.join(s.source for s, f in zip(history, fewer) if f)})" if few else ""
        found.append((hi_ms - lo_ms, f"{kernel_label(name)} runs at two speeds: {show(BUSY, lo_ms, unit=True)} in "
                      f"{int((~slow).sum())} processes, {show(BUSY, hi_ms, unit=True)} in {int(slow.sum())} "
                      f"({hi_ms / lo_ms - 1:+.0%}, {(hi_ms - lo_ms) / step:.1%} of the step){named}"))
    return [text for _, text in sorted(found, reverse=True)[:shown]]


def kernel_label(name: str) -> str:
    """A kernel's name short enough for a line: a CUTLASS kernel by its configuration, others up to their template."""
    wrapped = re.match(r"cutlass::Kernel2?<(\w+)", name)
    return wrapped.group(1) if wrapped else re.split(r"[<(]", name, maxsplit=1)[0][:60]


def _slow_group(logs: np.ndarray) -> np.ndarray | None:
    """Which of ``logs`` form the slower of two groups with the least spread within them, where the groups stand
    ``MODE_SEPARATION`` of their own deviations apart and each holds ``MODE_PROCESSES``; else None."""
    x = np.sort(logs)
    best: tuple[float, int] | None = None
    for cut in range(MODE_PROCESSES, x.size - MODE_PROCESSES + 1):
        within = float(((x[:cut] - x[:cut].mean()) ** 2).sum() + ((x[cut:] - x[cut:].mean()) ** 2).sum())
        if best is None or within < best[0]:
            best = (within, cut)
    if best is None:
        return None
    within, cut = best
    sd = (within / max(x.size - 2, 1)) ** 0.5
    if float(x[cut:].mean() - x[:cut].mean()) <= MODE_SEPARATION * max(sd, 1e-12):
        return None
    return logs >= x[cut]


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
    # A climb back to a level the history held before is no drift: the level now must also be past the median of
    # every process before the change.
    if float(np.mean(series[start:])) < (1.0 + floor) * float(np.median(series[:start])):
        return ""
    what = "drift" if len(trailing) > 1 or trailing[0].kind == "drift" else "step"
    return (f"{what} of {total - 1:+.1%} in device time over the history's last {len(series) - start} of "
            f"{len(series)} processes (change-point check)")
