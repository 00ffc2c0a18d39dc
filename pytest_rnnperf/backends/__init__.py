"""Framework backends: build matched cuDNN/generic pairs with identical weights, prove the path, sync.

Frameworks are imported only inside the backend modules, and only when a backend is loaded, so that
``import pytest_rnnperf`` works with neither torch nor TensorFlow installed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

    from ..cases import Case
    from ..reference import RNNWeights

IMPLS: tuple[str, ...] = ("cudnn", "generic")


class BackendUnavailable(Exception):
    """The framework (or its GPU support) is not usable here; the message is a one-line skip reason."""


class OutOfDeviceMemory(Exception):
    """The case does not fit in device memory; the message is a one-line skip reason."""


@dataclass(frozen=True)
class PathProof:
    """Evidence of which implementation one side really ran (kernels, autograd nodes or graph ops)."""

    impl: str  # "cudnn" or "generic": what this side is supposed to run
    ok: bool  # True when the evidence matches ``impl``
    evidence: str  # what was seen, e.g. "autograd CudnnRnnBackward0; kernels: RNN_blockPersist_fp..."

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return {"impl": self.impl, "ok": self.ok, "evidence": self.evidence}


@dataclass(frozen=True)
class ImplResult:
    """Outputs and gradients of one side, as float64 NumPy in canonical layout (time-major)."""

    output: "np.ndarray"  # (T, B, D*H)
    h_n: "np.ndarray"  # (L*D, B, H)
    c_n: "np.ndarray | None"  # (L*D, B, H) for LSTM, else None
    d_input: "np.ndarray | None"  # (T, B, I); None in infer mode
    d_weights: "RNNWeights | None"  # same layout as the weights; None in infer mode


class Impl(Protocol):
    """One side of a pair (cuDNN or generic), ready to run on the device."""

    name: str  # "cudnn" or "generic"

    def step(self) -> None:
        """Run one timed step (forward, plus backward in train mode) without copying anything to the host."""

    def result(self) -> ImplResult:
        """Run once with the parity inputs and return outputs and gradients in canonical float64 layout."""

    def prove_path(self) -> PathProof:
        """Run once under a profiler or graph trace and report which implementation actually ran."""


class Pair(Protocol):
    """Matched cuDNN and generic implementations of one case with identical weights and inputs."""

    cudnn: Impl
    generic: Impl
    device: str  # e.g. "cuda:0" or "cpu"

    def sync(self) -> None:
        """Block until all queued device work is done (no device-to-host copy of results)."""

    def close(self) -> None:
        """Free device memory held by the pair."""


class Backend(Protocol):
    """A framework: builds pairs and says why it cannot when it cannot."""

    name: str  # "torch" or "tf"

    def unavailable_reason(self) -> str | None:
        """None when the framework can build pairs here; else a one-line reason (not installed, ...)."""

    def gpu_unavailable_reason(self) -> str | None:
        """None when a CUDA GPU with cuDNN is usable; else a one-line reason for skipping cuDNN cases."""

    def runtime_info(self) -> dict[str, str]:
        """Framework version, build and loaded CUDA/cuDNN, precision and determinism flags."""

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: "CaseInputs", impls: tuple[str, ...] = IMPLS
    ) -> Pair:
        """Build the pair (only the listed impls; the rest are None) on the GPU, or the CPU when impls=("generic",)."""


@dataclass(frozen=True)
class CaseInputs:
    """Host-side inputs every backend receives: input sequence and upstream gradients (float64)."""

    x: "np.ndarray"  # (T, B, I)
    d_output: "np.ndarray"  # (T, B, D*H): upstream gradient of the output, the parity loss is <y, d_output>
    d_h_n: "np.ndarray"  # (L*D, B, H)
    d_c_n: "np.ndarray | None"  # (L*D, B, H) for LSTM


_BACKEND_MODULES: dict[str, str] = {"torch": "pytest_rnnperf.backends.torch", "tf": "pytest_rnnperf.backends.tensorflow"}


def load_backend(name: str) -> Backend:
    """Import and return the backend for ``name`` ("torch" or "tf"); the framework itself loads lazily."""
    try:
        module_name = _BACKEND_MODULES[name]
    except KeyError:
        raise ValueError(f"unknown framework {name!r}; expected one of {', '.join(_BACKEND_MODULES)}") from None
    module = importlib.import_module(module_name)
    factory: Callable[[], Backend] = module.get_backend
    return factory()
