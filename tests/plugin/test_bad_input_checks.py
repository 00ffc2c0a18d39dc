"""Results a test measured are judged even where it forgot rnnperf.check(), and more inputs get one line.

Each test names the input it guards; every test that could touch baselines/ proves that nothing stored changed.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from conftest import TEST_FILE, run
from test_bad_input import _model_failures, _one_line, _record, _sha, _usage_error

UNCHECKED = TEST_FILE.replace("FLOOR", "2.0").replace("rnnperf.check(rnnperf.measure(case))", "rnnperf.measure(case)")


def _stored(project: pytest.Pytester) -> dict[Path, str]:
    """The sha256 of every file under the project's baselines/, to prove that a run changed none of them."""
    return {p: _sha(p) for p in sorted((project.path / "baselines").rglob("*")) if p.is_file()}


def _failures(result: pytest.RunResult) -> str:
    """The FAILURES section of a run's output: each failed test's header and report."""
    section = result.stdout.str().split("=== FAILURES ===", 1)[1].splitlines()[1:]
    return "\n".join(itertools.takewhile(lambda line: not line.startswith("="), section))


def test_a_forgotten_check_fails_a_regressed_case_as_check_would(project: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """E1: rnnperf.measure(case) without check() at 2x the baseline's device time passed, exit 0."""
    _record(project)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "1.0")
    checked = run(project)
    checked.assert_outcomes(failed=2)
    project.makepyfile(test_cases=UNCHECKED)
    forgotten = run(project)
    forgotten.assert_outcomes(failed=2)
    assert _failures(forgotten) == _failures(checked)
    assert "cuDNN device time regressed" in _failures(forgotten)
    reported = run(project, "--rnnperf-no-fail-regression")  # regressed, reported not failed: as with check()
    reported.assert_outcomes(passed=2)
    reported.stdout.fnmatch_lines(["*verdicts: 2 regressed*"])


@pytest.mark.parametrize("option, line", [
    ("--rnnperf-update-baseline", "baseline not recorded: 2 test(s) failed; a baseline must come from a clean run "
                                  "(all 2 regressed against the stored history: if that is intended, add "
                                  "--rnnperf-no-fail-regression to record it)"),
    ("--rnnperf-keep-run", "run not kept: 2 test(s) failed, 2 case(s) regressed; the history keeps clean runs only"),
])
def test_a_regressed_run_whose_check_was_forgotten_is_never_stored(project: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch, option: str,
                                                                   line: str) -> None:
    """E1: with --rnnperf-update-baseline the 2x slower run of an unchecked test became the next baseline."""
    _record(project)
    before = _stored(project)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "1.0")
    project.makepyfile(test_cases=UNCHECKED)
    result = run(project, option)
    result.assert_outcomes(failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{line}*"])
    assert _stored(project) == before


def test_a_failure_the_test_expects_is_still_its_own_to_declare(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """E1: an xfail test that forgot check() passed as XPASS; a check() inside pytest.raises stays the test's call."""
    monkeypatch.setenv("FAKE_WRONG_PATH", "1")
    project.makepyfile(test_cases="""
        import pytest
        from pytest_rnnperf.model.cases import Case, Shape

        CASE = Case("torch", "lstm", Shape(4, 2, 3, 5))

        @pytest.mark.xfail(reason="this GPU falls back", strict=True)
        def test_falls_back(rnnperf):
            rnnperf.measure(CASE)

        def test_the_fallback_is_caught(rnnperf):
            record = rnnperf.measure(CASE)
            with pytest.raises(pytest.fail.Exception, match="the implementation that ran is not the one claimed"):
                rnnperf.check(record)
    """)
    run(project).assert_outcomes(xfailed=1, passed=1)


def test_an_unchecked_model_with_nan_inputs_fails_with_its_parity_table(pytester: pytest.Pytester) -> None:
    """E1: rnnperf.model(...) on NaN inputs without check() showed "FAIL inf/5e-05" in its row and passed."""
    result, reports = _model_failures(pytester, """
def test_nan(rnnperf):
    rnnperf.model(Encoder, inputs=lambda: torch.full((4, 2, 3), math.nan))
""")
    result.assert_outcomes(failed=1)
    assert reports["test_nan"][0] == ("test_own_model.py::test_nan: parity out of tolerance (fp32: IEEE float32 in "
                                      "cuDNN and matmul (TF32 off)):")
    assert any("generic vs reference   output" in line and "inf" in line for line in reports["test_nan"])


def test_inputs_that_leave_nothing_to_compare_fail_in_one_line(pytester: pytest.Pytester) -> None:
    """E9: a batch of size 0 passed with parity "ok 0.0e+00" (nothing compared); a sequence of length 0 is named too."""
    result, reports = _model_failures(pytester, """
class BatchFirst(Encoder):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 5, batch_first=True)

def test_no_batch(rnnperf):
    rnnperf.check(rnnperf.model(BatchFirst, inputs=lambda: torch.randn(0, 6, 3)))

def test_no_batch_time_major(rnnperf):
    rnnperf.check(rnnperf.model(Encoder, inputs=(torch.randn(4, 0, 3),)))

def test_no_steps(rnnperf):
    rnnperf.check(rnnperf.model(BatchFirst, inputs=lambda: torch.randn(2, 0, 3)))
""")
    result.assert_outcomes(failed=3)
    for test in ("test_no_batch", "test_no_batch_time_major"):
        _one_line(reports, test, "inputs: batch of size 0: nothing to compare")
    _one_line(reports, "test_no_steps", "inputs: sequence of length 0: nothing to compare")


def test_a_callable_that_asks_for_arguments_fails_in_one_line(pytester: pytest.Pytester) -> None:
    """E10: inputs=lambda n: ... failed with a TypeError traceback through fixtures.py, session.py and runner.py."""
    result, reports = _model_failures(pytester, """
class Sized(Encoder):
    def __init__(self, hidden):
        super().__init__()

def test_inputs(rnnperf):
    rnnperf.check(rnnperf.model(Encoder, inputs=lambda n: torch.randn(4, n, 3)))

def test_build(rnnperf):
    rnnperf.check(rnnperf.model(Sized, inputs=x))

def test_defaults_are_fine(rnnperf):
    rnnperf.check(rnnperf.model(lambda hidden=5: Encoder(), inputs=lambda n=2: torch.randn(4, n, 3)))
""")
    result.assert_outcomes(failed=2, passed=1)
    _one_line(reports, "test_inputs", "rnnperf.model(): inputs: a callable must take no arguments; <lambda> asks for n")
    _one_line(reports, "test_build", "rnnperf.model(): build: a callable must take no arguments; Sized asks for hidden")


def test_a_report_folder_holding_files_of_the_user_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """E4: --rnnperf-report-dir=. replaced the project's own summary.md and index.html, exit 0, no word."""
    own = {"summary.md": "# our project\n", "index.html": "<p>our page</p>\n"}
    for name, text in own.items():
        (project.path / name).write_text(text)
    _usage_error(run(project, "--rnnperf-report-dir=."), "--rnnperf-report-dir / rnnperf_report_dir: . holds files no "
                 "rnnperf report wrote (index.html, summary.md, conftest.py, ...)", "give an empty or new folder")
    assert {name: (project.path / name).read_text() for name in own} == own
    (project.path / "out").mkdir()
    (project.path / "out" / "notes.txt").write_text("mine")
    _usage_error(run(project, "--rnnperf-report-dir=out"), "out holds files no rnnperf report wrote (notes.txt)")
    (project.path / "out" / "notes.txt").unlink()
    (project.path / "out" / ".gitkeep").write_text("")
    for _ in range(2):  # an empty folder (but for a hidden file), then the report the first run wrote there
        run(project, "--rnnperf-report-dir=out").assert_outcomes(passed=2)
    assert (project.path / "out" / "summary.md").read_text().startswith("#")


def test_a_report_folder_written_before_reports_were_marked_is_still_a_report_folder(project: pytest.Pytester) -> None:
    """E4: a report folder of an earlier release (no marker, a report's rnnperf.json) is written over as before."""
    run(project).assert_outcomes(passed=2)
    (project.path / "rnnperf-report" / ".rnnperf-report").unlink()
    run(project).assert_outcomes(passed=2)
    (project.path / "rnnperf-report" / ".rnnperf-report").unlink()
    (project.path / "rnnperf-report" / "rnnperf.json").write_text('{"results": []}')  # not a report's
    _usage_error(run(project), "rnnperf-report holds files no rnnperf report wrote (index.html, rnnperf.json, "
                 "speedups.png, ...)")


@pytest.mark.parametrize("option", ["--rnnperf-update-baseline", "--rnnperf-keep-run"])
@pytest.mark.parametrize("name, value", [("RNNPERF_INJECT_CUDNN_DELAY_US", "torch-*=30"),
                                         ("RNNPERF_INJECT_HOST_DELAY_US", "torch-*=30"),
                                         ("RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL", "torch-*-bi"),
                                         ("RNNPERF_INJECT_LONGER_STEP", "torch-*=3")])
def test_storing_a_run_with_a_fault_injected_is_refused_before_the_run(project: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch, option: str,
                                                                       name: str, value: str) -> None:
    """E5: an injected delay left set with --rnnperf-update-baseline or --rnnperf-keep-run was stored with the run."""
    _record(project)
    before = _stored(project)
    monkeypatch.setenv(name, value)
    _usage_error(run(project, option), f"{option}: {name} set: a run with injected faults is never stored; unset it")
    assert _stored(project) == before


@pytest.mark.parametrize("args, message", [
    (["--benchmark-compare=0099", "--benchmark-compare-fail=mean:5%"], "--benchmark-compare-fail: "
     "--benchmark-compare=0099 matches no stored run in "),
    (["--benchmark-compare", "--benchmark-compare-fail=mean:5"], "--benchmark-compare-fail=mean:5: an absolute "
     "threshold is in seconds, more than the stored mean of every entry (at most 4 ms), so it fires only where a time "
     "more than doubles; give a share (mean:5%) or seconds (mean:0.0002 is 5% of the slowest)"),
], ids=["no stored run", "seconds"])
def test_a_compare_fail_gate_that_cannot_fire_is_refused_before_the_run(project: pytest.Pytester, args: list[str],
                                                                       message: str) -> None:
    """A compare-fail gate against no stored run failed only after the whole run; mean:5 (seconds) never fired."""
    _record(project)
    before = _stored(project)
    _usage_error(run(project, *args), message)
    assert _stored(project) == before
    run(project, "--benchmark-compare", "--benchmark-compare-fail=mean:0.0002").assert_outcomes(passed=2)


def test_an_injection_glob_that_matches_no_case_is_named(project: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_CUDNN_DELAY_US='lstm-*=30' (a case id starts with its framework) slowed nothing, silently."""
    monkeypatch.setenv("RNNPERF_INJECT_CUDNN_DELAY_US", "lstm-*=30,torch-gru-*=30")
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["RNNPERF_INJECT_CUDNN_DELAY_US: 'lstm-[*]' matched no timed case of this run, so "
                                 "nothing was injected there (case ids look like torch-lstm-train-fp32-T4-B2-I3-H5-L1)"])
    assert "torch-gru-*'" not in result.stdout.str()
