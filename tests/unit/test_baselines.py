"""Baseline storage: numbering, atomic exclusive writes, permissions, finding the newest (no pytest plugin)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from factories import record

from pytest_rnnperf.store import baselines
from pytest_rnnperf.store.baselines import find_latest, writable_problem, write_new
from pytest_rnnperf.model.records import FORMAT_VERSION, BaselineError

REPO = Path(__file__).resolve().parents[2]


def _run(records: list[Any], gpu: str = "NVIDIA_H200") -> dict[str, Any]:
    """A stored-run JSON as the plugin writes it."""
    return {"machine_info": {"rnnperf": {"format": FORMAT_VERSION, "gpu_slug": gpu, "environment": {"driver": "580"}}},
            "benchmarks": [{"extra_info": {"rnnperf": r.to_dict()}} for r in records], "datetime": "2026-11-22"}


def test_write_new_numbers_and_never_overwrites(tmp_path: Path) -> None:
    """0001, 0002, ... and an existing file is never replaced."""
    a = write_new(tmp_path, "baseline", {"n": 1})
    b = write_new(tmp_path, "baseline", {"n": 2})
    assert (a.name, b.name) == ("0001_baseline.json", "0002_baseline.json")
    assert json.loads(a.read_text()) == {"n": 1}
    assert not list(tmp_path.glob(".rnnperf-*"))


def test_concurrent_writers_get_distinct_complete_files(tmp_path: Path) -> None:
    """Eight threads writing at once: eight numbered files, each valid JSON, no temporary left."""
    threads = [threading.Thread(target=write_new, args=(tmp_path, "w", {"i": i, "pad": "x" * 100_000})) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    files = sorted(tmp_path.glob("*.json"))
    assert [f.name[:4] for f in files] == [f"{i:04d}" for i in range(1, 9)]
    assert sorted(json.loads(f.read_text())["i"] for f in files) == list(range(8))
    assert not list(tmp_path.glob(".rnnperf-*"))


def test_interrupted_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure mid-write (here: serialization) leaves no target and no temporary file."""
    existing = write_new(tmp_path, "b", {"ok": True})
    before = existing.read_bytes()
    with pytest.raises(TypeError):
        write_new(tmp_path, "b", {"bad": object()})
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing.name]
    assert existing.read_bytes() == before


def test_bad_tag_is_refused(tmp_path: Path) -> None:
    """A tag with a path separator cannot escape the folder."""
    with pytest.raises(ValueError, match="letters, digits"):
        write_new(tmp_path, "../x", {})


def test_find_latest_prefers_this_machine_id_then_the_highest_number(tmp_path: Path) -> None:
    """Newest number wins within the preferred pytest-benchmark machine folder."""
    for folder, name in (("Linux-CPython-3.11-64bit", "0001_a.json"), ("Linux-CPython-3.11-64bit", "0003_a.json"),
                         ("Linux-CPython-3.12-64bit", "0002_a.json"), ("Linux-CPython-3.12-64bit", "notes.json")):
        (tmp_path / "GPU" / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / "GPU" / folder / name).write_text("{}")
    assert find_latest(tmp_path, "GPU", "Linux-CPython-3.12-64bit").name == "0002_a.json"
    assert find_latest(tmp_path, "GPU", "other").name == "0003_a.json"
    assert find_latest(tmp_path, "NONE") is None


def test_gpus_with_baselines(tmp_path: Path) -> None:
    """Only folders that hold numbered files count."""
    write_new(tmp_path / "NVIDIA_A100" / "m", "b", {})
    (tmp_path / "EMPTY").mkdir()
    assert baselines.gpus_with_baselines(tmp_path) == ["NVIDIA_A100"]


def test_spread_splits_cudnn_time_noise_by_the_verdicts_host_bound_rule(tmp_path: Path) -> None:
    """spread: per-group cuDNN-time spread, with the same busy split the verdicts use."""
    from pytest_rnnperf.cli.spread import spread_files

    paths = []
    for n, (big_ms, small_ms) in enumerate([(10.0, 1.5), (10.1, 1.95)]):
        runs = [record("big", big_ms, seed=n, busy_pct=90), record("small", small_ms, seed=n, busy_pct=20)]
        path = tmp_path / f"run{n}.json"
        path.write_text(json.dumps(_run(runs)))
        paths.append(path)
    code, lines = spread_files(paths, target=0.03, min_step_ms=1.0)
    assert code == 1  # speedups of the small case moved ~30%
    assert lines[-2].startswith("cuDNN-time spread, GPU >= 50% busy: 1 cases, median 1.")  # 10 -> 10.1 ms + noise
    assert lines[-2].endswith("1/1 within 3%")
    assert lines[-1].startswith("cuDNN-time spread, host-bound: 1 cases, median 30.")


def test_plugin_and_baselines_load_without_scipy() -> None:
    """pytest_configure checks settings and loads a baseline: that must not import scipy (~1 s)."""
    code = ("import sys; import pytest_rnnperf.plugin, pytest_rnnperf.store.baselines, pytest_rnnperf.model.records, "
            "pytest_rnnperf.judge.verdicts; assert 'scipy' not in sys.modules, 'scipy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_recorded_file_is_readable_by_everyone_the_umask_allows(tmp_path: Path) -> None:
    """Not mkstemp's private 0600: a baseline committed or shared by a team must be readable by the team."""
    old = os.umask(0o022)
    try:
        path = write_new(tmp_path, "b", {"n": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_killed_writers_temporary_file_is_ignored_by_git() -> None:
    """`git add baselines/` never commits a leftover .rnnperf-*.tmp."""
    stray = f"baselines/NVIDIA_H200/Linux-CPython-3.12-64bit/{baselines.TEMP_PREFIX}abc{baselines.TEMP_SUFFIX}"
    done = subprocess.run(["git", "check-ignore", "-q", stray], cwd=REPO)
    assert done.returncode == 0, f"{stray} is not ignored by .gitignore"


def test_writable_problem_names_what_blocks_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder to be created under a file, or under a read-only folder, is named; a fine one is None."""
    (tmp_path / "file").write_text("x")
    assert writable_problem(tmp_path / "new" / "deeper") is None
    assert "is a file, not a folder" in str(writable_problem(tmp_path / "file" / "sub"))
    locked = tmp_path / "locked"
    locked.mkdir()
    # The OS answers for permissions (root would pass any mode bits), so ask a stand-in that says no.
    monkeypatch.setattr(baselines.os, "access", lambda path, mode: Path(path) != locked)
    assert writable_problem(locked / "sub") == f"{locked / 'sub'}: {locked} is not writable"
    assert writable_problem(tmp_path / "other") is None


def test_an_unreadable_gpu_or_machine_folder_is_an_error_not_no_baseline(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """D7 (issue 23): a folder that cannot be listed read as "no baseline"; now one line naming it."""
    path = write_new(tmp_path / "GPU" / "Linux-CPython-3.11-64bit", "b", {})
    listing = os.scandir
    for locked in (tmp_path / "GPU", path.parent):
        def scandir(folder: Any, locked: Path = locked) -> Any:
            # The OS answers for permissions (root reads any folder), so ask a stand-in that says no.
            if Path(folder) == locked:
                raise PermissionError(13, "Permission denied", str(folder))
            return listing(folder)

        monkeypatch.setattr(baselines.os, "scandir", scandir)
        with pytest.raises(BaselineError) as caught:
            baselines.find_all(tmp_path, "GPU")
        assert str(caught.value) == f"{locked}: cannot read this folder: Permission denied"


def test_recording_into_a_read_only_machine_folder_is_named_before_the_run(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """D8 (issue 23): a read-only machine folder under a writable baselines folder was found only when writing."""
    machine = tmp_path / "GPU" / "Linux-CPython-3.11-64bit"
    machine.mkdir(parents=True)
    assert baselines.record_problem(machine) is None
    monkeypatch.setattr(baselines.os, "access", lambda path, mode: Path(path) != machine)
    assert baselines.record_problem(machine) == f"{machine}: {machine} is not writable"


def test_write_new_stops_at_the_last_four_digit_number(tmp_path: Path) -> None:
    """D12 (issue 23): after 9999 it wrote 10000_<tag>.json, which no reader sees, then crashed; now one line."""
    (tmp_path / "9999_b.json").write_text("{}")
    with pytest.raises(BaselineError) as caught:
        write_new(tmp_path, "b", {})
    assert str(caught.value).startswith(f"{tmp_path}: holds baseline 9999, the last four-digit number")
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["9999_b.json"]


def test_without_cases_drops_both_sides_of_each_named_case_and_keeps_the_rest() -> None:
    """A kept run leaves a regressed case out whole (its cuDNN and generic entries); other entries stay as they were."""
    from pytest_rnnperf.store.runs import timed_cases, without_cases

    def entry(case: str, side: str) -> dict[str, Any]:
        return {"group": case, "params": {"side": side}, "extra_info": {}}

    data = {"machine_info": {"rnnperf": {}}, "benchmarks": [entry("a", "cudnn"), entry("a", "generic"),
                                                            entry("b", "cudnn"), entry("b", "generic"),
                                                            entry("c", "generic")]}
    kept = without_cases(data, ["b"])
    assert [(b["group"], b["params"]["side"]) for b in kept["benchmarks"]] == [("a", "cudnn"), ("a", "generic"),
                                                                               ("c", "generic")]
    assert kept["machine_info"] is data["machine_info"] and len(data["benchmarks"]) == 5
    assert (timed_cases(data), timed_cases(kept), timed_cases(without_cases(data, ["a", "b"]))) == (2, 1, 0)
