"""A fake framework backend for end-to-end plugin tests: float64 reference math posing as a GPU pair.

A step "launches" one kernel on the fake CUPTI (``CUPTI``) and advances a fake clock (``CLOCK``, which the
project's conftest hands to both timers) by its nominal wall time times a seeded 1% jitter; its kernel runs
its nominal device time with 0.2% jitter. Verdicts do not depend on how loaded the test machine is, and two
runs with the same knobs measure the same samples. Knobs are environment variables read at call time
(FAKE_CUDNN_MS, FAKE_GENERIC_MS: wall; FAKE_CUDNN_DEV_MS, FAKE_GENERIC_DEV_MS: device; FAKE_SLOW_CASE: a part of a case id whose cuDNN device time is 1.5x; FAKE_CUDNN_KERNEL; FAKE_CUDNN_GEMMS: comma-separated
kernel names the cuDNN side also launches each step, such as the GEMMs whose names show its math, each "name:ms" for one
that runs ms per step after the one before (another kernel mix);
FAKE_WRONG_PATH, FAKE_FALLBACK, FAKE_PARITY_ERROR, FAKE_TF_ERROR, FAKE_UNAVAILABLE, FAKE_TF_UNAVAILABLE, FAKE_NO_GPU,
FAKE_OOM, FAKE_CUDNN_VERSION; FAKE_FIRST_CALL_MS: each side's first call after build, "cudnn,generic" ms; FAKE_MAPS with FAKE_LIB_VERSIONS: the CUDA libraries the fake torch loaded, as
/proc/self/maps and {path: version} JSON; FAKE_SEEN: a file each build appends its case and CUDA_VISIBLE_DEVICES to;
FAKE_LOADED: a file each runtime read appends its framework and pytest-xdist worker to), so one
pytester run can set them per test. The time knobs may be comma lists:
the n-th build of a case gets the n-th wall value, and its n-th traced window the n-th device value (the last
one repeats), to script a re-measurement.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
from collections import Counter
from typing import Any

from fake_cupti import FakeCupti

from pytest_rnnperf.model import reference
from pytest_rnnperf.backends import BackendUnavailable, OutOfDeviceMemory
from pytest_rnnperf.backends.cold import first_calls
from pytest_rnnperf.model.cold import ColdCost
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof


def knob(name: str, default: str = "") -> str:
    """A FAKE_* environment variable."""
    return os.environ.get("FAKE_" + name, default)


class FakeClock:
    """A clock in seconds that only fake steps advance."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        """The current fake time."""
        return self.now

    def advance(self, seconds: float) -> None:
        """Let time pass, as a device step would."""
        self.now += seconds

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Sent to a subprocess, it is that process's own clock (the one its fake steps advance)."""
        return (_clock, ())


def _clock() -> FakeClock:
    """This process's fake clock."""
    return CLOCK


def _cupti() -> FakeCupti:
    """This process's fake CUPTI."""
    return CUPTI


def host_ns() -> int:
    """The fake clock in nanoseconds: the device timer's host clock."""
    return int(CLOCK() * 1e9)


class _ProcessCupti(FakeCupti):
    """The fake CUPTI, sent to a subprocess as that process's own."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        """Unpickle as the receiving process's CUPTI."""
        return (_cupti, ())


CLOCK = FakeClock()
CUPTI = _ProcessCupti(CLOCK)
JITTER = 0.01
DEVICE_JITTER = 0.002
GENERIC_LAUNCHES = 4  # kernels per generic step (a per-timestep loop launches more than cuDNN does)
BUILDS: Counter[str] = Counter()  # builds per case id, for the time knobs' lists
DEFAULTS = {"CUDNN_MS": "1", "GENERIC_MS": "4", "CUDNN_DEV_MS": "0.5", "GENERIC_DEV_MS": "2"}


def nominal_ms(name: str, build: int, device: bool = False) -> float:
    """The step time of a side in ms (wall, or its kernel's device time): the knob's value for this build."""
    key = f"{name.upper()}_{'DEV_' if device else ''}MS"
    values = knob(key, DEFAULTS[key]).split(",")
    return float(values[min(build, len(values) - 1)])


def extra_kernels() -> list[tuple[str, float]]:
    """FAKE_CUDNN_GEMMS ("gemm_b:0.05,spin:0.05"; a bare name runs 0 ms): kernels the cuDNN side also launches, with
    their seconds per step."""
    pairs = [item.partition(":") for item in knob("CUDNN_GEMMS").split(",") if item]
    return [(name, float(ms or 0) / 1e3) for name, _, ms in pairs]


class FakeImpl:
    """One side: advances the fake clock per step, computes results with the float64 reference."""

    def __init__(self, name: str, case: Any, weights: Any, inputs: CaseInputs, build: int = 0) -> None:
        self.name, self.case, self.weights, self.inputs = name, case, weights, inputs
        self.delay = nominal_ms(name, build) / 1e3
        self.windows_before = CUPTI.windows  # traced windows of earlier cases
        self.kernel = knob("CUDNN_KERNEL", "RNN_blockPersist_fp_LSTM") if name == "cudnn" else "elementwise_cell"
        # Seeded by side and case only: the same knobs give the same samples in every run.
        self.rng = random.Random(f"{name}:{case.id}")

    def step(self) -> None:
        """Stand-in for one step: kernels of the side's device time, and the fake clock moves by its wall time.

        cuDNN: its forward kernel (all the time) and, training, a backward one; generic: GENERIC_LAUNCHES cell
        kernels sharing the time. FAKE_FALLBACK=1 makes the cuDNN side also launch the generic cells, as a layer
        that calls cuDNN, drops the result and runs its fallback would.
        """
        window = max(0, CUPTI.windows - self.windows_before - 1)  # this pair's traced window now (or next)
        device = nominal_ms(self.name, window, device=True) / 1e3 * (1.0 + DEVICE_JITTER * self.rng.gauss(0.0, 1.0))
        if self.name == "cudnn" and knob("SLOW_CASE") and knob("SLOW_CASE") in self.case.id:
            device *= 1.5  # one case's cuDNN side slower, the others as they were
        spent = 0.0  # device time the extra kernels already moved the clock by
        if self.name == "cudnn":
            CUPTI.launch(self.kernel, device)
            for name, seconds in extra_kernels():  # a timed one after the one before: the step's busy time grows by it
                if seconds:
                    CLOCK.advance(device - spent)
                    spent = device
                CUPTI.launch(name, seconds)
                device += seconds
            if self.case.mode == "train":
                CUPTI.launch("RNN_blockPersist_bp_LSTM_FMA", 0.0)
            if knob("FALLBACK") == "1":
                for _ in range(GENERIC_LAUNCHES):
                    CUPTI.launch("elementwise_cell", 0.0)
        else:
            for _ in range(GENERIC_LAUNCHES):
                CUPTI.launch(self.kernel, device / GENERIC_LAUNCHES)
        CLOCK.advance(max(device, self.delay * (1.0 + JITTER * self.rng.gauss(0.0, 1.0))) - spent)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Reference outputs, perturbed on the cuDNN side when FAKE_PARITY_ERROR is set."""
        inputs = inputs or self.inputs
        fwd = reference.forward(self.weights, inputs.x)
        grads = reference.backward(self.weights, inputs.x, inputs.d_output, inputs.d_h_n, inputs.d_c_n)
        output = fwd.output
        if self.name == "cudnn" and knob("PARITY_ERROR"):
            output = output + float(knob("PARITY_ERROR"))
        if self.case.framework == "tf" and knob("TF_ERROR"):  # a converter bug: only the TF side is off
            output = output + float(knob("TF_ERROR"))
        train = self.case.mode == "train"
        return ImplResult(output, fwd.h_n, fwd.c_n, grads.d_input if train else None,
                          grads.d_weights if train else None)

    def prove_path(self) -> PathProof:
        """Claims the right path unless FAKE_WRONG_PATH=1 (then the cuDNN side 'fell back')."""
        if self.name == "cudnn" and knob("WRONG_PATH") == "1":
            return PathProof(self.name, False, "fake: no cuDNN kernel ran (fell back to the generic loop)")
        return PathProof(self.name, True, f"fake {self.name} kernels")


class FirstCall:
    """A side's first call after build on the fake clock: FAKE_FIRST_CALL_MS, no kernel, the side's samples untouched."""

    def __init__(self, side: FakeImpl) -> None:
        self.ms = float(knob("FIRST_CALL_MS", "50,20").split(",")[0 if side.name == "cudnn" else 1])

    def step(self) -> None:
        """The first call's plan building, as time on the fake clock."""
        CLOCK.advance(self.ms / 1e3)


class FakePair:
    """Both sides on a pretend device, with their first calls timed as a backend's build times them."""

    device = "cuda:fake"

    def __init__(self, cudnn: FakeImpl | None, generic: FakeImpl | None, case_id: str = "") -> None:
        self.cudnn, self.generic = cudnn, generic
        calls = {name: FirstCall(side) for name, side in (("cudnn", cudnn), ("generic", generic)) if side is not None}
        self.cold = ColdCost(first_calls(calls, self.sync, case_id, clock=CLOCK, sleep=CLOCK.advance))

    def sync(self) -> None:
        """Nothing is queued on a pretend device."""

    def close(self) -> None:
        """Nothing to free."""


class FakeCudaLibrary:
    """A loaded cuDNN, cuBLAS or CUDA runtime as ctypes shows it: each answers its own version query."""

    def __init__(self, version: Any) -> None:
        self.version = version  # cuDNN's integer, cuBLAS's [major, minor, patch] or the CUDA runtime's integer

    def cudnnGetVersion(self) -> int:  # noqa: N802 - the C names
        return int(self.version)

    def cublasGetProperty(self, prop: int, out: Any) -> int:  # noqa: N802
        out.contents.value = self.version[prop]
        return 0

    def cudaRuntimeGetVersion(self, out: Any) -> int:  # noqa: N802
        out.contents.value = self.version
        return 0


class FakeBackend:
    """Poses as the torch backend (or, named "tf", as the TF/Keras one)."""

    def __init__(self, name: str = "torch") -> None:
        self.name = name

    def unavailable_reason(self) -> str | None:
        """FAKE_UNAVAILABLE, or FAKE_<NAME>_UNAVAILABLE for this framework alone, if set."""
        return knob("UNAVAILABLE") or knob(f"{self.name.upper()}_UNAVAILABLE") or None

    def gpu_unavailable_reason(self) -> str | None:
        """FAKE_NO_GPU, if set."""
        return self.unavailable_reason() or knob("NO_GPU") or None

    def runtime_info(self) -> dict[str, str]:
        """A cuDNN version a test can change to see it in the environment diff; the libraries FAKE_MAPS names."""
        info = {"torch.version": "fake-1.0", "torch.cudnn_version": knob("CUDNN_VERSION", "9.19.0")}
        if knob("LOADED"):  # when and where a framework was read: a worker reads it at its first test that needs it
            with open(knob("LOADED"), "a") as loaded:
                # the subprocess backend (FAKE_WORKER_BACKEND) is the torch fake in another environment: name it
                name = "faraway" if os.environ.get("RNNPERF_FAKE_WORKER") else self.name
                loaded.write(f"{name} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\n")
        if knob("MAPS"):
            from pytest_rnnperf.backends.base import loaded_libraries

            versions = json.loads(knob("LIB_VERSIONS", "{}"))
            info.update(loaded_libraries("torch.", knob("MAPS"), lambda path: FakeCudaLibrary(versions[path])))
        return info

    def build(self, case: Any, weights: Any, inputs: CaseInputs, impls: tuple[str, ...] = ("cudnn", "generic")) -> FakePair:
        """Build the pair, or fail the way a real backend would for FAKE_OOM / missing GPU."""
        if knob("WORKER_CRASH") and os.environ.get("RNNPERF_FAKE_WORKER"):  # a worker dying mid-run
            print("fake subprocess: native crash in build", flush=True)
            os._exit(3)
        if knob("OOM") and fnmatch.fnmatch(case.id, knob("OOM")):
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: fake allocation of 200 GiB")
        if "cudnn" in impls and self.gpu_unavailable_reason():
            raise BackendUnavailable(self.gpu_unavailable_reason())
        if knob("SEEN"):  # which GPU this process (a pytest-xdist worker, or a backend worker under it) was given
            with open(knob("SEEN"), "a") as seen:
                seen.write(f"{case.id} {os.environ.get('PYTEST_XDIST_WORKER', '-')} "
                           f"{os.environ.get('RNNPERF_FAKE_WORKER', '0')} {os.environ.get('CUDA_VISIBLE_DEVICES', '-')}\n")
        build = BUILDS[case.id]
        BUILDS[case.id] += 1
        sides = {name: FakeImpl(name, case, weights, inputs, build) for name in impls}
        return FakePair(sides.get("cudnn"), sides.get("generic"), case.id)


def get_backend() -> FakeBackend:
    """Entry point used by load_backend (the fake torch)."""
    return FakeBackend()


def get_tf_backend() -> FakeBackend:
    """The fake TF/Keras backend, for cross-framework checks."""
    return FakeBackend("tf")
