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
