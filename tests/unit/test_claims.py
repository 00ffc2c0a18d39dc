"""The claims table's logic: verdicts on ratio and equality claims, rows as plain data, the rendered tables."""

from __future__ import annotations

import pytest

from pytest_rnnperf.judge.claims import (
    CONFIRMED, CONSISTENT, NOT_RUN, REVERSED, SEED_BY_ID, SEEDS, UNDECIDED, WEAKER, ClaimRow, equal_verdict,
    failure_message, markdown_table, not_run, ratio_verdict, table_rows,
)


@pytest.mark.parametrize(("lo", "hi", "verdict"), [
    (8.0, 9.0, CONFIRMED),      # the whole interval at or beyond the reported 7.5x
    (6.0, 9.0, CONSISTENT),     # the reported figure lies inside the interval
    (2.0, 3.0, WEAKER),         # a real effect, smaller than reported
    (0.9, 3.0, UNDECIDED),      # the interval spans no effect: noise decides nothing
    (0.5, 0.9, REVERSED),       # the opposite of the claim
])
def test_a_ratio_claim_is_judged_by_where_its_interval_lies(lo: float, hi: float, verdict: str) -> None:
    """Only the interval decides: a point estimate beyond the figure with a wide interval is not confirmed."""
    assert ratio_verdict(7.5, lo, hi) == verdict


def test_a_claim_without_a_figure_is_confirmed_by_a_clear_effect_alone() -> None:
    """'Substantially faster' holds when the whole interval lies above 1x."""
    assert ratio_verdict(None, 1.2, 1.5) == CONFIRMED
    assert ratio_verdict(None, 0.95, 1.5) == UNDECIDED


def test_equal_accuracy_holds_within_tolerance_and_when_cudnn_is_better() -> None:
    """Within tolerance: equal; cuDNN clearly better: holds; cuDNN clearly worse: the promise is broken."""
    assert equal_verdict(0.95, 0.96, 0.025)[1]
    assert equal_verdict(0.99, 0.90, 0.025) == ("better (+0.09, tolerance 0.025)", True)
    verdict, holds = equal_verdict(0.90, 0.99, 0.025)
    assert not holds and verdict.startswith("worse")


def test_a_row_survives_the_json_report_and_takes_its_claim_text_from_the_seed() -> None:
    """to_dict carries the seed's text for readers; from_dict looks the seed up again."""
    row = ClaimRow("train-speed", "torch", "6.10x [5.9, 6.3] per epoch", CONSISTENT, {"ratio": 6.1})
    data = row.to_dict()
    assert data["hardware"] == SEED_BY_ID["train-speed"].hardware and data["reported"].startswith("7.5x")
    data["hardware"] = "edited by hand"
    assert ClaimRow.from_dict(data) == row


def test_the_table_lists_rows_in_seed_order_and_marks_broken_promises() -> None:
    """Rows come in the order of SEEDS, then framework; a row with a failure says FAILED in its verdict."""
    rows = [ClaimRow("precision", "torch", "m", "v"),
            ClaimRow("train-accuracy", "torch", "0.90 vs 0.99", "worse", failure="cuDNN lost 9 points"),
            not_run("train-speed", "keras", "no GPU")]
    cells = table_rows(rows)
    assert [c[0].split(":")[0] for c in cells] == ["train-speed", "train-accuracy", "precision"]
    assert cells[0][4] == NOT_RUN and cells[1][4] == "worse FAILED"
    assert "K80" in cells[0][2]


def test_markdown_escapes_pipes_inside_cells() -> None:
    """A measured text holding '|' cannot break the Markdown table."""
    lines = markdown_table([ClaimRow("train-speed", "torch", "a | b", CONFIRMED)])
    assert lines[2].count(" | ") == 4 and "a \\| b" in lines[2]


def test_a_failure_message_names_the_claim_what_was_reported_and_what_was_measured() -> None:
    """The test failure reads on its own: claim, reported figure with its hardware, measurement, verdict."""
    text = failure_message(ClaimRow("charlm-curve", "keras", "loss curves within 9%", "apart", failure="9% apart"))
    assert text.splitlines()[0] == "claim charlm-curve (keras): 9% apart"
    assert "Titan Xp" in text and "loss curves within 9%" in text


def test_every_seed_names_its_hardware_and_source() -> None:
    """A claim without the hardware it came from cannot be compared with this GPU."""
    assert all(s.hardware and s.source and s.reported for s in SEEDS)
    assert {s.id for s in SEEDS if s.promise} == {"train-accuracy", "regression-accuracy", "charlm-curve"}
