"""TensorFlow/Keras 3: LSTM/GRU(use_cudnn=True) vs use_cudnn=False, identical weights; SimpleRNN generic."""

from __future__ import annotations

from pytest_rnnperf.cases import Case

FRAMEWORK = "tf"


def test_cudnn_vs_generic(cudnn_case: Case, rnnperf) -> None:
    """CudnnRNNV3 ran, matches the While-loop path and float64 within tolerance, and beats its floor."""
    result = rnnperf.measure(cudnn_case)
    rnnperf.check(result)


def test_generic_vs_reference(reference_case: Case, rnnperf) -> None:
    """Keras's generic path matches the float64 reference (runs on a CPU too)."""
    result = rnnperf.reference(reference_case)
    rnnperf.check(result)
