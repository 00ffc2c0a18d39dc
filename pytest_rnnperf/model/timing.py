"""Timing: what a measurement is, and the seam where a timer plugs in.

A ``Timer`` times one round of a step (a block of steps between two device syncs) and says what its clock reads;
one loop (``measure.rounds.sample``) runs the rounds of one or two sides until a stopping criterion
(``model.stopping``) says stop. Every measurement carries the name of the timer that took it (``wall``:
device-synchronized host-clock blocks, see ``measure.wall``; ``device``: CUPTI's kernel records, see
``measure.device_time``). The runner takes whichever wall-clock timer it is given (``RunConfig.timer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

import numpy as np

from pytest_rnnperf.model.stopping import FirstOf, rounds_budget_noise

Clock = Callable[[], float]
Step = Callable[[], None]
Sync = Callable[[], None]


@dataclass(frozen=True)
class TimingConfig:
    """How long to warm up and how many interleaved rounds to time."""

    rounds: int = 20
    # Warm-up goes on until both ``warmup_s`` seconds and this many rounds have passed. One round is enough for a
    # long step: the case ran both steps before (its build or proof), and calibration runs each again before the
    # first timed block; three rounds cost 1.2 s a case where a generic step takes 0.4 s. An H100 idle for 0.5-5 s
    # ran within 0.5% of its speed 2-8 ms after its first launch (scripts/clock_ramp.py): 20 ms covers that.
    warmup_steps: int = 1
    warmup_s: float = 0.02
    # Pause the garbage collector during the timed rounds (collected once just before them).
    pause_gc: bool = True
    # A block shorter than this would be dominated by sync and clock-read costs (tens of microseconds).
    min_block_s: float = 0.010
    # Upper bound on steps per block, so a tiny step on a fast clock does not run forever.
    max_steps_per_block: int = 1000
    # Total budget per pair; rounds are cut (never below min_rounds) once it is spent.
    max_time_s: float = 60.0
    min_rounds: int = 5
    # Stop timing once both sides' medians are this steady (``stats.median_noise``), after ``min_rounds``;
    # ``rounds`` stays the cap. 0 runs every round.
    max_noise: float = 0.0

    def __post_init__(self) -> None:
        """Reject settings that cannot produce a measurement."""
        if self.rounds < 1 or self.min_rounds < 1:
            raise ValueError(f"rounds and min_rounds must be >= 1 (got {self.rounds}, {self.min_rounds})")
        if self.min_block_s < 0 or self.max_time_s <= 0 or self.warmup_s < 0 or self.warmup_steps < 0:
            raise ValueError("min_block_s, warmup_s and warmup_steps must be >= 0 and max_time_s > 0")
        if self.max_noise < 0:
            raise ValueError(f"max_noise must be >= 0 (got {self.max_noise})")

    def until(self, every: int = 1) -> FirstOf:
        """When the timed rounds stop: ``rounds``, the time budget after ``min_rounds``, or every side steady.

        ``every``: the noise target is checked only on a multiple of this many rounds (2 for ABBA rounds).
        """
        return rounds_budget_noise(self.rounds, self.max_time_s, self.min_rounds, self.max_noise, every=every)


@dataclass(frozen=True)
class Measurement:
    """Per-step times of one side in seconds, one sample per timed round, and what took them."""

    name: str  # the side: "cudnn" or "generic"
    samples: tuple[float, ...]
    steps_per_block: int
    timer: str = "wall"  # the Timer that measured them
    # Why the rounds stopped (``stopping.NOISE``, ``ROUNDS`` or ``BUDGET``; "" where unknown, as in a stored record):
    # what this process saw, not part of the samples' value.
    stopped: str = field(default="", compare=False)

    @property
    def median(self) -> float:
        """Median seconds per step."""
        return float(np.median(self.samples))

    @property
    def iqr(self) -> float:
        """Interquartile range of seconds per step."""
        q1, q3 = np.percentile(self.samples, [25.0, 75.0])
        return float(q3 - q1)


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


@dataclass(frozen=True)
class Round:
    """One timed round of one side: seconds per step, and what the timer read of it on its own clock."""

    per_step_s: float
    # The round's start and end on the timer's own clock (CUPTI's timestamps for the device timer; unused by the
    # wall timer) and its length in host nanoseconds, which says what one unit of that clock is worth.
    span: tuple[int, int] = (0, 0)
    host_ns: int = 0


class Timer(Protocol):
    """A way to time rounds of a step; ``name`` labels every measurement it takes."""

    @property
    def name(self) -> str:
        """What this timer measures, e.g. "wall"."""

    def now(self) -> float:
        """Seconds on the host clock that a time budget is spent on."""

    def block(self, step: Step, steps: int, sync: Sync) -> Round:
        """One round: ``steps`` steps between two device syncs, timed."""


@dataclass(frozen=True)
class KernelStat:
    """One kernel (by name) of a side: device time and launches per step."""

    name: str
    ms_per_step: float
    launches_per_step: float


@dataclass(frozen=True)
class DeviceTiming:
    """What the GPU did for one side: busy time per step per round, kernel time, launches, the kernel table."""

    busy: Measurement  # samples: seconds of device busy time per step, one per traced round (timer "device")
    # Summed kernel durations per step, per round (> busy where kernels overlap): the work, whatever the overlap.
    work: Measurement
    launches_per_step: float
    kernels: tuple[KernelStat, ...]
    # Host nanoseconds per CUPTI timestamp unit over the traced rounds: 1 when CUPTI keeps nanoseconds; another
    # client of CUPTI in the process may have registered a clock of its own (see the H100 evidence README).
    clock_scale: float = 1.0
    # Launches per step of cuDNN's RNN forward and backward kernels and of ATen's fused generic cells, over
    # every record (the table keeps only the longest): the kernel-level path proof. Not stored.
    rnn_forward: float = 0.0
    rnn_backward: float = 0.0
    generic_cells: float = 0.0
    # Seconds per step of each kernel of ``kernels`` in every traced round (stored as the metrics
    # "<side>/kernel/<name>"); empty in records older than format 3.
    kernel_rounds: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def kernel_ms(self) -> dict[str, float]:
        """Each kernel's time per step in ms: the median over rounds where known, else the table's mean."""
        out = {k.name: k.ms_per_step for k in self.kernels}
        for name, samples in self.kernel_rounds.items():
            if samples:
                out[name] = float(np.median(samples)) * 1e3
        return out
