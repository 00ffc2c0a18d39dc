"""End-to-end: recording, comparing and guarding baselines as a nightly CI job uses them."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli, load_json, run, whole_lines

from pytest_rnnperf.model.records import FORMAT_VERSION

GPU_DIR = "baselines/NVIDIA_H200"


def _files(project: pytest.Pytester, gpu_dir: str = GPU_DIR) -> list[Path]:
    """Stored baseline files of a GPU model, in name order."""
    return sorted((project.path / gpu_dir).glob("*/*.json"))


def _record(project: pytest.Pytester, *args: str, gpu_dir: str = GPU_DIR) -> Path:
    """Record a baseline and return the new file."""
    before = set(_files(project, gpu_dir))
    result = run(project, "--rnnperf-update-baseline", *args)
    result.assert_outcomes(passed=2)
    new = sorted(set(_files(project, gpu_dir)) - before)
    assert len(new) == 1, new
    result.stdout.fnmatch_lines([f"*baseline recorded: *{new[0].name}*"])
    return new[0]


def test_first_run_has_no_baseline_and_compare_fail_does_not_crash(project: pytest.Pytester) -> None:
    """No baseline yet: the run says how to record one; --benchmark-compare-fail is a no-op, not an error."""
    result = run(project, "--benchmark-compare", "--benchmark-compare-fail=median:5%")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*baseline: none for NVIDIA_H200 yet; record one with: the same pytest command plus --rnnperf-update-baseline*",
        "*--benchmark-compare-fail: no stored run to compare with yet; nothing to check*"])


def test_update_adds_files_and_never_overwrites(project: pytest.Pytester) -> None:
    """Each update adds the next number in this GPU's folder; earlier files stay byte for byte."""
    first = _record(project)
    assert first.name == "0001_baseline.json" and first.parent.parent == project.path / GPU_DIR
    content = first.read_bytes()
    second = _record(project)
    assert second.name == "0002_baseline.json"
    assert first.read_bytes() == content
    data = load_json(second)
    assert data["machine_info"]["rnnperf"]["format"] == FORMAT_VERSION
    assert {b["params"]["side"] for b in data["benchmarks"]} == {"cudnn", "generic"}


def test_unchanged_run_is_not_flagged(project: pytest.Pytester) -> None:
    """Same speed as the baseline: no case regresses, the verdict table is printed."""
    _record(project)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*against the history*", "*device x3*", "*verdicts: *"])
    assert "regressed" not in result.stdout.str().split("verdicts:")[1].splitlines()[0]


def test_cases_the_baseline_never_saw_are_named_not_passed_silently(project: pytest.Pytester) -> None:
    """A baseline recorded with -k lstm: the GRU case is listed as not judged, the LSTM case is judged."""
    run(project, "--rnnperf-update-baseline", "-k", "lstm").assert_outcomes(passed=1, deselected=1)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*verdicts: 1 unchanged*",
                                 "*not judged: 1 cuDNN case(s) have no record in 0001_baseline.json*: torch-gru-*"])
    assert "torch-lstm" not in result.stdout.str().split("not judged:")[1].splitlines()[0]


def test_each_case_is_judged_against_its_newest_record_across_baseline_files(project: pytest.Pytester) -> None:
    """0001 recorded with -k lstm, 0002 with -k gru (two shards): a full run judges both cases, naming both files."""
    run(project, "--rnnperf-update-baseline", "-k", "lstm").assert_outcomes(passed=1, deselected=1)
    run(project, "--rnnperf-update-baseline", "-k", "gru").assert_outcomes(passed=1, deselected=1)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*verdicts: 2 unchanged*", "*baseline: *0002_baseline.json*+ the newest record of "
                                 "cases it lacks: 1 from 0001_baseline.json*"])
    assert "not judged" not in result.stdout.str()


def test_a_case_within_its_measured_noise_is_not_failed(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Baselines of one process each: +8% fails at 3%; with a noise file from null runs that saw 8%, it passes."""
    one = "--rnnperf-record-processes=1"  # a single process per record: judged pairwise, the noise file applies
    first = _record(project, one)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.54")
    run(project).assert_outcomes(failed=2)
    second = _record(project, one, "--rnnperf-no-fail-regression")  # a null run that landed 8% higher
    noise_file = project.path / GPU_DIR / "noise.json"
    done = cli(project.path, "noise", str(first), str(second), "--out", str(noise_file))
    assert done.returncode == 0, done.stderr
    monkeypatch.delenv("FAKE_CUDNN_DEV_MS")
    _record(project, one)  # the newest baseline is at 0.5 ms again
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.54")
    result = run(project)
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["*verdicts: 2 unchanged*", "*device-time noise of 2 case(s) from 2 stored runs "
                                 "(noise.json): 2 judged above 3%*"])


def test_compare_does_not_warn_about_our_own_section(project: pytest.Pytester) -> None:
    """Same machine, same software: pytest-benchmark's machine_info check stays quiet on --benchmark-compare."""
    _record(project)
    result = run(project, "--benchmark-compare")
    result.assert_outcomes(passed=2)
    assert "machine_info is different" not in result.stdout.str() + result.stderr.str()


@pytest.mark.subprocess  # pytest-benchmark's machine_info warning goes to Python's warning registry, once a process
def test_baselines_outside_the_working_directory(project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--rnnperf-baselines=/elsewhere: record, then compare after the machine changed, without an INTERNALERROR."""
    store = tmp_path_factory.mktemp("shared-baselines")
    run(project, "--rnnperf-update-baseline", f"--rnnperf-baselines={store}").assert_outcomes(passed=2)
    (stored,) = store.glob("NVIDIA_H200/*/0001_baseline.json")
    # Recorded on another runner of the same GPU model: pytest-benchmark's own machine_info check differs,
    # and its warning names the storage relative to the cwd, which it cannot do for this folder.
    data = load_json(stored)
    data["machine_info"]["node"] = "another-runner"
    stored.write_text(json.dumps(data))
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "9.20.0")
    result = run(project, "--benchmark-compare", f"--rnnperf-baselines={store}")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    (warning,) = [line[line.index("machine_info"):] for line in output.splitlines() if "machine_info is diff" in line]
    # One short line naming the field, not pytest-benchmark's two whole dicts (a live field such as the CPU's
    # clock may be named beside it: at most three fields, each value cut to 40 characters).
    assert warning.startswith(f"machine_info is different from the run stored in {stored.parent.parent}: ")
    assert "node: another-runner -> " in warning
    assert len(warning) < 500 and '"cpu": {' not in warning and "Current:" not in warning
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*environment changes since the baseline: torch.cudnn_version: 9.19.0 -> 9.20.0*"])


def test_slower_cudnn_fails_and_names_the_kernel_and_what_changed(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's kernel 50% slower after a cuDNN update: device time decides, the kernel and the version are named."""
    _record(project)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.25")  # the wall step grows by what the kernel grew; still above the floor
    monkeypatch.setenv("FAKE_CUDNN_VERSION", "9.20.0")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*cuDNN device time regressed against its history of 3 processes on this GPU model*",
        "*cudnn device time*regressed*",
        "*kernels of the cuDNN side: RNN_blockPersist_fp_LSTM 0.500 -> 0.750 ms/step, +50.?% *of the step*regressed*",
        "*environment changes since the baseline: torch.cudnn_version: 9.19.0 -> 9.20.0*",
        "*record a new baseline: the same pytest command plus --rnnperf-update-baseline*"])


def test_a_slower_launch_path_is_named_as_host_overhead_not_cudnn(project: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall 1.8x with the same kernels (a slower driver launch path, say): host overhead regressed, device unchanged.

    Reported by name and not failed, unless --rnnperf-fail-host asks for it."""
    _record(project)
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.8")  # host overhead 0.5 -> 1.3 ms; the speedup stays over its floor
    reported = run(project)
    reported.assert_outcomes(passed=2)
    reported.stdout.fnmatch_lines(["*verdicts: 2 host overhead regressed (not failed)*",
                                   "host overhead of torch-lstm-*: launch/dispatch overhead +1[56]*: driver or framework "
                                   "(reported, not failed*"])
    result = run(project, "--rnnperf-fail-host")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*launch/dispatch overhead regressed against its history of 3 processes on this GPU model*",
        "*cudnn device time*unchanged", "*cudnn host overhead*regressed",
        "*launch/dispatch overhead +1[56]*: driver or framework*"])
    assert "cuDNN device time regressed" not in result.stdout.str()


def test_a_cudnn_algorithm_switch_names_the_kernels_that_came_and_went(project: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The persistent kernel replaced by a per-step cell kernel: the failure says which vanished and which appeared."""
    _record(project)
    monkeypatch.setenv("FAKE_CUDNN_KERNEL", "elemWiseRNNcell")
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.6")
    result = run(project)
    result.assert_outcomes(failed=2)
    whole_lines(result).fnmatch_lines(["*kernels of the cuDNN side: appeared: elemWiseRNNcell 0.600 ms/step, *: regressed; "
                                       "vanished: RNN_blockPersist_fp_LSTM 0.500 ms/step, -100.0%*"])


def test_a_baseline_without_device_time_is_judged_on_wall_time_and_says_so(project: pytest.Pytester,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An older baseline (no device time): compared on what it has, with a line saying so."""
    _record(project, "--rnnperf-device-rounds=0")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.5")
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cuDNN wall time regressed against its history of 3 processes on this GPU model*",
                                 "*judged on wall time: the baseline or this run has no device time*"])


def test_without_cupti_device_time_is_off_and_the_run_says_why(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """No cupti-python: the header and the summary say device time is off and why; everything else runs."""
    monkeypatch.setenv("FAKE_NO_CUPTI", "1")
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rnnperf: device time off: cupti-python is not installed*",
                                 "device time off: cupti-python is not installed * (2 case(s))"])


def test_host_bound_slowdown_of_both_sides_is_reported_not_failed(project: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall rule, GPU 20% busy: both sides +60% (a slower host) is "regressed (not failed)"; cuDNN alone +60% fails."""
    monkeypatch.setenv("FAKE_BUSY", "20")
    _record(project, "--rnnperf-device-rounds=0")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.6")
    monkeypatch.setenv("FAKE_GENERIC_MS", "6.4")
    result = run(project, "--rnnperf-device-rounds=0")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*verdicts: 2 regressed (not failed)*"])
    verdicts = load_json(project.path / "rnnperf-report" / "rnnperf.json")["table"]["verdicts"]  # the cell unwrapped
    verdict = ("regressed (not failed) [[]window: the host slowed both sides alike: speedup *, unchanged[]] "
               "[[]host-bound: GPU busy 20%[]]")
    assert all(fnmatch.fnmatch(v["verdict"], verdict) for v in verdicts), verdicts
    monkeypatch.setenv("FAKE_GENERIC_MS", "4")
    result = run(project, "--rnnperf-device-rounds=0")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cuDNN wall time regressed against its history of 3 processes on this GPU model "
                                 "[[]host-bound: GPU busy 20%*"])


def test_ambiguous_case_is_timed_once_more_on_the_same_pair(project: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A shift straddling the steady kernels' line gets a second window on the pair already built; both count."""
    _record(project)
    # +2.3%: the interval straddles the line of the steady kernels (4 noises of 0.5% at three processes: 2.31%).
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.5115")
    result = run(project, "--benchmark-json=again.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*(re-measured)*", "*(re-measured)*"])
    for bench in load_json(project.path / "again.json")["benchmarks"]:
        stored = bench["extra_info"]["rnnperf"]
        if bench["params"]["side"] != "cudnn":
            continue
        assert len(stored["cudnn_device"]["busy"]["samples_s"]) == 2 * 8  # --rnnperf-device-rounds 8, twice
        assert len(stored["cudnn"]["samples_s"]) == len(stored["generic"]["samples_s"]) > 12
        assert stored["cost_s"]["remeasure"] > 0 and "build" in stored["cost_s"]


def test_still_ambiguous_after_remeasure_does_not_fail(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case that stays ambiguous is reported as such and does not fail the run (judged against one record: across
    processes the steady kernels, called below 3%, would regress where the device time straddles 3%)."""
    _record(project, "--rnnperf-record-processes=1")
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.5148")
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*ambiguous (re-measured)*", "*verdicts: 2 ambiguous*"])


def test_regression_opt_out_reports_without_failing(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """--rnnperf-no-fail-regression: the run passes and the summary still says regressed."""
    _record(project)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    result = run(project, "--rnnperf-no-fail-regression")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*verdicts: 2 regressed*"])


def test_failing_run_is_not_recorded(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline only comes from a clean run."""
    monkeypatch.setenv("FAKE_WRONG_PATH", "1")
    result = run(project, "--rnnperf-update-baseline")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*baseline not recorded: 2 test(s) failed*"])
    assert _files(project) == []


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: len(text) // 2], "not valid JSON (truncated or hand-edited?)"),
    (lambda text: text.replace(f'"format": {FORMAT_VERSION}', '"format": 99'), "unknown baseline format 99"),
])
def test_unusable_baseline_is_a_one_line_error_and_left_alone(project: pytest.Pytester, damage, message) -> None:
    """Truncated or unknown-version file: usage error naming the file; the file is not touched."""
    path = _record(project)
    path.write_text(damage(path.read_text()))
    before = path.read_bytes()
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{path.name}: {message}*"])
    assert path.read_bytes() == before


def test_other_gpu_model_is_never_compared(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An A100 baseline exists; on an H200 nothing is compared and the run says why."""
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA A100-SXM4-80GB")
    _record(project, "--rnnperf-baseline-tag=a100", gpu_dir="baselines/NVIDIA_A100-SXM4-80GB")
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA H200")
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.5")  # a regression if it were compared; above the floor
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*baseline: none for NVIDIA_H200 yet; baselines exist for NVIDIA_A100-SXM4-80GB but "
                                 "are never compared with another model*"])


def test_pytest_benchmark_compare_reads_our_baseline(project: pytest.Pytester) -> None:
    """--benchmark-compare with no value finds this GPU's newest baseline and shows NOW vs it."""
    path = _record(project)
    result = run(project, "--benchmark-compare", "--rnnperf-benchmark-tables")
    result.assert_outcomes(passed=2)
    result.stderr.fnmatch_lines([f"*Comparing against benchmarks from: *{path.name}*"])
    for source in (path.stem[:4], "NOW"):  # pytest-benchmark's table: one row per source, in its own order
        result.stdout.fnmatch_lines([f"*test_pair[[]cudnn-torch-lstm-*[]] ({source}*"])


def test_offline_compare_gives_the_same_verdicts(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """python -m pytest_rnnperf compare: exit 1 on a regression, 0 on the null run, 2 on a broken file (the real entry
    point, in a subprocess: every other test of a command runs it in-process, conftest.py cli())."""
    base = _record(project)
    run(project, "--benchmark-json=same.json").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")  # the kernel +50%
    run(project, "--benchmark-json=slow.json", "--rnnperf-no-fail-regression").assert_outcomes(passed=2)

    def compare(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_rnnperf", "compare", *args], capture_output=True,
                              text=True, cwd=project.path)

    slow = compare(str(base), "slow.json")
    assert slow.returncode == 1, slow.stdout + slow.stderr
    assert slow.stdout.count("REGRESSED") == 2
    assert slow.stdout.count("kernels: RNN_blockPersist_fp_LSTM 0.500 -> 0.750 ms/step (+50%)") == 2
    same = compare(str(base), "same.json")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "REGRESSED" not in same.stdout
    (project.path / "broken.json").write_text("{\"benchmarks\": [")
    broken = compare(str(base), "broken.json")
    assert broken.returncode == 2 and "broken.json: not valid JSON" in broken.stderr


def test_offline_spread_reports_run_to_run_spread(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """python -m pytest_rnnperf spread: per-case spread; a 50% cuDNN shift is far outside 3% (exit 1)."""
    base = _record(project)
    monkeypatch.setenv("FAKE_CUDNN_MS", "1.5")
    run(project, "--benchmark-json=slow.json", "--rnnperf-no-fail-regression").assert_outcomes(passed=2)
    # The fake cuDNN step is ~1 ms (with jitter either side), so the bar is set below it.
    out = cli(project.path, "spread", str(base), "slow.json", "--min-step-ms", "0.5")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "torch-lstm-train-fp32-T4-B2-I3-H5-L1" in out.stdout and "0/2 within 3%" in out.stdout
    none_held = cli(project.path, "spread", str(base), "slow.json", "--min-step-ms", "100")
    assert none_held.returncode == 0 and "no case has cuDNN steps >= 100.0 ms" in none_held.stdout, none_held.stderr
    one = cli(project.path, "spread", str(base))
    assert one.returncode == 2 and "at least two runs" in one.stderr
