"""Stored runs read one way everywhere: gzipped or plain, numbered once, counted once, plausible, never written over.

The plugin, the kept-run history and every subcommand list and read stored runs through store/; each test runs the
input through the plugin and the commands that read it, and proves nothing under baselines/ changed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import REPO, load_json, run, whole_lines
from test_bad_input import GPU_DIR, _cli, _one_error, _record, _usage_error

MACHINE = "Linux-CPython-3.12-64bit"
H100 = "NVIDIA_H100_80GB_HBM3"
KEPT_H100 = range(19, 27)  # the repo's kept H100 runs 0019-0026: eight runs, enough for change points (6)


def _shas(project: pytest.Pytester) -> dict[str, str]:
    """The sha256 of every file under the project's baselines/, by path: to prove nothing stored was touched."""
    root = project.path / "baselines"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _h100(project: pytest.Pytester, numbers: range = KEPT_H100) -> Path:
    """Copies of the repo's stored H100 runs ``numbers`` in the project's baselines/; the machine folder."""
    folder = project.path / "baselines" / H100 / MACHINE
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted((REPO / "baselines" / H100 / MACHINE).glob("*.json")):
        if int(source.name[:4]) in numbers:
            shutil.copyfile(source, folder / source.name)
    return folder


def _gzip(path: Path) -> Path:
    """``path`` gzipped in place as ``path``.gz (the plain file removed), as the project keeps its evidence."""
    target = path.with_name(path.name + ".gz")
    target.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return target


def _edit(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to the extra_info of the first entry of ``path`` with device time and extra processes."""
    data = load_json(path)
    extras = [b.get("extra_info") or {} for b in data["benchmarks"]]
    edit(next(e for e in extras if e.get("rnnperf", {}).get("cudnn_device") and e.get("rnnperf_processes")))
    path.write_text(json.dumps(data))


# ------------------------------------------------------------------------------------------ E2: gzipped runs


def test_a_gzipped_baseline_is_judged_against_not_read_as_no_baseline(project: pytest.Pytester) -> None:
    """E2: a baseline stored as 0001_baseline.json.gz read as "baseline: none ... yet", and nothing was judged."""
    stored = _gzip(_record(project))
    before = _shas(project)
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["verdicts: 2 unchanged", f"baseline: *{stored.relative_to(project.path)} *"])
    assert _shas(project) == before


def test_gzipped_kept_runs_widen_the_history_and_the_next_number_skips_them(project: pytest.Pytester) -> None:
    """E2: gzipped kept runs dropped out of the history (3 processes, not 4), and the next kept run took 0002 again."""
    _record(project)
    run(project, "--rnnperf-keep-run").assert_outcomes(passed=2)
    (kept,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    _gzip(kept)
    before = _shas(project)
    result = run(project, "--rnnperf-keep-run")
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["*device x4*", "*history: 2 case(s) judged across 4 processes*",
                                       "*run kept for the history: *0003_run.json*"])
    assert sorted(p.name for p in kept.parent.iterdir()) == ["0001_baseline.json", "0002_run.json.gz", "0003_run.json"]
    assert {k: v for k, v in _shas(project).items() if not k.endswith("0003_run.json")} == before


def test_benchmark_compare_says_it_cannot_read_a_gzipped_baseline(project: pytest.Pytester) -> None:
    """E2: against a gzipped baseline, --benchmark-compare said "no baseline for NVIDIA_H200 yet"."""
    stored = _gzip(_record(project))
    before = _shas(project)
    result = run(project, "--benchmark-compare", "--benchmark-compare-fail=mean:50%")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*--benchmark-compare: off: pytest-benchmark cannot read the gzipped {stored.name}; "
                                 f"the verdicts judge against it*",
                                 "*--benchmark-compare-fail: off with --benchmark-compare (a gzipped baseline)*"])
    assert _shas(project) == before


def test_every_command_reads_gzipped_stored_runs_in_a_folder(project: pytest.Pytester) -> None:
    """E2: history and sensitivity over a folder skipped *.json.gz, though history and compare read one named."""
    folder = _h100(project)
    plain = _cli(project, "sensitivity", f"baselines/{H100}").stdout
    for path in sorted(folder.glob("002[3-6]_run.json")):
        _gzip(path)
    before = _shas(project)
    history = _cli(project, "history", "baselines")
    assert history.returncode in (0, 1) and "over 8 stored run(s)" in history.stdout, history.stdout + history.stderr
    sensitivity = _cli(project, "sensitivity", f"baselines/{H100}")
    assert sensitivity.returncode == 0 and sensitivity.stdout == plain, sensitivity.stdout + sensitivity.stderr
    assert _shas(project) == before


# ---------------------------------------------------------------------------- E3: outputs among the stored runs


@pytest.mark.parametrize("option, target", [
    ("--json", f"baselines/{H100}/{MACHINE}/0099_run.json"),
    ("--plot", f"baselines/{H100}/plots"),
    ("--json", f"baselines/{H100}/history.json"),
])
def test_history_writes_nothing_among_the_stored_runs_it_reads(project: pytest.Pytester, option: str,
                                                               target: str) -> None:
    """E3: a history JSON named like a stored run stopped every later run (rc 4); --plot wrote PNGs into baselines/."""
    _h100(project)
    before = _shas(project)
    _one_error(_cli(project, "history", "baselines", option, target), f"{option} {target}: inside baselines, a "
                                                                      "folder of stored runs that is read")
    named = _cli(project, "history", f"baselines/{H100}/{MACHINE}/0019_run.json",
                 f"baselines/{H100}/{MACHINE}/0020_run.json", option, target)
    _one_error(named, f"{option} {target}: inside baselines/{H100}, a folder of stored runs that is read")
    assert _shas(project) == before and not (project.path / target).exists()


def test_noise_out_named_like_a_stored_run_in_a_machine_folder_is_refused(project: pytest.Pytester) -> None:
    """E3: noise --out baselines/<gpu>/<machine>/0099_run.json wrote a file every later run refused to read."""
    folder = _h100(project, range(23, 25))
    before = _shas(project)
    target = folder / "0099_run.json"
    _one_error(_cli(project, "noise", str(folder / "0023_run.json"), str(folder / "0024_run.json"), "--out", str(target)),
               f"--out {target}: named like a stored run in a machine folder")
    assert _shas(project) == before


# ------------------------------------------------------------------------------------- E6: implausible values


@pytest.mark.parametrize("edit, field", [
    (lambda e: e["rnnperf"]["cudnn_device"]["busy"]["samples_s"].__setitem__(0, 1e300), "cudnn device samples_s holds 1e+300"),
    (lambda e: e["rnnperf"]["cudnn_device"]["busy"]["samples_s"].__setitem__(0, 1e-300), "cudnn device samples_s holds 1e-300"),
    (lambda e: e["rnnperf"]["cudnn"]["samples_s"].__setitem__(0, 1e300), "cudnn samples_s holds 1e+300"),
    (lambda e: e["rnnperf_processes"][0]["metrics"].__setitem__("busy", 1e300), "metric 'busy' holds 1e+300"),
])
def test_an_implausible_time_in_a_stored_run_is_refused_naming_file_and_field(project: pytest.Pytester, edit: Any,
                                                                              field: str) -> None:
    """E6: a device time of 1e300 s failed every test with OverflowError, and history ended in "internal error"."""
    path = _record(project)
    _edit(path, edit)
    before = _shas(project)
    _usage_error(run(project), str(path), field, "not a plausible time")
    folder = _h100(project, range(16, 27))  # 0016 holds extra processes' summaries, 0019-0026 are eight kept runs
    _edit(folder / "0016_baseline.json", edit)
    for command in (["history", f"baselines/{H100}"], ["sensitivity", f"baselines/{H100}"]):
        _one_error(_cli(project, *command), f"/{MACHINE}/0016_baseline.json: malformed record: ", field,
                   "not a plausible time")
    assert {k: v for k, v in _shas(project).items() if not k.startswith(H100)} == before


# -------------------------------------------------------------------------------------- E7: the machine folder


@pytest.mark.parametrize("command", ["sensitivity", "compare"])
def test_a_machine_folder_given_for_the_gpu_folder_names_the_gpu_folder(project: pytest.Pytester, command: str) -> None:
    """E7: sensitivity baselines/<gpu>/<machine> advised moving the good baselines one folder deeper."""
    folder = _h100(project, range(25, 27))
    before = _shas(project)
    given = f"baselines/{H100}/{MACHINE}"
    args = [given, f"{given}/0026_run.json"] if command == "compare" else [given]
    _one_error(_cli(project, command, *args),
               f"error: {given} is a machine folder; give the GPU model's folder: baselines/{H100}")
    assert _shas(project) == before and folder.is_dir()


# --------------------------------------------------------------------------------- E8: one number, one run


@pytest.mark.parametrize("other", ["0001_run.json", "0001_baseline.json.gz"])
def test_two_stored_runs_with_one_number_stop_the_run_in_one_line(project: pytest.Pytester, other: str) -> None:
    """E8: 0001_baseline.json beside 0001_run.json: one was picked silently, cutting kept runs out of the history."""
    path = _record(project)
    shutil.copyfile(path, path.with_name(other))
    before = _shas(project)
    _usage_error(run(project), "numbered 0001 like", "one number is one stored run")
    _one_error(_cli(project, "sensitivity", GPU_DIR), "numbered 0001 like", "one number is one stored run")
    assert _shas(project) == before


def test_a_copy_of_a_kept_run_counts_once_with_a_note(project: pytest.Pytester) -> None:
    """E8: a kept run copied under another number counted as one more process (5, not 4) and narrowed the noise."""
    _record(project)
    run(project, "--rnnperf-keep-run").assert_outcomes(passed=2)
    (kept,) = (project.path / GPU_DIR).glob("*/0002_run.json")
    copy = kept.with_name("0003_copy.json")
    shutil.copyfile(kept, copy)
    before = _shas(project)
    result = run(project)
    result.assert_outcomes(passed=2)
    whole_lines(result).fnmatch_lines(["*history: 2 case(s) judged across 4 processes*",
                                       f"*{copy.name} holds the same run as *{kept.name}: counted once*"])
    sensitivity = _cli(project, "sensitivity", GPU_DIR)
    assert sensitivity.returncode == 0, sensitivity.stderr
    assert f"note: {copy.relative_to(project.path)} holds the same run as" in sensitivity.stdout
    assert [row.split()[1] for row in sensitivity.stdout.splitlines() if row.startswith("torch-")] == ["4", "4"]
    assert _shas(project) == before


# ------------------------------------------------------------------------------------------ E11: empty text


@pytest.mark.parametrize("args, option", [
    (["sensitivity", f"baselines/{H100}", "--case", ""], "argument --case: empty; give a case id"),
    (["sensitivity", ""], "argument folder: empty; give a path"),
    (["compare", "", f"baselines/{H100}/{MACHINE}/0026_run.json"], "argument old: empty; give a path"),
    (["compare", f"baselines/{H100}/{MACHINE}/0025_run.json", " "], "argument new: empty; give a path"),
    (["spread", "", f"baselines/{H100}/{MACHINE}/0026_run.json"], "argument runs: empty; give a path"),
    (["noise", f"baselines/{H100}/{MACHINE}/0025_run.json", f"baselines/{H100}/{MACHINE}/0026_run.json", "--out", ""],
     "argument --out: empty; give a path"),
    (["history", ""], "argument PATH: empty; give a path"),
])
def test_an_empty_argument_is_refused_in_one_line_saying_what_to_give(project: pytest.Pytester, args: list[str],
                                                                       option: str) -> None:
    """E11: sensitivity --case '' said "no stored run holds " (nothing after "holds"); an empty path meant the cwd."""
    _h100(project, range(25, 27))
    before = _shas(project)
    done = _cli(project, *args)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and option in done.stderr, done.stderr
    assert _shas(project) == before
