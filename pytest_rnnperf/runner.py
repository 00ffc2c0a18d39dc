"""Run one case end to end: build the pair, prove the paths, check parity, time, read telemetry.

This is the core the pytest plugin drives; it knows nothing of pytest, so it can also be used from a
script or a notebook.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

from . import reference
from .backends import IMPLS, Backend, CaseInputs, PathProof
from .cases import Case, cross_id
from .parity import ParityReport, ParityRow, compare_results
from .peaks import peak_tflops
from .stats import Interval, speedup_interval
from .timing import Measurement, PairedMeasurement, TimingConfig, time_pair, time_single


class Window(Protocol):
    """What the runner needs of a telemetry window (see ``device.TelemetryWindow``)."""

    def start(self) -> object:
        """Read the counters at the window's start (the return value is ignored)."""

    def stop(self) -> Any:
        """Read them at the end and return a summary with ``as_dict()``, ``warnings()``, ``energy_j``."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a case run needs besides the case and the backend."""

    timing: TimingConfig = TimingConfig()
    seed: int = 0
    # The float64 reference runs on this many sequences of the batch: sequences are independent, so a
    # slice is an exact check of the implementation at a cost that does not grow with the batch.
    reference_batch: int = 8
    # Seconds of steps per side inside a dedicated telemetry window for energy per step (0: off).
    # NVML's energy counter resolves ~100 ms, so shorter windows are flagged as rough.
    energy_s: float = 1.0
    gpu_name: str = ""
    window_factory: Callable[[], Window] | None = None


@dataclass(frozen=True)
class CaseResult:
    """Everything measured for one case; ``as_record()`` is what reports and baselines store."""

    case: Case
    device: str
    proofs: tuple[PathProof, ...]
    parity: ParityReport
    generic: Measurement
    cudnn: Measurement | None = None
    speedup: Interval | None = None
    round_speedups: tuple[float, ...] = ()
    telemetry: dict[str, Any] | None = None
    # Telemetry of the window where the case's own side (cuDNN when both ran) ran alone, for >= energy_s.
    side_telemetry: dict[str, Any] | None = None
    energy_per_step_j: dict[str, float | None] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    gpu_name: str = ""

    @property
    def paths_ok(self) -> bool:
        """Every side ran the implementation it claims."""
        return all(p.ok for p in self.proofs)

    def tflops(self, impl: str) -> float | None:
        """Achieved GEMM TFLOP/s of one side."""
        m = self.cudnn if impl == "cudnn" else self.generic
        if m is None or m.median <= 0:
            return None
        return self.case.flops_per_step() / m.median / 1e12

    @property
    def peak_tflops(self) -> float | None:
        """Datasheet peak of this GPU for the case's precision (None off-GPU or unknown)."""
        return peak_tflops(self.gpu_name, self.case.precision) if self.gpu_name else None

    def as_record(self) -> dict[str, Any]:
        """JSON-safe record: case, medians, samples, speedup interval, parity, paths, telemetry."""
        return {
            "case": self.case.as_dict(),
            "device": self.device,
            "gpu_name": self.gpu_name,
            "paths": [p.as_dict() for p in self.proofs],
            "parity": self.parity.as_dict(),
            "cudnn": None if self.cudnn is None else self.cudnn.as_dict(),
            "generic": self.generic.as_dict(),
            "speedup": None if self.speedup is None else {
                "estimate": self.speedup.estimate, "low": self.speedup.low, "high": self.speedup.high,
                "confidence": self.speedup.confidence, "floor": self.case.floor,
            },
            "round_speedups": list(self.round_speedups),
            "tflops": {"cudnn": self.tflops("cudnn"), "generic": self.tflops("generic"),
                       "peak": self.peak_tflops},
            "flops_per_step": self.case.flops_per_step(),
            "energy_per_step_j": self.energy_per_step_j,
            "telemetry": self.telemetry,
            "side_telemetry": self.side_telemetry,
            "device_busy": device_busy({"telemetry": self.telemetry, "side_telemetry": self.side_telemetry}),
            "warnings": list(self.warnings),
        }


def device_busy(record: dict[str, Any]) -> float | None:
    """Fraction of time the GPU was running a kernel over the case's timed rounds (NVML utilization).

    The paired window (cuDNN and generic rounds interleaved) decides, not the cuDNN-only energy window:
    on the H200 null runs, cases below 50% busy over the paired window were the ones whose cuDNN time
    drifted between runs (median 14%), those above stayed within 0.9% (median); the cuDNN-only reading
    was no guide (18 of 37 cases above 50% on it moved more than 5%). The cuDNN-only window is the
    fallback for a record without the paired one. None when NVML gave no samples.
    """
    for key in ("telemetry", "side_telemetry"):
        util = ((record.get(key) or {}).get("utilization") or {}).get("mean")
        if isinstance(util, (int, float)):
            return float(util) / 100.0
    return None


def slice_batch(inputs: CaseInputs, n: int) -> CaseInputs:
    """The first ``n`` sequences of every input (batch is axis 1 in the time-major layout)."""
    return CaseInputs(
        x=inputs.x[:, :n],
        d_output=inputs.d_output[:, :n],
        d_h_n=inputs.d_h_n[:, :n],
        d_c_n=None if inputs.d_c_n is None else inputs.d_c_n[:, :n],
    )


def reference_result(case: Case, weights: "reference.RNNWeights", inputs: CaseInputs) -> Any:
    """The float64 reference as an ImplResult-shaped object (gradients only in train mode)."""
    from .backends import ImplResult

    fwd = reference.forward(weights, inputs.x)
    if case.mode != "train":
        return ImplResult(fwd.output, fwd.h_n, fwd.c_n, None, None)
    grads = reference.backward(weights, inputs.x, inputs.d_output, inputs.d_h_n, inputs.d_c_n)
    return ImplResult(fwd.output, fwd.h_n, fwd.c_n, grads.d_input, grads.d_weights)


def energy_per_step(step: Callable[[], None], sync: Callable[[], None], config: RunConfig,
                    clock: Callable[[], float] = time.perf_counter) -> tuple[float | None, str, dict[str, Any] | None]:
    """Joules per step, a note, and the telemetry of a dedicated window of at least ``energy_s`` s of this step alone.

    The window runs steps until the host clock has passed 10% over ``energy_s``, then drains the device:
    a step count taken from the timed median falls short for host-bound steps, which run faster back to
    back than between syncs, and left windows of 0.95 s flagged as rough.
    """
    if config.window_factory is None or config.energy_s <= 0:
        return None, "energy off", None
    window = config.window_factory()
    sync()
    window.start()
    started = clock()
    steps = 0
    while steps < 1 or clock() - started < 1.1 * config.energy_s:
        step()
        steps += 1
    sync()
    summary = window.stop()
    energy = getattr(summary, "energy_j", None)
    return (None if energy is None else energy / steps), getattr(summary, "energy_note", ""), summary.as_dict()


def run_case(case: Case, backend: Backend, config: RunConfig = RunConfig(),
             impls: tuple[str, ...] = IMPLS) -> CaseResult:
    """Run ``case``: both sides on a GPU (``impls`` = IMPLS), or the generic side alone anywhere.

    Raises BackendUnavailable / OutOfDeviceMemory with one-line reasons the caller turns into skips.
    """
    s = case.shape
    weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional,
                                     seed=config.seed)
    inputs = reference.make_inputs(case, seed=config.seed)
    pair = backend.build(case, weights, inputs, impls=impls)
    try:
        sides = {name: getattr(pair, name) for name in impls}
        proofs = tuple(side.prove_path() for side in sides.values())

        # Parity: the sides against each other on the full batch (both on the device, cheap), and each
        # side against float64 on a batch slice.
        rows: list[ParityRow] = []
        if "cudnn" in sides and "generic" in sides:
            rows += compare_results("cudnn vs generic", sides["cudnn"].result(), sides["generic"].result(),
                                    case.precision)
        small = slice_batch(inputs, config.reference_batch)
        ref = reference_result(case, weights, small)
        for name, side in sides.items():
            rows += compare_results(f"{name} vs reference", side.result(small), ref, case.precision)
        parity = ParityReport(case.precision, tuple(rows))

        window = config.window_factory() if config.window_factory else None
        if window is not None:
            window.start()
        cudnn_m: Measurement | None = None
        speedup: Interval | None = None
        round_speedups: tuple[float, ...] = ()
        if "cudnn" in sides:
            paired: PairedMeasurement = time_pair(sides["cudnn"].step, sides["generic"].step, pair.sync,
                                                  config.timing)
            cudnn_m, generic_m = paired.a, paired.b
            speedup = speedup_interval(cudnn_m.samples, generic_m.samples, paired=True)
            round_speedups = tuple(float(r) for r in paired.round_ratios())
        else:
            generic_m = time_single(sides["generic"].step, pair.sync, config.timing)
        telemetry = None
        warnings: list[str] = []
        if window is not None:
            summary = window.stop()
            telemetry = summary.as_dict()
            warnings += list(summary.warnings())

        energy: dict[str, float | None] = {}
        # Energy of the side the case is about: cuDNN when both ran (a second window for the generic
        # side would cost another second per case), the generic side when it ran alone.
        energy_side = ("cudnn", cudnn_m) if cudnn_m is not None else ("generic", generic_m)
        side_telemetry: dict[str, Any] | None = None
        for name, m in (energy_side,):
            if m is not None and config.window_factory is not None and config.energy_s > 0:
                value, note, side_window = energy_per_step(sides[name].step, pair.sync, config)
                energy[name] = value
                side_telemetry = side_window
                if note:
                    warnings.append(f"{name} energy: {note}")
        return CaseResult(
            case=case, device=pair.device, proofs=proofs, parity=parity, generic=generic_m, cudnn=cudnn_m,
            speedup=speedup, round_speedups=round_speedups, telemetry=telemetry, energy_per_step_j=energy,
            side_telemetry=side_telemetry,
            warnings=tuple(dict.fromkeys(warnings)), gpu_name=config.gpu_name,
        )
    finally:
        pair.close()


@dataclass(frozen=True)
class CrossResult:
    """The same canonical weights and inputs run in two frameworks: which path each ran and how close they came."""

    case: Case
    sides: tuple[str, str]  # e.g. ("torch cudnn", "tf cudnn"); the second is the comparison's reference
    proofs: tuple[PathProof, ...]
    parity: ParityReport

    @property
    def id(self) -> str:
        """Stable id, e.g. ``torch-vs-tf-lstm-train-fp32-T28-B128-I28-H128-L1``."""
        return cross_id(self.case)

    @property
    def paths_ok(self) -> bool:
        """Every side ran the implementation it claims."""
        return all(p.ok for p in self.proofs)

    def as_record(self) -> dict[str, Any]:
        """JSON-safe record: case, the two sides, path proofs and parity rows."""
        return {"id": self.id, "case": self.case.as_dict(), "sides": list(self.sides),
                "paths": [p.as_dict() for p in self.proofs], "parity": self.parity.as_dict()}


def run_cross(case: Case, sides: tuple[tuple[str, Backend, str], tuple[str, Backend, str]],
              config: RunConfig = RunConfig()) -> CrossResult:
    """Run ``case``'s canonical weights in two (framework, backend, impl) sides and compare them.

    This is the claim that a checkpoint moves between frameworks and between cuDNN and generic paths: the
    weights are converted from one canonical layout into each framework's own (gate order, biases), so
    any converter or implementation difference shows up as a parity failure. Raises BackendUnavailable /
    OutOfDeviceMemory with one-line reasons.
    """
    s = case.shape
    weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional,
                                     seed=config.seed)
    inputs = reference.make_inputs(case, seed=config.seed)
    pairs: list[Any] = []
    try:
        results = []
        proofs = []
        for framework, backend, impl in sides:
            pair = backend.build(replace(case, framework=framework), weights, inputs, impls=(impl,))
            pairs.append(pair)
            side = getattr(pair, impl)
            proofs.append(side.prove_path())
            results.append(side.result())
        labels = (f"{sides[0][0]} {sides[0][2]}", f"{sides[1][0]} {sides[1][2]}")
        rows = compare_results(f"{labels[0]} vs {labels[1]}", results[0], results[1], case.precision)
        return CrossResult(case=case, sides=labels, proofs=tuple(proofs),
                           parity=ParityReport(case.precision, tuple(rows)))
    finally:
        for pair in pairs:
            pair.close()
