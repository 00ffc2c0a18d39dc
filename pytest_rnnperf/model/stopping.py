"""When timed rounds stop: small criteria objects, asked after every round, that say go on or stop and why.

Modelled on NVBench's stopping criteria (``stdrel``: stop once the estimate's relative noise is under a target,
after a minimum of samples, with a timeout) and torch.utils.benchmark's ``adaptive_autorange`` (grow the sample
until its IQR / median is small enough or a time limit passes). A criterion sees the samples so far (one
sequence per side, all of one length: the rounds) and a clock of the seconds spent; it reads that clock only
when it needs to, so a fake clock in a test is read as often as before. Wall rounds and device rounds run
through one loop (``measure.rounds.sample``) with whichever criterion they are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from pytest_rnnperf.model.stats import median_noise

# Why a sampling stopped: the words a record and its notes use.
NOISE = "noise target reached"
ROUNDS = "max rounds"
BUDGET = "time budget"

Elapsed = Callable[[], float]  # seconds spent since the sampling began


@dataclass(frozen=True)
class Decision:
    """Go on (``stop`` False), or stop and why (one of NOISE, ROUNDS, BUDGET)."""

    stop: bool
    reason: str = ""


GO = Decision(False)


def rounds_of(sides: Sequence[Sequence[float]]) -> int:
    """Rounds taken so far: every side holds one sample per round."""
    return min((len(s) for s in sides), default=0)


class Criterion(Protocol):
    """Whether timed rounds may stop, given the samples so far and the seconds spent."""

    def decide(self, sides: Sequence[Sequence[float]], elapsed: Elapsed) -> Decision:
        """Go on, or stop and why."""


@dataclass(frozen=True)
class MaxRounds:
    """Stop after ``rounds`` rounds: the cap."""

    rounds: int

    def decide(self, sides: Sequence[Sequence[float]], elapsed: Elapsed) -> Decision:
        """Stop once the cap is reached."""
        return Decision(True, ROUNDS) if rounds_of(sides) >= self.rounds else GO


@dataclass(frozen=True)
class TimeBudget:
    """Stop once more than ``max_time_s`` seconds are spent, never before ``min_rounds`` rounds (NVBench's timeout)."""

    max_time_s: float
    min_rounds: int

    def decide(self, sides: Sequence[Sequence[float]], elapsed: Elapsed) -> Decision:
        """Stop once the budget is spent and the minimum rounds ran; the clock is read only then."""
        spent = rounds_of(sides) >= self.min_rounds and elapsed() > self.max_time_s
        return Decision(True, BUDGET) if spent else GO


@dataclass(frozen=True)
class NoiseTarget:
    """Stop once every side's median is within ``max_noise`` (``stats.median_noise``), after ``min_rounds`` rounds.

    NVBench's ``stdrel`` on the median rather than the mean, from the IQR as ``adaptive_autorange`` does.
    ``every``: stop only on a multiple of this many rounds (2 for ABBA rounds, whose pattern a cut after "ab"
    would break). A target of 0 never stops.
    """

    max_noise: float
    min_rounds: int
    every: int = 1

    def decide(self, sides: Sequence[Sequence[float]], elapsed: Elapsed) -> Decision:
        """Stop once every side is steady enough."""
        n = rounds_of(sides)
        steady = (self.max_noise > 0 and n >= self.min_rounds and n % self.every == 0
                  and all(median_noise(s) <= self.max_noise for s in sides))
        return Decision(True, NOISE) if steady else GO


@dataclass(frozen=True)
class FirstOf:
    """Stop when any of ``criteria`` says so; the first one that does gives the reason."""

    criteria: tuple[Criterion, ...]

    def decide(self, sides: Sequence[Sequence[float]], elapsed: Elapsed) -> Decision:
        """The first stop among the criteria, in order; else go on."""
        return next((d for c in self.criteria if (d := c.decide(sides, elapsed)).stop), GO)


def rounds_budget_noise(rounds: int, max_time_s: float, min_rounds: int, max_noise: float,
                        noise_min_rounds: int | None = None, every: int = 1) -> FirstOf:
    """The usual criterion: the cap, then the time budget (after ``min_rounds``), then the noise target."""
    return FirstOf((MaxRounds(rounds), TimeBudget(max_time_s, min_rounds),
                    NoiseTarget(max_noise, min_rounds if noise_min_rounds is None else noise_min_rounds, every)))
