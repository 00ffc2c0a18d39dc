"""cuDNN against each framework's generic RNN, identical weights, for every registered backend.

PyTorch: nn.LSTM/GRU/RNN on cuDNN against the same modules with cuDNN disabled (ATen). TensorFlow/Keras 3:
LSTM/GRU(use_cudnn=True) (CudnnRNNV3) against use_cudnn=False (a While loop); SimpleRNN is generic only.
One framework: ``pytest suites/test_cudnn.py -k torch`` (or ``-k tf-``).
"""

from __future__ import annotations

from pytest_rnnperf.model.cases import Case
from pytest_rnnperf.plugin.fixtures import RnnperfFixture


def test_cudnn_vs_generic(cudnn_case: Case, rnnperf: RnnperfFixture) -> None:
    """cuDNN ran, matches generic and float64 within the precision's tolerance, and beats its floor."""
    rnnperf.check(rnnperf.measure(cudnn_case))


def test_generic_vs_reference(reference_case: Case, rnnperf: RnnperfFixture) -> None:
    """The generic path matches the float64 reference (runs on a CPU too)."""
    rnnperf.check(rnnperf.reference(reference_case))
