"""End-to-end: a GPU model's history of processes, as a nightly job records, keeps and judges it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import cli, load_json, run, whole_lines
from pytest_rnnperf.store.runs import load_run

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


def test_a_recording_on_a_host_of_two_gpus_takes_turns_on_both_only_when_asked_and_says_which(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs, one process: --rnnperf-record-gpus=all names both cards beside the recorded file; by default the
    extra processes stay on this process's GPU and the line names none."""
    monkeypatch.setenv("FAKE_GPU_COUNT", "2")
    alone = run(project, "--rnnperf-update-baseline")
    alone.assert_outcomes(passed=2)
    alone.stdout.fnmatch_lines(["baseline recorded: *0001_baseline.json"])
    spread = run(project, "--rnnperf-update-baseline", "--rnnperf-record-gpus=all")
    spread.assert_outcomes(passed=2)
    whole_lines(spread).fnmatch_lines(["baseline recorded: *0002_baseline.json (its processes by turns on 2 GPUs: "
                                 "GPU-00000000-aaaa-bbbb-cccc-1234567890ab, GPU-00000001-aaaa-bbbb-cccc-1234567890ab)"])
    # The file knows both cards, and that each case's own process ran on this one.
    stored = load_run(sorted(project.path.glob("baselines/*/*/0002_baseline.json"))[0])
    assert stored.all_cards == ("GPU-00000000-aaaa-bbbb-cccc-1234567890ab", "GPU-00000001-aaaa-bbbb-cccc-1234567890ab")
    assert {stored.card_of(case) for case in stored.records} == {"GPU-00000000-aaaa-bbbb-cccc-1234567890ab"}


def test_a_clean_run_is_kept_and_widens_the_history(project: pytest.Pytester) -> None:
    """--rnnperf-keep-run adds NNNN_run.json; the next run is judged against four processes, not three."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    kept = run(project, "--rnnperf-keep-run")
    kept.assert_outcomes(passed=2)
    kept.stdout.fnmatch_lines(["*device x3*", "*run kept for the history: *0002_run.json*"])
    assert _files(project) == ["0001_baseline.json", "0002_run.json"]
    again = run(project)
    again.assert_outcomes(passed=2)
    # Four quiet processes draw the steady line at 4 noises (2.2%): what it catches 19 times in 20 is 3.1%, not 3%.
    again.stdout.fnmatch_lines(["*device x4*", "verdicts: 2 unchanged", "*history: 2 case(s) judged across 4 "
                                "processes, 0 resolve their floor, 2 catch only more*", "*3.1%*drift check on*"])


def test_without_ruptures_the_run_says_the_drift_check_is_off(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The change-point library missing: cases are still judged, and the summary says the drift check is off."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_NO_RUPTURES", "1")
    result = run(project)
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["*device x3*", "*; drift check off (pip install ruptures)*"])


@pytest.mark.parametrize("knob, value", [("FAKE_CUDNN_DEV_MS", "0.75"), ("FAKE_FIRST_CALL_MS", "900,20")],
                         ids=["device time", "first call"])
def test_a_run_whose_every_case_regressed_is_kept_as_reports_only(project: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch, knob: str,
                                                                   value: str) -> None:
    """Every case regressed (device time, or first call; reported, not failed): the file holds their reports, no
    record, so no history widens."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv(knob, value)
    result = run(project, "--rnnperf-keep-run", "--rnnperf-no-fail-regression")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*run kept for the history: *0002_run.json, the 2 case(s) that regressed (reported, "
                                 "not failed) as reports*"])
    (path,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    data = load_json(path)
    assert data["benchmarks"] == []
    assert sorted(r["case"] for r in data["machine_info"]["rnnperf"]["reported"]) == [
        "torch-gru-train-fp32-T4-B2-I3-H5-L1", "torch-lstm-train-fp32-T4-B2-I3-H5-L1"]
    monkeypatch.delenv(knob)
    again = run(project)
    again.assert_outcomes(passed=2)
    whole_lines(again).fnmatch_lines(["verdicts: 2 unchanged", "*history: 2 case(s) judged across 3 processes*"])


def test_a_run_kept_keeps_the_cases_that_regressed_without_failing_as_reports(project: pytest.Pytester,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One case regressed (reported, not failed): kept as a report, its record left out; only the clean case widens."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    kept = run(project, "--rnnperf-keep-run", "--rnnperf-no-fail-regression")
    kept.assert_outcomes(passed=2)
    kept.stdout.fnmatch_lines(["verdicts: 1 regressed, 1 unchanged", "*run kept for the history: *0002_run.json, "
                               "the 1 case(s) that regressed (reported, not failed) as reports*"])
    notes = load_json(project.path / "rnnperf-report" / "rnnperf.json")["notes"]  # the line unwrapped
    assert any(n.endswith("a kernel mix that 3 stored processes share: torch-gru-train-fp32-T4-B2-I3-H5-L1")
               for n in notes), notes
    (path,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    assert {b["group"] for b in load_json(path)["benchmarks"]} == {"torch-lstm-train-fp32-T4-B2-I3-H5-L1"}
    monkeypatch.delenv("FAKE_SLOW_CASE")
    again = run(project)
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["torch-lstm-train-fp32-T4-B2-I3-H5-L1 *device x4*",
                                "torch-gru-train-fp32-T4-B2-I3-H5-L1 *device x3*"])


def test_a_kernel_mix_seen_in_three_processes_is_history_and_a_new_kernel_still_fails(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel mix alternates between two modes over kept nights: mode B reports (not failed) until three stored
    processes share it, then a night in it reports nothing; a kernel in neither mode still fails."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)  # mode A, three processes
    mode_b = "gemm_b:0.05"  # another GEMM, a tenth of the step, in every step of the cuDNN side
    for night, extra in enumerate([mode_b, "", mode_b, mode_b], start=2):
        monkeypatch.setenv("FAKE_CUDNN_GEMMS", extra)
        kept = run(project, "--rnnperf-keep-run", "--rnnperf-no-fail-regression")
        kept.assert_outcomes(passed=2)
        summary = "verdicts: 2 regressed (2 failed)" if extra else "verdicts: 2 unchanged"
        kept.stdout.fnmatch_lines([summary.split(" (")[0] + "*", f"*run kept for the history: *{night:04d}_run.json*"])
        if extra:
            kept.stdout.fnmatch_lines(["*appeared: gemm_b 0.050 ms/step*regressed*"])
    monkeypatch.setenv("FAKE_CUDNN_GEMMS", mode_b)
    quiet = run(project, "--rnnperf-keep-run")
    quiet.assert_outcomes(passed=2)
    quiet.stdout.fnmatch_lines(["*device x3*", "verdicts: 2 unchanged", "*run kept for the history: *0006_run.json"])
    assert "gemm_b" not in quiet.stdout.str()
    monkeypatch.setenv("FAKE_CUDNN_GEMMS", mode_b + ",spin:0.05")
    new_kernel = run(project, "--rnnperf-keep-run")
    new_kernel.assert_outcomes(failed=2)
    new_kernel.stdout.fnmatch_lines(["*appeared: spin 0.050 ms/step*regressed*", "*run not kept: 2 test(s) failed*"])
    assert "appeared: gemm_b" not in new_kernel.stdout.str()
    assert _files(project)[-1] == "0006_run.json"  # the failed night taught the history nothing


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
