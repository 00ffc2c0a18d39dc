"""End-to-end: a backend that needs an environment of its own (Keras's backend is chosen once per process).

The fake ``faraway`` backend carries ``env={"RNNPERF_FAKE_WORKER": "1"}``, which the test process lacks, so its
cases run in a subprocess started with it, while the session here judges, reports and stores them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from conftest import load_json, run, whole_lines

SUBPROCESS_CASES = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape

CASES = [Case("faraway", "lstm", Shape(4, 2, 3, 5), floor=2.0), Case("faraway", "gru", Shape(4, 2, 3, 5), floor=2.0)]

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pair(case, rnnperf):
    rnnperf.check(rnnperf.measure(case))
"""


@pytest.fixture
def faraway(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The fake project with the subprocess backend registered and its two cases as the test file."""
    monkeypatch.setenv("FAKE_WORKER_BACKEND", "1")
    project.makepyfile(test_cases=SUBPROCESS_CASES)
    return project


def test_cases_of_a_backend_with_its_own_environment_run_in_a_subprocess_and_land_in_this_report(
        faraway: pytest.Pytester) -> None:
    """Both cases pass with wall and device time measured there; the report, environment and log are here."""
    result = run(faraway, "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=2)
    report = load_json(faraway.path / "out" / "rnnperf.json")
    records = {r["case"]["id"]: r for r in report["results"]}
    assert sorted(records) == ["faraway-gru-train-fp32-T4-B2-I3-H5-L1", "faraway-lstm-train-fp32-T4-B2-I3-H5-L1"]
    for record in records.values():
        assert record["cudnn"]["median_s"] > 0 and record["cudnn_device"] is not None
    assert report["environment"]["faraway.env.RNNPERF_FAKE_WORKER"] == "1"
    assert (faraway.path / "out" / "subprocess-faraway.log").exists()


def test_a_slower_subprocess_case_is_judged_here_against_the_baseline(faraway: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline recorded through the subprocess; +20% device time in the subprocess fails both cases as regressed."""
    run(faraway, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.6")
    result = run(faraway)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*faraway-lstm-train-fp32-T4-B2-I3-H5-L1*regressed*"])


def test_a_subprocess_that_dies_fails_its_cases_in_one_line_quoting_its_log(faraway: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A native crash in the subprocess: each case fails with which subprocess, its exit code and its last log line."""
    monkeypatch.setenv("FAKE_WORKER_CRASH", "1")
    result = run(faraway, "--rnnperf-report-dir=out")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*faraway-lstm-*: the faraway subprocess exited (code 3)*"
                                 "fake subprocess: native crash in build*"])
    assert "Traceback" not in result.stdout.str()


def test_without_a_report_folder_the_subprocess_log_goes_to_a_temporary_one(faraway: pytest.Pytester) -> None:
    """--rnnperf-report-dir=none writes no report, and no folder named "none" appears for the subprocess's log."""
    run(faraway, "--rnnperf-report-dir=none").assert_outcomes(passed=2)
    assert not (faraway.path / "none").exists() and not (faraway.path / "rnnperf-report").exists()


IDLE_CASES = SUBPROCESS_CASES.replace("rnnperf.check(rnnperf.measure(case))", "pass")


def test_a_collected_backend_s_subprocess_starts_after_collection_before_any_case_asks(
        faraway: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test measures anything, yet the subprocess ran (its log is written): it was started when collection ended."""
    monkeypatch.setenv("FAKE_GPU_NAME", "none")  # without a GPU nothing else asks a backend before the cases do
    faraway.makepyfile(test_cases=IDLE_CASES)
    run(faraway, "--rnnperf-report-dir=out").assert_outcomes(passed=2)
    assert (faraway.path / "out" / "subprocess-faraway.log").exists()
    run(faraway, "--rnnperf-report-dir=listed", "--collect-only").assert_outcomes()
    assert not (faraway.path / "listed").exists()  # listing the tests starts nothing


LATER_MODULE = """
import pathlib
import time

# Collected after test_cases.py: wait (at most 20 s) for the subprocess its cases need to have been launched.
deadline = time.monotonic() + 20
while not pathlib.Path("out/subprocess-faraway.log").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
LAUNCHED_WHILE_COLLECTING = pathlib.Path("out/subprocess-faraway.log").exists()

def test_the_subprocess_was_launched_before_this_module_finished_importing():
    assert LAUNCHED_WHILE_COLLECTING
"""


def test_a_module_s_subprocess_starts_as_soon_as_the_module_is_collected(faraway: pytest.Pytester) -> None:
    """The subprocess is launched while later modules are still being imported, so the two imports overlap."""
    faraway.makepyfile(test_zz_later=LATER_MODULE)
    run(faraway, "--rnnperf-report-dir=out").assert_outcomes(passed=3)


def test_a_subprocess_started_for_deselected_cases_does_not_stop_the_run(faraway: pytest.Pytester) -> None:
    """-k leaves no faraway case: the subprocess started at collection is stopped and the rest runs."""
    faraway.makepyfile(test_zz_later=LATER_MODULE)
    run(faraway, "--rnnperf-report-dir=out", "-k", "later").assert_outcomes(passed=1)


def _builds(seen: Path) -> list[int]:
    """How many times each case was built, in any process (FAKE_SEEN's lines)."""
    return sorted(Counter(line.split()[0] for line in seen.read_text().splitlines()).values())


def test_a_first_night_builds_its_compiling_cases_once_ahead_in_a_process_of_their_own(
        faraway: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compile cache starts empty: each case is built once ahead (its own log) and once for its test; the
    summary counts them, and the file naming the process for the timing processes goes with it."""
    monkeypatch.setenv("FAKE_WORKER_BACKEND", "compiles")
    monkeypatch.setenv("FAKE_SEEN", str(faraway.path / "seen.txt"))
    result = run(faraway, "--rnnperf-report-dir=out")
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["compiled ahead: 2 of 2 case(s) (faraway 2) in * s behind the other cases, "
                                       "paused while any case was timed; cases waited * s for theirs"])
    assert _builds(faraway.path / "seen.txt") == [2, 2]
    assert (faraway.path / "out" / "ahead-faraway.log").exists()
    assert not (faraway.path / "out" / "ahead.pids").exists()


@pytest.mark.parametrize("cache", ["none", "warm", "ahead off"])
def test_a_night_whose_compile_cache_is_off_or_warm_or_that_turns_it_off_compiles_nothing_ahead(
        faraway: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache: str) -> None:
    monkeypatch.setenv("FAKE_WORKER_BACKEND", "compiles")
    monkeypatch.setenv("FAKE_SEEN", str(faraway.path / "seen.txt"))
    if cache == "warm":
        (faraway.path / "cache" / "xla").mkdir(parents=True)
        (faraway.path / "cache" / "xla" / "jit_step-entry").write_bytes(b"compiled")
    folder = "none" if cache == "none" else str(faraway.path / "cache")
    result = run(faraway, f"--rnnperf-compile-cache={folder}",
                 *(["--rnnperf-compile-ahead=off"] if cache == "ahead off" else []))
    if cache == "ahead off":
        result.stdout.fnmatch_lines(["*empty, so cases that compile build from scratch tonight (each at its turn: "
                                     "--rnnperf-compile-ahead=off)*"])
    result.assert_outcomes(passed=2)
    assert "compiled ahead" not in result.stdout.str()
    assert _builds(faraway.path / "seen.txt") == [1, 1]

