"""End-to-end: a GPU model's history of processes, as a nightly job records, keeps and judges it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import cli, load_json, run, whole_lines

GPU_DIR = "baselines/NVIDIA_H200"


def _files(project: pytest.Pytester) -> list[str]:
    """Names of the stored files of the fake H200, in order."""
    return sorted(p.name for p in (project.path / GPU_DIR).glob("*/*.json"))


def test_a_recorded_baseline_holds_one_summary_per_process(project: pytest.Pytester) -> None:
    """--rnnperf-record-processes=4: beside its own samples each cuDNN entry carries three more processes' summaries."""
    run(project, "--rnnperf-update-baseline", "--rnnperf-record-processes=4").assert_outcomes(passed=2)
    (path,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    cudnn = [b for b in load_json(path)["benchmarks"] if b["params"]["side"] == "cudnn"]
    assert len(cudnn) == 2
    for bench in cudnn:
        processes = bench["extra_info"]["rnnperf_processes"]
        assert [p["source"] for p in processes] == ["process 2", "process 3", "process 4"]
        assert all(p["metrics"]["busy"] > 0 and any(m.startswith("kernel/") for m in p["metrics"]) for p in processes)


def test_a_clean_run_is_kept_and_widens_the_history(project: pytest.Pytester) -> None:
    """--rnnperf-keep-run adds NNNN_run.json; the next run is judged against four processes, not three."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    kept = run(project, "--rnnperf-keep-run")
    kept.assert_outcomes(passed=2)
    kept.stdout.fnmatch_lines(["*device x3*", "*run kept for the history: *0002_run.json*"])
    assert _files(project) == ["0001_baseline.json", "0002_run.json"]
    again = run(project)
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*device x4*", "verdicts: 2 unchanged", "*history: 2 case(s) judged across 4 "
                                "processes, 2 resolve their floor; drift check on*"])


def test_without_ruptures_the_run_says_the_drift_check_is_off(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The change-point library missing: cases are still judged, and the summary says the drift check is off."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_NO_RUPTURES", "1")
    result = run(project)
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["*device x3*", "*; drift check off (pip install ruptures)*"])


def test_a_regressed_run_is_not_kept(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose every case regressed would teach the history its own slowdown: it is reported, not stored."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    result = run(project, "--rnnperf-keep-run", "--rnnperf-no-fail-regression")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*run not kept: each of its 2 timed case(s) regressed (reported, not failed); the "
                                 "history keeps clean cases only*"])
    assert _files(project) == ["0001_baseline.json"]


def test_a_run_kept_leaves_out_the_cases_that_regressed_without_failing(project: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One case regressed (reported, not failed): the run is kept without it; only the clean case's history widens."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    kept = run(project, "--rnnperf-keep-run", "--rnnperf-no-fail-regression")
    kept.assert_outcomes(passed=2)
    kept.stdout.fnmatch_lines(["verdicts: 1 regressed, 1 unchanged", "*run kept for the history: *0002_run.json, "
                               "without the 1 case(s) that regressed (reported, not failed)*"])
    notes = load_json(project.path / "rnnperf-report" / "rnnperf.json")["notes"]  # the line unwrapped
    assert any(n.endswith("learn the change: torch-gru-train-fp32-T4-B2-I3-H5-L1") for n in notes), notes
    (path,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    assert {b["group"] for b in load_json(path)["benchmarks"]} == {"torch-lstm-train-fp32-T4-B2-I3-H5-L1"}
    monkeypatch.delenv("FAKE_SLOW_CASE")
    again = run(project)
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["torch-lstm-train-fp32-T4-B2-I3-H5-L1 *device x4*",
                                "torch-gru-train-fp32-T4-B2-I3-H5-L1 *device x3*"])


def test_a_run_where_a_regression_failed_is_not_kept_at_all(project: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed test makes the night red: none of its cases joins the history, not even the clean one."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    result = run(project, "--rnnperf-keep-run")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*run not kept: 1 test(s) failed, 1 case(s) regressed; the history keeps clean "
                                 "runs only*"])
    assert _files(project) == ["0001_baseline.json"]


def test_a_run_without_a_baseline_is_not_kept(project: pytest.Pytester) -> None:
    """Nothing to add to: the run says how to record the first baseline and writes nothing."""
    result = run(project, "--rnnperf-keep-run")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*run not kept: no baseline of NVIDIA_H200 to add it to*--rnnperf-update-baseline*"])
    assert not (project.path / "baselines").exists()


def test_a_single_process_baseline_is_judged_against_its_newest_record_and_says_why(project: pytest.Pytester) -> None:
    """--rnnperf-record-processes=1: too few processes for a history; the summary says so and judges pairwise."""
    run(project, "--rnnperf-update-baseline", "--rnnperf-record-processes=1").assert_outcomes(passed=2)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*history: none of 2 case(s) has 3 stored processes yet*"])
    assert "device x" not in result.stdout.str()


def test_min_processes_decides_when_the_history_takes_over(project: pytest.Pytester) -> None:
    """Two recorded processes: pairwise under the default of 3, across processes with --rnnperf-min-processes=2."""
    run(project, "--rnnperf-update-baseline", "--rnnperf-record-processes=2").assert_outcomes(passed=2)
    assert "device x" not in run(project).stdout.str()
    result = run(project, "--rnnperf-min-processes=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*device x2*"])


@pytest.mark.parametrize("args, message", [
    (["--rnnperf-update-baseline", "--rnnperf-keep-run"], "--rnnperf-update-baseline and --rnnperf-keep-run: choose one"),
    (["--rnnperf-record-processes=0"], "0 must be between 1 and 10"),
    (["--rnnperf-record-processes=11"], "11 must be between 1 and 10"),
    (["--rnnperf-min-processes=1"], "--rnnperf-min-processes"),
])
def test_history_options_out_of_range_stop_the_run_in_one_line(project: pytest.Pytester, args: list[str],
                                                               message: str) -> None:
    """Each bad history option is a usage error before any test runs, and nothing is written."""
    result = run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()
    assert not (project.path / "baselines").exists()


def test_sensitivity_names_what_each_case_can_catch(project: pytest.Pytester) -> None:
    """python -m pytest_rnnperf sensitivity FOLDER: one row per case with its processes and the smallest catch."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    done = cli(project.path, "sensitivity", str(Path(GPU_DIR)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "torch-lstm-train-fp32-T4-B2-I3-H5-L1" in done.stdout and "torch-gru-train-fp32-T4-B2-I3-H5-L1" in done.stdout


def test_an_interrupted_run_is_not_kept(project: pytest.Pytester) -> None:
    """Ctrl-C after some cases: the history gets none of them (it would hold a partial night)."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    project.makepyfile(test_zz_interrupt="def test_ctrl_c():\n    raise KeyboardInterrupt\n")
    result = run(project, "--rnnperf-keep-run")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*run not kept: the run did not end OK (exit status 2)*"])
    assert _files(project) == ["0001_baseline.json"]


def test_a_full_history_folder_is_refused_before_the_run(project: pytest.Pytester) -> None:
    """A machine folder holding number 9999: --rnnperf-keep-run stops before any test, naming the folder."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    (first,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    (first.parent / "9999_run.json").write_bytes(first.read_bytes())
    result = run(project, "--rnnperf-keep-run")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--rnnperf-keep-run: cannot keep the run in {first.parent}: holds baseline 9999*"])


def _accept(project: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    """python -m pytest_rnnperf accept baselines/NVIDIA_H200 ARGS, run in the project."""
    return cli(project.path, "accept", GPU_DIR, *args)


def test_an_accepted_upgrade_restarts_the_history_at_the_next_kept_run(project: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberate slowdown fails; once accepted (reason stored), the night after is kept and judges the next."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    run(project).assert_outcomes(failed=2)
    done = _accept(project, "--reason", "cuDNN upgrade, slower on purpose")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "history restarts at the next run kept with --rnnperf-keep-run; 1 older stored run(s)" in done.stdout
    stored = load_json(project.path / GPU_DIR / "accepted.json")["accepted"]
    assert [a["reason"] for a in stored] == ["cuDNN upgrade, slower on purpose"]
    kept = run(project, "--rnnperf-keep-run")
    kept.assert_outcomes(passed=2)
    whole_lines(kept).fnmatch_lines(["baseline: none since the change accepted * (cuDNN upgrade, slower on purpose); "
                                     "the next run kept with --rnnperf-keep-run starts the history",
                                     "run kept for the history: *0002_run.json"])
    assert _files(project) == ["0001_baseline.json", "0002_run.json"]
    again = run(project)
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["verdicts: 2 unchanged"])
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.5")  # back to the old speed: now a change against the new history
    assert "improved" in run(project).stdout.str()


def test_accept_refuses_a_run_it_cannot_find_and_changes_nothing(project: pytest.Pytester) -> None:
    """--from a number no stored run has: one line, exit 2, no accepted.json written."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    done = _accept(project, "--reason", "upgrade", "--from", "0042")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: --from 0042: no stored run of that number or name here (1 stored)"]
    assert not (project.path / GPU_DIR / "accepted.json").exists()
