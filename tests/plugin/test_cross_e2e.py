"""End-to-end: the cross-framework check (one checkpoint in torch and in TF/Keras) as users run it."""

from __future__ import annotations

import pytest

from conftest import load_json, run

CROSS_FILE = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape, cross_id

CASES = [Case("torch", "lstm", Shape(4, 2, 3, 5)), Case("torch", "rnn_tanh", Shape(4, 2, 3, 5))]

@pytest.mark.parametrize("case", CASES, ids=lambda case: cross_id(case, "tf"))
def test_cross(case, rnnperf):
    rnnperf.check(rnnperf.cross(case, "tf"))
"""


@pytest.fixture
def cross_project(project: pytest.Pytester) -> pytest.Pytester:
    """The fake-GPU project with cross-framework checks instead of paired cases."""
    (project.path / "test_cases.py").unlink()
    project.makepyfile(test_cross=CROSS_FILE)
    return project


def test_cudnn_sides_on_a_gpu_keras_simple_rnn_stays_generic(cross_project: pytest.Pytester) -> None:
    """With a GPU: torch cuDNN vs Keras cuDNN for LSTM, torch cuDNN vs Keras's generic SimpleRNN; both in the report."""
    result = run(cross_project, "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*across frameworks (one checkpoint, converted to each framework's layout):*",
        "torch-vs-tf-lstm-train-fp32-T4-B2-I3-H5-L1 * torch cudnn vs tf cudnn * ok *",
        "torch-vs-tf-rnn_tanh-train-fp32-T4-B2-I3-H5-L1 * torch cudnn vs tf generic * ok *",
    ])
    report = load_json(cross_project.path / "out" / "rnnperf.json")
    assert [c["sides"] for c in report["cross"]] == [["torch cudnn", "tf cudnn"], ["torch cudnn", "tf generic"]]
    assert "### Across frameworks" in (cross_project.path / "out" / "summary.md").read_text()


def test_without_a_gpu_both_sides_run_generic(cross_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU: the check still runs, generic against generic."""
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible")
    result = run(cross_project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["torch-vs-tf-lstm-train-fp32-T4-B2-I3-H5-L1 * torch generic vs tf generic *"])


def test_a_side_that_disagrees_fails_with_a_table(cross_project: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The TF side off by 1e-3 (a converter bug, say) fails with obtained error and tolerance."""
    monkeypatch.setenv("FAKE_TF_ERROR", "1e-3")
    result = run(cross_project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*torch-vs-tf-lstm-*: parity out of tolerance (fp32*",
                                 "*torch cudnn vs tf cudnn*output*5e-05*"])


def test_wrong_path_fails(cross_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cuDNN side that fell back fails the check with the evidence."""
    monkeypatch.setenv("FAKE_WRONG_PATH", "1")
    result = run(cross_project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*the implementation that ran is not the one claimed*"])


def test_one_framework_missing_skips_with_its_reason(cross_project: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """TF not installed: the cross checks skip, saying so."""
    monkeypatch.setenv("FAKE_TF_UNAVAILABLE", "tensorflow is not installed (pip install 'pytest-rnnperf[tf]')")
    result = run(cross_project)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED [[]2[]]*tensorflow is not installed*"])


def test_parity_checks_held_in_a_stored_run_are_not_run_again_until_the_environment_changes(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cross and reference checks recorded with a baseline are skipped, naming it; a test that also times always runs."""
    # Not test_parity.py: an in-process run would meet tests/unit/test_parity.py, imported under that name.
    project.makepyfile(test_cross=CROSS_FILE, test_held_parity="""
        from pytest_rnnperf.model.cases import Case, Shape

        def test_reference(rnnperf):
            rnnperf.check(rnnperf.reference(Case("torch", "gru", Shape(6, 3, 3, 5))))

        def test_reference_then_timed(rnnperf):
            rnnperf.check(rnnperf.reference(Case("torch", "lstm", Shape(6, 3, 3, 5))))
            rnnperf.check(rnnperf.measure(Case("torch", "lstm", Shape(5, 2, 3, 5), floor=2.0)))
    """)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=6)
    quiet = run(project)
    quiet.assert_outcomes(passed=3, skipped=3)
    quiet.stdout.fnmatch_lines(["*SKIPPED*parity as checked in 0001_baseline.json: environment unchanged, within 7 "
                                "days (--rnnperf-recheck-days=0 checks it every run)*"])
    quiet.stdout.fnmatch_lines(["*parity: 3 test(s) not run, their answers as stored in 0001_baseline.json hold*"])
    run(project, "--rnnperf-recheck-days=0").assert_outcomes(passed=6)
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    run(project, "--rnnperf-no-fail-regression").assert_outcomes(passed=6)


def test_a_parity_check_that_failed_is_not_stood_for_by_the_run(project: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A cross check that failed on the recorded night runs again the next night."""
    project.makepyfile(test_cross=CROSS_FILE)
    monkeypatch.setenv("FAKE_TF_ERROR", "1e-3")
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2, failed=2)
    monkeypatch.delenv("FAKE_TF_ERROR")
    run(project).assert_outcomes(passed=4)
