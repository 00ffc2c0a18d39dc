"""The gates a measured case must pass whatever its baseline: rules read off one record, no comparison.

The path that ran is the one claimed (``Paths``), the sides agree within their precision's tolerance
(``Parity``, tolerances in ``model.parity``), the cuDNN side's kernels show the math its precision promises
(``Precision``, tensor-op kernels at fp16/bf16/tf32 and none in fp32: ``judge.precision``), and cuDNN is at least as
fast as its case promises (``Floor``, the case's own ``floor``). A gate is one class here with a ``name``, its ``params`` (the thresholds it declares,
made into settings as the rules' are) and ``holds``, listed in ``GATES``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pytest_rnnperf.judge.params import Threshold
from pytest_rnnperf.judge.precision import precision_finding
from pytest_rnnperf.model.records import CaseRecord


class Gate(Protocol):
    """One check of a measured case on its own; a case that fails one fails its test."""

    @property
    def name(self) -> str:
        """What the gate checks, in a word."""

    @property
    def params(self) -> tuple[Threshold, ...]:
        """The thresholds it reads from the policy."""

    def holds(self, record: CaseRecord) -> bool:
        """The case passes this gate."""


@dataclass(frozen=True)
class Paths:
    """Every side ran the implementation it claims (cuDNN, or a generic path)."""

    name: str = "paths"
    params: tuple[Threshold, ...] = ()

    def holds(self, record: CaseRecord) -> bool:
        """Every path proof holds."""
        return record.paths_ok


@dataclass(frozen=True)
class Parity:
    """The sides' outputs and gradients agree with each other and float64 within the precision's tolerance."""

    name: str = "parity"
    params: tuple[Threshold, ...] = ()

    def holds(self, record: CaseRecord) -> bool:
        """Every parity row is within its tolerance."""
        return record.parity.ok


@dataclass(frozen=True)
class Precision:
    """The cuDNN side ran tensor-op kernels at fp16, bf16 and tf32 and none in fp32, by its CUPTI kernel table."""

    name: str = "precision"
    params: tuple[Threshold, ...] = ()

    def holds(self, record: CaseRecord) -> bool:
        """The kernel names agree with the precision (a case without a kernel table has nothing to disagree)."""
        return precision_finding(record).ok


@dataclass(frozen=True)
class Floor:
    """The cuDNN side's speedup over the generic one is at least the floor its case promises."""

    name: str = "floor"
    params: tuple[Threshold, ...] = ()

    def holds(self, record: CaseRecord) -> bool:
        """The speedup's estimate reaches the floor (a case without both sides timed has none to miss)."""
        return record.speedup is None or record.cudnn is None or record.speedup.estimate >= record.case.floor


FLOOR = Floor()
GATES: tuple[Gate, ...] = (Paths(), Parity(), Precision(), FLOOR)


def gates_hold(record: CaseRecord) -> bool:
    """The case passes every gate."""
    return all(gate.holds(record) for gate in GATES)
