"""Judging across processes: this process against the spread of its history's process medians.

Within a process a case's rounds agree to ~0.1%, so a test on rounds finds every between-process wobble
"significant". Here each stored process of the case's history is one value (its median), and:

- the history's center is the median of those values, its noise the robust spread between them (1.4826 x the
  median absolute deviation of their logs: a relative standard deviation that one odd process cannot inflate;
  of fewer than five processes, or of a metric with a long tail such as host overhead, at least their logs'
  standard deviation), never below ``NOISE_FLOOR``;
- the threshold is ``max(floor, k * noise * sqrt(1 + 1/n))`` for ``n`` processes: a prediction interval for one
  new process, never tighter than the policy's floor (3% for device time);
- this process's value gets a bootstrap interval of its rounds' median; regressed when the whole interval lies
  beyond the threshold on the worse side, unchanged when it lies inside the band, ambiguous otherwise (then the
  case is timed once more and decided on the pooled rounds);
- a change of just the threshold lands beyond it half the time. A rule that is to catch the floor itself (``catch``:
  the steady kernels) calls at ``Z_CATCH`` noises below it, never below ``k`` noises: a change of the floor is then
  caught 19 times in 20 where the history is quiet enough (``Spread.reach``).

Each kernel of the cuDNN side is judged the same way against its own history, in absolute time per step: it
regressed when it appeared, or grew beyond its own between-process noise, by at least ``floor`` of the step (a
kernel left out of a stored process's cut table ran there for at most its smallest row: ``stored_time``).
A process whose kernel mix settled in another mode (another GEMM, another cuDNN algorithm) is matched to the
history's processes of its nearest mode first, once that mode was seen in enough stored processes (reported
ones included: a mode that made a case report every night is history once it is common). Pure: numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from pytest_rnnperf.judge.compare import Comparison, Verdict
from pytest_rnnperf.model.process import FOLDED, KERNEL, ProcessSummary
from pytest_rnnperf.model.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Interval

# A steady case's cuDNN device time moved < 0.5% between H100 processes (evidence README): the noise of a
# history is never taken as smaller, however alike its few processes came out.
NOISE_FLOOR = 0.005
# Fewer processes than this have their noise read off their standard deviation too (see ``spread``).
SMALL_HISTORY = 5
# A kernel belongs to a process's mode when it takes at least this share of the step.
MODE_SHARE = 0.02
# A kernel every stored process ran within this of each other (the logs' deviation) is steady (``steady_kernels``):
# replayed over the H100 history, such kernels' sum, called at ``Spread.catching``, failed a 3% slower step in 2,083
# of 2,307 held-out processes and raised 1 alarm (evidence README, twentieth).
STEADY_NOISE = 0.01
# A change this many of its history's noises beyond the line is caught 19 times in 20 (one-sided normal quantile).
Z_CATCH = 1.645


@dataclass(frozen=True)
class Spread:
    """A metric over a history's processes: center (median), relative noise between processes, how many."""

    center: float
    noise: float
    n: int

    def threshold(self, floor: float, k: float) -> float:
        """The smallest change this history can tell from its own noise, never below ``floor``."""
        return max(floor, self.guard(k))

    def guard(self, k: float) -> float:
        """``k`` times the noise of one new process against this history: no line is drawn nearer than this."""
        return k * self.noise * math.sqrt(1.0 + 1.0 / max(self.n, 1))

    def catching(self, floor: float, k: float) -> float:
        """The line at which a change of ``floor`` is caught 19 times in 20: ``Z_CATCH`` noises below it, never
        nearer than ``guard``."""
        return max(floor - Z_CATCH * self.noise, self.guard(k))

    def reach(self, line: float) -> float:
        """The smallest change caught 19 times in 20 when called at ``line``."""
        return line + Z_CATCH * self.noise


def log_mad(logs: np.ndarray) -> float:
    """1.4826 x the median absolute deviation of ``logs``: a robust relative spread, with no floor."""
    return float(1.4826 * np.median(np.abs(logs - np.median(logs))))


def spread(values: Sequence[float], tails: bool = False) -> Spread:
    """Center and robust relative noise of process medians (all > 0); with ``tails``, at least their logs' deviation."""
    logs = np.log(np.asarray(values, dtype=float))
    mid = float(np.median(logs))
    mad = log_mad(logs)
    # Of fewer than five processes the median deviation drops the widest (of three it is the smaller outer one):
    # three H100 processes of a JAX bidirectional LSTM read 0.4% where they spread 2.5%. There the logs' deviation.
    if 1 < len(logs) and (tails or len(logs) < SMALL_HISTORY):
        mad = max(mad, float(np.std(logs, ddof=1)))
    return Spread(center=math.exp(mid), noise=max(mad, NOISE_FLOOR), n=len(logs))


def median_interval(samples: Sequence[float], confidence: float = 0.95, seed: int = DEFAULT_SEED,
                    n_resamples: int = DEFAULT_RESAMPLES) -> Interval:
    """The median of ``samples`` with a percentile-bootstrap interval (the range itself for < 3 samples)."""
    x = np.asarray(samples, dtype=float)
    est = float(np.median(x))
    if x.size < 3:
        return Interval(est, float(x.min()), float(x.max()), confidence)
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, x.size, size=(n_resamples, x.size))], axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return Interval(est, min(float(low), est), max(float(high), est), confidence)


def speeds(history: Sequence[float], sources: Sequence[str], gap: float) -> list[list[tuple[float, str]]]:
    """``history``'s values (> 0) with their stored files' names, ascending, in groups split wherever two neighbours
    lie more than ``gap`` apart (relative): the speeds a metric settled at."""
    ordered = sorted(zip(history, sources))
    groups: list[list[tuple[float, str]]] = [[ordered[0]]] if ordered else []
    for (before, _), (value, source) in zip(ordered, ordered[1:]):
        if math.log(value / before) > gap:
            groups.append([])
        groups[-1].append((value, source))
    return groups


def stored_speed(history: Sequence[float], sources: Sequence[str], value: float, *, floor: float, k: float,
                 min_runs: int, higher_is_better: bool = False) -> Spread | None:
    """The slower speed of ``history`` that ``value`` lies at, where the history knows one; else None.

    A speed is a group of its processes (``speeds``, split at half of ``floor``) that lies wholly on the worse side
    of their median and was seen in ``min_runs`` stored runs or more (``sources``: each process's file, "#2" for
    a file's extra processes; one odd card recorded three times is not a speed). ``value`` lies at it within the
    threshold the group's own spread draws (``Spread.threshold``). A kernel that runs at several speeds by process
    (a cuBLAS GEMM at 3.7 or 5.3 ms) has the step's median at its fast speed and a median deviation that ignores
    the slow one: a night at the slow speed would read as a regression the history has already seen many times.
    """
    if value <= 0 or not len(history):  # nothing ran, or nothing stored: no speed to lie at
        return None
    center = float(np.median(history))
    for group in speeds(history, sources, floor / 2):
        values = [v for v, _ in group]
        worse = max(values) < center if higher_is_better else min(values) > center
        if not worse or len({source.split("#")[0] for _, source in group}) < min_runs:
            continue
        sp = spread(values)
        if abs(math.log(value / sp.center)) <= math.log1p(sp.threshold(floor, k)):
            return sp
    return None


def across(metric: str, history: Sequence[float], current: Sequence[float], *, floor: float, k: float,
           higher_is_better: bool = False, confidence: float = 0.95, tails: bool = False,
           catch: bool = False, sources: Sequence[str] = (), min_runs: int = 0) -> Comparison:
    """This process's samples against the history's process medians (see the module's rule; ``tails``: ``spread``;
    ``catch``: called at ``Spread.catching``). With ``sources`` (each value's stored file) and ``min_runs``, a
    process beyond the threshold at a slower speed the history knows (``stored_speed``) is unchanged."""
    sp = spread(history, tails)
    t = sp.catching(floor, k) if catch else sp.threshold(floor, k)
    iv = median_interval(current, confidence)
    ratio = Interval(iv.estimate / sp.center, iv.low / sp.center, iv.high / sp.center, confidence)
    upper, lower = 1.0 + t, 1.0 / (1.0 + t)
    above, below = ratio.low > upper, ratio.high < lower
    worse, better = (below, above) if higher_is_better else (above, below)
    if worse:
        verdict = Verdict.REGRESSED
    elif better:
        verdict = Verdict.IMPROVED
    elif lower <= ratio.low and ratio.high <= upper:
        verdict = Verdict.UNCHANGED
    else:
        verdict = Verdict.AMBIGUOUS
    why = ""
    if verdict in (Verdict.REGRESSED, Verdict.AMBIGUOUS) and min_runs and len(sources) == len(history) and (
            known := stored_speed(history, sources, iv.estimate, floor=floor, k=k, min_runs=min_runs,
                                  higher_is_better=higher_is_better)) is not None:
        verdict, why = Verdict.UNCHANGED, speed_note(known, sp)
    return Comparison(metric=metric, baseline_median=sp.center, current_median=iv.estimate, ratio=ratio,
                      p_value=None, min_effect=t, verdict=verdict, higher_is_better=higher_is_better,
                      processes=sp.n, noise=sp.noise, why=why)


# How a comparison let pass at a stored speed begins its reason (``speed_note``); the summary lists such cases.
AT_A_SPEED = "at a speed "


def speed_note(known: Spread, history: Spread) -> str:
    """Why a change is let pass: the stored speed it lies at, and how many processes ran there."""
    return (f"{AT_A_SPEED}{known.n} of the {history.n} stored processes ran, {known.center / history.center - 1:+.1%} "
            f"on their median")


def at_stored_speed(found: Comparison | None) -> bool:
    """``found`` was let pass because it lies at a slower speed its history knows (``stored_speed``)."""
    return found is not None and found.verdict is Verdict.UNCHANGED and found.why.startswith(AT_A_SPEED)


def reach(found: Comparison) -> float:
    """The smallest change a comparison across processes catches 19 times in 20 (``Spread.reach`` of its line)."""
    return Spread(found.baseline_median, found.noise or 0.0, found.processes).reach(found.min_effect)


def steady_kernels(history: Sequence[ProcessSummary], limit: float = STEADY_NOISE) -> list[str]:
    """The kernels every process of ``history`` ran, each within ``limit`` between them.

    The logs' deviation decides, not the median one: a GEMM at 2.7 ms in 19 H100 processes and 3.1-3.5 ms in 10
    read 0.8% by its median deviation, and its sum with the others raised 10 false alarms in a replay.
    """
    names = dict.fromkeys(n for s in history for n in s.kernels if n != FOLDED)
    return [n for n in names if all(s.kernels.get(n, 0.0) > 0 for s in history)
            and spread([s.kernels[n] for s in history], tails=True).noise <= limit]


def steady_time(summary: ProcessSummary, names: Sequence[str]) -> float:
    """A process's summed time per step of the kernels ``names`` (``steady_kernels``, each of which it ran)."""
    return sum(summary.kernels[n] for n in names)


def shares(summary: ProcessSummary) -> dict[str, float]:
    """Each kernel's share of this process's step (its summed kernel time, else its busy time)."""
    step = summary.get("work") or summary.get("busy") or 0.0
    return {name: t / step for name, t in summary.kernels.items()} if step > 0 else {}


def similarity(a: ProcessSummary, b: ProcessSummary) -> float:
    """How alike two kernel mixes are: of the kernels that take ``MODE_SHARE`` of a step in either, the part both ran
    alike. A kernel differs where one process gave it less than half the share the other did, so one near
    ``MODE_SHARE`` in both (2.07% of the step here, 1.97% there) does not split a mix in two."""
    sa, sb = shares(a), shares(b)
    counted = [n for n in sa.keys() | sb.keys() if max(sa.get(n, 0.0), sb.get(n, 0.0)) >= MODE_SHARE]
    differ = sum(1 for n in counted if 2 * min(sa.get(n, 0.0), sb.get(n, 0.0)) < max(sa.get(n, 0.0), sb.get(n, 0.0)))
    return 1.0 - differ / len(counted) if counted else 1.0


def nearest_mode(history: Sequence[ProcessSummary], current: ProcessSummary, min_processes: int) -> list[ProcessSummary]:
    """The history's processes whose kernel mix is most like this one's, where that mode is known; else the clean ones.

    A mix that settles in several modes (another GEMM kernel in some processes) would otherwise read as a
    kernel that appeared and another that vanished. A mode is known once ``min_processes`` stored processes
    settled in it, the same count a case's history needs to be judged across processes at all: two could be
    one odd card twice. A reported process (its case regressed, not failed) counts only where most clean
    processes ran another mix, and stands for its mode only where fewer than ``min_processes`` clean ones do:
    a slowdown reported in a flagged window, in the mix the clean processes know, never joins them. A failed
    run is never kept, so it teaches nothing.
    """
    clean = [s for s in history if not s.reported]

    def new_mix(report: ProcessSummary) -> bool:
        """Most clean processes ran another kernel mix than this report."""
        return 2 * sum(1 for s in clean if similarity(s, report) < 1.0) > len(clean)

    usable = [s for s in history if not s.reported or new_mix(s)]
    if not usable:
        return []
    alike = [similarity(s, current) for s in usable]
    near = [s for s, v in zip(usable, alike) if v == max(alike)]
    near_clean = [s for s in near if not s.reported]
    if len(near_clean) >= min_processes:
        return near_clean
    return near if len(near) >= min_processes else clean


def stored_time(summary: ProcessSummary, name: str, listed: set[str]) -> float:
    """A kernel's time per step in a stored process; where its table left the kernel out, at most its smallest row.

    A stored table keeps a side's longest kernels and folds the rest into one row, so a kernel missing from a folded
    table ran there for up to its smallest row's time, not for none. That bound counts only for a kernel some other
    stored process of the case listed: one that no process listed is new, judged at its whole time.
    """
    if name in summary.kernels:
        return summary.kernels[name]
    rows = [t for n, t in summary.kernels.items() if n != FOLDED]
    return min(rows) if FOLDED in summary.kernels and rows and name in listed else 0.0


def kernels(history: Sequence[ProcessSummary], current: ProcessSummary, rounds: Mapping[str, Sequence[float]], *,
            floor: float, k: float, confidence: float = 0.95, min_runs: int = 0) -> list[Comparison]:
    """Each kernel of the cuDNN side against its own history: those that moved by ``floor`` of the step or more.

    Times are absolute (seconds per step): a kernel that appeared has no history of its own, and a growth is
    weighed by the share of the step it costs, not by its own relative change. A kernel's threshold is the
    larger of ``floor`` of the step and ``k`` times its own between-process noise. With ``min_runs``, a kernel that
    grew to a slower speed it ran at in that many stored runs (``stored_speed``) has not moved.
    """
    # Shares are of the step the user waits for: the device busy time (kernels on other streams overlap in it).
    step = float(np.median([s.get("busy") or s.get("work") or 0.0 for s in history]))
    if step <= 0:
        return []
    names = dict.fromkeys([*current.kernels, *(n for s in history for n in s.kernels)])
    listed = {n for s in history for n in s.kernels}
    out = []
    for name in names:
        past = [stored_time(s, name, listed) for s in history]
        now = list(rounds.get(name) or [current.kernels.get(name, 0.0)])
        center = float(np.median(past))
        present = [v for v in past if v > 0]
        # Its own noise, from the processes where it ran; a kernel absent from most has only the floor.
        noise = spread(present).noise if len(present) >= 3 else NOISE_FLOOR
        allowed = max(floor * step, k * noise * center * math.sqrt(1.0 + 1.0 / len(past)))
        iv = median_interval(now, confidence)
        # Called on the estimate, the whole interval on that side of no change (within a process a kernel's
        # rounds agree closely; a kernel of just the floor's size is then caught, not left ambiguous).
        if iv.estimate - center >= allowed and iv.low > center:
            # Its speeds are the kernel's own times, so the floor (a share of the step) becomes a share of them.
            ran = [(v, s.source) for s, v in zip(history, past) if v > 0]
            if min_runs and center > 0 and stored_speed([v for v, _ in ran], [src for _, src in ran], iv.estimate,
                                         floor=floor * step / center, k=k, min_runs=min_runs) is not None:
                continue
            verdict = Verdict.REGRESSED
        elif center - iv.estimate >= allowed and iv.high < center:
            verdict = Verdict.IMPROVED
        else:
            continue
        # The ratio is of the whole step: how much of it this kernel added or took away.
        ratio = Interval(1 + (iv.estimate - center) / step, 1 + (iv.low - center) / step,
                         1 + (iv.high - center) / step, confidence)
        # Where a cut table stood in for the kernel's time, "before" is an upper bound: say so beside the numbers.
        cut = sum(1 for s, v in zip(history, past) if name not in s.kernels and v > 0)
        out.append(Comparison(metric=KERNEL + name, baseline_median=center, current_median=iv.estimate, ratio=ratio,
                              p_value=None, min_effect=allowed / step, verdict=verdict, processes=len(past),
                              noise=noise if len(present) >= 3 else None,
                              why=f"under the cut of {cut} stored kernel tables: counted at their smallest row"
                              if cut else ""))
    return sorted(out, key=lambda c: -abs(c.ratio.estimate - 1))
