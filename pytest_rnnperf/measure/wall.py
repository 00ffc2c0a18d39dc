"""The wall timer: device-synchronized host-clock blocks, interleaved ABBA, raw samples kept.

Why this shape:
- GPU work is asynchronous, so a host clock only measures the work if the device is drained before the
  clock is read at both ends of a block. ``sync`` does that without copying results to the host.
- One block runs ``steps`` back-to-back steps between two syncs, so the cost of a sync and of reading the
  clock is spread over a block of at least ``min_block_s``; a sample is the block time divided by ``steps``.
- Rounds alternate A-B, B-A (an ABBA pattern) so that a linear drift in clocks or temperature cancels
  in the ratio instead of favouring whichever side runs second.
- Warm-up lasts at least ``warmup_s``, not only a few steps: the case's parity checks leave the GPU idle
  while the float64 reference runs on the CPU, and an idle GPU drops its clocks; it takes a few ms of work
  to bring them back before the first timed block.
- Python's garbage collector is paused during the timed rounds (as ``timeit`` does): with torch and
  TensorFlow loaded the heap is large, and a full collection landing in one block costs tens of ms of
  host time that belongs to neither implementation.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from pytest_rnnperf.measure.rounds import sample
from pytest_rnnperf.model.timing import Clock, Measurement, PairedMeasurement, Round, Step, Sync, Timer, TimingConfig

NAME = "wall"

def settle_heap() -> None:
    """Collect the garbage, then freeze what survives so that later collections pass it by (before a case's build).

    With torch and TensorFlow loaded the heap holds about half a million objects, and each full collection
    (before the timed rounds, when a pair is dropped) walked them all, 0.3 s a time. What survives here is alive:
    the frameworks' modules, the session's records; a case's own objects come after, so they are still collected.
    """
    gc.collect()
    gc.freeze()


@contextmanager
def gc_paused(pause: bool = True) -> Iterator[None]:
    """Collect once, then keep the garbage collector off inside the block; its previous state is restored."""
    was_enabled = gc.isenabled()
    if pause:
        gc.collect()
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()


def warm_up(steps: tuple[Step, ...], sync: Sync, clock: Clock, config: TimingConfig) -> int:
    """Run the steps in turn until ``warmup_steps`` rounds and ``warmup_s`` seconds have passed; returns rounds."""
    started = clock()
    done = 0
    # The step cap keeps a step that does not move the clock (an empty or broken one) from spinning forever.
    while done < config.warmup_steps or (clock() - started < config.warmup_s
                                         and done < config.max_steps_per_block):
        for step in steps:
            step()
        sync()  # each round ends on the device, so the time check sees work done, not work queued
        done += 1
    return done


def time_block(step: Step, steps: int, sync: Sync, clock: Clock) -> float:
    """Seconds per step over one block of ``steps`` steps, with the device drained at both ends."""
    sync()  # drain earlier work so it is not billed to this block
    start = clock()
    for _ in range(steps):
        step()
    sync()  # the block ends when the device has finished, not when the host has queued the work
    return (clock() - start) / steps


def calibrate(step: Step, sync: Sync, clock: Clock, config: TimingConfig) -> int:
    """Steps per block so that one block lasts at least ``config.min_block_s`` (doubling search)."""
    steps = 1
    while True:
        per_step = time_block(step, steps, sync, clock)
        if per_step * steps >= config.min_block_s or steps >= config.max_steps_per_block:
            return steps
        if per_step > 0:
            # Jump close to the target, then double if the estimate fell short; never overshoot the cap.
            wanted = int(np.ceil(config.min_block_s / per_step * 1.1))
            steps = min(config.max_steps_per_block, max(steps * 2, wanted))
        else:
            steps = min(config.max_steps_per_block, steps * 10)


def time_pair(
    a: Step,
    b: Step,
    sync: Sync,
    config: TimingConfig = TimingConfig(),
    timer: Timer | None = None,
    names: tuple[str, str] = ("cudnn", "generic"),
) -> PairedMeasurement:
    """Warm up both steps, calibrate each block length, then time ABBA-interleaved rounds until ``config.until``.

    Rounds stop at ``config.rounds``, once the time budget is spent, or once both medians are steady (checked
    after a "ba" round only: an ABBA pattern cut after "ab" would favour one side in a drift).
    """
    timer = timer or WallTimer()
    warm_up((a, b), sync, timer.now, config)
    steps_a = calibrate(a, sync, timer.now, config)
    steps_b = calibrate(b, sync, timer.now, config)
    with gc_paused(config.pause_gc):
        done = sample(timer, ((a, steps_a), (b, steps_b)), sync, config.until(every=2), alternate=True)
    return PairedMeasurement(
        a=Measurement(names[0], done.samples(0), steps_a, timer=timer.name, stopped=done.stopped),
        b=Measurement(names[1], done.samples(1), steps_b, timer=timer.name, stopped=done.stopped),
        order=done.order,
    )


def time_single(
    step: Step,
    sync: Sync,
    config: TimingConfig = TimingConfig(),
    timer: Timer | None = None,
    name: str = "generic",
) -> Measurement:
    """Time one step alone (used where only one side can run, e.g. the generic path on a CPU)."""
    timer = timer or WallTimer()
    warm_up((step,), sync, timer.now, config)
    steps = calibrate(step, sync, timer.now, config)
    with gc_paused(config.pause_gc):
        done = sample(timer, ((step, steps),), sync, config.until())
    return Measurement(name, done.samples(0), steps, timer=timer.name, stopped=done.stopped)


@dataclass(frozen=True)
class WallTimer:
    """The default timer: device-synchronized blocks on the host clock; ``clock``: the seam for a fake one in tests."""

    clock: Clock = time.perf_counter
    name: str = NAME

    def now(self) -> float:
        """The host clock, in seconds."""
        return self.clock()

    def block(self, step: Step, steps: int, sync: Sync) -> Round:
        """One block of ``steps`` steps with the device drained at both ends."""
        return Round(time_block(step, steps, sync, self.clock))
