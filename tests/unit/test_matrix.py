"""The ready suite's case matrix: which generic-vs-float64 cases run at which scale."""

from __future__ import annotations

from suites.matrix import paired_cases, reference_cases


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
