"""One checkpoint, two frameworks: torch and TF/Keras fed the same canonical weights must agree."""

from __future__ import annotations

from pytest_rnnperf.cases import Case


def test_same_weights_same_results(cross_case: Case, rnnperf) -> None:
    """Outputs, final states and gradients agree across frameworks (cuDNN on a GPU, generic without one)."""
    rnnperf.check(rnnperf.cross(cross_case))
