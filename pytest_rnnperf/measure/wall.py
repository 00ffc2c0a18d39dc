"""The wall timer: device-synchronized host-clock blocks, interleaved ABBA, raw samples kept.

Why this shape:
- GPU work is asynchronous, so a host clock only measures the work if the device is drained before the
  clock is read at both ends of a block. ``sync`` does that without copying results to the host.
- One block runs ``steps`` back-to-back steps between two syncs, so the cost of a sync and of reading the
  clock is spread over a block of at least ``min_block_s``; a sample is the block time divided by ``steps``.
- Rounds alternate A-B, B-A (an ABBA pattern) so that a linear drift in clocks or temperature cancels
  in the ratio instead of favouring whichever side runs second.
- Warm-up lasts at least ``warmup_s``, not only a few steps: the case's parity checks leave the GPU idle
  while the float64 reference runs on the CPU, and an idle GPU drops its clocks; a few 1 ms steps do not
  bring them back before the first timed block.
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

from pytest_rnnperf.model.timing import Clock, Measurement, PairedMeasurement, Step, Sync, TimingConfig

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
    clock: Clock = time.perf_counter,
    names: tuple[str, str] = ("cudnn", "generic"),
) -> PairedMeasurement:
    """Warm up both steps, calibrate each block length, then time up to ``config.rounds`` ABBA-interleaved rounds.

    Rounds stop early once both medians are steady (``TimingConfig.steady``) or the time budget is spent.
    """
    warm_up((a, b), sync, clock, config)
    steps_a = calibrate(a, sync, clock, config)
    steps_b = calibrate(b, sync, clock, config)
    samples_a: list[float] = []
    samples_b: list[float] = []
    order: list[str] = []
    with gc_paused(config.pause_gc):
        started = clock()
        for i in range(config.rounds):
            if i % 2 == 0:
                samples_a.append(time_block(a, steps_a, sync, clock))
                samples_b.append(time_block(b, steps_b, sync, clock))
                order.append("ab")
            else:
                samples_b.append(time_block(b, steps_b, sync, clock))
                samples_a.append(time_block(a, steps_a, sync, clock))
                order.append("ba")
            if i + 1 >= config.min_rounds and clock() - started > config.max_time_s:
                break
            # Only after a "ba" round: an ABBA pattern cut after "ab" would favour one side in a drift.
            if i % 2 == 1 and config.steady(samples_a, samples_b):
                break
    return PairedMeasurement(
        a=Measurement(names[0], tuple(samples_a), steps_a, timer=NAME),
        b=Measurement(names[1], tuple(samples_b), steps_b, timer=NAME),
        order=tuple(order),
    )


def time_single(
    step: Step,
    sync: Sync,
    config: TimingConfig = TimingConfig(),
    clock: Clock = time.perf_counter,
    name: str = "generic",
) -> Measurement:
    """Time one step alone (used where only one side can run, e.g. the generic path on a CPU)."""
    warm_up((step,), sync, clock, config)
    steps = calibrate(step, sync, clock, config)
    samples: list[float] = []
    with gc_paused(config.pause_gc):
        started = clock()
        for i in range(config.rounds):
            samples.append(time_block(step, steps, sync, clock))
            if i + 1 >= config.min_rounds and clock() - started > config.max_time_s:
                break
            if config.steady(samples):
                break
    return Measurement(name, tuple(samples), steps, timer=NAME)


@dataclass(frozen=True)
class WallTimer:
    """The default timer; ``clock`` is the seam for a fake clock in tests."""

    clock: Clock = time.perf_counter
    name: str = NAME

    def pair(self, a: Step, b: Step, sync: Sync, config: TimingConfig,
             names: tuple[str, str] = ("cudnn", "generic")) -> PairedMeasurement:
        """Time two steps in interleaved ABBA rounds of device-synchronized blocks."""
        return time_pair(a, b, sync, config, self.clock, names)

    def single(self, step: Step, sync: Sync, config: TimingConfig, name: str = "generic") -> Measurement:
        """Time one step in device-synchronized blocks."""
        return time_single(step, sync, config, self.clock, name)
