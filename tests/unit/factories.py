"""Small typed records for tests: seeded lognormal samples around known medians."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_rnnperf.model.results import PathProof
from pytest_rnnperf.model.cases import Case, ModelCase, Shape
from pytest_rnnperf.model.flags import WindowFlag
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.timing import Measurement
from pytest_rnnperf.model.timing import DeviceTiming, KernelStat

CASE = Case("torch", "lstm", Shape(28, 128, 28, 128), floor=2.0)


def device(name: str, ms: float, seed: int = 0, n: int = 10, kernel: str = "RNN_blockPersist_fp_LSTM",
           work_ms: float | None = None) -> DeviceTiming:
    """A side's device timing: ``n`` rounds with 0.2% noise around ``ms`` busy (``work_ms`` of kernel time)."""
    rng = np.random.default_rng(seed + 1000)
    busy = Measurement(name, tuple(ms / 1e3 * rng.lognormal(0, 0.002, n)), 4, timer="device")
    work = Measurement(name, tuple(work_ms / 1e3 * rng.lognormal(0, 0.002, n)) if work_ms else busy.samples, 4,
                       timer="device-work")
    return DeviceTiming(busy=busy, work=work, launches_per_step=1.0, kernels=(KernelStat(kernel, work_ms or ms, 1.0),))


def record(case_id: str | None = None, cudnn_ms: float | None = 1.0, generic_ms: float = 4.0, seed: int = 0,
           n: int = 20, busy_pct: float | None = None, flags: tuple[WindowFlag, ...] = (),
           case: Any = None, cudnn_dev_ms: float | None = None, generic_dev_ms: float | None = None,
           kernel: str = "RNN_blockPersist_fp_LSTM", cudnn_work_ms: float | None = None, **fields: Any) -> CaseRecord:
    """A record with ``n`` samples (1% lognormal noise) around the given medians; ``busy_pct`` sets NVML
    utilization; ``*_dev_ms`` add device timings."""
    if cudnn_dev_ms is not None:
        fields["cudnn_device"] = device("cudnn", cudnn_dev_ms, seed, kernel=kernel, work_ms=cudnn_work_ms)
    if generic_dev_ms is not None:
        fields["generic_device"] = device("generic", generic_dev_ms, seed, kernel="elementwise_cell")
    rng = np.random.default_rng(seed)
    subject = case if case is not None else (CASE if case_id is None else ModelCase(id=case_id, framework="torch"))
    generic = Measurement("generic", tuple(generic_ms / 1e3 * rng.lognormal(0, 0.01, n)), 3)
    cudnn = None if cudnn_ms is None else Measurement("cudnn", tuple(cudnn_ms / 1e3 * rng.lognormal(0, 0.01, n)), 7)
    telemetry = None if busy_pct is None else {"duration_s": 2.0, "utilization": {"mean": busy_pct, "max": busy_pct,
                                                                                 "samples": 10}}
    parity = ParityReport("fp32", (ParityRow("cudnn vs generic", "output", 1e-7, 5e-5),))
    proofs = (PathProof("cudnn", True, "ops aten::_cudnn_rnn"), PathProof("generic", True, "no cuDNN op"))
    return CaseRecord(case=subject, device="cuda", proofs=proofs, parity=parity, generic=generic, cudnn=cudnn,
                      telemetry=telemetry, flags=flags, **fields)
