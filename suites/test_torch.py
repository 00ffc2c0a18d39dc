"""PyTorch: nn.LSTM/GRU/RNN on cuDNN vs the same modules with cuDNN disabled (ATen), identical weights."""

from __future__ import annotations

from pytest_rnnperf.cases import Case

FRAMEWORK = "torch"


def test_cudnn_vs_generic(cudnn_case: Case, rnnperf) -> None:
    """cuDNN ran, matches generic and float64 within the precision's tolerance, and beats its floor."""
    result = rnnperf.measure(cudnn_case)
    rnnperf.check(result)


def test_generic_vs_reference(reference_case: Case, rnnperf) -> None:
    """The generic path matches the float64 reference (runs on a CPU too)."""
    result = rnnperf.reference(reference_case)
    rnnperf.check(result)
