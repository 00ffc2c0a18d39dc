"""On a real GPU: the path proof of a cuDNN side that calls cuDNN, drops the result and runs the generic loop."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rnnperf.backends.torch import TorchBackend
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.measure.runner import RunConfig, run_case
from pytest_rnnperf.model.timing import TimingConfig
from pytest_rnnperf.measure.device_time import device_time_problem

CASE = Case("torch", "lstm", Shape(28, 128, 28, 128, 1), "train", "fp32")
CONFIG = RunConfig(timing=TimingConfig(rounds=5, min_rounds=5, warmup_s=0.05), energy_s=0.0, device_rounds=4)


class _FallbackBackend(TorchBackend):
    """The torch backend, except that its cuDNN side also runs the generic side's step after its own."""

    def build(self, *args: Any, **kwargs: Any) -> Any:
        """The real pair with a cuDNN step whose work is then redone by the generic loop."""
        pair = super().build(*args, **kwargs)
        cudnn_step, generic_step = pair.cudnn.step, pair.generic.step

        def fallback() -> None:
            cudnn_step()  # cuDNN runs, and its result is thrown away ...
            generic_step()  # ... for the per-timestep loop's

        pair.cudnn.step = fallback
        return pair


@pytest.mark.gpu
def test_a_cudnn_call_dropped_for_the_generic_loop_fails_the_path_proof(cuda_torch: Any) -> None:
    """The ops show aten::_cudnn_rnn (a proof by ops passes it); the kernels show the loop and fail it."""
    problem = device_time_problem()
    if problem:
        pytest.skip(problem)
    honest = run_case(CASE, TorchBackend(), CONFIG)
    cheat = run_case(CASE, _FallbackBackend(), CONFIG)
    print("\n[proof] honest: " + " | ".join(p.evidence for p in honest.proofs))
    print("[proof] fallback: " + " | ".join(p.evidence for p in cheat.proofs))
    assert honest.paths_ok
    cudnn = next(p for p in cheat.proofs if p.impl == "cudnn")
    assert cudnn.evidence.startswith("ops aten::_cudnn_rnn")  # what the op-level proof alone would accept
    assert not cheat.paths_ok and not cudnn.ok
    assert "generic cell kernels ran too" in cudnn.evidence and "a per-timestep loop ran beside cuDNN" in cudnn.evidence
