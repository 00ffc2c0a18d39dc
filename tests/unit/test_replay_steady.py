"""scripts/replay_history.py --steady: a held-out process judged on the steady kernels of the others."""

from __future__ import annotations

import pytest
from script_modules import load_script

from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.model.process import ProcessSummary


def _process(source: str, gemm: float, cell: float, busy: float = 0.010) -> ProcessSummary:
    """A process of a step with a GEMM and a cuDNN cell kernel (seconds per step)."""
    return ProcessSummary("case", source, {"busy": busy, "kernel/gemm": gemm, "kernel/cell": cell})


def test_a_held_out_process_is_judged_on_the_steady_kernels_of_the_others_alone() -> None:
    """Its own two-speed GEMM moves nothing; its cell kernel 5% slower is beyond the line that catches 3% (3% less
    1.645 times the 0.5% noise floor), 1% is not."""
    replay = load_script("replay_history")
    rest = [_process(f"p{i}", 0.0032 if i % 3 == 0 else 0.0027, 0.0050) for i in range(12)]
    [(change, threshold)] = replay.steady_change(rest, _process("now", 0.0040, 0.0050 * 1.05), 0.01, Policy())
    assert round(change, 3) == 0.05 and threshold == pytest.approx(0.03 - 1.645 * 0.005)
    assert replay.steady_change(rest, _process("now", 0.0040, 0.0050 * 1.01), 0.01, Policy())[0][0] < threshold
    assert replay.steady_replay(rest, 0.01, Policy(), slower=1.05) == ([], 12, 12)  # no alarm, every slowdown failed
    assert replay.steady_replay(rest, 0.01, Policy(), slower=1.01) == ([], 0, 12)


def test_the_replay_leaves_out_processes_without_device_time_and_lets_stored_speeds_pass_as_the_plugin_does() -> None:
    """Sixteen processes at 17.2 or 18.7 ms (every fourth slow, from four runs) and one stored before device time was
    kept: the slow ones are alarms only under the rule before stored speeds (``--no-speeds``)."""
    replay = load_script("replay_history")
    processes = [ProcessSummary("case", f"{i:04d}_run.json", {"busy": (18.7 if i % 4 == 3 else 17.2 + 0.01 * i) / 1e3})
                 for i in range(16)] + [ProcessSummary("case", "0001_baseline.json", {"wall": 0.02})]
    assert len(replay.metric_alarms(processes, "busy", 0.03, 4.0)) == 4
    assert replay.metric_alarms(processes, "busy", 0.03, 4.0, min_runs=3) == []


def test_the_replay_fails_a_step_on_either_steady_value_as_the_rule_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loud steady kernel (1.2% apart) beside two quiet ones: a whole step 3% slower is failed in every held-out
    process through the weighted time, through the plain sum alone only in the 8 whose loud kernel ran fast; neither
    raises an alarm."""
    from pytest_rnnperf.judge import steady

    replay = load_script("replay_history")
    loud, quiet = (-0.012, -0.006, 0.0, 0.006, 0.012), (-0.001, 0.0, 0.001)
    history = [ProcessSummary("case", f"p{i}", {"busy": 0.010, "kernel/loud": 0.009 * (1 + loud[i % 5]),
                                                "kernel/cell": 0.0005 * (1 + quiet[i % 3]),
                                                "kernel/bp": 0.0005 * (1 + quiet[(i + 1) % 3])}) for i in range(21)]
    assert len(replay.steady_change(history[1:], history[0], 0.01, Policy())) == 2
    assert replay.steady_replay(history, 0.01, Policy(), slower=1.03) == ([], 21, 21)
    monkeypatch.setattr(steady, "WEIGHTED_MIN_PROCESSES", 1000)
    assert replay.steady_replay(history, 0.01, Policy(), slower=1.03) == ([], 8, 21)
