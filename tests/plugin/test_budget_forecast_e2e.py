"""End-to-end: a budget the stored fixed costs alone overrun says so before the first case runs."""

from __future__ import annotations

import pytest

from conftest import run, whole_lines


def test_a_budget_the_stored_fixed_costs_overrun_says_so_before_the_cases_run(project: pytest.Pytester) -> None:
    """A recorded night prices both cases' build, proof, parity and timed rounds; 0.6 ms holds none of it: one line says so at
    the start, both cases run their minimum rounds, and the summary's budget line says why."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    result = run(project, "--rnnperf-budget=0.00001")
    result.assert_outcomes(passed=2)
    lines = whole_lines(result)
    lines.fnmatch_lines(["rnnperf: --rnnperf-budget=1e-05 cannot hold: the collected cases' fixed costs come to * s in "
                         "0001_baseline.json (* s: torch * s; * s: torch * s; * s: torch * s), and their timed rounds at the "
                         "least stored * s; the run goes on, its cases cut to their minimum rounds while it is behind",
                         "test_cases.py ..*",
                         "*budget 1e-05 min: 2 case(s) cut to their minimum rounds (steadiest first); run 0:*; it could "
                         "not hold: the collected cases' fixed costs come to * s in 0001_baseline.json (*"])
    # Read before the first case: drawn to the terminal's width ($COLUMNS, 200 here), not as one line of ~280.
    forecast = [line for line in result.stdout.lines if line.startswith("rnnperf: --rnnperf-budget=")]
    assert forecast and len(forecast[0]) <= 200, forecast


def test_a_budget_with_nothing_stored_says_before_the_cases_that_it_cannot_foresee_the_run(
        project: pytest.Pytester) -> None:
    """A GPU model with no history: the line comes before the first case; once the run is stored, the next is priced."""
    result = run(project, "--rnnperf-budget=5", "--rnnperf-update-baseline")
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["rnnperf: --rnnperf-budget=5 cannot be foreseen: 2 of 2 collected case(s) have "
                                       "no stored cost on this GPU model*; the run finds out as they run, and storing "
                                       "it (--rnnperf-keep-run; --rnnperf-update-baseline for a first baseline) prices "
                                       "the next night", "test_cases.py ..*"])
    assert "rnnperf: --rnnperf-budget" not in run(project, "--rnnperf-budget=5").stdout.str()

