"""The gates of a measured case (judge/gates.py): each one rule read off the record alone."""

from __future__ import annotations

from dataclasses import replace

from factories import record

from pytest_rnnperf.judge.gates import GATES, gates_hold
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.stats import Interval

FOUR_X = Interval(4.0, 3.8, 4.2, 0.95)


def failed(rec: object) -> list[str]:
    """The names of the gates ``rec`` does not pass."""
    return [gate.name for gate in GATES if not gate.holds(rec)]  # type: ignore[arg-type]


def test_a_case_under_its_floor_fails_the_floor_gate_alone() -> None:
    """cuDNN 4x faster than generic holds a floor of 2x and misses one of 5x; paths and parity still hold."""
    assert failed(record(case=ModelCase(id="m", framework="torch", floor=2.0), speedup=FOUR_X)) == []
    slow = record(case=ModelCase(id="m", framework="torch", floor=5.0), speedup=FOUR_X)
    assert failed(slow) == ["floor"] and not gates_hold(slow)


def test_a_parity_row_out_of_tolerance_fails_the_parity_gate_and_a_case_without_cudnn_has_no_floor_to_miss() -> None:
    """An error over its tolerance fails parity; without a cuDNN side there is no speedup to hold to a floor."""
    off = replace(record(), parity=ParityReport("fp32", (ParityRow("cudnn vs generic", "output", 1e-3, 5e-5),)))
    assert failed(off) == ["parity"]
    assert failed(record(cudnn_ms=None, case=ModelCase(id="m", framework="torch", floor=5.0), speedup=FOUR_X)) == []
