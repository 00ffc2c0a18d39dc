"""The classic cuDNN-RNN claims, measured on this machine, for torch and for Keras on TensorFlow.

Each test measures one group of claims and puts its rows into the session's claims table (terminal summary,
rnnperf.json, summary.md). A test fails only where the product promises something: both paths train to
the same accuracy and loss curve, and cuDNN is not slower than generic on a GPU. Without a GPU each test
checks its generic path against float64 at a tiny scale and the cuDNN rows say why they were not measured.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pytest

from pytest_rnnperf.plugin.fixtures import ClaimsFixture

from . import experiments
from .experiments import SCALES, Scale

# lab name -> (the module it needs, where the lab lives, relative to this package: the suite runs from a clone as
# ``suites.claims`` and installed as ``pytest_rnnperf.suites.claims``)
LABS = {"torch": ("torch", ".lab_torch:TorchLab"),
        "keras": ("tensorflow", ".lab_keras:KerasLab")}
_MADE: dict[str, Any] = {}


@pytest.fixture(params=sorted(LABS))
def lab(request: pytest.FixtureRequest) -> Any:
    """The framework lab of this test (one per run); skipped with the reason when its framework is missing."""
    name = request.param
    needs, where = LABS[name]
    missing = [m for m in (needs, "sklearn") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the {name} claims need {' and '.join(missing)}: pip install \"pytest-rnnperf[claims]\"")
    if name not in _MADE:
        module, cls = where.split(":")
        try:
            _MADE[name] = getattr(importlib.import_module(module, __package__), cls)()
        except ImportError as exc:
            _MADE[name] = exc
    if isinstance(_MADE[name], ImportError):
        pytest.skip(str(_MADE[name]))
    return _MADE[name]


@pytest.fixture
def sizes(scale: str) -> Scale:
    """The experiment sizes of this run's scale."""
    return SCALES[scale]


def _report(claims: ClaimsFixture, rows: list[Any], problems: list[str] | None = None) -> None:
    """Put the rows into the claims table, then fail on a broken promise or a failed CPU check."""
    claims.add(*rows)
    assert not problems, "; ".join(problems or [])
    claims.check()


def test_training_reaches_the_same_accuracy_on_handwritten_digits(lab: Any, sizes: Scale,
                                                                  rnnperf_claims: ClaimsFixture) -> None:
    """Row-wise 8x8 digits: cuDNN and generic from the same weights and data order reach one test accuracy."""
    rows, problems = experiments.digits_training(lab, sizes)
    _report(rnnperf_claims, rows, problems)


def test_regression_reaches_the_same_error_and_a_larger_batch_is_faster(lab: Any, sizes: Scale,
                                                                       rnnperf_claims: ClaimsFixture) -> None:
    """Sine regression: one test error on both paths; cuDNN at batch 500 against 4700 per epoch."""
    rows, problems = experiments.regression_and_batch(lab, sizes)
    _report(rnnperf_claims, rows, problems)


def test_character_language_model_follows_one_loss_curve(lab: Any, sizes: Scale, rnnperf_claims: ClaimsFixture,
                                                         rnnperf_telemetry_window: Any) -> None:
    """2-layer char-LSTM on Python's source: one loss curve; load time, peak memory, utilization, samples."""
    _report(rnnperf_claims, experiments.char_lm(lab, sizes, rnnperf_telemetry_window))


def test_inference_is_faster_on_cudnn(lab: Any, sizes: Scale, rnnperf_claims: ClaimsFixture) -> None:
    """predict() throughput, cuDNN against generic."""
    _report(rnnperf_claims, experiments.inference(lab, sizes))


def test_cpu_against_generic_and_cudnn_on_the_gpu(lab: Any, sizes: Scale, rnnperf_claims: ClaimsFixture) -> None:
    """One training step of the seed's shape on the CPU, the GPU's generic path and cuDNN."""
    _report(rnnperf_claims, experiments.cpu_vs_gpu(lab, sizes))


def test_precision_explains_accuracy_differences(lab: Any, sizes: Scale, rnnperf_claims: ClaimsFixture) -> None:
    """FP64 reference, FP32, TF32, BF16, FP16 on both paths: forward error, accuracy, time per epoch."""
    _report(rnnperf_claims, experiments.precision(lab, sizes))
