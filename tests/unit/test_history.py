"""History of stored runs: series per GPU model and case, and their change points, on synthetic nightly runs.

Every run is a real stored-run file (``records``' own serialization, read back by ``load_run``) whose cuDNN
device time per step is drawn around a known level with 0.5% run-to-run noise from a fixed seed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest
from factories import record

from pytest_rnnperf.cli.main import COMMANDS, main
from pytest_rnnperf.history.changes import MIN_RUNS, detect
from pytest_rnnperf.store.runs import benchmark_extra, load_run, run_meta
from pytest_rnnperf.judge.verdicts import Policy, judge

H100, H200 = "NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"
CASE = "torch-lstm-nightly"
START = datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)


def _levels(n: int, seed: int, noise: float = 0.005, step_at: int | None = None, step: float = 0.0,
            drift_from: int | None = None, drift_runs: int = 0, drift: float = 0.0) -> list[float]:
    """``n`` nightly factors around 1: lognormal noise, times a step from ``step_at`` and a drift of ``drift`` a
    night over ``drift_runs`` nights from ``drift_from``."""
    factors = np.exp(np.random.default_rng(seed).normal(0.0, noise, n))
    if step_at is not None:
        factors[step_at:] *= 1 + step
    if drift_from is not None:
        for night in range(drift_runs):
            factors[drift_from + night:] *= 1 + drift
    return [float(f) for f in factors]


def _store(folder: Path, name: str, gpu: str, night: int, device_ms: dict[str, float], seed: int,
           wall_ms: dict[str, float] | None = None, device: bool = True) -> Path:
    """One stored run, written the way the plugin writes it: a case per entry, its record in extra_info."""
    records = [record(case_id, cudnn_ms=(wall_ms or {}).get(case_id, 1.5 * ms), seed=seed,
                      cudnn_dev_ms=ms if device else None) for case_id, ms in device_ms.items()]
    data = {"machine_info": {"rnnperf": run_meta(gpu, {"torch": "2.13.0"}, "abc123")},
            "datetime": (START + timedelta(days=night)).isoformat(),
            "benchmarks": [{"name": f"test_case[{r.id}]", "extra_info": benchmark_extra(r, "cudnn")} for r in records]}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def _nightly(folder: Path, levels: Sequence[float], gpu: str = H100, base_ms: float = 2.0, seed: int = 0,
             case: str = CASE) -> list[Path]:
    """A run per night with the case at ``base_ms * level``; file names do not sort in night order (the
    runs' datetimes order them)."""
    n = len(levels)
    return [_store(folder, f"{gpu}-{(night * 7) % n:02d}-{night}.json", gpu, night, {case: base_ms * level},
                   seed=seed * 1000 + night) for night, level in enumerate(levels)]


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The widest terminal the commands draw for: these tests read what a row says, not how it wraps."""
    monkeypatch.setenv("COLUMNS", "200")


def _history(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    """Exit code, stdout lines and stderr lines of ``python -m pytest_rnnperf history ARGS``."""
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def _json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, dict, list[str]]:
    """Exit code, the --json result and stdout lines."""
    out = tmp_path / "history.json"
    out.unlink(missing_ok=True)  # history never replaces a file: each call writes a fresh one
    code, lines, err = _history(capsys, *args, "--json", str(out))
    assert code in (0, 1), err
    return code, json.loads(out.read_text()), lines


def _case(result: dict, gpu: str = H100, case: str = CASE) -> dict:
    """One case's entry of a --json result."""
    model = next(m for m in result["models"] if m["gpu"] == gpu)
    return next(c for c in model["cases"] if c["case"] == case)


def test_a_five_percent_step_is_found_at_the_run_where_it_began(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    _nightly(tmp_path / "runs", _levels(25, seed=3, step_at=15, step=0.05))
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "runs"))
    case = _case(result)
    assert code == 1 and len(case["values"]) == 25
    [cp] = case["change_points"]
    assert cp["kind"] == "step" and cp["regressing"] and abs(cp["start"]["run"] - 15) <= 1
    assert cp["shift"] == pytest.approx(0.05, abs=0.01)
    # Ordered by the runs' datetimes, not by their file names.
    assert [r["datetime"][:10] for r in _model(result)["runs"]][:2] == ["2026-01-01", "2026-01-02"]
    row = next(line for line in lines if CASE in line)
    assert "step (slower)" in row and "+5" in row, lines
    assert lines[-2].startswith("1 case(s): 1 change point(s) toward slower"), lines


def test_since_counts_only_the_change_points_inside_its_window_so_an_accepted_step_stops_failing(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _nightly(tmp_path / "runs", _levels(25, seed=3, step_at=15, step=0.05))
    runs = str(tmp_path / "runs")
    for since, code in (("5", 0), ("12", 1), ("2026-01-21", 0), ("2026-01-10", 1)):  # the step: night 15, Jan 16
        done, lines, _ = _history(capsys, runs, "--since", since)
        assert done == code, (since, lines)
        if code == 0:
            assert "no change point toward slower" in lines[-1] and lines[-1].endswith(
                "; 1 earlier, outside the window (not counted)"), lines[-1]
            assert "step (slower, before the window)" in next(line for line in lines if CASE in line)
        else:
            assert lines[-1].startswith("1 case(s): 1 change point(s) toward slower in the device series"), lines[-1]
    code, result, _ = _json(capsys, tmp_path, runs, "--since", "5")
    assert code == 0 and result["counted"] == 0 and result["regressions"] == 1
    assert result["window"] == "within the newest 5 run(s)" and not _case(result)["change_points"][0]["in_window"]


@pytest.mark.parametrize("since", ["0", "-3", "2026-02-30", "last week"])
def test_a_since_that_is_neither_a_count_of_runs_nor_a_date_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, since: str) -> None:
    _nightly(tmp_path / "runs", _levels(8, seed=1))
    with pytest.raises(SystemExit) as stop:
        main(["history", str(tmp_path / "runs"), "--since", since])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err and "argument --since: " in err
    assert "is neither a number of runs" in err or "expected one argument" in err


def _model(result: dict, gpu: str = H100) -> dict:
    """One GPU model's entry of a --json result."""
    return next(m for m in result["models"] if m["gpu"] == gpu)


def test_a_one_percent_a_night_drift_is_flagged_though_no_night_failed_the_nightly_rule(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    levels = _levels(28, seed=5, drift_from=16, drift_runs=10, drift=0.01)
    paths = _nightly(tmp_path / "runs", levels)
    # Night after night the plugin's own rule passes: no night moved by its 3% device-time threshold.
    runs = sorted((load_run(p) for p in paths), key=lambda r: r.datetime)
    device = [r.records[CASE].cudnn_device.busy.median for r in runs]  # type: ignore[union-attr]
    assert max(abs(b / a - 1) for a, b in zip(device, device[1:])) < Policy().device_effect
    verdicts = [judge(a.records[CASE], b.records[CASE]) for a, b in zip(runs, runs[1:])]
    assert not any(v is not None and v.fails for v in verdicts)
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "runs"))
    [cp] = _case(result)["change_points"]
    assert code == 1 and cp["kind"] == "drift" and cp["regressing"]
    assert abs(cp["start"]["run"] - 16) <= 2 and abs(cp["end"]["run"] - 25) <= 2
    assert cp["shift"] == pytest.approx(1.01 ** 10 - 1, abs=0.02)  # the sum of the change over the drift
    assert "drift (slower)" in next(line for line in lines if CASE in line)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("runs", [12, 30])
def test_a_flat_series_with_half_a_percent_noise_has_no_change_point(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path, seed: int, runs: int) -> None:
    _nightly(tmp_path / "runs", _levels(runs, seed=seed), seed=seed)
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "runs"))
    case = _case(result)
    assert code == 0 and case["change_points"] == [], lines
    assert 0.002 < case["noise"] < 0.01  # the series' own noise, about the 0.5% it was drawn with
    assert lines[-2] == "1 case(s): no change point toward slower in the device series (a longer time)"


def test_the_detector_finds_steps_and_drifts_in_plain_series_too() -> None:
    # Without files: a faster step is found (not regressing), and too short a series is refused.
    values = [1.0 * f for f in _levels(20, seed=1, step_at=8, step=-0.05)]
    [cp] = detect(values).change_points
    assert cp.kind == "step" and abs(cp.start - 8) <= 1 and cp.shift == pytest.approx(-0.05, abs=0.01)
    with pytest.raises(ValueError, match="at least"):
        detect(values[:MIN_RUNS - 1])


def test_runs_of_two_gpu_models_in_one_folder_are_two_series(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    # The same case on both models, on the same nights: one mixed series would jump by 30% every other run.
    _nightly(tmp_path / "fleet" / "runner-a", _levels(12, seed=1), gpu=H100, base_ms=2.0, seed=1)
    _nightly(tmp_path / "fleet" / "runner-b", _levels(12, seed=2), gpu=H200, base_ms=1.4, seed=2)
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "fleet"))
    assert code == 0 and [m["gpu"] for m in result["models"]] == [H100, H200]
    for gpu, ms in ((H100, 2.0), (H200, 1.4)):
        case = _case(result, gpu)
        assert len(case["values"]) == 12 and case["change_points"] == []
        assert all(abs(v * 1e3 / ms - 1) < 0.03 for v in case["values"])
        assert all(f"fleet/runner-{'a' if gpu == H100 else 'b'}/" in r["path"] for r in _model(result, gpu)["runs"])
    assert lines[0].startswith("cuDNN device time per step over 24 stored run(s) of 2 GPU models, never mixed")


def test_a_broken_run_is_refused_in_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = _nightly(tmp_path / "runs", _levels(8, seed=0))
    paths[3].write_text(paths[3].read_text()[:500])  # truncated: a run, but not a usable one
    code, out, err = _history(capsys, str(tmp_path / "runs"))
    assert code == 2 and out == [] and len(err) == 1, err
    assert err[0].startswith(f"error: {paths[3]}: not valid JSON"), err
    # Named on the command line, a file that is no run at all is refused too.
    (tmp_path / "noise.json").write_text('{"format": 1, "device_spread": {}}')
    code, out, err = _history(capsys, str(paths[0]), str(tmp_path / "noise.json"))
    assert code == 2 and err == [f"error: {tmp_path / 'noise.json'}: not a pytest-benchmark file (no 'benchmarks' "
                                 "list)"], err
    code, out, err = _history(capsys, str(tmp_path / "missing"))
    assert code == 2 and err == [f"error: {tmp_path / 'missing'}: no such file or folder"]


def test_a_folder_skips_what_is_clearly_not_a_run_and_counts_a_run_stored_twice_once(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = _nightly(tmp_path / "baselines" / H100 / "machine", _levels(8, seed=4))
    (tmp_path / "baselines" / H100 / "noise.json").write_text('{"format": 1, "device_spread": {}}')
    nightly = tmp_path / "nightly" / "tonight.json"
    nightly.parent.mkdir()
    nightly.write_bytes(paths[-1].read_bytes())  # the recorded baseline and its --benchmark-json
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "baselines"), str(tmp_path / "nightly"))
    assert code == 0 and len(_case(result)["values"]) == 8
    notes = result["notes"]  # printed as "note: ..." lines, wrapped where the temporary paths run long
    assert f"skipped {tmp_path / 'baselines' / H100 / 'noise.json'}: not a pytest-benchmark run" in notes
    assert f"{nightly} holds the same run as {paths[-1]}: counted once" in notes


def test_a_run_without_device_time_is_left_out_or_the_case_followed_in_wall_time(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    paths = _nightly(folder, _levels(10, seed=6))
    # Night 4 again, traced without CUPTI: it has wall time only.
    _store(folder, paths[4].name, H100, 4, {CASE: 2.0}, seed=4, device=False)
    code, result, lines = _json(capsys, tmp_path, str(folder))
    case = _case(result)
    assert code == 0 and case["metric"] == "device" and case["left_out"] == 1 and 4 not in case["runs"]
    assert any("1 case(s) miss device time in some runs" in line for line in lines), lines
    code, result, lines = _json(capsys, tmp_path, str(folder), "--fallback", "wall")
    case = _case(result)
    assert case["metric"] == "wall" and case["left_out"] == 0 and len(case["values"]) == 10
    assert f"{CASE} [wall]" in "\n".join(lines)


def test_a_lower_speedup_is_the_regressing_direction(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # cuDNN wall time up 8% from night 10 (generic unchanged): the speedup falls, the device time holds.
    levels = _levels(20, seed=8)
    for night, level in enumerate(levels):
        wall = 3.0 * level * (1.08 if night >= 10 else 1.0)
        _store(tmp_path / "runs", f"n{night:02d}.json", H100, night, {CASE: 2.0 * level}, seed=night,
               wall_ms={CASE: wall})
    code, result, _ = _json(capsys, tmp_path, str(tmp_path / "runs"), "--metric", "speedup")
    [cp] = _case(result)["change_points"]
    assert code == 1 and result["metric"] == "speedup" and cp["regressing"] and cp["shift"] < -0.05
    assert abs(cp["start"]["run"] - 10) <= 1
    code, result, _ = _json(capsys, tmp_path, str(tmp_path / "runs"))
    assert code == 0 and _case(result)["change_points"] == []


def test_plot_writes_one_png_per_gpu_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _nightly(tmp_path / "runs", _levels(12, seed=1, step_at=6, step=0.05), gpu=H100)
    _nightly(tmp_path / "runs", _levels(12, seed=2), gpu=H200, seed=2)
    code, lines, err = _history(capsys, str(tmp_path / "runs"), "--plot", str(tmp_path / "plots"))
    pngs = sorted((tmp_path / "plots").glob("*.png"))
    assert code == 1 and [p.name for p in pngs] == [f"history-{H100}-device.png", f"history-{H200}-device.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in pngs)
    assert [line for line in lines if line.startswith("written: ")] == [f"written: {p}" for p in pngs]


def test_json_output_parses_and_says_how_change_points_were_found(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    _nightly(tmp_path / "runs", _levels(10, seed=2))
    code, result, lines = _json(capsys, tmp_path, str(tmp_path / "runs"), "--metric", "wall", "--min-shift", "0.02")
    assert code == 0 and result["exit"] == 0 and result["metric"] == "wall" and result["unit"] == "s"
    assert result["method"]["library"] == "ruptures" and result["method"]["min_shift"] == 0.02
    case = _case(result)
    assert case["total_change"] == pytest.approx(case["values"][-1] / case["values"][0] - 1)
    assert case["smallest_shift"] >= 0.02 and lines[-1] == f"written: {tmp_path / 'history.json'}"


def test_history_needs_two_runs_and_its_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    [path] = _nightly(tmp_path / "runs", [1.0])
    code, out, err = _history(capsys, str(path))
    assert code == 2 and err == [f"error: history needs at least two stored runs, found 1 in {path}"]
    with pytest.raises(SystemExit) as exit_info:
        main(["history", "--help"])
    assert exit_info.value.code == 0 and "Exit 0" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as exit_info:
        main(["history", str(path), "--metric", "energy"])
    err_lines = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and len(err_lines) == 1 and "--metric" in err_lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_prints_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A '%' in a help text (a default shown as 100%) broke compare --help with a traceback."""
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out
