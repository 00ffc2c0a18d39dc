"""One checkpoint, two frameworks: fed the same canonical weights, they must agree."""

from __future__ import annotations

from pytest_rnnperf.model.cases import Case
from pytest_rnnperf.plugin.fixtures import RnnperfFixture


def test_same_weights_same_results(cross_case: Case, cross_other: str, rnnperf: RnnperfFixture) -> None:
    """Outputs, final states and gradients agree across frameworks (cuDNN on a GPU, generic without one)."""
    rnnperf.check(rnnperf.cross(cross_case, cross_other))
