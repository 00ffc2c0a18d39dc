"""End-to-end: --rnnperf-confirm-nights=2 fails a case only on its second night of regression running."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import cli, load_json, run
from test_bad_input import _usage_error

GPU_DIR = "baselines/NVIDIA_H200"
GRU = "torch-gru-train-fp32-T4-B2-I3-H5-L1"
CONFIRM = "--rnnperf-confirm-nights=2"


def _files(project: pytest.Pytester) -> list[str]:
    """Names of the stored files of the fake H200, in order."""
    return sorted(p.name for p in (project.path / GPU_DIR).glob("*/*.json"))


def _suspects(project: pytest.Pytester, name: str) -> object:
    """What the stored file ``name`` names as suspect (None where it names none)."""
    (path,) = (project.path / GPU_DIR).glob(f"*/{name}")
    return load_json(path)["machine_info"]["rnnperf"].get("suspects")


def test_a_slowdown_is_suspect_on_its_first_night_fails_on_the_second_and_a_clean_night_ends_the_streak(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Night 1 slowed: passes, suspect, named in the kept run; night 2 slowed: fails; clean, then slowed: suspect again."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    first = run(project, "--rnnperf-keep-run", CONFIRM)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["rnnperf: all checks passed; 1 suspect (they fail if they regress again: *",
                                f"{GRU}   cudnn device time   +50.0%*suspect",  # the answer table, with the change
                                "verdicts: 1 suspect, 1 unchanged",
                                f"{GRU}: suspect: night 1 of 2 it must regress on running to fail*",
                                "*run kept for the history: *0002_run.json, the 1 case(s) that regressed (reported, not failed) as reports*",
                                "suspect: 1 case(s) named in 0002_run.json for the nights after it*"])
    assert _suspects(project, "0002_run.json") == {GRU: 1}

    second = run(project, "--rnnperf-keep-run", CONFIRM)
    second.assert_outcomes(passed=1, failed=1)
    second.stdout.fnmatch_lines(["*regressed on 2 stored nights running (--rnnperf-confirm-nights=2)*",
                                 "*run not kept: 1 test(s) failed*"])
    assert _files(project) == ["0001_baseline.json", "0002_run.json"]

    monkeypatch.delenv("FAKE_SLOW_CASE")
    clean = run(project, "--rnnperf-keep-run", CONFIRM)
    clean.assert_outcomes(passed=2)
    assert _suspects(project, "0003_run.json") is None

    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    again = run(project, CONFIRM)
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines([f"{GRU}: suspect: night 1 of 2*"])


def test_a_fresh_history_never_fails_on_night_one_and_a_night_of_suspects_only_is_still_remembered(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case slowed on the first night after the baseline: none fails; the kept file holds no record, only its
    suspects, which the next night reads (both fail) while the baseline stays what is judged against."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    first = run(project, "--rnnperf-keep-run", CONFIRM)
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["verdicts: 2 suspect", "suspect: 2 case(s) named in 0002_run.json*"])
    (path,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    assert load_json(path)["benchmarks"] == [] and len(_suspects(project, "0002_run.json")) == 2  # type: ignore[arg-type]
    second = run(project, CONFIRM)
    second.assert_outcomes(failed=2)
    second.stdout.fnmatch_lines(["*baseline: *0001_baseline.json*"])


def test_a_night_reported_without_failing_keeps_the_streak(project: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Night 2 under --rnnperf-no-fail-regression is kept: it names the case at 2 nights, and night 3 fails it."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    run(project, "--rnnperf-keep-run", CONFIRM).assert_outcomes(passed=2)
    run(project, "--rnnperf-keep-run", CONFIRM, "--rnnperf-no-fail-regression").assert_outcomes(passed=2)
    assert _suspects(project, "0003_run.json") == {GRU: 2}
    run(project, CONFIRM).assert_outcomes(passed=1, failed=1)


def test_one_confirm_night_fails_at_once_as_before(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (1): tonight decides, nothing is suspect."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    result = run(project, "--rnnperf-confirm-nights=1")
    result.assert_outcomes(passed=1, failed=1)
    assert "suspect" not in result.stdout.str()


@pytest.mark.parametrize("args, ini, message", [
    (["--rnnperf-confirm-nights=0"], "", "--rnnperf-confirm-nights / rnnperf_confirm_nights: 0 must be >= 1"),
    (["--rnnperf-confirm-nights=two"], "", "--rnnperf-confirm-nights / rnnperf_confirm_nights: 'two' is not a whole"),
    ([], "rnnperf_confirm_nights = 1.5", "--rnnperf-confirm-nights / rnnperf_confirm_nights: '1.5' is not a whole"),
])
def test_a_bad_confirm_nights_stops_the_run_in_one_line(project: pytest.Pytester, args: list[str], ini: str,
                                                        message: str) -> None:
    """0, a word or a fraction of a night is a usage error before any test runs; nothing is written."""
    if ini:
        project.makeini(f"[pytest]\n{ini}\n")
    _usage_error(run(project, *args), message)
    assert not (project.path / "baselines").exists()


def test_a_malformed_suspects_list_stops_the_run_in_one_line(project: pytest.Pytester) -> None:
    """A hand-edited suspects entry (nights 0) is refused when read, naming the file, which stays as it was."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    (path,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    data = load_json(path)
    data["machine_info"]["rnnperf"]["suspects"] = {GRU: 0}
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    result = run(project, CONFIRM)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "malformed machine_info.rnnperf.suspects" in result.stderr.str() and path.read_bytes() == before


def _compare(project: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    """python -m pytest_rnnperf compare ARGS in the project folder (in this process)."""
    return cli(project.path, "compare", *args)


def test_compare_against_the_folder_confirms_over_the_stored_nights_and_refuses_one_file(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """compare GPU-folder NEW --confirm-nights=2: suspect before the kept night that named the case, failed after it;
    against one OLD file the flag is refused in one line (that file holds no record of a suspect case)."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SLOW_CASE", "torch-gru-")
    run(project, "--rnnperf-no-fail-regression", "--benchmark-json=night1.json").assert_outcomes(passed=2)
    first = _compare(project, GPU_DIR, "night1.json", "--confirm-nights=2")
    assert first.returncode == 0 and f"SUSPECT    {GRU}: cudnn device time +50.0%" in first.stdout, first.stdout
    run(project, "--rnnperf-keep-run", CONFIRM).assert_outcomes(passed=2)
    second = _compare(project, GPU_DIR, "night1.json", "--confirm-nights=2")
    assert second.returncode == 1 and f"REGRESSED  {GRU}" in second.stdout, second.stdout
    (baseline,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    refused = _compare(project, str(baseline), "night1.json", "--confirm-nights=2")
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        "error: --confirm-nights=2 needs OLD to be a GPU model's folder (baselines/<gpu>): the nights before NEW are "
        "read from the suspects its kept runs name"], refused.stdout + refused.stderr
