"""Parity rows: normalized error, NaN/Inf naming, per-precision tolerances, missing sides, weight rows."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_rnnperf.model.results import ImplResult
from pytest_rnnperf.model.parity import TOLERANCES, ParityReport, compare_results, format_failures, normalized_error
from pytest_rnnperf.model.reference import RNNWeights, init_weights


def _result(scale: float = 1.0, with_grads: bool = True, seed: int = 0) -> ImplResult:
    """A two-layer LSTM-shaped result with weight gradients (values are arbitrary but fixed)."""
    rng = np.random.default_rng(seed)
    weights = init_weights("lstm", 3, 4, 2, False, seed=seed)
    grads = RNNWeights.from_flat("lstm", 3, 4, 2, False, [scale * a for a in weights.flat()]) if with_grads else None
    return ImplResult(output=rng.standard_normal((5, 2, 4)), h_n=rng.standard_normal((2, 2, 4)),
                      c_n=rng.standard_normal((2, 2, 4)), d_input=rng.standard_normal((5, 2, 3)),
                      d_weights=grads)


def test_normalized_error_is_relative_to_the_reference_scale() -> None:
    """max|a-b| / max|b|: the same relative slip gives the same error at any scale."""
    b = np.array([[1.0, -2.0], [0.5, 4.0]])
    a = b + np.array([[0.0, 0.0], [0.0, 0.004]])
    assert normalized_error(a, b) == (pytest.approx(0.001), "")
    assert normalized_error(1000 * a, 1000 * b)[0] == pytest.approx(0.001)


def test_all_zero_reference_falls_back_to_absolute_error() -> None:
    """Relu units that never fire: no scale to divide by, so the absolute error counts."""
    assert normalized_error(np.array([0.0, 3e-7]), np.zeros(2)) == (pytest.approx(3e-7), "")


@pytest.mark.parametrize("bad, kind", [(math.nan, "NaN"), (math.inf, "Inf")])
def test_nan_and_inf_are_named_with_their_side_and_count(bad: float, kind: str) -> None:
    """A non-finite value is never a small error: inf, and the note says what and where."""
    b = np.ones(4)
    a = b.copy()
    a[1] = bad
    err, note = normalized_error(a, b)
    assert err == math.inf and note == f"{kind} in first side (1 of 4 values)"
    assert normalized_error(b, a)[1] == f"{kind} in second side (1 of 4 values)"


def test_shape_mismatch_is_reported_not_broadcast() -> None:
    """(2,1) against (2,) would broadcast silently; it must fail instead."""
    err, note = normalized_error(np.ones((2, 1)), np.ones(2))
    assert err == math.inf and note == "shape (2, 1) vs (2,)"


def test_identical_results_pass_every_row_and_weights_collapse_to_one() -> None:
    """Forward, states, d_input and one collapsed d_weights row, all at zero error."""
    rows = compare_results("cudnn vs generic", _result(), _result(), "fp32")
    assert [r.quantity for r in rows] == ["output", "h_n", "c_n", "d_input", "d_weights"]
    assert all(r.ok and r.error == 0.0 for r in rows)
    assert rows[0].tolerance == TOLERANCES["fp32"].forward and rows[-1].tolerance == TOLERANCES["fp32"].gradient


def test_collapsed_weight_row_names_the_worst_array() -> None:
    """Only w_hh_l1 is off: the one d_weights row carries its error and its name."""
    ref = _result()
    assert ref.d_weights is not None
    flat = list(ref.d_weights.flat())
    bumped = [a.copy() for a in flat]
    bumped[5] = bumped[5] + 0.01 * np.max(np.abs(bumped[5]))  # flat order: w_ih, w_hh, b_ih, b_hh per layer
    cur = replace(ref, d_weights=RNNWeights.from_flat("lstm", 3, 4, 2, False, bumped))
    (row,) = [r for r in compare_results("cudnn vs reference", cur, ref, "fp32") if r.quantity == "d_weights"]
    assert row.error == pytest.approx(0.01) and row.note == "worst w_hh_l1" and not row.ok
    expanded = compare_results("cudnn vs reference", cur, ref, "fp32", collapse_weights=False)
    assert sum(1 for r in expanded if r.quantity.startswith("d_weights[")) == len(flat)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_the_same_slip_passes_or_fails_by_precision(precision: str) -> None:
    """A 1e-3 forward slip is a failure in FP32 and within tolerance in the reduced precisions."""
    ref = _result()
    cur = replace(ref, output=ref.output + 1e-3 * np.max(np.abs(ref.output)))
    report = ParityReport(precision, tuple(compare_results("cudnn vs generic", cur, ref, precision)))
    assert report.ok == (precision != "fp32")


def test_a_side_without_weight_gradients_is_missing_not_skipped() -> None:
    """One side forgot the weight gradients: a failing 'missing on one side' row, not silence."""
    rows = compare_results("cudnn vs generic", _result(with_grads=False), _result(), "fp32")
    (row,) = [r for r in rows if r.quantity == "d_weights"]
    assert not row.ok and row.note == "missing on one side"
    infer = compare_results("cudnn vs generic", _result(with_grads=False), _result(with_grads=False), "fp32")
    assert "d_weights" not in [r.quantity for r in infer]  # neither side has them: infer mode, nothing to compare


def test_failure_table_lists_only_the_failing_rows_and_explains_the_mode() -> None:
    """The message a user sees: the precision's meaning, then one line per failing quantity."""
    ref = _result()
    cur = replace(ref, h_n=ref.h_n * np.nan)
    report = ParityReport("tf32", tuple(compare_results("cudnn vs reference", cur, ref, "tf32")))
    text = format_failures(report)
    assert text.splitlines()[0] == f"parity out of tolerance (tf32: {TOLERANCES['tf32'].why}):"
    assert len(text.splitlines()) == 3 and "h_n" in text and "NaN in first side" in text
    assert report.worst() is not None and report.worst().quantity == "h_n"  # type: ignore[union-attr]
