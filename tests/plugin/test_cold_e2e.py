"""End-to-end: a case's cold costs (each side's first call after build) stored and judged against its history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import load_json, run, whole_lines

GPU_DIR = "baselines/NVIDIA_H200"
LSTM = "torch-lstm-train-fp32-T4-B2-I3-H5-L1"


def _baseline(project: pytest.Pytester) -> Path:
    """The recorded baseline file of the fake H200."""
    (path,) = (project.path / GPU_DIR).glob("*/0001_baseline.json")
    return path


def _without_cold(data: Any) -> Any:
    """A stored run as written before cold costs were measured: no "cold" record field, no first-call metric."""
    if isinstance(data, dict):
        return {k: _without_cold(v) for k, v in data.items() if k != "cold" and "first_call" not in k}
    if isinstance(data, list):
        return [_without_cold(v) for v in data]
    return data


def test_an_injected_first_call_delay_fails_the_case_naming_the_first_call_while_steady_time_holds(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_COLD_DELAY_MS on the LSTM: its cuDNN first call regresses and fails it; its steady time holds."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    stored = [b for b in load_json(_baseline(project))["benchmarks"] if b["params"]["side"] == "cudnn"]
    assert all(p["metrics"]["cudnn/first_call"] > 0 for b in stored for p in b["extra_info"]["rnnperf_processes"])
    monkeypatch.setenv("RNNPERF_INJECT_COLD_DELAY_MS", "torch-lstm-*=950")  # past the 0.5 s cold floor
    result = run(project)
    result.assert_outcomes(passed=1, failed=1)
    whole_lines(result).fnmatch_lines([
        # The failure's block, one line once unwrapped: the first call regressed, the device time held.
        f"{LSTM}: cudnn first call regressed (steady time unchanged) against its history of 3 processes *"
        "cudnn device time +0.0% * against 3 processes *: unchanged *"
        "cudnn first call +1900.0% * against 3 processes (* threshold 100%): regressed *",
        f"{LSTM}*cudnn first call*+1900.0%*100.0%*first call regressed*",
        "verdicts: 1 first call regressed, 1 unchanged",
    ])
    verdicts = {v["case"]: v for v in load_json(project.path / "rnnperf-report" / "rnnperf.json")["verdicts"]}
    assert verdicts[LSTM]["cudnn_time"]["verdict"] == "unchanged"
    assert verdicts[LSTM]["first_call"]["verdict"] == "regressed"
    assert verdicts[LSTM.replace("lstm", "gru")]["outcome"] == "unchanged"


def test_a_history_without_first_calls_judges_none_and_fails_nothing(project: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline stored before first calls were measured: the injected delay is recorded, not judged, nothing fails."""
    run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    path = _baseline(project)
    path.write_text(json.dumps(_without_cold(load_json(path))))
    monkeypatch.setenv("RNNPERF_INJECT_COLD_DELAY_MS", "torch-lstm-*=200")
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["verdicts: 2 unchanged"])
    report = load_json(project.path / "rnnperf-report" / "rnnperf.json")
    assert all(v["first_call"] is None for v in report["verdicts"])

