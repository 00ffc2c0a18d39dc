"""The claims suite as users run it: the table in the terminal, rnnperf.json and summary.md; a broken promise fails."""

from __future__ import annotations

import json
import re

import pytest

from conftest import REPO, load_json, needs_a_cpu_machine_with, run


# Two claims tests of a team's own, for the tests of what a budget defers: they end a module pytester dedents.
TWO_CLAIMS = """
        def test_batch_size(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("batch-size", "mine", "1.4x [1.3, 1.5]", "weaker here"))
            rnnperf_claims.check()

        def test_sequence_length(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("train-speed", "mine", "6.1x [5.9, 6.3]", "as claimed"))
            rnnperf_claims.check()
"""


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's widest: these tests match what its lines say (test_terminal_e2e.py checks the fit)."""
    monkeypatch.setenv("COLUMNS", "200")


def test_the_claims_suite_runs_its_cpu_checks_here_and_reports_every_claim(pytester: pytest.Pytester) -> None:
    """Without a GPU: generic float32 against float64 passes for torch and Keras, every claim row says why it is not measured."""
    needs_a_cpu_machine_with(("torch", "tensorflow", "sklearn"), "the claims suite")
    out = pytester.path / "report"
    result = pytester.runpytest_subprocess(str(REPO / "suites" / "claims"), "--rootdir", str(REPO), "-p",
                                           "no:cacheprovider", "-p", "no:xdist", f"--rnnperf-report-dir={out}")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(["*claims (the folklore, measured on this machine):*", "*train-accuracy:*"])
    rows = load_json(out / "rnnperf.json")["claims"]
    assert {(r["seed"], r["framework"]) for r in rows} >= {("charlm-memory", "keras"), ("precision", "torch")}
    assert len(rows) == 26 and not any(r["failure"] for r in rows)
    assert "### Claims (the folklore, measured on this machine)" in (out / "summary.md").read_text()


def test_a_row_that_breaks_a_promise_fails_its_test_with_the_claim(project: pytest.Pytester) -> None:
    """A team's own claims test: a row with a failure fails the test with a small table and shows FAILED in the summary."""
    project.makepyfile(test_own_claims="""
        from pytest_rnnperf.judge.claims import ClaimRow

        def test_promise(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("train-accuracy", "mine", "0.80 vs 0.97", "worse", failure="cuDNN lost 17 points"))
            rnnperf_claims.check()

        def test_report_only(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("batch-size", "mine", "1.4x [1.3, 1.5]", "weaker here"))
            rnnperf_claims.check()
    """)
    result = run(project, "test_own_claims.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*claim train-accuracy (mine): cuDNN lost 17 points*",
                                 "*reported:  equal or better; val acc 0.6469 vs 0.6234 (K80, P100; RTX 2070)*",
                                 "*batch-size:*mine*weaker here*"])
    result.stdout.fnmatch_lines(["*train-accuracy:*mine*worse FAILED*"])


def test_a_claims_test_kept_in_a_stored_run_is_not_measured_again_until_the_environment_changes(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded with its claims; the next night skips them naming the file; another cuDNN measures them again."""
    project.makepyfile(test_own_claims="""
        from pytest_rnnperf.judge.claims import ClaimRow

        def test_batch_size(rnnperf_claims):
            rnnperf_claims.add(ClaimRow("batch-size", "mine", "1.4x [1.3, 1.5]", "weaker here"))
            rnnperf_claims.check()
    """)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=3)
    quiet = run(project)
    quiet.assert_outcomes(passed=2, skipped=1)
    quiet.stdout.fnmatch_lines(["*claims: 1 test(s) not run, their answers as stored in 0001_baseline.json hold*"])
    quiet.stdout.fnmatch_lines(["*SKIPPED*claims as measured in 0001_baseline.json: environment unchanged, within 7 "
                                "days*"])
    run(project, "--rnnperf-recheck-days=0").assert_outcomes(passed=3)
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    run(project, "--rnnperf-no-fail-regression").assert_outcomes(passed=3)


def test_claims_a_changed_cudnn_asked_for_wait_for_later_nights_once_the_budget_is_spent(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another cuDNN and a budget the cases spend: the first claims test is measured (a parity test that ran
    before it does not count for it), the second deferred and counted; the next night, whatever its budget,
    measures the deferred one and skips the first as stored."""
    project.makepyfile(test_own_claims="""
        from pytest_rnnperf.judge.claims import ClaimRow
        from pytest_rnnperf.model.cases import Case, Shape

        def test_a_reference(rnnperf):
            rnnperf.check(rnnperf.reference(Case("torch", "gru", Shape(6, 3, 3, 5))))
    """ + TWO_CLAIMS)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=5)
    # On a GPU the claims run cheapest first as stored: these two take about as long, so the recording's say which.
    (stored,) = project.path.glob("baselines/*/*/0001_baseline.json")
    data = load_json(stored)
    data["machine_info"]["rnnperf"]["check_costs"].update({"test_batch_size": 0.1, "test_sequence_length": 0.2})
    stored.write_text(json.dumps(data))
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    short = run(project, "--rnnperf-budget=0.00001", "--rnnperf-no-fail-regression", "--rnnperf-keep-run")
    short.assert_outcomes(passed=4, skipped=1)
    short.stdout.fnmatch_lines(["*SKIPPED*claims deferred by --rnnperf-budget: environment changed since "
                                "0001_baseline.json (*cudnn*); a later night runs it*"])
    short.stdout.fnmatch_lines(["*claims: 1 test(s) deferred to a later night: the environment changed and the run's "
                                "budget (--rnnperf-budget) had no time for them; each night measures at least one*"])
    # the baseline timed it: the line says what it took, which a longer budget would make room for
    assert re.search(r"each night measures at least one \(they took [0-9.e-]+ s when last stored: a budget that much "
                     r"longer would leave them time\)", " ".join(short.stdout.str().split())), short.stdout.str()
    next_night = run(project, "--rnnperf-budget=0.00001", "--rnnperf-no-fail-regression", "-v")
    next_night.assert_outcomes(passed=3, skipped=2)
    next_night.stdout.fnmatch_lines(["*test_sequence_length PASSED*"])
    next_night.stdout.fnmatch_lines(["*test_batch_size SKIPPED*claims as measured in 0002_run.json*"])


def test_a_claims_test_longer_than_the_budget_left_waits_for_a_later_night_by_its_stored_seconds(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording keeps each claims test's seconds. With one of them stored at 10 minutes, another cuDNN and a
    6 s budget the cases leave most of: the quick claims test runs; the long one would run past what is left and
    waits, before the budget is spent (before, it ran and overran)."""
    project.makepyfile(test_own_claims="""
        from pytest_rnnperf.judge.claims import ClaimRow
    """ + TWO_CLAIMS)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=4)
    (stored,) = project.path.glob("baselines/*/*/0001_baseline.json")
    data = load_json(stored)
    costs = data["machine_info"]["rnnperf"]["check_costs"]
    assert set(costs) == {"test_batch_size", "test_sequence_length"} and all(0 <= s < 60 for s in costs.values())
    costs["test_sequence_length"] = 600.0  # as a long training claim would have taken
    stored.write_text(json.dumps(data))
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    night = run(project, "--rnnperf-budget=0.1", "--rnnperf-no-fail-regression", "-v")
    night.assert_outcomes(passed=3, skipped=1)
    night.stdout.fnmatch_lines(["*test_batch_size PASSED*"])
    night.stdout.fnmatch_lines(["*test_sequence_length SKIPPED*claims deferred by --rnnperf-budget: environment changed "
                                "since 0001_baseline.json*"])
