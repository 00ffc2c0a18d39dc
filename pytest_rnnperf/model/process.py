"""One process's summary of a case: what the history keeps of every stored run, one row per case and process.

Within a process a case's rounds agree to a fraction of a percent; between processes the same kernels settle
differently. So the history judges a new process against other processes, each reduced to its medians: the
cuDNN side's device busy time, summed kernel time, wall time, host overhead, and each kernel's time per step,
and the process's host-speed probe (``host_probe``: seconds of a fixed CPU workload, not a time per step).
Metrics are keyed by their tags in the metric table (``model.metrics``: ``busy``, ``kernel/<name>``). Pure data.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from pytest_rnnperf.model.fields import as_ratio, as_time
from pytest_rnnperf.model.metrics import BUSY, DURATION, HOST, KERNEL, PROBE, SECONDS, SPEEDUP, WALL, WORK, metric

# The kernel table's folded row is "(N other kernels)"; N moves between processes, the row is the same.
FOLDED = "(other kernels)"
_FOLDED = re.compile(r"^\(\d+ other kernels\)$")
__all__ = ["BUSY", "FOLDED", "HOST", "KERNEL", "PROBE", "SPEEDUP", "WALL", "WORK", "ProcessSummary", "kernel_key",
           "summarize"]


def kernel_key(name: str) -> str:
    """The metric name of a kernel, with the folded row under one name whatever it folded."""
    return KERNEL + (FOLDED if _FOLDED.match(name) else name)


@dataclass(frozen=True)
class ProcessSummary:
    """The medians of one case in one process (seconds per step), by metric name, and where they came from."""

    case_id: str
    source: str  # the stored file's name, with "#2" etc. for the extra processes recorded with it
    metrics: Mapping[str, float] = field(default_factory=dict)
    # The mean SM clock (MHz) over the process's timed rounds, where NVML read it: device time in clock cycles
    # tells a slower clock from slower work. Absent from summaries stored before it was kept.
    sm_clock_mhz: float | None = None
    # Stored from a kept run where the case regressed (reported, not failed): it may teach the history a kernel mix
    # the clean processes do not know, never its times beside theirs (``judge.across.nearest_mode``; host overhead,
    # reported and never failed by default, is the exception: ``judge.rules.HostOverhead``). Set on reading,
    # from where the file stores it; never part of ``to_dict``.
    reported: bool = False

    @cached_property  # read per kernel and per rule while a night is judged (155,000 times over one H100 night)
    def kernels(self) -> dict[str, float]:
        """Kernel name -> seconds per step of the cuDNN side."""
        return {k[len(KERNEL):]: v for k, v in self.metrics.items() if k.startswith(KERNEL)}

    def get(self, metric: str) -> float | None:
        """A metric's value, or None where this process did not measure it."""
        return self.metrics.get(metric)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        out: dict[str, Any] = {"case": self.case_id, "source": self.source, "metrics": dict(self.metrics)}
        if self.sm_clock_mhz is not None:
            out["sm_clock_mhz"] = self.sm_clock_mhz
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ProcessSummary:
        """Inverse of ``to_dict``; ValueError naming the field when it is malformed."""
        if not isinstance(data, Mapping) or not isinstance(data.get("case"), str):
            raise ValueError("a process summary needs an object with a 'case' id")
        metrics = data.get("metrics")
        if not isinstance(metrics, Mapping):
            raise ValueError(f"process summary of {data['case']}: 'metrics' is not an object")
        out: dict[str, float] = {}
        for name, value in metrics.items():
            if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"process summary of {data['case']}: metric {name!r} must be a finite number >= 0")
            what = f"process summary of {data['case']}: metric {name!r}"
            try:
                hint = metric(name).hint
            except KeyError:
                hint = ""  # a metric of a newer version: kept, unchecked
            if name == SPEEDUP:
                as_ratio(value, what)
            elif hint == DURATION:  # a step (busy, work, wall) or a part of one (host, a kernel)
                as_time(value, what, part=name == HOST or name.startswith(KERNEL))
            elif hint == SECONDS:  # a cold cost (a first call, a compile)
                as_time(value, what, part=True)
            out[name] = float(value)
        clock = data.get("sm_clock_mhz")
        if clock is not None and (isinstance(clock, bool) or not isinstance(clock, (int, float))
                                  or not math.isfinite(clock) or clock <= 0):
            raise ValueError(f"process summary of {data['case']}: 'sm_clock_mhz' must be a finite number > 0")
        return cls(str(data["case"]), str(data.get("source", source)), out,
                   None if clock is None else float(clock))


def summarize(record: Any, source: str) -> ProcessSummary:
    """The summary of one case record (a ``CaseRecord``) as measured in its process."""
    metrics: dict[str, float] = {}
    if record.cudnn is not None:
        metrics[WALL] = record.cudnn.median
        speedups = record.round_speedups
        if speedups:
            metrics[SPEEDUP] = float(np.median(speedups))
    dev = record.cudnn_device
    if dev is not None:
        metrics[BUSY] = dev.busy.median
        metrics[WORK] = dev.work.median
        if record.cudnn is not None and record.cudnn.median > dev.busy.median:
            metrics[HOST] = record.cudnn.median - dev.busy.median
        for name, ms in dev.kernel_ms().items():
            key = kernel_key(name)
            metrics[key] = metrics.get(key, 0.0) + ms / 1e3
    if record.host_probe_s is not None:
        metrics[PROBE] = record.host_probe_s
    # First calls and compile (model.cold). A process's first case of its framework pays more than its own cold
    # cost (what the warm-up does not reach): the history learns the others' only.
    if record.cold is not None and not record.cold.first:
        metrics.update(record.cold.metrics())
    return ProcessSummary(record.id, source, metrics, record.sm_clock_mhz)
