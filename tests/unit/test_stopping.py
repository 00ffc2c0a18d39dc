"""Stopping criteria and the one loop of timed rounds, on a fake clock: one set of decisions, wall or device."""

from __future__ import annotations

import itertools
from typing import Callable, Sequence

import pytest
from fake_cupti import FakeCupti
from fake_nvml import FakeClock

from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.rounds import sample
from pytest_rnnperf.measure.wall import WallTimer, time_pair, time_single
from pytest_rnnperf.model.stopping import (
    BUDGET, GO, NOISE, ROUNDS, Decision, FirstOf, MaxRounds, NoiseTarget, TimeBudget,
)
from pytest_rnnperf.model.timing import Round, TimingConfig

QUIET = (0.010,)  # every step 10 ms: as steady as a clock
NOISY = (0.010, 0.013)  # alternating 10 and 13 ms: never within 0.5%
SLOW = (0.100,)  # 100 ms steps: a 0.25 s budget is gone after two rounds of a pair


def _steps(clock: FakeClock, times: Sequence[float], cupti: FakeCupti | None = None) -> Callable[[], None]:
    """A step whose successive calls take ``times`` in turn (cycling), launching a kernel as long on ``cupti``."""
    durations = itertools.cycle(times)

    def step() -> None:
        t = next(durations)
        if cupti is not None:
            cupti.launch("k", t)
        clock.advance(t)
    return step


def _wall_config(max_time_s: float = 60.0) -> TimingConfig:
    """12 rounds at most, 3 at least, a 0.5% noise target; one step a block, no warm-up."""
    return TimingConfig(rounds=12, min_rounds=3, max_noise=0.005, max_time_s=max_time_s, warmup_steps=0,
                        warmup_s=0.0, min_block_s=0.0, max_steps_per_block=1)


def _wall_pair(a: Sequence[float], b: Sequence[float], max_time_s: float = 60.0) -> list[tuple[int, str]]:
    """(rounds, why they stopped) of each side of a wall pair."""
    clock = FakeClock()
    paired = time_pair(_steps(clock, a), _steps(clock, b), lambda: None, _wall_config(max_time_s), WallTimer(clock))
    return [(len(m.samples), m.stopped) for m in (paired.a, paired.b)]


def _wall_single(a: Sequence[float], max_time_s: float = 60.0) -> list[tuple[int, str]]:
    """(rounds, why they stopped) of one side timed alone on the wall clock."""
    clock = FakeClock()
    m = time_single(_steps(clock, a), lambda: None, _wall_config(max_time_s), WallTimer(clock))
    return [(len(m.samples), m.stopped)]


def _device_pair(a: Sequence[float], b: Sequence[float], max_time_s: float = 60.0) -> list[tuple[int, str]]:
    """(rounds, why they stopped) of each side's traced rounds: 12 at most, 3 at least, steady after 4."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    sides = timer.pair(_steps(clock, a, cupti), _steps(clock, b, cupti), lambda: None, rounds=12, steps=(1, 1),
                       max_time_s=max_time_s, min_rounds=3, max_noise=0.005, steady_rounds=4)
    return [(len(s.busy.samples), s.busy.stopped) for s in sides]


def test_a_quiet_pair_stops_at_the_noise_target_and_a_noisy_side_runs_to_the_cap_on_the_wall_clock() -> None:
    """Wall rounds are ABBA: the noise target is met at 3 rounds but checked after a "ba" round only, so 4."""
    assert _wall_pair(QUIET, QUIET) == [(4, NOISE)] * 2
    assert _wall_pair(QUIET, NOISY) == [(12, ROUNDS)] * 2
    assert _wall_single(QUIET) == [(3, NOISE)]
    assert _wall_single(NOISY) == [(12, ROUNDS)]


def test_the_same_sequences_stop_the_same_way_in_traced_rounds_each_side_on_its_own() -> None:
    """Device rounds: a quiet side stops at its 4 steady rounds, a noisy one runs to the cap, whatever the other did."""
    assert _device_pair(QUIET, QUIET) == [(4, NOISE)] * 2
    assert _device_pair(QUIET, NOISY) == [(4, NOISE), (12, ROUNDS)]
    assert _device_pair(NOISY, QUIET) == [(12, ROUNDS), (4, NOISE)]


def test_a_spent_time_budget_stops_wall_and_device_rounds_at_their_minimum() -> None:
    """100 ms steps against a 0.25 s budget: 3 rounds (the minimum), cut by the budget, in every loop."""
    assert _wall_pair(SLOW, SLOW, max_time_s=0.25) == [(3, BUDGET)] * 2
    assert _wall_single(SLOW, max_time_s=0.25) == [(3, BUDGET)]
    assert _device_pair(SLOW, SLOW, max_time_s=0.25) == [(3, BUDGET)] * 2
    # Quiet 10 ms steps: the budget of a pair (20 ms a round) is spent after 3 rounds, before the ABBA noise check.
    assert _wall_pair(QUIET, QUIET, max_time_s=0.05) == [(3, BUDGET)] * 2


def test_the_time_budget_reads_the_clock_only_once_the_minimum_rounds_ran() -> None:
    """A clock that moves when read (as a fake may) is read no earlier than before: after min_rounds rounds."""
    reads: list[int] = []

    def elapsed() -> float:
        reads.append(1)
        return 10.0

    budget = TimeBudget(max_time_s=1.0, min_rounds=3)
    assert budget.decide([[1.0, 1.0]], elapsed) == GO and not reads
    assert budget.decide([[1.0] * 3], elapsed) == Decision(True, BUDGET) and len(reads) == 1


def test_the_noise_target_waits_for_its_minimum_and_its_multiple_and_zero_never_stops() -> None:
    """Steady sides stop on a multiple of ``every`` after ``min_rounds``; one unsteady side keeps both going."""
    target = NoiseTarget(max_noise=0.005, min_rounds=3, every=2)
    steady = [0.01] * 3
    assert target.decide([steady, steady], lambda: 0.0) == GO  # 3 rounds: not a whole ABBA pattern
    assert target.decide([steady + [0.01], steady + [0.01]], lambda: 0.0) == Decision(True, NOISE)
    assert target.decide([steady + [0.01], [0.01, 0.013] * 2], lambda: 0.0) == GO
    assert NoiseTarget(max_noise=0.0, min_rounds=1).decide([steady], lambda: 0.0) == GO


def test_the_first_criterion_that_stops_gives_the_reason() -> None:
    """At the cap with the budget spent, the cap is named: the rounds asked for all ran."""
    until = FirstOf((MaxRounds(3), TimeBudget(1.0, 1)))
    assert until.decide([[1.0] * 3], lambda: 5.0) == Decision(True, ROUNDS)
    assert until.decide([[1.0] * 2], lambda: 5.0) == Decision(True, BUDGET)
    assert until.decide([[1.0] * 2], lambda: 0.5) == GO


class ScriptedTimer:
    """A Timer whose rounds take the given seconds per step in turn, on a fake clock."""

    name = "scripted"

    def __init__(self, clock: FakeClock, times: Sequence[float]) -> None:
        self.clock = clock
        self.times = iter(times)

    def now(self) -> float:
        """The fake clock."""
        return self.clock()

    def block(self, step: Callable[[], None], steps: int, sync: Callable[[], None]) -> Round:
        """One round of the next scripted time."""
        t = next(self.times)
        self.clock.advance(t * steps)
        return Round(t)


def test_the_loop_alternates_the_sides_and_stops_where_the_criterion_says() -> None:
    """Two sides, ABBA order, a scripted timer: the loop stops at the cap with the samples in each side's order."""
    clock = FakeClock()
    timer = ScriptedTimer(clock, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    done = sample(timer, ((lambda: None, 1), (lambda: None, 1)), lambda: None, MaxRounds(3), alternate=True)
    assert done.order == ("ab", "ba", "ab") and done.stopped == ROUNDS
    assert (done.samples(0), done.samples(1)) == ((1.0, 4.0, 5.0), (2.0, 3.0, 6.0))
    assert clock() == pytest.approx(100.0 + 21.0)


def test_the_device_timer_is_a_timer_of_the_same_loop() -> None:
    """A DeviceTimer times rounds in the shared loop: seconds per step, and each round's span on CUPTI's clock."""
    clock = FakeClock()
    cupti = FakeCupti(clock, units_per_ns=2.0)
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    done = sample(timer, ((_steps(clock, (0.004,), cupti), 5),), lambda: None, MaxRounds(2))
    assert done.samples(0) == pytest.approx((0.004, 0.004)) and done.stopped == ROUNDS
    span = done.rounds[0][1].span
    assert span[1] - span[0] == pytest.approx(2.0 * 0.020e9, rel=1e-6)  # 5 steps of 4 ms, 2 units a ns
