"""Per-case device-time noise: measured from stored runs, written once, and the thresholds it raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import record

from pytest_rnnperf.judge import noise
from pytest_rnnperf.cli.compare import compare_files
from pytest_rnnperf.cli.noise import noise_files
from pytest_rnnperf.model.records import BaselineError, FORMAT_VERSION
from pytest_rnnperf.store.runs import load_run
from pytest_rnnperf.judge.verdicts import Policy, judge


def _stored(tmp_path: Path, name: str, records: list[Any]) -> Path:
    """A stored run of ``records`` on one GPU model, as the plugin writes it."""
    data = {"machine_info": {"rnnperf": {"format": FORMAT_VERSION, "gpu_slug": "NVIDIA_H100_80GB_HBM3"}},
            "benchmarks": [{"extra_info": {"rnnperf": r.to_dict()}} for r in records]}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _runs(tmp_path: Path) -> list[Path]:
    """Three null runs: "steady" within 0.4%, "bimodal" at 17.1 or 18.8 ms."""
    return [_stored(tmp_path, f"run{i}.json", [record("steady", 1.0, seed=i, cudnn_dev_ms=0.5 + 0.001 * i),
                                               record("bimodal", 20.0, seed=i, cudnn_dev_ms=ms)])
            for i, ms in enumerate((17.1, 18.8, 17.1))]


def test_each_case_gets_the_threshold_its_own_spread_justifies(tmp_path: Path) -> None:
    measured = noise.measure([load_run(p) for p in _runs(tmp_path)])
    assert measured.runs == 3 and measured.sources == ("run0.json", "run1.json", "run2.json")
    assert measured.spread["bimodal"] == pytest.approx(18.8 / 17.1 - 1, rel=0.02)
    assert measured.effect("bimodal", 0.03) == pytest.approx(noise.MARGIN * measured.spread["bimodal"])
    assert measured.effect("steady", 0.03) == 0.03  # never below the policy's threshold
    assert measured.effect("never measured", 0.03) == 0.03


def test_a_bimodal_case_is_not_failed_for_landing_in_its_other_mode(tmp_path: Path) -> None:
    base = record("bimodal", 20.0, seed=1, cudnn_dev_ms=17.1)
    other_mode = record("bimodal", 20.0, seed=2, cudnn_dev_ms=18.8)
    assert judge(base, other_mode).fails  # type: ignore[union-attr]
    measured = noise.measure([load_run(p) for p in _runs(tmp_path)])
    policy = Policy(device_effects={"bimodal": measured.effect("bimodal", 0.03)})
    verdict = judge(base, other_mode, policy)
    assert verdict is not None and not verdict.fails and "threshold 12" in verdict.time.explain()
    # A slowdown beyond the case's own noise still fails.
    assert judge(base, record("bimodal", 20.0, seed=3, cudnn_dev_ms=21.0), policy).fails  # type: ignore[union-attr]


def test_the_noise_command_writes_once_and_never_replaces(tmp_path: Path) -> None:
    out = tmp_path / "gpu" / "noise.json"
    code, lines = noise_files(_runs(tmp_path), out)
    assert code == 0 and lines[2].startswith("bimodal") and lines[-1] == f"written: {out}"
    assert noise.load(out).spread.keys() == {"steady", "bimodal"}
    before = out.read_bytes()
    code, lines = noise_files(_runs(tmp_path), out)
    assert code == 2 and "exists" in lines[0] and out.read_bytes() == before
    (tmp_path / "a-file").write_text("x")
    code, lines = noise_files(_runs(tmp_path), tmp_path / "a-file" / "noise.json")
    assert code == 2 and lines == [f"error: --out {tmp_path / 'a-file' / 'noise.json'}: {tmp_path / 'a-file'} is a file, "
                                   f"not a folder"], lines


@pytest.mark.parametrize("content, message", [
    ("{", "not a readable noise file"),
    ('{"format": 9}', "not a noise file of format 1"),
    ('{"format": 1, "device_spread": {"a": -1}}', "finite numbers >= 0"),
    ('{"format": 1, "device_spread": {"a": "wide"}}', "finite numbers >= 0"),
])
def test_a_broken_noise_file_is_refused_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "noise.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=message):
        noise.load(path)


def test_noise_needs_two_runs_and_compare_takes_the_file(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    assert noise_files(runs[:1], None)[0] == 2
    out = tmp_path / "noise.json"
    assert noise_files(runs, out)[0] == 0
    # run1 is in the other mode of "bimodal": a regression at 3%, within the noise the file measured.
    assert compare_files(runs[0], runs[1])[0] == 1
    code, lines = compare_files(runs[0], runs[1], noise_file=out)
    assert code == 0, lines
    (tmp_path / "bad.json").write_text("{")
    assert compare_files(runs[0], runs[1], noise_file=tmp_path / "bad.json")[0] == 2


@pytest.mark.parametrize("value", [1e300, 1.5])
def test_a_noise_spread_beyond_100_percent_is_refused_naming_the_file_and_case(tmp_path: Path, value: float) -> None:
    """D28: a spread of 1e300 silently switched that case's device-time gate off."""
    path = tmp_path / "noise.json"
    path.write_text(json.dumps({"format": 1, "device_spread": {"steady": 0.01, "torch-lstm": value}}))
    with pytest.raises(BaselineError) as info:
        noise.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "torch-lstm" in text and f"{value:g}" in text, text
    assert "at most 1 (100%)" in text and "\n" not in text


def test_the_noise_command_refuses_to_store_a_spread_beyond_100_percent(tmp_path: Path) -> None:
    """D28: runs whose device time moved 2.5x are not null runs; their file would switch the gate off."""
    runs = [_stored(tmp_path, f"run{i}.json", [record("steady", 1.0, seed=i, cudnn_dev_ms=0.5),
                                               record("moved", 4.0, seed=i, cudnn_dev_ms=ms)])
            for i, ms in enumerate((1.0, 2.5))]
    out = tmp_path / "noise.json"
    code, lines = noise_files(runs, out)
    assert code == 2 and len(lines) == 1 and "moved" in lines[0] and "150%" in lines[0], lines
    assert not out.exists()
