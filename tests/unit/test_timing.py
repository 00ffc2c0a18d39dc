"""Paired timing on a fake clock: block arithmetic, calibration, ABBA order, budget, warm-up and GC pause."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from typing import Callable

import numpy as np
import pytest
from fake_nvml import FakeClock

from pytest_rnnperf.model.timing import TimingConfig
from pytest_rnnperf.measure.wall import (
    WallTimer, calibrate, gc_paused, settle_heap, time_block, time_pair, time_single, warm_up,
)


def stepper(clock: FakeClock, seconds: float, log: list[str] | None = None, name: str = "") -> Callable[[], None]:
    """A step that takes ``seconds`` of fake time and notes its name."""
    def step() -> None:
        clock.advance(seconds)
        if log is not None:
            log.append(name)
    return step


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at t=100 s."""
    return FakeClock()


@pytest.fixture(autouse=True)
def gc_restored() -> Iterator[None]:
    """Leave the collector as the test found it, whatever a failing test did."""
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_time_block_divides_by_steps_and_syncs_both_ends(clock: FakeClock) -> None:
    """A block of 5 steps of 2 ms reads 2 ms per step, and the device is drained before and after."""
    syncs: list[float] = []
    per_step = time_block(stepper(clock, 0.002), 5, lambda: syncs.append(clock()), clock)
    assert per_step == pytest.approx(0.002)
    assert syncs == [100.0, pytest.approx(100.010)]


def test_time_block_bills_queued_device_work_to_the_block(clock: FakeClock) -> None:
    """Work that finishes only at the closing sync (an async device) is inside the block's time."""
    pending = []
    per_step = time_block(lambda: pending.append(0.004), 3, lambda: clock.advance(sum(pending)) or pending.clear(),
                          clock)
    assert per_step == pytest.approx(0.004)


@pytest.mark.parametrize(("step_s", "expected"), [(0.001, 11), (0.02, 1), (0.00001, 1000)])
def test_calibrate_reaches_the_minimum_block_or_the_cap(clock: FakeClock, step_s: float, expected: int) -> None:
    """Steps per block: just over min_block_s (10 ms) in one jump; one long step; the cap for tiny steps."""
    config = TimingConfig(min_block_s=0.010, max_steps_per_block=1000)
    assert calibrate(stepper(clock, step_s), lambda: None, clock, config) == expected


def test_time_pair_interleaves_abba_and_keeps_raw_samples(clock: FakeClock) -> None:
    """Rounds alternate ab, ba; each side keeps one sample per round; the ratio is generic/cuDNN."""
    log: list[str] = []
    config = TimingConfig(rounds=4, min_rounds=1, warmup_steps=0, warmup_s=0.0, min_block_s=0.0)
    paired = time_pair(stepper(clock, 0.001, log, "a"), stepper(clock, 0.003, log, "b"), lambda: None, config,
                       WallTimer(clock))
    assert paired.order == ("ab", "ba", "ab", "ba")
    assert log[-8:] == list("abbaabba")  # the timed rounds, after one calibration block per side
    assert len(paired.a.samples) == len(paired.b.samples) == 4
    assert paired.speedup == pytest.approx(3.0)
    assert np.allclose(paired.round_ratios(), 3.0)


def test_abba_rounds_bracket_the_true_ratio_under_linear_drift(clock: FakeClock) -> None:
    """Steps slowing linearly with time (a warming card): ab and ba rounds err in opposite directions."""
    t0 = clock()

    def drifting(base: float) -> Callable[[], None]:
        def step() -> None:
            clock.advance(base * (1.0 + 0.5 * (clock() - t0)))  # +50% per second of run
        return step

    config = TimingConfig(rounds=20, warmup_steps=0, warmup_s=0.0, min_block_s=0.0)
    paired = time_pair(drifting(0.002), drifting(0.006), lambda: None, config, WallTimer(clock))
    assert paired.speedup == pytest.approx(3.0, rel=0.01)
    ratios = paired.round_ratios()
    # The block that runs second in a round runs later (slower): ab rounds read high, ba rounds low, and
    # their mean lands closer to the truth than either.
    ab, ba = ratios[0::2].mean(), ratios[1::2].mean()
    assert ab > 3.0 > ba
    assert abs((ab + ba) / 2 - 3.0) < min(ab - 3.0, 3.0 - ba)


def test_time_budget_cuts_rounds_but_never_below_min_rounds(clock: FakeClock) -> None:
    """A 0.5 s budget with 100 ms blocks stops early; min_rounds holds even when the budget is spent."""
    config = TimingConfig(rounds=50, min_rounds=3, warmup_steps=0, warmup_s=0.0, min_block_s=0.0, max_time_s=0.5)
    m = time_single(stepper(clock, 0.1), lambda: None, config, WallTimer(clock))
    assert 3 <= len(m.samples) < 50
    tight = TimingConfig(rounds=50, min_rounds=3, warmup_steps=0, warmup_s=0.0, min_block_s=0.0, max_time_s=0.01)
    assert len(time_single(stepper(clock, 0.1), lambda: None, tight, WallTimer(clock)).samples) == 3


def test_warm_up_lasts_warmup_s_for_short_steps(clock: FakeClock) -> None:
    """1 ms steps and warmup_s=0.2: about 200 rounds, not the 3 of warmup_steps; long steps: 3 rounds."""
    config = TimingConfig(warmup_steps=3, warmup_s=0.2)
    assert warm_up((stepper(clock, 0.001),), lambda: None, clock, config) == 200
    assert warm_up((stepper(clock, 0.5),), lambda: None, clock, config) == 3
    assert warm_up((stepper(clock, 0.001),), lambda: None, clock, TimingConfig(warmup_steps=3, warmup_s=0.0)) == 3


def test_by_default_a_step_longer_than_the_warm_up_time_warms_up_for_one_round(clock: FakeClock) -> None:
    """A 0.4 s generic step beside a 50 ms cuDNN one: one round (0.45 s) passes the 20 ms floor; 1 ms steps: time."""
    config = TimingConfig()
    assert warm_up((stepper(clock, 0.05), stepper(clock, 0.4)), lambda: None, clock, config) == 1
    assert warm_up((stepper(clock, 0.001),), lambda: None, clock, config) == 20


def test_time_pair_and_time_single_warm_up_by_time(clock: FakeClock) -> None:
    """Both timers spend warmup_s warming up: 1 ms + 1 ms rounds for 0.1 s is 50 rounds before calibration."""
    log: list[str] = []
    config = TimingConfig(rounds=1, min_rounds=1, warmup_steps=1, warmup_s=0.1, min_block_s=0.0)
    time_pair(stepper(clock, 0.001, log, "a"), stepper(clock, 0.001, log, "b"), lambda: None, config, WallTimer(clock))
    assert log.count("a") == 50 + 1 + 1  # warm-up, one calibration block, one timed round
    log.clear()
    time_single(stepper(clock, 0.001, log, "s"), lambda: None, config, WallTimer(clock))
    assert len(log) == 100 + 1 + 1


def test_warm_up_of_a_step_that_takes_no_time_is_capped(clock: FakeClock) -> None:
    """A step that never moves the clock stops at max_steps_per_block instead of spinning forever."""
    config = TimingConfig(warmup_steps=3, warmup_s=1.0, max_steps_per_block=50)
    assert warm_up((lambda: None,), lambda: None, clock, config) == 50


def test_warm_up_syncs_each_round_so_queued_work_counts(clock: FakeClock) -> None:
    """Async steps that finish at the sync: warm-up time includes the device work, so it ends on time."""
    pending: list[float] = []
    syncs = []

    def sync() -> None:
        syncs.append(1)
        clock.advance(sum(pending))
        pending.clear()

    rounds = warm_up((lambda: pending.append(0.06),), sync, clock, TimingConfig(warmup_steps=1, warmup_s=0.2))
    assert rounds == 4 and len(syncs) == 4


def test_timed_rounds_run_with_gc_paused_and_restore_it(clock: FakeClock) -> None:
    """The collector is off inside the timed rounds (not in warm-up) and back on afterwards."""
    seen: list[bool] = []

    def step() -> None:
        clock.advance(0.001)
        seen.append(gc.isenabled())

    gc.enable()
    config = TimingConfig(rounds=3, warmup_steps=2, warmup_s=0.0, min_block_s=0.0)
    time_pair(step, step, lambda: None, config, WallTimer(clock))
    assert seen[:4] == [True] * 4  # warm-up (2 rounds x 2 sides)
    assert seen[-6:] == [False] * 6  # the 3 timed rounds x 2 sides
    assert gc.isenabled()
    seen.clear()
    time_single(step, lambda: None, TimingConfig(rounds=2, warmup_steps=0, warmup_s=0.0, min_block_s=0.0,
                                                  pause_gc=False), WallTimer(clock))
    assert all(seen)


def test_gc_paused_keeps_a_disabled_collector_disabled() -> None:
    """A caller that had the collector off finds it off afterwards (even after an exception)."""
    gc.disable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("step failed")
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("step failed")
    assert gc.isenabled()


@pytest.mark.parametrize("kwargs", [{"rounds": 0}, {"min_rounds": 0}, {"min_block_s": -1.0}, {"max_time_s": 0.0},
                                    {"warmup_s": -0.1}, {"warmup_steps": -1}])
def test_config_rejects_settings_that_cannot_measure(kwargs: dict[str, float]) -> None:
    """Each impossible setting raises ValueError naming the constraint."""
    with pytest.raises(ValueError, match="must be"):
        TimingConfig(**kwargs)  # type: ignore[arg-type]


def test_the_wall_timer_labels_its_measurements_and_uses_the_clock_it_is_given(clock: FakeClock) -> None:
    """The timer seam: a WallTimer on a fake clock measures the fake steps, and says it was the wall timer."""
    timer = WallTimer(clock=clock)
    config = TimingConfig(rounds=3, min_rounds=1, warmup_steps=0, warmup_s=0.0, min_block_s=0.0)
    paired = time_pair(stepper(clock, 0.002), stepper(clock, 0.006), lambda: None, config, timer)
    single = time_single(stepper(clock, 0.004), lambda: None, config, timer)
    assert (paired.a.timer, paired.b.timer, single.timer) == ("wall", "wall", "wall") == (timer.name,) * 3
    assert paired.a.median == pytest.approx(0.002) and single.median == pytest.approx(0.004)
    assert (paired.a.name, paired.b.name, single.name) == ("cudnn", "generic", "generic")


def test_steady_rounds_stop_after_an_even_round_once_both_medians_are_within_the_noise_target(clock: FakeClock) -> None:
    """A side as steady as a fake clock stops at 4 rounds (after a "ba" round, never mid-ABBA); a noise target of 0 runs all."""
    steady = TimingConfig(rounds=20, min_rounds=4, warmup_steps=0, warmup_s=0.0, min_block_s=0.0, max_noise=0.005)
    paired = time_pair(stepper(clock, 0.01), stepper(clock, 0.03), lambda: None, steady, WallTimer(clock))
    assert len(paired.a.samples) == 4 and paired.order[-1] == "ba"
    assert len(time_single(stepper(clock, 0.01), lambda: None, steady, WallTimer(clock)).samples) == 4
    every = TimingConfig(rounds=20, min_rounds=4, warmup_steps=0, warmup_s=0.0, min_block_s=0.0, max_noise=0.0)
    paired = time_pair(stepper(clock, 0.01), stepper(clock, 0.03), lambda: None, every, WallTimer(clock))
    assert len(paired.a.samples) == 20


def test_a_noisy_side_keeps_the_rounds_going_up_to_the_cap(clock: FakeClock) -> None:
    """One side alternating 10/13 ms never reaches 0.5% noise: every round of the cap runs, for both sides."""
    times = iter([0.010, 0.013] * 100)
    noisy = lambda: clock.advance(next(times))  # noqa: E731  (a step whose time alternates)
    config = TimingConfig(rounds=12, min_rounds=4, warmup_steps=0, warmup_s=0.0, min_block_s=0.0, max_noise=0.005,
                          max_steps_per_block=1)
    paired = time_pair(stepper(clock, 0.01), noisy, lambda: None, config, WallTimer(clock))
    assert len(paired.a.samples) == len(paired.b.samples) == 12


def test_a_negative_noise_target_is_refused() -> None:
    """max_noise < 0 cannot be met or missed: it is a typo."""
    with pytest.raises(ValueError, match="max_noise"):
        TimingConfig(max_noise=-0.01)


def test_settle_heap_freezes_what_lives_and_later_cycles_are_still_collected() -> None:
    """The heap before a case's build is passed by later collections; a cycle the case makes is still freed."""
    import weakref

    class Node:
        """One end of a reference cycle."""

        other: object = None

    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()  # the rest of the test session collects as before
