"""End-to-end: what the terminal shows at the end of a run: the rnnperf summary last, the answer first, within width."""

from __future__ import annotations

import pytest

from conftest import load_json, run

WIDTH = 120


def _summary(result: pytest.RunResult) -> list[str]:
    """The lines of the rnnperf summary section (up to pytest's short test summary or its closing line)."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("=") and "rnnperf summary" in line) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start:end]


def test_a_regression_leads_the_summary_and_no_line_is_wider_than_the_terminal(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS=120 and cuDNN 50% slower after a driver and cuDNN update: the summary opens with each case, its
    metric, change, threshold and kernel, then the driver before cuDNN, and fits 120 columns all the way down."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.25")
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "9.20.0")
    monkeypatch.setenv("FAKE_DRIVER", "590.10")
    result = run(project)
    result.assert_outcomes(failed=2)
    summary = _summary(result)
    assert summary[0] == "rnnperf: regressions found"
    assert summary[1].split() == ["case", "metric", "change", "[95%", "CI]", "threshold", "verdict"]
    lstm = next(line for line in summary[3:6] if line.startswith("torch-lstm-train-fp32-T4-B2-I3-H5-L1"))
    assert "cudnn device time" in lstm and "+50." in lstm and "3.0%" in lstm and lstm.endswith("regressed")
    text = "\n".join(summary)
    assert "kernels of torch-lstm-train-fp32-T4-B2-I3-H5-L1 that moved: RNN_blockPersist_fp_LSTM 0.500 -> 0.750" in text
    changes = next(i for i, line in enumerate(summary) if line.startswith("environment changes since the baseline:"))
    assert changes < next(i for i, line in enumerate(summary) if line.startswith("cuDNN vs generic"))
    assert text.index("driver_version: 580.95.05 -> 590.10") < text.index("torch.cudnn_version: 9.19.0 -> 9.20.0")
    assert summary[-1] == "rnnperf: regressions found"  # and the block's last line says it again
    wide = [line for line in summary if len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    lines = result.stdout.lines
    failures = lines[next(i for i, line in enumerate(lines) if "FAILURES" in line):lines.index(_heading(lines))]
    assert any(line.startswith("  environment changes since the baseline:") for line in failures)
    wide = [line for line in failures if len(line) > WIDTH and not line.startswith("_")]
    assert not wide, "\n".join(wide)  # each failed test's own message fits too


def _heading(lines: list[str]) -> str:
    """The rnnperf summary's heading line."""
    return next(line for line in lines if line.startswith("=") and "rnnperf summary" in line)


def test_the_rnnperf_summary_comes_after_pytest_benchmark_s_tables(project: pytest.Pytester) -> None:
    """--rnnperf-benchmark-tables prints pytest-benchmark's tables as before, and the rnnperf summary after them."""
    result = run(project, "--rnnperf-benchmark-tables")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "benchmark 'torch-lstm-train-fp32-T4-B2-I3-H5-L1'" in out
    assert out.rindex("benchmark 'torch-") < out.index(" rnnperf summary =")
    assert "Legend:" not in out.split(" rnnperf summary =")[1]


def test_pytest_benchmark_s_tables_of_the_cases_go_to_the_report_folder(project: pytest.Pytester) -> None:
    """By default the per-case tables are in rnnperf-report/benchmark.txt, and one line of the summary says so."""
    result = run(project, "--benchmark-json=out.json")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "benchmark 'torch-" not in out and "Legend:" not in out
    result.stdout.fnmatch_lines(["pytest-benchmark: its tables of 2 case(s) in rnnperf-report/benchmark.txt "
                                 "(--rnnperf-benchmark-tables prints them here;*"])
    tables = (project.path / "rnnperf-report" / "benchmark.txt").read_text()
    assert "benchmark 'torch-gru-train-fp32-T4-B2-I3-H5-L1'" in tables and "Name (time in" in tables
    assert len(load_json(project.path / "out.json")["benchmarks"]) == 4  # pytest-benchmark's own JSON: every timing


def test_without_a_gpu_the_summary_counts_the_cuDNN_cases_not_run_instead_of_passing(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU runner: the terminal and the Markdown for CI pages say how many cuDNN cases did not run, not 'passed'."""
    monkeypatch.setenv("FAKE_GPU_NAME", "none")
    monkeypatch.setenv("FAKE_NO_GPU", "no CUDA GPU visible to torch")
    result = run(project, "--rnnperf-markdown=summary.md")
    result.assert_outcomes(skipped=2)
    assert _summary(result)[0] == "rnnperf: 2 cuDNN cases not run: no GPU"
    assert (project.path / "summary.md").read_text().startswith("## pytest-rnnperf: 2 cuDNN cases not run: no GPU\n")
    table = load_json(project.path / "rnnperf-report" / "rnnperf.json")["table"]
    assert table["status"] == "2 cuDNN cases not run: no GPU" and table["no_gpu"] == 2


def test_benchmark_compare_fail_still_fails_and_the_rnnperf_summary_still_prints(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables moved out, pytest-benchmark's own --benchmark-compare-fail still fails on its regression, and the
    rnnperf summary is printed although pytest-benchmark raised in its summary."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.25")
    result = run(project, "--benchmark-compare", "--benchmark-compare-fail=median:10%", "--rnnperf-no-fail-regression")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret != pytest.ExitCode.OK
    assert "Performance has regressed" in output and "benchmark 'torch-" not in output
    assert _summary(result)[0].startswith("rnnperf: ")


# A known issue (its LSTM case misses its floor, marked to) beside a case that passes.
KNOWN_AND_FINE = '''
import pytest
from pytest_rnnperf.model.cases import Case, Shape

@pytest.mark.xfail(strict=True, reason="a known framework issue")
def test_known(rnnperf):
    rnnperf.check(rnnperf.measure(Case("torch", "lstm", Shape(4, 2, 3, 5), floor=1000.0)))

def test_fine(rnnperf):
    rnnperf.check(rnnperf.measure(Case("torch", "gru", Shape(4, 2, 3, 5), floor=2.0)))
'''


def test_a_known_issue_marked_xfail_is_listed_apart_and_a_quiet_run_reads_as_one(project: pytest.Pytester) -> None:
    """The LSTM case, marked as a known issue (strict xfail), misses its floor: the run passes, the status is not
    'gate failures', and the case is named as a known issue instead of leading the answer."""
    project.makepyfile(test_cases=KNOWN_AND_FINE)
    result = run(project)
    result.assert_outcomes(passed=1, xfailed=1)
    summary = _summary(result)
    assert summary[0] == "rnnperf: all checks passed"
    assert summary[1] == ("known issues: 1 case(s) failed as their tests are marked to (xfail), not counted above: "
                          "torch-lstm-train-fp32-T4-B2-I3-H5-L1")
    assert not any("below its floor" in line for line in summary)


def test_a_known_issue_that_raised_before_its_record_is_named_and_a_kept_run_stores_its_seconds(
        project: pytest.Pytester) -> None:
    """A compiled-RNN case on a lent H100 raised while it built and took 11.8 s that no stored record priced: it is
    listed by its case, and the night's kept run keeps its test's seconds for the next night's budget."""
    project.makepyfile(test_cases='''
import pytest
from pytest_rnnperf.model.cases import Case, Shape

CASE = Case("torch", "lstm", Shape(4, 2, 3, 5))

@pytest.mark.xfail(strict=True, reason="a known framework issue")
@pytest.mark.parametrize("case", [CASE], ids=[CASE.id])
def test_known(rnnperf, case):
    raise RuntimeError("the compiled model raised while it built")

def test_fine(rnnperf):
    rnnperf.check(rnnperf.measure(Case("torch", "gru", Shape(4, 2, 3, 5), floor=2.0)))
''')
    run(project, "--rnnperf-update-baseline", "-k", "fine").assert_outcomes(passed=1, deselected=1)
    result = run(project, "--rnnperf-keep-run")
    result.assert_outcomes(passed=1, xfailed=1)
    assert _summary(result)[1] == ("known issues: 1 case(s) failed as their tests are marked to (xfail), not counted "
                                   "above: torch-lstm-train-fp32-T4-B2-I3-H5-L1")
    [kept] = project.path.glob("baselines/*/*/0002_run.json")
    costs = load_json(kept)["machine_info"]["rnnperf"]["check_costs"]
    assert list(costs) == ["test_known[torch-lstm-train-fp32-T4-B2-I3-H5-L1]"] and costs[list(costs)[0]] > 0


def test_a_known_issue_seen_failing_as_marked_is_not_run_again_until_the_environment_changes(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four compiled-RNN known issues cost a lent H100 15 s a night to learn what the environment alone decides: a
    stored run that saw one fail as marked stands for it, as for a claims test, until cuDNN changes."""
    project.makepyfile(test_cases=KNOWN_AND_FINE)
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=1, xfailed=1)
    quiet = run(project)
    quiet.assert_outcomes(passed=1, skipped=1)
    quiet.stdout.fnmatch_lines(["*SKIPPED*known issue as seen failing in 0001_baseline.json: environment unchanged, "
                                "within 7 days*"])
    quiet.stdout.fnmatch_lines(["*known issues: 1 test(s) not run, their answers as stored in 0001_baseline.json "
                                "hold*"])
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    run(project, "--rnnperf-no-fail-regression").assert_outcomes(passed=1, xfailed=1)


def test_after_a_change_the_known_issues_run_cheapest_first_as_last_stored(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed night short of its budget runs one known issue and defers the rest: the one that took least."""
    project.makepyfile(test_cases='''
import time
import pytest
from pytest_rnnperf.model.cases import Case, Shape

@pytest.mark.xfail(strict=True, reason="a slow known issue")
def test_a_slow(rnnperf):
    time.sleep(0.5)
    rnnperf.check(rnnperf.measure(Case("torch", "lstm", Shape(4, 2, 3, 5), floor=1000.0)))

@pytest.mark.xfail(strict=True, reason="a quick known issue")
def test_b_quick(rnnperf):
    rnnperf.check(rnnperf.measure(Case("torch", "gru", Shape(4, 2, 3, 5), floor=1000.0)))

def test_fine(rnnperf):
    rnnperf.check(rnnperf.measure(Case("torch", "gru", Shape(4, 2, 3, 6), floor=2.0)))
''')
    recorded = run(project, "--rnnperf-update-baseline", "-v")
    recorded.assert_outcomes(passed=1, xfailed=2)
    assert recorded.stdout.str().index("::test_a_slow") < recorded.stdout.str().index("::test_b_quick")
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "92000")
    night = run(project, "-v", "--rnnperf-no-fail-regression")
    assert night.stdout.str().index("::test_b_quick") < night.stdout.str().index("::test_a_slow")


def test_a_failed_case_is_named_with_its_reason_the_moment_it_fails(project: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A night cut short by its job's time limit shows a bare F without this: each failed case gets its own line,
    the failure's first line without the case id again, as it fails, long before the summary."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    result = run(project)
    result.assert_outcomes(failed=2)
    lines = result.stdout.lines
    live = [i for i, line in enumerate(lines) if line.startswith("rnnperf: test_") and " failed: " in line]
    assert len(live) == 2 and all(i < lines.index(_heading(lines)) for i in live)
    first = lines[live[0]]
    assert first.startswith("rnnperf: test_pair[torch-") and "failed: cuDNN device time regressed" in first, first
    assert len(first) <= WIDTH


def test_a_passing_run_and_a_failure_outside_rnnperf_tests_print_no_such_line(project: pytest.Pytester) -> None:
    """Only a failed rnnperf test is named: a user's own failing test keeps pytest's usual report alone."""
    project.makepyfile(test_plain="def test_plain_failure():\n    assert 1 == 2\n")
    result = run(project)
    result.assert_outcomes(passed=2, failed=1)
    assert not [line for line in result.stdout.lines if line.startswith("rnnperf: test_")]
