"""End-to-end: a budget the stored fixed costs alone overrun says so before the first case runs."""

from __future__ import annotations

import pytest

from conftest import run, whole_lines


def test_a_budget_the_stored_fixed_costs_overrun_says_so_before_the_cases_run(project: pytest.Pytester) -> None:
    """A recorded night prices both cases' build, proof, parity, timed rounds and the time it spent outside them; 0.6 ms
    holds none of it: one line says so at the start, both cases run their minimum rounds, and the summary's budget line
    says why."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    result = run(project, "--rnnperf-budget=0.00001")
    result.assert_outcomes(passed=2)
    lines = whole_lines(result)
    lines.fnmatch_lines(["rnnperf: --rnnperf-budget=1e-05 cannot hold: the collected cases' fixed costs come to * s in "
                         "0001_baseline.json (* s: torch * s; * s: torch * s; * s: torch * s), and their timed rounds at the "
                         "least stored * s, and * s outside them (collecting, starting, each test's setup) as stored; "
                         "the run goes on, its cases cut to their minimum rounds while it is behind",
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



def test_a_budget_says_before_the_cases_that_a_claims_test_with_no_stored_answer_runs_whatever_it(
        project: pytest.Pytester) -> None:
    """Two lent H200s ran a night more than 2 minutes past a 5-minute budget without a word: their model's history held no
    claims, and a claim with no stored answer is never deferred. The line says so at the start, until a kept run
    stores the answer."""
    project.makepyfile(test_own_claims="""
        from pytest_rnnperf.judge.claims import ClaimRow

        def test_batch_size(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("batch-size", "mine", "1.4x [1.3, 1.5]", "weaker here"))
            rnnperf_claims.check()
    """)
    run(project, "--rnnperf-update-baseline", "test_cases.py").assert_outcomes(passed=2)
    result = run(project, "--rnnperf-budget=5", "--rnnperf-keep-run")
    result.assert_outcomes(passed=3)
    whole_lines(result).fnmatch_lines(["rnnperf: --rnnperf-budget=5 may not hold: 1 claims and parity test(s) have no "
                                       "answer stored on this GPU model, so they run tonight whatever the budget; a "
                                       "kept run (--rnnperf-keep-run) stores their answers for the nights after",
                                       "test_cases.py ..*"])
    stored = run(project, "--rnnperf-budget=5")
    stored.assert_outcomes(passed=2, skipped=1)
    assert "rnnperf: --rnnperf-budget" not in stored.stdout.str()
