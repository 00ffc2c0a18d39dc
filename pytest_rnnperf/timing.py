"""Device-synchronized, interleaved paired timing of two steps (cuDNN and generic) with raw samples kept.

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
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

Clock = Callable[[], float]
Step = Callable[[], None]


@dataclass(frozen=True)
class TimingConfig:
    """How long to warm up and how many interleaved rounds to time."""

    rounds: int = 20
    warmup_steps: int = 3
    # Warm-up goes on until both this many seconds and ``warmup_steps`` steps have passed.
    warmup_s: float = 0.2
    # Pause the garbage collector during the timed rounds (collected once just before them).
    pause_gc: bool = True
    # A block shorter than this would be dominated by sync and clock-read costs (tens of microseconds).
    min_block_s: float = 0.010
    # Upper bound on steps per block, so a tiny step on a fast clock does not run forever.
    max_steps_per_block: int = 1000
    # Total budget per pair; rounds are cut (never below min_rounds) once it is spent.
    max_time_s: float = 60.0
    min_rounds: int = 5

    def __post_init__(self) -> None:
        """Reject settings that cannot produce a measurement."""
        if self.rounds < 1 or self.min_rounds < 1:
            raise ValueError(f"rounds and min_rounds must be >= 1 (got {self.rounds}, {self.min_rounds})")
        if self.min_block_s < 0 or self.max_time_s <= 0 or self.warmup_s < 0 or self.warmup_steps < 0:
            raise ValueError("min_block_s, warmup_s and warmup_steps must be >= 0 and max_time_s > 0")


@dataclass(frozen=True)
class Measurement:
    """Per-step times of one side in seconds, one sample per timed block (round)."""

    name: str
    samples: tuple[float, ...]
    steps_per_block: int

    @property
    def median(self) -> float:
        """Median seconds per step."""
        return float(np.median(self.samples))

    @property
    def q1(self) -> float:
        """First quartile of seconds per step."""
        return float(np.percentile(self.samples, 25))

    @property
    def q3(self) -> float:
        """Third quartile of seconds per step."""
        return float(np.percentile(self.samples, 75))

    @property
    def iqr(self) -> float:
        """Interquartile range of seconds per step."""
        return self.q3 - self.q1

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form, raw samples included."""
        return {
            "name": self.name,
            "median_s": self.median,
            "iqr_s": self.iqr,
            "steps_per_block": self.steps_per_block,
            "samples_s": list(self.samples),
        }


@dataclass(frozen=True)
class PairedMeasurement:
    """Two interleaved measurements; ``a`` is the cuDNN side and ``b`` the generic side by convention."""

    a: Measurement
    b: Measurement
    order: tuple[str, ...] = field(default=())  # "ab" or "ba" per round, for the record

    @property
    def speedup(self) -> float:
        """median(b) / median(a): how many times faster ``a`` is."""
        return self.b.median / self.a.median

    def round_ratios(self) -> np.ndarray:
        """Per-round b/a ratios; rounds are adjacent in time, so drift largely cancels within each."""
        return np.asarray(self.b.samples) / np.asarray(self.a.samples)


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


def warm_up(steps: tuple[Step, ...], sync: Callable[[], None], clock: Clock, config: TimingConfig) -> int:
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


def time_block(step: Step, steps: int, sync: Callable[[], None], clock: Clock) -> float:
    """Seconds per step over one block of ``steps`` steps, with the device drained at both ends."""
    sync()  # drain earlier work so it is not billed to this block
    start = clock()
    for _ in range(steps):
        step()
    sync()  # the block ends when the device has finished, not when the host has queued the work
    return (clock() - start) / steps


def calibrate(step: Step, sync: Callable[[], None], clock: Clock, config: TimingConfig) -> int:
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
    sync: Callable[[], None],
    config: TimingConfig = TimingConfig(),
    clock: Clock = time.perf_counter,
    names: tuple[str, str] = ("cudnn", "generic"),
) -> PairedMeasurement:
    """Warm up both steps, calibrate each block length, then time ``config.rounds`` ABBA-interleaved rounds."""
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
    return PairedMeasurement(
        a=Measurement(names[0], tuple(samples_a), steps_a),
        b=Measurement(names[1], tuple(samples_b), steps_b),
        order=tuple(order),
    )


def time_single(
    step: Step,
    sync: Callable[[], None],
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
    return Measurement(name, tuple(samples), steps)
