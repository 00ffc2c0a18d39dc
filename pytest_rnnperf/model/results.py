"""What one side of a pair returns: its outputs and gradients, and the proof of the path it ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

    from pytest_rnnperf.model.reference import RNNWeights


@dataclass(frozen=True)
class PathProof:
    """Evidence of which implementation one side really ran (kernels, autograd nodes or graph ops)."""

    impl: str  # "cudnn" or "generic": what this side is supposed to run
    ok: bool  # True when the evidence matches ``impl``
    evidence: str  # what was seen, e.g. "ops aten::_cudnn_rnn; 2 RNN kernel name(s) ..."


@dataclass(frozen=True)
class ImplResult:
    """Outputs and gradients of one side, as float64 NumPy in canonical layout (time-major)."""

    output: "np.ndarray"  # (T, B, D*H)
    h_n: "np.ndarray"  # (L*D, B, H)
    c_n: "np.ndarray | None"  # (L*D, B, H) for LSTM, else None
    d_input: "np.ndarray | None"  # (T, B, I); None in infer mode
    d_weights: "RNNWeights | None"  # same layout as the weights; None in infer mode
