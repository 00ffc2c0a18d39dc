"""Typed results of a run and their stored layout: the only module that knows how a record is written.

A ``CaseRecord`` is everything measured for one case (cuDNN against generic, or generic against float64);
a ``CrossRecord`` is one checkpoint run in two frameworks. Both turn into plain JSON with ``to_dict`` and
back with ``from_dict``, which validates every field it reads and says in one line what is wrong.

A ``StoredRun`` is a stored file as read: its environment and records by case id. Reading files and migrating
older formats is the store's (``store/runs.py``, ``store/schema.py``); this module knows the current format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from pytest_rnnperf.model.fields import (RecordError, as_list, as_mapping, as_number, as_optional_mapping,
                                         as_optional_number, as_ratio, as_text, as_time, as_whole)
from pytest_rnnperf.model.results import PathProof
from pytest_rnnperf.model.cases import Case, ModelCase, Shape, Subject, cross_id
from pytest_rnnperf.model.cold import ColdCost
from pytest_rnnperf.model.flags import FlagKind, WindowFlag, is_unavailable, window_flags
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.metrics import KERNEL, side_tag
from pytest_rnnperf.model.peaks import peak_tflops
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.stats import Interval, speedup_interval
from pytest_rnnperf.model.timing import Measurement
from pytest_rnnperf.model.timing import DeviceTiming, KernelStat

# 1: the first layout. 2: each measurement names its timer; window flags are data ("flags"), other
# warnings are "notes"; the GPU-busy reading is derived from the telemetry, never read from a stored field.
# 3: per-round metrics by stable names ("metrics": {"cudnn/kernel/<name>": seconds per step per traced round});
# a stored run says whether it is a recorded baseline or a run kept for the history, and may carry the summaries
# of the extra processes it was recorded with (see ``model.process``).
# Optional fields added since ("checks", "cold") need no new format: a record without one reads as its default.
# 4: a kept run stores the process summaries of the cases it reported (regressed, not failed) under
# ``machine_info["rnnperf"]["reported"]``, their records still left out: their kernel mix teaches the history its
# modes. An older reader must refuse such a file rather than read a history that lacks them as complete.
FORMAT_VERSION = 4
# Far more samples than --rnnperf-rounds gives (at most 1000, twice when re-measured), far fewer than exhaust memory.
MAX_SAMPLES = 10_000


class BaselineError(Exception):
    """A stored file that cannot be used; the message is one line naming the file and the problem."""


# ------------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class CaseRecord:
    """Everything measured for one case: path proofs, parity, timings, telemetry, energy, window flags."""

    case: Subject
    device: str
    proofs: tuple[PathProof, ...]
    parity: ParityReport
    generic: Measurement
    cudnn: Measurement | None = None
    speedup: Interval | None = None  # median(generic) / median(cudnn) with its bootstrap interval
    telemetry: Mapping[str, Any] | None = None  # NVML over the timed rounds (both sides interleaved)
    side_telemetry: Mapping[str, Any] | None = None  # NVML over the energy window (the case's own side alone)
    energy_per_step_j: Mapping[str, float | None] = field(default_factory=dict)
    flags: tuple[WindowFlag, ...] = ()  # why the timed window is not trusted, as data
    notes: tuple[str, ...] = ()  # other one-line remarks (a rough energy figure, ...)
    gpu_name: str = ""
    # What the GPU did (CUPTI, in a traced window of its own); None when device time is off, and why.
    cudnn_device: DeviceTiming | None = None
    generic_device: DeviceTiming | None = None
    device_note: str = ""
    device_flags: tuple[WindowFlag, ...] = ()  # NVML flags of the traced window
    cost_s: Mapping[str, float] = field(default_factory=dict)  # seconds per phase (build, proof, parity, ...)
    # "full": parity against float64 (and energy where on); "sampled": the sides against each other only, on a
    # night whose environment matched the case's last full check (see store/rechecks.py).
    checks: str = "full"
    # Seconds of the host-speed probe (measure/host_speed.py) in the process that measured this record: the host's
    # own speed, which no release changes; None for records measured before it existed.
    host_probe_s: float | None = None
    # Seconds each side's first call after build and the compile took (None: a record from before they were measured).
    cold: ColdCost | None = None

    @property
    def id(self) -> str:
        """The case id: the key of this record in baselines and reports."""
        return self.case.id

    @property
    def paths_ok(self) -> bool:
        """Every side ran the implementation it claims."""
        return all(p.ok for p in self.proofs)

    @property
    def round_speedups(self) -> tuple[float, ...]:
        """Per-round generic/cuDNN ratios of the interleaved rounds (empty without a cuDNN side)."""
        if self.cudnn is None or len(self.cudnn.samples) != len(self.generic.samples):
            return ()
        return tuple(g / c for c, g in zip(self.cudnn.samples, self.generic.samples))

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every one-line warning of the case: the window flags, then the notes."""
        flags = self.flags + tuple(f for f in self.device_flags if f not in self.flags)
        return tuple(f.message for f in flags) + self.notes

    def device_timing(self, side: str) -> DeviceTiming | None:
        """The device timing of one side ("cudnn" or "generic"), if it was traced."""
        return self.cudnn_device if side == "cudnn" else self.generic_device

    def host_overhead_s(self, side: str) -> float | None:
        """Wall minus device time per step of one side: dispatch, launches and host work the GPU waited for."""
        wall, dev = getattr(self, side), self.device_timing(side)
        return None if wall is None or dev is None else wall.median - dev.busy.median

    @property
    def device_speedup(self) -> float | None:
        """Generic over cuDNN device time: how much less work the GPU did on cuDNN (None without both)."""
        if self.cudnn_device is None or self.generic_device is None:
            return None
        return self.generic_device.busy.median / self.cudnn_device.busy.median

    def tflops(self, impl: str) -> float | None:
        """Achieved GEMM TFLOP/s of one side on its device time (wall time where that is off); None if unknown."""
        dev = self.device_timing(impl)
        m = dev.busy if dev is not None else (self.cudnn if impl == "cudnn" else self.generic)
        flops = self.case.flops_per_step()
        if m is None or m.median <= 0 or flops is None:
            return None
        return flops / m.median / 1e12

    def pooled_with(self, again: CaseRecord) -> CaseRecord:
        """This record with the timed rounds of ``again`` (the same pair timed once more) added to its own.

        The samples of both windows are pooled, so a case left ambiguous by one window is decided on twice
        the rounds; either window's flags hold for the pooled record. Proofs, parity, energy and the kernel
        tables stay those of the first window.
        """
        def pool(a: Measurement | None, b: Measurement | None) -> Measurement | None:
            """Both windows' samples, or the first's alone where the second has none."""
            if a is None or b is None:
                return a
            return Measurement(a.name, a.samples + b.samples, a.steps_per_block, timer=a.timer)

        def pool_device(a: DeviceTiming | None, b: DeviceTiming | None) -> DeviceTiming | None:
            """Busy and kernel-time samples of both traced windows; table and launches of the first."""
            if a is None or b is None:
                return a
            rounds = {name: v + b.kernel_rounds.get(name, (0.0,) * len(b.busy.samples)) for name, v in a.kernel_rounds.items()}
            return replace(a, busy=pool(a.busy, b.busy), work=pool(a.work, b.work),  # type: ignore[arg-type]
                           kernel_rounds=rounds)

        cudnn, generic = pool(self.cudnn, again.cudnn), pool(self.generic, again.generic)
        assert generic is not None
        speedup = self.speedup
        if cudnn is not None and self.speedup is not None and again.speedup is not None:
            speedup = speedup_interval(cudnn.samples, generic.samples, paired=True)
        cost = dict(self.cost_s)
        cost["remeasure"] = sum(again.cost_s.get(k, 0.0) for k in ("wall", "energy", "device"))
        return replace(self, cudnn=cudnn, generic=generic, speedup=speedup,
                       flags=tuple(dict.fromkeys(self.flags + again.flags)),
                       device_flags=tuple(dict.fromkeys(self.device_flags + again.device_flags)),
                       cudnn_device=pool_device(self.cudnn_device, again.cudnn_device),
                       generic_device=pool_device(self.generic_device, again.generic_device),
                       notes=tuple(dict.fromkeys(self.notes + again.notes)), cost_s=cost)

    @property
    def peak_tflops(self) -> float | None:
        """Datasheet peak of this GPU for the case's precision (None off-GPU or unknown)."""
        return peak_tflops(self.gpu_name, self.case.precision) if self.gpu_name else None

    @property
    def sm_clock_mhz(self) -> float | None:
        """The mean SM clock NVML read over the timed rounds, in MHz; None where unread (no GPU, an older record)."""
        clock = (self.telemetry or {}).get("mean_sm_clock_mhz")
        if isinstance(clock, bool) or not isinstance(clock, (int, float)):  # "unavailable: <why>" where unread
            return None
        return float(clock) if math.isfinite(clock) and clock > 0 else None

    @property
    def gpu_busy(self) -> float | None:
        """Fraction of time the GPU ran a kernel over the timed rounds (NVML utilization), None if unread.

        The paired window (both sides interleaved) is the reading the host-bound rule was calibrated on;
        the energy window of the case's own side is the fallback for a record without it.
        """
        for window in (self.telemetry, self.side_telemetry):
            util = (window or {}).get("utilization")
            mean = util.get("mean") if isinstance(util, Mapping) else None
            if isinstance(mean, (int, float)) and not isinstance(mean, bool):
                return float(mean) / 100.0
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the stored fields plus derived ones (medians, TFLOP/s, GPU busy) for readers of the file."""
        flops = self.case.flops_per_step()
        return {
            "case": case_to_dict(self.case),
            "device": self.device,
            "gpu_name": self.gpu_name,
            "paths": [_proof_to_dict(p) for p in self.proofs],
            "parity": _parity_to_dict(self.parity),
            "cudnn": None if self.cudnn is None else _measurement_to_dict(self.cudnn),
            "generic": _measurement_to_dict(self.generic),
            "speedup": None if self.speedup is None else {
                "estimate": self.speedup.estimate, "low": self.speedup.low, "high": self.speedup.high,
                "confidence": self.speedup.confidence, "floor": self.case.floor,
            },
            "round_speedups": list(self.round_speedups),
            "tflops": {"cudnn": self.tflops("cudnn"), "generic": self.tflops("generic"), "peak": self.peak_tflops},
            "flops_per_step": flops,
            "energy_per_step_j": dict(self.energy_per_step_j),
            "telemetry": None if self.telemetry is None else dict(self.telemetry),
            "side_telemetry": None if self.side_telemetry is None else dict(self.side_telemetry),
            "gpu_busy": self.gpu_busy,
            "flags": [flag_to_dict(f) for f in self.flags],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "cudnn_device": None if self.cudnn_device is None else _device_to_dict(self.cudnn_device),
            "generic_device": None if self.generic_device is None else _device_to_dict(self.generic_device),
            "device_note": self.device_note,
            "device_flags": [flag_to_dict(f) for f in self.device_flags],
            "host_overhead_s": {side: self.host_overhead_s(side) for side in ("cudnn", "generic")},
            "device_speedup": self.device_speedup,
            "cost_s": dict(self.cost_s),
            "checks": self.checks,
            "host_probe_s": self.host_probe_s,
            "cold": None if self.cold is None else self.cold.to_dict(),
            "metrics": self.metrics(),
        }

    def metrics(self) -> dict[str, list[float]]:
        """Per-round samples by side and tag (``model.metrics``): ``<side>/kernel/<name>`` in seconds per step, one per
        traced round."""
        out: dict[str, list[float]] = {}
        for side in ("cudnn", "generic"):
            dev = self.device_timing(side)
            if dev is not None:
                out.update({side_tag(side, KERNEL + name): list(v) for name, v in dev.kernel_rounds.items()})
        return out

    @classmethod
    def from_dict(cls, data: Any) -> CaseRecord:
        """Read a record of the current format (store/schema.py migrates older ones); RecordError says what is wrong."""
        d = as_mapping(data, "record")
        case = _case_from_dict(d.get("case"))
        try:
            generic = _measurement_from_dict(d.get("generic"), "generic")
            cudnn = None if d.get("cudnn") is None else _measurement_from_dict(d["cudnn"], "cudnn")
            return cls(
                case=case,
                device=as_text(d.get("device", ""), "device"),
                gpu_name=as_text(d.get("gpu_name", ""), "gpu_name"),
                proofs=tuple(_proof_from_dict(p) for p in as_list(d.get("paths", []), "paths")),
                parity=_parity_from_dict(d.get("parity")),
                generic=generic,
                cudnn=cudnn,
                speedup=None if d.get("speedup") is None else _interval_from_dict(d["speedup"], "speedup"),
                telemetry=as_optional_mapping(d.get("telemetry"), "telemetry"),
                side_telemetry=as_optional_mapping(d.get("side_telemetry"), "side_telemetry"),
                energy_per_step_j={str(k): as_optional_number(v, f"energy_per_step_j.{k}") for k, v in
                                   as_mapping(d.get("energy_per_step_j", {}), "energy_per_step_j").items()},
                flags=tuple(_flag_from_dict(f) for f in as_list(d.get("flags", []), "flags")),
                notes=tuple(as_text(n, "notes") for n in as_list(d.get("notes", []), "notes")),
                cudnn_device=_device_from_dict(d.get("cudnn_device"), "cudnn"),
                generic_device=_device_from_dict(d.get("generic_device"), "generic"),
                device_note=as_text(d.get("device_note", ""), "device_note"),
                device_flags=tuple(_flag_from_dict(f) for f in as_list(d.get("device_flags", []), "device_flags")),
                cost_s={str(k): as_number(v, f"cost_s.{k}") for k, v in as_mapping(d.get("cost_s", {}), "cost_s").items()},
                checks=_checks_from(d.get("checks", "full")),
                host_probe_s=None if d.get("host_probe_s") is None else as_time(d["host_probe_s"], "host_probe_s"),
                cold=ColdCost.from_dict(d.get("cold")),
            )._with_metrics(_metrics_from_dict(d.get("metrics", {})))
        except RecordError as exc:
            raise RecordError(f"case {case.id}: {exc}") from None


    def _with_metrics(self, metrics: Mapping[str, tuple[float, ...]]) -> CaseRecord:
        """This record with the stored per-round kernel samples put back on each side's device timing."""
        out = self
        for side in ("cudnn", "generic"):
            dev = self.device_timing(side)
            prefix = side_tag(side, KERNEL)
            rounds = {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}
            if dev is not None and rounds:
                timed = replace(dev, kernel_rounds=rounds)
                out = replace(out, cudnn_device=timed) if side == "cudnn" else replace(out, generic_device=timed)
        return out


def _metrics_from_dict(data: Any) -> dict[str, tuple[float, ...]]:
    """Stored metrics: side and tag (model.metrics) -> samples, each a finite number >= 0 (at most 100,000 of them)."""
    out = {}
    for name, values in as_mapping(data, "metrics").items():
        samples = as_list(values, f"metrics.{name}")
        if len(samples) > 100_000:
            raise RecordError(f"metrics.{name} holds {len(samples)} samples, more than any run takes")
        numbers = tuple(as_number(v, f"metrics.{name}") for v in samples)
        if any(v < 0 for v in numbers):
            raise RecordError(f"metrics.{name} holds a negative time")
        for v in numbers:
            as_time(v, f"metrics.{name}", part=True)
        out[str(name)] = numbers
    return out


@dataclass(frozen=True)
class CrossRecord:
    """The same canonical weights and inputs run in two frameworks: which path each ran and how close they came."""

    case: Case
    frameworks: tuple[str, str]  # e.g. ("torch", "tf"); the second is the comparison's reference
    sides: tuple[str, str]  # e.g. ("torch cudnn", "tf generic")
    proofs: tuple[PathProof, ...]
    parity: ParityReport

    @property
    def id(self) -> str:
        """Stable id, e.g. ``torch-vs-tf-lstm-train-fp32-T28-B128-I28-H128-L1``."""
        return cross_id(self.case, self.frameworks[1])

    @property
    def paths_ok(self) -> bool:
        """Every side ran the implementation it claims."""
        return all(p.ok for p in self.proofs)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: case, frameworks, sides, path proofs and parity rows."""
        return {"id": self.id, "case": case_to_dict(self.case), "frameworks": list(self.frameworks),
                "sides": list(self.sides), "paths": [_proof_to_dict(p) for p in self.proofs],
                "parity": _parity_to_dict(self.parity)}

    @classmethod
    def from_dict(cls, data: Any) -> CrossRecord:
        """Inverse of ``to_dict``; RecordError says what is wrong."""
        d = as_mapping(data, "cross record")
        case = _case_from_dict(d.get("case"))
        if not isinstance(case, Case):
            raise RecordError("a cross record's case must be a matrix case")
        frameworks = tuple(as_text(f, "frameworks") for f in as_list(d.get("frameworks"), "frameworks"))
        sides = tuple(as_text(s, "sides") for s in as_list(d.get("sides"), "sides"))
        if len(frameworks) != 2 or len(sides) != 2:
            raise RecordError(f"cross record {case.id}: frameworks and sides need two entries each")
        return cls(case=case, frameworks=(frameworks[0], frameworks[1]), sides=(sides[0], sides[1]),
                   proofs=tuple(_proof_from_dict(p) for p in as_list(d.get("paths"), "paths")),
                   parity=_parity_from_dict(d.get("parity")))


# -------------------------------------------------------------------------------------- nested layouts


def case_to_dict(case: Subject) -> dict[str, Any]:
    """A case as stored: its fields and its id."""
    if isinstance(case, ModelCase):
        return {"kind": "model", "id": case.id, "framework": case.framework, "mode": case.mode,
                "precision": case.precision, "floor": case.floor, "description": case.description}
    s = case.shape
    return {"framework": case.framework, "cell": case.cell,
            "shape": {"seq_len": s.seq_len, "batch": s.batch, "input_size": s.input_size,
                      "hidden_size": s.hidden_size, "num_layers": s.num_layers, "bidirectional": s.bidirectional},
            "mode": case.mode, "precision": case.precision, "floor": case.floor, "id": case.id}


def _case_from_dict(data: Any) -> Subject:
    """A stored case; a matrix case's id must match its fields (a hand-edited id would key the wrong case)."""
    d = as_mapping(data, "case")
    try:
        if d.get("kind") == "model":
            return ModelCase(id=as_text(d.get("id"), "case.id"), framework=as_text(d.get("framework"), "case.framework"),
                             mode=as_text(d.get("mode"), "case.mode"), precision=as_text(d.get("precision"), "case.precision"),
                             floor=as_number(d.get("floor"), "case.floor"),
                             description=as_text(d.get("description", ""), "case.description"))
        sd = as_mapping(d.get("shape"), "case.shape")
        sizes = {k: as_whole(sd.get(k), f"case.shape.{k}")
                 for k in ("seq_len", "batch", "input_size", "hidden_size", "num_layers")}
        shape = Shape(**sizes, bidirectional=bool(sd.get("bidirectional", False)))
        case = Case(framework=as_text(d.get("framework"), "case.framework"), cell=as_text(d.get("cell"), "case.cell"),
                    shape=shape, mode=as_text(d.get("mode"), "case.mode"),
                    precision=as_text(d.get("precision"), "case.precision"), floor=as_number(d.get("floor"), "case.floor"))
    except ValueError as exc:  # Case/ModelCase reject unknown vocabulary with a ValueError of their own
        raise RecordError(str(exc)) from None
    if d.get("id", case.id) != case.id:
        raise RecordError(f"case id {d.get('id')!r} does not match its fields ({case.id})")
    return case


def _measurement_to_dict(m: Measurement) -> dict[str, Any]:
    """A measurement as stored, raw samples included."""
    return {"name": m.name, "timer": m.timer, "median_s": m.median, "iqr_s": m.iqr,
            "steps_per_block": m.steps_per_block, "samples_s": list(m.samples)}


def _measurement_from_dict(data: Any, side: str) -> Measurement:
    """A stored measurement: at least one sample, every sample a finite positive number of seconds."""
    d = as_mapping(data, side)
    samples = as_list(d.get("samples_s"), f"{side} samples_s")
    if not samples:
        raise RecordError(f"{side} samples_s is empty")
    if len(samples) > MAX_SAMPLES:  # the bootstrap resamples every sample 2000 times: this bounds its memory
        raise RecordError(f"{side} samples_s holds {len(samples)} samples: at most {MAX_SAMPLES} (hand-made?)")
    values = tuple(as_number(v, f"{side} samples_s") for v in samples)
    bad = [v for v in values if v <= 0]
    if bad:
        raise RecordError(f"{side} samples_s holds {bad[0]!r}: times must be > 0 s")
    for v in values:
        as_time(v, f"{side} samples_s")
    steps = as_whole(d.get("steps_per_block", 1), f"{side} steps_per_block")
    if steps < 1:
        raise RecordError(f"{side} steps_per_block is {steps}: must be >= 1")
    return Measurement(name=as_text(d.get("name", side), f"{side} name"), samples=values, steps_per_block=steps,
                       timer=as_text(d.get("timer"), f"{side} timer"))


def _proof_to_dict(p: PathProof) -> dict[str, Any]:
    """A path proof as stored."""
    return {"impl": p.impl, "ok": p.ok, "evidence": p.evidence}


def _proof_from_dict(data: Any) -> PathProof:
    """A stored path proof."""
    d = as_mapping(data, "paths[]")
    return PathProof(impl=as_text(d.get("impl"), "paths[].impl"), ok=bool(d.get("ok")),
                     evidence=as_text(d.get("evidence", ""), "paths[].evidence"))


def _parity_to_dict(report: ParityReport) -> dict[str, Any]:
    """A parity report as stored (an infinite error is written as "inf" so the JSON stays strict)."""
    return {"precision": report.precision, "ok": report.ok,
            "rows": [{"comparison": r.comparison, "quantity": r.quantity,
                      "error": r.error if math.isfinite(r.error) else "inf", "tolerance": r.tolerance,
                      "ok": r.ok, "note": r.note} for r in report.rows]}


CHECKS = ("full", "sampled")


def _checks_from(value: Any) -> str:
    """A record's ``checks`` (records written before it were all "full"); RecordError for anything else."""
    text = as_text(value, "checks")
    if text not in CHECKS:
        raise RecordError(f"checks is {text!r}, not one of {', '.join(CHECKS)}")
    return text


def _parity_from_dict(data: Any) -> ParityReport:
    """A stored parity report."""
    d = as_mapping(data, "parity")
    rows = []
    for row in as_list(d.get("rows", []), "parity.rows"):
        r = as_mapping(row, "parity.rows[]")
        error = math.inf if r.get("error") in ("inf", "Infinity") else as_number(r.get("error"), "parity error",
                                                                                  finite=False)
        rows.append(ParityRow(comparison=as_text(r.get("comparison"), "parity comparison"),
                              quantity=as_text(r.get("quantity"), "parity quantity"), error=error,
                              tolerance=as_number(r.get("tolerance"), "parity tolerance"),
                              note=as_text(r.get("note", ""), "parity note")))
    return ParityReport(precision=as_text(d.get("precision"), "parity.precision"), rows=tuple(rows))


def _interval_from_dict(data: Any, what: str) -> Interval:
    """A stored interval of a ratio (the speedup): plausible ratios with low <= estimate <= high."""
    d = as_mapping(data, what)
    iv = Interval(estimate=as_ratio(d.get("estimate"), f"{what}.estimate"), low=as_ratio(d.get("low"), f"{what}.low"),
                  high=as_ratio(d.get("high"), f"{what}.high"),
                  confidence=as_number(d.get("confidence", 0.95), f"{what}.confidence"))
    if not iv.low <= iv.estimate <= iv.high:
        raise RecordError(f"{what}: estimate {iv.estimate!r} is not within [{iv.low!r}, {iv.high!r}]")
    return iv


def flag_to_dict(flag: WindowFlag) -> dict[str, str]:
    """A window flag as stored."""
    return {"kind": flag.kind.value, "message": flag.message}


def _device_to_dict(dev: DeviceTiming) -> dict[str, Any]:
    """A side's device timing as stored: busy samples, kernel time, launches, the kernel table."""
    return {"busy": _measurement_to_dict(dev.busy), "work": _measurement_to_dict(dev.work),
            "launches_per_step": dev.launches_per_step, "clock_scale": dev.clock_scale,
            "kernels": [{"name": k.name, "ms_per_step": k.ms_per_step, "launches_per_step": k.launches_per_step}
                        for k in dev.kernels]}


def _device_from_dict(data: Any, side: str) -> DeviceTiming | None:
    """A stored device timing (or null)."""
    if data is None:
        return None
    d = as_mapping(data, f"{side}_device")
    kernels = []
    for row in as_list(d.get("kernels", []), f"{side}_device.kernels"):
        k = as_mapping(row, f"{side}_device.kernels[]")
        kernels.append(KernelStat(as_text(k.get("name"), "kernel name"),
                                  as_time(k.get("ms_per_step"), f"{side}_device.kernels[].ms_per_step", True, "ms"),
                                  as_number(k.get("launches_per_step"), "launches_per_step")))
    return DeviceTiming(busy=_measurement_from_dict(d.get("busy"), f"{side} device"),
                        work=_measurement_from_dict(d.get("work"), f"{side} device work"),
                        launches_per_step=as_number(d.get("launches_per_step"), f"{side}_device.launches_per_step"),
                        kernels=tuple(kernels), clock_scale=as_number(d.get("clock_scale", 1.0), "clock_scale"))


def _flag_from_dict(data: Any) -> WindowFlag:
    """A stored window flag."""
    d = as_mapping(data, "flags[]")
    try:
        kind = FlagKind(d.get("kind"))
    except ValueError:
        raise RecordError(f"flags[].kind {d.get('kind')!r} is not one of "
                          f"{', '.join(k.value for k in FlagKind)}") from None
    return WindowFlag(kind, as_text(d.get("message", ""), "flags[].message"))


# ------------------------------------------------------------------------------------------ migrations


def flags_from_telemetry(telemetry: Mapping[str, Any] | None) -> tuple[WindowFlag, ...]:
    """The flags a stored telemetry dict implies (unreadable counters hold 'unavailable: ...' strings)."""
    if not isinstance(telemetry, Mapping):
        return ()
    throttle = telemetry.get("throttle_s")
    reasons = telemetry.get("throttle_reasons")
    foreign = telemetry.get("foreign_processes")
    duration = telemetry.get("duration_s")
    return window_flags(
        float(duration) if isinstance(duration, (int, float)) else 0.0,
        throttle if isinstance(throttle, Mapping) else {},
        [r for r in reasons if isinstance(r, str)] if isinstance(reasons, list) else [],
        [p for p in foreign if isinstance(p, str) and not is_unavailable(p)] if isinstance(foreign, list) else [],
    )


# ---------------------------------------------------------------------------------------- stored runs


# What a stored file is: a recorded baseline (a case's history starts at the newest one holding it) or a
# nightly run kept for the history (--rnnperf-keep-run).
BASELINE, KEPT = "baseline", "kept"
CARD = "gpu.uuid"  # the environment field naming the physical card: another of the same model is no new stack


@dataclass(frozen=True)
class StoredRun:
    """A validated stored run: where it came from, its environment and the records keyed by case id."""

    path: Path
    gpu_slug: str
    environment: dict[str, str]
    records: dict[str, CaseRecord]
    datetime: str = ""
    format: int = FORMAT_VERSION  # the format the file was written in (records are migrated on reading)
    kind: str = BASELINE  # BASELINE: a recorded baseline (a history starts there); KEPT: a run kept for the history
    # Case id -> the summaries of the extra processes this file was recorded with (--rnnperf-record-processes).
    processes: Mapping[str, tuple[ProcessSummary, ...]] = field(default_factory=dict)
    # The tests this run measured and passed whose answer the environment alone decides (claims, cross-framework and
    # reference parity), and those that failed as marked (known issues), by name, for store.rechecks.
    claims: tuple[str, ...] = ()
    # Test name -> its seconds in this run, for the claims and parity tests of ``claims`` that were timed and the
    # tests that failed as marked (xfail), which store no record.
    check_costs: Mapping[str, float] = field(default_factory=dict)
    # Case id -> the nights running its regression showed on, for the cases this kept run left out as suspect
    # (``confirm_nights``): what the next night reads to tell a first violation from a repeated one.
    suspects: Mapping[str, int] = field(default_factory=dict)
    # Case id -> the summary of a case this kept run reported (regressed, not failed); its record is not stored.
    reported: Mapping[str, ProcessSummary] = field(default_factory=dict)
    # Seconds this run spent outside its cases' phases and its claims and parity tests (collecting, starting, each
    # test's setup and code), and how many cases it measured: what a budget's forecast adds per case (None: the file has none).
    outside: tuple[float, int] | None = None
    # Case id -> the UUID of the GPU its own process ran on, where the file's processes ran on several (pytest-xdist
    # workers: each case on its worker's card), and every card the file's processes ran on, its environment's first.
    cards: Mapping[str, str] = field(default_factory=dict)
    all_cards: tuple[str, ...] = ()
    # Case id -> its summaries, made once: a night reads each stored file's summaries in every case's history and
    # forecast. Not a field of ``replace`` (init=False): a changed copy summarizes afresh.
    _summaries: dict[str, list[ProcessSummary]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def summaries(self, case_id: str) -> list[ProcessSummary]:
        """Every process of this file that measured ``case_id``: the run's own, then the extra ones (or its report)."""
        if case_id not in self._summaries:
            self._summaries[case_id] = self._summarized(case_id)
        return list(self._summaries[case_id])

    def card_of(self, case_id: str) -> str | None:
        """The GPU ``case_id``'s own process in this file ran on; None where the file's processes ran on several
        cards and it does not say which (a pytest-xdist run stored before it did)."""
        if case_id in self.cards:
            return self.cards[case_id]
        cards = self._cards()
        return cards[0] if len(cards) == 1 else None

    def ran_on(self, card: str) -> bool:
        """Whether any process of this file ran on ``card`` (a worker's line names a UUID's first 12 characters)."""
        return bool(card) and any(card.startswith(known) or known.startswith(card) for known in self._cards())

    def _cards(self) -> tuple[str, ...]:
        """``all_cards``; for a run made in code rather than read (no ``all_cards``), its environment's card."""
        return self.all_cards or tuple(c for c in (self.environment.get(CARD),) if c)

    def _summarized(self, case_id: str) -> list[ProcessSummary]:
        """``summaries``' work, done once per case."""
        if case_id in self.reported:
            return [replace(self.reported[case_id], source=self.path.name, reported=True)]
        if case_id not in self.records:
            return []
        return [summarize(self.records[case_id], self.path.name), *self.processes.get(case_id, ())]


