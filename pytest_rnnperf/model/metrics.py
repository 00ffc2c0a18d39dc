"""The one metric vocabulary: every measured quantity a record stores or a report shows, by tag.

NVBench's summaries are the model: each metric has a tag (its stored key), a name (how a table or a verdict names
it), a unit (of the stored value) and a display hint (how a value is shown). Renderers format a value by its
hint (``show``) instead of each spelling its own scale and unit, and a new metric is one row of ``METRICS``.

Stored keys stay as they were written: a process summary keys its medians by tag (``busy``, ``kernel/<name>``),
a record keys its per-round kernel samples by side and tag (``cudnn/kernel/<name>``), and ``RECORD_FIELDS``
maps each measured field of a stored record to its tag. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# ---------------------------------------------------------------------------------------------------- hints


@dataclass(frozen=True)
class Hint:
    """How a value is shown: scaled from its stored unit, formatted, and the unit it is shown in."""

    unit: str  # as shown, e.g. "ms"
    scale: float  # stored value -> shown value
    spec: str  # the default format of the shown number
    fine: str  # the format where two close values are set side by side (a comparison's baseline and now)
    suffix: str = ""  # written right after every number (a ratio's "x"); other units go in headers or on request


DURATION, RATIO, PERCENT, ENERGY, RATE, ERROR, COUNT, SECONDS = (
    "duration", "ratio", "percent", "energy", "rate", "error", "count", "seconds")
HINTS: Mapping[str, Hint] = {
    DURATION: Hint("ms", 1e3, ".3f", ".4f"),  # a time per step, stored in seconds
    RATIO: Hint("x", 1.0, ".2f", ".2f", "x"),
    PERCENT: Hint("", 1.0, ".1%", ".2%"),  # a fraction, shown as a percentage (the number carries its "%")
    ENERGY: Hint("J", 1.0, ".3g", ".4g"),
    RATE: Hint("TFLOP/s", 1.0, ".2f", ".3f"),
    ERROR: Hint("", 1.0, ".1e", ".2e"),  # a relative error against its tolerance
    COUNT: Hint("", 1.0, ".1f", ".2f"),
    SECONDS: Hint("s", 1.0, ".1f", ".3f"),  # how long a phase of the run took
}
MS = HINTS[DURATION].unit  # how a time per step is shown, in headers and options

# ------------------------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    """One measured quantity: its tag, its name, its stored unit, its display hint and which way is better."""

    tag: str
    name: str  # how a table, a verdict or a comparison names it
    label: str  # a longer description, for titles and help
    unit: str  # of the stored value
    hint: str  # a key of HINTS
    higher_is_better: bool = False
    family: bool = False  # the tag is a prefix: "kernel/" + the kernel's name

    @property
    def display(self) -> Hint:
        """The hint's scale, format and shown unit."""
        return HINTS[self.hint]

    def show(self, value: float | None, spec: str = "", unit: bool = False, fine: bool = False) -> str:
        """``value`` (in the stored unit) as shown: '-' for None; ``unit`` adds the shown unit after it; ``fine``
        takes the hint's finer format (``spec``, where given, overrides both)."""
        if value is None:
            return "-"
        h = self.display
        text = format(value * h.scale, spec or (h.fine if fine else h.spec)) + h.suffix
        return f"{text} {h.unit}" if unit and h.unit and not h.suffix else text

    def interval(self, estimate: float, low: float, high: float, spec: str = "") -> str:
        """An estimate with its interval, e.g. "2.50x [2.40, 2.61]"."""
        h = self.display
        bound = spec or h.spec
        return f"{self.show(estimate, spec)} [{format(low * h.scale, bound)}, {format(high * h.scale, bound)}]"


WALL, BUSY, WORK, HOST, KERNEL, PROBE = "wall", "busy", "work", "host", "kernel/", "host_probe"
# Judged, never stored: the geometric mean of busy and work, per round (``judge.rules.BalancedTime``), and their
# ratio, how many kernels ran at once (``judge.rules.KernelOverlap``).
BALANCED, OVERLAP, STEADY = "balanced", "overlap", "steady"
SPEEDUP, WALL_SPEEDUP, DEVICE_SPEEDUP, FLOOR = "speedup", "wall_speedup", "device_speedup", "floor"
TFLOPS, ENERGY_PER_STEP, GPU_BUSY, PARITY, LAUNCHES, COST = (
    "tflops", "energy_per_step_j", "gpu_busy", "parity", "launches_per_step", "cost_s")
# Cold costs (``model.cold``): a side's first call after build, the compile; a compile-cache hit has tags of its own.
FIRST_CALL, COMPILE, FIRST_CALL_CACHED, COMPILE_CACHED = "first_call", "compile", "first_call_cached", "compile_cached"

METRICS: Mapping[str, Metric] = {m.tag: m for m in (
    Metric(WALL, "cudnn time", "cuDNN wall time per step", "s", DURATION),
    Metric(BUSY, "cudnn device time", "cuDNN device time per step", "s", DURATION),
    Metric(WORK, "cudnn kernel time", "cuDNN summed kernel time per step", "s", DURATION),
    Metric(BALANCED, "cudnn balanced time", "cuDNN device time with its overlap balanced out: the geometric mean of "
           "busy and summed kernel time per step", "s", DURATION),
    Metric(STEADY, "cudnn steady time", "the summed time per step of the cuDNN side's kernels that ran within 1% "
           "in every stored process (a kernel at two speeds left out)", "s", DURATION),
    Metric(OVERLAP, "cudnn kernel overlap", "how many of the cuDNN side's kernels ran at once: summed kernel time over "
           "busy time per step", "x", RATIO, higher_is_better=True),
    Metric(HOST, "cudnn host overhead", "cuDNN host overhead per step (wall minus device time)", "s", DURATION),
    Metric(KERNEL, "kernel", "one kernel's time per step", "s", DURATION, family=True),
    # Not a time per step: a fixed CPU workload timed once per process, the host's own speed (measure/host_speed.py).
    Metric(PROBE, "host probe", "seconds of a fixed CPU workload in the measuring process", "s", DURATION),
    # The judged speedup: each interleaved round's generic over cuDNN wall time, their median.
    Metric(SPEEDUP, "speedup", "speedup, median of rounds", "x", RATIO, higher_is_better=True),
    # The reported one: the median generic over the median cuDNN wall time, with its bootstrap interval.
    Metric(WALL_SPEEDUP, "speedup wall", "speedup (generic / cuDNN wall time)", "x", RATIO, higher_is_better=True),
    Metric(DEVICE_SPEEDUP, "dev", "speedup, device time (generic / cuDNN device time)", "x", RATIO,
           higher_is_better=True),
    Metric(FLOOR, "floor", "the speedup a case promises at least", "x", RATIO, higher_is_better=True),
    Metric(TFLOPS, "TFLOP/s", "achieved GEMM TFLOP/s", "TFLOP/s", RATE, higher_is_better=True),
    Metric(ENERGY_PER_STEP, "J/step", "energy per step", "J", ENERGY),
    Metric(GPU_BUSY, "GPU busy", "fraction of the timed rounds the GPU ran a kernel (NVML)", "1", PERCENT,
           higher_is_better=True),
    Metric(PARITY, "parity err/tol", "worst parity error against its tolerance", "1", ERROR),
    Metric(LAUNCHES, "launches/step", "kernel launches per step", "1", COUNT),
    Metric(COST, "seconds", "seconds a phase of the case took", "s", SECONDS),
    Metric(FIRST_CALL, "first call", "a side's first call after build (plan building, autotuning, compiling)", "s",
           SECONDS),
    Metric(COMPILE, "compile time", "seconds the compiled side took to compile (torch.compile, XLA)", "s", SECONDS),
    Metric(FIRST_CALL_CACHED, "first call (cache hit)", "a side's first call after a build the compile cache served",
           "s", SECONDS),
    Metric(COMPILE_CACHED, "compile time (cache hit)", "seconds the compiled side took to load from the compile "
           "cache", "s", SECONDS),
)}

SIDES = ("cudnn", "generic")

# Each measured field of a stored record (``CaseRecord.to_dict``; ``<side>`` stands for each side) -> its tag.
RECORD_FIELDS: Mapping[str, str] = {
    "<side>.median_s": WALL, "<side>.iqr_s": WALL, "<side>.samples_s": WALL,
    "<side>_device.busy.median_s": BUSY, "<side>_device.busy.iqr_s": BUSY, "<side>_device.busy.samples_s": BUSY,
    "<side>_device.work.median_s": WORK, "<side>_device.work.iqr_s": WORK, "<side>_device.work.samples_s": WORK,
    "<side>_device.kernels.ms_per_step": KERNEL,  # stored in ms (the kernel table's own unit)
    "<side>_device.kernels.launches_per_step": LAUNCHES, "<side>_device.launches_per_step": LAUNCHES,
    "host_overhead_s.<side>": HOST, "tflops.<side>": TFLOPS, "tflops.peak": TFLOPS,
    "energy_per_step_j.<side>": ENERGY_PER_STEP,
    "speedup.estimate": WALL_SPEEDUP, "speedup.low": WALL_SPEEDUP, "speedup.high": WALL_SPEEDUP, "speedup.floor": FLOOR,
    "round_speedups": SPEEDUP, "device_speedup": DEVICE_SPEEDUP, "gpu_busy": GPU_BUSY,
    "parity.rows.error": PARITY, "parity.rows.tolerance": PARITY, "cost_s.*": COST,
    "metrics.<side>/kernel/*": KERNEL, "case.floor": FLOOR, "host_probe_s": PROBE,
    "cold.first_call_s.<side>": FIRST_CALL, "cold.compile_s": COMPILE,
}
# The numbers of a stored record that are no measurement: the case's sizes, settings of a measurement, and NVML's
# readings, kept as NVML names them (a page lists them field by field, never as a metric).
NOT_MEASURED = frozenset({
    "case.shape.*", "speedup.confidence", "flops_per_step", "<side>.steps_per_block",
    "<side>_device.busy.steps_per_block", "<side>_device.work.steps_per_block", "<side>_device.clock_scale",
    "telemetry.*", "side_telemetry.*",
})


def metric(tag: str) -> Metric:
    """The table's entry of ``tag``: exact, a family's member ("kernel/<name>"), or side-qualified
    ("cudnn/kernel/<name>"); KeyError naming the tag where it is none of them."""
    for side in SIDES:
        if tag.startswith(side + "/"):
            tag = tag[len(side) + 1:]
            break
    if tag in METRICS:
        return METRICS[tag]
    family = next((m for m in METRICS.values() if m.family and tag.startswith(m.tag)), None)
    if family is None:
        raise KeyError(f"metric {tag!r} is not in the metric table (pytest_rnnperf/model/metrics.py)")
    return family


def named(name: str) -> Metric:
    """The entry a comparison or a table names ``name`` (a kernel by "kernel/<name>", a side's metric by "<side>
    <name>", e.g. "generic first call"); KeyError if none."""
    bare = next((name[len(side) + 1:] for side in SIDES if name.startswith(side + " ")), name)
    found = [m for m in METRICS.values() if m.name == name] or [m for m in METRICS.values() if m.name == bare]
    return found[0] if found else metric(name)


def from_ms(ms: float) -> float:
    """Milliseconds (a kernel table's ``ms_per_step``, ``--min-step-ms``) in the stored unit of a time (seconds)."""
    return ms / HINTS[DURATION].scale


def side_tag(side: str, tag: str) -> str:
    """A side's stored key of a metric, e.g. "cudnn/kernel/<name>"."""
    return f"{side}/{tag}"


def show(tag: str, value: float | None, spec: str = "", unit: bool = False, fine: bool = False) -> str:
    """``value`` of the metric ``tag`` as shown by its hint ('-' for None)."""
    return metric(tag).show(value, spec, unit, fine)


def numeric_paths(record: Mapping[str, Any]) -> set[str]:
    """Every path of a numeric leaf in a stored record's JSON, sides and names written as in ``RECORD_FIELDS``."""
    return {_generic_path(p) for p in _numeric_paths(record)}


def _numeric_paths(value: Any, prefix: str = "") -> list[str]:
    """Paths of every number under ``value`` (lists are walked without an index)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [prefix]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _numeric_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _numeric_paths(v, prefix)]
    return []


def _generic_path(path: str) -> str:
    """A path with its side written ``<side>`` and the free part of a keyed field (a kernel, a phase) ``*``."""
    for side in SIDES:
        path = path.replace(f"{side}_device.", "<side>_device.").replace(f"metrics.{side}/", "metrics.<side>/")
        if path == side or path.startswith(side + "."):
            path = "<side>" + path[len(side):]
        if path.endswith("." + side):
            path = path[: -len(side)] + "<side>"
    for keyed in ("cost_s.", "metrics.<side>/kernel/", "case.shape.", "telemetry.", "side_telemetry."):
        if path.startswith(keyed):
            return keyed + "*"
    return path
