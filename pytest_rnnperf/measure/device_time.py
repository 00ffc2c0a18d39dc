"""The device timer: what the GPU did per step, from CUPTI's kernel records, in a traced window of its own.

Wall time of a small RNN step is mostly Python, dispatch and launches, and drifts with the host; the time the
GPU spends running the step's kernels does not. CUPTI's activity API (NVIDIA's ``cupti-python`` bindings)
records the device start and end of every kernel, memset and memcpy, whatever the framework launched it. A
side's device time per step is the union of those intervals over a round of steps, divided by the steps, so
overlapping kernels count once and idle gaps between launches not at all.

Tracing slows launches, so it runs in a window of its own after the wall-clock rounds. Each side is traced on
its own, one untraced warm step first, then its rounds back to back, each round a block of steps between two
device syncs; a record belongs to the round during which it started (CUPTI timestamps taken around each round).
Interleaving the sides, as the wall rounds do, left each round in the cache and clock state the other side
had left: on an H100 a 17 ms cuDNN step then read 17.2 or 18.8 ms by round. The same records give the
launches per step and a kernel table: which kernels a side ran and how long each took per step.

Without cupti-python, or where CUPTI cannot trace (another profiler holds it, a driver without support),
``device_time_problem`` says why and the runner records no device time; nothing else changes.
"""

from __future__ import annotations

import bisect
import math
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_rnnperf.measure.rounds import Sampling, sample
from pytest_rnnperf.model.stopping import Criterion, rounds_budget_noise
from pytest_rnnperf.model.timing import DeviceTiming, KernelStat, Measurement, Round, Step, Sync

NAME = "device"
# Kernels a side's table keeps (by time per step); the rest are summed into one "(N other kernels)" row.
TABLE_ROWS = 12
_BUFFER_BYTES = 8 * 1024 * 1024


def _real_cupti() -> Any:
    """The cupti module of cupti-python (ImportError without it)."""
    from cupti import cupti

    return cupti


_PROBLEM: list[str | None] = []  # the cached answer of device_time_problem()


def device_time_problem() -> str | None:
    """Why CUPTI cannot be used in this process (None when it can); checked once."""
    if not _PROBLEM:
        try:
            _real_cupti().get_timestamp()
            _PROBLEM.append(None)
        except ImportError:
            _PROBLEM.append("cupti-python is not installed (pip install 'pytest-rnnperf[device]')")
        except Exception as exc:  # libcupti missing or too old for the driver, a broken binding
            _PROBLEM.append(f"CUPTI does not load: {type(exc).__name__}: {str(exc).strip()[:120]}")
    return _PROBLEM[0]


# cuDNN's RNN kernels (cuDNN 9): the persistent kernels and the per-timestep cell of its standard algorithm run
# the forward pass; the *_elementWise_bp kernels and the persistent bp kernels the backward pass.
CUDNN_RNN_FORWARD = re.compile(r"^(elemWiseRNNcell|RNN_blockPersist_fp_)")
CUDNN_RNN_BACKWARD = re.compile(r"^(\w*_elementWise_bp\d|RNN_blockPersist_bp_)")
# ATen's fused per-timestep cells: the generic torch loop (a layer that ran cuDNN and then its fallback shows them).
GENERIC_CELLS = re.compile(r"(lstm_cell_forward|lstm_cell_backward|gru_cell_forward|gru_cell_backward)")


def kernel_proof(impl: str, mine: DeviceTiming, other: DeviceTiming, train: bool) -> tuple[bool, str]:
    """Whether ``impl``'s kernels show its path, and what they showed; ``other`` is the opposite side's timing.

    cuDNN: its RNN forward kernels ran (and backward ones when training), no generic cell kernel ran, and it
    launched fewer kernels per step than the generic side, so a layer that calls cuDNN, drops the result and
    runs a per-timestep fallback fails. Generic: no cuDNN RNN kernel ran.
    """
    if impl != "cudnn":
        ok = mine.rnn_forward == 0 and mine.rnn_backward == 0
        return ok, ("kernels: no cuDNN RNN kernel" if ok else
                    f"kernels: cuDNN RNN kernels ran on the generic side ({mine.rnn_forward:g} forward, "
                    f"{mine.rnn_backward:g} backward per step)")
    problems = []
    if mine.rnn_forward == 0:
        problems.append("no cuDNN RNN forward kernel ran")
    if train and mine.rnn_backward == 0:
        problems.append("no cuDNN RNN backward kernel ran")
    if mine.generic_cells > 0:
        problems.append(f"generic cell kernels ran too ({mine.generic_cells:g} per step)")
    if mine.launches_per_step >= other.launches_per_step:
        problems.append(f"{mine.launches_per_step:g} launches per step, no fewer than the generic side's "
                        f"{other.launches_per_step:g}: a per-timestep loop ran beside cuDNN")
    if problems:
        return False, "kernels: " + "; ".join(problems)
    return True, (f"kernels: cuDNN RNN forward {mine.rnn_forward:g}" + (f", backward {mine.rnn_backward:g}" if train else "")
                  + f" per step, no generic cell; {mine.launches_per_step:g} vs {other.launches_per_step:g} launches")


@dataclass(frozen=True)
class KernelChange:
    """A kernel whose time per step grew, shrank, appeared or vanished between two tables."""

    name: str
    before_ms: float | None  # None: it appeared
    after_ms: float | None  # None: it vanished

    def describe(self) -> str:
        """e.g. "RNN_blockPersist_fp_LSTM<...> 0.198 -> 0.231 ms/step (+17%)"."""
        if self.before_ms is None:
            return f"appeared: {self.name} ({self.after_ms:.3f} ms/step)"
        if self.after_ms is None:
            return f"vanished: {self.name} ({self.before_ms:.3f} ms/step)"
        change = self.after_ms / self.before_ms - 1 if self.before_ms > 0 else math.inf
        return f"{self.name} {self.before_ms:.3f} -> {self.after_ms:.3f} ms/step ({change:+.0%})"


def kernel_changes(before: Sequence[KernelStat], after: Sequence[KernelStat], min_share: float = 0.02,
                   min_change: float = 0.05) -> list[KernelChange]:
    """What moved between two kernel tables, largest first: each change worth at least ``min_share`` of the
    step's kernel time, and for a kernel in both tables at least ``min_change`` of its own time."""
    total = max(sum(k.ms_per_step for k in before), sum(k.ms_per_step for k in after), 1e-12)
    old = {k.name: k.ms_per_step for k in before if not k.name.startswith("(")}
    new = {k.name: k.ms_per_step for k in after if not k.name.startswith("(")}
    out = []
    for name in list(old) + [n for n in new if n not in old]:
        a, b = old.get(name), new.get(name)
        delta = (b or 0.0) - (a or 0.0)
        if abs(delta) < min_share * total:
            continue
        if a is not None and b is not None and abs(delta) < min_change * a:
            continue
        out.append(KernelChange(name, a, b))
    return sorted(out, key=lambda c: -abs((c.after_ms or 0.0) - (c.before_ms or 0.0)))


class _Recorder:
    """CUPTI activity tracing: (start, end, name) of every kernel, memset and memcpy while enabled."""

    def __init__(self, cupti: Any) -> None:
        self.records: list[tuple[int, int, str]] = []
        self._cupti = cupti
        self._lock = threading.Lock()
        self._kinds: list[Any] = []

    def _completed(self, activities: Sequence[Any]) -> None:
        """CUPTI hands over a filled buffer (on its own thread, or while flushing)."""
        cupti = self._cupti
        rows = []
        for a in activities:
            if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                rows.append((int(a.start), int(a.end), str(a.name)))
            elif a.kind == cupti.ActivityKind.MEMSET:
                rows.append((int(a.start), int(a.end), "[memset]"))
            elif a.kind == cupti.ActivityKind.MEMCPY:
                kind = cupti.ActivityMemcpyKind(a.copy_kind).name
                rows.append((int(a.start), int(a.end), f"[memcpy {kind}]"))
        with self._lock:
            self.records.extend(rows)

    def __enter__(self) -> _Recorder:
        """Register the buffer callbacks (again: another profiler may have replaced them) and enable tracing."""
        cupti = self._cupti
        cupti.activity_register_callbacks(lambda: (_BUFFER_BYTES, 0), self._completed)
        for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET, cupti.ActivityKind.MEMCPY):
            cupti.activity_enable(kind)
            self._kinds.append(kind)
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Deliver every buffered record, then stop tracing."""
        cupti = self._cupti
        try:
            cupti.activity_flush_all(1)
        finally:
            for kind in self._kinds:
                cupti.activity_disable(kind)
            self._kinds.clear()


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals (overlaps counted once)."""
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start  # type: ignore[operator]
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start  # type: ignore[operator]
    return total


def kernel_table(records: Sequence[tuple[int, int, str]], steps: int, rows: int = TABLE_ROWS) -> tuple[KernelStat, ...]:
    """Per-step time and launches of each kernel name, longest first; the tail folded into one row."""
    by_name: dict[str, list[int]] = {}
    for start, end, name in records:
        stat = by_name.setdefault(name, [0, 0])
        stat[0] += end - start
        stat[1] += 1
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])
    table = [KernelStat(name, ns / steps / 1e6, n / steps) for name, (ns, n) in ranked[:rows]]
    rest = ranked[rows:]
    if rest:
        table.append(KernelStat(f"({len(rest)} other kernels)", sum(v[0] for _, v in rest) / steps / 1e6,
                                sum(v[1] for _, v in rest) / steps))
    return tuple(table)


def _short(demangled: str) -> str:
    """A readable kernel name: no return type, no parameter list, at most 100 characters."""
    text = demangled
    if text.startswith("void "):
        text = text[5:]
    depth = 0
    for i, ch in enumerate(text):  # cut the parameter list: the first '(' outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0 and i > 0:
            text = text[:i]
            break
    return text if len(text) <= 100 else text[:97] + "..."


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled kernel name -> readable name, with cu++filt or c++filt where either is on PATH (else as given)."""
    names = sorted(set(names))
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    out = {n: n for n in names}
    mangled = [n for n in names if n.startswith("_Z")]
    if tool and mangled:
        try:
            done = subprocess.run([tool], input="\n".join(mangled), capture_output=True, text=True, timeout=30)
            lines = done.stdout.splitlines()
            if done.returncode == 0 and len(lines) == len(mangled):
                out.update(dict(zip(mangled, lines)))
        except (OSError, subprocess.SubprocessError):
            pass
    return {n: _short(v) for n, v in out.items()}


def _clean(name: str) -> str:
    """Template arguments that only number things differently still name the same kernel family."""
    return re.sub(r"\s+", " ", name).strip()


@dataclass(frozen=True)
class DeviceTimer:
    """Device time from CUPTI; ``cupti`` (the binding) and ``host_clock`` (ns) are the seams for fakes in tests."""

    cupti: Any = None  # cupti-python's cupti module, imported on first use when None
    host_clock: Callable[[], int] = time.perf_counter_ns
    name: str = NAME

    def problem(self) -> str | None:
        """Why this timer cannot trace here (None when it can)."""
        return None if self.cupti is not None else device_time_problem()

    def _binding(self) -> Any:
        """The cupti module this timer traces with."""
        return self.cupti if self.cupti is not None else _real_cupti()

    def now(self) -> float:
        """The host clock, in seconds."""
        return self.host_clock() / 1e9

    def block(self, step: Step, steps: int, sync: Sync) -> Round:
        """One traced round: ``steps`` steps between two device syncs; CUPTI's clock and the host's read at its ends.

        The records arrive only when CUPTI flushes, so the round's sample is its host time per step: drained at
        both ends, it follows the device time of a GPU-bound step (the noise target is checked on it).
        """
        cupti = self._binding()
        sync()
        start, host_start = cupti.get_timestamp(), self.host_clock()
        for _ in range(steps):
            step()
        sync()
        end, host_end = cupti.get_timestamp(), self.host_clock()
        return Round((host_end - host_start) / 1e9 / steps, span=(start, end), host_ns=host_end - host_start)

    def pair(self, a: Step, b: Step, sync: Sync, rounds: int | tuple[int, int], steps: tuple[int, int],
             names: tuple[str, str] = ("cudnn", "generic"), max_time_s: float = math.inf,
             min_rounds: int = 3, max_noise: float = 0.0, steady_rounds: int = 4) -> tuple[DeviceTiming, DeviceTiming]:
        """Trace ``rounds`` rounds (per side, or one count for both) of ``steps`` steps of each side in turn.

        Both steps must be warm (the wall rounds ran first). Once ``max_time_s`` has passed, each side runs only
        its first ``min_rounds``; a side also stops after ``steady_rounds`` once its rounds' host times are within
        ``max_noise`` (``stats.median_noise``; 0: every round). RuntimeError when CUPTI recorded nothing in a round that ran
        steps (another profiler took the activity buffers, say) or its clock does not track the host's.
        """
        per_side = (rounds, rounds) if isinstance(rounds, int) else rounds
        until = tuple(rounds_budget_noise(n, max_time_s, min_rounds, max_noise, noise_min_rounds=steady_rounds)
                      for n in per_side)
        return self.trace(a, b, sync, steps, (until[0], until[1]), names)

    def trace(self, a: Step, b: Step, sync: Sync, steps: tuple[int, int], until: tuple[Criterion, Criterion],
              names: tuple[str, str] = ("cudnn", "generic")) -> tuple[DeviceTiming, DeviceTiming]:
        """Trace each side in turn, rounds of ``steps`` steps until its criterion stops them (one budget for both)."""
        recorder = _Recorder(self._binding())
        begun = self.now()
        done: list[Sampling] = []
        with recorder:
            for side, step in enumerate((a, b)):
                step()  # warm: the caches and clocks this side leaves, not the other's (its records start too early)
                done.append(sample(self, ((step, steps[side]),), sync, until[side], started=begun))
        # The record timestamps are on CUPTI's clock; the host clock read beside it at every round's ends says
        # what one unit of it is worth, whoever set CUPTI's timestamp source.
        taken = [r for side in done for r in side.rounds[0]]
        host_ns = sum(r.host_ns for r in taken)
        cupti_units = sum(r.span[1] - r.span[0] for r in taken)
        scale = host_ns / cupti_units / 1e9 if cupti_units > 0 else 0.0
        if not 0.05e-9 < scale < 20e-9:
            raise RuntimeError(f"CUPTI's clock does not track the host's ({scale * 1e9:.3g} ns per unit)")
        records = sorted(recorder.records)
        display = demangle(name for _, _, name in records)
        return (_side(names[0], done[0], steps[0], records, display, scale),
                _side(names[1], done[1], steps[1], records, display, scale))


def _side(name: str, done: Sampling, steps: int, records: Sequence[tuple[int, int, str]],
          display: dict[str, str], scale: float) -> DeviceTiming:
    """One side's timing from the records that started inside its rounds (``scale``: seconds per CUPTI unit)."""
    starts = [r[0] for r in records]
    busy: list[float] = []
    kernel_sums: list[float] = []
    mine: list[tuple[int, int, str]] = []
    rounds: list[dict[str, float]] = []  # per round: readable kernel name -> seconds per step
    windows = [r.span for r in done.rounds[0]]
    for start, end in windows:
        chunk = records[bisect.bisect_left(starts, start):bisect.bisect_left(starts, end)]  # [start, end)
        if not chunk:
            raise RuntimeError(f"CUPTI recorded no kernel for the {name} side in a traced round "
                               f"(another profiler may hold CUPTI's activity buffers)")
        busy.append(union_ns((s, e) for s, e, _ in chunk) * scale / steps)
        kernel_sums.append(sum(e - s for s, e, _ in chunk) * scale / steps)
        mine.extend(chunk)
        per_kernel: dict[str, float] = {}
        for s, e, n in chunk:
            key = _clean(display.get(n, n))
            per_kernel[key] = per_kernel.get(key, 0.0) + (e - s) * scale / steps
        rounds.append(per_kernel)
    total_steps = steps * len(windows)
    # Durations in ns for the table, whatever CUPTI's unit.
    named = [(0, round((e - s) * scale * 1e9), _clean(display.get(n, n))) for s, e, n in mine]

    def per_step(pattern: re.Pattern[str], search: bool = False) -> float:
        """Launches per step of the kernels whose readable name matches ``pattern``."""
        test = pattern.search if search else pattern.match
        return sum(1 for _, _, n in named if test(n)) / total_steps

    table = kernel_table(named, total_steps)
    return DeviceTiming(busy=Measurement(name, tuple(busy), steps, timer=NAME, stopped=done.stopped),
                        work=Measurement(name, tuple(kernel_sums), steps, timer=NAME + "-work", stopped=done.stopped),
                        launches_per_step=len(mine) / total_steps,
                        kernels=table, clock_scale=scale * 1e9, kernel_rounds=kernel_rounds(table, rounds),
                        rnn_forward=per_step(CUDNN_RNN_FORWARD), rnn_backward=per_step(CUDNN_RNN_BACKWARD),
                        generic_cells=per_step(GENERIC_CELLS, search=True))


def kernel_rounds(table: Sequence[KernelStat], rounds: Sequence[Mapping[str, float]]) -> dict[str, tuple[float, ...]]:
    """Seconds per step of each kernel of ``table`` in every round (0 where it did not run); the folded row sums the rest.

    Per round rather than one mean, so a kernel's own spread within the process is known when it is judged.
    """
    named = [k.name for k in table if not k.name.startswith("(")]
    out = {name: tuple(r.get(name, 0.0) for r in rounds) for name in named}
    folded = next((k.name for k in table if k.name.startswith("(")), None)
    if folded is not None:
        keep = set(named)
        out[folded] = tuple(sum(v for n, v in r.items() if n not in keep) for r in rounds)
    return out


def steps_for(per_step_s: float, target_s: float = 0.005, cap: int = 200) -> int:
    """Steps per traced round so that a round holds about ``target_s`` of work (at least one step)."""
    if not math.isfinite(per_step_s) or per_step_s <= 0:
        return 1
    return max(1, min(cap, math.ceil(target_s / per_step_s)))
