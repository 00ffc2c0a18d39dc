"""The run's time budget (``--rnnperf-budget``): how long each case may spend on timed rounds, steadiest cut first.

Only the timed phases can give: building a pair, proving its path and checking parity cost what they cost.
Before each cuDNN case the budget sets the time left against the cases still to come: their fixed phases priced at
what their stored records say (``RnnperfSession.stored_cost``: a first night's builds as stored from scratch), each
scaled, once three cases of its framework have run, by how tonight's compare with theirs (the mean of the cases so
far where nothing is stored); their timed rounds as configured, as stored; and the time the cases so far spent
outside their phases. Once a case's full check is due to a change (``owe``), the claims and parity tests after the
cases owe one test of each kind that no budget defers: the cases keep back what such a test took when last stored
(``owed_s``).
While that fits, a case times as configured.
Once it does not, a case whose history resolves its floor (``steady``) runs its minimum
rounds only, and the others share what is left; every cut is kept by case, for the summary. Before the run,
``forecast`` prices the collected cases' fixed phases and least timed rounds from their newest stored records, and the
time the newest stored nights spent outside them: where those exceed the budget, the run says so at its start and every
case, the first included, runs its minimum rounds. Pure: the clock is a seam, no pytest, no framework.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

# The phases of a case's ``cost_s`` that the budget can shorten; the rest are fixed.
TIMED = ("wall", "energy", "device", "remeasure")
FIXED = ("build", "proof", "parity")
# What a run keeps for its ending after the last case (``Budget.ending_s``): pytest's own time counts until the reports
# are written, which the budget's clock never sees.
ENDING_S = 5.0
# Of the budget, the share a run leaves unplanned: its prices are estimates, and a night planned to end on the second
# ends a few seconds past it; planned this much short, their error still ends it within.
MARGIN = 0.02
# Cases of a framework run before tonight's fixed costs of its cases are compared with their stored ones: a process's
# first case of each framework pays its import and CUDA context, which the stored run paid in whichever case came first.
SCALE_AFTER = 3


def fixed_of(cost_s: Mapping[str, float]) -> float:
    """Seconds of a record's ``cost_s`` spent in the phases the budget cannot shorten."""
    return sum(cost_s.get(p, 0.0) for p in FIXED)


def timed_of(cost_s: Mapping[str, float]) -> float:
    """Seconds of a record's ``cost_s`` spent in timed rounds, the phases the budget can shorten."""
    return sum(cost_s.get(p, 0.0) for p in TIMED)


@dataclass(frozen=True)
class Forecast:
    """The collected cases' fixed phases and least timed rounds as stored, where they exceed the budget."""

    budget_s: float
    fixed_s: float
    # Each fixed phase with its seconds and its two costliest frameworks' seconds, costliest phase first.
    phases: tuple[tuple[str, float, tuple[tuple[str, float], ...]], ...]
    sources: tuple[str, ...]  # the stored files the costs come from, by name, newest (highest number) first
    unknown: int  # collected cases with no stored cost
    workers: int = 1  # pytest-xdist workers sharing them
    scratch: int = 0  # cases priced at a build from scratch: the compile cache was empty when the run started
    timed_s: float = 0.0  # the timed rounds at the least each case's stored records spent on them
    ahead: int = 0  # of the ``scratch`` cases, those compiled ahead, behind the other cases (measure/ahead.py)
    outside_s: float = 0.0  # the time outside the cases' phases, at what the newest stored runs spent per case

    def text(self) -> str:
        """e.g. "the collected cases' fixed costs come to 4.4 min in 0028_run.json (build 3.1 min: keras_jax 1.5 min,
        jax 54 s; parity 48 s); 2 case(s) have no stored cost", after "the compile cache is empty, so 21 case(s)
        compile from scratch: " on a first night."""
        parts = "; ".join(f"{phase} {span(s)}: " + ", ".join(f"{fw} {span(t)}" for fw, t in frameworks)
                          for phase, s, frameworks in self.phases)
        files = ", ".join(self.sources[:2]) + (f" and {len(self.sources) - 2} more" if len(self.sources) > 2 else "")
        unknown = f"; {self.unknown} case(s) have no stored cost" if self.unknown else ""
        timed = f", and their timed rounds at the least stored {span(self.timed_s)}" if self.timed_s else ""
        timed += (f", and {span(self.outside_s)} outside them (collecting, starting, each test's setup) as stored"
                  if self.outside_s else "")
        shared = f", shared by {self.workers} pytest-xdist workers" if self.workers > 1 else ""
        ahead = f" ({self.ahead} of them ahead, behind the other cases)" if self.ahead else ""
        scratch = (f"the compile cache is empty, so {self.scratch} case(s) compile from scratch{ahead}: " if self.scratch
                   else "")
        return (f"{scratch}the collected cases' fixed costs come to {span(self.fixed_s)}{shared} in {files} ({parts})"
                f"{timed}{unknown}")

    def line(self) -> str:
        """The one line the run starts with: the budget cannot hold the fixed costs, and what the run does instead."""
        return (f"rnnperf: --rnnperf-budget={self.budget_s / 60:g} cannot hold: {self.text()}; the run goes on, its "
                f"cases cut to their minimum rounds while it is behind")


def span(seconds: float) -> str:
    """Seconds as the forecast names them: minutes from one minute on, else seconds (two figures)."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.2g} s"


def forecast(costs: Mapping[str, tuple[str, Mapping[str, float]] | None], budget_s: float,
             workers: int = 1, scratch: int = 0, least_timed: Mapping[str, float] | None = None,
             frameworks: Mapping[str, str] | None = None, ahead: int = 0, outside_s: float = 0.0,
             ending_s: float = 0.0) -> Forecast | None:
    """What the collected cases' fixed phases cost where that, with their least stored timed rounds and the time
    outside them (``outside_s``), is more than ``budget_s`` less its margin and ending (``ending_s``), else None.

    ``workers``: pytest-xdist workers sharing the cases, each paying its share of the fixed phases in the same
    minutes, so the budget holds ``workers`` times as much. ``scratch``: how many of ``costs`` are builds from
    scratch (an empty compile cache), ``ahead`` of them compiled ahead, for the line.

    ``costs``: each collected case id -> the name of its newest stored file holding it and that record's ``cost_s``
    (None, or an empty ``cost_s``: no stored cost). ``least_timed``: case id -> the least seconds any of its stored
    records spent in timed rounds, near what its minimum rounds take (a record keeps the rounds it ran, not what its
    minimum would take), so the forecast is a floor. ``frameworks``: case id -> its framework, where the id does not
    start with it (a test of a team's own model, named by its test id).
    """
    known = {case: found for case, found in costs.items() if found is not None and found[1]}
    by_phase: dict[str, dict[str, float]] = {phase: {} for phase in FIXED}
    for case, (_, cost_s) in known.items():
        framework = (frameworks or {}).get(case) or case.split("-", 1)[0]
        for phase in FIXED:
            if cost_s.get(phase, 0.0) > 0:
                by_phase[phase][framework] = by_phase[phase].get(framework, 0.0) + cost_s[phase]
    fixed_s = sum(sum(frameworks.values()) for frameworks in by_phase.values())
    timed_s = sum((least_timed or {}).get(case, 0.0) for case in costs)
    # Nothing stored: nothing said.
    if not known or fixed_s + timed_s + outside_s <= (budget_s * (1 - MARGIN) - ending_s) * workers:
        return None
    phases = sorted(((phase, sum(fws.values()), _costliest(fws.items())) for phase, fws in by_phase.items() if fws),
                    key=lambda p: -p[1])
    sources = tuple(sorted({source for source, _ in known.values()}, reverse=True))
    return Forecast(budget_s, fixed_s, tuple(phases), sources, len(costs) - len(known), workers, scratch, timed_s,
                    ahead, outside_s)


def _costliest(items: Iterable[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """The two costliest (framework, seconds) of a phase, costliest first."""
    return tuple(sorted(items, key=lambda item: -item[1])[:2])


@dataclass
class Budget:
    """Minutes the whole run may take, and what it has spent and cut so far."""

    total_s: float
    cases: int  # cuDNN cases this process is to time: a pytest-xdist worker's share of those collected
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)
    done: int = 0
    fixed_s: float = 0.0
    timed_s: float = 0.0
    cuts: dict[str, str] = field(default_factory=dict)  # case id -> what it got instead of its rounds
    forecast: Forecast | None = None  # the stored fixed costs, where they alone exceed the budget (``forecast``)
    stored_fixed: Mapping[str, float] = field(default_factory=dict)  # collected case id -> its stored fixed seconds
    # The cases begun so far (``allowance``) or counted (``spent``): a known issue (xfail) that ends without a record
    # is not priced again for the cases after it.
    ran: set[str] = field(default_factory=set)
    counted: set[str] = field(default_factory=set)  # the cases ``spent`` counted
    dropped: set[str] = field(default_factory=set)  # collected cases that do not run tonight (``drop``)
    # Tonight's fixed seconds over the stored, by framework, case by case counted: a night's torch cases say nothing of
    # how its TF builds compare with theirs.
    ratios: dict[str, list[float]] = field(default_factory=dict)
    # Collected case id -> its framework, where its id does not start with it (a model test, named by its test id).
    frameworks: Mapping[str, str] = field(default_factory=dict)
    # Collected case id -> its timed rounds as configured, as stored (``RnnperfSession.full_timed``).
    stored_timed: Mapping[str, float] = field(default_factory=dict)
    first: float | None = None  # when the first case began: the time since, less the cases' phases, lies outside them
    collected: int = 0  # cuDNN cases collected (every worker's), for ``ahead``
    unpriced: int = 0  # of those, the cases no stored record gives a cost
    cache_empty: bool = False  # the compile cache was empty when the run started
    # Collected claims and parity tests no stored run holds an answer for: they run whatever the budget.
    unanswered: int = 0
    # Seconds of one claims and one parity test as last stored: a change makes each night run one of each after the
    # cases, whatever the budget, so the cases leave them that time once a change shows (``owe``).
    owed_s: float = 0.0
    owing: bool = False
    # Seconds kept for the run's ending after its last case: the subprocesses' exit, the summary and its reports.
    ending_s: float = 0.0

    def __post_init__(self) -> None:
        """The run starts when the budget is made, unless told otherwise."""
        if self.started < 0:
            self.started = self.clock()

    def ahead(self) -> str | None:
        """The line the run starts with where it already knows: the stored costs overrun the budget
        (``Forecast.line``), most collected cases have none to price them by (a new GPU model, new cases), or claims
        and parity tests with no stored answer will run whatever the budget (a history older than its claims)."""
        line = self.forecast.line() if self.forecast is not None else self._unforeseen()
        if not self.unanswered:
            return line
        checks = (f"{self.unanswered} claims and parity test(s) have no answer stored on this GPU model, so they run "
                  f"tonight whatever the budget")
        if line is not None:
            return f"{line}; and {checks}"
        return (f"rnnperf: --rnnperf-budget={self.total_s / 60:g} may not hold: {checks}; a kept run "
                f"(--rnnperf-keep-run) stores their answers for the nights after")

    def _unforeseen(self) -> str | None:
        """The line for a run most of whose cases no stored record prices, else None."""
        if self.unpriced * 2 <= self.collected:
            return None
        cache = ", and the compile cache is empty" if self.cache_empty else ""
        return (f"rnnperf: --rnnperf-budget={self.total_s / 60:g} cannot be foreseen: {self.unpriced} of "
                f"{self.collected} collected case(s) have no stored cost on this GPU model{cache}; the run finds out as "
                f"they run, and storing it (--rnnperf-keep-run; --rnnperf-update-baseline for a first baseline) prices the "
                f"next night")

    def left(self) -> float:
        """Seconds of the budget not yet spent, less the run's ending and its margin (negative once over)."""
        return self.total_s * (1 - MARGIN) - self.ending_s - (self.clock() - self.started)

    def drop(self, case_id: str) -> None:
        """A collected case that will not run tonight (its stored answer holds, or it waits for a later night): the
        cases still to come are priced without it."""
        if case_id in self.dropped or case_id in self.ran:
            return
        self.dropped.add(case_id)
        self.cases = max(self.done, self.cases - 1)

    def _to_come(self, case_id: str) -> bool:
        """A collected case that has not begun and is not dropped: the budget still prices it."""
        return case_id not in self.ran and case_id not in self.dropped

    def allowance(self, case_id: str, steady: bool, cap_s: float) -> float:
        """Seconds of timed rounds ``case_id`` may spend: ``cap_s`` while the run is on time, less once it is not.

        Before the first case has cost anything there is nothing to price the rest by: it gets ``cap_s``, unless the
        forecast already knows the fixed phases alone overrun the budget.
        """
        if self.first is None:
            self.first = self.clock()
        given = self._allowance(case_id, steady, cap_s)
        self.ran.add(case_id)  # priced as to come while its allowance is set, not after
        return given

    def _allowance(self, case_id: str, steady: bool, cap_s: float) -> float:
        """``allowance``, before ``case_id`` counts as begun."""
        if not self.behind():
            return cap_s
        if self.done == 0:
            self.cuts[case_id] = "minimum rounds"
            return 0.0
        share = self._share()
        if steady:
            self.cuts[case_id] = "minimum rounds"
            return 0.0
        given = max(0.0, min(cap_s, share))
        self.cuts[case_id] = "minimum rounds" if given == 0 else f"{given:.1f} s of rounds"
        return given

    def behind(self) -> bool:
        """The cases still to come, their timed rounds as configured, do not fit what is left (before the first case:
        the forecast already found the fixed phases alone too long)."""
        if self.done == 0:
            return self.forecast is not None
        return self._share() < self._timed_each()

    def _timed_each(self) -> float:
        """Seconds of timed rounds a case still to come takes as configured: the mean stored of the collected cases
        not yet begun; the mean of the cases so far where nothing is stored."""
        left = [s for case, s in self.stored_timed.items() if self._to_come(case)]
        return sum(left) / len(left) if left else self.timed_s / self.done

    def short(self) -> bool:
        """Work a change asked for (full checks, parity and claims tests) waits for a later night: the budget is
        spent, or the cases still to come already need what is left (``behind``)."""
        return self.left() <= 0 or self.behind()

    def owe(self) -> None:
        """A case's full check is due to a change (or its age): so are the claims and parity tests after the cases,
        one of each kind whatever the budget, and the cases still to come leave them ``owed_s``."""
        self.owing = True

    def fits(self, seconds: float | None) -> bool:
        """Whether work priced at ``seconds`` (None: not priced) ends within what is left of the budget."""
        return seconds is None or seconds <= self.left()

    def _share(self) -> float:
        """Seconds of timed rounds each case still to come may spend, once each has paid its fixed phases and the
        tests owed after the cases theirs."""
        to_come = max(1, self.cases - self.done)
        owed = self.owed_s if self.owing and self.done < self.cases else 0.0
        return (self.left() - owed - (self._fixed_each() + self._outside_each()) * to_come) / to_come

    def _fixed_each(self) -> float:
        """Fixed seconds a case still to come is priced at: the mean stored cost of the collected cases not yet run
        here, each scaled by its framework's median ratio to the stored tonight once ``SCALE_AFTER`` of its cases
        have one; the mean of the cases so far where nothing is stored. A pytest-xdist worker does not know which
        cases it gets: the mean stands for its share."""
        left = [s * self._scale(case) for case, s in self.stored_fixed.items() if self._to_come(case)]
        if not left:
            return self.fixed_s / self.done
        return sum(left) / len(left)

    def _scale(self, case_id: str) -> float:
        """Tonight's median ratio of fixed seconds to the stored for ``case_id``'s framework; 1 until it has
        ``SCALE_AFTER``."""
        ratios = self.ratios.get(self._framework(case_id), [])
        return statistics.median(ratios) if len(ratios) >= SCALE_AFTER else 1.0

    def _framework(self, case_id: str) -> str:
        """The framework of ``case_id``: as given, else its id up to the first ``-``."""
        return self.frameworks.get(case_id) or case_id.split("-", 1)[0]

    def _outside_each(self) -> float:
        """Seconds a case to come spends outside its phases (its test's setup, teardown and checks), at tonight's mean
        so far; a known issue that stored no record counts at its stored price, not as time outside."""
        if self.first is None or not self.ran:
            return 0.0
        unrecorded = sum(self.stored_fixed.get(case, 0.0) for case in self.ran - self.counted)
        return max(0.0, self.clock() - self.first - self.fixed_s - self.timed_s - unrecorded) / len(self.ran)

    def spent(self, cost_s: Mapping[str, float], case_id: str = "") -> None:
        """Count one finished cuDNN case's phases (its record's ``cost_s``)."""
        self.done += 1
        fixed = fixed_of(cost_s)
        self.fixed_s += fixed
        self.timed_s += timed_of(cost_s)
        self.ran.add(case_id)
        self.counted.add(case_id)
        if self.stored_fixed.get(case_id, 0.0) > 0:
            self.ratios.setdefault(self._framework(case_id), []).append(fixed / self.stored_fixed[case_id])

    def line(self, wall_s: float) -> str:
        """e.g. "budget 6 min: 43 case(s) cut to their minimum rounds, 5 to fewer rounds (steadiest first); run 5:41"."""
        minutes = f"{self.total_s / 60:g} min"
        took = f"run {int(wall_s // 60)}:{int(wall_s % 60):02d}"
        over = "" if wall_s <= self.total_s else (f", over by {wall_s - self.total_s:.0f} s: building, proving and "
                                                   "checking the cases and the claims cost more than it leaves")
        over += "" if self.forecast is None else f"; it could not hold: {self.forecast.text()}"
        if not self.cuts:
            return f"budget {minutes}: no case cut; {took}{over}"
        least = sum(1 for c in self.cuts.values() if c == "minimum rounds")
        fewer = len(self.cuts) - least
        parts = [f"{least} case(s) cut to their minimum rounds"] if least else []
        parts += [f"{fewer} to fewer rounds"] if fewer else []
        return f"budget {minutes}: {', '.join(parts)} (steadiest first); {took}{over}"
