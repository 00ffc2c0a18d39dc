"""End-to-end: a night like the last full check compares the sides only; a changed environment checks fully."""

from __future__ import annotations

import json

import pytest

from conftest import load_json, run


def _checks(project: pytest.Pytester) -> dict[str, str]:
    """Each cuDNN case's ``checks`` and parity rows in the run's rnnperf.json."""
    report = load_json(project.path / "rnnperf-report" / "rnnperf.json")
    return {r["case"]["id"]: (r["checks"], sorted({row["comparison"] for row in r["parity"]["rows"]}))
            for r in report["results"] if r["cudnn"] is not None}


def test_the_night_after_a_recorded_baseline_compares_the_sides_only(project: pytest.Pytester) -> None:
    """The recording checks fully; the next night, same environment, compares cuDNN with generic and says so."""
    recorded = run(project, "--rnnperf-update-baseline")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(["*checks: 2 case(s) fully (parity against float64, energy) *a recorded baseline: 2*"])
    assert {c for c, _ in _checks(project).values()} == {"full"}
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*checks: 0 case(s) fully (parity against float64, energy), 2 compared cuDNN with "
                                 "generic only: environment as at their last full check, within 7 days*"])
    assert all(checks == ("sampled", ["cudnn vs generic"]) for checks in _checks(project).values())


def test_a_changed_cudnn_or_zero_recheck_days_checks_every_case_fully(project: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Another cuDNN version since the last full check, or --rnnperf-recheck-days=0: float64 parity again."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    always = run(project, "--rnnperf-recheck-days=0")
    always.assert_outcomes(passed=2)
    # fnmatch reads [...] as a character class: the brackets are matched by *.
    always.stdout.fnmatch_lines(["*checks: 2 case(s) fully (parity against float64, energy) *--rnnperf-recheck-days=0: 2*"])
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    changed = run(project, "--rnnperf-no-fail-regression")
    changed.stdout.fnmatch_lines(["*checks: 2 case(s) fully (parity against float64, energy) *environment changed: 2*"])
    assert all(c == "full" and "cudnn vs reference" in rows for c, rows in _checks(project).values())


def test_steady_cases_stop_timing_at_the_noise_target_and_every_round_runs_without_one(project: pytest.Pytester) -> None:
    """The fake steps jitter 1%: a 5% noise target is met after 4 rounds; --rnnperf-max-noise=0 runs all 8."""
    run(project, "--rnnperf-max-noise=5%", "--benchmark-json=steady.json").assert_outcomes(passed=2)
    run(project, "--rnnperf-max-noise=0", "--benchmark-json=every.json").assert_outcomes(passed=2)
    for name, rounds in (("steady.json", 4), ("every.json", 8)):
        benches = load_json(project.path / name)["benchmarks"]
        assert {len(b["stats"]["data"]) for b in benches if b["params"]["side"] == "cudnn"} == {rounds}, name


def test_a_run_over_its_budget_cuts_the_cases_still_to_come_to_their_minimum_rounds(project: pytest.Pytester) -> None:
    """A budget of 0.6 ms (spent by the first case, even in a warm process): the first case times its 8 rounds, the
    second only its minimum 5, and the summary says so."""
    result = run(project, "--rnnperf-budget=0.00001", "--rnnperf-max-noise=0", "--benchmark-json=cut.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*device time: 3 of 8 traced rounds: the run's budget (--rnnperf-budget) left this "
                                 "case its minimum rounds*",
                                 "where the time went (2 case(s), * s of a * s run, * s of it collecting, * s before "
                                 "the first test, * s after the last): build *",
                                 "*budget 1e-05 min: 1 case(s) cut to their minimum rounds (steadiest first); run 0:*"])
    time = load_json(project.path / "rnnperf-report" / "rnnperf.json")["table"]["time"]
    assert 0 < time["collection_s"] <= time["before_tests_s"] < time["wall_s"]  # equal to the millisecond at times
    assert 0 <= time["after_tests_s"] < time["wall_s"] - time["before_tests_s"]
    benches = load_json(project.path / "cut.json")["benchmarks"]
    assert sorted(len(b["stats"]["data"]) for b in benches if b["params"]["side"] == "cudnn") == [5, 8]


def test_a_negative_budget_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """--rnnperf-budget=-5: one line, no case runs."""
    result = run(project, "--rnnperf-budget=-5")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--rnnperf-budget*-5*"])
    assert "passed" not in result.stdout.str()


def test_a_run_over_its_budget_defers_the_full_checks_a_changed_cudnn_asked_for(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another cuDNN and a budget the first case spends: it is checked fully, the second is deferred and counted; the
    next night, within budget, checks the deferred one fully."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    short = run(project, "--rnnperf-budget=0.00001", "--rnnperf-no-fail-regression", "--rnnperf-keep-run")
    short.stdout.fnmatch_lines(["*checks: 1 case(s) fully (parity against float64, energy) *environment changed: 1*, "
                                "1 deferred to a later night (--rnnperf-budget): checked cuDNN against generic only, "
                                "their full check still due*"])
    assert sorted(c for c, _ in _checks(project).values()) == ["full", "sampled"]
    deferred = next(case for case, (c, _) in _checks(project).items() if c == "sampled")
    run(project, "--rnnperf-no-fail-regression")
    assert _checks(project)[deferred] == ("full", ["cudnn vs generic", "cudnn vs reference", "generic vs reference"])


def test_a_parity_test_parametrized_by_its_case_runs_again_only_for_a_change_that_can_touch_its_framework(
        project: pytest.Pytester) -> None:
    """A Keras version other than the stored one: the torch reference test parametrized by its case (as the ready
    suite's are) stays skipped as stored; one that builds its case inline may check anything, so it runs."""
    project.makepyfile(test_team_parity="""
        import pytest
        from pytest_rnnperf.model.cases import Case, Shape

        @pytest.mark.parametrize("case", [Case("torch", "gru", Shape(6, 3, 3, 5))], ids=["torch-gru"])
        def test_scoped(rnnperf, case):
            rnnperf.check(rnnperf.reference(case))

        def test_inline(rnnperf):
            rnnperf.check(rnnperf.reference(Case("torch", "lstm", Shape(6, 3, 3, 5))))
    """)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=4)
    [stored] = project.path.glob("baselines/*/*/0001_baseline.json")
    data = load_json(stored)
    data["machine_info"]["rnnperf"]["environment"]["keras"] = "0.0.1"
    stored.write_text(json.dumps(data))
    night = run(project, "-v", "--rnnperf-no-fail-regression")
    night.assert_outcomes(passed=3, skipped=1)
    night.stdout.fnmatch_lines(["*test_scoped*SKIPPED*parity as checked in 0001_baseline.json*"])
    night.stdout.fnmatch_lines(["*test_inline PASSED*"])
