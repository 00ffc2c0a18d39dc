"""Padding a parity slice up to the timing batch: how many zero sequences, and the float32 host copy (pure NumPy)."""

from __future__ import annotations

import dataclasses

import numpy as np

from pytest_rnnperf.backends.padding import padded_f32, padding_for
from pytest_rnnperf.measure.runner import slice_batch
from pytest_rnnperf.model import reference
from pytest_rnnperf.model.cases import Case, Shape

TIMING = Case("tf", "lstm", Shape(5, 12, 4, 6, 2, bidirectional=True))


def _inputs(case: Case = TIMING, **shape: int) -> reference.CaseInputs:
    """Parity inputs of ``case`` with some of its shape replaced."""
    return reference.make_inputs(dataclasses.replace(case, shape=dataclasses.replace(case.shape, **shape)), seed=1)


def test_a_slice_of_the_timing_batch_needs_the_sequences_it_lacks() -> None:
    """The runner's slice of 8 sequences from a batch of 12 runs in the timed step with 4 zero sequences."""
    timing = _inputs()
    assert padding_for(slice_batch(timing, 8), timing) == 4
    assert padding_for(_inputs(batch=1), timing) == 11


def test_inputs_of_the_timing_shapes_need_no_padding() -> None:
    """A batch no larger than the slice (B1 against a slice of 8) is the timing shape itself: 0, not None."""
    timing = _inputs()
    assert padding_for(slice_batch(timing, 12), timing) == 0
    assert padding_for(_inputs(), timing) == 0


def test_another_length_width_or_a_larger_batch_cannot_be_padded() -> None:
    """Only the batch may differ, and only downwards: everything else needs a step of its own."""
    timing = _inputs()
    assert padding_for(_inputs(seq_len=3, batch=2), timing) is None
    assert padding_for(_inputs(input_size=3, batch=2), timing) is None
    assert padding_for(_inputs(batch=13), timing) is None
    small = slice_batch(timing, 8)
    assert padding_for(dataclasses.replace(small, d_h_n=timing.d_h_n[:, :7]), timing) is None  # one field cut apart


def test_a_gru_slice_cannot_stand_for_lstm_inputs_nor_the_reverse() -> None:
    """A GRU has no cell-state gradient: its inputs and an LSTM's differ in more than the batch."""
    lstm, gru = _inputs(), _inputs(dataclasses.replace(TIMING, cell="gru"))
    assert padding_for(slice_batch(gru, 8), lstm) is None
    assert padding_for(slice_batch(lstm, 8), gru) is None


def test_padded_f32_appends_zeros_along_its_axis_and_keeps_every_value_as_float32() -> None:
    """Time-major states are padded along axis 1, batch-major arrays along axis 0; the values come through as float32."""
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    along_1 = padded_f32(a, 2, axis=1)
    assert along_1.dtype == np.float32 and along_1.shape == (2, 5, 4) and along_1.flags.c_contiguous
    np.testing.assert_array_equal(along_1[:, :3], a.astype(np.float32))
    assert not along_1[:, 3:].any()
    along_0 = padded_f32(np.swapaxes(a, 0, 1), 1)
    assert along_0.shape == (4, 2, 4) and along_0.flags.c_contiguous
    np.testing.assert_array_equal(along_0[:3], np.swapaxes(a, 0, 1).astype(np.float32))
    assert not along_0[3:].any()
    np.testing.assert_array_equal(padded_f32(a), a.astype(np.float32))
