"""Baseline storage: numbering, atomic exclusive writes, validation and verdicts (no pytest plugin)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_rnnperf import baselines
from pytest_rnnperf.baselines import BaselineError, compare_records, find_latest, load_run, write_new
from pytest_rnnperf.runner import device_busy


def _record(case_id: str, cudnn_ms: float, generic_ms: float = 4.0, seed: int = 0, warnings: list[str] | None = None) -> dict[str, Any]:
    """A stored case record with 20 lognormal samples (1% noise) around the given medians."""
    rng = np.random.default_rng(seed)
    c = (cudnn_ms / 1e3 * rng.lognormal(0, 0.01, 20)).tolist()
    g = (generic_ms / 1e3 * rng.lognormal(0, 0.01, 20)).tolist()
    return {"case": {"id": case_id}, "cudnn": {"samples_s": c}, "generic": {"samples_s": g},
            "round_speedups": [b / a for a, b in zip(c, g)], "warnings": warnings or []}


def _run(records: list[dict[str, Any]], fmt: int = 1) -> dict[str, Any]:
    """A stored-run JSON as the plugin writes it."""
    return {"machine_info": {"rnnperf": {"format": fmt, "gpu_slug": "NVIDIA_H200", "environment": {"driver": "580"}}},
            "benchmarks": [{"extra_info": {"rnnperf": r}} for r in records], "datetime": "2026-11-22T00:00:00"}


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


@pytest.mark.parametrize("text, message", [
    ('{"benchmarks": [', "not valid JSON"),
    ('[]', "not a pytest-benchmark file"),
    ('{"benchmarks": [], "machine_info": {}}', "no machine_info.rnnperf section"),
    (json.dumps(_run([], fmt=2)), "unknown baseline format 2"),
    (json.dumps(_run([{"case": {"id": "x"}, "generic": {"samples_s": [-1.0]}, "cudnn": None}])), "malformed record"),
])
def test_load_run_rejects_unusable_files_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    """Every unusable file gives one line that names it and the problem."""
    path = tmp_path / "0001_x.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        load_run(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_run_keys_records_by_case(tmp_path: Path) -> None:
    """Records come back keyed by case id with the environment."""
    path = tmp_path / "0001_x.json"
    path.write_text(json.dumps(_run([_record("a", 1.0), _record("b", 2.0)])))
    stored = load_run(path)
    assert sorted(stored.records) == ["a", "b"] and stored.environment == {"driver": "580"}


def test_verdicts_regressed_unchanged_and_flagged() -> None:
    """+20% cuDNN time regresses; noise alone does not; a throttled window is reported, not blamed."""
    base = _record("a", 1.0, seed=1)
    slow = compare_records("a", base, _record("a", 1.2, seed=2))
    assert slow.verdict == "regressed" and slow.regressed
    same = compare_records("a", base, _record("a", 1.0, seed=3))
    assert same.verdict == "unchanged" and not same.regressed
    hot = compare_records("a", base, _record("a", 1.2, seed=2, warnings=["clocks throttled during the 2.00 s window: power 0.50 s"]))
    assert hot.verdict == "regressed" and not hot.regressed and "throttled" in hot.flagged


def test_speedup_verdict_is_reported_but_generic_changes_do_not_regress_the_case() -> None:
    """A faster generic side lowers the speedup; the case verdict follows the cuDNN time, which is unchanged."""
    base = _record("a", 1.0, generic_ms=4.0, seed=1)
    now = _record("a", 1.0, generic_ms=3.0, seed=4)
    v = compare_records("a", base, now)
    assert v.speedup is not None and v.speedup.verdict == "regressed"
    assert v.verdict == "unchanged" and not v.regressed


def test_no_cudnn_side_has_no_verdict() -> None:
    """Generic-only records (CPU runs) are not compared."""
    rec = _record("a", 1.0)
    rec["cudnn"] = None
    assert compare_records("a", rec, rec) is None


def test_gpus_with_baselines(tmp_path: Path) -> None:
    """Only folders that hold numbered files count."""
    write_new(tmp_path / "NVIDIA_A100" / "m", "b", {})
    (tmp_path / "EMPTY").mkdir()
    assert baselines.gpus_with_baselines(tmp_path) == ["NVIDIA_A100"]


def _busy(record: dict[str, Any], busy_pct: float) -> dict[str, Any]:
    """The record with the GPU-busy reading of its paired timing window set."""
    return dict(record, telemetry={"utilization": {"mean": busy_pct, "max": busy_pct, "samples": 10}})


def test_host_bound_cases_get_the_wider_threshold() -> None:
    """+20% on a GPU-bound case regresses; the same +20% where the GPU was 20% busy does not; +60% still does."""
    base, slow = _record("a", 1.0, seed=1), _record("a", 1.2, seed=2)
    device_bound = compare_records("a", _busy(base, 90), _busy(slow, 90))
    assert device_bound.verdict == "regressed" and not device_bound.host_bound
    host_bound = compare_records("a", _busy(base, 20), _busy(slow, 20))
    assert host_bound.verdict == "unchanged" and host_bound.host_bound == "host-bound: GPU busy 20%"
    assert host_bound.time.min_effect == baselines.HOST_BOUND_EFFECT
    much_slower = compare_records("a", _busy(base, 20), _busy(_record("a", 1.6, seed=2), 20))
    assert much_slower.regressed


def test_host_bound_slowdown_that_keeps_the_speedup_is_the_hosts() -> None:
    """Host-bound: cuDNN +60% with generic +60% is the host (reported, not failed); with generic flat it regresses."""
    base = _busy(_record("a", 1.0, generic_ms=8.0, seed=1), 20)
    host_slower = compare_records("a", base, _busy(_record("a", 1.6, generic_ms=12.8, seed=2), 20))
    assert host_slower.verdict == "regressed" and not host_slower.regressed
    assert host_slower.flagged == "the host slowed both sides alike: speedup +0%, unchanged"
    assert host_slower.outcome == "regressed (not failed)"
    cudnn_slower = compare_records("a", base, _busy(_record("a", 1.6, generic_ms=8.0, seed=2), 20))
    assert cudnn_slower.regressed and cudnn_slower.speedup.verdict == "regressed" and not cudnn_slower.flagged
    gpu_bound = compare_records("a", _busy(base, 90), _busy(_record("a", 1.6, generic_ms=12.8, seed=2), 90))
    assert gpu_bound.regressed  # GPU-bound: the cuDNN time alone decides


def test_busy_comes_from_the_paired_window_not_the_stored_field() -> None:
    """The paired window decides; the cuDNN-only window is the fallback; a stored device_busy is not trusted."""
    side = {"utilization": {"mean": 85.0}}
    rec = dict(_record("a", 1.0), telemetry={"utilization": {"mean": 30.0}}, side_telemetry=side, device_busy=0.85)
    assert device_busy(rec) == pytest.approx(0.30)
    assert device_busy(dict(_record("a", 1.0), side_telemetry=side)) == pytest.approx(0.85)
    assert device_busy(_record("a", 1.0)) is None
    verdict = compare_records("a", rec, dict(rec))
    assert verdict is not None and verdict.host_bound == "host-bound: GPU busy 30%"  # not the stored 85%


def test_spread_splits_cudnn_time_noise_by_the_verdicts_host_bound_rule(tmp_path: Path) -> None:
    """spread: per-group cuDNN-time spread, with the same busy split the verdicts use."""
    from pytest_rnnperf.__main__ import spread_files

    paths = []
    for n, (big_ms, small_ms) in enumerate([(10.0, 1.5), (10.1, 1.95)]):
        runs = [_busy(_record("big", big_ms, seed=n), 90), _busy(_record("small", small_ms, seed=n), 20)]
        path = tmp_path / f"run{n}.json"
        path.write_text(json.dumps(_run(runs)))
        paths.append(path)
    code, lines = spread_files(paths, target=0.03, min_step_ms=1.0)
    assert code == 1  # speedups of the small case moved ~30%
    assert lines[-2].startswith("cuDNN-time spread, GPU >= 50% busy: 1 cases, median 1.")  # 10 -> 10.1 ms + noise
    assert lines[-2].endswith("1/1 within 3%")
    assert lines[-1].startswith("cuDNN-time spread, host-bound: 1 cases, median 30.")


def test_plugin_and_baselines_load_without_scipy() -> None:
    """pytest_configure checks the baseline tag through this module: loading it must not import scipy (~1 s)."""
    code = ("import sys; import pytest_rnnperf.plugin, pytest_rnnperf.baselines as b; b.tag_problem('x'); "
            "assert 'scipy' not in sys.modules, 'scipy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
