"""End-to-end: --rnnperf-compile-cache is accepted, named in the header, and a folder it cannot use stops the run
in one line before any test runs."""

from __future__ import annotations

import pytest

from conftest import run


def test_the_compile_cache_folder_is_made_and_named_in_the_header_which_says_when_it_is_empty(
        project: pytest.Pytester) -> None:
    """A first night names the empty cache (the budget prices its builds as stored from scratch); a kept program
    silences that."""
    folder = project.path / "cache"
    result = run(project, f"--rnnperf-compile-cache={folder}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rnnperf: compile cache {folder} (XLA in xla/, Inductor in inductor/): empty, so "
                                 "cases that compile build from scratch tonight (ahead of their turn, behind the "
                                 "other cases, in a run of one process) and later nights reuse them"])
    assert (folder / "xla").is_dir() and (folder / "inductor").is_dir()
    (folder / "xla" / "jit_step-1234").write_bytes(b"compiled")
    again = run(project, f"--rnnperf-compile-cache={folder}")
    again.stdout.fnmatch_lines([f"rnnperf: compile cache {folder} (XLA in xla/, Inductor in inductor/)"])
    assert "empty, so" not in again.stdout.str()


def test_the_ini_key_none_turns_the_compile_cache_off(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nrnnperf_rounds = 8\nrnnperf_energy_s = 0\nrnnperf_compile_cache = none\n")
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rnnperf: compile cache off (--rnnperf-compile-cache=none)"])


@pytest.mark.parametrize(("where", "reason"), [
    ("a_file/cache", "cannot create {path}/a_file/cache: Not a directory"),
    ("baselines/cache", "{path}/baselines/cache is inside the baselines folder {path}/baselines, which holds "
                        "stored runs only; give a folder outside it"),
], ids=["a file in the way", "inside the baselines folder"])
def test_a_compile_cache_folder_that_cannot_be_used_is_a_one_line_usage_error(
        project: pytest.Pytester, where: str, reason: str) -> None:
    (project.path / "a_file").write_text("not a folder")
    (project.path / "baselines").mkdir()
    result = run(project, f"--rnnperf-compile-cache={project.path / where}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = "ERROR: --rnnperf-compile-cache / rnnperf_compile_cache: " + reason.format(path=project.path)
    assert [line for line in result.stderr.lines if line.strip()] == [expected]
    assert not (project.path / "baselines" / "cache").exists()  # refused before anything was made there
