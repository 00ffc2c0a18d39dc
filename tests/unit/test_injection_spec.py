"""scripts/injection_spec.py: the spin injection's value from a stored run, or from a GPU model's newest run."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_modules import ROOT, load_script


def test_a_gpu_folder_stands_for_its_stored_runs_newest_first(tmp_path: Path) -> None:
    """Runs are ordered by their number, not by the folder they sit in; evidence files are not runs."""
    for name in ("a/0002_baseline.json", "a/0010_run.json", "b/0009_run.json", "evidence/2026-11-27_null.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert load_script("injection_spec").stored_runs(tmp_path) == [
        tmp_path / "a" / "0010_run.json", tmp_path / "b" / "0009_run.json", tmp_path / "a" / "0002_baseline.json"]
    assert load_script("injection_spec").stored_runs(tmp_path / "b" / "0009_run.json") == [
        tmp_path / "b" / "0009_run.json"]


def test_a_gpu_folder_whose_newest_run_holds_no_torch_case_still_spins_each_as_its_newest_run_has_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The H100's newest run (0049) holds JAX cases only: a lent H100's injection then injected nothing. Each torch
    case now gets its spin from the newest run that timed it."""
    folder = ROOT / "baselines" / "NVIDIA_H100_80GB_HBM3"
    if not (folder / "Linux-CPython-3.12-64bit" / "0049_run.json").is_file():
        pytest.skip(f"{folder} is not in this checkout")
    script = load_script("injection_spec")
    assert script.main([str(folder), "0.05"]) == 0
    out, err = capsys.readouterr()
    parts = dict(p.split("=") for p in out.strip().split(","))
    assert sum(k.startswith("torch-") for k in parts) == 30 and sum(k.startswith("keras_torch-") for k in parts) >= 12
    # The newest run that timed torch cases gives them theirs (0047 until the kept runs after 0049).
    newest = next(found for path in script.stored_runs(folder) if (found := script.spins([path], 0.05)))
    assert all(parts[case_id] == us for case_id, us in newest.items())
    assert "their newest stored run of" in err


def test_a_folder_without_runs_or_a_bad_share_is_told_in_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """No traceback: exit status 2 and one line naming what is wrong."""
    script = load_script("injection_spec")
    assert script.main([str(tmp_path), "0.03"]) == 2
    assert capsys.readouterr().err.strip() == f"injection_spec.py: {tmp_path}: no stored run (NNNN_run.json or " \
                                              "NNNN_baseline.json) under it"
    assert script.main([str(tmp_path), "three"]) == 2
    assert "could not convert string to float: 'three'" in capsys.readouterr().err


def test_the_stored_h200_history_gives_each_torch_case_a_spin(capsys: pytest.CaptureFixture[str]) -> None:
    """From the committed H200 folder (its newest run, a torch and Keras-on-torch night): the suite's torch cases get
    a part; TF and JAX cases, and the team-model tests the spin does not reach, none."""
    folder = ROOT / "baselines" / "NVIDIA_H200"
    if not folder.is_dir():
        pytest.skip("baselines/NVIDIA_H200 is not in this checkout")
    assert load_script("injection_spec").main([str(folder), "0.03"]) == 0
    parts = dict(p.split("=") for p in capsys.readouterr().out.strip().split(","))
    assert sum(k.startswith("torch-") for k in parts) == 30
    assert sum(k.startswith("keras_torch-") for k in parts) == 12
    assert not any("::" in k for k in parts)
    assert not any(k.startswith(("tf-", "jax-", "keras_jax-", "torch_compile")) for k in parts)
    assert all(float(v) > 0 for v in parts.values())



def test_a_run_without_a_case_that_takes_the_spin_is_refused_rather_than_printing_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The H100's 0049 holds JAX cases only: an empty value would inject nothing, so exit 2 and one line."""
    run = ROOT / "baselines" / "NVIDIA_H100_80GB_HBM3" / "Linux-CPython-3.12-64bit" / "0049_run.json"
    if not run.is_file():
        pytest.skip(f"{run} is not in this checkout")
    assert load_script("injection_spec").main([str(run), "0.03"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == f"injection_spec.py: {run} holds no torch or Keras-on-torch case with device " \
                                        "time: name a stored run that does"
