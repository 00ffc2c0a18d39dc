"""History of stored runs: each case's series over many runs of one GPU model, and where it changed.

``python -m pytest_rnnperf history PATH [PATH...]`` reads stored runs: files, or folders searched recursively
for ``*.json`` (``baselines/``, a folder of nightly ``--benchmark-json`` artifacts, a fleet's collected runs).
It orders them by their pytest-benchmark ``datetime`` (by file name where a run has none) and splits them by
GPU model: runs of different models are never one series. Per model and case it takes one value per run
(``--metric``):

- ``device`` (default): the cuDNN side's device time per step (CUPTI busy time, median of the rounds);
- ``wall``: the cuDNN side's wall time per step (median of the rounds);
- ``speedup``: generic over cuDNN wall time per step (the run's stored estimate).

A run without device time for a case is left out of that case's device series (``--fallback skip``, the
default), or the case's whole series is its wall time (``--fallback wall``): a series never mixes the two,
and no value is made up. The same run stored twice (a recorded baseline and its ``--benchmark-json``) counts
once; in a folder, a JSON file that is not a pytest-rnnperf run (``noise.json``) is skipped with a note.

Change points: ruptures' PELT on the log of the series (a shift is a ratio, whatever the case's scale) with
the least-squares (L2) cost, penalty ``PENALTY * sigma**2 * ln(n)`` for n runs, sigma the series' own noise
(``noise_sigma``). Consecutive change points in one direction are steps, or one drift when a single
flat-ramp-flat line explains their stretch at least as well as the staircase does (each change point and
each of the ramp's two kinks paying one penalty). Shifts smaller than ``--min-shift`` (1%) are not reported.
The smallest step found mid-series is about ``sigma * sqrt(4 * PENALTY * ln(n) / n)``: 1.65 sigma for 30
runs (0.8% at 0.5% noise), about twice that within the last two runs.

Exit status: 0 when no case has a change point toward slower in the ``--metric`` series; 1 when one does (a
longer device or wall time, a lower speedup), even if it came back later: however long ago, or only within
``--since`` (the newest N runs of each GPU model, or the runs started on or after a date), so that a step
accepted once stops failing every later night; 2 on unusable input (a file, an option); 3 on an internal error. Pure: no pytest, no framework; ruptures, rich and matplotlib are imported where used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Mapping, Sequence

from pytest_rnnperf.history.runs import order_runs
from pytest_rnnperf.judge.changepoints import (  # noqa: F401  (re-exported: history's detection lives in judge/)
    DEFAULT_MIN_SHIFT, MIN_RUNS, MIN_SIZE, PENALTY, SIGMA_FLOOR, ChangePoint, Detection, detect, noise_sigma)
from pytest_rnnperf.model.metrics import BUSY, WALL, WALL_SPEEDUP, Metric, metric
from pytest_rnnperf.model.records import CaseRecord, StoredRun

FALLBACKS = ("skip", "wall")


# --metric's series, by the names users pass -> their entries in the metric table.
SERIES: Mapping[str, str] = {"device": BUSY, "wall": WALL, "speedup": WALL_SPEEDUP}
METRICS: Mapping[str, Metric] = {series: metric(tag) for series, tag in SERIES.items()}


def metric_value(record: CaseRecord, metric: str) -> float | None:
    """One run's value of a case (seconds, or a ratio); None where that run did not measure it."""
    if record.cudnn is None:
        return None
    if metric == "device":
        return None if record.cudnn_device is None else record.cudnn_device.busy.median
    if metric == "wall":
        return record.cudnn.median
    if metric == "speedup":
        return record.speedup.estimate if record.speedup is not None else record.generic.median / record.cudnn.median
    raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")


@dataclass(frozen=True)
class CaseSeries:
    """One case's series on one GPU model: which runs, their values, and what ``detect`` found."""

    case_id: str
    metric: str  # the metric the series holds ("wall" where --fallback wall stood in for device time)
    runs: tuple[int, ...]  # index into the model's ordered runs of each value
    values: tuple[float, ...]
    left_out: int  # runs that have the case but not this metric (device time off), left out
    detection: Detection | None  # None with fewer than MIN_RUNS values

    def at(self, cp: ChangePoint) -> int:
        """The model's run where a change point shows: a step's first run at the new level, a drift's last."""
        return self.runs[cp.end]

    def regressing(self, cp: ChangePoint) -> bool:
        """A change toward slower: a longer time, or a lower speedup."""
        return cp.shift < 0 if METRICS[self.metric].higher_is_better else cp.shift > 0

    @property
    def change_points(self) -> tuple[ChangePoint, ...]:
        """The change points found (none where the series was too short)."""
        return self.detection.change_points if self.detection is not None else ()


@dataclass(frozen=True)
class ModelHistory:
    """The ordered runs of one GPU model and each case's series over them."""

    gpu: str
    runs: tuple[StoredRun, ...]
    cases: tuple[CaseSeries, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Window:
    """The runs whose change points toward slower set the exit status: the newest ``runs`` of each GPU model
    (``--since 7``: a week of a nightly), or those started on or after ``day`` (``--since 2026-01-05``)."""

    runs: int | None = None
    day: str = ""  # YYYY-MM-DD

    def __str__(self) -> str:
        """As the count line says it, e.g. "within the newest 7 runs"."""
        return f"within the newest {self.runs} run(s)" if self.runs is not None else f"since {self.day}"

    def holds(self, model: ModelHistory, run: int) -> bool:
        """Run ``run`` of ``model`` lies in the window (an undated run does: a change said beats one missed)."""
        if self.runs is not None:
            return run >= len(model.runs) - self.runs
        started = model.runs[run].datetime[:10]
        return not started or started >= self.day


def parse_since(text: str) -> Window:
    """``--since``: a number of runs (> 0) or a date YYYY-MM-DD; ValueError with the reason otherwise."""
    text = text.strip()
    if text.isdigit() and int(text) > 0:
        return Window(runs=int(text))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return Window(day=date.fromisoformat(text).isoformat())
        except ValueError:
            pass
    raise ValueError(f"{text!r} is neither a number of runs (7: the newest seven) nor a date (2026-01-05)")


@dataclass(frozen=True)
class History:
    """The series of every GPU model and case, for one metric."""

    series: str  # a key of METRICS: the name --metric takes
    min_shift: float
    models: tuple[ModelHistory, ...]
    notes: tuple[str, ...] = ()

    @property
    def metric(self) -> Metric:
        """The metric table's entry of the series."""
        return METRICS[self.series]

    @property
    def regressions(self) -> list[tuple[ModelHistory, CaseSeries, ChangePoint]]:
        """Every change point toward slower."""
        return [(m, c, cp) for m in self.models for c in m.cases for cp in c.change_points if c.regressing(cp)]

    def slower(self, window: Window | None = None) -> list[tuple[ModelHistory, CaseSeries, ChangePoint]]:
        """The change points toward slower that set the exit status: those inside ``window`` (all without one)."""
        return [(m, c, cp) for m, c, cp in self.regressions if window is None or window.holds(m, c.at(cp))]


def _case_series(runs: Sequence[StoredRun], case_id: str, metric: str, fallback: str,
                  min_shift: float) -> CaseSeries | None:
    """One case's series over the ordered runs (None where no run has it with a cuDNN side)."""
    records = [(i, r.records[case_id]) for i, r in enumerate(runs)
               if case_id in r.records and r.records[case_id].cudnn is not None]
    if not records:
        return None
    points = [(i, metric_value(rec, metric)) for i, rec in records]
    used = metric
    if metric == "device" and fallback == "wall" and any(v is None for _, v in points):
        used = "wall"  # the whole series, so that one series never mixes wall and device time
        points = [(i, metric_value(rec, "wall")) for i, rec in records]
    kept = [(i, float(v)) for i, v in points if v is not None and v > 0]
    if not kept:
        return CaseSeries(case_id, used, (), (), len(records), None)
    values = tuple(v for _, v in kept)
    detection = detect(values, min_shift) if len(values) >= MIN_RUNS else None
    return CaseSeries(case_id, used, tuple(i for i, _ in kept), values, len(records) - len(kept), detection)


def analyse(runs: Sequence[StoredRun], metric: str = "device", fallback: str = "skip",
            min_shift: float = DEFAULT_MIN_SHIFT, notes: Sequence[str] = ()) -> History:
    """Each GPU model's runs in order and each case's series and change points."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r} (one of {', '.join(FALLBACKS)})")
    by_model: dict[str, list[StoredRun]] = {}
    for run in runs:
        by_model.setdefault(run.gpu_slug or "unknown-gpu", []).append(run)
    models = []
    for gpu in sorted(by_model):
        ordered, order_note = order_runs(by_model[gpu])
        model_notes = [order_note] if order_note else []
        cases: list[CaseSeries] = []
        unmeasured = no_cudnn = 0
        for case_id in sorted({c for r in ordered for c in r.records}):
            case = _case_series(ordered, case_id, metric, fallback, min_shift)
            if case is None:
                no_cudnn += 1
            elif not case.values:
                unmeasured += 1
            else:
                cases.append(case)
        left_out = [c for c in cases if c.left_out]
        if left_out:
            model_notes.append(f"{len(left_out)} case(s) miss device time in some runs (up to "
                               f"{max(c.left_out for c in left_out)}): those runs are left out of their series "
                               f"(--fallback wall follows such a case in wall time instead)")
        if unmeasured:
            model_notes.append(f"{unmeasured} case(s) have no {metric} value in any run: no series"
                               + (" (--fallback wall follows them in wall time)" if metric == "device" else ""))
        if no_cudnn:
            model_notes.append(f"{no_cudnn} case(s) without a cuDNN side: no series")
        short = sum(c.detection is None for c in cases)
        if short:
            model_notes.append(f"{short} case(s) with fewer than {MIN_RUNS} runs: no change points looked for")
        models.append(ModelHistory(gpu, tuple(ordered), tuple(cases), tuple(model_notes)))
    return History(metric, min_shift, tuple(models), tuple(notes))


def count_line(history: History, window: Window | None = None) -> str:
    """The one count of change points toward slower, in the history's metric and window: the terminal's last
    line, the site's headline, and what the exit status reads."""
    m = history.metric
    cases = sum(len(model.cases) for model in history.models)
    counted = history.slower(window)
    worse = "a lower speedup" if m.higher_is_better else "a longer time"
    where = f"toward slower in the {history.series} series ({worse})" + ("" if window is None else f" {window}")
    if counted:
        hit = sorted({f"{mh.gpu} {c.case_id}" for mh, c, _ in counted})
        line = f"{cases} case(s): {len(counted)} change point(s) {where} in {len(hit)} case(s): {', '.join(hit)}"
    else:
        line = f"{cases} case(s): no change point {where}"
    earlier = len(history.regressions) - len(counted)
    return line + (f"; {earlier} earlier, outside the window (not counted)" if earlier else "")
