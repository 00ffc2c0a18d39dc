"""The ready suite's case matrix: which generic-vs-float64 cases run at which scale."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from suites.floors import DEFAULT_FLOOR, XLA_FLOOR, model_floor
from suites.matrix import paired_cases, reference_cases

REPO = Path(__file__).resolve().parents[2]


def test_smoke_scale_checks_every_cell_against_float64() -> None:
    assert {c.cell for c in reference_cases("torch", "smoke")} == {"lstm", "gru", "rnn_tanh", "rnn_relu"}


def test_nightly_checks_against_float64_only_what_no_paired_case_covers() -> None:
    # Every paired case holds its generic side against float64 already; Keras SimpleRNN has no paired case.
    assert reference_cases("torch", "nightly") == []
    tf = reference_cases("tf", "nightly")
    assert tf and {c.cell for c in tf} == {"rnn_tanh", "rnn_relu"}
    paired_cells = {c.cell for c in paired_cases("tf", "nightly")}
    assert not paired_cells & {c.cell for c in tf}


def test_wide_hidden_training_is_held_to_not_slower_in_fp32_and_tf32() -> None:
    wide = {c.precision: c.floor for c in paired_cases("torch", "nightly")
            if c.mode == "train" and c.cell == "lstm" and c.shape.hidden_size == 1024}
    assert wide["fp32"] == wide["tf32"] == 1.0
    assert all(c.floor == 2.0 for c in paired_cases("torch", "nightly")
               if c.mode == "train" and c.shape.hidden_size == 512 and c.precision == "tf32")


def test_a_keras_model_case_without_a_measured_floor_gets_xlas_on_jax_and_not_slower_elsewhere() -> None:
    assert model_floor("jax") == XLA_FLOOR == 0.25
    assert model_floor("tensorflow") == model_floor("torch") == DEFAULT_FLOOR == 1.0


KERAS_CASES = [
    "suites/test_keras_cases.py::test_lstm_with_dropout_predicts_on_cudnn[tensorflow]",
    "suites/test_keras_cases.py::test_lstm_with_dropout_predicts_on_cudnn[torch]",
    "suites/test_keras_cases.py::test_lstm_with_dropout_predicts_on_cudnn[jax]",
    "suites/test_keras_cases.py::test_masked_lstm_with_an_empty_row_trains[tensorflow]",
    "suites/test_keras_cases.py::test_masked_lstm_with_an_empty_row_trains[torch]",
    "suites/test_keras_cases.py::test_masked_lstm_with_an_empty_row_trains[jax]",
    "suites/test_keras_cases.py::test_masked_lstm_parity_holds_on_every_batch[tensorflow]",
]


def test_the_keras_regression_cases_are_collected_under_their_stored_ids() -> None:
    """Their test ids are their baseline keys: a rename would start their history over."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("tensorflow") is None:
        pytest.skip("needs keras and tensorflow")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "suites/test_keras_cases.py"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert [line for line in done.stdout.splitlines() if line.startswith("suites/")] == KERAS_CASES, done.stdout[-2000:]
