"""Run one case end to end: build the pair, prove the paths, check parity, time, read telemetry.

This is the core the pytest plugin drives; it knows nothing of pytest, so it can also be used from a
script or a notebook. Every run returns a ``records.CaseRecord`` (or ``CrossRecord``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

from pytest_rnnperf.backends import IMPLS, Backend, ModelBackend, ModelOptions, Pair
from pytest_rnnperf.measure import ahead
from pytest_rnnperf.measure.device_time import DeviceTimer, kernel_proof, steps_for
from pytest_rnnperf.measure.host_speed import host_probe_s
from pytest_rnnperf.measure.wall import WallTimer, settle_heap, time_pair, time_single
from pytest_rnnperf.model import reference
from pytest_rnnperf.model.cases import Case, ModelCase, Subject
from pytest_rnnperf.model.flags import WindowFlag
from pytest_rnnperf.model.parity import ParityReport, ParityRow, compare_results, worst_over_batches
from pytest_rnnperf.model.records import CaseRecord, CrossRecord
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof
from pytest_rnnperf.model.stats import Interval, speedup_estimate, speedup_interval
from pytest_rnnperf.model.stopping import BUDGET
from pytest_rnnperf.model.timing import DeviceTiming, Measurement, Timer, TimingConfig


class Window(Protocol):
    """What the runner needs of a telemetry window (see ``device.TelemetryWindow``)."""

    def start(self) -> object:
        """Read the counters at the window's start (the return value is ignored)."""

    def stop(self) -> Any:
        """Read them at the end; a summary with ``as_dict()``, ``flags()``, ``energy_j`` and ``energy_note``."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a case run needs besides the case and the backend."""

    timing: TimingConfig = TimingConfig()
    timer: Timer = field(default_factory=WallTimer)
    seed: int = 0
    # The float64 reference runs on this many sequences of the batch: sequences are independent, so a
    # slice is an exact check of the implementation at a cost that does not grow with the batch.
    reference_batch: int = 8
    # Seconds of steps per side inside a dedicated telemetry window for energy per step (0: off).
    # NVML's energy counter resolves ~100 ms, so shorter windows are flagged as rough.
    energy_s: float = 1.0
    # Traced rounds of the cuDNN side for device time (CUPTI), after the wall rounds; 0 turns device time off.
    # The generic side gets half (at least 3): its device time is reported, never judged, and its steps
    # launch thousands of kernels whose records cost host time to read.
    device_rounds: int = 8
    device_timer: DeviceTimer = field(default_factory=DeviceTimer)
    # Off for the extra processes of a recording: they are there for their timing alone, and the parity of
    # the same build was checked in this process.
    parity: bool = True
    # Off for the same extra processes: their summaries keep medians only, and the speedup's bootstrap would import
    # scipy.stats (about a second) in each fresh process; the speedup is then its estimate alone.
    speedup_ci: bool = True
    # Off on a night whose environment matches the case's last full check (session.recheck_reason): the sides
    # are compared with each other on the reference slice, and the float64 reference is not computed.
    parity_reference: bool = True
    gpu_name: str = ""
    window_factory: Callable[[], Window] | None = None
    # The host clock in seconds that a case's time budget (timing.max_time_s) is spent on; a seam for tests.
    clock: Callable[[], float] = time.perf_counter
    # What set ``timing.max_time_s``, for the note of a cut phase: the per-case cap or the run's budget.
    budget_by: str = "--rnnperf-max-case-s"


class _Phases:
    """Seconds spent in each phase of a case, for the report's "where the time goes"."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Close ``phase`` now."""
        now = time.perf_counter()
        self.laps[phase] = now - self._last
        self._last = now


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

    fwd = reference.forward(weights, inputs.x)
    if case.mode != "train":
        return ImplResult(fwd.output, fwd.h_n, fwd.c_n, None, None)
    grads = reference.backward(weights, inputs.x, inputs.d_output, inputs.d_h_n, inputs.d_c_n)
    return ImplResult(fwd.output, fwd.h_n, fwd.c_n, grads.d_input, grads.d_weights)


def _spent(config: RunConfig) -> str:
    """Why a phase of a case was cut short or left out; the minimum rounds always run."""
    if config.budget_by == "--rnnperf-budget":  # the run's budget: cut to the minimum, or to a share of what was left
        if config.timing.max_time_s < 1e-3:
            return "the run's budget (--rnnperf-budget) left this case its minimum rounds"
        return f"the case's share of the run's budget ({config.timing.max_time_s:.3g} s, --rnnperf-budget) was spent"
    return f"the case's time budget ({config.timing.max_time_s:.3g} s, {config.budget_by}) was spent"


def energy_per_step(step: Callable[[], None], sync: Callable[[], None], config: RunConfig,
                    clock: Callable[[], float] = time.perf_counter,
                    budget_s: float = math.inf) -> tuple[float | None, str, dict[str, Any] | None]:
    """Joules per step, a note, and the telemetry of a dedicated window of at least ``energy_s`` s of this step alone.

    The window runs steps until the host clock has passed 10% over ``energy_s``, then drains the device:
    a step count taken from the timed median falls short for host-bound steps, which run faster back to
    back than between syncs. What is left of the case's time budget (``budget_s``) cuts the window short.
    """
    if config.window_factory is None or config.energy_s <= 0:
        return None, "energy off", None
    if budget_s <= 0:
        return None, f"not measured: {_spent(config)}", None
    length = min(1.1 * config.energy_s, budget_s)
    window = config.window_factory()
    sync()
    window.start()
    started = clock()
    steps = 0
    while steps < 1 or clock() - started < length:
        step()
        steps += 1
    sync()
    summary = window.stop()
    energy = getattr(summary, "energy_j", None)
    notes = [getattr(summary, "energy_note", "")]
    if length < 1.1 * config.energy_s:
        notes.append(f"window cut to {length:.2g} s of {config.energy_s:g} s: {_spent(config)}")
    return (None if energy is None else energy / steps), "; ".join(n for n in notes if n), summary.as_dict()



def _on_gpu(device: str) -> bool:
    """Whether a pair's device string names a GPU ("cuda", "cuda:0", "/GPU:0")."""
    return device.startswith("cuda") or "GPU" in device


def _device_timing(pair: Pair, cudnn: Any, generic: Any, wall: tuple[Measurement, Measurement],
                   config: RunConfig, budget_s: float = math.inf,
                   ) -> tuple[DeviceTiming | None, DeviceTiming | None, str, tuple[WindowFlag, ...]]:
    """Both sides traced with CUPTI in a window of their own; (cuDNN, generic, why not, NVML flags of the window).

    Rounds past the first few stop once ``budget_s`` (what is left of the case's time budget) is spent.
    """
    if config.device_rounds <= 0:
        return None, None, "device time off (--rnnperf-device-rounds=0)", ()
    problem = config.device_timer.problem()
    if problem:
        return None, None, f"device time off: {problem}", ()
    window = config.window_factory() if config.window_factory else None
    if window is not None:
        window.start()
    try:
        steps = (steps_for(wall[0].median), steps_for(wall[1].median))
        rounds = (config.device_rounds, max(3, config.device_rounds // 2))
        a, b = config.device_timer.pair(cudnn.step, generic.step, pair.sync, rounds, steps, max_time_s=budget_s,
                                        max_noise=config.timing.max_noise)
    except RuntimeError as exc:
        return None, None, f"device time not measured: {exc}", ()
    finally:
        flags = tuple(window.stop().flags()) if window is not None else ()
    return a, b, "", flags


def _with_kernel_proofs(proofs: tuple[Any, ...], cudnn: DeviceTiming, generic: DeviceTiming,
                        train: bool) -> tuple[Any, ...]:
    """Each side's proof with what its traced kernels showed: both must hold (ops can be called and dropped)."""
    out = []
    for proof in proofs:
        mine, other = (cudnn, generic) if proof.impl == "cudnn" else (generic, cudnn)
        ok, evidence = kernel_proof(proof.impl, mine, other, train)
        out.append(replace(proof, ok=proof.ok and ok, evidence=f"{proof.evidence}; {evidence}"))
    return tuple(out)


def _timed(case: Subject, pair: Pair, proofs: tuple[Any, ...], parity: ParityReport, impls: tuple[str, ...],
           config: RunConfig, notes: tuple[str, ...] = (), cost: dict[str, float] | None = None,
           budget_s: float | None = None) -> CaseRecord:
    """``_rounds``, with the run's compile-ahead processes stopped meanwhile: they never share a timed round."""
    with ahead.paused():
        return _rounds(case, pair, proofs, parity, impls, config, notes, cost, budget_s)


def _rounds(case: Subject, pair: Pair, proofs: tuple[Any, ...], parity: ParityReport, impls: tuple[str, ...],
            config: RunConfig, notes: tuple[str, ...] = (), cost: dict[str, float] | None = None,
            budget_s: float | None = None) -> CaseRecord:
    """Time the pair (interleaved when both sides run) inside a telemetry window, then energy, then device time.

    The three phases share one time budget, ``budget_s`` (the case's ``timing.max_time_s`` unless given):
    each phase gets what the ones before it left, and runs only its minimum rounds once it is spent.
    """
    cost = dict(cost or {})
    budget = config.timing.max_time_s if budget_s is None else budget_s
    begun = config.clock()

    def left() -> float:
        """Seconds of the budget not yet spent."""
        return budget - (config.clock() - begun)

    started = time.perf_counter()
    sides = {name: getattr(pair, name) for name in impls}
    timing = replace(config.timing, max_time_s=max(budget, 1e-9))
    window = config.window_factory() if config.window_factory else None
    if window is not None:
        window.start()
    cudnn_m: Measurement | None = None
    speedup: Interval | None = None
    if "cudnn" in sides:
        paired = time_pair(sides["cudnn"].step, sides["generic"].step, pair.sync, timing, config.timer)
        cudnn_m, generic_m = paired.a, paired.b
        speedup = (speedup_interval(cudnn_m.samples, generic_m.samples, paired=True) if config.speedup_ci
                   else speedup_estimate(cudnn_m.samples, generic_m.samples))
    else:
        generic_m = time_single(sides["generic"].step, pair.sync, timing, config.timer)
    telemetry = None
    flags: tuple[WindowFlag, ...] = ()
    if window is not None:
        summary = window.stop()
        telemetry = summary.as_dict()
        flags = tuple(summary.flags())
    cost["wall"] = time.perf_counter() - started

    # Energy of the side the case is about: cuDNN when both ran (a second window for the generic side
    # would cost another second per case), the generic side when it ran alone.
    started = time.perf_counter()
    energy_side = "cudnn" if cudnn_m is not None else "generic"
    energy: dict[str, float | None] = {}
    side_telemetry: dict[str, Any] | None = None
    extra: list[str] = list(notes)
    if config.window_factory is not None and config.energy_s > 0:
        value, note, side_telemetry = energy_per_step(sides[energy_side].step, pair.sync, config, budget_s=left())
        energy[energy_side] = value
        if note:
            extra.append(f"{energy_side} energy: {note}")
    cost["energy"] = time.perf_counter() - started

    started = time.perf_counter()
    cudnn_dev = generic_dev = None
    device_note = ""
    device_flags: tuple[WindowFlag, ...] = ()
    if cudnn_m is not None and _on_gpu(pair.device):
        cudnn_dev, generic_dev, device_note, device_flags = _device_timing(
            pair, sides["cudnn"], sides["generic"], (cudnn_m, generic_m), config, budget_s=left())
        # Fewer rounds than asked is news only when the budget cut them (steady rounds stop early by design).
        if cudnn_dev is not None and cudnn_dev.busy.stopped == BUDGET:
            extra.append(f"device time: {len(cudnn_dev.busy.samples)} of {config.device_rounds} traced rounds: "
                         f"{_spent(config)}")
    cost["device"] = time.perf_counter() - started
    if cudnn_dev is not None and generic_dev is not None:
        proofs = _with_kernel_proofs(proofs, cudnn_dev, generic_dev, case.mode == "train")
    checks = "full" if config.parity and config.parity_reference else "sampled"
    return CaseRecord(case=case, device=pair.device, proofs=proofs, parity=parity, generic=generic_m,
                      cudnn=cudnn_m, speedup=speedup, telemetry=telemetry, side_telemetry=side_telemetry,
                      energy_per_step_j=energy, flags=flags, notes=tuple(dict.fromkeys(extra)),
                      gpu_name=config.gpu_name, cudnn_device=cudnn_dev, generic_device=generic_dev,
                      device_note=device_note, device_flags=device_flags, cost_s=cost, checks=checks,
                      host_probe_s=host_probe_s(), cold=getattr(pair, "cold", None))


# What the caller does with a fresh record while the pair is still built: judge it, and for a second look
# call the function it is given, which times the same pair once more (wall and device time, no energy).
Judge = Callable[[CaseRecord, Callable[[], CaseRecord]], CaseRecord]


def _timed_and_judged(case: Subject, pair: Pair, proofs: tuple[Any, ...], parity: ParityReport,
                      impls: tuple[str, ...], config: RunConfig, judge: Judge | None, notes: tuple[str, ...] = (),
                      cost: dict[str, float] | None = None) -> CaseRecord:
    """Time the pair, then hand the record to ``judge`` with a way to time the same pair again."""
    begun = config.clock()
    record = _timed(case, pair, proofs, parity, impls, config, notes=notes, cost=cost)
    if judge is None:
        return record
    again = replace(config, energy_s=0.0)
    # The second look spends what the first left of the case's budget (its minimum rounds always run).
    return judge(record, lambda: _timed(case, pair, proofs, parity, impls, again, notes=notes,
                                        budget_s=config.timing.max_time_s - (config.clock() - begun)))


def _case_parity(case: Case, sides: dict[str, Any], weights: "reference.RNNWeights", inputs: CaseInputs,
                 config: RunConfig) -> list[ParityRow]:
    """Parity rows: the sides against each other on the full batch, each against float64 on a batch slice.

    Without ``config.parity_reference`` only the sides against each other, on the slice: what a night whose
    environment matches the last full check can still get wrong.
    """
    small = slice_batch(inputs, config.reference_batch)
    both = "cudnn" in sides and "generic" in sides
    if not config.parity_reference:
        if not both:
            return []
        return compare_results("cudnn vs generic", sides["cudnn"].result(small), sides["generic"].result(small),
                               case.precision)
    rows: list[ParityRow] = []
    if both:
        rows += compare_results("cudnn vs generic", sides["cudnn"].result(), sides["generic"].result(), case.precision)
    ref = reference_result(case, weights, small)
    for name, side in sides.items():
        rows += compare_results(f"{name} vs reference", side.result(small), ref, case.precision)
    return rows


def run_case(case: Case, backend: Backend, config: RunConfig = RunConfig(),
             impls: tuple[str, ...] = IMPLS, judge: Judge | None = None) -> CaseRecord:
    """Run ``case``: both sides on a GPU (``impls`` = IMPLS), or the generic side alone anywhere.

    ``judge`` sees the record while the pair is built (see ``Judge``). Raises BackendUnavailable /
    OutOfDeviceMemory with one-line reasons the caller turns into skips.
    """
    settle_heap()
    clock = _Phases()
    s = case.shape
    weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional,
                                     seed=config.seed)
    inputs = reference.make_inputs(case, seed=config.seed)
    pair = backend.build(case, weights, inputs, impls=impls)
    try:
        clock.lap("build")
        sides = {name: getattr(pair, name) for name in impls}
        proofs = tuple(side.prove_path() for side in sides.values())
        clock.lap("proof")
        # Parity: the sides against each other on the full batch (both on the device, cheap), and each
        # side against float64 on a batch slice.
        rows = _case_parity(case, sides, weights, inputs, config) if config.parity else []
        clock.lap("parity")
        return _timed_and_judged(case, pair, proofs, ParityReport(case.precision, tuple(rows)), impls, config,
                                 judge, notes=tuple(getattr(pair, "notes", ())), cost=clock.laps)
    finally:
        pair.close()


def run_model(case: ModelCase, backend: ModelBackend, model: Any, inputs: Any, config: RunConfig = RunConfig(),
              impls: tuple[str, ...] = IMPLS, judge: Judge | None = None, build: Callable[[], Any] | None = None,
              options: ModelOptions | None = None) -> CaseRecord:
    """Run a team's model like a case: copies with identical weights, path proofs, parity, timing.

    Parity is cuDNN against generic, and each against a float64 copy of the model on the generic path.
    ``judge`` as in ``run_case``; ``build`` (what made ``model``) and ``options`` go to the backend. Raises
    BackendUnavailable / OutOfDeviceMemory (skips) and ModelError (the model or inputs are unusable).
    """
    clock = _Phases()
    settle_heap()
    pair = backend.build_model(case, model, inputs, impls=impls, seed=config.seed, build=build, options=options)
    try:
        clock.lap("build")
        case = replace(case, description=getattr(pair, "description", "") or case.description)
        impls, proofs, rows = _model_checks(case, pair, impls, config, clock)
        if "cudnn" not in impls:
            judge = None
        return _timed_and_judged(case, pair, proofs, ParityReport(case.precision, tuple(rows)), impls, config,
                                 judge, notes=tuple(getattr(pair, "notes", ())), cost=clock.laps)
    finally:
        pair.close()


def prepare_model(case: ModelCase, backend: ModelBackend, model: Any, inputs: Any, config: RunConfig = RunConfig(),
                  impls: tuple[str, ...] = IMPLS, build: Callable[[], Any] | None = None,
                  options: ModelOptions | None = None) -> None:
    """Build, prove and check a team's model as ``run_model`` does, then drop it untimed: what a compile-ahead process
    does with a test's declared model (its compiled steps stay in the framework's persistent cache)."""
    pair = backend.build_model(case, model, inputs, impls=impls, seed=config.seed, build=build, options=options)
    try:
        _model_checks(case, pair, impls, config, _Phases())
    finally:
        pair.close()


def _model_checks(case: ModelCase, pair: Any, impls: tuple[str, ...], config: RunConfig,
                  clock: _Phases) -> tuple[tuple[str, ...], tuple[PathProof, ...], list[ParityRow]]:
    """The sides the model pair holds, their path proofs and their parity rows (the proof and parity laps)."""
    # A backend leaves the cuDNN side out when no layer of the model can use cuDNN (its notes say why).
    impls = tuple(name for name in impls if getattr(pair, name) is not None)
    sides = {name: getattr(pair, name) for name in impls}
    proofs = tuple(side.prove_path() for side in sides.values())
    clock.lap("proof")
    # Parity on every batch the pair holds (the timed inputs, then parity_inputs=), each quantity's worst kept.
    rows = worst_over_batches([_model_parity(case, pair, sides, config, batch)
                               for batch in range(getattr(pair, "parity_batches", 1))])
    clock.lap("parity")
    return impls, proofs, rows


def _model_parity(case: ModelCase, pair: Any, sides: dict[str, Any], config: RunConfig, batch: int) -> list[ParityRow]:
    """Parity rows of one batch: cuDNN against generic, and each against the float64 copy."""
    args = (batch,) if batch else ()  # batch 0 is the timed inputs, which every model pair gives without asking
    results = {name: side.result(*args) for name, side in sides.items()}
    rows: list[ParityRow] = []
    if "cudnn" in results and "generic" in results:
        rows += compare_results("cudnn vs generic", results["cudnn"], results["generic"], case.precision)
    if config.parity_reference:
        ref = pair.reference(*args)
        for name, result in results.items():
            rows += compare_results(f"{name} vs reference", result, ref, case.precision)
    return rows


def run_cross(case: Case, sides: tuple[tuple[str, Backend, str], tuple[str, Backend, str]],
              config: RunConfig = RunConfig()) -> CrossRecord:
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
    settle_heap()
    try:
        results = []
        proofs = []
        for framework, backend, impl in sides:
            side_case = replace(case, framework=framework)
            if hasattr(backend, "cross_side"):  # a backend in a subprocess builds and runs its side there
                remote = backend.cross_side(side_case, weights, inputs, impl)
                proofs.append(remote.proof)
                results.append(remote.result)
                continue
            pair = backend.build(side_case, weights, inputs, impls=(impl,))
            pairs.append(pair)
            side = getattr(pair, impl)
            proofs.append(side.prove_path())
            results.append(side.result())
        labels = (f"{sides[0][0]} {sides[0][2]}", f"{sides[1][0]} {sides[1][2]}")
        rows = compare_results(f"{labels[0]} vs {labels[1]}", results[0], results[1], case.precision)
        return CrossRecord(case=case, frameworks=(sides[0][0], sides[1][0]), sides=labels, proofs=tuple(proofs),
                           parity=ParityReport(case.precision, tuple(rows)))
    finally:
        for pair in pairs:
            pair.close()
