"""The run's time budget (``--rnnperf-budget``): how long each case may spend on timed rounds, steadiest cut first.

Only the timed phases can give: building a pair, proving its path and checking parity cost what they cost.
Before each cuDNN case the budget sets the time left against the cases still to come, each priced at what the
cases so far cost (the fixed phases and the timed ones apart). While that fits, a case times as configured.
Once it does not, a case whose history resolves its floor (``steady``) runs its minimum
rounds only, and the others share what is left; every cut is kept by case, for the summary. Pure: the clock is
a seam, no pytest, no framework.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

# The phases of a case's ``cost_s`` that the budget can shorten; the rest are fixed.
TIMED = ("wall", "energy", "device", "remeasure")
FIXED = ("build", "proof", "parity")


@dataclass
class Budget:
    """Minutes the whole run may take, and what it has spent and cut so far."""

    total_s: float
    cases: int  # cuDNN cases collected: how many are still to come
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)
    done: int = 0
    fixed_s: float = 0.0
    timed_s: float = 0.0
    cuts: dict[str, str] = field(default_factory=dict)  # case id -> what it got instead of its rounds

    def __post_init__(self) -> None:
        """The run starts when the budget is made, unless told otherwise."""
        if self.started < 0:
            self.started = self.clock()

    def left(self) -> float:
        """Seconds of the budget not yet spent (negative once over)."""
        return self.total_s - (self.clock() - self.started)

    def allowance(self, case_id: str, steady: bool, cap_s: float) -> float:
        """Seconds of timed rounds ``case_id`` may spend: ``cap_s`` while the run is on time, less once it is not.

        Before the first case has cost anything there is nothing to price the rest by: it gets ``cap_s``.
        """
        if self.done == 0:
            return cap_s
        to_come = max(1, self.cases - self.done)
        share = (self.left() - self.fixed_s / self.done * to_come) / to_come
        if share >= self.timed_s / self.done:
            return cap_s
        if steady:
            self.cuts[case_id] = "minimum rounds"
            return 0.0
        given = max(0.0, min(cap_s, share))
        self.cuts[case_id] = "minimum rounds" if given == 0 else f"{given:.1f} s of rounds"
        return given

    def spent(self, cost_s: Mapping[str, float]) -> None:
        """Count one finished cuDNN case's phases (its record's ``cost_s``)."""
        self.done += 1
        self.fixed_s += sum(cost_s.get(p, 0.0) for p in FIXED)
        self.timed_s += sum(cost_s.get(p, 0.0) for p in TIMED)

    def line(self, wall_s: float) -> str:
        """e.g. "budget 6 min: 43 case(s) cut to their minimum rounds, 5 to fewer rounds (steadiest first); run 5:41"."""
        minutes = f"{self.total_s / 60:g} min"
        took = f"run {int(wall_s // 60)}:{int(wall_s % 60):02d}"
        over = "" if wall_s <= self.total_s else (f", over by {wall_s - self.total_s:.0f} s: building, proving and "
                                                   "checking the cases and the claims cost more than it leaves")
        if not self.cuts:
            return f"budget {minutes}: no case cut; {took}{over}"
        least = sum(1 for c in self.cuts.values() if c == "minimum rounds")
        fewer = len(self.cuts) - least
        parts = [f"{least} case(s) cut to their minimum rounds"] if least else []
        parts += [f"{fewer} to fewer rounds"] if fewer else []
        return f"budget {minutes}: {', '.join(parts)} (steadiest first); {took}{over}"
